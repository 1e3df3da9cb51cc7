"""Kafka's rack-unaware and rack-aware assignments, checked against their definitions.

The expectations are derived here from the algorithms' stated rules (leader at
``(p + start) mod n``, followers shifted, racks alternated), never copied outputs.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impl.controller.placement import (
    ClusterView,
    PlacementError,
    PlacementSpec,
    RackAwarePlacer,
    RackUnawarePlacer,
    TopicPartition,
    follower_index,
    place_replicas,
    rack_alternated_brokers,
    rack_aware_assignment,
    rack_unaware_assignment,
)
from impl.ports import SeededRng


def test_rack_unaware_leaders_rotate_from_the_start_index() -> None:
    brokers = [10, 20, 30, 40, 50]
    assignment = rack_unaware_assignment(brokers, 10, 3, start_index=2, replica_shift=0)
    leaders = [replicas[0] for replicas in assignment]
    assert leaders == [brokers[(p + 2) % 5] for p in range(10)]


def test_rack_unaware_followers_follow_the_shift() -> None:
    brokers = [1, 2, 3, 4, 5]
    assignment = rack_unaware_assignment(brokers, 10, 3, start_index=0, replica_shift=1)
    for partition_id, replicas in enumerate(assignment):
        # The shift grows by one each time the partition id passes a multiple of n.
        shift = 1 + partition_id // 5
        leader_index = partition_id % 5
        expected = [brokers[(leader_index + 1 + (shift + j) % 4) % 5] for j in range(2)]
        assert replicas[1:] == expected


def test_rack_unaware_first_round_with_zero_shift_is_consecutive() -> None:
    # With start 0 and shift 0, partition p of a first round is p, p+1, p+2 (mod n).
    assignment = rack_unaware_assignment([0, 1, 2, 3], 4, 3, start_index=0, replica_shift=0)
    assert assignment == [[p % 4, (p + 1) % 4, (p + 2) % 4] for p in range(4)]


@settings(max_examples=150, derandomize=True, deadline=None)
@given(
    n=st.integers(1, 12),
    data=st.data(),
)
def test_rack_unaware_is_balanced_and_distinct(n: int, data: st.DataObject) -> None:
    replication_factor = data.draw(st.integers(1, n))
    rounds = data.draw(st.integers(1, 3))
    start = data.draw(st.integers(0, n - 1))
    shift = data.draw(st.integers(0, n - 1))
    brokers = list(range(100, 100 + n))
    assignment = rack_unaware_assignment(
        brokers, rounds * n, replication_factor, start_index=start, replica_shift=shift
    )
    for replicas in assignment:
        assert len(set(replicas)) == replication_factor
    # Whole rounds give every broker the same number of leaders and of replicas.
    assert set(Counter(r[0] for r in assignment).values()) == {rounds}
    assert set(Counter(b for r in assignment for b in r).values()) == {rounds * replication_factor}


def test_follower_index_never_returns_the_leader() -> None:
    for n in range(2, 9):
        for first in range(n):
            for shift in range(2 * n):
                for j in range(n - 1):
                    assert follower_index(first, shift, j, n) != first


def test_rack_alternated_list_takes_one_broker_per_rack_in_turn() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "c", 5: "c", 6: "c"}
    arranged = rack_alternated_brokers(racks)
    assert arranged == [1, 3, 4, 2, 5, 6]


@settings(max_examples=150, derandomize=True, deadline=None)
@given(data=st.data())
def test_rack_aware_puts_replicas_on_distinct_racks_first(data: st.DataObject) -> None:
    rack_count = data.draw(st.integers(1, 4))
    broker_racks = {
        broker_id: f"r{data.draw(st.integers(0, rack_count - 1))}"
        for broker_id in range(data.draw(st.integers(1, 9)))
    }
    n = len(broker_racks)
    replication_factor = data.draw(st.integers(1, n))
    assignment = rack_aware_assignment(
        broker_racks,
        data.draw(st.integers(1, 12)),
        replication_factor,
        start_index=data.draw(st.integers(0, n - 1)),
        replica_shift=data.draw(st.integers(0, n - 1)),
    )
    racks_in_use = len(set(broker_racks.values()))
    for replicas in assignment:
        assert len(set(replicas)) == replication_factor
        assert len({broker_racks[b] for b in replicas}) == min(replication_factor, racks_in_use)


def test_rack_aware_leaders_walk_the_alternated_list() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    arranged = rack_alternated_brokers(racks)
    assignment = rack_aware_assignment(racks, 6, 3, start_index=1, replica_shift=0)
    assert [replicas[0] for replicas in assignment] == [arranged[(p + 1) % 6] for p in range(6)]
    for replicas in assignment:
        assert sorted(racks[b] for b in replicas) == ["a", "b", "c"]


def test_rack_aware_without_racks_is_rack_unaware() -> None:
    view = ClusterView.of({1: None, 2: None, 3: None})
    spec = PlacementSpec(partition_count=5, replication_factor=2)
    aware = RackAwarePlacer(SeededRng(7)).place(spec, view, None)
    unaware = RackUnawarePlacer(SeededRng(7)).place(spec, view, None)
    assert aware == unaware


def test_rack_aware_rejects_partial_racks() -> None:
    view = ClusterView.of({1: "a", 2: None, 3: "b"})
    with pytest.raises(PlacementError, match="not all brokers have rack information"):
        RackAwarePlacer(SeededRng(1)).place(
            PlacementSpec(partition_count=1, replication_factor=1), view, None
        )


def test_same_seed_same_placement() -> None:
    view = ClusterView.of({i: f"r{i % 3}" for i in range(1, 10)})
    spec = PlacementSpec(partition_count=20, replication_factor=3)
    for placer_type in (RackUnawarePlacer, RackAwarePlacer):
        first = placer_type(SeededRng(42)).place(spec, view, None)
        again = placer_type(SeededRng(42)).place(spec, view, None)
        assert first == again


def test_partition_addition_continues_the_topics_pattern() -> None:
    brokers = {1: None, 2: None, 3: None, 4: None}
    existing = rack_unaware_assignment([1, 2, 3, 4], 3, 2, start_index=2, replica_shift=2)
    view = ClusterView.of(
        brokers, {TopicPartition("t", p): replicas for p, replicas in enumerate(existing)}
    )
    spec = PlacementSpec(partition_count=3, replication_factor=2, start_partition_id=3, topic="t")
    added = RackUnawarePlacer(SeededRng(0)).place(spec, view, None)
    # Kafka fixes start index and shift to the index of partition 0's leader (broker 3: index 2).
    full = rack_unaware_assignment([1, 2, 3, 4], 6, 2, start_index=2, replica_shift=2)
    assert added == full[3:]


def test_force_simple_placement_ignores_the_configured_placer() -> None:
    class Refusing:
        name = "refusing"

        def place(self, *_: object) -> list[list[int]]:
            raise AssertionError("must not be called")

    view = ClusterView.of({1: "a", 2: "b", 3: "c"})
    spec = PlacementSpec(partition_count=4, replication_factor=2, force_simple_placement=True)
    assignment = place_replicas(Refusing(), spec, view, rng=SeededRng(3))
    assert assignment == RackUnawarePlacer(SeededRng(3)).place(spec, view, None)


@settings(max_examples=100, derandomize=True, deadline=None)
@given(data=st.data())
def test_rack_aware_leaders_are_even_over_whole_rounds(data: st.DataObject) -> None:
    broker_racks = {
        broker_id: f"r{data.draw(st.integers(0, 3))}"
        for broker_id in range(data.draw(st.integers(1, 9)))
    }
    n = len(broker_racks)
    rounds = data.draw(st.integers(1, 3))
    assignment = rack_aware_assignment(
        broker_racks,
        rounds * n,
        data.draw(st.integers(1, n)),
        start_index=data.draw(st.integers(0, n - 1)),
        replica_shift=data.draw(st.integers(0, n - 1)),
    )
    # Leaders walk the rack-alternated list: every broker leads once per round.
    assert set(Counter(replicas[0] for replicas in assignment).values()) == {rounds}
