"""The storage engine's periodic passes come in steps, so that a runtime with an event loop
serves other clients between them (issue 15, fairness).

Before: a flush, checkpoint or retention pass, and the removal of every queued ``.delete`` dir,
ran over all partitions in one call on the event loop: after creating and deleting a topic of
2,000 partitions, each pass held the loop for thousands of fsyncs. Now each step is one
partition (or one checkpoint file, or one removal), and the passes still do all their work.
"""

from __future__ import annotations

import pytest

from conformance.disk import SimDisk
from impl.storage import LogManager, TopicPartition
from impl.storage.checkpoint import RECOVERY_POINT_CHECKPOINT, CheckpointSync
from impl.storage.log import FlushSync
from impl.storage.names import DELETE_SUFFIX

from ._support import DIR_A, DIR_B, ManualClock, batch, config, run

PARTITIONS = 6


def _manager_with_partitions(disk: SimDisk) -> LogManager:
    manager = LogManager.open(config(), disk=disk, clock=ManualClock())

    async def fill() -> None:
        for index in range(PARTITIONS):
            partition = manager.create(TopicPartition("t", index), is_new=True)
            await partition.append_as_leader(batch(index), 1)

    run(fill)
    return manager


def test_a_flush_pass_takes_one_step_per_partition_and_flushes_them_all() -> None:
    manager = _manager_with_partitions(SimDisk([DIR_A, DIR_B]))
    steps = manager.checkpoint_steps()
    partitions = [manager.get(TopicPartition("t", index)) for index in range(PARTITIONS)]
    for partition in partitions:
        step = next(steps)  # one partition's fsyncs per step, handed over before they run
        assert isinstance(step, FlushSync)
        assert partition is not None
        assert partition.log.recovery_point == 0  # moved only once the fsyncs are done
        step.run()  # as the runtime's worker thread does
    rest = list(steps)  # then two steps per checkpoint file written (its fsync, its dir's)
    assert all(p is not None and p.log.recovery_point == p.log_end_offset for p in partitions)
    assert all(isinstance(step, CheckpointSync) for step in rest)
    assert 2 <= len(rest) <= 3 * 2 * 2


def test_a_partition_deleted_between_steps_is_skipped() -> None:
    manager = _manager_with_partitions(SimDisk([DIR_A, DIR_B]))
    steps = manager.checkpoint_steps()
    next(steps)
    manager.delete(TopicPartition("t", PARTITIONS - 1))
    list(steps)
    assert not manager.offline_dirs


def test_queued_deletes_are_removed_one_at_a_time() -> None:
    disk = SimDisk([DIR_A, DIR_B])
    manager = _manager_with_partitions(disk)
    for index in range(PARTITIONS):
        manager.delete(TopicPartition("t", index))

    def queued() -> list[str]:
        return [name for log_dir in (DIR_A, DIR_B) for name in disk.list_dir(log_dir)
                if name.endswith(DELETE_SUFFIX)]

    assert len(queued()) == PARTITIONS
    removed = 0
    while manager.delete_pending_nowait(max_count=1):
        removed += 1
        assert len(queued()) == PARTITIONS - removed
    assert removed == PARTITIONS


def test_a_retention_pass_takes_one_step_per_partition() -> None:
    manager = _manager_with_partitions(SimDisk([DIR_A, DIR_B]))
    assert len(list(manager.enforce_retention_steps())) == PARTITIONS


def test_deleting_many_partitions_in_one_step_checkpoints_each_dir_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A StopReplica deleting thousands of logs wrote every dir's three checkpoint files (two
    fsyncs each) once per partition; in a batch, once per dir, and the checkpoints end the same
    (no deleted partition left in them)."""
    disk = SimDisk([DIR_A, DIR_B])
    manager = _manager_with_partitions(disk)
    writes: list[str] = []
    real = manager._write_dir_checkpoints

    def counting(log_dir: str, *args: object, **kwargs: bool) -> None:
        writes.append(log_dir)
        real(log_dir)

    monkeypatch.setattr(manager, "_write_dir_checkpoints", counting)
    with manager.batched_checkpoints():
        for index in range(PARTITIONS):
            manager.delete(TopicPartition("t", index))
        assert writes == []
    assert sorted(writes) == sorted(set(writes))  # once per dir
    for log_dir in set(writes):
        text = disk.read(f"{log_dir}/{RECOVERY_POINT_CHECKPOINT}", 0, 1 << 20)
        assert b"t " not in text
