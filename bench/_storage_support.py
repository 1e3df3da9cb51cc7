"""Shared set-up for the storage benchmarks: a log of a given size built from 1 MiB batches."""

from __future__ import annotations

from impl.storage import LogManager, PartitionLog, TopicPartition
from impl.storage import record_batch as rb

MIB = 1 << 20


async def fill(manager: LogManager, tp: TopicPartition, size_mib: int) -> PartitionLog:
    """Create ``tp`` (placement: the least-loaded dir) and append ``size_mib`` MiB."""
    partition = manager.create(tp, is_new=True)
    batch = rb.build_batch([bytes(MIB - 200)], timestamp_ms=1)
    while partition.size_in_bytes < size_mib * MIB:
        await partition.append_as_leader(batch, 1)
    partition.flush()
    return partition
