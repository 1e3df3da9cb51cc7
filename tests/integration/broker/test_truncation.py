"""KIP-101: a deposed leader that appended past the new leader's epoch start truncates to the end
offset of its epoch as the new leader reports it, then copies the new leader's log
(``LOG_MATCHING``). The test plays the controller with LeaderAndIsr over the wire."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from impl.controller.requests import (
    BrokerEndpoint,
    ControllerResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
)
from impl.storage import TopicPartition
from impl.storage.record_batch import build_batch, iter_batches
from impl.trace import ListTraceSink

from ._harness import RunningBroker
from .test_protocol_errors import Client, produce

pytestmark = pytest.mark.integration

TP = TopicPartition("kip101", 0)


def _assign(target: RunningBroker, endpoints: dict[int, BrokerEndpoint], *, leader: int,
            leader_epoch: int, isr: tuple[int, ...]) -> ControllerResponse:
    request = LeaderAndIsrRequest(
        9, 1, target.broker.broker_epoch,
        (LeaderAndIsrPartitionState(TP.topic, 0, 1, leader, leader_epoch, isr, leader_epoch,
                                    (1, 2), is_new=True),),
        (endpoints[leader],),
    )
    return target.send(request)


def _log(broker: RunningBroker) -> tuple[int, list[tuple[int, int, bytes]]]:
    def read() -> tuple[int, list[tuple[int, int, bytes]]]:
        logs = broker.broker.logs
        assert logs is not None
        partition = logs.get(TP)
        assert partition is not None
        slices = partition.read(0, 1 << 30, None)
        try:
            data = b"".join(piece.read_all() for piece in slices)
        finally:
            for piece in slices:
                piece.close()
        batches = [(h.base_offset, h.partition_leader_epoch,
                    data[h.position + 61 : h.position + h.size_in_bytes])
                   for h in iter_batches(data)]
        return partition.log_end_offset, batches

    return broker.call_sync(read)


def _wait_leo(broker: RunningBroker, leo: int) -> None:
    deadline = time.monotonic() + 30
    while _log(broker)[0] != leo:
        assert time.monotonic() < deadline, f"LEO never reached {leo}: {_log(broker)[0]}"
        time.sleep(0.05)


def test_deposed_leader_truncates_to_the_epoch_end(zk_chroot: str, tmp_path: Path) -> None:
    sink = ListTraceSink()
    first = RunningBroker(zk_chroot, tmp_path / "b1", broker_id=1, trace=sink).start()
    second = RunningBroker(zk_chroot, tmp_path / "b2", broker_id=2).start()
    try:
        endpoints = {1: BrokerEndpoint(1, "127.0.0.1", first.broker.port),
                     2: BrokerEndpoint(2, "127.0.0.1", second.broker.port)}
        assert _assign(first, endpoints, leader=1, leader_epoch=0, isr=(1,)).error_code == 0
        assert _assign(second, endpoints, leader=1, leader_epoch=0, isr=(1,)).error_code == 0
        to_first = Client(first.bootstrap)
        for index in range(10):
            assert produce(to_first, TP.topic, build_batch([b"a%d" % index]), acks=1)[0] == 0
        _wait_leo(second, 10)
        # broker 2 becomes leader in epoch 1; broker 1 does not know yet and keeps appending
        assert _assign(second, endpoints, leader=2, leader_epoch=1, isr=(2,)).error_code == 0
        for index in range(5):
            assert produce(to_first, TP.topic, build_batch([b"stale%d" % index]), acks=1)[0] == 0
        to_second = Client(second.bootstrap)
        for index in range(3):
            assert produce(to_second, TP.topic, build_batch([b"b%d" % index]), acks=1)[0] == 0
        assert _log(first)[0] == 15
        # now broker 1 learns it follows broker 2 in epoch 1: it must drop its stale suffix
        assert _assign(first, endpoints, leader=2, leader_epoch=1, isr=(2,)).error_code == 0
        _wait_leo(first, 13)
        assert _log(first) == _log(second)
        values = [payload for _, _, payload in _log(first)[1]]
        assert not any(b"stale" in value for value in values)
        truncations = [e for e in sink if e.event == "TRUNCATE"]
        assert [dict(e.fields)["truncated_to"] for e in truncations] == [10]
        to_first.close()
        to_second.close()
    finally:
        second.stop()
        first.stop()
