"""Wire-level behaviour: Produce validation codes, idempotence, topic-name rules, ApiVersions
fallback, and the controller-request fences (STALE_CONTROLLER_EPOCH, STALE_BROKER_EPOCH,
FENCED_LEADER_EPOCH)."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema

from impl.broker._codec import decode_response, encode_request
from impl.broker._kio_build import build
from impl.controller.requests import (
    BrokerEndpoint,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from impl.storage import TopicPartition
from impl.storage.record_batch import build_batch, crc32c

from ._harness import RunningBroker

pytestmark = pytest.mark.integration


class Client:
    """A raw wire client on one connection."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def _exact(self, count: int) -> bytes:
        data = bytearray()
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return bytes(data)

    def raw(self, frame: bytes) -> bytes:
        self.sock.sendall(frame)
        (size,) = struct.unpack(">i", self._exact(4))
        return self._exact(size)

    def call(self, api_key: int, version: int, data: dict[str, Any]) -> Any:
        self.correlation += 1
        request_class = load_request_schema(api_key, version)
        frame = encode_request(api_key, version, self.correlation, "t", build(request_class, data))
        correlation, response = decode_response(api_key, version, self.raw(frame))
        assert correlation == self.correlation
        return response


def produce(client: Client, topic: str, records: bytes, acks: int = -1) -> tuple[int, int]:
    response = client.call(0, 8, {"transactional_id": None, "acks": acks, "timeout": 5000,
                                  "topic_data": [{"name": topic, "partition_data": [
                                      {"index": 0, "records": records}]}]})
    partition = response.responses[0].partition_responses[0]
    return int(partition.error_code), int(partition.base_offset)


def test_produce_validation_codes(broker: RunningBroker) -> None:
    assert broker.become_leader("pv")[0].error_code == 0
    client = Client(broker.bootstrap)
    try:
        good = build_batch([b"a", b"b"], timestamp_ms=5)
        assert produce(client, "pv", good) == (0, 0)
        corrupt = bytearray(good)
        corrupt[-1] ^= 0xFF
        assert produce(client, "pv", bytes(corrupt))[0] == 2  # CORRUPT_MESSAGE
        assert produce(client, "pv", build_batch([b"x"], base_offset=9))[0] == 87
        miscount = bytearray(good)
        struct.pack_into(">i", miscount, 57, 5)  # record count != last offset delta + 1
        assert produce(client, "pv", bytes(miscount))[0] in (2, 87)
        assert produce(client, "pv", good + good)[0] == 87  # two batches in one partition
        assert produce(client, "pv", build_batch([b"z" * 1_100_000]))[0] == 10
        assert produce(client, "pv", good, acks=5)[0] == 21
        assert produce(client, "no-such-topic", good)[0] == 3
        assert produce(client, "../../etc", good)[0] == 17
        assert produce(client, "pv", good) == (0, 2)

        def strict() -> None:
            replicas = broker.broker.replicas
            assert replicas is not None
            replicas.timestamp_difference_max_ms = 60_000

        broker.call_sync(strict)
        assert produce(client, "pv", good)[0] == 32  # stamped 5 ms after 1970: INVALID_TIMESTAMP
        now = build_batch([b"now"], timestamp_ms=int(time.time() * 1000))
        assert produce(client, "pv", now) == (0, 4)
    finally:
        client.close()
    silent = Client(broker.bootstrap)
    try:  # acks=0: no answer on success; a failure closes the connection
        request_class = load_request_schema(0, 8)

        def fire(records: bytes) -> None:
            silent.correlation += 1
            silent.sock.sendall(encode_request(0, 8, silent.correlation, "t", build(
                request_class, {"transactional_id": None, "acks": 0, "timeout": 1000,
                                "topic_data": [{"name": "pv", "partition_data": [
                                    {"index": 0, "records": records}]}]})))

        fire(good)
        fire(bytes(corrupt))
        try:  # closed: an orderly FIN, or an RST when the broker closed with bytes unread
            closed = silent.sock.recv(1) == b""
        except ConnectionResetError:
            closed = True
        assert closed
    finally:
        silent.close()


def test_idempotent_retry_is_not_appended_twice(broker: RunningBroker) -> None:
    assert broker.become_leader("id")[0].error_code == 0
    client = Client(broker.bootstrap)
    try:
        pid = client.call(22, 1, {"transactional_id": None, "transaction_timeout": 60000})
        assert pid.error_code == 0
        producer_id = int(pid.producer_id)

        def batch(sequence: int, count: int = 2) -> bytes:
            return build_batch([b"s%d" % (sequence + i) for i in range(count)],
                               producer_id=producer_id, producer_epoch=0,
                               base_sequence=sequence)

        assert produce(client, "id", batch(0)) == (0, 0)
        assert produce(client, "id", batch(0)) == (0, 0)  # retry: same offsets, not appended
        assert produce(client, "id", batch(2)) == (0, 2)
        assert produce(client, "id", batch(7))[0] == 45  # gap: OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(client, "id", batch(4)) == (0, 4)
        # a header that miscounts its records (its CRC right): INVALID_RECORD before any
        # sequence is judged, for a retry of the last batch and for the next one alike
        for count in (0, -1, 5):
            for sequence in (4, 6):
                lying = bytearray(batch(sequence))
                struct.pack_into(">i", lying, 57, count)
                struct.pack_into(">I", lying, 17, crc32c(bytes(lying[21:])))
                assert produce(client, "id", bytes(lying))[0] == 87
        assert produce(client, "id", batch(6)) == (0, 6)

        def end_offset() -> int:
            logs = broker.broker.logs
            assert logs is not None
            partition = logs.get(TopicPartition("id", 0))
            assert partition is not None
            return partition.log_end_offset

        assert broker.call_sync(end_offset) == 8
        other = client.call(22, 1, {"transactional_id": None, "transaction_timeout": 60000})
        assert int(other.producer_id) != producer_id
        transactional = client.call(22, 1, {"transactional_id": "tx", "transaction_timeout": 1})
        assert transactional.error_code != 0
    finally:
        client.close()


