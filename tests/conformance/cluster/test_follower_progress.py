"""FOLLOWER_PROGRESS: after the run, no follower of a live leader's current epoch, on an assigned
and online replica, is left marked failed (it would never fetch again: no newer LeaderAndIsr
comes once the cluster has settled). The trio fetcher's stalled reassignment was such a
follower; the plant ``round_names_a_partition_twice`` puts its cause back and the default run
catches it through this check (``tests/conformance/test_plants.py``)."""

from __future__ import annotations

import pytest

from conformance.cluster_sim import ClusterWorld
from conformance.move_sim import ViolationFound
from impl.broker.node import Followed
from impl.storage.names import TopicPartition

from ._settled import settled_world

TP = TopicPartition("t", 0)


def _a_follower(world: ClusterWorld) -> tuple[int, Followed]:
    leader = world.current_leader(TP)
    assert leader is not None
    for broker in world.brokers:
        node = broker.node
        if broker is not leader and node is not None and TP in node.followed:
            return broker.id, node.followed[TP]
    raise AssertionError("no follower of t-0")


def _reported_as_failed(world: ClusterWorld, broker_id: int) -> None:
    """The end-of-run checks report ``broker_id``'s failed follower (FOLLOWER_PROGRESS)."""
    with pytest.raises(ViolationFound, match=f"broker {broker_id} follows leader") as found:
        world.final_check()
    assert found.value.invariant == "FOLLOWER_PROGRESS"


def test_a_settled_cluster_passes() -> None:
    world = settled_world()
    world.final_check()


def test_a_failed_follower_of_the_current_epoch_is_reported() -> None:
    world = settled_world()
    broker_id, followed = _a_follower(world)
    followed.failed = True
    _reported_as_failed(world, broker_id)


def test_a_failed_follower_of_an_older_epoch_waits_for_its_leader_and_isr() -> None:
    world = settled_world()
    _, followed = _a_follower(world)
    followed.failed = True
    followed.leader_epoch -= 1
    world.final_check()


def test_a_replica_recreated_new_after_its_dir_failed_is_online_and_judged_again() -> None:
    """A replica lost with a failed dir and created again with ``is_new`` (a reassignment that
    added its broker back: swarm seeds 160 and 168) is served from a good dir: it counts among
    the online replicas again, so the run can settle healthy and FOLLOWER_PROGRESS judges it.
    Before, it stayed "lost" to the end: those runs spent all 600 settle steps unhealthy, and a
    failed follower on that broker would have passed unjudged."""
    world = settled_world()
    broker_id, followed = _a_follower(world)
    world.lost_with_dir.add((broker_id, TP))
    assert broker_id not in world.online_replicas(TP)
    assert not world.healthy()
    world.replica_created(world.brokers[broker_id], TP, True)
    assert broker_id in world.online_replicas(TP)
    assert world.healthy()
    followed.failed = True
    _reported_as_failed(world, broker_id)


def test_a_lost_replica_recreated_without_is_new_is_reported_and_stays_lost() -> None:
    world = settled_world()
    broker_id, _ = _a_follower(world)
    world.lost_with_dir.add((broker_id, TP))
    with pytest.raises(ViolationFound, match="without is_new") as found:
        world.replica_created(world.brokers[broker_id], TP, False)
    assert found.value.invariant == "DIR_FAILURE_ISOLATION"
    assert broker_id not in world.online_replicas(TP)
