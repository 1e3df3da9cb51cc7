"""``advertised.listeners`` with real clients: a client bootstraps on the address the broker
binds and is then sent to the address it advertises (here a TCP relay in front of the broker,
as a NAT or a container port mapping would be), which it must use for everything after
bootstrap; a listener bound to every interface with port 0 is advertised as the machine's host
name and its bound port; Metadata, FindCoordinator and DescribeCluster answer on the request's
listener, and ``/brokers/ids`` holds the advertised endpoints.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from impl.broker.admin import AdminClient

from ._harness import RunningBroker

pytestmark = [pytest.mark.integration,
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

TIMEOUT_SECONDS = 30.0


class Relay:
    """Forwards every connection accepted on its own loopback port to ``target`` and counts
    them (the advertised address of a broker behind a port mapping)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.target: tuple[str, int] | None = None
        self.accepted = 0
        self._sockets: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self._sockets.append(client)
            if self.target is None:
                continue
            self.accepted += 1
            try:
                upstream = socket.create_connection(self.target, timeout=TIMEOUT_SECONDS)
            except OSError:
                continue
            self._sockets.append(upstream)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(1 << 16):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self.listener.close()
        self._thread.join(TIMEOUT_SECONDS)
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@pytest.fixture
def relayed(zk_chroot: str, tmp_path: Path) -> Iterator[tuple[RunningBroker, Relay]]:
    relay = Relay()
    broker = RunningBroker(zk_chroot, tmp_path, run_controller=True, overrides=[
        "listeners=PLAINTEXT://127.0.0.1:0,INTERNAL://:0",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name=INTERNAL",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{relay.port},INTERNAL://:0",
        "offsets.topic.replication.factor=1", "offsets.topic.num.partitions=2",
        "group.initial.rebalance.delay.ms=0",
    ]).start()
    try:
        relay.target = ("127.0.0.1", broker.broker.server_ports["PLAINTEXT"])
        yield broker, relay
    finally:
        broker.stop()
        relay.close()


def test_clients_are_sent_to_the_advertised_addresses(
        relayed: tuple[RunningBroker, Relay], zk_chroot: str) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient as ConfluentAdmin
    from kafka import KafkaConsumer, KafkaProducer

    running, relay = relayed
    broker = running.broker
    bound = broker.server_ports
    direct = f"127.0.0.1:{bound['PLAINTEXT']}"
    host_name = socket.getfqdn()
    internal = (host_name, bound["INTERNAL"])

    # ZooKeeper holds the advertised endpoints, the inter-broker listener first
    hosts, _, chroot = zk_chroot.partition("/")
    zk = KazooClient(hosts=hosts)
    zk.start(timeout=TIMEOUT_SECONDS)
    try:
        data, _ = zk.get(f"/{chroot}/brokers/ids/1")
    finally:
        zk.stop()
        zk.close()
    registration = json.loads(data)
    assert registration["endpoints"] == [f"INTERNAL://{host_name}:{bound['INTERNAL']}",
                                         f"PLAINTEXT://127.0.0.1:{relay.port}"]
    assert registration["listener_security_protocol_map"] == {
        "INTERNAL": "PLAINTEXT", "PLAINTEXT": "PLAINTEXT"}

    # Metadata on each listener names the broker at that listener's advertised address
    with AdminClient(direct) as admin:
        assert admin.metadata().brokers[1][:2] == ("127.0.0.1", relay.port)
        assert admin.create_topics([("moved", 1, 1)], timeout_ms=30_000) == {"moved": (0, None)}
    with AdminClient(f"127.0.0.1:{bound['INTERNAL']}") as admin:
        assert admin.metadata().brokers[1][:2] == internal

    # kafka-python bootstraps on the bound address and produces through the advertised one
    producer = KafkaProducer(bootstrap_servers=direct, acks="all")
    try:
        sent = [producer.send("moved", b"v%d" % i).get(timeout=TIMEOUT_SECONDS)
                for i in range(5)]
    finally:
        producer.close()
    assert [record.offset for record in sent] == list(range(5))
    assert relay.accepted >= 1, "the producer never used the advertised address"
    through_producer = relay.accepted

    # a group consumer is sent to its coordinator's advertised address by FindCoordinator
    consumer = KafkaConsumer("moved", bootstrap_servers=direct, group_id="g",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=20_000)
    try:
        values = [message.value for _, message in zip(range(5), consumer, strict=False)]
        consumer.commit()
    finally:
        consumer.close()
    assert values == [b"v%d" % i for i in range(5)]
    assert relay.accepted > through_producer

    # confluent-kafka: DescribeCluster answers on the request's listener too
    confluent_admin = ConfluentAdmin({"bootstrap.servers": direct})
    description = confluent_admin.describe_cluster(request_timeout=TIMEOUT_SECONDS).result(
        timeout=TIMEOUT_SECONDS)
    assert [(node.id, node.host, node.port) for node in description.nodes] == [
        (1, "127.0.0.1", relay.port)]
    confluent_admin = ConfluentAdmin({"bootstrap.servers": f"127.0.0.1:{bound['INTERNAL']}"})
    description = confluent_admin.describe_cluster(request_timeout=TIMEOUT_SECONDS).result(
        timeout=TIMEOUT_SECONDS)
    assert [(node.id, node.host, node.port) for node in description.nodes] == [
        (1, *internal)]
    confluent_producer = Producer({"bootstrap.servers": direct, "acks": "all"})
    confluent_producer.produce("moved", b"from-confluent")
    assert confluent_producer.flush(TIMEOUT_SECONDS) == 0
    confluent_consumer = Consumer({"bootstrap.servers": direct, "group.id": "c",
                                   "auto.offset.reset": "earliest"})
    try:
        confluent_consumer.subscribe(["moved"])
        seen: list[bytes] = []
        for _ in range(60):
            message = confluent_consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen.append(bytes(message.value() or b""))
            if len(seen) == 6:
                break
        assert seen[-1] == b"from-confluent"
    finally:
        confluent_consumer.close()
