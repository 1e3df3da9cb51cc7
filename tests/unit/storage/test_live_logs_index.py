"""Each dir's served live logs are gathered once and kept until the hosted partitions change:
the checkpoint files a dir writes name exactly the partitions it serves, however the
partitions came, went, moved or went offline since the last pass.

Before: every dir's checkpoint pass walked every hosted partition once per file it wrote (four
walks of 32,000 partitions for two dirs' HW files each second, 66 ms of the pass's longest
step). The oracle here is the public view: ``partitions()``, each one's live log, its dir and
whether it is offline.
"""

from __future__ import annotations

import random

import pytest

from conformance.disk import SimDisk
from impl.storage import LogManager, TopicPartition
from impl.storage.checkpoint import (
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    parse_offsets,
)
from impl.storage.names import DirKind

from ._support import DIR_A, DIR_B, ManualClock, batch, config, drive_move, run


def _file(disk: SimDisk, log_dir: str, name: str) -> dict[TopicPartition, int]:
    path = f"{log_dir}/{name}"
    if not disk.exists(path):
        return {}
    return parse_offsets(disk.read(path, 0, disk.size(path)).decode())


def _served(manager: LogManager, log_dir: str) -> dict[TopicPartition, int]:
    """What ``log_dir``'s HW file must hold: its served live logs' HWs (no replica is lost
    here: every partition was created new)."""
    return {
        tp: partition.high_watermark
        for tp, partition in manager.partitions().items()
        if not partition.offline and partition.log.log_dir == log_dir
        and partition.log.kind is DirKind.LIVE
    }


def _check(manager: LogManager, disk: SimDisk) -> None:
    for log_dir in (DIR_A, DIR_B):
        if log_dir in manager.offline_dirs:
            continue
        assert _file(disk, log_dir, REPLICATION_OFFSET_CHECKPOINT) == _served(manager, log_dir)
        recovery = _file(disk, log_dir, RECOVERY_POINT_CHECKPOINT)
        assert set(recovery) == set(_served(manager, log_dir))


def test_a_partition_created_after_a_pass_is_in_the_next_one() -> None:
    disk = SimDisk([DIR_A, DIR_B])
    manager = LogManager.open(config(), disk=disk, clock=ManualClock())
    first = TopicPartition("t", 0)
    manager.create(first, is_new=True)
    manager.checkpoint_high_watermarks()
    second = TopicPartition("t", 1)
    manager.create(second, is_new=True)
    manager.checkpoint_high_watermarks()
    on_disk = (_file(disk, DIR_A, REPLICATION_OFFSET_CHECKPOINT)
               | _file(disk, DIR_B, REPLICATION_OFFSET_CHECKPOINT))
    assert set(on_disk) == {first, second}


def test_a_partition_deleted_after_a_pass_leaves_the_next_one() -> None:
    disk = SimDisk([DIR_A, DIR_B])
    manager = LogManager.open(config(DIR_A), disk=disk, clock=ManualClock())
    kept, deleted = TopicPartition("t", 0), TopicPartition("t", 1)
    manager.create(kept, is_new=True)
    manager.create(deleted, is_new=True)
    manager.checkpoint_high_watermarks()
    manager.delete(deleted)
    manager.checkpoint_high_watermarks()
    assert set(_file(disk, DIR_A, REPLICATION_OFFSET_CHECKPOINT)) == {kept}


@pytest.mark.parametrize("seed", range(12))
def test_checkpoints_name_the_served_partitions_after_any_changes(seed: int) -> None:
    """Random creations, appends, HW moves, deletions, moves between the dirs and checkpoint
    passes (both kinds); after every pass, every online dir's files name what it serves."""
    rng = random.Random(seed)

    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        manager = LogManager.open(config(segment_bytes=1 << 12), disk=disk,
                                  clock=ManualClock())
        created = 0
        for _ in range(60):
            hosted = sorted(manager.partitions())
            action = rng.choice(("create", "create", "append", "hw", "delete", "move",
                                 "hw_pass", "pass"))
            if action == "create" or not hosted:
                manager.create(TopicPartition("t", created), is_new=True)
                created += 1
                continue
            tp = rng.choice(hosted)
            partition = manager.get(tp)
            assert partition is not None
            if action == "append":
                for index in range(rng.randrange(1, 4)):
                    await partition.append_as_leader(batch(index), 1)
            elif action == "hw":
                partition.high_watermark = rng.randrange(partition.log_end_offset + 1)
            elif action == "delete":
                manager.delete(tp)
            elif action == "move":
                other = DIR_B if partition.log_dir == DIR_A else DIR_A
                manager.alter_replica_log_dir(tp, other)
                await drive_move(manager, tp)
                assert partition.log_dir == other
            elif action == "hw_pass":
                manager.checkpoint_high_watermarks()
                _check(manager, disk)
            else:
                manager.checkpoint()
                _check(manager, disk)
        manager.checkpoint()
        _check(manager, disk)

    run(main)
