"""A normal client's produce->consume latency while the broker is abused, against a quiet baseline.

One broker process (two log dirs, a real ZooKeeper). A probe client produces one record (acks=all)
and fetches it back, over and over; its latency is measured in each phase:

* ``quiet``: nothing else (the baseline);
* ``idle``: ``--idle`` connections opened and left silent;
* ``slowloris``: ``--slow`` connections each trickling a request one byte at a time;
* ``partial_frames``: 20 connections each announcing a 100 MB request and sending 1 MiB of it;
* ``huge_metadata``: a client sending, back to back, legal Metadata v1 requests naming one topic
  1,000,000 times (4 MB each);
* ``huge_list_offsets``: the same with ListOffsets v1 naming 1,000,000 partitions (12 MB);
* ``huge_alter_log_dirs``: the same with AlterReplicaLogDirs v1 naming 2,000,000 partitions
  (8 MB);
* ``create_delete``: a client creating a 2,000-partition topic and deleting it, in a loop.

Prints p50/p99 per phase, the ratio to the quiet phase's, failed probes and the broker's RSS, and
ends with one JSON line. The machine may be shared: compare the ratios within one run. Run:
``python -m bench.abuse [--seconds 10] [--phases huge_metadata,huge_list_offsets]`` (the quiet
baseline always runs first).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._broker import START_SECONDS, start_broker
from impl.broker._codec import decode_response, encode_request
from impl.broker._kio_build import build
from impl.broker.admin import AdminClient
from impl.controller import EmbeddedZooKeeper, find_free_loopback_port
from impl.storage.record_batch import build_batch

PROBE_TIMEOUT_SECONDS = 30.0
PROBE_TOPIC = "probe"


def _start_broker(root: Path, zookeeper: str) -> tuple[subprocess.Popen[bytes], str]:
    port = find_free_loopback_port()
    dirs = ",".join(str(root / name) for name in ("d0", "d1"))
    process = start_broker(
        root,
        f"broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={dirs}\n"
        f"zookeeper.connect={zookeeper}\n",
    )
    return process, f"127.0.0.1:{port}"


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _connect(bootstrap: str, timeout: float = PROBE_TIMEOUT_SECONDS) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=timeout)


def _read_exact(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(min(count - len(data), 1 << 20))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)


def _call(sock: socket.socket, api_key: int, version: int, correlation: int,
          data: dict[str, Any]) -> Any:
    from kio.index import load_request_schema

    sock.sendall(encode_request(api_key, version, correlation, "bench",
                                build(load_request_schema(api_key, version), data)))
    size = struct.unpack(">i", _read_exact(sock, 4))[0]
    got, response = decode_response(api_key, version, _read_exact(sock, size))
    assert got == correlation
    return response


class Probe:
    """Produce one record (acks=all), fetch it back; one connection."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.sock: socket.socket | None = None
        self.correlation = 0

    def once(self) -> float:
        """Seconds for one produce->consume round (raises on failure)."""
        started = time.monotonic()
        if self.sock is None:
            self.sock = _connect(self.bootstrap)
        self.correlation += 1
        value = b"probe-%d" % self.correlation
        produced = _call(self.sock, 0, 8, self.correlation, {
            "transactional_id": None, "acks": -1, "timeout": 30_000,
            "topic_data": [{"name": PROBE_TOPIC, "partition_data": [
                {"index": 0, "records": build_batch([value], timestamp_ms=1)}]}]})
        partition = produced.responses[0].partition_responses[0]
        if int(partition.error_code) != 0:
            raise RuntimeError(f"produce error {int(partition.error_code)}")
        offset = int(partition.base_offset)
        while True:
            self.correlation += 1
            fetched = _call(self.sock, 1, 11, self.correlation, {
                "replica_id": -1, "max_wait": 500, "min_bytes": 1, "max_bytes": 1 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": PROBE_TOPIC, "partitions": [{
                    "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                    "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                "forgotten_topics_data": [], "rack_id": ""})
            records = fetched.responses[0].partitions[0].records
            if records and value in bytes(records):
                return time.monotonic() - started
            if time.monotonic() - started > PROBE_TIMEOUT_SECONDS:
                raise TimeoutError("record not fetched")

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class Attack:
    """A background abuser: ``start`` opens what it holds, ``run`` loops until stopped."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.stop = threading.Event()
        self.sockets: list[socket.socket] = []
        self.errors = 0

    def start(self) -> None:
        """Open what the attack holds for the whole phase."""

    def run(self) -> None:
        """Work until :attr:`stop` is set."""
        self.stop.wait()

    def close(self) -> None:
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.close()


class Idle(Attack):
    def __init__(self, bootstrap: str, count: int) -> None:
        super().__init__(bootstrap)
        self.count = count

    def start(self) -> None:
        self.sockets = [_connect(self.bootstrap) for _ in range(self.count)]


class Slowloris(Attack):
    def __init__(self, bootstrap: str, count: int) -> None:
        super().__init__(bootstrap)
        self.count = count

    def start(self) -> None:
        self.sockets = [_connect(self.bootstrap) for _ in range(self.count)]
        for sock in self.sockets:
            sock.sendall(b"\x00\x00\x01\x00")  # a 256-byte request ...

    def run(self) -> None:
        while not self.stop.wait(0.5):  # ... one byte every half second
            for index, sock in enumerate(self.sockets):
                try:
                    sock.sendall(b"\x00")
                except OSError:  # closed by the broker's read timeout: come back
                    self.errors += 1
                    with contextlib.suppress(OSError):
                        self.sockets[index] = _connect(self.bootstrap)
                        self.sockets[index].sendall(b"\x00\x00\x01\x00")


class PartialFrames(Attack):
    def start(self) -> None:
        chunk = b"\x00" * (1 << 20)
        for _ in range(20):
            sock = _connect(self.bootstrap)
            sock.sendall(struct.pack(">i", 100 * 1024 * 1024) + chunk)
            self.sockets.append(sock)


class HugeRequest(Attack):
    """Sends one large legal request over and over, each on a new connection."""

    def __init__(self, bootstrap: str, api_key: int, version: int,
                 data: Callable[[], dict[str, Any]]) -> None:
        super().__init__(bootstrap)
        self.api_key, self.version, self.data = api_key, version, data
        self.frame = b""

    def start(self) -> None:
        """Encode the request before the phase's probes start: building a million entries in
        this process, while the probe runs in it, would time this process's GIL and garbage
        collector, not the broker."""
        from kio.index import load_request_schema

        self.frame = encode_request(self.api_key, self.version, 1, "bench", build(
            load_request_schema(self.api_key, self.version), self.data()))
        gc.collect()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                with _connect(self.bootstrap, 120) as sock:
                    sock.sendall(self.frame)
                    size = struct.unpack(">i", _read_exact(sock, 4))[0]
                    _read_exact(sock, size)
            except OSError:
                self.errors += 1


class CreateDelete(Attack):
    def run(self) -> None:
        round_number = 0
        while not self.stop.is_set():
            name = f"abuse-{round_number}"
            round_number += 1
            try:
                with AdminClient(self.bootstrap, timeout_seconds=300) as admin:
                    admin.create_topics([(name, 2000, 1)], timeout_ms=120_000)
                    admin.delete_topics([name], timeout_ms=120_000)
            except Exception:
                self.errors += 1


def _phase(name: str, probe: Probe, attack: Attack | None, seconds: float,
           pid: int) -> dict[str, Any]:
    thread = None
    if attack is not None:
        attack.start()
        thread = threading.Thread(target=attack.run, daemon=True)
        thread.start()
    latencies: list[float] = []
    failed = 0
    peak_rss = _rss_mib(pid)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline or len(latencies) < 5:
        try:
            latencies.append(probe.once())
        except (OSError, RuntimeError, ConnectionError) as error:
            failed += 1
            probe.close()
            print(f"  {name}: probe failed: {error!r}", file=sys.stderr)
            if failed > 50:
                break
        peak_rss = max(peak_rss, _rss_mib(pid))
    if attack is not None:
        attack.stop.set()
        assert thread is not None
        thread.join(300)
        attack.close()
    alive = psutil_alive(pid)
    return {
        "phase": name,
        "probes": len(latencies),
        "failed": failed,
        "p50_ms": round(statistics.median(latencies) * 1000, 2) if latencies else None,
        "p99_ms": round(_percentile(latencies, 0.99) * 1000, 2) if latencies else None,
        "peak_rss_mib": round(peak_rss, 1),
        "attack_errors": attack.errors if attack is not None else 0,
        "broker_alive": alive,
    }


def psutil_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except OSError:
        return False
    return state != "Z"


def main(argv: list[str] | None = None) -> int:
    """Run the phases, print the figures and one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=10.0, help="per phase")
    parser.add_argument("--idle", type=int, default=500)
    parser.add_argument("--slow", type=int, default=200)
    parser.add_argument("--phases", default="",
                        help="comma-separated phases to run after quiet (default: all)")
    arguments = parser.parse_args(argv)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="logproof-bench-abuse-") as temporary, \
            EmbeddedZooKeeper() as zookeeper:
        root = Path(temporary)
        process, bootstrap = _start_broker(root, zookeeper.connect_string)
        try:
            deadline = time.monotonic() + START_SECONDS
            with AdminClient(bootstrap) as admin:
                while admin.create_topics([(PROBE_TOPIC, 1, 1)])[PROBE_TOPIC][0] not in (0, 36):
                    if time.monotonic() > deadline:
                        raise SystemExit("cannot create the probe topic")
                    time.sleep(0.2)
            probe = Probe(bootstrap)
            while True:
                try:
                    probe.once()
                    break
                except (OSError, RuntimeError, ConnectionError):
                    probe.close()
                    if time.monotonic() > deadline:
                        raise SystemExit("the probe topic never became writable") from None
                    time.sleep(0.2)
            attacks: list[tuple[str, Callable[[], Attack | None]]] = [
                ("quiet", lambda: None),
                ("idle", lambda: Idle(bootstrap, arguments.idle)),
                ("slowloris", lambda: Slowloris(bootstrap, arguments.slow)),
                ("partial_frames", lambda: PartialFrames(bootstrap)),
                ("huge_metadata", lambda: HugeRequest(bootstrap, 3, 1, lambda: {
                    "topics": [{"name": PROBE_TOPIC}] * 1_000_000})),
                ("huge_list_offsets", lambda: HugeRequest(bootstrap, 2, 1, lambda: {
                    "replica_id": -1, "topics": [{"name": PROBE_TOPIC, "partitions": [
                        {"partition_index": index, "timestamp": -1}
                        for index in range(1_000_000)]}]})),
                ("huge_alter_log_dirs", lambda: HugeRequest(bootstrap, 34, 1, lambda: {
                    "dirs": [{"path": str(root / "d1"), "topics": [
                        {"name": "absent", "partitions": list(range(2_000_000))}]}]})),
                ("create_delete", lambda: CreateDelete(bootstrap)),
            ]
            chosen = {name for name in arguments.phases.split(",") if name}
            unknown = chosen - {name for name, _ in attacks}
            if unknown:
                raise SystemExit(f"unknown phases: {', '.join(sorted(unknown))}")
            for name, make in attacks:
                if chosen and name != "quiet" and name not in chosen:
                    continue
                result = _phase(name, probe, make(), arguments.seconds, process.pid)
                results.append(result)
            probe.close()
        finally:
            process.terminate()
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
    quiet = results[0]
    print(f"{'phase':<16}{'probes':>7}{'failed':>7}{'p50 ms':>10}{'p99 ms':>10}"
          f"{'p50 ratio':>11}{'p99 ratio':>11}{'RSS MiB':>9}")
    for result in results:
        for key in ("p50", "p99"):
            base, value = quiet[f"{key}_ms"], result[f"{key}_ms"]
            result[f"{key}_ratio"] = round(value / base, 2) if base and value else None
        print(f"{result['phase']:<16}{result['probes']:>7}{result['failed']:>7}"
              f"{result['p50_ms']!s:>10}{result['p99_ms']!s:>10}{result['p50_ratio']!s:>11}"
              f"{result['p99_ratio']!s:>11}{result['peak_rss_mib']:>9}")
    summary = {
        "benchmark": "abuse",
        "seconds_per_phase": arguments.seconds,
        "phases": {result["phase"]: {k: v for k, v in result.items() if k != "phase"}
                   for result in results},
    }
    print(json.dumps(summary, sort_keys=True))
    return 0 if all(result["broker_alive"] for result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
