"""The one-broker cluster through the real controller: the broker registers, wins the election,
and topics created with kafka-python's admin or ``logproof topics`` get this broker as leader."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from impl.cli import main as cli_main
from impl.controller import KazooCoordinator
from impl.controller.admin import read_live_brokers

from ._harness import RunningBroker

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture
def cluster(zk_chroot: str, tmp_path: Path) -> Iterator[RunningBroker]:
    running = RunningBroker(zk_chroot, tmp_path, run_controller=True).start()
    try:
        yield running
    finally:
        running.stop()


def test_registration_election_and_topics(cluster: RunningBroker, zk_chroot: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    async def registered() -> dict[int, int]:
        coordinator = await KazooCoordinator.connect(zk_chroot)
        try:
            return {b.broker_id: b.epoch for b in (await read_live_brokers(coordinator)).values()}
        finally:
            await coordinator.close()

    assert cluster.call(registered) == {1: cluster.broker.broker_epoch}
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.create_topics([NewTopic("ct", 2, 1)])
        assert "ct" in admin.list_topics()
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for index in range(40):
        producer.send("ct", value=b"c%d" % index, partition=index % 2)
    producer.flush(timeout=30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=5000)
    consumer.assign([TopicPartition("ct", 1)])
    consumer.seek_to_beginning()
    values = []
    for message in consumer:
        values.append(message.value)
        if len(values) == 20:
            break
    consumer.close()
    assert values == [b"c%d" % index for index in range(1, 40, 2)]


def test_topics_command(cluster: RunningBroker) -> None:
    def run(*arguments: str) -> tuple[int, str]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = cli_main(list(arguments))
        return status, out.getvalue()

    bootstrap = ["--bootstrap-server", cluster.bootstrap]
    assert run("topics", "create", "--topic", "cli", "--partitions", "3", *bootstrap)[0] == 0
    status, out = run("topics", "describe", "--topic", "cli", *bootstrap)
    assert status == 0
    assert "PartitionCount: 3" in out
    assert out.count("Leader: 1") == 3
    assert run("topics", "create", "--topic", "cli", *bootstrap)[0] == 1  # already exists
    assert run("topics", "create", "--topic", "../x", *bootstrap)[0] == 1
    assert "Configs: \n" in out  # none set on the topic

    # kafka-topics.sh's --config, --list and --alter --partitions
    assert run("topics", "create", "--topic", "kept", "--config", "cleanup.policy=compact",
               "--config", "retention.ms=60000", *bootstrap)[0] == 0
    assert run("topics", "list", *bootstrap) == (0, "cli\nkept\n")
    status, out = run("topics", "describe", "--topic", "kept", *bootstrap)
    assert "Configs: cleanup.policy=compact,retention.ms=60000\n" in out, out
    for bad in ("cleanup.policy=nonsense", "retention.ms", "no.such.config=1"):
        assert run("topics", "create", "--topic", "bad", "--config", bad, *bootstrap)[0] == 1
    assert run("topics", "alter", "--topic", "cli", "--partitions", "5", *bootstrap) == (
        0, "Topic cli now has 5 partitions.\n")
    status, out = run("topics", "describe", "--topic", "cli", *bootstrap)
    assert "PartitionCount: 5" in out, out
    assert out.count("Leader: 1") == 5, out
    assert run("topics", "alter", "--topic", "cli", "--partitions", "4", *bootstrap)[0] == 1
    assert run("topics", "alter", "--topic", "none", "--partitions", "4", *bootstrap)[0] == 1
    assert run("topics", "list", *bootstrap) == (0, "cli\nkept\n")  # "bad" never created

    assert run("topics", "delete", "--topic", "cli", *bootstrap)[0] == 0
    assert run("topics", "delete", "--topic", "kept", *bootstrap)[0] == 0
    assert run("topics", "describe", *bootstrap) == (0, "")


def test_create_replica_placement_is_served(cluster: RunningBroker) -> None:
    from impl.controller.placement import CreateReplicaPlacementRequest
    from impl.controller.placement.client import request_replica_placement

    response = request_replica_placement(
        cluster.bootstrap, CreateReplicaPlacementRequest(partition_count=3, replication_factor=1)
    )
    assert response.error_code == 0
    assert response.assignment() == [[1], [1], [1]]
    too_many = request_replica_placement(
        cluster.bootstrap, CreateReplicaPlacementRequest(partition_count=1, replication_factor=2)
    )
    assert too_many.error_code == 38


def test_auto_create_on_metadata(zk_chroot: str, tmp_path: Path) -> None:
    from confluent_kafka import Producer

    from impl.broker.admin import AdminClient

    running = RunningBroker(zk_chroot, tmp_path, run_controller=True,
                            overrides=["auto.create.topics.enable=true", "num.partitions=2"]
                            ).start()
    try:
        producer = Producer({"bootstrap.servers": running.bootstrap, "acks": "all"})
        errors: list[str] = []
        for index in range(10):
            producer.produce("auto", value=b"%d" % index,
                             on_delivery=lambda e, _m: errors.append(str(e)) if e else None)
        assert producer.flush(30) == 0
        assert errors == []
        with AdminClient(running.bootstrap) as admin:
            code, partitions = admin.metadata(["auto"]).topics["auto"]
        assert code == 0
        assert len(partitions) == 2
    finally:
        running.stop()


def test_missing_chroot_is_created(zk_chroot: str, tmp_path: Path) -> None:
    running = RunningBroker(f"{zk_chroot}/fresh/chroot", tmp_path).start()
    try:
        assert running.broker.broker_epoch > 0
    finally:
        running.stop()
