"""SASL_PLAINTEXT: SCRAM-SHA-256 with kafka-python, and Kafka's original v0 framing (a v0
SaslHandshake followed by raw length-prefixed tokens) with PLAIN."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from impl.broker._codec import decode_response, encode_request, load_request_schema
from impl.broker._kio_build import build
from tests.integration.broker._harness import RunningBroker

from .conftest import PASSWORDS, add_users

pytestmark = [pytest.mark.integration,
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture
def sasl_plaintext(zk_chroot: str, tmp_path: Path) -> Iterator[RunningBroker]:
    add_users(zk_chroot)
    scram = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
             f'username="admin" password="{PASSWORDS["admin"]}";')
    plain = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
             'user_carol="carol-secret";')
    running = RunningBroker(zk_chroot, tmp_path, overrides=[
        "listeners=SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=SCRAM-SHA-256,PLAIN",
        "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256",
        f"sasl.jaas.config={scram}",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={plain}",
    ]).start()
    try:
        yield running
    finally:
        running.stop()


def test_kafka_python_scram_sha_256(sasl_plaintext: RunningBroker) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    assert sasl_plaintext.become_leader("sp")[0].error_code == 0
    common = {"bootstrap_servers": sasl_plaintext.bootstrap,
              "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
              "sasl_plain_username": "alice", "sasl_plain_password": PASSWORDS["alice"]}
    producer = KafkaProducer(**common, acks="all")
    for index in range(10):
        producer.send("sp", b"s%d" % index, partition=0).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(**common, enable_auto_commit=False, consumer_timeout_ms=10_000)
    consumer.assign([TopicPartition("sp", 0)])
    consumer.seek_to_beginning()
    values = [m.value for _, m in zip(range(10), consumer, strict=False)]
    consumer.close()
    assert values == [b"s%d" % index for index in range(10)]


def _frame(sock: socket.socket) -> bytes:
    data = b""
    while len(data) < 4:
        chunk = sock.recv(4 - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    (size,) = struct.unpack(">i", data)
    body = b""
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        assert chunk, "the broker closed the connection"
        body += chunk
    return body


def _request(api_key: int, version: int, correlation: int, data: dict[str, object]) -> bytes:
    return encode_request(api_key, version, correlation, "v0",
                          build(load_request_schema(api_key, version), data))


@pytest.mark.parametrize(("password", "accepted"), [("carol-secret", True), ("nope", False)])
def test_v0_handshake_then_raw_plain_token(sasl_plaintext: RunningBroker, password: str,
                                           accepted: bool) -> None:
    host, port = sasl_plaintext.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(_request(17, 0, 1, {"mechanism": "PLAIN"}))
        _, handshake = decode_response(17, 0, _frame(sock))
        assert int(handshake.error_code) == 0
        assert "PLAIN" in handshake.mechanisms
        token = f"\0carol\0{password}".encode()
        sock.sendall(struct.pack(">i", len(token)) + token)
        if not accepted:
            assert sock.recv(16) == b""  # refused: closed without an answer
            return
        assert _frame(sock) == b""  # PLAIN's (empty) server token, raw
        sock.sendall(_request(18, 0, 2, {}))
        correlation, versions = decode_response(18, 0, _frame(sock))
        assert correlation == 2
        assert int(versions.error_code) == 0


def test_sasl_max_receive_size_is_checked_from_the_size_prefix(
        sasl_plaintext: RunningBroker) -> None:
    """Before authentication a frame announcing more than ``sasl.server.max.receive.size``
    (524288 by default) closes the connection as soon as its size prefix arrives: the broker
    does not wait for (or allocate) the body, which never comes (``socket.request.read.timeout.ms``
    is 30 s, the client waits 10 s). After authentication the same size is read and answered."""
    host, port = sasl_plaintext.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", 524_289))
        assert sock.recv(16) == b""
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(_request(17, 0, 1, {"mechanism": "PLAIN"}))
        assert int(decode_response(17, 0, _frame(sock))[1].error_code) == 0
        token = b"\0carol\0carol-secret"
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert _frame(sock) == b""
        records = b"\0" * 600_000  # a 600 kB produce to a topic that does not exist
        produce = _request(0, 3, 2, {
            "transactional_id": None, "acks": 1, "timeout": 1000,
            "topic_data": [{"name": "absent", "partition_data": [
                {"index": 0, "records": records}]}]})
        assert len(produce) > 600_000
        sock.sendall(produce)
        correlation, answer = decode_response(0, 3, _frame(sock))
        assert correlation == 2
        [topic] = answer.responses
        assert int(topic.partition_responses[0].error_code) == 3  # UNKNOWN_TOPIC_OR_PARTITION
