"""The controller is paused until its ZooKeeper session expires, then resumed as a zombie.

Three brokers run as child processes. A topic with replication factor 3 and
``min.insync.replicas=2`` (led by a broker that is not the controller) receives a steady stream
from confluent-kafka (acks=all, idempotent) while a consumer reads it. The controller broker is
SIGSTOPped; once its sessions expire another broker wins the election with a higher controller
epoch, takes the paused broker out of the ISR and the producer carries on. The paused broker is
then resumed: its controller is a zombie that must resign without changing anything (every
write it could attempt is a ``multi`` checked against the ``/controller_epoch`` version it won,
which has moved on). The test checks that

* the new controller's epoch is the old one plus one and stays so (the zombie did not win
  again), and ``/controller`` names the new controller;
* no partition state written after the failover carries the zombie's epoch, and leader epochs
  only grew;
* every broker, the zombie's included, answers a LeaderAndIsr sent with the zombie's epoch with
  STALE_CONTROLLER_EPOCH;
* the resumed broker logs its resignation and rejoins the ISR;
* every acknowledged record is consumed exactly once, in order.
"""

from __future__ import annotations

import functools
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from kazoo.client import KazooClient
from kazoo.recipe.watchers import DataWatch

from impl.broker.admin import AdminClient, AdminClientError
from impl.broker.inter_broker import InterBrokerClient
from impl.cli.cmd_cluster import Cluster
from impl.controller.requests import BrokerEndpoint, LeaderAndIsrPartitionState, LeaderAndIsrRequest

from ._load import pause, stopped, wait_until

pytestmark = [pytest.mark.integration]

TOPIC = "zombie"
BROKERS = 3
WAIT_SECONDS = 30.0
SESSION_TIMEOUT_MS = 4000
STALE_CONTROLLER_EPOCH = 11
STATE_PATH = f"/brokers/topics/{TOPIC}/partitions/0/state"


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


def controller_epoch(zk: KazooClient) -> int:
    return int(zk.get("/controller_epoch")[0])


def controller_id(zk: KazooClient) -> int | None:
    if zk.exists("/controller") is None:
        return None
    try:
        data, _stat = zk.get("/controller")
    except Exception:  # deleted between the two calls
        return None
    broker: int = json.loads(data)["brokerid"]
    return broker


def partition_state(zk: KazooClient) -> tuple[dict[str, Any], int]:
    """The partition's state znode and its version."""
    data, stat = zk.get(STATE_PATH)
    state: dict[str, Any] = json.loads(data)
    return state, stat.version


def knows_controller(port: int, expected: int | None) -> bool:
    """Whether the broker's Metadata names ``expected`` as the controller."""
    try:
        with AdminClient(f"127.0.0.1:{port}", timeout_seconds=10) as view:
            return view.metadata([]).controller_id == expected
    except AdminClientError:  # a slow answer: ask again
        return False


def stale_leader_and_isr(port: int, broker_id: int, broker_epoch: int, zombie: int,
                         epoch: int) -> int:
    """The top-level error a broker gives a LeaderAndIsr sent with the zombie's epoch."""
    request = LeaderAndIsrRequest(
        zombie, epoch, broker_epoch,
        (LeaderAndIsrPartitionState(TOPIC, 0, epoch, zombie, 99, (zombie,), 99,
                                    (zombie,)),),
        (BrokerEndpoint(zombie, "127.0.0.1", port),),
    )

    async def send() -> int:
        client = InterBrokerClient(f"controller-{zombie}", lambda _b: ("127.0.0.1", port))
        try:
            return (await client.send(broker_id, request)).error_code
        finally:
            await client.aclose()

    return trio.run(send)


