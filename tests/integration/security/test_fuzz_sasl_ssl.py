"""Invariant: on a SASL_SSL listener, no byte sequence a client sends inside TLS — before or after
authenticating — crashes the broker, changes stored data, or gets anything but ApiVersions and
the SASL APIs served before authentication. Delivering a case all at once and in small pieces
gives the same bytes back.

The frame generator is the PLAINTEXT fuzz test's (``tests/integration/broker/test_fuzz_frames``);
each case ends with a sentinel ApiVersions request (correlation id 4242) and the client reads
until the broker closes (a half-read frame is closed by ``socket.request.read.timeout.ms``).
Seeded: ``FUZZ_SEED`` and the case index decide every input.
"""

from __future__ import annotations

import random
import socket
import ssl
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from impl.api_keys import SASL_AUTHENTICATE, SASL_HANDSHAKE
from impl.broker._codec import encode_request
from impl.broker._kio_build import build
from impl.security.client import _request
from impl.security.sasl import SaslClient
from impl.storage import TopicPartition
from tests.integration.broker._harness import RunningBroker
from tests.integration.broker.test_fuzz_frames import (
    FUZZ_SEED,
    _case,
    _log_bytes,
    _valid_requests,
)

from .conftest import PASSWORDS, add_users

pytestmark = [pytest.mark.integration,
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

CASES = 20
TIMEOUT_SECONDS = 15.0


def _sentinel() -> bytes:
    from kio.index import load_request_schema

    return encode_request(18, 0, 4242, "fuzz", build(load_request_schema(18, 0), {}))


def _read_frame(sock: ssl.SSLSocket) -> bytes | None:
    data = b""
    while len(data) < 4:
        chunk = sock.recv(4 - len(data))
        if not chunk:
            return None
        data += chunk
    (size,) = struct.unpack(">i", data)
    body = b""
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    return body


def _authenticate(sock: ssl.SSLSocket) -> None:
    sock.sendall(_request(SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"}))
    assert _read_frame(sock) is not None
    client = SaslClient("SCRAM-SHA-512", "admin", PASSWORDS["admin"])
    token: bytes | None = client.first_token()
    correlation = 2
    while token is not None:
        sock.sendall(_request(SASL_AUTHENTICATE, correlation, {"auth_bytes": token}))
        frame = _read_frame(sock)
        assert frame is not None
        from impl.broker._codec import decode_response

        _, answer = decode_response(SASL_AUTHENTICATE, 1, frame)
        assert int(answer.error_code) == 0
        token = client.next_token(bytes(answer.auth_bytes))
        correlation += 1


def _exchange(port: int, ca: Path, authenticated: bool, payload: bytes,
              pieces: Callable[[bytes], list[bytes]]) -> bytes:
    context = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_SECONDS) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        if authenticated:
            _authenticate(sock)
        for piece in [*pieces(payload), _sentinel()]:
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                break
        received = bytearray()
        while True:
            try:
                chunk = sock.recv(1 << 16)
            except (ConnectionResetError, ssl.SSLError, TimeoutError):
                break
            if not chunk:
                break
            received += chunk
            if received.endswith(b"") and _has_sentinel_answer(bytes(received)):
                break
        return bytes(received)


def _has_sentinel_answer(data: bytes) -> bool:
    position = 0
    while position + 8 <= len(data):
        (size,) = struct.unpack_from(">i", data, position)
        if position + 4 + size > len(data):
            return False
        if struct.unpack_from(">i", data, position + 4)[0] == 4242:
            return True
        position += 4 + size
    return False


def _correlation_ids(data: bytes) -> list[int]:
    ids, position = [], 0
    while position + 8 <= len(data):
        (size,) = struct.unpack_from(">i", data, position)
        ids.append(struct.unpack_from(">i", data, position + 4)[0])
        position += 4 + size
    return ids


@pytest.mark.parametrize("authenticated", [False, True], ids=["before-auth", "after-auth"])
def test_fuzzed_frames_over_sasl_ssl(zk_chroot: str, tmp_path: Path, authenticated: bool) -> None:
    from kafka import KafkaProducer

    from impl.security.certificates import create_authority, issue

    authority = create_authority(tmp_path / "tls")
    keystore = issue(authority, tmp_path / "tls", "broker-1")
    add_users(zk_chroot)
    jaas = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="admin" password="{PASSWORDS["admin"]}";')
    broker = RunningBroker(zk_chroot, tmp_path, overrides=[
        "listeners=SASL_SSL://127.0.0.1:0", f"ssl.keystore.location={keystore}",
        f"ssl.truststore.location={authority.path}",
        "sasl.enabled.mechanisms=SCRAM-SHA-512", f"sasl.jaas.config={jaas}",
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "super.users=User:admin", "socket.request.read.timeout.ms=500",
    ]).start()
    try:
        port = broker.broker.port
        assert broker.become_leader("fz")[0].error_code == 0
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                                 security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                                 sasl_plain_username="admin",
                                 sasl_plain_password=PASSWORDS["admin"],
                                 ssl_cafile=str(authority.path))
        for index in range(20):
            producer.send("fz", value=b"stored-%d" % index, partition=0).get(timeout=30)
        producer.close()
        tp = TopicPartition("fz", 0)
        before = _log_bytes(broker, tp)
        # Each valid request carries 1000 + its API key as correlation id, so an answer names
        # the API that was served.
        valid = [frame[:8] + struct.pack(">i", 1000 + struct.unpack_from(">h", frame, 4)[0])
                 + frame[12:] for frame in _valid_requests(broker.log_dirs[0])]
        served_apis = {1000 + struct.unpack_from(">h", frame, 4)[0] for frame in valid}
        limit = broker.config.socket_request_max_bytes
        for index in range(CASES):
            rng = random.Random(FUZZ_SEED * 1_000_003 + index + (7 if authenticated else 0))
            payload = _case(rng, valid, limit)
            whole = _exchange(port, authority.path, authenticated, payload, lambda d: [d])
            step = rng.randrange(1, 8)

            def pieces(data: bytes, step: int = step) -> list[bytes]:
                return [data[i : i + step] for i in range(0, len(data), step)]

            split = _exchange(port, authority.path, authenticated, payload, pieces)
            assert whole == split, f"case {index}: whole and split delivery differ"
            if not authenticated:
                # Before authentication only ApiVersions (key 18) and the sentinel are answered.
                answered = set(_correlation_ids(whole)) & served_apis
                assert answered <= {1018}, f"case {index}: {answered} served before SASL"
            assert broker.broker.server is not None
            assert broker.broker.server.internal_errors == 0, f"case {index} crashed a handler"
        assert _log_bytes(broker, tp) == before
    finally:
        broker.stop()
