"""The periodic flush pass (``LogManager.checkpoint_steps``) yields to the event loop after each
partition it fsyncs and after every ``CLEAN_FLUSHES_PER_STEP`` idle ones, and still moves every
partition's recovery point."""

from __future__ import annotations

from conformance.disk import SimDisk
from impl.storage import LogManager, PartitionLog, TopicPartition
from impl.storage.manager import CLEAN_FLUSHES_PER_STEP

from ._support import DIR_A, ManualClock, batch, config, run

PARTITIONS = 2 * CLEAN_FLUSHES_PER_STEP + 10
WRITTEN = (3, 300, PARTITIONS - 1)


async def _partitions() -> tuple[LogManager, list[PartitionLog]]:
    manager = LogManager.open(config(DIR_A), disk=SimDisk([DIR_A]), clock=ManualClock())
    partitions = [manager.create(TopicPartition("t", p), is_new=True) for p in range(PARTITIONS)]
    for index in WRITTEN:
        await partitions[index].append_as_leader(batch(index), 1)
    return manager, partitions


def test_idle_partitions_are_flushed_many_to_a_step() -> None:
    async def main() -> None:
        manager, partitions = await _partitions()
        assert [index for index, p in enumerate(partitions) if p.log.unflushed] == list(WRITTEN)
        steps = len(list(manager.checkpoint_steps()))
        assert not any(p.log.unflushed for p in partitions)
        assert all(p.log.recovery_point == p.log.log_end_offset for p in partitions)
        assert [partitions[index].log.recovery_point for index in WRITTEN] == [2, 2, 2]

        # the same state flushed beforehand: only the checkpoint files' steps remain
        manager, partitions = await _partitions()
        for partition in partitions:
            partition.log.flush()
        files = len(list(manager.checkpoint_steps(flush=False)))
        # a step after each of the 3 written ones, and one after the 256 idle ones 4..259 (the
        # idle runs 0..2, 260..299 and 301..520 end at a written one)
        assert steps - files == 3 + 1

    run(main)
