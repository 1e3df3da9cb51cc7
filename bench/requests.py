"""What a request costs the brokers: small requests over many partitions, CPU per request.

Ordinary applications at moderate rates send many small requests: librdkafka lingers per
partition, so a producer writing a dozen partitions at a few MB/s sends about one partition per
Produce, and every follower fetches once per leader append. Their cost is per request, not per
byte, and it is what saturates a small machine long before its disks or its copies do.

Phases (an embedded ZooKeeper, brokers as child processes, a pipelining raw-wire client so the
client library's cost is not in the figures; ``--partitions`` partitions, each request carries
one partition and one batch of one ``--record-bytes`` record, partitions in rotation):

1. ``produce_acks1``: one broker, Produce v8 with acks=1;
2. ``fetch``: the same broker, Fetch v11 as a consumer reads, one partition and one batch per
   request (served with ``sendfile``);
3. ``produce_acks_all``: three brokers, replication factor 3, leaders on every broker, one
   connection per leader, Produce with acks=all: each request also costs its followers' fetches.

Each phase prints requests per second wall and **broker CPU microseconds per request** (the
brokers' user + system time from ``/proc``, summed over the cluster in phase 3), and the
requests the brokers answered, read from their Prometheus endpoints
(``kafka_network_requestmetrics_requests_total``: in phase 3 the followers' Fetch requests per
Produce). Every response is decoded and checked (error code 0). ``--broker-source DIR`` runs
the brokers from another checkout, to compare two versions in one sitting; ``--profile DIR``
records the brokers with py-spy and prints where their busy time went. The run ends with one
JSON line with the ratios to the figures measured before this benchmark's first round
(:data:`BASELINE`).

Run: ``python -m bench.requests [--requests N] [--partitions P] [--in-flight K]
[--broker-source DIR] [--profile DIR]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import selectors
import socket
import struct
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._broker import cpu_seconds, start_broker
from bench._metrics import scrape_url
from bench._profile import Profile, summary
from impl.controller import EmbeddedZooKeeper, find_free_loopback_port

CLUSTER_SIZE = 3
MB = 1_000_000
#: broker CPU microseconds per request before this benchmark's first round of work (2026-11-28,
#: 08:10-08:27 UTC, load 0.4-1.9, the brokers of 033ab94 via ``--broker-source``, 10,000
#: requests: the lower of two runs)
BASELINE: dict[str, float] = {
    "produce_acks1_cpu_us_per_request": 185.0,
    "fetch_cpu_us_per_request": 131.0,
    "produce_acks_all_cpu_us_per_request": 1692.0,
}


@dataclass
class _Connection:
    """One pipelining connection: frames to send in rotation, responses read as they come."""

    sock: socket.socket
    frames: Sequence[bytes]
    check: Callable[[bytes], None]
    to_send: int
    in_flight: int = 0
    sent: int = 0
    buffer: bytearray = field(default_factory=bytearray)

    def send_next(self) -> None:
        self.sock.sendall(self.frames[self.sent % len(self.frames)])
        self.sent += 1
        self.in_flight += 1

    def complete_responses(self) -> int:
        """Reads what arrived; checks every complete response; returns how many completed."""
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise SystemExit("a broker closed the connection")
        self.buffer += chunk
        completed = 0
        while len(self.buffer) >= 4:
            (size,) = struct.unpack_from(">i", self.buffer)
            if len(self.buffer) < 4 + size:
                break
            self.check(bytes(self.buffer[4:4 + size]))
            del self.buffer[:4 + size]
            completed += 1
        self.in_flight -= completed
        return completed


def _drive(connections: Sequence[_Connection], in_flight: int) -> float:
    """Sends every connection's requests, at most ``in_flight`` unanswered at a time each;
    returns the seconds from the first send to the last response."""
    selector = selectors.DefaultSelector()
    start = time.perf_counter()
    for connection in connections:
        selector.register(connection.sock, selectors.EVENT_READ, connection)
        while connection.sent < connection.to_send and connection.in_flight < in_flight:
            connection.send_next()
    outstanding = sum(connection.to_send for connection in connections)
    deadline = time.monotonic() + 600
    while outstanding:
        if time.monotonic() > deadline:
            raise SystemExit("no response for 600 s")
        for key, _ in selector.select(timeout=60):
            connection = key.data
            outstanding -= connection.complete_responses()
            while connection.sent < connection.to_send and connection.in_flight < in_flight:
                connection.send_next()
    elapsed = time.perf_counter() - start
    selector.close()
    return elapsed


def _connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _produce_frames(topic: str, partitions: Sequence[int], acks: int,
                    record_bytes: int) -> list[bytes]:
    """One Produce v8 frame per partition, one batch of one record each."""
    from impl.broker._codec import encode_request, load_request_schema
    from impl.broker._kio_build import build
    from impl.storage.record_batch import build_batch

    batch = build_batch([b"r" * record_bytes], timestamp_ms=int(time.time() * 1000))
    return [encode_request(0, 8, 1, "bench-requests", build(load_request_schema(0, 8), {
        "transactional_id": None, "acks": acks, "timeout": 30_000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": partition, "records": batch}]}]})) for partition in partitions]


def _check_produce(frame: bytes) -> None:
    from impl.broker._codec import decode_response

    _, response = decode_response(0, 8, frame)
    for topic in response.responses:
        for partition in topic.partition_responses:
            if int(partition.error_code) != 0:
                raise SystemExit(f"Produce to {topic.name}-{partition.index} failed: error "
                                 f"{int(partition.error_code)}")


def _fetch_frames(topic: str, partitions: Sequence[int], record_bytes: int) -> list[bytes]:
    """One Fetch v11 frame per partition: a consumer reading the partition's first batch."""
    from impl.broker._codec import encode_request, load_request_schema
    from impl.broker._kio_build import build

    limit = record_bytes + 256
    return [encode_request(1, 11, 1, "bench-requests", build(load_request_schema(1, 11), {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": limit,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [
            {"partition": partition, "current_leader_epoch": -1, "fetch_offset": 0,
             "log_start_offset": -1, "partition_max_bytes": limit}]}],
        "forgotten_topics_data": [], "rack_id": ""})) for partition in partitions]


