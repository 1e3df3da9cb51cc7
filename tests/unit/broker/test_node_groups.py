"""The group coordinator hosted by the broker node (:mod:`impl.broker.node_groups`).

The node turns its own leadership changes of ``__consumer_offsets`` partitions into the
coordinator's load and unload, carries the coordinator's writes as acks=all produces of its own
and answers group requests: the trio broker and the simulator only carry these effects out.
"""

from __future__ import annotations

from typing import Any

from impl.broker import group_coordinator as gc
from impl.broker.node import (
    Append,
    Appended,
    FetchCall,
    GroupCall,
    LeaderAndIsr,
    Produce,
    Reply,
    Tick,
)
from impl.controller.requests import LeaderAndIsrPartitionState, LeaderAndIsrRequest
from impl.storage.names import TopicPartition

from .test_node import Harness, batch

OFFSETS = TopicPartition(gc.OFFSETS_TOPIC, 0)
CLIENT = 77


def hosting(broker_id: int = 0) -> Harness:
    h = Harness(broker_id, min_insync_replicas=2)
    coordinator = gc.GroupCoordinator(
        broker_id, gc.CoordinatorConfig(offsets_partitions=1, initial_rebalance_delay_ms=0),
        new_member_suffix=lambda: "m", trace=h.trace)
    h.node.host_groups(coordinator, 5_000)
    return h


def offsets_leader_and_isr(h: Harness, leader: int, epoch: int, zk_version: int = 0,
                           *, load: bool = True) -> None:
    state = LeaderAndIsrPartitionState(OFFSETS.topic, OFFSETS.partition, h.controller_epoch,
                                       leader, epoch, (0, 1), zk_version, (0, 1), is_new=True)
    h.step(LeaderAndIsr(99, 1, LeaderAndIsrRequest(99, h.controller_epoch, 10, (state,), ())))
    if load:
        h.step(Tick(periodic=False))  # (each chunk of a load is read on a tick)


def answers(effects: list[Any]) -> dict[int, dict[str, Any]]:
    return {e.message.request_id: dict(e.message.body) for e in effects
            if isinstance(e, Reply) and isinstance(e.message, gc.Respond)}


def commit(request_id: int, offset: int) -> GroupCall:
    return GroupCall(CLIENT, gc.OffsetCommit(request_id, "g", -1, "", None, -1, (
        gc.CommitEntry("t", 0, offset, -1, None),)))


def fetch(request_id: int) -> GroupCall:
    return GroupCall(CLIENT, gc.OffsetFetch(request_id, "g", (("t", 0),)))


def events(h: Harness) -> list[str]:
    return [e.event for e in h.trace.events if e.machine == gc.MACHINE]


def test_leadership_loads_the_partition_and_a_commit_waits_for_the_isr() -> None:
    h = hosting()
    assert answers(h.step(fetch(1)))[1]["error_code"] == gc.NOT_COORDINATOR
    offsets_leader_and_isr(h, 0, 1)
    assert events(h) == ["COORDINATOR_ELECTED", "LOAD_COMPLETED"]
    # the commit is the node's own acks=all produce: no answer before the follower has it
    assert answers(h.step(commit(2, 42))) == {}
    assert h.store.logs[OFFSETS].log_end_offset == 1
    done = answers(h.step(FetchCall(5, 1, 1, OFFSETS, 1, 1)))
    assert done[2]["partitions"] == {("t", 0): gc.NONE}
    assert answers(h.step(fetch(3)))[3]["partitions"][("t", 0)].offset == 42


def test_losing_leadership_unloads_and_a_new_term_reloads_from_the_log() -> None:
    h = hosting()
    offsets_leader_and_isr(h, 0, 1)
    h.step(commit(1, 7))
    h.step(FetchCall(5, 1, 1, OFFSETS, 1, 1))
    offsets_leader_and_isr(h, 1, 2, zk_version=1)
    assert events(h)[-1] == "COORDINATOR_RESIGNED"
    assert answers(h.step(fetch(2)))[2]["error_code"] == gc.NOT_COORDINATOR
    offsets_leader_and_isr(h, 0, 3, zk_version=2)
    assert events(h)[-2:] == ["COORDINATOR_ELECTED", "LOAD_COMPLETED"]
    assert answers(h.step(fetch(3)))[3]["partitions"][("t", 0)].offset == 7


def test_a_commit_waiting_when_leadership_moves_is_refused() -> None:
    h = hosting()
    offsets_leader_and_isr(h, 0, 1)
    assert answers(h.step(commit(1, 9))) == {}
    # the follower never fetched: the new term fails the waiting produce, and the commit
    # answers an error instead of an acknowledgement
    effects: list[Any] = []
    state = LeaderAndIsrPartitionState(OFFSETS.topic, OFFSETS.partition, h.controller_epoch,
                                       1, 2, (0, 1), 1, (0, 1), is_new=False)
    effects = h.step(LeaderAndIsr(99, 2, LeaderAndIsrRequest(99, h.controller_epoch, 10,
                                                              (state,), ())))
    assert answers(effects)[1]["partitions"][("t", 0)] == gc.NOT_COORDINATOR


def test_requests_meet_the_load_under_way_then_the_loaded_partition() -> None:
    h = hosting()
    offsets_leader_and_isr(h, 0, 1, load=False)
    assert events(h) == ["COORDINATOR_ELECTED"]
    assert answers(h.step(fetch(1)))[1]["error_code"] == gc.COORDINATOR_LOAD_IN_PROGRESS
    h.step(Tick(periodic=False))
    assert events(h)[-1] == "LOAD_COMPLETED"
    assert answers(h.step(fetch(2)))[2]["error_code"] == gc.NONE


def test_the_coordinators_writes_are_marked_and_a_clients_are_not() -> None:
    """The node marks the coordinator's own appends (``Append.coordinator``): any step may emit
    them, so the trio shell runs each in a task of its own; a client's append (here the same
    partition's, by a produce) is its request's and is carried with it."""
    h = hosting()
    offsets_leader_and_isr(h, 0, 1)
    marked = [e for e in h.node.step(commit(1, 42)) if isinstance(e, Append)]
    assert [(e.tp, e.coordinator) for e in marked] == [(OFFSETS, True)]
    h.step(Appended(OFFSETS, marked[0].token, 0, *h.store.logs[OFFSETS].append(
        marked[0].records, marked[0].leader_epoch)))
    produced = [e for e in h.node.step(Produce(CLIENT, 2, OFFSETS, batch(0), 1, 1_000))
                if isinstance(e, Append)]
    assert [(e.tp, e.coordinator) for e in produced] == [(OFFSETS, False)]
