"""The multi-level replica selector: the nearest replica by shared rack levels."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from impl.controller.placement import (
    ReplicaView,
    rack_distance_levels,
    select_preferred_read_replica,
)

LEADER_DC1 = ReplicaView(1, "/DC1/R1", 100, is_leader=True)
DC2_R1 = ReplicaView(2, "/DC2/R1", 90)
DC2_R2 = ReplicaView(3, "/DC2/R2", 95)
DC3_R1 = ReplicaView(4, "/DC3/R1", 100)


def test_shared_levels() -> None:
    assert rack_distance_levels("/DC1/R1", "/DC1/R1") == 2
    assert rack_distance_levels("/DC1/R1", "/DC1/R2") == 1
    assert rack_distance_levels("/DC1/R1", "/DC2/R1") == 0
    assert rack_distance_levels("/DC1", "/DC1/R2") == 1


def test_same_rack_wins_over_same_dc() -> None:
    replicas = [LEADER_DC1, DC2_R1, DC2_R2, DC3_R1]
    assert select_preferred_read_replica("/DC2/R1", replicas) == 2
    # Same DC, no same rack: the most caught-up replica of the DC.
    assert select_preferred_read_replica("/DC2/R9", replicas) == 3
    assert select_preferred_read_replica("/DC3/R2", replicas) == 4


def test_leader_serves_when_nearest_or_no_locality() -> None:
    replicas = [LEADER_DC1, DC2_R1, DC3_R1]
    assert select_preferred_read_replica("/DC1/R7", replicas) is None
    assert select_preferred_read_replica("/DC9/R1", replicas) is None
    assert select_preferred_read_replica(None, replicas) is None
    assert select_preferred_read_replica("", replicas) is None
    assert select_preferred_read_replica("flat-rack", replicas) is None
    assert select_preferred_read_replica("/DC1//R1", replicas) is None
    assert select_preferred_read_replica("/DC2/R1", []) is None


def test_replicas_without_multi_level_racks_are_skipped() -> None:
    replicas = [ReplicaView(1, None, 10, is_leader=True), ReplicaView(2, "flat", 10), DC2_R1]
    assert select_preferred_read_replica("/DC2/R5", replicas) == 2


@settings(max_examples=200, derandomize=True, deadline=None)
@given(
    client=st.tuples(st.integers(0, 2), st.integers(0, 2)),
    racks=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 50)),
                   min_size=1, max_size=6),
    leader_index=st.integers(0, 5),
)
def test_choice_is_among_the_nearest(
    client: tuple[int, int], racks: list[tuple[int, int, int]], leader_index: int
) -> None:
    replicas = [
        ReplicaView(i, f"/D{dc}/R{rack}", offset, is_leader=(i == leader_index % len(racks)))
        for i, (dc, rack, offset) in enumerate(racks)
    ]
    client_rack = f"/D{client[0]}/R{client[1]}"
    chosen = select_preferred_read_replica(client_rack, replicas)
    levels = {r.broker_id: rack_distance_levels(client_rack, str(r.rack)) for r in replicas}
    best = max(levels.values())
    if chosen is None:
        leader = next(r for r in replicas if r.is_leader)
        assert best == 0 or levels[leader.broker_id] == best
    else:
        assert levels[chosen] == best > 0
        assert not replicas[chosen].is_leader
