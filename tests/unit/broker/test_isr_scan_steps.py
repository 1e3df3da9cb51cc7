"""The leader's periodic ISR scan in steps: a periodic :class:`Tick` visits at most
``isr_scan_step_partitions`` partitions led, :class:`IsrScan` goes on with the next ones, and
the shells step it with other work in between (a broker leading 32,000 partitions held its event
loop 0.2-0.5 s for a scan in one step)."""

from __future__ import annotations

import trio

from impl.broker.node import (
    ISR_SCAN_STEP_PARTITIONS,
    IsrScan,
    LeaderAndIsr,
    Produce,
    Tick,
    WriteIsr,
)
from impl.controller.requests import LeaderAndIsrPartitionState, LeaderAndIsrRequest
from impl.storage.names import TopicPartition
from tests.loop_turns import LoopTurns
from tests.unit.broker.test_node import Harness, batch, produce_replies

LAG_MS = 100


def _lead(h: Harness, partitions: list[int], *, epoch: int = 1, leader: int = 0) -> None:
    states = tuple(
        LeaderAndIsrPartitionState("t", index, 1, leader, epoch, (0, 1), 0, (0, 1),
                                   is_new=True)
        for index in partitions)
    h.step(LeaderAndIsr(99, 1, LeaderAndIsrRequest(99, 1, 10, states, ())))


def _pending(h: Harness) -> bool:
    """A scan in progress (a function: a property read twice is narrowed by mypy)."""
    return h.node.isr_scan_pending


def _shrunk(effects: list[object]) -> list[int]:
    """The partitions whose ISR the effects ask to shrink."""
    return [e.tp.partition for e in effects if isinstance(e, WriteIsr)]


def test_a_scan_visits_its_step_of_partitions_and_goes_on_in_order() -> None:
    h = Harness(replica_lag_time_max_ms=LAG_MS, isr_scan_step_partitions=3)
    _lead(h, list(range(8)))
    h.now += LAG_MS + 1  # follower 1 silent since: every ISR shrinks
    assert _shrunk(h.step(Tick())) == [0, 1, 2]
    assert _pending(h)
    assert _shrunk(h.step(IsrScan())) == [3, 4, 5]
    assert _shrunk(h.step(IsrScan())) == [6, 7]
    assert not _pending(h)
    assert _shrunk(h.step(IsrScan())) == []  # no scan in progress: nothing


def test_a_scan_within_one_step_is_the_whole_scan() -> None:
    h = Harness(replica_lag_time_max_ms=LAG_MS)
    _lead(h, list(range(ISR_SCAN_STEP_PARTITIONS)))
    h.now += LAG_MS + 1
    assert _shrunk(h.step(Tick())) == list(range(ISR_SCAN_STEP_PARTITIONS))
    assert not _pending(h)


def test_a_periodic_tick_during_a_scan_goes_on_with_it_instead_of_starting_again() -> None:
    """Ticks coming faster than the scan's steps (a produce waiting out its timeout ticks every
    millisecond) must not restart it: the partitions at its end would never be checked."""
    h = Harness(replica_lag_time_max_ms=LAG_MS, isr_scan_step_partitions=2)
    _lead(h, list(range(5)))
    h.now += LAG_MS + 1
    assert _shrunk(h.step(Tick())) == [0, 1]
    assert _shrunk(h.step(Tick())) == [2, 3]
    assert _shrunk(h.step(Tick())) == [4]
    assert not _pending(h)


def test_leadership_changed_during_a_scan() -> None:
    """A partition no longer led when the scan reaches it is passed over; one led since the
    scan began waits for the next scan."""
    h = Harness(replica_lag_time_max_ms=LAG_MS, isr_scan_step_partitions=2)
    _lead(h, [0, 1, 2, 3])
    h.now += LAG_MS + 1
    assert _shrunk(h.step(Tick())) == [0, 1]
    _lead(h, [2], epoch=2, leader=1)  # partition 2 now follows broker 1
    _lead(h, [9])  # a new partition led
    h.now += LAG_MS + 1
    assert _shrunk(h.step(IsrScan())) == [3]
    assert not _pending(h)
    # the next scan: 0, 1 and 3 (their writes in flight) and 9
    shrunk = _shrunk(h.step(Tick()))
    while _pending(h):
        shrunk += _shrunk(h.step(IsrScan()))
    assert shrunk == [9]


def test_a_produce_times_out_when_the_scan_reaches_its_partition() -> None:
    h = Harness(replica_lag_time_max_ms=10_000, isr_scan_step_partitions=2)
    _lead(h, list(range(4)))
    h.step(Produce(50, 1, TopicPartition("t", 3), batch(0), -1, 30))
    h.now += 31
    assert produce_replies(h.step(Tick())) == []  # partitions 0 and 1
    assert [(r.tp.partition, r.error) for r in produce_replies(h.step(IsrScan()))] == [(3, 7)]


def test_the_trio_broker_lets_other_tasks_run_between_the_scans_steps() -> None:
    """``ReplicaManager.check_isr_all`` steps the whole scan, with a checkpoint between its
    steps."""
    from impl.broker.replica_manager import ReplicaManager

    h = Harness(replica_lag_time_max_ms=LAG_MS, isr_scan_step_partitions=10)
    partitions = 95
    _lead(h, list(range(partitions)))
    h.now += LAG_MS + 1
    shrunk: list[int] = []
    loop = LoopTurns()

    class Shell:
        node = h.node

        def step(self, event: object) -> list[object]:
            effects = h.step(event)
            shrunk.extend(_shrunk(effects))
            return effects

    async def scenario() -> None:
        async with loop.counting():
            await ReplicaManager.check_isr_all(Shell())  # type: ignore[arg-type]

    trio.run(scenario)
    assert shrunk == list(range(partitions))
    assert not _pending(h)
    assert loop.turns >= partitions // 10 - 1
