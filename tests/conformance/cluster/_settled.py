"""A small cluster run to health, for the end-of-run checks' tests."""

from __future__ import annotations

from conformance.cluster_sim import ClusterConfig, ClusterWorld


def settled_world() -> ClusterWorld:
    """Seed 0's three brokers with one partition, no groups, admin or DeleteRecords workload,
    pumped through the first elections and settled healthy."""
    world = ClusterWorld(0, ClusterConfig(partitions=1, storage_broker=False, groups=False,
                                          admin=False, delete_records=False), lambda _: None)
    for _ in range(20):
        world.clock.advance_ns(1_000_000)
        world.pump()
    world.settle(200, 0)
    assert world.healthy()
    return world
