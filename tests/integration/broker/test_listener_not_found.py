"""A partition whose leader has no endpoint on the listener a Metadata request came in on: the
leader is left out of the brokers and the partition answers LISTENER_NOT_FOUND (Metadata v6+,
KIP-291's error) or LEADER_NOT_AVAILABLE (v0-v5), as Kafka answers; on a listener the leader
has, the same partition is answered with its leader's endpoint there.

The broker has two listeners (PLAINTEXT and EXTRA); the controller's UpdateMetadata (played by
the harness, over the wire) names a second broker registered with PLAINTEXT only, leading
``remote``, while this broker leads ``local``.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from impl.broker._codec import decode_response, encode_request, load_request_schema
from impl.broker._kio_build import build
from impl.broker.admin import AdminClient
from impl.controller.requests import (
    BrokerEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from impl.controller.znodes import ListenerEndpoint

from ._harness import RunningBroker

pytestmark = [pytest.mark.integration]

LISTENER_NOT_FOUND = 72
LEADER_NOT_AVAILABLE = 5
#: the second broker's PLAINTEXT endpoint (never connected to: only advertised)
OTHER = ("127.0.0.1", 19092)


@pytest.fixture
def two_listeners(zk_chroot: str, tmp_path: Path) -> Iterator[RunningBroker]:
    running = RunningBroker(zk_chroot, tmp_path, overrides=[
        "listeners=PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT",
        "inter.broker.listener.name=PLAINTEXT", "auto.create.topics.enable=false",
    ]).start()
    try:
        assert running.become_leader("local")[0].error_code == 0
        broker = running.broker
        own = broker.advertised_endpoints()
        other = BrokerEndpoint(2, *OTHER, None,
                               (ListenerEndpoint("PLAINTEXT", "PLAINTEXT", *OTHER),))
        response = running.send(UpdateMetadataRequest(
            controller_id=1, controller_epoch=running.controller_epoch,
            broker_epoch=broker.broker_epoch,
            live_brokers=(BrokerEndpoint(1, own[0].host, own[0].port, None, own), other),
            partition_states=(
                UpdateMetadataPartitionState("local", 0, running.controller_epoch, 1, 0, (1,),
                                             0, (1,), ()),
                UpdateMetadataPartitionState("remote", 0, running.controller_epoch, 2, 0, (2,),
                                             0, (2,), ()),
            ),
        ))
        assert response.error_code == 0
        yield running
    finally:
        running.stop()


def _metadata(port: int, version: int) -> Any:
    """A raw Metadata request of ``version`` for both topics."""
    body = build(load_request_schema(3, version), {
        "topics": [{"name": "local"}, {"name": "remote"}], "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False})
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(encode_request(3, version, 9, "test", body))

        def receive(count: int) -> bytes:
            data = b""
            while len(data) < count:
                chunk = sock.recv(count - len(data))
                assert chunk, "the broker closed the connection"
                data += chunk
            return data

        (size,) = struct.unpack(">i", receive(4))
        return decode_response(3, version, receive(size))[1]


def _partitions(answer: Any) -> dict[str, tuple[int, int]]:
    return {str(topic.name): (int(topic.partitions[0].error_code),
                              int(topic.partitions[0].leader_id))
            for topic in answer.topics}


def test_a_leader_without_the_request_listener(two_listeners: RunningBroker) -> None:
    ports = two_listeners.broker.server_ports
    extra, plain = ports["EXTRA"], ports["PLAINTEXT"]
    with AdminClient(f"127.0.0.1:{extra}") as admin:
        metadata = admin.metadata(["local", "remote"])
    assert {b: (host, port) for b, (host, port, _) in metadata.brokers.items()} == {
        1: ("127.0.0.1", extra)}
    assert metadata.topics["remote"][1][0].error_code == LISTENER_NOT_FOUND
    assert metadata.topics["local"][1][0].error_code == 0
    assert _partitions(_metadata(extra, 6)) == {"local": (0, 1),
                                                "remote": (LISTENER_NOT_FOUND, -1)}
    assert _partitions(_metadata(extra, 5)) == {"local": (0, 1),
                                                "remote": (LEADER_NOT_AVAILABLE, -1)}
    # on PLAINTEXT, which both brokers have, the remote leader is answered at its endpoint
    answer = _metadata(plain, 6)
    assert _partitions(answer) == {"local": (0, 1), "remote": (0, 2)}
    assert sorted((int(b.node_id), b.host, int(b.port)) for b in answer.brokers) == [
        (1, "127.0.0.1", plain), (2, *OTHER)]