def test_zombie_controller_is_fenced_and_loses_nothing(cluster: Cluster, zk: KazooClient) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient as KafkaAdminClient
    from confluent_kafka.cimpl import NewTopic

    wait_until(lambda: controller_id(zk) is not None, "a controller", pause)
    wait_until(lambda: len(zk.get_children("/brokers/ids")) == BROKERS, "registrations", pause)
    zombie = controller_id(zk)
    assert zombie is not None
    old_epoch = controller_epoch(zk)
    # Every value of /controller_epoch and of the partition state ZooKeeper notifies from now
    # on (kazoo's watches may coalesce quick successive writes, never reorder them).
    epochs: list[int] = []
    states: list[tuple[int, dict[str, Any]]] = []

    def epoch_changed(data: bytes | None, _stat: Any) -> None:
        if data is not None:
            epochs.append(int(data))

    def state_changed(data: bytes | None, stat: Any) -> None:
        if data is not None:
            states.append((stat.version, json.loads(data)))

    DataWatch(zk, "/controller_epoch", epoch_changed)
    DataWatch(zk, STATE_PATH, state_changed)
    leader, follower = (b for b in sorted(cluster.ports) if b != zombie)
    bootstrap = ",".join(f"127.0.0.1:{port}" for port in cluster.ports.values())

    admin = KafkaAdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[leader, follower,
                                                                            zombie]])],
                                  operation_timeout=10)
    futures[TOPIC].result(WAIT_SECONDS)
    wait_until(lambda: zk.exists(STATE_PATH) is not None
             and len(partition_state(zk)[0]["isr"]) == BROKERS, "the topic's full ISR", pause)

    acknowledged: list[bytes] = []
    errors: list[str] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            errors.append(str(error))
        else:
            acknowledged.append(message.value())

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "delivery.timeout.ms": 60_000, "retry.backoff.ms": 100})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    received: list[bytes] = []
    sent = 0

    def step() -> None:
        nonlocal sent
        for _ in range(10):
            producer.produce(TOPIC, value=b"record-%06d" % sent, partition=0,
                             on_delivery=delivered)
            sent += 1
        producer.poll(0.02)
        consume()

    def consume() -> None:
        for message in consumer.consume(500, 0.02):
            assert message.error() is None, message.error()
            value = message.value()
            assert value is not None
            received.append(value)

    paused = cluster.processes[zombie]
    try:
        wait_until(lambda: len(acknowledged) >= 200, "acks before the pause", step)
        before_state, before_version = partition_state(zk)
        os.kill(paused.pid, signal.SIGSTOP)
        wait_until(lambda: stopped(paused.pid), "the controller to stop", pause)
        wait_until(lambda: controller_id(zk) not in (None, zombie), "a new controller", step)
        new_controller = controller_id(zk)
        assert controller_epoch(zk) == old_epoch + 1
        wait_until(lambda: zombie not in partition_state(zk)[0]["isr"],
                 "the paused broker out of the ISR", step)
        failover_state, failover_version = partition_state(zk)
        assert failover_state["controller_epoch"] == old_epoch + 1
        assert failover_state["leader"] == leader
        assert failover_state["leader_epoch"] > before_state["leader_epoch"]
        assert failover_version > before_version
        acked = len(acknowledged)
        wait_until(lambda: len(acknowledged) >= acked + 200, "acks without the controller", step)
    finally:
        os.kill(paused.pid, signal.SIGCONT)

    zombie_log = cluster.data_dir / f"broker-{zombie}" / "broker.log"
    wait_until(lambda: f"controller {zombie} resigns" in zombie_log.read_text(errors="replace"),
             "the zombie's resignation", step)
    wait_until(lambda: zombie in partition_state(zk)[0]["isr"], "the zombie back in the ISR",
             step)
    acked = len(acknowledged)
    wait_until(lambda: len(acknowledged) >= acked + 200, "acks after the resume", step)
    assert producer.flush(WAIT_SECONDS) == 0
    assert errors == []
    assert len(acknowledged) == sent

    # The zombie wrote nothing: the epoch is the new controller's, /controller names it, and
    # the partition state is the new controller's or its leader's (ISR changes), never the
    # zombie's, with a leader epoch that only grew.
    assert controller_epoch(zk) == old_epoch + 1
    assert controller_id(zk) == new_controller
    final_state, final_version = partition_state(zk)
    assert final_state["controller_epoch"] == old_epoch + 1
    assert final_state["leader_epoch"] >= failover_state["leader_epoch"]
    assert final_version >= failover_version
    assert epochs == [old_epoch, old_epoch + 1]
    seen = [(version, state["leader_epoch"], state["controller_epoch"])
            for version, state in states]
    for column in range(3):  # versions, leader epochs and controller epochs never go back
        assert [row[column] for row in seen] == sorted(row[column] for row in seen), seen
    assert all(epoch == old_epoch + 1 for version, _leader_epoch, epoch in seen
               if version >= failover_version)

    # Every broker has heard from the new controller and refuses the zombie's epoch.
    for broker_id, port in sorted(cluster.ports.items()):
        wait_until(functools.partial(knows_controller, port, new_controller),
                 f"broker {broker_id} to know the new controller", pause)
        stat = zk.exists(f"/brokers/ids/{broker_id}")
        assert stat is not None
        assert stale_leader_and_isr(port, broker_id, stat.czxid, zombie,
                                    old_epoch) == STALE_CONTROLLER_EPOCH

    try:
        wait_until(lambda: len(received) >= len(acknowledged), "every record", consume)
    finally:
        consumer.close()
    assert received == sorted(acknowledged)
