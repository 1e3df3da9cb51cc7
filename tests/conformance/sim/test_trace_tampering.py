"""The move abstraction refuses real traces that were tampered with (the checker can fail)."""

from __future__ import annotations

from conformance import SimConfig, check_trace
from conformance.move_abstraction import move_abstractions
from conformance.runner import replay
from impl.trace import TraceEvent

CONFIG = SimConfig(steps=150, fault_probability=0.0)


def _swap_trace() -> list[TraceEvent]:
    for seed in range(20):
        _, outcome = replay(seed, CONFIG)
        events = list(outcome.trace)
        if any(event.event == "SOURCE_RENAMED" for event in events):
            return events
    raise AssertionError("no run of 20 seeds completed a swap")


def _index(events: list[TraceEvent], name: str) -> int:
    return next(index for index, event in enumerate(events) if event.event == name)


def test_the_real_trace_conforms() -> None:
    events = _swap_trace()
    verdict = check_trace(events, move_abstractions(CONFIG))
    assert verdict.ok, verdict.violation
    assert verdict.actions["replica_move.source_renamed"] >= 1


def test_a_rename_before_durability_is_refused() -> None:
    events = _swap_trace()
    durable = _index(events, "DEST_DURABLE")
    assert events[durable + 1].event == "SOURCE_RENAMED"
    tampered = [*events[:durable], events[durable + 1], events[durable], *events[durable + 2 :]]
    violation = check_trace(tampered, move_abstractions(CONFIG), "replay-cmd").violation
    assert violation is not None
    assert violation.index == durable
    assert violation.action == "source_renamed()"
    assert violation.kind == "not_enabled"
    assert "replay-cmd" in violation.describe()


def test_a_dropped_final_catch_up_is_refused() -> None:
    events = _swap_trace()
    lock = _index(events, "LOCK_ACQUIRED")
    caught_up = events[lock - 1]
    assert caught_up.event == "CAUGHT_UP"
    behind = TraceEvent.of(
        caught_up.machine, caught_up.event, caught_up.subject, caught_up.state_before,
        caught_up.state_after, **{**dict(caught_up.fields), "dest_leo": 1, "source_leo": 5},
    )
    tampered = [*events[: lock - 1], behind, *events[lock:]]
    violation = check_trace(tampered, move_abstractions(CONFIG)).violation
    assert violation is not None
    assert violation.index == lock - 1
    assert violation.action == "caught_up()"
