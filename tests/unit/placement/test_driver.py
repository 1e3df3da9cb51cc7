"""``broker.replica.placer`` loading, deferral, answer checking, and propose_reassignment."""

from __future__ import annotations

import pytest

from impl.controller.placement import (
    BUILT_IN_PLACERS,
    DEFAULT_REPLICA_PLACER,
    INVALID_CONFIG,
    ClusterView,
    MultiLevelRackPlacer,
    PlacementError,
    PlacementSpec,
    RackAwarePlacer,
    RackUnawarePlacer,
    TopicPartition,
    load_replica_placer,
    place_replicas,
    placement_spread_holds,
    propose_reassignment,
)
from impl.ports import SeededRng

PLUGINS = "tests.unit.placement.plugin_fixture"
VIEW = ClusterView.of({1: "/DC1/R1", 2: "/DC1/R2", 3: "/DC2/R1", 4: "/DC2/R2"})
SPEC = PlacementSpec(partition_count=3, replication_factor=2)


def test_built_in_names_and_default() -> None:
    assert DEFAULT_REPLICA_PLACER == "rack-aware"
    assert isinstance(load_replica_placer("rack-unaware", SeededRng(0)), RackUnawarePlacer)
    assert isinstance(load_replica_placer(" rack-aware ", SeededRng(0)), RackAwarePlacer)
    assert isinstance(load_replica_placer("multi-level", SeededRng(0)), MultiLevelRackPlacer)
    assert set(BUILT_IN_PLACERS) == {"rack-unaware", "rack-aware", "multi-level"}


@pytest.mark.parametrize("separator", [".", ":"])
def test_plugin_by_dotted_path(separator: str) -> None:
    placer = load_replica_placer(f"{PLUGINS}{separator}LowestBrokersPlacer", SeededRng(0))
    assert place_replicas(placer, SPEC, VIEW, rng=SeededRng(0)) == [[1, 2]] * 3
    assert place_replicas(placer, SPEC, VIEW, [3, 4], rng=SeededRng(0)) == [[3, 4]] * 3


def test_plugin_returning_none_defers_to_rack_unaware() -> None:
    placer = load_replica_placer(f"{PLUGINS}.DeferringPlacer", SeededRng(0))
    expected = RackUnawarePlacer(SeededRng(5)).place(SPEC, VIEW, None)
    assert place_replicas(placer, SPEC, VIEW, rng=SeededRng(5)) == expected


def test_broken_plugin_answer_is_rejected() -> None:
    placer = load_replica_placer(f"{PLUGINS}.DuplicatingPlacer", SeededRng(0))
    with pytest.raises(PlacementError, match="two replicas of partition 0 on one broker"):
        place_replicas(placer, SPEC, VIEW, rng=SeededRng(0))


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "is empty"),
        ("nonsense", "neither a built-in placer"),
        ("no.such.module.Placer", "cannot import"),
        (f"{PLUGINS}.Missing", "has no callable Missing"),
        (f"{PLUGINS}.NOT_A_PLACER", "has no callable NOT_A_PLACER"),
        (f"{PLUGINS}.no_place_method", "without a place method"),
    ],
)
def test_bad_placer_names(name: str, message: str) -> None:
    with pytest.raises(PlacementError, match=message) as caught:
        load_replica_placer(name, SeededRng(0))
    assert caught.value.error_code == INVALID_CONFIG


def test_propose_reassignment_keeps_partitions_and_replication_factor() -> None:
    current = {
        TopicPartition("a", 0): [1, 2, 3],
        TopicPartition("a", 1): [2, 3, 4],
        TopicPartition("b", 0): [1, 3],
    }
    proposal = propose_reassignment(current, VIEW, "multi-level", seed=11)
    assert set(proposal) == set(current)
    for tp, replicas in proposal.items():
        assert len(replicas) == len(current[TopicPartition(tp.topic, 0)])
    assert placement_spread_holds([proposal[TopicPartition("b", 0)]], VIEW)
    assert propose_reassignment(current, VIEW, "multi-level", seed=11) == proposal
    restricted = propose_reassignment(
        {TopicPartition("b", 0): [1, 3]}, VIEW, "rack-aware", seed=1, broker_ids=[2, 4]
    )
    assert sorted(restricted[TopicPartition("b", 0)]) == [2, 4]


def test_propose_reassignment_with_a_placer_object_and_forced_simple() -> None:
    current = {TopicPartition("t", p): [1, 2] for p in range(4)}
    proposal = propose_reassignment(
        current, VIEW, MultiLevelRackPlacer(SeededRng(0)), seed=3, force_simple_placement=True
    )
    expected = RackUnawarePlacer(SeededRng(3)).place(
        PlacementSpec(partition_count=4, replication_factor=2), VIEW, None
    )
    assert [proposal[TopicPartition("t", p)] for p in range(4)] == expected


def test_propose_reassignment_errors() -> None:
    with pytest.raises(PlacementError, match="no replicas"):
        propose_reassignment({TopicPartition("t", 0): []}, VIEW, "rack-aware", seed=0)
    with pytest.raises(PlacementError, match="larger than the 4 available brokers"):
        propose_reassignment(
            {TopicPartition("t", 0): [1, 2, 3, 4, 5]}, VIEW, "rack-aware", seed=0
        )


def test_plugin_failures_become_placement_errors() -> None:
    placer = load_replica_placer(f"{PLUGINS}.CrashingPlacer", SeededRng(0))
    with pytest.raises(PlacementError, match="placer CrashingPlacer failed: KeyError") as caught:
        place_replicas(placer, SPEC, VIEW, rng=SeededRng(0))
    assert "\n" not in str(caught.value)
    with pytest.raises(PlacementError, match=r"NoRngPlacer\(rng=...\) failed: TypeError"):
        load_replica_placer(f"{PLUGINS}.NoRngPlacer", SeededRng(0))
