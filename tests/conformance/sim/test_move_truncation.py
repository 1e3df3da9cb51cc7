"""A follower truncation while a move copies (SOURCE_TRUNCATED) replays in the move model.

The traces are the core's own (:func:`impl.storage.replica_move.step`); the shape is the one the
cluster simulator found (seed 25 of ``tests/conformance/cluster/test_variants.py``).
"""

from __future__ import annotations

import pytest

from conformance import SimConfig, check_trace
from conformance.move_abstraction import move_abstractions
from impl.storage import replica_move as rm
from impl.storage.names import TopicPartition
from impl.trace import TraceEvent

E = rm.MoveEvent
TP = TopicPartition("t", 0)


def _trace(*inputs: rm.MoveInput) -> list[TraceEvent]:
    move = rm.Move(TP, source_dir="/d0")
    events: list[TraceEvent] = []
    for event in inputs:
        transition = rm.step(move, event)
        move = transition.move
        events.append(transition.trace)
    return events


def _copying(source_leo: int, dest_leo: int) -> list[rm.MoveInput]:
    return [rm.MoveInput(E.REQUESTED, "/d1", source_leo=source_leo),
            rm.MoveInput(E.CHUNK_COPIED, source_leo=source_leo, dest_leo=dest_leo)]


@pytest.mark.parametrize(("cut", "then", "steps"), [
    (81, E.CAUGHT_UP, 1),  # the copy was behind; the cut made it as long as the source
    (83, E.CHUNK_COPIED, 0),  # the copy is still behind
    (0, E.CAUGHT_UP, 2),  # everything cut
])
def test_a_truncation_while_copying_conforms(cut: int, then: E, steps: int) -> None:
    dest_after = min(81, cut)
    source_after = cut + 1 if then is E.CHUNK_COPIED else cut
    events = _trace(
        *_copying(84, 81),
        rm.MoveInput(E.SOURCE_TRUNCATED, source_leo=cut, dest_leo=min(81, cut)),
        rm.MoveInput(then, source_leo=source_after,
                     dest_leo=dest_after + (1 if then is E.CHUNK_COPIED else 0)),
    )
    verdict = check_trace(events, move_abstractions(SimConfig()))
    assert verdict.ok, verdict.violation
    assert verdict.actions.get("replica_move.source_truncated", 0) == steps


def test_a_truncation_while_caught_up_conforms_and_the_swap_follows() -> None:
    events = _trace(
        rm.MoveInput(E.REQUESTED, "/d1", source_leo=84),
        rm.MoveInput(E.CAUGHT_UP, source_leo=84, dest_leo=84),
        rm.MoveInput(E.SOURCE_TRUNCATED, source_leo=81, dest_leo=81),
        rm.MoveInput(E.LOCK_ACQUIRED),
        rm.MoveInput(E.FINAL_CATCH_UP, source_leo=81, dest_leo=81),
        rm.MoveInput(E.DEST_DURABLE),
    )
    verdict = check_trace(events, move_abstractions(SimConfig()))
    assert verdict.ok, verdict.violation
    assert verdict.actions.get("replica_move.source_truncated", 0) == 0  # both cut: a stutter


def test_without_the_truncation_event_caught_up_is_refused() -> None:
    # The gap the simulator found: the copy behind, then CAUGHT_UP at a lower source LEO.
    events = _trace(*_copying(84, 81), rm.MoveInput(E.CAUGHT_UP, source_leo=81, dest_leo=81))
    violation = check_trace(events, move_abstractions(SimConfig())).violation
    assert violation is not None
    assert violation.action == "caught_up()"


def test_the_core_refuses_a_truncation_in_the_swap_or_a_longer_copy() -> None:
    with pytest.raises(rm.InvalidMoveTransition):
        _trace(rm.MoveInput(E.REQUESTED, "/d1", source_leo=4),
               rm.MoveInput(E.CAUGHT_UP, source_leo=4, dest_leo=4),
               rm.MoveInput(E.LOCK_ACQUIRED),
               rm.MoveInput(E.SOURCE_TRUNCATED, source_leo=2, dest_leo=2))
    with pytest.raises(rm.InvalidMoveTransition):
        _trace(*_copying(4, 2), rm.MoveInput(E.SOURCE_TRUNCATED, source_leo=1, dest_leo=2))
