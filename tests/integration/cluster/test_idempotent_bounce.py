"""An idempotent producer keeps working across a leader -> follower -> leader bounce.

Three brokers run as child processes; a topic's one partition is assigned to the two brokers
that are not the controller (A preferred, then B), ``min.insync.replicas=1``. confluent-kafka
produces with ``enable.idempotence=True`` and ``acks=all`` throughout:

1. A leads; records are acknowledged.
2. A is paused (SIGSTOP) until its ZooKeeper session expires: B is elected and takes the next
   sequences of the same producer.
3. A is resumed, becomes B's follower (it truncates and copies B's records) and rejoins the
   ISR. Its process never restarted.
4. B is paused: A leads again. Its producer state must know the sequences B took — Kafka
   rebuilds the producer state from the log on every change of role; a cache kept from A's
   first leadership refuses the next batch with OUT_OF_ORDER_SEQUENCE_NUMBER.

At the end every record is acknowledged without an error and read back exactly once, in order.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from impl.cli.cmd_cluster import Cluster

from ._load import pause, wait_until

#: slow: two session expiries and re-elections on three broker processes; on a loaded machine
#: an election can take longer than the default run's budget
pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "bounced"
BROKERS = 3
WAIT_SECONDS = 60.0
SESSION_TIMEOUT_MS = 4000
PER_PHASE = 150


@pytest.fixture
def cluster(zk_chroot: str, tmp_path: Path) -> Iterator[Cluster]:
    running = Cluster(tmp_path, BROKERS, 1, zookeeper=zk_chroot, base_port=None, overrides=[
        "min.insync.replicas=1", f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
        "replica.lag.time.max.ms=10000",
    ])
    try:
        running.start()
        yield running
    finally:
        for process in running.processes.values():
            if process.poll() is None:
                os.kill(process.pid, signal.SIGCONT)
        running.stop()


def test_idempotent_producer_across_leader_follower_leader(cluster: Cluster,
                                                           zk: KazooClient) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    def controller() -> int:
        try:
            data, _ = zk.get("/controller")
        except Exception:
            return -1
        return int(json.loads(data)["brokerid"])

    wait_until(lambda: controller() in cluster.processes, "a controller", pause)
    steady = controller()
    first, second = sorted(b for b in cluster.processes if b != steady)
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.ports[steady]}"})

    def all_registered() -> bool:
        try:
            return len(admin.list_topics(timeout=5).brokers) == BROKERS
        except KafkaException:
            return False

    wait_until(all_registered, "the controller's broker to see all brokers", pause)
    futures = admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[first, second]])],
                                  operation_timeout=10)
    futures[TOPIC].result(WAIT_SECONDS)

    def partition() -> Any:
        try:
            metadata = admin.list_topics(TOPIC, timeout=5)
        except KafkaException:
            return None
        return metadata.topics[TOPIC].partitions.get(0)

    def leader() -> int:
        found = partition()
        return -1 if found is None or found.error is not None else int(found.leader)

    def isr() -> list[int]:
        found = partition()
        return [] if found is None else list(found.isrs)

    wait_until(lambda: leader() == first and len(isr()) == 2, "the topic's ISR", pause)

    acknowledged: list[bytes] = []
    errors: list[str] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            errors.append(str(error))
        else:
            acknowledged.append(message.value())

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "delivery.timeout.ms": 90_000, "retry.backoff.ms": 100,
                         "topic.metadata.refresh.interval.ms": 500,
                         # a paused broker answers nothing: give up on it soon
                         "socket.timeout.ms": 3000})
    sent = 0

    def produce_some() -> None:
        nonlocal sent
        for _ in range(10):
            producer.produce(TOPIC, value=b"record-%06d" % sent, partition=0,
                             on_delivery=delivered)
            sent += 1
        producer.poll(0.05)

    def more_acks(what: str) -> None:
        target = len(acknowledged) + PER_PHASE
        wait_until(lambda: len(acknowledged) >= target or bool(errors), what, produce_some,
                   seconds=WAIT_SECONDS)
        assert errors == [], errors

    try:
        more_acks(f"acks from broker {first}")
        assert producer.flush(WAIT_SECONDS) == 0  # nothing in flight to the paused broker
        os.kill(cluster.processes[first].pid, signal.SIGSTOP)
        wait_until(lambda: leader() == second, f"broker {second} elected", pause,
                   seconds=WAIT_SECONDS)
        more_acks(f"acks from broker {second}")
        os.kill(cluster.processes[first].pid, signal.SIGCONT)
        wait_until(lambda: first in isr(), f"broker {first} back in the ISR", pause,
                   seconds=WAIT_SECONDS)
        assert producer.flush(WAIT_SECONDS) == 0
        os.kill(cluster.processes[second].pid, signal.SIGSTOP)
        wait_until(lambda: leader() == first, f"broker {first} elected again", pause,
                   seconds=WAIT_SECONDS)
        more_acks(f"acks from broker {first} leading again")
        os.kill(cluster.processes[second].pid, signal.SIGCONT)
        assert producer.flush(WAIT_SECONDS) == 0
    finally:
        producer.flush(0)
    assert errors == []
    assert len(acknowledged) == sent

    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{cluster.ports[steady]}",
                         "group.id": "unused", "enable.auto.commit": False,
                         "enable.partition.eof": False})
    received: list[bytes] = []
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])

        def consume() -> None:
            for message in consumer.consume(500, 0.2):
                assert message.error() is None, message.error()
                value = message.value()
                assert value is not None
                received.append(value)

        wait_until(lambda: len(received) >= sent, "every record", consume, seconds=WAIT_SECONDS)
    finally:
        consumer.close()
    assert received == [b"record-%06d" % i for i in range(sent)]
