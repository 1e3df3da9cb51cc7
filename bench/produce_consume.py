"""Produce and consume throughput against one broker with a real client (confluent-kafka).

One broker (a child process, ``logproof broker``) with one log dir, an embedded ZooKeeper, one
topic with one partition. A confluent-kafka producer writes ``--records`` records of
``--record-bytes`` bytes with acks=1, then again with acks=all; a consumer with manual assignment
then reads everything back from offset 0 (Fetch served with ``os.sendfile``). Two more phases
measure the broker alone with a pipelining raw-wire client (1000-record batches, 16 MiB
fetches), so the client library's own cost is visible. Then the SASL_SSL phases: the same broker
has a second listener, SASL_SSL (TLS with a self-signed CA, SCRAM-SHA-512, ACLs checked on every
request: the client's principal holds WRITE and READ on its topic through ACLs, while the
PLAINTEXT listener's anonymous principal is a super user), and confluent-kafka produces with
acks=1 and consumes over it (Fetch falls back from ``os.sendfile`` to reads under TLS). Prints
MB/s and records/s per phase, the ratio to the targets for this 2-core machine (produce
100 MB/s, consume 300 MB/s), MB per broker CPU-second, the SASL_SSL phases as a ratio to their
PLAINTEXT twins, and ends with one JSON line.

``--client native`` measures the broker with a native librdkafka client instead (``lp_perf``,
built from ``bench/native/lp_perf.c``; ``kcat`` when it cannot be built, see
:mod:`bench._native`), in the phases issue 19 sets targets for: one broker, acks=1 produce;
consume of what it wrote from the beginning; three brokers, one partition with replication
factor 3, acks=all produce; the same over 12 partitions led by all three brokers (each Produce
then carries several partitions of its leader: no issue figure, compare versions with
``--broker-source``); and produce latency (p50/p99 from produce() to delivery report) at
a steady 50 MB/s with acks=all on the same cluster (after one unmeasured second at that rate: a
new partition's followers join at their next fetch), measured twice: on the fresh cluster before
the throughput phases, and after them, when the brokers' new page-cache pages are memory the VM
must fault in from its host (docs/performance.md, "The VM's first touch of memory"); and again
over the 12 partitions at 5 MB/s (about one partition per Produce: a request rate, no target);
and once more at 5 MB/s beside a topic of 16 MiB segments taking 40 MB/s (a roll on every
broker about every 0.4 s: what a neighbour's rolls cost a partition, no target).
Every phase prints MB/s wall, MB per broker CPU-second (the brokers' user + system time from
``/proc``, summed over the cluster, and the two apart), its ratio to the figures measured
before the work on the hot path and to the target, and the run ends with one JSON line naming
the client.

The native run first measures what a page-cache write costs the machine (new memory and
recycled memory, :func:`bench._page_cache.calibrate`), and before each throughput phase primes the
page cache (:func:`bench._page_cache.prime`: a file as large as the phase's writes over all
brokers, written and unlinked), so that the phase writes into memory the VM has backed, as a
long-running broker does; ``--no-prime`` turns this off (the figures then include the VM's
first touch of memory: docs/performance.md, "The VM's first touch of memory").

Run: ``python -m bench.produce_consume [--records N] [--record-bytes B]`` or
``python -m bench.produce_consume --client native [--records N] [--latency-seconds S]
[--broker-source DIR] [--profile DIR] [--no-prime]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench._broker import CpuTimes, cpu_seconds, cpu_times, start_broker
from bench._native import LATENCY_LINGER_MS, NativeClient, native_client
from bench._page_cache import calibrate, prime
from bench._profile import Profile, summary
from impl.controller import EmbeddedZooKeeper, find_free_loopback_port

PRODUCE_TARGET_MB_PER_SECOND = 100.0
CONSUME_TARGET_MB_PER_SECOND = 300.0
CONSUME_BATCH_MESSAGES = 1_000
#: the consumer group of the consume phases (the SASL_SSL user is granted READ on it)
CONSUMER_GROUP = "bench"
MB = 1_000_000


SASL_USER = "bench"
SASL_PASSWORD = "bench-secret"


def _start_broker(root: Path, zookeeper: str) -> tuple[subprocess.Popen[bytes], str, str, Path]:
    """The broker with a PLAINTEXT and a SASL_SSL listener; (process, plaintext bootstrap,
    SASL_SSL bootstrap, CA file)."""
    from impl.security.certificates import create_authority, issue

    port = find_free_loopback_port()
    sasl_port = find_free_loopback_port()
    authority = create_authority(root / "tls")
    keystore = issue(authority, root / "tls", "broker-1")
    process = start_broker(
        root,
        f"broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{sasl_port}\n"
        f"log.dirs={root / 'logs'}\n"
        f"zookeeper.connect={zookeeper}\nlog.segment.bytes=1073741824\n"
        f"ssl.keystore.location={keystore}\nssl.truststore.location={authority.path}\n"
        "sasl.enabled.mechanisms=SCRAM-SHA-512\ninter.broker.listener.name=PLAINTEXT\n"
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n"
        "super.users=User:ANONYMOUS\n",
    )
    return process, f"127.0.0.1:{port}", f"127.0.0.1:{sasl_port}", authority.path


def _sasl_user_and_acls(zookeeper: str, bootstrap: str, topic: str) -> None:
    """SCRAM credentials for the bench user: WRITE and READ on ``topic``, READ on its group."""
    from impl.broker.admin import AdminClient
    from impl.cli import main as cli_main
    from impl.security.authorizer import (
        AccessControlEntry,
        AclBinding,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourcePattern,
        ResourceType,
    )

    if cli_main(["users", "--zookeeper", zookeeper, "--entity-name", SASL_USER, "--alter",
                 "--add-config", f"SCRAM-SHA-512=[password={SASL_PASSWORD}]"]) != 0:
        raise SystemExit("cannot store the bench user's credentials")
    bindings = [AclBinding(ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                           AccessControlEntry(f"User:{SASL_USER}", "*", operation,
                                              AclPermissionType.ALLOW))
                for operation in (AclOperation.WRITE, AclOperation.READ)]
    # librdkafka looks up the consumer's group coordinator even for an assign()ed consumer, and
    # FindCoordinator needs DESCRIBE on the group (implied by READ)
    bindings.append(AclBinding(
        ResourcePattern(ResourceType.GROUP, CONSUMER_GROUP, PatternType.LITERAL),
        AccessControlEntry(f"User:{SASL_USER}", "*", AclOperation.READ, AclPermissionType.ALLOW)))
    with AdminClient(bootstrap) as admin:
        if any(code for code, _ in admin.create_acls(bindings)):
            raise SystemExit("cannot create the bench user's ACLs")


def _sasl_settings(ca: Path) -> dict[str, Any]:
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": SASL_USER, "sasl.password": SASL_PASSWORD,
            "ssl.ca.location": str(ca)}


def _create_topic(bootstrap: str, topic: str) -> None:
    from impl.broker.admin import AdminClient

    with AdminClient(bootstrap) as admin:
        code, message = admin.create_topics([(topic, 1, 1)], timeout_ms=30_000)[topic]
    if code != 0:
        raise SystemExit(f"cannot create {topic}: {code} {message}")


def _produce(bootstrap: str, topic: str, acks: str, records: int, value: bytes, *,
             settings: dict[str, Any] | None = None) -> float:
    from confluent_kafka import Producer

    producer = Producer({
        **(settings or {}),
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "queue.buffering.max.messages": 1_000_000,
        "compression.type": "none",
    })
    failures = 0

    def delivered(error: object, _message: object) -> None:
        nonlocal failures
        if error is not None:
            failures += 1

    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=0, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    if remaining or failures:
        raise SystemExit(f"produce acks={acks}: {remaining} unflushed, {failures} failed")
    return elapsed


def _consume(bootstrap: str, topic: str, expected: int, *,
             settings: dict[str, Any] | None = None) -> tuple[float, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({
        **(settings or {}),
        "bootstrap.servers": bootstrap,
        "group.id": CONSUMER_GROUP,
        "enable.auto.commit": False,
        "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": 16_777_216,
        "fetch.wait.max.ms": 100,
        "queued.max.messages.kbytes": 1_048_576,
    })
    consumer.assign([TopicPartition(topic, 0, 0)])
    received = 0
    received_bytes = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 300
    while received < expected and time.monotonic() < deadline:
        # consume() returns once num_messages are queued (or at the timeout): a large batch makes
        # the application wait for librdkafka's fetcher and the fetcher for the application, so
        # the batch is kept small (measured: 100,000 per call gave 195 MB/s, 1,000 over 400).
        batch = consumer.consume(num_messages=CONSUME_BATCH_MESSAGES, timeout=1.0)
        errors = [message.error() for message in batch if message.error() is not None]
        if errors:
            raise SystemExit(f"consume: {errors[0]}")
        received += len(batch)
        received_bytes += sum(map(len, batch))  # the values' lengths, without copying them
    elapsed = time.perf_counter() - start
    consumer.close()
    if received != expected:
        raise SystemExit(f"consumed {received} of {expected} records")
    return elapsed, received_bytes


class _RawClient:
    """A pipelining wire client: isolates the broker's cost from a client library's."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=60)

    def receive_exactly(self, count: int) -> bytes:
        data = bytearray(count)
        view = memoryview(data)
        while view:
            received = self.sock.recv_into(view)
            if received == 0:
                raise SystemExit("broker closed the connection")
            view = view[received:]
        return bytes(data)

    def response(self) -> bytes:
        (size,) = struct.unpack(">i", self.receive_exactly(4))
        return self.receive_exactly(size)


