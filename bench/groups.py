"""Consumer groups: rebalance time and OffsetCommit cost against one coordinator.

One broker (``logproof cluster``'s child process) on an embedded ZooKeeper, with
``group.initial.rebalance.delay.ms=0``. A raw-wire client (one socket per member, the broker's own
codec) measures, with no client library in the way:

* **rebalance**: a member of a one-member STABLE group is joined by a second member; the time
  from the second member's first JoinGroup (KIP-394 round trip included) until both members hold
  their SyncGroup answers of the new generation (the first member rejoins when its Heartbeat
  answers REBALANCE_IN_PROGRESS, as clients do), repeated ``--rounds`` times;
* **commit**: ``--commits`` OffsetCommit requests of one partition, one at a time (each waits for
  its acks=all append to ``__consumer_offsets``), latency p50/p99 and commits per second;
* **baseline**: the same number of Produce requests (acks=all, one 100-byte record, replication
  factor 1, one at a time) on the same broker: the produce path's per-request cost;
* **replicated**: on three brokers, ``__consumer_offsets`` and the topic replicated three times
  and led by the group's coordinator, ``--replicated-commits`` OffsetCommits and as many
  acks=all Produces, one at a time: a commit waits for the followers as a produce does, so the
  two should cost the same (a follower's append of the offsets partition left to a task of its
  own once made each commit wait for a delayed fetch's 500 ms).

Prints the figures, the ratio of a commit's cost to a produce's, the broker's CPU seconds per
1,000 commits, and ends with one JSON line.

Run: ``python -m bench.groups [--rounds N] [--commits N] [--replicated-commits N]``.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import struct
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from impl.broker import api_versions
from impl.broker._codec import decode_response, encode_request, load_request_schema
from impl.broker._kio_build import build
from impl.cli.cmd_cluster import Cluster
from impl.storage import record_batch as rb

GROUP = "bench-group"
#: brokers, and replicas of ``__consumer_offsets`` and the topic, of the replicated phase
REPLICAS = 3
TOPIC = "bench-topic"
VERSIONS = {api_versions.FIND_COORDINATOR: 2, api_versions.JOIN_GROUP: 5,
            api_versions.SYNC_GROUP: 3, api_versions.HEARTBEAT: 3,
            api_versions.OFFSET_COMMIT: 7, api_versions.PRODUCE: 7,
            api_versions.CREATE_TOPICS: 3, api_versions.METADATA: 5,
            api_versions.LEAVE_GROUP: 3}


class Wire:
    """One connection speaking the broker's own codec."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=60)
        self.correlation = 0

    def call(self, api_key: int, data: dict[str, Any]) -> Any:
        version = VERSIONS[api_key]
        self.correlation += 1
        body = build(load_request_schema(api_key, version), data)
        self.sock.sendall(encode_request(api_key, version, self.correlation, "bench", body))
        (size,) = struct.unpack(">i", self._exact(4))
        _, response = decode_response(api_key, version, self._exact(size))
        return response

    def _exact(self, count: int) -> bytes:
        chunks = b""
        while len(chunks) < count:
            chunk = self.sock.recv(count - len(chunks))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            chunks += chunk
        return chunks

    def close(self) -> None:
        self.sock.close()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0


