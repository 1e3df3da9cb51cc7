"""The trace checker: enabled actions, invariants after each event, refinement, coverage."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import pytest

from conformance.trace_check import (
    MemoizedModel,
    ModelAction,
    TraceChecker,
    check_trace,
    parse_trace_line,
)
from impl.trace import TraceEvent


@dataclass(frozen=True)
class _CopyState:
    phase: str
    source_leo: int
    dest_leo: int
    live_leo: int


class _CopyModel:
    """A copy-then-swap machine; ``guarded=False`` drops the swap's guard (a known-bad variant)."""

    name = "copy"

    def __init__(self, guarded: bool = True) -> None:
        self.guarded = guarded

    def enabled(self, state: Any, action: str, params: Mapping[str, Any] | None = None) -> bool:
        if action == "source_appended":
            return bool(state.phase == "COPYING")
        if action == "chunk_copied":
            return bool(state.phase == "COPYING" and state.dest_leo < state.source_leo)
        if action == "swapped":
            return bool(
                state.phase == "COPYING"
                and (not self.guarded or state.dest_leo == state.source_leo)
            )
        raise KeyError(action)

    def step(self, state: Any, action: str, params: Mapping[str, Any] | None = None) -> Any:
        assert self.enabled(state, action, params)
        if action == "source_appended":
            return replace(state, source_leo=state.source_leo + 1)
        if action == "chunk_copied":
            return replace(state, dest_leo=state.dest_leo + 1)
        return replace(state, phase="DONE", live_leo=state.dest_leo)

    def check_invariants(self, state: Any) -> list[str]:
        if state.phase == "DONE" and state.live_leo < state.source_leo:
            return ["MOVE_NO_LOSS"]
        return []


class _CopyAbstraction:
    machine = "replica_move"

    def __init__(self, model: _CopyModel) -> None:
        self.model = model

    def instance_key(self, event: TraceEvent) -> str:
        return event.subject

    def initial_state(self, event: TraceEvent) -> Any:
        return _CopyState("COPYING", 0, 0, 0)

    def pre_state(self, state: Any, event: TraceEvent) -> Any:
        return state

    def actions(self, state: Any, event: TraceEvent) -> list[ModelAction]:
        if event.event == "HEARTBEAT":
            return []
        if event.event == "CHUNKS_COPIED":
            return [ModelAction("chunk_copied")] * int(str(event.fields["count"]))
        names = {"SOURCE_APPENDED": "source_appended", "CHUNK_COPIED": "chunk_copied",
                 "LOG_SWAPPED": "swapped"}
        if event.event not in names:
            raise ValueError(f"unknown event {event.event}")
        return [ModelAction(names[event.event])]

    def mismatch(self, state: Any, event: TraceEvent) -> str | None:
        reported = event.fields.get("dest_leo")
        if reported is not None and reported != state.dest_leo:
            return f"implementation dest_leo {reported}, model {state.dest_leo}"
        return None


def _event(name: str, subject: str = "t-0@1", **fields: object) -> TraceEvent:
    return TraceEvent.of("replica_move", name, subject, "COPYING", "COPYING", **fields)


GOOD = [
    _event("SOURCE_APPENDED"),
    _event("CHUNK_COPIED", dest_leo=1),
    _event("SOURCE_APPENDED", subject="t-1@1"),
    TraceEvent.of("log_dir", "IO_ERROR", "dir:/a", "ONLINE", "OFFLINE"),
    _event("HEARTBEAT"),
    _event("LOG_SWAPPED"),
]


def test_conforming_trace_passes_with_coverage() -> None:
    verdict = check_trace(GOOD, [_CopyAbstraction(_CopyModel())])
    assert verdict.ok
    assert verdict.events_checked == 5
    assert verdict.events_unchecked == 1
    assert verdict.actions == {
        "replica_move.chunk_copied": 1,
        "replica_move.source_appended": 2,
        "replica_move.swapped": 1,
    }


def test_disabled_action_is_named_with_index_and_replay() -> None:
    trace = [_event("SOURCE_APPENDED"), _event("LOG_SWAPPED")]
    replay = "logproof conformance replay --seed 7"
    verdict = check_trace(trace, [_CopyAbstraction(_CopyModel())], replay)
    violation = verdict.violation
    assert violation is not None
    assert (violation.index, violation.kind, violation.action) == (1, "not_enabled", "swapped()")
    assert "replay --seed 7" in violation.describe()
    assert '"event":"LOG_SWAPPED"' in violation.describe()


def test_invariant_violation_is_named() -> None:
    trace = [_event("SOURCE_APPENDED"), _event("LOG_SWAPPED")]
    verdict = check_trace(trace, [_CopyAbstraction(_CopyModel(guarded=False))])
    assert verdict.violation is not None
    assert verdict.violation.kind == "invariant"
    assert verdict.violation.invariant == "MOVE_NO_LOSS"
    assert "MOVE_NO_LOSS" in verdict.violation.describe()


def test_refinement_mismatch_and_unmapped_events() -> None:
    trace = [_event("SOURCE_APPENDED"), _event("CHUNK_COPIED", dest_leo=2)]
    verdict = check_trace(trace, [_CopyAbstraction(_CopyModel())])
    assert verdict.violation is not None
    assert verdict.violation.kind == "state_mismatch"
    unmapped = check_trace([_event("BOGUS")], [_CopyAbstraction(_CopyModel())])
    assert unmapped.violation is not None
    assert unmapped.violation.kind == "unmapped"


