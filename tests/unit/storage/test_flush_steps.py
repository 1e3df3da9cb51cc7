"""The periodic passes of the storage engine: the flush pass (``LogManager.checkpoint_steps``)
yields to the event loop after each partition it fsyncs and after every
``CLEAN_FLUSHES_PER_STEP`` idle ones, and still moves every partition's recovery point; a
checkpoint pass writes only the files whose entries changed."""

from __future__ import annotations

from conformance.disk import SimDisk
from impl.storage import LogManager, PartitionLog, TopicPartition
from impl.storage.checkpoint import RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
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


class _CountingDisk(SimDisk):
    """A SimDisk that counts the checkpoint files it is asked to create."""

    def __init__(self, log_dirs: list[str]) -> None:
        super().__init__(log_dirs)
        self.checkpoint_writes: list[str] = []

    def create(self, path: str) -> None:
        if path.endswith("checkpoint.tmp") and "/t-" not in path:
            self.checkpoint_writes.append(path.rsplit("/", 1)[1].removesuffix(".tmp"))
        super().create(path)


def test_a_checkpoint_pass_writes_only_the_files_whose_entries_changed() -> None:
    async def main() -> None:
        disk = _CountingDisk([DIR_A])
        manager = LogManager.open(config(DIR_A), disk=disk, clock=ManualClock())
        partitions = [manager.create(TopicPartition("t", p), is_new=True) for p in range(3)]
        manager.checkpoint()
        disk.checkpoint_writes.clear()
        manager.checkpoint()
        assert disk.checkpoint_writes == []  # nothing changed: nothing written
        await partitions[1].append_as_leader(batch(1), 1)
        manager.checkpoint()  # the flush moves the recovery point; the HW has not moved
        assert disk.checkpoint_writes == [RECOVERY_POINT_CHECKPOINT]
        path = f"{DIR_A}/{RECOVERY_POINT_CHECKPOINT}"
        assert disk.read(path, 0, disk.size(path)) == b"0\n3\nt 0 0\nt 1 2\nt 2 0\n"
        disk.checkpoint_writes.clear()
        manager.checkpoint_high_watermarks()  # rewritten changed or not (finds a failed dir)
        assert disk.checkpoint_writes == [REPLICATION_OFFSET_CHECKPOINT]

    run(main)
