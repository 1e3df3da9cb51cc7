"""The group coordinator's broker killed with SIGKILL while two members consume and commit.

Three brokers; ``__consumer_offsets`` has three partitions with replication factor three and
``min.insync.replicas=2``. Two confluent-kafka members of one group consume a six-partition topic
and commit synchronously after every few records; every commit the broker acknowledged is
remembered. The broker leading the group's offsets partition (the coordinator) is killed; the
controller elects another replica once its ZooKeeper session expires, the new leader loads the
partition, and the members find it and carry on. Then:

* no acknowledged commit is lost: the committed offset of every partition, read after the
  failover, is at least the last one acknowledged (OFFSETS_DURABLE);
* no record is skipped: what the members consumed, plus what a new member of the group reads
  from the committed offsets after they close, is every record of the topic.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from impl.broker.group_records import partition_for
from impl.cli.cmd_cluster import Cluster

from ._load import every_broker_sees_all, pause, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

BROKERS = 3
OFFSETS_PARTITIONS = 3
PARTITIONS = 6
RECORDS = 1200
GROUP = "failover"
TOPIC = "consumed"
WAIT_SECONDS = 60.0


@pytest.fixture
def cluster(zk_chroot: str, tmp_path: Path) -> Iterator[Cluster]:
    running = Cluster(tmp_path, BROKERS, 1, zookeeper=zk_chroot, base_port=None, overrides=[
        "min.insync.replicas=2", "zookeeper.session.timeout.ms=4000",
        "group.initial.rebalance.delay.ms=0",
        f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
    ])
    try:
        running.start()
        wait_until(lambda: every_broker_sees_all(running.ports.values(), BROKERS),
                   "every broker to see the others", pause)
        yield running
    finally:
        running.stop()


def _produce(bootstrap: str) -> set[bytes]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    values = {b"%d-%d" % (n % PARTITIONS, n) for n in range(RECORDS)}
    for n in range(RECORDS):
        while True:
            try:
                producer.produce(TOPIC, b"%d-%d" % (n % PARTITIONS, n), partition=n % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    deadline = time.monotonic() + WAIT_SECONDS
    while producer.flush(1.0) and time.monotonic() < deadline:
        pass
    assert producer.flush(0) == 0
    return values


def _coordinator(bootstrap: str) -> int:
    """The broker leading the group's offsets partition."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = admin.list_topics(timeout=10).topics
    partition = topics["__consumer_offsets"].partitions[partition_for(GROUP, OFFSETS_PARTITIONS)]
    leader: int = partition.leader
    return leader


def test_coordinator_failover_loses_no_acknowledged_commit_and_skips_no_record(
        cluster: Cluster) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    bootstrap = cluster.bootstrap_servers
    values = _produce(bootstrap)
    members = [Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000, "max.poll.interval.ms": 60000,
                         "max.partition.fetch.bytes": 512})
               for _ in range(2)]
    consumed: set[bytes] = set()
    acknowledged: dict[int, int] = {}
    pending: list[dict[int, int]] = [{}, {}]
    failures = 0

    def step() -> None:
        nonlocal failures
        for index, member in enumerate(members):
            message = member.poll(0.05)
            if message is None or message.error() is not None:
                continue
            consumed.add(message.value() or b"")
            pending[index][message.partition() or 0] = (message.offset() or 0) + 1
            if len(pending[index]) < 2 and len(consumed) % 5:
                continue
            offsets = [TopicPartition(TOPIC, p, o) for p, o in pending[index].items()]
            try:
                done = member.commit(offsets=offsets, asynchronous=False)
            except KafkaException:
                failures += 1
                continue
            for tp in done or []:
                if tp.error is None:
                    acknowledged[tp.partition] = max(acknowledged.get(tp.partition, 0),
                                                      tp.offset)
            pending[index] = {}

    try:
        for member in members:
            member.subscribe([TOPIC])
        wait_until(lambda: len(consumed) >= RECORDS // 4 and len(acknowledged) >= 2,
                   "both members to consume and commit", step, WAIT_SECONDS)
        victim = _coordinator(bootstrap)
        cluster.processes[victim].send_signal(signal.SIGKILL)
        cluster.processes[victim].wait(timeout=10)
        before = dict(acknowledged)
        wait_until(lambda: _coordinator_moved(cluster, victim) and
                   any(acknowledged.get(p, 0) > before.get(p, 0) for p in range(PARTITIONS)),
                   "a commit acknowledged by the new coordinator", step, WAIT_SECONDS)
        wait_until(lambda: len(consumed) >= RECORDS // 2, "consumption to go on", step,
                   WAIT_SECONDS)
    finally:
        for member in members:
            member.close()
    alive = ",".join(f"127.0.0.1:{port}" for broker, port in cluster.ports.items()
                     if broker != victim)
    committed = _committed(alive)
    for partition, offset in acknowledged.items():
        assert committed.get(partition, -1) >= offset, (partition, committed, acknowledged)
    rest = _read_from_committed(alive)
    assert values - consumed <= rest, sorted(values - consumed - rest)[:10]
    assert consumed | rest == values


def _coordinator_moved(cluster: Cluster, victim: int) -> bool:
    alive = ",".join(f"127.0.0.1:{port}" for broker, port in cluster.ports.items()
                     if broker != victim)
    try:
        leader = _coordinator(alive)
    except Exception:
        return False
    return leader not in (victim, -1)


def _committed(bootstrap: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(
        GROUP, [TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    answer: Any = admin.list_consumer_group_offsets([request])[GROUP].result(timeout=30)
    return {tp.partition: tp.offset for tp in answer.topic_partitions}


def _read_from_committed(bootstrap: str) -> set[bytes]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    rest: set[bytes] = set()
    idle = 0
    deadline = time.monotonic() + WAIT_SECONDS
    try:
        while idle < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                idle += 1 if consumer.assignment() else 0
                continue
            idle = 0
            rest.add(message.value() or b"")
    finally:
        consumer.close()
    return rest

