"""Graceful stop finishes in-flight requests; a restarted broker serves the same data and still
recognises an idempotent producer's retries (its sequence state is rebuilt from the log)."""

from __future__ import annotations

import struct
import threading
import time
from pathlib import Path

import pytest

from impl.controller.requests import (
    BrokerEndpoint,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
)
from impl.storage.record_batch import build_batch

from ._harness import RunningBroker
from .test_protocol_errors import Client, produce

pytestmark = pytest.mark.integration


def test_stop_answers_a_waiting_fetch_first(broker: RunningBroker) -> None:
    assert broker.become_leader("gs")[0].error_code == 0
    client = Client(broker.bootstrap)
    client.correlation += 1
    from kio.index import load_request_schema

    from impl.broker._codec import decode_response, encode_request
    from impl.broker._kio_build import build

    request = build(load_request_schema(1, 11), {
        "replica_id": -1, "max_wait": 20000, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": "gs", "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": "",
    })
    started = time.monotonic()
    client.sock.sendall(encode_request(1, 11, client.correlation, "t", request))
    stopper = threading.Thread(target=broker.stop)

    def fetch_waiting() -> bool:
        replicas = broker.broker.replicas
        assert replicas is not None
        return replicas.waiting_fetches() > 0

    deadline = time.monotonic() + 10
    while not broker.call_sync(fetch_waiting):
        assert time.monotonic() < deadline, "the fetch never started waiting"
    stopper.start()
    (size,) = struct.unpack(">i", client._exact(4))
    correlation, response = decode_response(1, 11, client._exact(size))
    stopper.join(30)
    assert correlation == client.correlation
    assert int(response.responses[0].partitions[0].error_code) == 0
    assert time.monotonic() - started < 10  # answered at once, not after its 20 s max_wait
    assert client.sock.recv(1) == b""  # then the connection is closed
    client.close()


def test_restart_keeps_data_and_idempotence(zk_chroot: str, tmp_path: Path) -> None:
    first = RunningBroker(zk_chroot, tmp_path).start()
    try:
        assert first.become_leader("rs")[0].error_code == 0
        client = Client(first.bootstrap)
        pid = int(client.call(22, 1, {"transactional_id": None,
                                       "transaction_timeout": 60000}).producer_id)
        batches = [build_batch([b"r%d" % i], producer_id=pid, producer_epoch=0,
                               base_sequence=i) for i in range(5)]
        assert [produce(client, "rs", batch) for batch in batches] == [
            (0, i) for i in range(5)]
        client.close()
    finally:
        first.stop()
    second = RunningBroker(zk_chroot, tmp_path).start()
    try:
        epoch = second.broker.broker_epoch
        me = BrokerEndpoint(1, "127.0.0.1", second.broker.port)
        response = second.send(LeaderAndIsrRequest(
            1, 2, epoch, (LeaderAndIsrPartitionState("rs", 0, 2, 1, 1, (1,), 1, (1,)),), (me,)))
        assert response.error_code == 0
        assert dict(response.partition_errors) == {}
        client = Client(second.bootstrap)
        assert produce(client, "rs", batches[4]) == (0, 4)  # a retry after restart: not appended
        assert produce(client, "rs", batches[0]) == (0, 0)  # still among the last five
        next_batch = build_batch([b"r5"], producer_id=pid, producer_epoch=0, base_sequence=5)
        assert produce(client, "rs", next_batch) == (0, 5)
        client.close()
    finally:
        second.stop()
