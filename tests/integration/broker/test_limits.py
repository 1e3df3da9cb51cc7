"""Connection bounds on a real broker: idle and slowloris connections are closed, per-IP and
total connection counts are enforced, and the 23-byte request that aborted the process closes
only its own connection (issue 15, defects 2 and 5)."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from impl.broker._codec import decode_response, encode_request
from impl.broker._kio_build import build

from ._harness import RunningBroker

pytestmark = pytest.mark.integration

WAIT_SECONDS = 20.0
ABORTING_REQUEST = bytes.fromhex("000000130023000200000001000272700" "0ffffffff0f00")


@pytest.fixture
def bounded(zk_chroot: str, tmp_path: Path) -> Iterator[RunningBroker]:
    running = RunningBroker(zk_chroot, tmp_path, overrides=[
        "connections.max.idle.ms=400",
        "socket.request.read.timeout.ms=400",
        "max.connections.per.ip=3",
        "queued.max.request.bytes=8388608",
    ]).start()
    try:
        yield running
    finally:
        running.stop()


def _connect(broker: RunningBroker) -> socket.socket:
    host, port = broker.bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=WAIT_SECONDS)


def _api_versions(sock: socket.socket) -> int:
    from kio.index import load_request_schema

    request = build(load_request_schema(18, 3), {"client_software_name": "t",
                                                 "client_software_version": "1"})
    sock.sendall(encode_request(18, 3, 5, "t", request))
    head = _exact(sock, 4)
    (size,) = struct.unpack(">i", head)
    correlation, response = decode_response(18, 3, _exact(sock, size))
    assert correlation == 5
    return int(response.error_code)


def _exact(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)


def _closed_by_peer(sock: socket.socket) -> bool:
    """Wait (bounded) for the broker to close ``sock``."""
    sock.settimeout(WAIT_SECONDS)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_idle_and_slowloris_connections_are_closed(bounded: RunningBroker) -> None:
    idle = _connect(bounded)
    assert _closed_by_peer(idle)
    idle.close()
    slow = _connect(bounded)
    slow.sendall(b"\x00\x00\x01\x00")  # a 256-byte request, then a byte now and then
    deadline = time.monotonic() + WAIT_SECONDS
    closed = False
    while time.monotonic() < deadline and not closed:
        try:
            slow.sendall(b"\x00")
        except OSError:
            closed = True
            break
        slow.settimeout(0.1)
        try:
            closed = slow.recv(1) == b""
        except TimeoutError:
            pass
        except ConnectionResetError:
            closed = True
    slow.close()
    assert closed, "a request trickling in was never cut off"
    assert bounded.broker.server is not None
    assert bounded.broker.server.timed_out >= 2
    fresh = _connect(bounded)
    assert _api_versions(fresh) == 0
    fresh.close()


def test_connections_per_ip_are_bounded(bounded: RunningBroker) -> None:
    kept = [_connect(bounded) for _ in range(3)]
    for sock in kept:
        assert _api_versions(sock) == 0
    extra = _connect(bounded)
    assert _closed_by_peer(extra)
    extra.close()
    assert _api_versions(kept[0]) == 0
    for sock in kept:
        sock.close()


def test_the_23_byte_request_closes_only_its_connection(bounded: RunningBroker) -> None:
    other = _connect(bounded)
    attacker = _connect(bounded)
    attacker.sendall(ABORTING_REQUEST)
    assert _closed_by_peer(attacker)
    attacker.close()
    assert _api_versions(other) == 0
    other.close()


def test_a_placement_of_two_billion_partitions_is_refused(bounded: RunningBroker) -> None:
    from impl.controller import placement

    request = placement.CreateReplicaPlacementRequest(partition_count=2**31 - 1,
                                                      replication_factor=1)
    frame = placement.request_frame(request, 9, "attacker")
    attacker = _connect(bounded)
    attacker.sendall(frame)
    (size,) = struct.unpack(">i", _exact(attacker, 4))
    body = _exact(attacker, size)
    # response header v1: correlation id, then an empty tagged-field section (one byte)
    assert struct.unpack(">i", body[:4])[0] == 9
    response = placement.decode_create_replica_placement_response(body[5:])
    assert response.error_code == placement.INVALID_PARTITIONS
    other = _connect(bounded)
    assert _api_versions(other) == 0
    for sock in (attacker, other):
        sock.close()