def _raw_produce(bootstrap: str, topic: str, requests: int, value: bytes) -> float:
    """Pipelined Produce v8 (acks=1) of 1000-record batches; returns seconds."""
    from impl.broker._codec import encode_request, load_request_schema
    from impl.broker._kio_build import build
    from impl.storage.record_batch import build_batch

    batch = build_batch([value] * 1000, timestamp_ms=int(time.time() * 1000))
    frame = encode_request(0, 8, 1, "bench", build(load_request_schema(0, 8), {
        "transactional_id": None, "acks": 1, "timeout": 30_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}))
    client = _RawClient(bootstrap)
    in_flight = 0
    start = time.perf_counter()
    for _ in range(requests):
        client.sock.sendall(frame)
        in_flight += 1
        if in_flight == 5:
            client.response()
            in_flight -= 1
    for _ in range(in_flight):
        client.response()
    elapsed = time.perf_counter() - start
    client.sock.close()
    return elapsed


def _raw_fetch(bootstrap: str, topic: str, end_offset: int) -> tuple[float, int]:
    """Fetch v11 from offset 0 to ``end_offset`` in 16 MiB responses; (seconds, bytes)."""
    from impl.broker._codec import decode_response, encode_request, load_request_schema
    from impl.broker._kio_build import build

    client = _RawClient(bootstrap)
    offset = 0
    total = 0
    start = time.perf_counter()
    while offset < end_offset:
        request = build(load_request_schema(1, 11), {
            "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 16 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                 "log_start_offset": -1, "partition_max_bytes": 16 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        client.sock.sendall(encode_request(1, 11, 1, "bench", request))
        _, response = decode_response(1, 11, client.response())
        records = response.responses[0].partitions[0].records or b""
        total += len(records)
        position = 0
        while position + 61 <= len(records):
            base, length = struct.unpack_from(">qi", records, position)
            if position + 12 + length > len(records):
                break
            last_delta = struct.unpack_from(">i", records, position + 23)[0]
            offset = base + last_delta + 1
            position += 12 + length
    elapsed = time.perf_counter() - start
    client.sock.close()
    return elapsed, total


def _sasl_phases(pid: int, zookeeper: str, bootstraps: tuple[str, str], ca: Path, *,
                 records: int, value: bytes, results: dict[str, Any]) -> None:
    """Produce (acks=1) and consume over SASL_SSL; figures and ratios to PLAINTEXT."""
    bootstrap, sasl_bootstrap = bootstraps
    _create_topic(bootstrap, "secure")
    _sasl_user_and_acls(zookeeper, bootstrap, "secure")
    settings = _sasl_settings(ca)
    payload_mb = records * len(value) / MB
    cpu = cpu_seconds(pid)
    elapsed = _produce(sasl_bootstrap, "secure", "1", records, value, settings=settings)
    cpu = cpu_seconds(pid) - cpu
    rate = payload_mb / elapsed
    results["sasl_ssl_produce_acks_1_mb_per_s"] = round(rate, 1)
    results["sasl_ssl_produce_broker_cpu_s"] = round(cpu, 2)
    results["sasl_ssl_produce_mb_per_cpu_s"] = round(payload_mb / max(cpu, 1e-9), 1)
    plain_rate = results["produce_acks_1_mb_per_s"]
    plain_per_cpu = payload_mb / max(results["produce_acks_1_broker_cpu_s"], 1e-9)
    results["sasl_ssl_produce_ratio_to_plaintext"] = round(rate / plain_rate, 2)
    results["sasl_ssl_produce_cpu_efficiency_ratio_to_plaintext"] = round(
        payload_mb / max(cpu, 1e-9) / plain_per_cpu, 2)
    print(f"SASL_SSL produce: {rate:8.1f} MB/s {records / elapsed:10.0f} records/s "
          f"({rate / plain_rate:.2f} x PLAINTEXT acks=1); broker CPU {cpu:.2f} s = "
          f"{payload_mb / max(cpu, 1e-9):.0f} MB per CPU-second "
          f"({payload_mb / max(cpu, 1e-9) / plain_per_cpu:.2f} x PLAINTEXT)")
    cpu = cpu_seconds(pid)
    elapsed, received_bytes = _consume(sasl_bootstrap, "secure", records, settings=settings)
    cpu = cpu_seconds(pid) - cpu
    consume_mb = received_bytes / MB
    rate = consume_mb / elapsed
    plain_rate = results["consume_mb_per_s"]
    # the PLAINTEXT consume phase read both produce phases' records (2 x records)
    plain_per_cpu = 2 * payload_mb / max(results["consume_broker_cpu_s"], 1e-9)
    results["sasl_ssl_consume_mb_per_s"] = round(rate, 1)
    results["sasl_ssl_consume_broker_cpu_s"] = round(cpu, 2)
    results["sasl_ssl_consume_mb_per_cpu_s"] = round(consume_mb / max(cpu, 1e-9), 1)
    results["sasl_ssl_consume_ratio_to_plaintext"] = round(rate / plain_rate, 2)
    results["sasl_ssl_consume_cpu_efficiency_ratio_to_plaintext"] = round(
        consume_mb / max(cpu, 1e-9) / plain_per_cpu, 2)
    print(f"SASL_SSL consume: {rate:8.1f} MB/s {records / elapsed:10.0f} records/s "
          f"({rate / plain_rate:.2f} x PLAINTEXT); broker CPU {cpu:.2f} s = "
          f"{consume_mb / max(cpu, 1e-9):.0f} MB per CPU-second "
          f"({consume_mb / max(cpu, 1e-9) / plain_per_cpu:.2f} x PLAINTEXT, which uses sendfile)")

#: Figures measured before the work on the broker's hot path (an idle machine of this kind,
#: native librdkafka clients), and the targets set for it: MB/s wall unless named otherwise.
BASELINE = {
    "acks_1_mb_per_s": 545.0,  # 527-562
    "acks_1_mb_per_broker_cpu_s": 729.0,
    "rf3_acks_all_mb_per_s": 183.0,
    "rf3_acks_all_mb_per_broker_cpu_s": 207.0,
    "consume_mb_per_s": 1840.0,  # 1740-1940
}
TARGET = {
    "acks_1_mb_per_broker_cpu_s": 1500.0,
    "rf3_acks_all_mb_per_s": 400.0,
    "consume_mb_per_s": 3000.0,
    "latency_p99_ms": 10.0,
}
LATENCY_RATE_MB_PER_S = 50.0
#: seconds of the latency phase's unmeasured warm-up at the same rate
LATENCY_WARM_UP_S = 1.0
CLUSTER_SIZE = 3
#: partitions of the wide RF 3 phase: four led by each of the three brokers
WIDE_PARTITIONS = 12
#: the paced rate of the latency phase over the 12 partitions
WIDE_LATENCY_RATE_MB_PER_S = 5.0
#: bytes of the page-cache calibration's write (and again of its rewrite): about 3 s
CALIBRATION_BYTES = 1 << 30
#: the rolls phase: a topic of small segments taking a steady rate, beside the measured one
ROLLING_SEGMENT_BYTES = 16 << 20
ROLLING_RATE_MB_PER_S = 40.0
BESIDE_ROLLS_RATE_MB_PER_S = 5.0


def _broker_properties(root: Path, broker_id: int, port: int, zookeeper: str) -> str:
    return (f"broker.id={broker_id}\nlisteners=PLAINTEXT://127.0.0.1:{port}\n"
            f"log.dirs={root / 'logs'}\nzookeeper.connect={zookeeper}\n"
            "log.segment.bytes=1073741824\noffsets.topic.replication.factor=1\n"
            "log.cleaner.enable=false\n")


def _start_cluster(root: Path, zookeeper: str, size: int, source: Path | None = None,
                   ) -> tuple[list[subprocess.Popen[bytes]], str]:
    """``size`` brokers (ids 1..size), each in ``root/broker-<id>``; (processes, bootstrap)."""
    processes: list[subprocess.Popen[bytes]] = []
    ports = []
    try:
        for broker_id in range(1, size + 1):
            directory = root / f"broker-{broker_id}"
            directory.mkdir()
            port = find_free_loopback_port()
            ports.append(port)
            processes.append(start_broker(directory, _broker_properties(
                directory, broker_id, port, zookeeper), source=source))
    except BaseException:
        _stop(processes)
        raise
    return processes, ",".join(f"127.0.0.1:{port}" for port in ports)


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _create_replicated_topic(bootstrap: str, topic: str, factor: int, count: int = 1) -> int:
    """``count`` partitions on ``factor`` brokers each, once every replica is in the ISR
    (brokers register with a delay after they report serving, so a refusal is retried for
    60 s); the leader of partition 0."""
    from impl.broker.admin import AdminClient

    deadline = time.monotonic() + 60
    with AdminClient(bootstrap) as admin:
        while True:
            code, message = admin.create_topics([(topic, count, factor)],
                                                timeout_ms=30_000)[topic]
            if code == 0:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"cannot create {topic}: {code} {message}")
            time.sleep(0.5)
        while True:
            _, partitions = admin.metadata([topic]).topics.get(topic, (0, ()))
            if len(partitions) == count and all(
                    partition.leader >= 0 and len(partition.isr) == factor
                    for partition in partitions):
                return next(p.leader for p in partitions if p.partition == 0)
            if time.monotonic() > deadline:
                raise SystemExit(f"{topic} has no full ISR after 60 s")
            time.sleep(0.2)


def _cluster_cpu(processes: list[subprocess.Popen[bytes]]) -> CpuTimes:
    total = CpuTimes(0.0, 0.0)
    for process in processes:
        total += cpu_times(process.pid)
    return total


def _record_cpu(results: dict[str, Any], key: str, cpu: CpuTimes) -> str:
    """Record a phase's broker CPU (total, user, system) under ``key``; the printed form."""
    results[key + "_broker_cpu_s"] = round(cpu.total_s, 2)
    results[key + "_broker_user_s"] = round(cpu.user_s, 2)
    results[key + "_broker_sys_s"] = round(cpu.system_s, 2)
    return f"{cpu.total_s:.2f} s (user {cpu.user_s:.2f}, sys {cpu.system_s:.2f})"


def _prime(root: Path, results: dict[str, Any], key: str, phase_bytes: int, *,
           enabled: bool) -> None:
    """Prime the page cache for phase ``key`` writing ``phase_bytes`` over all its brokers
    (nothing unless ``enabled``); record and print what the priming cost."""
    if not enabled:
        return
    priming = prime(root, phase_bytes)
    results[key + "_primed_mb"] = round(priming.written_bytes / MB)
    results[key + "_prime_sys_s"] = round(priming.system_s, 2)
    print(f"  (page cache primed: {priming.written_bytes / MB:.0f} MB written and unlinked in "
          f"{priming.elapsed_s:.2f} s, {priming.system_s:.2f} s system CPU)")


def _report(results: dict[str, Any], key: str, label: str, *, megabytes: float,
            elapsed: float, cpu: CpuTimes) -> None:
    """Print one throughput phase and record it: MB/s, MB per broker CPU-second (the brokers'
    user and system CPU apart too), ratios."""
    rate = megabytes / elapsed
    per_cpu = megabytes / max(cpu.total_s, 1e-9)
    results[key + "_mb_per_s"] = round(rate, 1)
    cpu_text = _record_cpu(results, key, cpu)
    results[key + "_mb_per_broker_cpu_s"] = round(per_cpu, 1)
    ratios = []
    for figure, value in (("mb_per_s", rate), ("mb_per_broker_cpu_s", per_cpu)):
        name = f"{key}_{figure}"
        if name in BASELINE:
            results[name + "_x_baseline"] = round(value / BASELINE[name], 2)
            ratios.append(f"{figure}: {value / BASELINE[name]:.2f} x baseline")
        if name in TARGET:
            results[name + "_x_target"] = round(value / TARGET[name], 2)
            ratios.append(f"{figure}: {value / TARGET[name]:.2f} x target")
    print(f"{label}: {rate:8.1f} MB/s; broker CPU {cpu_text} = {per_cpu:.0f} MB per broker "
          f"CPU-second ({'; '.join(ratios)})")


def _profiled(pid: int, profile: Path | None, name: str) -> contextlib.AbstractContextManager[Any]:
    """A py-spy recording of ``pid`` into ``profile/name.txt`` (nothing without ``profile``)."""
    if profile is None:
        return contextlib.nullcontext()
    profile.mkdir(parents=True, exist_ok=True)
    return Profile(pid, profile / f"{name}.txt")


def _print_profile(profile: Path | None, name: str, what: str) -> None:
    if profile is None:
        return
    print(f"  profile of {what} ({profile / (name + '.txt')}, share of busy samples, self):")
    for share, function in summary(profile / f"{name}.txt"):
        print(f"    {share:5.1f} %  {function}")


def _native_single(root: Path, zookeeper: str, client: NativeClient, *, records: int,
                   record_bytes: int, results: dict[str, Any], prime_page_cache: bool,
                   source: Path | None = None, profile: Path | None = None) -> None:
    """One broker: acks=1 produce, then consume it all from the beginning."""
    directory = root / "single"
    directory.mkdir()
    port = find_free_loopback_port()
    process = start_broker(directory, _broker_properties(directory, 1, port, zookeeper),
                           source=source)
    bootstrap = f"127.0.0.1:{port}"
    megabytes = records * record_bytes / MB
    try:
        _create_topic(bootstrap, "acks1")
        with _profiled(process.pid, profile, "acks_1"):
            _prime(root, results, "acks_1", records * record_bytes, enabled=prime_page_cache)
            cpu = cpu_times(process.pid)
            produced = client.produce(bootstrap, "acks1", records, record_bytes, "1")
            cpu = cpu_times(process.pid) - cpu
        _report(results, "acks_1", "1 broker, acks=1 produce ", megabytes=megabytes,
                elapsed=produced.elapsed_s, cpu=cpu)
        _print_profile(profile, "acks_1", "the broker")
        cpu = cpu_times(process.pid)
        consumed = client.consume(bootstrap, "acks1", records, record_bytes)
        cpu = cpu_times(process.pid) - cpu
        if consumed.value_bytes != records * record_bytes:
            raise SystemExit(f"consumed {consumed.value_bytes} of {records * record_bytes} bytes")
        _report(results, "consume", "1 broker, consume        ",
                megabytes=consumed.value_bytes / MB, elapsed=consumed.elapsed_s, cpu=cpu)
        if consumed.start_s is not None:
            results["consume_start_s"] = round(consumed.start_s, 3)
            print(f"  (from the first record to the last; {consumed.start_s * 1000:.0f} ms "
                  "before the first record: connection, metadata, first fetch)")
    finally:
        _stop([process])


def _latency_phase(client: NativeClient, bootstrap: str,
                   processes: list[subprocess.Popen[bytes]], topic: str, key: str, *,
                   where: str, record_bytes: int, latency_seconds: float,
                   results: dict[str, Any]) -> None:
    """acks=all at a steady 50 MB/s into a new topic: the records' latency percentiles and the
    cluster's CPU, under ``{key}_*`` in ``results``."""
    _create_replicated_topic(bootstrap, topic, CLUSTER_SIZE)
    # Warm-up, not measured: a new partition's followers start fetching it only when their
    # fetch in flight returns (up to replica.fetch.wait.max.ms, 500 ms, as in Kafka), and
    # the producer learns its leader first; steady state is what the phase measures.
    warm_up = max(int(LATENCY_RATE_MB_PER_S * MB * LATENCY_WARM_UP_S / record_bytes), 1)
    steady = max(int(LATENCY_RATE_MB_PER_S * MB * latency_seconds / record_bytes), 1)
    # not primed: priming made the phase's tail worse, not better (p99 56-248 ms primed
    # right before the phase, 100-130 ms before its warm-up, 14 ms not primed; the priming's
    # gigabytes freed and reported back to the host while the phase runs, it seems), and
    # what it measures is waiting, not CPU
    client.produce(bootstrap, topic, warm_up, record_bytes, "all",
                   rate_mb_s=LATENCY_RATE_MB_PER_S, latency=True)
    cpu = _cluster_cpu(processes)
    produced = client.produce(bootstrap, topic, steady, record_bytes, "all",
                              rate_mb_s=LATENCY_RATE_MB_PER_S, latency=True)
    cpu = _cluster_cpu(processes) - cpu
    steady_mb = steady * record_bytes / MB
    p50, p99 = produced.latency_us["p50"] / 1000, produced.latency_us["p99"] / 1000
    results[f"{key}_rate_mb_per_s"] = round(steady_mb / produced.elapsed_s, 1)
    results[f"{key}_p50_ms"] = round(p50, 2)
    results[f"{key}_p99_ms"] = round(p99, 2)
    results[f"{key}_p999_ms"] = round(produced.latency_us["p999"] / 1000, 2)
    results[f"{key}_max_ms"] = round(produced.latency_us["max"] / 1000, 2)
    results[f"{key}_mb_per_broker_cpu_s"] = round(steady_mb / max(cpu.total_s, 1e-9), 1)
    cpu_text = _record_cpu(results, key, cpu)
    results[f"{key}_p99_ms_x_target"] = round(p99 / TARGET["latency_p99_ms"], 2)
    results[f"{key}_linger_ms"] = LATENCY_LINGER_MS
    print(f"acks=all latency at {steady_mb / produced.elapsed_s:.1f} MB/s{where} (linger.ms "
          f"{LATENCY_LINGER_MS}, included): p50 {p50:.2f} ms, "
          f"p99 {p99:.2f} ms ({p99 / TARGET['latency_p99_ms']:.2f} x the 10 ms target), "
          f"p99.9 {results[f'{key}_p999_ms']:.2f} ms, max {results[f'{key}_max_ms']:.2f} "
          f"ms; broker CPU {cpu_text} = {steady_mb / max(cpu.total_s, 1e-9):.0f} MB per "
          "broker CPU-second")


def _native_cluster(root: Path, zookeeper: str, client: NativeClient, *, records: int,
                    record_bytes: int, latency_seconds: float, results: dict[str, Any],
                    prime_page_cache: bool, source: Path | None = None,
                    profile: Path | None = None) -> None:
    """Three brokers, replication factor 3: acks=all throughput, then latency at 50 MB/s."""
    processes, bootstrap = _start_cluster(root, zookeeper, CLUSTER_SIZE, source)
    megabytes = records * record_bytes / MB
    # every byte a phase produces is written into the page cache once per replica
    cluster_bytes = records * record_bytes * CLUSTER_SIZE
    try:
        if client.measures_latency:
            # the same latency phase first, on a cluster that has written nothing yet: after
            # the throughput phases the brokers' new page-cache pages are memory the VM must
            # fault in from its host (docs/performance.md, "The VM's first touch of memory")
            _latency_phase(client, bootstrap, processes, "latency_fresh", "fresh_latency",
                           where=" on the fresh cluster (before the throughput phases)",
                           record_bytes=record_bytes, latency_seconds=latency_seconds,
                           results=results)
        leader = _create_replicated_topic(bootstrap, "rf3", CLUSTER_SIZE)
        follower = next(broker for broker in range(1, CLUSTER_SIZE + 1) if broker != leader)
        with _profiled(processes[leader - 1].pid, profile, "rf3_leader"), \
                _profiled(processes[follower - 1].pid, profile, "rf3_follower"):
            _prime(root, results, "rf3_acks_all", cluster_bytes, enabled=prime_page_cache)
            cpu = _cluster_cpu(processes)
            produced = client.produce(bootstrap, "rf3", records, record_bytes, "all")
            cpu = _cluster_cpu(processes) - cpu
        _report(results, "rf3_acks_all", "3 brokers, RF 3, acks=all", megabytes=megabytes,
                elapsed=produced.elapsed_s, cpu=cpu)
        _print_profile(profile, "rf3_leader", f"the leader (broker {leader})")
        _print_profile(profile, "rf3_follower", f"a follower (broker {follower})")
        # the same over WIDE_PARTITIONS partitions (leaders on every broker): each Produce
        # carries several partitions of its leader, answered when all of them are replicated
        _create_replicated_topic(bootstrap, "rf3wide", CLUSTER_SIZE, WIDE_PARTITIONS)
        _prime(root, results, "rf3_wide_acks_all", cluster_bytes, enabled=prime_page_cache)
        cpu = _cluster_cpu(processes)
        produced = client.produce(bootstrap, "rf3wide", records, record_bytes, "all",
                                  partitions=WIDE_PARTITIONS)
        cpu = _cluster_cpu(processes) - cpu
        _report(results, "rf3_wide_acks_all",
                f"3 brokers, RF 3, acks=all, {WIDE_PARTITIONS} partitions",
                megabytes=megabytes, elapsed=produced.elapsed_s, cpu=cpu)
        if not client.measures_latency:
            print(f"latency at {LATENCY_RATE_MB_PER_S:.0f} MB/s: skipped ({client.name} cannot "
                  "measure it)")
            return
        _latency_phase(client, bootstrap, processes, "latency", "latency", where="",
                       record_bytes=record_bytes, latency_seconds=latency_seconds,
                       results=results)
        # the same over the 12 partitions at a tenth of the rate: librdkafka's per-partition
        # linger then sends about one partition per Produce, so the requests (and the
        # followers' fetches) scale with the partitions; what the phase shows is the cost of a
        # request, not of a byte (no target)
        warm_up = max(int(WIDE_LATENCY_RATE_MB_PER_S * MB * LATENCY_WARM_UP_S / record_bytes), 1)
        steady = max(int(WIDE_LATENCY_RATE_MB_PER_S * MB * latency_seconds / record_bytes), 1)
        client.produce(bootstrap, "rf3wide", warm_up, record_bytes, "all",
                       rate_mb_s=WIDE_LATENCY_RATE_MB_PER_S, latency=True,
                       partitions=WIDE_PARTITIONS)
        cpu = _cluster_cpu(processes)
        produced = client.produce(bootstrap, "rf3wide", steady, record_bytes, "all",
                                  rate_mb_s=WIDE_LATENCY_RATE_MB_PER_S, latency=True,
                                  partitions=WIDE_PARTITIONS)
        cpu = _cluster_cpu(processes) - cpu
        steady_mb = steady * record_bytes / MB
        latency = {key: value / 1000 for key, value in produced.latency_us.items()}
        for key in ("p50", "p99", "max"):
            results[f"wide_latency_{key}_ms"] = round(latency[key], 2)
        results["wide_latency_rate_mb_per_s"] = round(steady_mb / produced.elapsed_s, 1)
        cpu_text = _record_cpu(results, "wide_latency", cpu)
        print(f"acks=all latency over {WIDE_PARTITIONS} partitions at "
              f"{steady_mb / produced.elapsed_s:.1f} MB/s: p50 {latency['p50']:.2f} ms, "
              f"p99 {latency['p99']:.2f} ms, max {latency['max']:.2f} ms; broker CPU "
              f"{cpu_text} in {produced.elapsed_s:.1f} s")
        _beside_rolls_phase(client, bootstrap, processes, record_bytes=record_bytes,
                            latency_seconds=latency_seconds, results=results)
    finally:
        _stop(processes)


def _beside_rolls_phase(client: NativeClient, bootstrap: str,
                        processes: list[subprocess.Popen[bytes]], *, record_bytes: int,
                        latency_seconds: float, results: dict[str, Any]) -> None:
    """acks=all latency of a partition at 5 MB/s while another topic, its segments 16 MiB,
    takes 40 MB/s: every broker rolls one of its segments about every 0.4 s. A roll fsyncs the
    segment it closes (before the new one takes a byte); where the broker waits for that fsync
    is what the phase shows: the partition beside it should not. ``beside_rolls_*``."""
    from impl.broker.admin import AdminClient

    _create_replicated_topic(bootstrap, "rolling", CLUSTER_SIZE)
    with AdminClient(bootstrap) as admin:
        code, message = admin.incremental_alter_configs(
            2, "rolling", [("segment.bytes", 0, str(ROLLING_SEGMENT_BYTES))])
    if code != 0:
        raise SystemExit(f"cannot set segment.bytes of rolling: {code} {message}")
    _create_replicated_topic(bootstrap, "beside", CLUSTER_SIZE)
    warm_up = max(int(BESIDE_ROLLS_RATE_MB_PER_S * MB * LATENCY_WARM_UP_S / record_bytes), 1)
    steady = max(int(BESIDE_ROLLS_RATE_MB_PER_S * MB * latency_seconds / record_bytes), 1)
    client.produce(bootstrap, "beside", warm_up, record_bytes, "all",
                   rate_mb_s=BESIDE_ROLLS_RATE_MB_PER_S, latency=True)
    # the rolling producer runs a second longer on either side of the measured one
    rolling = int(ROLLING_RATE_MB_PER_S * MB * (latency_seconds + 2) / record_bytes)
    failure: list[BaseException] = []

    def produce_rolling() -> None:
        try:
            client.produce(bootstrap, "rolling", rolling, record_bytes, "all",
                           rate_mb_s=ROLLING_RATE_MB_PER_S)
        except BaseException as error:  # reported on the phase's thread
            failure.append(error)

    producer = threading.Thread(target=produce_rolling, name="rolling producer")
    producer.start()
    try:
        deadline = time.monotonic() + 1.0  # a second of rolling traffic before measuring
        while time.monotonic() < deadline and producer.is_alive():
            producer.join(timeout=deadline - time.monotonic())
        produced = client.produce(bootstrap, "beside", steady, record_bytes, "all",
                                  rate_mb_s=BESIDE_ROLLS_RATE_MB_PER_S, latency=True)
    finally:
        producer.join()
    if failure:
        raise failure[0]
    latency = {key: value / 1000 for key, value in produced.latency_us.items()}
    for key in ("p50", "p99", "p999", "max"):
        results[f"beside_rolls_{key}_ms"] = round(latency[key], 2)
    steady_mb = steady * record_bytes / MB
    results["beside_rolls_rate_mb_per_s"] = round(steady_mb / produced.elapsed_s, 1)
    rolls = rolling * record_bytes // ROLLING_SEGMENT_BYTES
    results["beside_rolls_segments_rolled_per_broker"] = rolls
    print(f"acks=all latency at {steady_mb / produced.elapsed_s:.1f} MB/s beside a topic of "
          f"{ROLLING_SEGMENT_BYTES >> 20} MiB segments at {ROLLING_RATE_MB_PER_S:.0f} MB/s "
          f"(about {rolls} rolls per broker): p50 {latency['p50']:.2f} ms, "
          f"p99 {latency['p99']:.2f} ms, p99.9 {latency['p999']:.2f} ms, "
          f"max {latency['max']:.2f} ms")


def native_main(records: int, record_bytes: int, latency_seconds: float, prefer: str, *,
                source: Path | None = None, profile: Path | None = None,
                prime_page_cache: bool = True) -> int:
    """The native-client phases; prints the figures and one JSON line."""
    results: dict[str, Any] = {"records": records, "record_bytes": record_bytes,
                               "broker_source": str(source) if source else "this checkout",
                               "page_cache_primed": prime_page_cache}
    with tempfile.TemporaryDirectory(prefix="logproof-bench-") as temporary, \
            EmbeddedZooKeeper() as zookeeper:
        root = Path(temporary)
        client = native_client(root, prefer)
        load = os.getloadavg()[0]
        print(f"native client: {client.name}; {records} records of {record_bytes} bytes; "
              f"load average {load:.2f} (a shared machine: compare figures within one run)")
        if source is not None:
            print(f"brokers run from {source}")
        cost = calibrate(root, CALIBRATION_BYTES)
        results["page_cache_calibration_mib"] = cost.written_bytes >> 20
        results["page_cache_new_memory_sys_s_per_gib"] = round(cost.new_s_per_gib, 2)
        results["page_cache_recycled_sys_s_per_gib"] = round(cost.recycled_s_per_gib, 2)
        results["page_cache_fresh_write_sys_s_per_gib"] = round(cost.fresh_s_per_gib, 2)
        results["page_cache_rewrite_sys_s_per_gib"] = round(cost.rewrite_s_per_gib, 2)
        print(cost.line())
        print("page cache primed before each throughput phase (a file as large as the phase's "
              "writes over all brokers, written and unlinked): the phases write into memory the "
              "VM backs, as a long-running broker's do" if prime_page_cache else
              "page cache not primed (--no-prime): the write phases' system CPU includes the "
              "VM's first touch of the memory they write into")
        _native_single(root, zookeeper.connect_string, client, records=records,
                       record_bytes=record_bytes, results=results,
                       prime_page_cache=prime_page_cache, source=source, profile=profile)
        _native_cluster(root, zookeeper.connect_string, client, records=records,
                        record_bytes=record_bytes, latency_seconds=latency_seconds,
                        results=results, prime_page_cache=prime_page_cache, source=source,
                        profile=profile)
        results["client"] = client.name
        results["load_average_1m_start"] = round(load, 2)
        results["load_average_1m_end"] = round(os.getloadavg()[0], 2)
    results["baseline"] = BASELINE
    results["target"] = TARGET
    print(json.dumps(results, sort_keys=True))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the three phases and print figures; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--client", choices=("confluent", "native", "kcat"), default="confluent",
                        help="native: lp_perf (librdkafka in C), kcat if it cannot be built; "
                             "kcat: kcat even when lp_perf could be built")
    parser.add_argument("--latency-seconds", type=float, default=10.0,
                        help="native mode: length of the 50 MB/s latency phase")
    parser.add_argument("--broker-source", type=Path, default=None,
                        help="native mode: run the brokers from this checkout (e.g. a git "
                             "worktree of an older commit), to compare versions within one run")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="native mode: record the acks=1 broker, the RF 3 leader and a "
                             "follower with py-spy into DIR and print where their busy time "
                             "went (CPU figures "
                             "then include py-spy's cost to the broker)")
    parser.add_argument("--no-prime", dest="prime", action="store_false",
                        help="native mode: do not prime the page cache before the throughput "
                             "phases (their system CPU then includes the VM's first touch of "
                             "memory; see docs/performance.md)")
    arguments = parser.parse_args(argv)
    if arguments.records <= 0 or arguments.record_bytes <= 1 or arguments.latency_seconds <= 0:
        parser.error("--records, --record-bytes (> 1) and --latency-seconds must be positive")
    if arguments.client != "confluent":
        if arguments.broker_source is not None and not (
                arguments.broker_source / "impl" / "cli").is_dir():
            parser.error(f"--broker-source {arguments.broker_source}: no impl/cli there")
        return native_main(arguments.records, arguments.record_bytes, arguments.latency_seconds,
                           "kcat" if arguments.client == "kcat" else "lp_perf",
                           source=arguments.broker_source, profile=arguments.profile,
                           prime_page_cache=arguments.prime)
    value = os.urandom(arguments.record_bytes)
    records = arguments.records
    payload_mb = records * arguments.record_bytes / MB
    results: dict[str, Any] = {"records": records, "record_bytes": arguments.record_bytes}
    with tempfile.TemporaryDirectory(prefix="logproof-bench-") as temporary, \
            EmbeddedZooKeeper() as zookeeper:
        root = Path(temporary)
        process, bootstrap, sasl_bootstrap, ca = _start_broker(root, zookeeper.connect_string)
        try:
            _create_topic(bootstrap, "bench")
            for acks in ("1", "all"):
                cpu = cpu_seconds(process.pid)
                elapsed = _produce(bootstrap, "bench", acks, records, value)
                cpu = cpu_seconds(process.pid) - cpu
                key = "produce_acks_" + acks
                results[key + "_mb_per_s"] = round(payload_mb / elapsed, 1)
                results[key + "_records_per_s"] = round(records / elapsed)
                results[key + "_broker_cpu_s"] = round(cpu, 2)
                print(f"produce acks={acks:>3}: {payload_mb / elapsed:8.1f} MB/s "
                      f"{records / elapsed:10.0f} records/s "
                      f"({payload_mb / elapsed / PRODUCE_TARGET_MB_PER_SECOND:.2f} x target); "
                      f"broker CPU {cpu:.2f} s = {payload_mb / max(cpu, 1e-9):.0f} MB per "
                      "CPU-second")
            cpu = cpu_seconds(process.pid)
            elapsed, received_bytes = _consume(bootstrap, "bench", 2 * records)
            cpu = cpu_seconds(process.pid) - cpu
            results["consume_broker_cpu_s"] = round(cpu, 2)
            consume_mb = received_bytes / MB
            results["consume_mb_per_s"] = round(consume_mb / elapsed, 1)
            results["consume_records_per_s"] = round(2 * records / elapsed)
            print(f"consume         : {consume_mb / elapsed:8.1f} MB/s "
                  f"{2 * records / elapsed:10.0f} records/s "
                  f"({consume_mb / elapsed / CONSUME_TARGET_MB_PER_SECOND:.2f} x target); "
                  f"broker CPU {cpu:.2f} s = {consume_mb / max(cpu, 1e-9):.0f} MB per CPU-second")
            # the broker alone: a pipelining raw-wire client instead of a client library
            _create_topic(bootstrap, "raw")
            raw_requests = max(records // 1000, 1)
            cpu = cpu_seconds(process.pid)
            elapsed = _raw_produce(bootstrap, "raw", raw_requests, value)
            cpu = cpu_seconds(process.pid) - cpu
            raw_mb = raw_requests * 1000 * arguments.record_bytes / MB
            results["raw_produce_mb_per_s"] = round(raw_mb / elapsed, 1)
            results["raw_produce_broker_cpu_s"] = round(cpu, 2)
            print(f"raw produce     : {raw_mb / elapsed:8.1f} MB/s (pipelined wire client); "
                  f"broker CPU {cpu:.2f} s = {raw_mb / max(cpu, 1e-9):.0f} MB per CPU-second")
            cpu = cpu_seconds(process.pid)
            elapsed, fetched = _raw_fetch(bootstrap, "raw", raw_requests * 1000)
            cpu = cpu_seconds(process.pid) - cpu
            results["raw_fetch_mb_per_s"] = round(fetched / MB / elapsed, 1)
            results["raw_fetch_broker_cpu_s"] = round(cpu, 2)
            print(f"raw fetch       : {fetched / MB / elapsed:8.1f} MB/s (sendfile, wire client); "
                  f"broker CPU {cpu:.2f} s = {fetched / MB / max(cpu, 1e-9):.0f} MB per "
                  "CPU-second")
            _sasl_phases(process.pid, zookeeper.connect_string, (bootstrap, sasl_bootstrap), ca,
                         records=records, value=value, results=results)
            results["load_average_1m"] = round(os.getloadavg()[0], 2)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    results["produce_target_mb_per_s"] = PRODUCE_TARGET_MB_PER_SECOND
    results["consume_target_mb_per_s"] = CONSUME_TARGET_MB_PER_SECOND
    print(json.dumps(results, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
