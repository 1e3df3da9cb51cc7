"""Pipelined Produce requests on one connection, end to end on two brokers (docs/broker.md).

The leader holds a partition with an ISR of both brokers, but the follower has not
been told of it yet, so an acks=all Produce waits. On one connection a client sends two acks=all
Produce requests and then a ListOffsets (latest), without reading:

- the second Produce is appended while the first waits (the leader's LEO reaches 2 with no
  answer sent): the connection reads on past a Produce whose answer is deferred;
- nothing is answered, not even the ListOffsets: a request other than Produce waits for the
  deferred answers before it, as on Kafka's one-request-at-a-time connection;
- once the follower is told and fetches, the three answers arrive in request order, and the
  ListOffsets sees the high watermark past both batches.
"""

from __future__ import annotations

import select
import socket
import struct
from pathlib import Path
from typing import Any

import pytest

from impl.broker._codec import decode_response, encode_request, load_request_schema
from impl.broker._kio_build import build
from impl.storage.record_batch import build_batch
from tests.integration.broker._harness import RunningBroker
from tests.integration.cluster.test_fetch_retry import (
    FIRST,
    SECOND,
    TP,
    Controller,
    log_end_offset,
    wait_for,
)

pytestmark = pytest.mark.integration

PRODUCE_TIMEOUT_MS = 20_000
PRODUCE, LIST_OFFSETS = 0, 2
LATEST = -1


def _frame(api_key: int, version: int, correlation_id: int, data: dict[str, Any]) -> bytes:
    return encode_request(api_key, version, correlation_id, "piped",
                          build(load_request_schema(api_key, version), data))


def _produce(correlation_id: int, value: bytes) -> bytes:
    return _frame(PRODUCE, 8, correlation_id, {
        "transactional_id": None, "acks": -1, "timeout": PRODUCE_TIMEOUT_MS,
        "topic_data": [{"name": TP.topic, "partition_data": [
            {"index": TP.partition, "records": build_batch([value])}]}]})


def _list_offsets(correlation_id: int) -> bytes:
    return _frame(LIST_OFFSETS, 4, correlation_id, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": TP.topic, "partitions": [
            {"partition_index": TP.partition, "current_leader_epoch": -1,
             "timestamp": LATEST}]}]})


def _answers(sock: socket.socket, count: int) -> list[bytes]:
    data = b""
    answers: list[bytes] = []
    while len(answers) < count:
        chunk = sock.recv(1 << 16)
        assert chunk, "the leader closed the connection"
        data += chunk
        while len(data) >= 4 and len(data) >= 4 + struct.unpack_from(">i", data)[0]:
            size = struct.unpack_from(">i", data)[0]
            answers.append(data[4:4 + size])
            data = data[4 + size:]
    return answers


def _nothing_received(sock: socket.socket) -> bool:
    readable, _, _ = select.select([sock], [], [], 0)
    return not readable


def test_a_produce_is_appended_while_the_one_before_waits_and_others_wait_for_both(
    zk_chroot: str, tmp_path: Path,
) -> None:
    brokers: dict[int, RunningBroker] = {}
    try:
        for broker_id in (FIRST, SECOND):
            brokers[broker_id] = RunningBroker(zk_chroot, tmp_path / f"b{broker_id}",
                                               broker_id=broker_id, dirs=1).start()
        leader = brokers[FIRST]
        controller = Controller(brokers)
        controller.tell(FIRST, leader=FIRST, leader_epoch=1)
        host, port = leader.bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port)),
                                      timeout=PRODUCE_TIMEOUT_MS / 1000) as sock:
            sock.sendall(_produce(1, b"first") + _produce(2, b"second") + _list_offsets(3))
            wait_for(lambda: log_end_offset(leader) == 2, "the second Produce to be appended")
            assert _nothing_received(sock), "an answer left before the follower fetched"

            controller.tell(SECOND, leader=FIRST, leader_epoch=1)
            first, second, offsets = _answers(sock, 3)
        produced = []
        for correlation_id, frame in ((1, first), (2, second)):
            correlation, response = decode_response(PRODUCE, 8, frame)
            assert correlation == correlation_id
            partition = response.responses[0].partition_responses[0]
            produced.append((int(partition.error_code), int(partition.base_offset)))
        assert produced == [(0, 0), (0, 1)]
        correlation, response = decode_response(LIST_OFFSETS, 4, offsets)
        assert correlation == 3
        answer = response.topics[0].partitions[0]
        assert (int(answer.error_code), int(answer.offset)) == (0, 2)
    finally:
        for broker in reversed(brokers.values()):
            broker.stop()
