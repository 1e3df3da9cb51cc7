"""A LeaderAndIsr naming many partitions is applied a chunk at a time
(``CONTROLLER_CHUNK_PARTITIONS`` partitions, a checkpoint between chunks: creating 2,000 logs at
once stalled every client for tens of seconds), a new controller's first one (naming every
partition the broker hosts) alike: the controller's INIT flag does not travel on the wire."""

from __future__ import annotations

from typing import Any

import pytest

from impl.broker._handlers import CONTROLLER_CHUNK_PARTITIONS, RequestHandlers
from impl.controller.requests import LeaderAndIsrPartitionState, LeaderAndIsrRequest

from ._harness import RunningBroker

pytestmark = pytest.mark.integration

PARTITIONS = 5


def test_a_new_controllers_first_leader_and_isr_is_applied_in_chunks(
        broker: RunningBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    first, _ = broker.become_leader("t", PARTITIONS)
    assert first.error_code == 0
    applied: list[tuple[bool, int]] = []
    handle = RequestHandlers.handle_controller_request

    def spy(self: RequestHandlers, converted: Any) -> Any:
        if isinstance(converted, LeaderAndIsrRequest):
            applied.append((converted.is_init, len(converted.partition_states)))
        return handle(self, converted)

    monkeypatch.setattr(RequestHandlers, "handle_controller_request", spy)
    me = broker.config.broker_id
    # a new controller (epoch + 1) sends every partition again, one with a new leader epoch
    epoch = broker.controller_epoch + 1
    init = LeaderAndIsrRequest(
        controller_id=me, controller_epoch=epoch, broker_epoch=broker.broker.broker_epoch,
        partition_states=tuple(
            LeaderAndIsrPartitionState("t", p, epoch, me, 1 if p == 3 else 0, (me,), 0, (me,))
            for p in range(PARTITIONS)),
        live_leaders=(), is_init=True)
    response = broker.send(init)
    assert (response.error_code, response.partition_errors) == (0, {})
    chunks = -(-PARTITIONS // CONTROLLER_CHUNK_PARTITIONS)
    assert chunks > 1
    assert applied == [(False, min(CONTROLLER_CHUNK_PARTITIONS, PARTITIONS - index))
                       for index in range(0, PARTITIONS, CONTROLLER_CHUNK_PARTITIONS)]

    def leader_epochs() -> list[int]:
        replicas = broker.broker.replicas
        assert replicas is not None
        states = replicas.node.states
        return [states[key].leader_epoch for key in sorted(states) if key.topic == "t"]

    assert broker.call_sync(leader_epochs) == [0, 0, 0, 1, 0]
