"""The fetch purgatory's rules (impl/broker/purgatory.py): what a node step's effects change,
whom a change wakes, when a delayed fetch is answered, and what a Fetch's partitions take of its
byte budget. The trio broker's waiting (test_delayed_fetch_wake.py) and Fetch handler and the
cluster simulator's parked fetches and answered rounds all follow them."""

from __future__ import annotations

from impl.broker.node import HighWatermarkMoved, LogChanged, RoleChanged, WriteIsr
from impl.broker.purgatory import (
    EVERYTHING,
    Change,
    FetchBudget,
    Purgatory,
    appended,
    changes_of,
    fetch_answered,
    partition_limit,
)
from impl.storage.names import TopicPartition

A = TopicPartition("t", 0)
B = TopicPartition("t", 1)
C = TopicPartition("u", 0)


def test_a_role_change_stands_for_everything() -> None:
    effects = [LogChanged(A), RoleChanged(B, None, None), HighWatermarkMoved(C, 3)]
    assert changes_of(effects) == [EVERYTHING]


def test_logs_then_high_watermarks_in_order() -> None:
    effects = [HighWatermarkMoved(C, 3), LogChanged(A), WriteIsr(A, 1, 1, (1,), 1, 0, (1, 2)),
               LogChanged(B)]
    assert changes_of(effects) == [Change((A, B), True), Change((C,), False)]
    assert changes_of([]) == []
    assert appended(A) == Change((A,), True)


def test_a_change_wakes_the_watchers_of_its_partitions_and_those_of_none() -> None:
    purgatory: Purgatory[str] = Purgatory()
    purgatory.watch("a", [A], records_only=True)
    purgatory.watch("bc", [B, C], records_only=False)
    purgatory.watch("anything", None, records_only=False)
    assert len(purgatory) == 3
    assert purgatory.watching_partitions() == 2
    assert purgatory.woken(Change((C,), True)) == ["bc", "anything"]
    # woken watchers leave: the same change wakes no one else
    assert purgatory.woken(Change((C,), True)) == []
    assert purgatory.woken(Change((A,), True)) == ["a"]
    assert len(purgatory) == 0


def test_a_follower_fetch_is_not_woken_by_a_high_watermark_alone() -> None:
    purgatory: Purgatory[str] = Purgatory()
    purgatory.watch("follower", [A], records_only=True)
    purgatory.watch("consumer", [A], records_only=False)
    purgatory.watch("metadata", None, records_only=False)
    purgatory.watch("records anywhere", None, records_only=True)
    assert purgatory.woken(Change((A,), False)) == ["consumer", "metadata"]
    assert purgatory.woken(Change((B,), False)) == []
    assert purgatory.woken(Change((B,), True)) == ["records anywhere"]
    assert purgatory.woken(Change((A,), True)) == ["follower"]


def test_everything_wakes_every_watcher_in_the_order_they_started() -> None:
    purgatory: Purgatory[int] = Purgatory()
    for watcher, partitions in ((3, [B]), (1, None), (2, [A, B])):
        purgatory.watch(watcher, partitions, records_only=True)
    assert purgatory.woken(Change(None, False)) == []  # every one of them is records_only
    assert purgatory.woken(Change((B,), True)) == [3, 1, 2]
    for watcher, partitions in ((5, [A]), (4, [C])):
        purgatory.watch(watcher, partitions, records_only=False)
    assert purgatory.woken(EVERYTHING) == [5, 4]


def test_forgetting_is_idempotent_and_clears_every_partition() -> None:
    purgatory: Purgatory[str] = Purgatory()
    purgatory.watch("ab", [A, B], records_only=False)
    purgatory.watch("none", None, records_only=False)
    purgatory.forget("ab")
    purgatory.forget("ab")
    purgatory.forget("never")
    assert purgatory.woken(Change((A,), True)) == ["none"]
    purgatory.watch("ab", [A, B], records_only=False)  # may watch again once gone
    assert purgatory.woken(Change((B,), True)) == ["ab"]
    assert len(purgatory) == 0


def test_a_delayed_fetch_is_answered_on_bytes_an_error_its_deadline_or_a_stop() -> None:
    def answered(total: int = 0, *, errors: bool = False, now: float = 1.0,
                 stopping: bool = False) -> bool:
        return fetch_answered(total_bytes=total, min_bytes=1, errors=errors, now=now,
                              deadline=2.0, stopping=stopping)

    assert not answered()
    assert answered(1)
    assert answered(errors=True)
    assert answered(now=2.0)
    assert not answered(now=1.999)
    assert answered(stopping=True)
    assert fetch_answered(total_bytes=0, min_bytes=0, errors=False, now=0.0, deadline=5.0,
                          stopping=False)


def test_partition_limit() -> None:
    assert partition_limit(100, 1000, have_data=True) == 100
    assert partition_limit(100, 30, have_data=True) == 30
    assert partition_limit(100, 0, have_data=True) == -1
    assert partition_limit(100, -5, have_data=False) == 0


def test_a_budget_is_shared_by_the_partitions_in_the_order_they_are_read() -> None:
    budget = FetchBudget(250)
    assert budget.limit(100) == 100
    budget.took(100, error=False)
    assert budget.limit(200) == 150  # (what is left of the request's)
    budget.took(150, error=False)
    assert budget.limit(100) == -1  # spent, and data returned already: read nothing
    budget.took(0, error=False)
    assert (budget.total_bytes, budget.errors) == (250, False)
    assert budget.answered(min_bytes=1, now=0, deadline=10, stopping=False)


def test_a_budget_spent_before_any_data_still_reads_a_first_batch_whole() -> None:
    budget = FetchBudget(0)
    assert budget.limit(100) == 0  # (the node returns the first batch, however large)
    budget.took(0, error=False)
    assert budget.limit(100) == 0
    assert not budget.answered(min_bytes=1, now=0, deadline=10, stopping=False)
    assert budget.answered(min_bytes=1, now=10, deadline=10, stopping=False)


def test_a_partition_s_error_answers_the_fetch_at_once_and_takes_no_budget() -> None:
    budget = FetchBudget(100)
    budget.took(0, error=True)
    budget.took(0, error=False)  # (a later partition does not clear it)
    assert budget.errors
    assert budget.limit(100) == 100
    assert budget.answered(min_bytes=1, now=0, deadline=10, stopping=False)
    assert FetchBudget(100).answered(min_bytes=1, now=0, deadline=10, stopping=True)