def _check_fetch(frame: bytes) -> None:
    from impl.broker._codec import decode_response

    _, response = decode_response(1, 11, frame)
    for topic in response.responses:
        for partition in topic.partitions:
            if int(partition.error_code) != 0 or not partition.records:
                raise SystemExit(f"Fetch of {topic.topic}-{partition.partition} failed: error "
                                 f"{int(partition.error_code)}, "
                                 f"{len(partition.records or b'')} record bytes")


def _properties(root: Path, broker_id: int, port: int, metrics_port: int,
                zookeeper: str) -> str:
    return (f"broker.id={broker_id}\nlisteners=PLAINTEXT://127.0.0.1:{port}\n"
            f"log.dirs={root / 'logs'}\nzookeeper.connect={zookeeper}\n"
            f"metrics.port={metrics_port}\noffsets.topic.replication.factor=1\n"
            "log.cleaner.enable=false\n")


@dataclass
class _Cluster:
    processes: list[Any]
    addresses: dict[int, str]
    metrics: dict[int, str]

    @property
    def bootstrap(self) -> str:
        return ",".join(self.addresses.values())

    def cpu(self) -> float:
        return sum(cpu_seconds(process.pid) for process in self.processes)

    def requests(self) -> dict[str, float]:
        """Requests answered per API, summed over the brokers (from their endpoints)."""
        counts: dict[str, float] = {}
        for url in self.metrics.values():
            for (name, labels), value in scrape_url(url).items():
                if name == "kafka_network_requestmetrics_requests_total":
                    api = dict(labels)["request"]
                    counts[api] = counts.get(api, 0.0) + value
        return counts


