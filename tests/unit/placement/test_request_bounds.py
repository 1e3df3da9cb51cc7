"""CreateReplicaPlacement's partition count is bounded before any placement work (issue 15,
defect 3: NumPartitions = 2^31-1 in a 40-byte request froze the broker until the OOM killer)."""

from __future__ import annotations

import time

from impl.controller.placement import (
    INVALID_PARTITIONS,
    ClusterView,
    CreateReplicaPlacementRequest,
    MultiLevelRackPlacer,
    handle_create_replica_placement,
)
from impl.controller.placement._validate import PARTITION_COUNT_MAX
from impl.ports import SeededRng

VIEW = ClusterView.of({1: "/DC1/R1", 2: "/DC1/R2", 3: "/DC2/R1"})


def test_a_huge_partition_count_is_refused_at_once() -> None:
    started = time.process_time()
    for count in (2**31 - 1, PARTITION_COUNT_MAX + 1):
        response = handle_create_replica_placement(
            CreateReplicaPlacementRequest(partition_count=count, replication_factor=1),
            VIEW, MultiLevelRackPlacer(SeededRng(1)), SeededRng(1),
        )
        assert response.error_code == INVALID_PARTITIONS
        assert response.error_message is not None
        assert str(PARTITION_COUNT_MAX) in response.error_message
    assert time.process_time() - started < 5.0  # nothing was placed (generous on a busy box)
    ok = handle_create_replica_placement(
        CreateReplicaPlacementRequest(partition_count=3, replication_factor=2),
        VIEW, MultiLevelRackPlacer(SeededRng(1)), SeededRng(1),
    )
    assert ok.error_code == 0
