"""A partition leader killed with SIGKILL while a producer runs, then restarted.

Three brokers run as child processes (``logproof broker --config …``, started as ``logproof
cluster up`` starts them). A topic with replication factor 3 and ``min.insync.replicas=2``
receives a steady stream from confluent-kafka (acks=all, idempotent). Its leader is SIGKILLed;
the controller elects another replica once the dead broker's ZooKeeper session expires and the
producer carries on. The killed broker is restarted and rejoins as a follower. At the end every
acknowledged record is read back exactly once, in the order it was produced.
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

pytestmark = [pytest.mark.integration]

TOPIC = "killed"
BROKERS = 3
WAIT_SECONDS = 30.0
SESSION_TIMEOUT_MS = 4000


@pytest.fixture
def cluster(zk_chroot: str, tmp_path: Path) -> Iterator[Cluster]:
    running = Cluster(tmp_path, BROKERS, 1, zookeeper=zk_chroot, base_port=None, overrides=[
        "min.insync.replicas=2", f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
    ])
    try:
        running.start()
        yield running
    finally:
        running.stop()


def _state_vouches_for_the_registered_incarnations(zk_chroot: str) -> bool:
    """Whether t-0's state names each ISR member's current registration (its czxid) as the
    incarnation it vouches for (KIP-903's broker epochs, spec/controller.md)."""
    hosts, _, chroot = zk_chroot.partition("/")
    zk = KazooClient(hosts=hosts)
    zk.start(timeout=WAIT_SECONDS)
    try:
        data, _ = zk.get(f"/{chroot}/brokers/topics/{TOPIC}/partitions/0/state")
        state = json.loads(data)
        registered = [zk.get(f"/{chroot}/brokers/ids/{member}")[1].czxid
                      for member in state["isr"]]
    finally:
        zk.stop()
        zk.close()
    return bool(state.get("isr_broker_epochs") == registered)


def test_leader_sigkill_and_restart_loses_and_duplicates_nothing(
        cluster: Cluster, zk_chroot: str) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    def all_registered() -> bool:
        # CreateTopics checks the replication factor against the answering broker's view of
        # the live brokers, which can lag the registrations: wait until every broker sees all.
        for port in cluster.ports.values():
            view = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
            try:
                if len(view.list_topics(timeout=5).brokers) < BROKERS:
                    return False
            except KafkaException:
                return False
        return True

    wait_until(all_registered, "every broker to see all brokers", pause)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics([NewTopic(TOPIC, 1, BROKERS)], operation_timeout=10)
    futures[TOPIC].result(WAIT_SECONDS)

    def partition() -> Any:
        metadata = admin.list_topics(TOPIC, timeout=5)
        return metadata.topics[TOPIC].partitions.get(0)

    def leader() -> int:
        found = partition()
        return -1 if found is None or found.error is not None else int(found.leader)

    def isr() -> list[int]:
        found = partition()
        return [] if found is None else list(found.isrs)

    wait_until(lambda: leader() > 0 and len(isr()) == BROKERS, "the topic's ISR",
             pause)

    acknowledged: list[bytes] = []
    errors: list[str] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            errors.append(str(error))
        else:
            acknowledged.append(message.value())

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "delivery.timeout.ms": 60_000, "retry.backoff.ms": 100,
                         "topic.metadata.refresh.interval.ms": 500})
    sent = 0

    def produce_some() -> None:
        nonlocal sent
        for _ in range(20):
            producer.produce(TOPIC, value=b"record-%06d" % sent, partition=0,
                             on_delivery=delivered)
            sent += 1
        producer.poll(0.05)

    try:
        wait_until(lambda: len(acknowledged) >= 300, "acks before the kill", produce_some)
        victim = leader()
        os.kill(cluster.processes[victim].pid, signal.SIGKILL)
        cluster.processes[victim].wait(WAIT_SECONDS)
        before = len(acknowledged)
        wait_until(lambda: leader() not in (-1, victim), "a new leader", produce_some)
        wait_until(lambda: len(acknowledged) >= before + 300, "acks from the new leader",
                 produce_some)
        cluster.restart(victim)
        wait_until(lambda: victim in isr(), "the restarted broker back in the ISR",
                 produce_some)
        # the leader's expansion vouched for the restarted incarnation its fetches named
        wait_until(lambda: _state_vouches_for_the_registered_incarnations(zk_chroot),
                   "the state to name the members' registrations", produce_some)
        after = len(acknowledged)
        wait_until(lambda: len(acknowledged) >= after + 300, "acks after the restart",
                 produce_some)
        assert producer.flush(WAIT_SECONDS) == 0
    finally:
        producer.flush(0)
    assert errors == []
    assert len(acknowledged) == sent

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "unused",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    received: list[bytes] = []
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])

        def consume() -> None:
            for message in consumer.consume(500, 0.2):
                assert message.error() is None, message.error()
                value = message.value()
                assert value is not None
                received.append(value)

        wait_until(lambda: len(received) >= len(acknowledged), "every record", consume)
        low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
    finally:
        consumer.close()
    assert (low, high) == (0, len(received))
    produced_order = sorted(acknowledged)
    assert received == produced_order
