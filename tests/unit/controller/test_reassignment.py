"""The reassignment machine's pure decisions: REASSIGN_SAFE and resumability."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impl.controller.reassignment import (
    REASSIGNMENT_TRANSITIONS,
    PartitionView,
    ReassignmentEvent,
    ReassignmentPhase,
    ReassignmentTransitionError,
    classify,
    expanded_assignment,
    ready_to_switch,
    step,
    switched_leader_isr,
)
from impl.controller.requests import NO_LEADER


def test_phases_run_in_order() -> None:
    phase = ReassignmentPhase.NONE
    for event in (ReassignmentEvent.REASSIGN_STARTED, ReassignmentEvent.LEADER_ELECTED,
                  ReassignmentEvent.ISR_CHANGED, ReassignmentEvent.LEADER_ELECTED,
                  ReassignmentEvent.REASSIGN_COMPLETED, ReassignmentEvent.REASSIGN_COMPLETED):
        phase = step(phase, event)
    assert phase is ReassignmentPhase.DONE
    with pytest.raises(ReassignmentTransitionError):
        step(ReassignmentPhase.NONE, ReassignmentEvent.REASSIGN_COMPLETED)
    assert all(after is not ReassignmentPhase.NONE for after in REASSIGNMENT_TRANSITIONS.values())


def test_classify_from_zookeeper_state_alone() -> None:
    target = (1, 2)
    start = PartitionView((0, 1), (), (), (0, 1), 0)
    assert classify(start, target) is ReassignmentPhase.NONE
    replicas, adding, removing = expanded_assignment(start, target)
    assert (replicas, adding, removing) == ((1, 2, 0), (2,), (0,))
    added = PartitionView(replicas, adding, removing, (0, 1), 0)
    assert classify(added, target) is ReassignmentPhase.CATCHING_UP
    assert not ready_to_switch(added, target)
    caught_up = PartitionView(replicas, adding, removing, (0, 1, 2), 0)
    assert ready_to_switch(caught_up, target)
    assert switched_leader_isr(caught_up, target, {0, 1, 2}) == (1, (1, 2))
    # A failover between the two writes finds AR + RAR again: no second expansion.
    assert expanded_assignment(added, target) == (replicas, adding, removing)
    assert classify(PartitionView(target, (), (), (1, 2), 1), target) is ReassignmentPhase.DONE


def test_switching_before_rar_in_isr_is_refused() -> None:
    view = PartitionView((1, 2, 0), (2,), (0,), (0, 1), 0)
    with pytest.raises(AssertionError, match="REASSIGN_SAFE"):
        switched_leader_isr(view, (1, 2), {0, 1, 2})


brokers = st.integers(min_value=0, max_value=5)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    original=st.lists(brokers, min_size=1, max_size=4, unique=True),
    target=st.lists(brokers, min_size=1, max_size=4, unique=True),
    extra_isr=st.sets(brokers),
    eligible=st.sets(brokers),
    leader_index=st.integers(min_value=0, max_value=3),
)
def test_reassign_safe(original: list[int], target: list[int], extra_isr: set[int],
                       eligible: set[int], leader_index: int) -> None:
    leader = original[leader_index % len(original)]
    view = PartitionView(tuple(original), (), (), (leader,), leader)
    replicas, adding, removing = expanded_assignment(view, target)
    assert set(replicas) == set(original) | set(target)
    assert replicas[: len(target)] == tuple(target)
    isr = tuple(dict.fromkeys([leader, *sorted((extra_isr | set(target)) & set(replicas))]))
    caught_up = PartitionView(replicas, adding, removing, isr, leader)
    new_leader, new_isr = switched_leader_isr(caught_up, target, eligible)
    assert set(new_isr) == set(target), "REASSIGN_SAFE: no replica of RAR is dropped"
    assert new_leader == NO_LEADER or (new_leader in target and new_leader in eligible)
    if leader in target and leader in eligible:
        assert new_leader == leader
