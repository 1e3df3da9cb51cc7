"""KIP-101 scenario 1 on two real brokers: a follower whose HW lags one fetch restarts,
truncates, and is elected when the leader dies.

With ``replica.truncation.policy=high_watermark`` (the design V3 text) the restarted follower
truncates to its own HW and drops a record the leader acknowledged with acks=all; once it leads,
that record is gone. With ``leader_epoch`` (KIP-101/279) it asks the leader for the end offset
of its epoch, keeps the record, and nothing is lost.

The test plays the controller (LeaderAndIsr over the wire) and gates the follower's fetches, so
every fetch happens when the script says. The follower's last fetch before its restart (the one
that tells the leader its LEO, whose answer would carry the new HW) is sent by the test on the
follower's behalf: the leader sees it, the follower never sees the answer, as when a follower
stops between a fetch and its response.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import trio

from impl.broker import api_versions
from impl.broker.replica_fetcher import FETCH_VERSION, ReplicaFetcher
from impl.broker.replication import TruncationPolicy
from impl.controller.requests import (
    BrokerEndpoint,
    ControllerResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
)
from impl.storage import PartitionLog, TopicPartition
from impl.storage.record_batch import build_batch, iter_batches
from impl.trace import ListTraceSink
from tests.integration.broker._harness import RunningBroker
from tests.integration.broker.test_protocol_errors import Client, produce

pytestmark = pytest.mark.integration

TP = TopicPartition("kip101", 0)
LEADER, FOLLOWER = 1, 2
WAIT_SECONDS = 20.0


class FetchGate:
    """Lets a broker's replica fetcher send a fetch only when the test grants one."""

    def __init__(self, broker: RunningBroker) -> None:
        self.broker = broker
        self.permits = 0
        self.completed = 0
        self._changed = trio.Event()
        assert broker.broker.replicas is not None
        fetcher: ReplicaFetcher = broker.broker.replicas.fetcher
        original: Callable[..., Awaitable[None]] = fetcher._fetch_once

        async def gated(connection: Any, partitions: Any) -> None:
            while self.permits == 0:
                await self._changed.wait()
            self.permits -= 1
            await original(connection, partitions)
            self.completed += 1

        broker.call_sync(lambda: setattr(fetcher, "_fetch_once", gated))

    def grant(self) -> int:
        """Allow one more fetch; returns the number of fetches to wait for."""

        def grant() -> int:
            self.permits += 1
            self._changed.set()
            self._changed = trio.Event()
            return self.completed + 1

        return self.broker.call_sync(grant)

    def wait_completed(self, count: int) -> None:
        wait_for(lambda: self.broker.call_sync(lambda: self.completed) >= count,
                 f"{count} fetches")


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def assign(target: RunningBroker, endpoints: dict[int, BrokerEndpoint], *, leader: int,
           leader_epoch: int, isr: tuple[int, ...]) -> None:
    request = LeaderAndIsrRequest(
        9, 1, target.broker.broker_epoch,
        (LeaderAndIsrPartitionState(TP.topic, 0, 1, leader, leader_epoch, isr, leader_epoch,
                                    (LEADER, FOLLOWER), is_new=True),),
        (endpoints[leader],),
    )
    response: ControllerResponse = target.send(request)
    assert response.error_code == 0


def partition(broker: RunningBroker) -> PartitionLog:
    logs = broker.broker.logs
    assert logs is not None
    found = logs.get(TP)
    assert found is not None
    return found


def offsets(broker: RunningBroker) -> tuple[int, int]:
    """(LEO, HW) of the partition on ``broker``."""
    return broker.call_sync(lambda: (partition(broker).log_end_offset,
                                     partition(broker).high_watermark))


def records(*values: bytes) -> list[bytes]:
    """The record sections of single-record batches holding ``values``, as stored."""
    return [build_batch([value])[61:] for value in values]


def stored(broker: RunningBroker) -> list[bytes]:
    """The record section of every batch in the partition on ``broker``."""

    def read() -> list[bytes]:
        slices = partition(broker).read(0, 1 << 30, None)
        try:
            data = b"".join(piece.read_all() for piece in slices)
        finally:
            for piece in slices:
                piece.close()
        return [data[h.position + 61 : h.position + h.size_in_bytes] for h in iter_batches(data)]

    return broker.call_sync(read)


