"""Structure-aware wire fuzzing of a broker process. Invariants, checked throughout:

1. the broker process never dies or aborts (it is a separate process: ``poll()`` stays None);
2. a second client's ApiVersions (a fresh connection) is answered while the fuzzing goes on,
   within ``PROBE_BOUND_SECONDS`` (1 s; the benchmark ``python -m bench.abuse`` measures the
   latency itself);
3. the broker's RSS stays under ``RSS_BOUND_BYTES`` (1 GiB);
4. a partition no request targets (``quiet-0``) keeps byte-identical segment files;
5. no unacknowledged batch is ever readable: every record stored in the targeted topic carries the
   marker of a Produce whose response said NONE (or that the broker decoded with acks=0);
6. no request fails a handler: the broker's log has no ERROR line (the server logs a handler's
   failure, a bug of ours, with its traceback and closes the connection), checked as soon as the
   broker closes a fuzzing connection, so the case is named.

Requests come from kio's schemas for every advertised API and version (``_structured``), Produce
records include lying batches and compressed garbage, and frames are mutated (lengths, counts,
invalid UTF-8, truncation, trailing bytes, lying size prefixes). Seeded by ``FUZZ_SEED``; the
default run has ``CASES_DEFAULT`` cases, the slow-marked run ``CASES_SLOW``; a second slow-marked
run takes seed ``SEED_MANY_PARTITIONS``, which grows a topic to 32,767 partitions early.
"""

from __future__ import annotations

import contextlib
import random
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from impl.broker import api_versions
from impl.broker._codec import (
    MalformedRequestError,
    UnsupportedRequestError,
    decode_request,
    decode_response,
)
from impl.broker.admin import AdminClient, AdminClientError
from impl.storage import record_batch as rb
from impl.storage.records import iter_records

from . import _structured

pytestmark = pytest.mark.integration

FUZZ_SEED = 20261124
CASES_DEFAULT = 2_000
CASES_SLOW = 1_000_000
SEED_MANY_PARTITIONS = 20261129
SEED_MANY_PARTITIONS_CASES = 40_000
CHECK_EVERY = 250
PROBE_BOUND_SECONDS = 1.0
PROBE_INTERVAL_SECONDS = 0.05
RSS_BOUND_BYTES = 1 << 30
CASE_TIMEOUT_SECONDS = 5.0
PROBE_CORRELATION = 2**31 - 1


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class BrokerProcess:
    """``logproof broker`` in its own process, with two log dirs."""

    def __init__(self, zk_connect: str, root: Path) -> None:
        self.port = _free_port()
        self.dirs = [root / "d0", root / "d1"]
        config = root / "broker.properties"
        config.write_text(
            f"broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:{self.port}\n"
            f"log.dirs={','.join(str(d) for d in self.dirs)}\nzookeeper.connect={zk_connect}\n"
            "socket.request.read.timeout.ms=300\nqueued.max.request.bytes=268435456\n"
            "max.connections.per.ip=64\n"
        )
        self.log_path = root / "broker.log"
        self.log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "impl.cli", "broker", "--config", str(config),
             "--log-level", "WARNING"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.process.poll() is None

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def errors(self) -> list[str]:
        """The ERROR lines of the broker's log so far."""
        return [line for line in self.log_path.read_text(errors="replace").splitlines()
                if " ERROR " in line]

    def stop(self) -> None:
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(60)
        self.log.close()


def _api_versions_frame(correlation: int) -> bytes:
    # ApiVersions v0: header v1 (key, version, correlation, client id) and an empty body
    return struct.pack(">ihhih", 10, 18, 0, correlation, 0)


def _probe(bootstrap: str) -> float:
    """Seconds a fresh connection's ApiVersions takes (raises if unanswered)."""
    host, port = bootstrap.rsplit(":", 1)
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=PROBE_BOUND_SECONDS) as sock:
        sock.sendall(_api_versions_frame(1))
        head = _read_exact(sock, 4)
        _read_exact(sock, struct.unpack(">i", head)[0])
    return time.monotonic() - started


