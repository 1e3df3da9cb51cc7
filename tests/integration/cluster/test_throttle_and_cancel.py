"""The KIP-73 replication throttle and the cancellation of a started reassignment (KIP-455),
on a 3-broker cluster through real admin clients.

* A reassignment adds a replica of two partitions on broker 2; one is throttled
  (``leader/follower.replication.throttled.replicas`` of its topic, the rates on the brokers),
  the other not. Measured on the new replica's disk: the throttled copy stays below three times
  the rate over a window of several seconds (plus one fetch's overshoot, since a fetch is
  charged after it is answered), while the unthrottled copy completes.
* A reassignment kept in progress by the throttle is cancelled (kafka-python's
  ``alter_partition_reassignments`` with ``None``, and ``logproof reassign --cancel``): the
  controller reverts it to the original replicas and deletes the added replica; a second cancel
  answers NO_REASSIGNMENT_IN_PROGRESS.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from impl.broker.admin import AdminClient
from impl.cli import main as cli_main
from impl.cli.cmd_cluster import Cluster
from impl.controller import EmbeddedZooKeeper

from ._load import every_broker_sees_all, pause, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

BROKERS = 3
#: the throttle: bytes per second on the leaders and the followers
RATE = 100_000
#: what one follower fetch may carry (the node's fetch_max_bytes): charged after it is sent
FETCH_OVERSHOOT = 4 * 1024 * 1024
#: records of 1 kB produced to each partition
RECORDS = 12_000
#: the measuring window (seconds of wall time, at least)
WINDOW = 8.0


@pytest.fixture(scope="module")
def cluster(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Cluster]:
    chroot = f"/throttle_{time.monotonic_ns()}"
    client = KazooClient(hosts=zookeeper.connect_string, timeout=10.0)
    client.start(timeout=10.0)
    client.ensure_path(chroot)
    client.stop()
    client.close()
    running = Cluster(Path(tmp_path_factory.mktemp("throttle")), BROKERS, 1,
                      zookeeper=zookeeper.connect_string + chroot, base_port=None, overrides=[])
    try:
        running.start()
        wait_until(lambda: every_broker_sees_all(running.ports.values(), BROKERS),
                   "every broker to see the cluster", pause)
        yield running
    finally:
        running.stop()


@pytest.fixture
def zk(cluster: Cluster) -> Iterator[KazooClient]:
    assert cluster.zookeeper_connect is not None
    client = KazooClient(hosts=cluster.zookeeper_connect, timeout=10.0)
    client.start(timeout=10.0)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def cli(*argv: str) -> tuple[int, str]:
    """Run a ``logproof`` command in this process: (exit status, standard output)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = cli_main(list(argv))
    return status, out.getvalue()