@contextlib.contextmanager
def _cluster(root: Path, zookeeper: str, size: int, source: Path | None) -> Iterator[_Cluster]:
    cluster = _Cluster([], {}, {})
    root.mkdir(parents=True)
    try:
        for broker_id in range(1, size + 1):
            directory = root / f"broker-{broker_id}"
            directory.mkdir()
            port, metrics_port = find_free_loopback_port(), find_free_loopback_port()
            cluster.processes.append(start_broker(directory, _properties(
                directory, broker_id, port, metrics_port, zookeeper), source=source))
            cluster.addresses[broker_id] = f"127.0.0.1:{port}"
            cluster.metrics[broker_id] = f"http://127.0.0.1:{metrics_port}/metrics"
        yield cluster
    finally:
        from bench.produce_consume import _stop

        _stop(cluster.processes)


def _leaders(bootstrap: str, topic: str, count: int, factor: int) -> dict[int, list[int]]:
    """Creates ``topic`` and waits for every replica in the ISR; {leader: its partitions}."""
    from bench.produce_consume import _create_replicated_topic
    from impl.broker.admin import AdminClient

    _create_replicated_topic(bootstrap, topic, factor, count)
    with AdminClient(bootstrap) as admin:
        _, partitions = admin.metadata([topic]).topics[topic]
    leaders: dict[int, list[int]] = {}
    for partition in sorted(partitions, key=lambda p: p.partition):
        leaders.setdefault(partition.leader, []).append(partition.partition)
    return leaders


@dataclass
class _Phase:
    key: str
    label: str
    results: dict[str, Any]
    cluster: _Cluster
    profile: Path | None
    _cpu: float = 0.0
    _requests: dict[str, float] = field(default_factory=dict)
    _recordings: list[tuple[Profile, str]] = field(default_factory=list)

    def __enter__(self) -> _Phase:
        if self.profile is not None:
            self.profile.mkdir(parents=True, exist_ok=True)
            for broker_id, process in zip(self.cluster.addresses, self.cluster.processes,
                                          strict=True):
                name = f"{self.key}_broker{broker_id}"
                recording = Profile(process.pid, self.profile / f"{name}.txt")
                recording.__enter__()
                self._recordings.append((recording, name))
        self._requests = self.cluster.requests()
        self._cpu = self.cluster.cpu()
        return self

    def __exit__(self, *exc: object) -> None:
        for recording, name in self._recordings:
            recording.__exit__(None, None, None)
            print(f"  profile of {name} ({recording.path}, share of busy samples, self):")
            for share, function in summary(recording.path, top=15):
                print(f"    {share:5.1f} %  {function}")

    def report(self, requests: int, elapsed: float) -> None:
        cpu = self.cluster.cpu() - self._cpu
        answered = self.cluster.requests()
        per_api = {api: int(count - self._requests.get(api, 0.0))
                   for api, count in sorted(answered.items())
                   if count - self._requests.get(api, 0.0) >= 1}
        per_request = cpu / requests * 1e6
        key = self.key
        self.results[f"{key}_requests_per_s"] = round(requests / elapsed, 1)
        self.results[f"{key}_broker_cpu_s"] = round(cpu, 3)
        self.results[f"{key}_cpu_us_per_request"] = round(per_request, 1)
        self.results[f"{key}_answered"] = per_api
        baseline = BASELINE.get(f"{key}_cpu_us_per_request", 0.0)
        ratio = ""
        if baseline > 0:
            self.results[f"{key}_cpu_us_per_request_x_baseline"] = round(
                per_request / baseline, 2)
            ratio = f" ({per_request / baseline:.2f} x baseline {baseline:.0f})"
        answered_text = ", ".join(f"{api} {count}" for api, count in per_api.items())
        print(f"{self.label}: {requests} requests in {elapsed:.2f} s = "
              f"{requests / elapsed:8.0f} requests/s; broker CPU {cpu:.2f} s = "
              f"{per_request:.0f} us per request{ratio}; brokers answered: {answered_text}")