def test_one_event_may_be_several_model_actions() -> None:
    trace = [_event("SOURCE_APPENDED"), _event("SOURCE_APPENDED"),
             _event("CHUNKS_COPIED", count=2, dest_leo=2), _event("LOG_SWAPPED")]
    verdict = check_trace(trace, [_CopyAbstraction(_CopyModel())])
    assert verdict.ok
    assert verdict.actions["replica_move.chunk_copied"] == 2
    too_many = [_event("SOURCE_APPENDED"), _event("CHUNKS_COPIED", count=2)]
    violation = check_trace(too_many, [_CopyAbstraction(_CopyModel())]).violation
    assert violation is not None
    assert (violation.index, violation.kind) == (1, "not_enabled")


def test_checker_stops_at_first_violation_and_keeps_it() -> None:
    checker = TraceChecker([_CopyAbstraction(_CopyModel())])
    assert checker.feed(_event("SOURCE_APPENDED")) is None
    first = checker.feed(_event("LOG_SWAPPED"))
    assert first is not None
    assert checker.feed(_event("SOURCE_APPENDED")) is first
    assert checker.state_of("replica_move", "t-0@1") == _CopyState("COPYING", 1, 0, 0)


@pytest.mark.parametrize("event", GOOD)
def test_trace_lines_round_trip(event: TraceEvent) -> None:
    assert parse_trace_line(event.to_json()) == event
    nested = TraceEvent.of("m", "E", "s", "A", "B", offsets=(1, (2, 3)), flag=True, none=None)
    assert parse_trace_line(nested.to_json()) == nested
    with pytest.raises(ValueError, match="not a trace event"):
        parse_trace_line("{}")


class _Asked:
    """A model that counts the questions it is asked (the copy model answers them)."""

    name = "copy"

    def __init__(self, model: _CopyModel) -> None:
        self.model = model
        self.asked: Counter[str] = Counter()

    def enabled(self, state: Any, action: str, params: Mapping[str, Any] | None = None) -> bool:
        self.asked["enabled"] += 1
        return self.model.enabled(state, action, params)

    def step(self, state: Any, action: str, params: Mapping[str, Any] | None = None) -> Any:
        self.asked["step"] += 1
        return self.model.step(state, action, params)

    def check_invariants(self, state: Any) -> list[str]:
        self.asked["invariants"] += 1
        return self.model.check_invariants(state)


class _AskedOnce(_Asked):
    """A model that steps without a separate guard evaluation."""

    def step_if_enabled(
        self, state: Any, action: str, params: Mapping[str, Any] | None = None
    ) -> Any:
        self.asked["step_if_enabled"] += 1
        if not self.model.enabled(state, action, params):
            return None
        return self.model.step(state, action, params)


_STATES = [
    _CopyState("COPYING", 1, 1, 0),
    _CopyState("COPYING", 2, 1, 0),
    _CopyState("DONE", 2, 1, 1),
]
_ACTIONS = ["source_appended", "chunk_copied", "swapped"]


@pytest.mark.parametrize("once", [False, True])
def test_memoized_transition_answers_as_the_model_asked_once(once: bool) -> None:
    asked = (_AskedOnce if once else _Asked)(_CopyModel(guarded=False))
    memoized = MemoizedModel(asked)
    for state in _STATES:
        for name in _ACTIONS:
            action = ModelAction(name)
            enabled = asked.model.enabled(state, name)
            successor = asked.model.step(state, name) if enabled else None
            broken = tuple(asked.model.check_invariants(successor)) if enabled else ()
            assert memoized.transition(state, action) == (enabled, successor, broken)
    first = Counter(asked.asked)
    assert ("enabled" in first) != once
    for state in _STATES:
        for name in _ACTIONS:
            memoized.transition(state, ModelAction(name))  # a new, equal action
    assert asked.asked == first


def test_memoized_transition_shares_equal_successors_and_keys_by_identity() -> None:
    asked = _Asked(_CopyModel())
    memoized = MemoizedModel(asked)
    one, other = _CopyState("COPYING", 2, 1, 0), _CopyState("COPYING", 2, 1, 0)
    _, first, _ = memoized.transition(one, ModelAction("chunk_copied"))
    _, second, _ = memoized.transition(other, ModelAction("chunk_copied"))
    assert first is second  # equal successors of two state objects: one object, ...
    assert asked.asked["step"] == 2
    assert asked.asked["invariants"] == 1  # ... whose invariants are evaluated once


def test_memo_key_is_filled_once_and_is_not_part_of_an_actions_value() -> None:
    used, fresh = ModelAction("chunk_copied", {"n": 1}), ModelAction("chunk_copied", {"n": 1})
    MemoizedModel(_CopyModel()).transition(_STATES[1], used)
    assert used.memo_key == (("n", 1),)
    assert fresh.memo_key is None
    assert used == fresh
    assert repr(used) == repr(fresh)
    assert used.label() == "chunk_copied(n=1)"


def test_a_violation_names_its_action_without_labels_built_in_advance() -> None:
    verdict = check_trace(
        [_event("SOURCE_APPENDED"), _event("CHUNK_COPIED", dest_leo=7)],
        [_CopyAbstraction(_CopyModel())],
    )
    assert verdict.violation is not None
    assert verdict.violation.kind == "state_mismatch"
    assert verdict.violation.action == "chunk_copied()"
