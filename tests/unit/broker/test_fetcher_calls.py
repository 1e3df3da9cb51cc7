"""The follower's fetcher sends one call per partition: the newest the node made.

A LeaderAndIsr that replaces a partition's fetch state while a call of the old state still
waits in the fetcher's outbox made the node issue a second call; both went in one request and
the first answer (FENCED_LEADER_EPOCH for the old epoch) was applied to the new call, leaving the
partition failed for good (a reassignment stalled in
tests/integration/cluster/test_admin_apis.py::test_partition_reassignments_kip455)."""

from __future__ import annotations

from impl.broker.node import EpochCall, FetchCall
from impl.broker.replica_fetcher import latest_per_partition
from impl.storage.names import TopicPartition

A = TopicPartition("moving", 0)
B = TopicPartition("moving", 1)


def test_a_replaced_call_is_not_sent() -> None:
    old = EpochCall(1, 2, A, 0, 0)
    other = FetchCall(2, 2, 0, B, 5, 3)
    new = EpochCall(3, 2, A, 1, 1)
    assert latest_per_partition([old, other, new]) == [other, new]


def test_distinct_partitions_keep_their_order() -> None:
    calls = [FetchCall(1, 2, 0, B, 0, 1), EpochCall(2, 2, A, 1, 1)]
    assert latest_per_partition(calls) == calls
    assert latest_per_partition([]) == []


def test_a_fetch_of_the_old_state_gives_way_to_the_new_states_ask() -> None:
    stale = FetchCall(1, 2, 0, A, 7, 0)
    ask = EpochCall(2, 2, A, 1, 1)
    assert latest_per_partition([stale, ask]) == [ask]