def run(requests: int, partitions: int, in_flight: int, record_bytes: int, *,
        source: Path | None, profile: Path | None) -> dict[str, Any]:
    """The three phases; returns the results (also printed)."""
    results: dict[str, Any] = {"requests": requests, "partitions": partitions,
                               "in_flight": in_flight, "record_bytes": record_bytes,
                               "broker_source": str(source) if source else "this checkout",
                               "load_average_1m_start": round(os.getloadavg()[0], 2)}
    print(f"{requests} requests per phase over {partitions} partitions, {in_flight} in flight "
          f"per connection, one {record_bytes}-byte record per request; load average "
          f"{results['load_average_1m_start']:.2f} (a shared machine: compare figures within "
          "one run)")
    if source is not None:
        print(f"brokers run from {source}")
    with tempfile.TemporaryDirectory(prefix="logproof-bench-requests-") as temporary, \
            EmbeddedZooKeeper() as zookeeper:
        root = Path(temporary)
        with _cluster(root / "single", zookeeper.connect_string, 1, source) as cluster:
            leaders = _leaders(cluster.bootstrap, "single", partitions, 1)
            (address,) = cluster.addresses.values()
            owned = [p for ps in leaders.values() for p in ps]
            with _Phase("produce_acks1", "1 broker, Produce acks=1", results, cluster,
                        profile) as phase:
                connection = _Connection(_connect(address), _produce_frames(
                    "single", owned, 1, record_bytes), _check_produce, requests)
                elapsed = _drive([connection], in_flight)
                phase.report(requests, elapsed)
            connection.sock.close()
            with _Phase("fetch", "1 broker, consumer Fetch of one batch", results, cluster,
                        profile) as phase:
                connection = _Connection(_connect(address), _fetch_frames(
                    "single", owned, record_bytes), _check_fetch, requests)
                elapsed = _drive([connection], in_flight)
                phase.report(requests, elapsed)
            connection.sock.close()
        with _cluster(root / "cluster", zookeeper.connect_string, CLUSTER_SIZE,
                      source) as cluster:
            leaders = _leaders(cluster.bootstrap, "replicated", partitions, CLUSTER_SIZE)
            connections = []
            share = requests // len(leaders)
            for index, (leader, owned) in enumerate(sorted(leaders.items())):
                count = requests - share * (len(leaders) - 1) if index == 0 else share
                connections.append(_Connection(_connect(cluster.addresses[leader]),
                                               _produce_frames("replicated", owned, -1,
                                                               record_bytes),
                                               _check_produce, count))
            with _Phase("produce_acks_all", f"{CLUSTER_SIZE} brokers, RF {CLUSTER_SIZE}, "
                        "Produce acks=all", results, cluster, profile) as phase:
                elapsed = _drive(connections, in_flight)
                phase.report(requests, elapsed)
            for connection in connections:
                connection.sock.close()
    results["load_average_1m_end"] = round(os.getloadavg()[0], 2)
    results["baseline"] = BASELINE
    return results


def main(argv: list[str] | None = None) -> int:
    """Runs the phases and prints the figures and one JSON line; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--in-flight", type=int, default=5,
                        help="unanswered requests per connection (librdkafka's default)")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--broker-source", type=Path, default=None,
                        help="run the brokers from this checkout (an export of another commit)")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="record every broker with py-spy into DIR and print where its busy "
                             "time went (CPU figures then include py-spy's cost)")
    arguments = parser.parse_args(argv)
    if min(arguments.requests, arguments.partitions, arguments.in_flight,
           arguments.record_bytes) <= 0:
        parser.error("--requests, --partitions, --in-flight and --record-bytes must be positive")
    if arguments.requests < CLUSTER_SIZE:
        parser.error(f"--requests must be at least {CLUSTER_SIZE}")
    if arguments.broker_source is not None and not (
            arguments.broker_source / "impl" / "cli").is_dir():
        parser.error(f"--broker-source {arguments.broker_source}: no impl/cli there")
    results = run(arguments.requests, arguments.partitions, arguments.in_flight,
                  arguments.record_bytes, source=arguments.broker_source,
                  profile=arguments.profile)
    print(json.dumps(results, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