class _Prober:
    """The second client of invariant 2: a thread asking ApiVersions on a fresh connection
    every ``PROBE_INTERVAL_SECONDS`` for as long as the fuzzing runs, keeping the slowest answer
    (an unanswered probe counts as infinitely slow)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.slowest = 0.0
        self.probes = 0
        self.failure: str | None = None
        #: what the fuzzer is sending (set by it), and what it was sending at the slowest probe
        self.current = ""
        self.slowest_during = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Prober:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(PROBE_INTERVAL_SECONDS):
            during = self.current
            try:
                took = _probe(self.bootstrap)
                if took > self.slowest:
                    self.slowest, self.slowest_during = took, during
            except (OSError, ConnectionError) as error:
                self.failure = self.failure or (
                    f"ApiVersions probe {self.probes} failed: {error!r} during {during}")
                self.slowest = float("inf")
            self.probes += 1

    def check(self) -> None:
        """Fail unless every probe so far was answered within the bound."""
        assert self.failure is None, self.failure
        assert self.slowest < PROBE_BOUND_SECONDS, (
            f"an ApiVersions probe took {self.slowest:.3f} s (bound {PROBE_BOUND_SECONDS} s) "
            f"during {self.slowest_during}")


def _read_exact(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)


@pytest.fixture
def broker_process(zk_chroot: str, tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(zk_chroot, tmp_path)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert broker.alive(), (tmp_path / "broker.log").read_text()[-3000:]
            with contextlib.suppress(OSError):
                _probe(broker.bootstrap)
                break
            assert time.monotonic() < deadline, "broker did not start"
            time.sleep(0.2)
        yield broker
    finally:
        broker.stop()


def _setup_topics(broker: BrokerProcess) -> None:
    try:
        _create_topics(broker)
    except AdminClientError as error:  # say why: the broker's own account of it
        raise AssertionError(
            f"setting up the topics failed ({error}); broker alive: {broker.alive()}; its log "
            f"ends:\n{broker.log_path.read_text()[-3000:]}") from error


def _create_topics(broker: BrokerProcess) -> None:
    with AdminClient(broker.bootstrap) as admin:
        deadline = time.monotonic() + 60
        wanted = {"fz": 2, "quiet": 1}
        while wanted:  # until the broker has registered and placement can see it
            result = admin.create_topics([(name, count, 1) for name, count in wanted.items()])
            for name, (code, _) in result.items():
                if code in (0, 36):  # created (or created by the previous attempt)
                    del wanted[name]
            assert time.monotonic() < deadline, result
            if wanted:
                time.sleep(0.2)
        while True:
            metadata = admin.metadata(["fz", "quiet"])
            ready = all(
                code == 0 and partitions and all(p.leader >= 0 for p in partitions)
                for code, partitions in metadata.topics.values()
            )
            if ready:
                break
            assert time.monotonic() < deadline, metadata
            time.sleep(0.2)


def _produce_quiet(broker: BrokerProcess) -> None:
    from kio.index import load_request_schema

    from impl.broker._codec import encode_request
    from impl.broker._kio_build import build

    body = build(load_request_schema(0, 8), {
        "transactional_id": None, "acks": -1, "timeout": 5000,
        "topic_data": [{"name": "quiet", "partition_data": [
            {"index": 0, "records": rb.build_batch([b"q%d" % i for i in range(20)])}]}]})
    host, port = broker.bootstrap.rsplit(":", 1)
    deadline = time.monotonic() + 60
    while True:
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(encode_request(0, 8, 5, "setup", body))
            size = struct.unpack(">i", _read_exact(sock, 4))[0]
            _, response = decode_response(0, 8, _read_exact(sock, size))
        if int(response.responses[0].partition_responses[0].error_code) == 0:
            return
        assert time.monotonic() < deadline, response
        time.sleep(0.2)


def _segments(broker: BrokerProcess, topic_dir: str) -> dict[str, bytes]:
    found = {}
    for log_dir in broker.dirs:
        path = log_dir / topic_dir
        if path.is_dir():
            for segment in sorted(path.glob("*.log")):
                found[f"{log_dir.name}/{topic_dir}/{segment.name}"] = segment.read_bytes()
    return found


def _stored_markers(broker: BrokerProcess) -> set[bytes]:
    markers: set[bytes] = set()
    for partition in (0, 1):
        for data in _segments(broker, f"fz-{partition}").values():
            for header in rb.iter_batches(data):
                whole = data[header.position : header.position + header.size_in_bytes]
                for record in iter_records(whole):
                    if record.value is not None:
                        markers.add(record.value.rsplit(b"-", 1)[0])
    return markers


def _acks_zero_markers(frame: bytes) -> set[bytes]:
    """The markers of a frame the broker decodes as a Produce with acks=0 (never answered)."""
    try:
        request = decode_request(frame[4:])
    except (MalformedRequestError, UnsupportedRequestError):
        return set()
    if request.api_key != api_versions.PRODUCE or int(request.body.acks) != 0:
        return set()
    return {b"any"}


class _Session:
    """One fuzzing connection: send a case and an ApiVersions probe, read until the probe."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.sock: socket.socket | None = None
        self.closed_by_broker = 0

    def _connect(self) -> socket.socket:
        host, port = self.bootstrap.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=CASE_TIMEOUT_SECONDS)
        self.sock = sock
        return sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def run(self, frame: bytes, correlation: int) -> bytes | None:
        """The response frame to ``correlation`` (None: no answer, connection closed)."""
        sock = self.sock or self._connect()
        answer = None
        try:
            sock.sendall(frame + _api_versions_frame(PROBE_CORRELATION))
            while True:
                size = struct.unpack(">i", _read_exact(sock, 4))[0]
                body = _read_exact(sock, size)
                got = struct.unpack(">i", body[:4])[0]
                if got == correlation:
                    answer = body
                elif got == PROBE_CORRELATION:
                    return answer
        except (OSError, ConnectionError):
            self.closed_by_broker += 1
            self.close()
            return answer