def fetch_as_follower(leader: RunningBroker, fetch_offset: int) -> int:
    """Send the follower's next fetch to the leader; returns the HW in the answer."""
    client = Client(leader.bootstrap)
    try:
        response = client.call(api_versions.FETCH, FETCH_VERSION, {
            "replica_id": FOLLOWER, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TP.topic, "partitions": [{
                "partition": 0, "current_leader_epoch": 0, "fetch_offset": fetch_offset,
                "log_start_offset": 0, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": "",
        })
    finally:
        client.close()
    result = response.responses[0].partitions[0]
    assert int(result.error_code) == 0
    return int(result.high_watermark)


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=1) as executor:
        yield executor


def produce_acks_all(pool: ThreadPoolExecutor, leader: RunningBroker,
                     value: bytes) -> Future[tuple[int, int]]:
    def run() -> tuple[int, int]:
        client = Client(leader.bootstrap)
        try:
            return produce(client, TP.topic, build_batch([value]), acks=-1)
        finally:
            client.close()

    return pool.submit(run)


@pytest.mark.parametrize(("policy", "lost"), [
    (TruncationPolicy.HIGH_WATERMARK, True),
    (TruncationPolicy.LEADER_EPOCH, False),
])
def test_scenario_1_follower_restart_then_leader_failure(
    zk_chroot: str, tmp_path: Path, pool: ThreadPoolExecutor, policy: TruncationPolicy,
    lost: bool,
) -> None:
    overrides = [f"replica.truncation.policy={policy.value.lower()}"]
    sink = ListTraceSink()
    leader = RunningBroker(zk_chroot, tmp_path / "a", broker_id=LEADER, dirs=1,
                           overrides=overrides).start()
    follower: RunningBroker | None = None
    try:
        follower = RunningBroker(zk_chroot, tmp_path / "b", broker_id=FOLLOWER, dirs=1,
                                 overrides=overrides).start()
        gate = FetchGate(follower)
        endpoints = {LEADER: BrokerEndpoint(LEADER, "127.0.0.1", leader.broker.port),
                     FOLLOWER: BrokerEndpoint(FOLLOWER, "127.0.0.1", follower.broker.port)}
        both = (LEADER, FOLLOWER)
        assign(leader, endpoints, leader=LEADER, leader_epoch=0, isr=both)
        assign(follower, endpoints, leader=LEADER, leader_epoch=0, isr=both)

        # m0: the follower copies it, then tells the leader (HW 1, m0 acknowledged)
        first = produce_acks_all(pool, leader, b"m0")
        wait_for(lambda: offsets(leader)[0] == 1, "m0 on the leader")
        gate.wait_completed(gate.grant())
        gate.wait_completed(gate.grant())
        assert first.result(WAIT_SECONDS) == (0, 0)
        assert offsets(follower) == (1, 1)

        # m1: the follower copies it; its fetch answer still says HW 1
        second = produce_acks_all(pool, leader, b"m1")
        wait_for(lambda: offsets(leader)[0] == 2, "m1 on the leader")
        gate.wait_completed(gate.grant())
        assert offsets(follower) == (2, 1)
        assert not second.done()
        # its next fetch reaches the leader (HW 2, m1 acknowledged); the follower stops before
        # it sees the answer
        assert fetch_as_follower(leader, 2) == 2
        assert second.result(WAIT_SECONDS) == (0, 1)
        assert offsets(leader) == (2, 2)
        follower.stop()

        # the follower restarts, follows the same leader again and truncates before fetching
        follower = RunningBroker(zk_chroot, tmp_path / "b", broker_id=FOLLOWER, dirs=1,
                                 overrides=overrides, trace=sink).start()
        FetchGate(follower)  # no fetch is ever granted: it must not copy m1 back
        endpoints[FOLLOWER] = BrokerEndpoint(FOLLOWER, "127.0.0.1", follower.broker.port)
        assert offsets(follower) == (2, 1)
        assign(follower, endpoints, leader=LEADER, leader_epoch=0, isr=both)
        assert follower.broker.replicas is not None
        node = follower.broker.replicas.node
        restarted = follower
        wait_for(lambda: restarted.call_sync(
            lambda: TP in node.followed and node.followed[TP].truncated
        ), "the follower's truncation")

        # the leader dies; the follower is elected (it is in the ISR: a clean election)
        leader.stop()
        assign(follower, endpoints, leader=FOLLOWER, leader_epoch=1, isr=(FOLLOWER,))
        survived = stored(follower)
        truncations = [dict(e.fields) for e in sink if e.event == "TRUNCATE"]
        if lost:
            assert survived == records(b"m0"), "the acknowledged m1 should be lost"
            assert truncations == [{"policy": "HIGH_WATERMARK", "log_end_offset": 2,
                                    "truncated_to": 1, "high_watermark": 1}]
        else:
            assert survived == records(b"m0", b"m1")
            assert truncations == []
    finally:
        if follower is not None:
            follower.stop()
        leader.stop()
