"""After its ZooKeeper session expires the broker registers again with a new broker epoch, and a
controller request addressed to the old incarnation is STALE_BROKER_EPOCH (77)."""

from __future__ import annotations

import time

import pytest

from impl.controller import EmbeddedZooKeeper, expire_session
from impl.controller.requests import (
    BrokerEndpoint,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
)

from ._harness import RunningBroker

pytestmark = pytest.mark.integration


def test_reregistration_fences_the_old_epoch(
    broker: RunningBroker, zookeeper: EmbeddedZooKeeper
) -> None:
    old_epoch = broker.broker.broker_epoch
    coordinator = broker.broker.coordinator
    assert coordinator is not None
    client_id = coordinator.client_id
    assert client_id is not None

    async def expire() -> None:
        await expire_session(zookeeper.connect_string, client_id)

    broker.call(expire)
    deadline = time.monotonic() + 30
    while broker.broker.broker_epoch == old_epoch:
        assert time.monotonic() < deadline, "the broker did not register again"
        time.sleep(0.05)
    new_epoch = broker.broker.broker_epoch
    assert new_epoch > old_epoch
    me = BrokerEndpoint(1, "127.0.0.1", broker.broker.port)

    def request(epoch: int) -> LeaderAndIsrRequest:
        return LeaderAndIsrRequest(0, 1, epoch, (
            LeaderAndIsrPartitionState("se", 0, 1, 1, 0, (1,), 0, (1,), is_new=True),), (me,))

    assert broker.send(request(old_epoch)).error_code == 77
    assert broker.send(request(new_epoch)).error_code == 0