def test_topic_name_rules_and_api_versions_fallback(broker: RunningBroker) -> None:
    client = Client(broker.bootstrap)
    try:
        response = client.call(19, 4, {"topics": [
            {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
             "configs": []}
            for name in ("..", "a/b", "x" * 250, "")
        ], "timeout": 1000, "validate_only": False})
        assert [int(t.error_code) for t in response.topics] == [17, 17, 17, 17]
        fallback = client.raw(struct.pack(">ihhi", 14, 18, 9, 99) + b"\x00\x00\x00\x00\x00\x00")
        correlation, error_code, count = struct.unpack_from(">ihi", fallback)
        assert (correlation, error_code, count) == (99, 35, 1)
        assert struct.unpack_from(">hhh", fallback, 10) == (18, 0, 3)
        versions = client.call(18, 3, {"client_software_name": "t",
                                       "client_software_version": "1"})
        advertised = {int(k.api_key): (int(k.min_version), int(k.max_version))
                      for k in versions.api_keys}
        assert advertised[0] == (3, 8)
        assert advertised[1] == (4, 11)
        assert 4 not in advertised
    finally:
        client.close()


def test_controller_request_fences(broker: RunningBroker) -> None:
    epoch = broker.broker.broker_epoch
    me = BrokerEndpoint(1, "127.0.0.1", broker.broker.port)

    def leader_and_isr(controller_epoch: int, broker_epoch: int,
                       leader_epoch: int) -> LeaderAndIsrRequest:
        return LeaderAndIsrRequest(
            0, controller_epoch, broker_epoch,
            (LeaderAndIsrPartitionState("fe", 0, controller_epoch, 1, leader_epoch, (1,), 0,
                                        (1,), is_new=True),), (me,))

    assert broker.send(leader_and_isr(5, epoch, 3)).error_code == 0
    assert broker.send(leader_and_isr(4, epoch, 4)).error_code == 11
    assert broker.send(leader_and_isr(5, epoch - 1, 4)).error_code == 77
    fenced = broker.send(leader_and_isr(5, epoch, 2))
    assert fenced.error_code == 0
    assert dict(fenced.partition_errors) == {("fe", 0): 74}
    assert broker.send(UpdateMetadataRequest(0, 3, epoch, (me,), ())).error_code == 11
    stop = broker.send(StopReplicaRequest(0, 5, epoch, (StopReplicaPartition("fe", 0, 1, True),)))
    assert dict(stop.partition_errors) == {("fe", 0): 74}
    stop = broker.send(StopReplicaRequest(0, 5, epoch, (StopReplicaPartition("fe", 0, 3, True),)))
    assert stop.error_code == 0
    assert dict(stop.partition_errors) == {}

    def hosted() -> bool:
        logs = broker.broker.logs
        assert logs is not None
        return logs.get(TopicPartition("fe", 0)) is not None

    assert not broker.call_sync(hosted)


def test_min_insync_replicas(zk_chroot: str, tmp_path: Path) -> None:
    strict = RunningBroker(zk_chroot, tmp_path, overrides=["min.insync.replicas=2"]).start()
    try:
        assert strict.become_leader("mi")[0].error_code == 0
        client = Client(strict.bootstrap)
        assert produce(client, "mi", build_batch([b"x"]), acks=-1)[0] == 19
        assert produce(client, "mi", build_batch([b"x"]), acks=1) == (0, 0)
        client.close()
    finally:
        strict.stop()


@pytest.mark.parametrize(("api_key", "data"), [
    (17, {"mechanism": "PLAIN"}),
    (36, {"auth_bytes": b"\0alice\0secret"}),
])
def test_sasl_request_on_a_listener_without_sasl(broker: RunningBroker, api_key: int,
                                                 data: dict[str, Any]) -> None:
    """SaslHandshake or SaslAuthenticate on a PLAINTEXT listener is answered ILLEGAL_SASL_STATE
    (34), as Kafka does, then the connection closes; the broker serves the next client."""
    client = Client(broker.bootstrap)
    try:
        response = client.call(api_key, 1, data)
        assert int(response.error_code) == 34
        with pytest.raises(ConnectionError):
            client.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    finally:
        client.close()
    other = Client(broker.bootstrap)
    try:
        versions = other.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert int(versions.error_code) == 0
    finally:
        other.close()
