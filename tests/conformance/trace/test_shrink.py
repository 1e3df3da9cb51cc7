"""ddmin finds a 1-minimal failing fault schedule, deterministically and within its bound."""

from __future__ import annotations

from collections.abc import Sequence

from conformance.shrink import ddmin


def test_shrinks_to_the_pair_that_fails() -> None:
    calls: list[tuple[int, ...]] = []

    def fails(schedule: Sequence[int]) -> bool:
        calls.append(tuple(schedule))
        return 3 in schedule and 11 in schedule

    shrunk, runs = ddmin(list(range(20)), fails)
    assert shrunk == [3, 11]
    assert runs == len(calls)
    again, _ = ddmin(list(range(20)), lambda s: 3 in s and 11 in s)
    assert again == shrunk


def test_single_cause_and_no_cause() -> None:
    assert ddmin(list(range(9)), lambda s: 5 in s)[0] == [5]
    assert ddmin([1, 2, 3], lambda s: True)[0] == []
    assert ddmin([], lambda s: True) == ([], 0)


def test_respects_the_run_bound() -> None:
    shrunk, runs = ddmin(list(range(64)), lambda s: {1, 30, 60} <= set(s), runs_max=5)
    assert runs <= 5
    assert {1, 30, 60} <= set(shrunk)
