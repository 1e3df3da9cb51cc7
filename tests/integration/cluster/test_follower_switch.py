"""A follower moves to the new leader at once while the old leader is paused (SIGSTOP).

In the first test three brokers run as child processes. A topic with replication factor 3 and
``min.insync.replicas=2`` is led by a broker that is not the controller; its followers have a
fetch in flight to it when it is SIGSTOPped. Once its ZooKeeper session expires the controller
elects the next replica; the remaining follower must fetch from the new leader right away,
not after its fetch to the paused broker times out. An acks=all produce to the new leader
(which needs that follower's fetch to move the high watermark) completes while the old leader
is still stopped. The old leader is then resumed, rejoins the ISR, and every acknowledged record
is read back once, in order.

The second test runs brokers in process and plays the controller, so it can name a leader that
answers nothing (a listener that completes connections and never replies, as a SIGSTOPped
broker's socket does) and then, once the partition has another leader, name that broker again
at a new address for another partition. The follower's loop for the silent broker must have
been cancelled: the new partition is fetched at once, not after ``IO_TIMEOUT_SECONDS``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from impl.cli.cmd_cluster import Cluster
from impl.controller.requests import BrokerEndpoint, LeaderAndIsrPartitionState, LeaderAndIsrRequest
from impl.storage.record_batch import build_batch
from tests.integration.broker._harness import RunningBroker
from tests.integration.broker.test_protocol_errors import Client, produce

from ._load import pause, stopped, wait_until

pytestmark = [pytest.mark.integration]

TOPIC = "switch"
BROKERS = 3
WAIT_SECONDS = 30.0
SESSION_TIMEOUT_MS = 4000
#: ``replica_fetcher.IO_TIMEOUT_SECONDS``: a fetch stuck on the paused leader ends no sooner.
#: The produce to the new leader must finish well before a follower stuck that long would let it.
PRODUCE_BOUND_SECONDS = 20.0
RECORDS = 200


@pytest.fixture
def cluster(zk_chroot: str, tmp_path: Path) -> Iterator[Cluster]:
    running = Cluster(tmp_path, BROKERS, 1, zookeeper=zk_chroot, base_port=None, overrides=[
        "min.insync.replicas=2", f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
    ])
    try:
        running.start()
        yield running
    finally:
        for process in running.processes.values():
            if process.poll() is None:
                os.kill(process.pid, signal.SIGCONT)
        running.stop()


def partition_state(zk: KazooClient) -> dict[str, Any] | None:
    path = f"/brokers/topics/{TOPIC}/partitions/0/state"
    if zk.exists(path) is None:
        return None
    data, _stat = zk.get(path)
    state: dict[str, Any] = json.loads(data)
    return state


def test_follower_fetches_from_the_new_leader_while_the_old_one_is_paused(
    cluster: Cluster, zk: KazooClient
) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    wait_until(lambda: zk.exists("/controller") is not None, "a controller", pause)
    wait_until(lambda: len(zk.get_children("/brokers/ids")) == BROKERS, "registrations", pause)
    controller = json.loads(zk.get("/controller")[0])["brokerid"]
    others = [b for b in sorted(cluster.ports) if b != controller]
    # The paused leader is not the controller; the new leader is the next replica in order.
    old_leader, new_leader = others
    replicas = [old_leader, new_leader, controller]

    def bootstrap(brokers: list[int]) -> str:
        return ",".join(f"127.0.0.1:{cluster.ports[b]}" for b in brokers)

    admin = AdminClient({"bootstrap.servers": bootstrap(sorted(cluster.ports))})
    futures = admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[replicas])],
                                  operation_timeout=10)
    futures[TOPIC].result(WAIT_SECONDS)
    wait_until(lambda: (s := partition_state(zk)) is not None and s["leader"] == old_leader
             and sorted(s["isr"]) == sorted(replicas), "the topic's full ISR", pause)

    acknowledged: list[bytes] = []
    errors: list[str] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            errors.append(str(error))
        else:
            acknowledged.append(message.value())

    def run_producer(servers: str, first: int, count: int, bound: float) -> None:
        producer = Producer({"bootstrap.servers": servers, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5,
                             "delivery.timeout.ms": 60_000, "retry.backoff.ms": 100})
        target = len(acknowledged) + count
        try:
            for index in range(first, first + count):
                producer.produce(TOPIC, value=b"record-%06d" % index, partition=0,
                                 on_delivery=delivered)
            wait_until(lambda: len(acknowledged) >= target or bool(errors),
                     "acks=all deliveries", lambda: producer.poll(0.05), bound)
        finally:
            producer.flush(0)
        assert errors == []

    run_producer(bootstrap(sorted(cluster.ports)), 0, RECORDS, WAIT_SECONDS)
    epoch_before = partition_state(zk)["leader_epoch"]  # type: ignore[index]

    paused = cluster.processes[old_leader]
    os.kill(paused.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: stopped(paused.pid), "the leader to stop", pause)
        start = time.monotonic()
        wait_until(lambda: (s := partition_state(zk)) is not None and s["leader"] == new_leader
                 and s["leader_epoch"] > epoch_before, "the new leader", pause)
        # Only the two live brokers are contacted; the produce needs the remaining follower
        # (the controller's broker) to fetch from the new leader.
        remaining = PRODUCE_BOUND_SECONDS - (time.monotonic() - start)
        run_producer(bootstrap([new_leader, controller]), RECORDS, RECORDS, max(remaining, 1.0))
        assert stopped(paused.pid), "the old leader must still be paused"
    finally:
        os.kill(paused.pid, signal.SIGCONT)

    wait_until(lambda: (s := partition_state(zk)) is not None and old_leader in s["isr"],
             "the resumed broker back in the ISR", pause)
    consumer = Consumer({"bootstrap.servers": bootstrap([new_leader, controller]),
                         "group.id": "unused", "enable.auto.commit": False})
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
    finally:
        consumer.close()
    assert len(acknowledged) == 2 * RECORDS
    assert received == sorted(acknowledged)


def lead(target: RunningBroker, topic: str, *, leader: BrokerEndpoint, leader_epoch: int,
         isr: tuple[int, ...], epoch: int) -> None:
    """Play the controller: one LeaderAndIsr for ``topic``-0 to ``target``."""
    request = LeaderAndIsrRequest(
        9, epoch, target.broker.broker_epoch,
        (LeaderAndIsrPartitionState(topic, 0, epoch, leader.broker_id, leader_epoch, isr,
                                    leader_epoch, isr, is_new=True),),
        (leader,),
    )
    assert target.send(request).error_code == 0


def test_a_silent_leader_holds_no_fetch_loop_once_its_partitions_move(
    zk_chroot: str, tmp_path: Path
) -> None:
    silent = socket.create_server(("127.0.0.1", 0), backlog=8)
    silent.settimeout(WAIT_SECONDS)
    held: list[socket.socket] = []
    brokers: list[RunningBroker] = []
    try:
        for broker_id in (1, 2, 3):
            brokers.append(RunningBroker(zk_chroot, tmp_path / f"b{broker_id}",
                                         broker_id=broker_id, dirs=1).start())
        first, follower, third = brokers
        one = BrokerEndpoint(1, "127.0.0.1", first.broker.port)
        three_silent = BrokerEndpoint(3, "127.0.0.1", silent.getsockname()[1])
        three = BrokerEndpoint(3, "127.0.0.1", third.broker.port)

        # Broker 3 leads "a" at an address where nothing answers: the follower connects and
        # its first request stays in flight.
        lead(follower, "a", leader=three_silent, leader_epoch=1, isr=(3, 2), epoch=1)
        connection, _address = silent.accept()
        held.append(connection)

        # "a" moves to broker 1: the follower fetches from it at once (acks=all needs it).
        lead(first, "a", leader=one, leader_epoch=2, isr=(1, 2), epoch=2)
        lead(follower, "a", leader=one, leader_epoch=2, isr=(1, 2), epoch=2)
        client = Client(first.bootstrap)
        try:
            assert produce(client, "a", build_batch([b"a0"])) == (0, 0)
        finally:
            client.close()

        # Broker 3 is back at another address and leads "b". Nothing follows broker 3 at the
        # silent address any more, so nothing waits for it: "b" is fetched at once and an
        # acks=all produce (5 s timeout, well below the fetcher's 30 s I/O timeout) completes.
        lead(third, "b", leader=three, leader_epoch=1, isr=(3, 2), epoch=3)
        lead(follower, "b", leader=three, leader_epoch=1, isr=(3, 2), epoch=3)
        client = Client(third.bootstrap)
        try:
            assert produce(client, "b", build_batch([b"b0"])) == (0, 0)
        finally:
            client.close()
    finally:
        for broker in reversed(brokers):
            broker.stop()
        for connection in held:
            connection.close()
        silent.close()