class Member:
    """A group member speaking JoinGroup/SyncGroup/Heartbeat directly."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.wire = Wire(address)
        self.member_id = ""
        self.generation = -1

    def join_and_sync(self) -> None:
        while True:
            answer = self.wire.call(api_versions.JOIN_GROUP, {
                "group_id": GROUP, "session_timeout": 30_000, "rebalance_timeout": 30_000,
                "member_id": self.member_id, "group_instance_id": None,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x00"}]})
            code = int(answer.error_code)
            self.member_id = answer.member_id
            if code == 79:  # MEMBER_ID_REQUIRED
                continue
            assert code == 0, f"JoinGroup answered {code}"
            break
        self.generation = int(answer.generation_id)
        assignments = [{"member_id": m.member_id, "assignment": b""} for m in answer.members]
        synced = self.wire.call(api_versions.SYNC_GROUP, {
            "group_id": GROUP, "generation_id": self.generation, "member_id": self.member_id,
            "group_instance_id": None, "assignments": assignments})
        assert int(synced.error_code) == 0, f"SyncGroup answered {int(synced.error_code)}"

    def heartbeat(self) -> int:
        answer = self.wire.call(api_versions.HEARTBEAT, {
            "group_id": GROUP, "generation_id": self.generation, "member_id": self.member_id,
            "group_instance_id": None})
        return int(answer.error_code)

    def leave(self) -> None:
        answer = self.wire.call(api_versions.LEAVE_GROUP, {
            "group_id": GROUP, "members": [{"member_id": self.member_id,
                                            "group_instance_id": None}]})
        assert int(answer.error_code) == 0, f"LeaveGroup answered {int(answer.error_code)}"
        self.wire.close()


def rebalance_seconds(address: tuple[str, int], rounds: int) -> list[float]:
    """Per round: a second member joins a STABLE one-member group until both are synced."""
    times = []
    for _ in range(rounds):
        first = Member(address)
        first.join_and_sync()
        second = Member(address)
        started = time.perf_counter()
        joiner = threading.Thread(target=second.join_and_sync)
        joiner.start()
        while first.heartbeat() != 27:  # REBALANCE_IN_PROGRESS: rejoin
            time.sleep(0.001)
        first.join_and_sync()
        joiner.join()
        times.append(time.perf_counter() - started)
        second.leave()
        first.leave()
    return times


def commit_latencies(wire: Wire, count: int) -> list[float]:
    latencies = []
    for offset in range(count):
        started = time.perf_counter()
        answer = wire.call(api_versions.OFFSET_COMMIT, {
            "group_id": f"{GROUP}-commits", "generation_id_or_member_epoch": -1,
            "member_id": "", "group_instance_id": None,
            "topics": [{"name": TOPIC, "partitions": [{
                "partition_index": 0, "committed_offset": offset,
                "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        latencies.append(time.perf_counter() - started)
        code = int(answer.topics[0].partitions[0].error_code)
        assert code == 0, f"OffsetCommit answered {code}"
    return latencies


def produce_latencies(wire: Wire, count: int) -> list[float]:
    latencies = []
    batch = rb.build_batch([b"x" * 100])
    for _ in range(count):
        started = time.perf_counter()
        answer = wire.call(api_versions.PRODUCE, {
            "transactional_id": None, "acks": -1, "timeout": 30_000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0,
                                                                "records": batch}]}]})
        latencies.append(time.perf_counter() - started)
        code = int(answer.responses[0].partition_responses[0].error_code)
        assert code == 0, f"Produce answered {code}"
    return latencies


def _find_coordinator(wire: Wire, key: str) -> tuple[int, tuple[str, int]]:
    """The broker coordinating group ``key`` (once ``__consumer_offsets`` exists): its id and
    address."""
    deadline = time.monotonic() + 60
    while True:
        answer = wire.call(api_versions.FIND_COORDINATOR, {"key": key, "key_type": 0})
        if int(answer.error_code) == 0:
            return int(answer.node_id), (str(answer.host), int(answer.port))
        assert time.monotonic() < deadline, "no coordinator within 60 s"
        time.sleep(0.2)


def replicated(commits: int) -> dict[str, float]:
    """OffsetCommit and acks=all Produce latency on three brokers with ``__consumer_offsets``
    and the topic replicated three times (both led by the group's coordinator): a commit waits
    for the followers' fetches as a produce does."""
    with tempfile.TemporaryDirectory(prefix="logproof-bench-groups-rf3-") as root:
        cluster = Cluster(Path(root), REPLICAS, 1, zookeeper=None, base_port=None,
                          overrides=["group.initial.rebalance.delay.ms=0",
                                     "offsets.topic.num.partitions=1",
                                     f"offsets.topic.replication.factor={REPLICAS}"])
        bootstrap = cluster.start()
        try:
            host, port = bootstrap.split(",")[0].split(":")
            first = Wire((host, int(port)))
            coordinator, address = _find_coordinator(first, f"{GROUP}-commits")
            first.close()
            wire = Wire(address)
            others = [broker for broker in range(1, REPLICAS + 1) if broker != coordinator]
            created = wire.call(api_versions.CREATE_TOPICS, {
                "topics": [{"name": TOPIC, "num_partitions": -1, "replication_factor": -1,
                            "assignments": [{"partition_index": 0,
                                             "broker_ids": [coordinator, *others]}],
                            "configs": []}],
                "timeout": 30_000, "validate_only": False})
            assert int(created.topics[0].error_code) in (0, 36)
            _until_answered(wire)
            commit_latencies(wire, 50)  # warm-up: the followers fetching, the partition loaded
            produce_latencies(wire, 50)
            commit = commit_latencies(wire, commits)
            produce = produce_latencies(wire, commits)
            wire.close()
        finally:
            cluster.stop()
    return {"replicated_commit_p50_ms": round(statistics.median(commit) * 1000, 3),
            "replicated_commit_p99_ms": round(_quantile(commit, 0.99) * 1000, 3),
            "replicated_produce_p50_ms": round(statistics.median(produce) * 1000, 3),
            "replicated_commit_to_produce_ratio": round(
                statistics.median(commit) / statistics.median(produce), 2)}


def _until_answered(wire: Wire) -> None:
    """Wait until an OffsetCommit of the new topic is accepted (its metadata reached the
    coordinator), within a bound."""
    deadline = time.monotonic() + 60
    while True:
        try:
            commit_latencies(wire, 1)
            return
        except AssertionError:
            assert time.monotonic() < deadline, "the topic never became known within 60 s"
            time.sleep(0.1)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--replicated-commits", type=int, default=300,
                        help="commits (and produces) of the three-broker phase; 0 skips it")
    arguments = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="logproof-bench-groups-") as root:
        cluster = Cluster(Path(root), 1, 1, zookeeper=None, base_port=None,
                          overrides=["group.initial.rebalance.delay.ms=0",
                                     "offsets.topic.num.partitions=1"])
        bootstrap = cluster.start()
        try:
            host, port = bootstrap.split(",")[0].split(":")
            address = (host, int(port))
            pid = cluster.processes[1].pid
            wire = Wire(address)
            created = wire.call(api_versions.CREATE_TOPICS, {
                "topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1,
                            "assignments": [], "configs": []}],
                "timeout": 30_000, "validate_only": False})
            assert int(created.topics[0].error_code) in (0, 36)
            _find_coordinator(wire, GROUP)
            commit_latencies(wire, 50)  # warm-up: the offsets partition loaded
            produce_latencies(wire, 50)
            rebalances = rebalance_seconds(address, arguments.rounds)
            cpu = _cpu_seconds(pid)
            started = time.perf_counter()
            commits = commit_latencies(wire, arguments.commits)
            commit_wall = time.perf_counter() - started
            commit_cpu = _cpu_seconds(pid) - cpu
            produces = produce_latencies(wire, arguments.commits)
            wire.close()
        finally:
            cluster.stop()
    commit_p50 = statistics.median(commits)
    produce_p50 = statistics.median(produces)
    result = {
        "benchmark": "groups",
        "rebalance_p50_ms": round(statistics.median(rebalances) * 1000, 2),
        "rebalance_max_ms": round(max(rebalances) * 1000, 2),
        "commit_p50_ms": round(commit_p50 * 1000, 3),
        "commit_p99_ms": round(_quantile(commits, 0.99) * 1000, 3),
        "commits_per_second": round(arguments.commits / commit_wall, 1),
        "produce_p50_ms": round(produce_p50 * 1000, 3),
        "commit_to_produce_ratio": round(commit_p50 / produce_p50, 2),
        "broker_cpu_seconds_per_1000_commits": round(commit_cpu * 1000 / arguments.commits, 3),
    }
    print(f"rebalance (2nd member joins a STABLE group, both synced): "
          f"p50 {result['rebalance_p50_ms']} ms, max {result['rebalance_max_ms']} ms "
          f"over {arguments.rounds} rounds")
    print(f"OffsetCommit (acks=all, one at a time): p50 {result['commit_p50_ms']} ms, "
          f"p99 {result['commit_p99_ms']} ms, {result['commits_per_second']} commits/s, "
          f"{result['broker_cpu_seconds_per_1000_commits']} broker CPU s per 1000")
    print(f"Produce baseline (acks=all, 1 record): p50 {result['produce_p50_ms']} ms; "
          f"commit/produce ratio {result['commit_to_produce_ratio']}")
    if arguments.replicated_commits > 0:
        result.update(replicated(arguments.replicated_commits))
        print(f"{REPLICAS} brokers, __consumer_offsets and the topic replicated {REPLICAS} "
              f"times: OffsetCommit p50 {result['replicated_commit_p50_ms']} ms, p99 "
              f"{result['replicated_commit_p99_ms']} ms; Produce (acks=all) p50 "
              f"{result['replicated_produce_p50_ms']} ms; commit/produce ratio "
              f"{result['replicated_commit_to_produce_ratio']}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