def _acked_markers(api_key: int, version: int, response: bytes, marker: bytes,
                   codes: Counter[int]) -> set[bytes]:
    _, body = decode_response(api_key, version, response)
    acked: set[bytes] = set()
    for topic in body.responses:
        for partition in topic.partition_responses:
            codes[int(partition.error_code)] += 1
            if int(partition.error_code) == 0:
                acked.add(marker)
    return acked


def _fuzz(broker: BrokerProcess, cases: int, seed: int = FUZZ_SEED) -> None:
    _setup_topics(broker)
    _produce_quiet(broker)
    quiet_before = _segments(broker, "quiet-0")
    assert quiet_before
    rng = random.Random(seed)
    versions = _structured.advertised_versions()
    session = _Session(broker.bootstrap)
    acked: set[bytes] = set()
    acks_zero = False
    codes: Counter[int] = Counter()
    with _Prober(broker.bootstrap) as prober, contextlib.closing(session):
        for case in range(cases):
            api_key, version = rng.choice(versions)
            prober.current = f"case {case} (api key {api_key} v{version})"
            marker = b"fz%08d" % case
            correlation = case % (2**31 - 2)
            frame = _structured.mutate(
                rng, _structured.request(rng, api_key, version, correlation, marker)
            )
            if _acks_zero_markers(frame):
                acks_zero = True
                acked.add(marker)
            closed = session.closed_by_broker
            response = session.run(frame, correlation)
            if session.closed_by_broker != closed or case % CHECK_EVERY == CHECK_EVERY - 1:
                errors = broker.errors()
                assert not errors, (f"case {case} (api key {api_key} v{version}, seed "
                                    f"{seed}) or one before it: {errors[0]}")
            if response is not None and api_key == api_versions.PRODUCE:
                with contextlib.suppress(MalformedRequestError):
                    acked |= _acked_markers(api_key, version, response, marker, codes)
            if case % CHECK_EVERY == CHECK_EVERY - 1 or case == cases - 1:
                assert broker.alive(), f"broker died at case {case} (seed {seed})"
                prober.check()
                assert broker.rss_bytes() < RSS_BOUND_BYTES, broker.rss_bytes()
    prober.check()
    assert broker.alive()
    print(f"fuzz: {cases} cases, seed {seed}, {session.closed_by_broker} connections "
          f"closed by the broker, slowest of {prober.probes} ApiVersions probes "
          f"{prober.slowest:.3f} s ({prober.slowest_during}), "
          f"RSS {broker.rss_bytes() >> 20} MiB, {len(acked)} produces acknowledged"
          f"{' (some with acks=0)' if acks_zero else ''}; produce error codes {dict(codes)}")
    broker.stop()
    assert _segments(broker, "quiet-0") == quiet_before
    stored = _stored_markers(broker)
    unacknowledged = stored - acked
    assert not unacknowledged, sorted(unacknowledged)[:10]


def test_structured_fuzz(broker_process: BrokerProcess) -> None:
    _fuzz(broker_process, CASES_DEFAULT)


@pytest.mark.slow
@pytest.mark.timeout(12 * 3600)  # about 4.5 hours at the default run's 2,000 cases in 33 s
def test_structured_fuzz_long(broker_process: BrokerProcess) -> None:
    _fuzz(broker_process, CASES_SLOW)


@pytest.mark.slow
@pytest.mark.timeout(3600)  # the project's 300 s would stop it a third of the way
def test_structured_fuzz_tens_of_thousands_of_partitions(broker_process: BrokerProcess) -> None:
    """Seed 20261129 grows a topic to 32,767 partitions at case 10,438 and then asks for all of
    them again and again (DescribeLogDirs, ElectLeaders, Metadata): it found a request raising
    inside the broker node, and one after another what held the event loop for a second or
    more (the controller's request encoding and its step, the placement's sums, the ZooKeeper
    multis, DescribeLogDirs' walk, ElectLeaders' answer, the cleaner's pass). About 13 minutes
    on a 2-core machine."""
    _fuzz(broker_process, SEED_MANY_PARTITIONS_CASES, SEED_MANY_PARTITIONS)