def _fill(bootstrap: str, *topics: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    value = b"v" * 1000
    for topic in topics:
        for index in range(RECORDS):
            producer.produce(topic, value=value, partition=0)
            if index % 1000 == 999:
                producer.poll(0)
    assert producer.flush(60) == 0


def _replica_bytes(cluster: Cluster, broker_id: int, topic: str) -> int:
    """The size of the partition's segments on the broker's disk (0 when it has none)."""
    total = 0
    for log_dir in cluster.log_dirs(broker_id):
        directory = log_dir / f"{topic}-0"
        if directory.is_dir():
            total += sum(path.stat().st_size for path in directory.glob("*.log"))
    return total


def _throttle(admin: AdminClient, brokers: tuple[int, ...], topic: str, leaders: str,
              followers: str) -> None:
    for broker_id in brokers:
        for key in ("leader.replication.throttled.rate", "follower.replication.throttled.rate"):
            code, message = admin.incremental_alter_configs(4, str(broker_id),
                                                            [(key, 0, str(RATE))])
            assert code == 0, message
    code, message = admin.incremental_alter_configs(2, topic, [
        ("leader.replication.throttled.replicas", 0, leaders),
        ("follower.replication.throttled.replicas", 0, followers)])
    assert code == 0, message


def _rate_applied(admin: AdminClient, broker_id: int) -> bool:
    """Whether the broker's own view of its configs has the follower rate."""
    code, message, entries = admin.describe_configs(
        4, str(broker_id), keys=["follower.replication.throttled.rate"])
    assert code == 0, message
    return [entry.value for entry in entries] == [str(RATE)]


def test_a_throttled_replica_is_copied_at_the_rate_and_another_is_not(cluster: Cluster) -> None:
    bootstrap = cluster.bootstrap_servers
    with AdminClient(bootstrap) as admin:
        created = admin.create_topics([("thr", {0: [1]}), ("free", {0: [1]})])
        assert created["thr"][0] == 0
        assert created["free"][0] == 0
        _fill(bootstrap, "thr", "free")
        total = _replica_bytes(cluster, 1, "thr")
        assert total >= RECORDS * 1000
        _throttle(admin, (1, 2), "thr", "0:1", "0:2")
        # both rates and lists reach brokers 1 and 2 through /config/changes
        wait_until(lambda: all(_rate_applied(admin, b) for b in (1, 2)),
                   "the brokers to apply the throttle", pause)
        started = time.monotonic()
        results = admin.alter_partition_reassignments({("thr", 0): [1, 2], ("free", 0): [1, 2]})
        assert {code for code, _ in results.values()} == {0}
        free_total = _replica_bytes(cluster, 1, "free")
        wait_until(lambda: _replica_bytes(cluster, 2, "free") >= free_total,
                   "the unthrottled replica to be copied", pause, seconds=120)
        while time.monotonic() - started < WINDOW:
            pause()
        copied = _replica_bytes(cluster, 2, "thr")
        elapsed = time.monotonic() - started
        bound = 3 * RATE * elapsed + FETCH_OVERSHOOT
        assert copied <= bound, (
            f"the throttled replica copied {copied} bytes in {elapsed:.1f} s at {RATE} B/s")
        assert copied < total, "the throttled copy is still in progress"
        assert ("thr", 0) in admin.list_partition_reassignments()
        assert ("free", 0) not in admin.list_partition_reassignments()
        # lifting the throttle lets it complete
        for broker_id in (1, 2):
            for key in ("leader.replication.throttled.rate",
                        "follower.replication.throttled.rate"):
                assert admin.incremental_alter_configs(4, str(broker_id), [(key, 1, None)]
                                                       )[0] == 0
        wait_until(lambda: ("thr", 0) not in admin.list_partition_reassignments(),
                   "the reassignment to complete once unthrottled", pause, seconds=120)


def test_cancelling_a_started_reassignment_reverts_it(cluster: Cluster, zk: KazooClient,
                                                      tmp_path: Path) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition

    bootstrap = cluster.bootstrap_servers
    with AdminClient(bootstrap) as admin:
        created = admin.create_topics([("cx", {0: [1, 2]}), ("cy", {0: [2, 1]})])
        assert created["cx"][0] == 0
        assert created["cy"][0] == 0
        _fill(bootstrap, "cx", "cy")
        _throttle(admin, (1, 2, 3), "cx", "0:1,0:2", "0:3")
        _throttle(admin, (1, 2, 3), "cy", "0:1,0:2", "0:3")
        wait_until(lambda: all(_rate_applied(admin, b) for b in (1, 2, 3)),
                   "the brokers to apply the throttle", pause)

    def replicas(topic: str) -> list[int]:
        data, _ = zk.get(f"/brokers/topics/{topic}")
        value = json.loads(data)["partitions"]["0"]
        assert isinstance(value, list)
        return value

    kafka_admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        kafka_admin.alter_partition_reassignments({TopicPartition("cx", 0): [3, 2]})
        wait_until(lambda: replicas("cx") == [3, 2, 1] and _replica_bytes(cluster, 3, "cx") > 0,
                   "the reassignment to start copying to broker 3", pause)
        assert kafka_admin.list_partition_reassignments(), "kept in progress by the throttle"
        results = kafka_admin.alter_partition_reassignments({TopicPartition("cx", 0): None})
        assert list(results.values()) == [None], results
        # Kafka's revert: the original replicas (AR without the adding ones), 3 deleted
        wait_until(lambda: replicas("cx") == [2, 1] and not kafka_admin.
                   list_partition_reassignments(), "the reassignment to be reverted", pause)
        wait_until(lambda: not any((d / "cx-0").exists() for d in cluster.log_dirs(3)),
                   "broker 3 to delete the replica it was given", pause)
        assert not zk.exists("/admin/reassign_partitions")
        again = kafka_admin.alter_partition_reassignments({TopicPartition("cx", 0): None})
        assert [error.__name__ for error in again.values()] == [
            "NoReassignmentInProgressError"]
    finally:
        kafka_admin.close()

    # the same through logproof reassign --cancel
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "cy", "partition": 0, "replicas": [3, 1]}]}))
    status, out = cli("reassign", "--execute", "--bootstrap-server", bootstrap,
                      "--reassignment-json-file", str(plan))
    assert status == 0, out
    wait_until(lambda: replicas("cy") == [3, 1, 2], "the reassignment to start", pause)
    status, out = cli("reassign", "--cancel", "--bootstrap-server", bootstrap,
                      "--reassignment-json-file", str(plan))
    assert status == 0, out
    assert "Cancelled the reassignment of partition cy-0." in out
    assert "Throttle was removed." in out  # as Kafka's tool, unless --preserve-throttles
    config, _ = zk.get("/config/topics/cy")
    assert "throttled.replicas" not in config.decode()
    wait_until(lambda: replicas("cy") == [1, 2], "the reassignment to be reverted", pause)
    with AdminClient(bootstrap) as admin:
        wait_until(lambda: not admin.list_partition_reassignments(), "nothing listed", pause)
