"""KIP-879's multi-level placer: the KIP's example, the walk, PLACEMENT_SPREAD, errors."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impl.controller.placement import (
    ClusterView,
    MultiLevelRackPlacer,
    PlacementError,
    PlacementSpec,
    TopicPartition,
    build_rack_tree,
    load_replica_placer,
    parse_rack,
    place_replicas,
    placement_spread_holds,
    placement_spread_violations,
)
from impl.ports import SeededRng

from .strategies import rack_trees

T = TypeVar("T")

KIP_EXAMPLE = ClusterView.of(
    {
        1: "/DC1/R1",
        2: "/DC1/R2",
        3: "/DC2/R1",
        4: "/DC2/R2",
        5: "/DC3/R1",
        6: "/DC3/R2",
    }
)


class FirstChildRng:
    """An Rng whose every draw is 0: every ring pointer starts at the first child."""

    def randrange(self, stop: int) -> int:
        assert stop > 0
        return 0

    def random(self) -> float:
        return 0.0

    def choice(self, items: Sequence[T]) -> T:
        return items[0]


def dc_of(view: ClusterView, broker_id: int) -> str:
    rack = next(b.rack for b in view.brokers if b.broker_id == broker_id)
    assert rack is not None
    return parse_rack(rack)[0]


@pytest.mark.parametrize("seed", range(25))
def test_kip_example_puts_one_replica_in_each_dc(seed: int) -> None:
    placer = MultiLevelRackPlacer(SeededRng(seed))
    spec = PlacementSpec(partition_count=12, replication_factor=3)
    assignment = placer.place(spec, KIP_EXAMPLE, None)
    assert assignment is not None
    for replicas in assignment:
        assert sorted(dc_of(KIP_EXAMPLE, b) for b in replicas) == ["DC1", "DC2", "DC3"]
    # Across partitions the racks inside each DC alternate: every broker holds 12*3/6 replicas.
    assert set(Counter(b for r in assignment for b in r).values()) == {6}
    assert set(Counter(r[0] for r in assignment).values()) == {2}


def test_kafka_rack_aware_with_flat_paths_can_put_two_replicas_in_one_dc() -> None:
    # The KIP's motivation: the flat rack-aware assignment treats /DC1/R1 and /DC1/R2 as
    # unrelated racks, so with RF 3 some partition lands twice in one DC for some seed.
    placer = load_replica_placer("rack-aware", SeededRng(0))
    spec = PlacementSpec(partition_count=6, replication_factor=3)
    assignment = placer.place(spec, KIP_EXAMPLE, None)
    assert assignment is not None
    assert any(len({dc_of(KIP_EXAMPLE, b) for b in replicas}) < 3 for replicas in assignment)


def test_walk_follows_the_ring_pointers() -> None:
    # Three DCs of one broker; all pointers start at the first child. Walk: A B | C A | B C.
    view = ClusterView.of({10: "/A/R", 20: "/B/R", 30: "/C/R"})
    assignment = MultiLevelRackPlacer(FirstChildRng()).place(
        PlacementSpec(partition_count=3, replication_factor=2), view, None
    )
    # Leaders: the replica that led fewest so far, ties to the first walked.
    assert assignment == [[10, 20], [30, 10], [20, 30]]


def test_walk_alternates_racks_inside_a_dc() -> None:
    # Root ring: DC1, DC2; DC1 ring: R1, R2. RF 1 walks DC1/R1, DC2, DC1/R2, DC2, ...
    view = ClusterView.of({1: "/DC1/R1", 2: "/DC1/R2", 3: "/DC2/R1"})
    assignment = MultiLevelRackPlacer(FirstChildRng()).place(
        PlacementSpec(partition_count=4, replication_factor=1), view, None
    )
    assert assignment == [[1], [3], [2], [3]]


@settings(max_examples=200, derandomize=True, deadline=None)
@given(view=rack_trees(), data=st.data())
def test_random_trees_satisfy_placement_spread(view: ClusterView, data: st.DataObject) -> None:
    broker_count = len(view.brokers)
    replication_factor = data.draw(st.integers(1, broker_count), label="replication_factor")
    partition_count = data.draw(st.integers(1, 3 * broker_count), label="partition_count")
    seed = data.draw(st.integers(0, 2**32), label="seed")
    spec = PlacementSpec(partition_count=partition_count, replication_factor=replication_factor)
    assignment = place_replicas(MultiLevelRackPlacer(SeededRng(seed)), spec, view, rng=SeededRng(0))
    assert placement_spread_violations(assignment, view) == []
    assert assignment == MultiLevelRackPlacer(SeededRng(seed)).place(spec, view, None)


@settings(max_examples=100, derandomize=True, deadline=None)
@given(
    fan_outs=st.lists(st.integers(1, 3), min_size=1, max_size=3),
    rack_brokers=st.integers(1, 3),
    data=st.data(),
)
def test_uniform_trees_balance_replicas_and_leaders(
    fan_outs: list[int], rack_brokers: int, data: st.DataObject
) -> None:
    paths = [""]
    for level, fan_out in enumerate(fan_outs):
        paths = [f"{path}/L{level}N{child}" for path in paths for child in range(fan_out)]
    view = ClusterView.of(
        {index * rack_brokers + b: path for index, path in enumerate(paths)
         for b in range(rack_brokers)}
    )
    n = len(view.brokers)
    replication_factor = data.draw(st.integers(1, n))
    rounds = data.draw(st.integers(1, 3))
    spec = PlacementSpec(partition_count=rounds * n, replication_factor=replication_factor)
    assignment = MultiLevelRackPlacer(SeededRng(data.draw(st.integers(0, 999)))).place(
        spec, view, None
    )
    assert assignment is not None
    assert placement_spread_holds(assignment, view)
    replica_counts = Counter(b for r in assignment for b in r)
    leader_counts = Counter(r[0] for r in assignment)
    assert set(replica_counts.values()) == {rounds * replication_factor}
    assert max(leader_counts.values()) - min(leader_counts[b.broker_id] for b in view.brokers) <= 1


def test_same_seed_same_placement_and_seeds_matter() -> None:
    spec = PlacementSpec(partition_count=8, replication_factor=3)
    placements = {
        seed: MultiLevelRackPlacer(SeededRng(seed)).place(spec, KIP_EXAMPLE, None)
        for seed in range(10)
    }
    for seed, assignment in placements.items():
        assert MultiLevelRackPlacer(SeededRng(seed)).place(spec, KIP_EXAMPLE, None) == assignment
    assert len({str(a) for a in placements.values()}) > 1


def test_broker_subset_is_honoured() -> None:
    subset = [1, 3, 4, 6]
    spec = PlacementSpec(partition_count=10, replication_factor=2)
    assignment = place_replicas(
        MultiLevelRackPlacer(SeededRng(5)), spec, KIP_EXAMPLE, subset, rng=SeededRng(5)
    )
    assert {b for r in assignment for b in r} <= set(subset)
    assert placement_spread_holds(assignment, KIP_EXAMPLE, subset)


def test_no_racks_defers_to_rack_unaware() -> None:
    view = ClusterView.of({1: None, 2: None, 3: None})
    spec = PlacementSpec(partition_count=3, replication_factor=2)
    assert MultiLevelRackPlacer(SeededRng(1)).place(spec, view, None) is None
    assignment = place_replicas(MultiLevelRackPlacer(SeededRng(1)), spec, view, rng=SeededRng(2))
    assert load_replica_placer("rack-unaware", SeededRng(2)).place(spec, view, None) == assignment


def test_partition_addition_counts_the_topics_leaders() -> None:
    view = ClusterView.of(
        {1: "/A/R", 2: "/B/R", 3: "/C/R"},
        {TopicPartition("t", 0): [1, 2], TopicPartition("t", 1): [1, 3]},
    )
    spec = PlacementSpec(partition_count=1, replication_factor=3, start_partition_id=2, topic="t")
    assignment = MultiLevelRackPlacer(SeededRng(9)).place(spec, view, None)
    assert assignment is not None
    assert assignment[0][0] != 1


@settings(max_examples=100, derandomize=True, deadline=None)
@given(view=rack_trees(), data=st.data())
def test_increasing_the_replication_factor_keeps_the_spread(
    view: ClusterView, data: st.DataObject
) -> None:
    n = len(view.brokers)
    low = data.draw(st.integers(1, n))
    high = data.draw(st.integers(low, n))
    placer = MultiLevelRackPlacer(SeededRng(data.draw(st.integers(0, 999))))
    before = placer.place(PlacementSpec(partition_count=n, replication_factor=low), view, None)
    assert before is not None
    after = placer.increase_replication_factor(before, high, view)
    for old, new in zip(before, after, strict=True):
        assert new[: len(old)] == old
        assert len(set(new)) == high
    assert [v for v in placement_spread_violations(after, view) if v.where != "leaders"] == []


def test_increase_continues_the_walk_across_partitions() -> None:
    view = ClusterView.of({10: "/A/R", 20: "/B/R", 30: "/C/R"})
    placer = MultiLevelRackPlacer(FirstChildRng())
    # Root pointer starts at A; partition 0 holds A, so B is next; the pointer then sits at C,
    # and partition 1 (holding B) takes C; then A for partition 2 (holding C).
    assert placer.increase_replication_factor([[10], [20], [30]], 2, view) == [
        [10, 20],
        [20, 30],
        [30, 10],
    ]


@pytest.mark.parametrize(
    ("racks", "message"),
    [
        ({1: "DC1/R1", 2: "/DC2/R1"}, "does not start with '/'"),
        ({1: "/DC1//R1", 2: "/DC2/R1"}, "empty level"),
        ({1: "/", 2: "/DC2"}, "empty level"),
        ({1: "/DC1/", 2: "/DC2"}, "empty level"),
        ({1: "/DC1", 2: "/DC1/R1"}, "brokers and racks cannot be siblings"),
        ({1: "/DC1/R1", 2: None}, "broker 2 has no rack"),
    ],
)
def test_invalid_racks_are_one_clear_error(racks: dict[int, str | None], message: str) -> None:
    view = ClusterView.of(racks)
    with pytest.raises(PlacementError, match=message) as caught:
        MultiLevelRackPlacer(SeededRng(0)).place(
            PlacementSpec(partition_count=1, replication_factor=1), view, None
        )
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("spec", "broker_ids", "message"),
    [
        (PlacementSpec(partition_count=1, replication_factor=7), None, "larger than the 6"),
        (PlacementSpec(partition_count=0, replication_factor=1), None, "partitions must be"),
        (PlacementSpec(partition_count=1, replication_factor=0), None, "replication factor must"),
        (
            PlacementSpec(partition_count=1, replication_factor=1, start_partition_id=-1),
            None,
            "start partition id",
        ),
        (PlacementSpec(partition_count=1, replication_factor=1), [], "no brokers"),
        (PlacementSpec(partition_count=1, replication_factor=1), [1, 1], "duplicate broker ids"),
        (PlacementSpec(partition_count=1, replication_factor=1), [1, 99], "unknown broker ids"),
    ],
)
def test_bad_requests_are_one_clear_error(
    spec: PlacementSpec, broker_ids: list[int] | None, message: str
) -> None:
    for name in ("multi-level", "rack-aware", "rack-unaware"):
        with pytest.raises(PlacementError, match=message):
            place_replicas(
                load_replica_placer(name, SeededRng(0)),
                spec,
                KIP_EXAMPLE,
                broker_ids,
                rng=SeededRng(0),
            )


def test_no_brokers_and_duplicate_brokers_in_the_cluster() -> None:
    spec = PlacementSpec(partition_count=1, replication_factor=1)
    with pytest.raises(PlacementError, match="no brokers"):
        place_replicas(
            MultiLevelRackPlacer(SeededRng(0)), spec, ClusterView.of({}), rng=SeededRng(0)
        )
    duplicated = ClusterView.of([*KIP_EXAMPLE.brokers, KIP_EXAMPLE.brokers[0]])
    with pytest.raises(PlacementError, match="duplicate broker ids in the cluster: 1"):
        place_replicas(MultiLevelRackPlacer(SeededRng(0)), spec, duplicated, rng=SeededRng(0))


def test_checker_catches_a_bad_placement() -> None:
    # Two replicas in DC1 while DC3 has free brokers.
    bad = [[1, 2, 3]]
    violations = placement_spread_violations(bad, KIP_EXAMPLE)
    assert [v.where for v in violations] == ["/"]
    assert "/DC1 holds 2 replicas while /DC3 holds 0" in violations[0].detail
    # A leader that already leads more than another replica of its partition.
    unfair = [[1, 3, 5], [1, 4, 6]]
    assert [v.where for v in placement_spread_violations(unfair, KIP_EXAMPLE)] == ["leaders"]


def test_tree_shape() -> None:
    tree = build_rack_tree(KIP_EXAMPLE.brokers)
    assert [node.name for node in tree.nodes][:4] == ["/", "/DC1", "/DC2", "/DC3"]
    assert tree.root.subtree_broker_ids() == frozenset(range(1, 7))


@settings(max_examples=100, derandomize=True, deadline=None)
@given(view=rack_trees(), data=st.data())
def test_random_subsets_satisfy_placement_spread(view: ClusterView, data: st.DataObject) -> None:
    all_ids = [b.broker_id for b in view.brokers]
    subset = data.draw(st.lists(st.sampled_from(all_ids), min_size=1, unique=True), label="subset")
    replication_factor = data.draw(st.integers(1, len(subset)), label="replication_factor")
    spec = PlacementSpec(partition_count=data.draw(st.integers(1, 12)),
                         replication_factor=replication_factor)
    assignment = place_replicas(
        MultiLevelRackPlacer(SeededRng(data.draw(st.integers(0, 99)))), spec, view, subset,
        rng=SeededRng(0),
    )
    assert {b for r in assignment for b in r} <= set(subset)
    assert placement_spread_violations(assignment, view, subset) == []
