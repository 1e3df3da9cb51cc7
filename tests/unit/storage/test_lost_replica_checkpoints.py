"""A dir's checkpoints keep a lost replica's entries (single-broker simulator seeds 167, 557).

A swap crashed once ``tp`` was renamed ``tp.delete``, and a dir was bad at the next start:
recovery left the durable ``tp.move`` untouched and the partition offline (KIP-113 §3 rule 3).
The ``.move``'s dir recorded its HW and log start offset when the swap made it durable; they
must still be there when a later start, the bad dir back, promotes it (rule 2), or the records
DeleteRecords removed come back. A replica created anew in place of a lost one starts from none
of them.
"""

from __future__ import annotations

import pytest

from conformance.disk import SimDisk, SimulatedCrash
from impl.storage import LogManager, OffsetOutOfRange, TopicPartition
from impl.storage import replica_move as rm
from impl.storage.move_recovery import RecoveryRule
from impl.storage.names import DirKind, dir_name

from ._support import (
    DIR_A,
    DIR_B,
    DIR_C,
    TP,
    ExtremeRng,
    ManualClock,
    batch,
    config,
    drive_move,
    run,
)

DIRS = (DIR_A, DIR_B, DIR_C)
OTHER = TopicPartition("other", 0)


def _open(disk: SimDisk) -> LogManager:
    return LogManager.open(config(*DIRS), disk=disk, clock=ManualClock())


def _swap_crashed_after_source_renamed(disk: SimDisk) -> tuple[int, int]:
    """TP on A, DeleteRecords inside a segment, moved to B; the process dies just before
    ``tp.move`` becomes ``tp``. Returns (log start offset, HW)."""
    state: list[int] = []

    async def main() -> None:
        manager = _open(disk)
        partition = manager.create(TP, is_new=True)
        assert partition.log_dir == DIR_A
        for i in range(30):
            await partition.append_as_leader(batch(i), 1)
        partition.flush()
        partition.high_watermark = partition.log_end_offset
        start = partition.log.segments[1].base_offset + 1  # inside a segment: records stay
        assert partition.delete_records(start) == start
        state.extend((start, partition.high_watermark))
        carry_out = manager._carry_out  # (white box: the crash point is an effect)

        def crash_before_promotion(tp: TopicPartition, effect: rm.MoveEffect) -> object:
            if isinstance(effect, rm.RenameMoveToLive):
                raise SimulatedCrash
            return carry_out(tp, effect)

        manager._carry_out = crash_before_promotion  # type: ignore[method-assign,assignment]
        assert manager.alter_replica_log_dir(TP, DIR_B) == 0
        with pytest.raises(SimulatedCrash):
            await drive_move(manager)

    run(main)
    # every unsynced change is lost
    disk.crash(ExtremeRng(keep=False))  # type: ignore[arg-type]
    assert dir_name(TP, DirKind.MOVE) in disk.list_dir(DIR_B)
    assert dir_name(TP, DirKind.DELETE) in disk.list_dir(DIR_A)
    start, high_watermark = state
    return start, high_watermark


def _start_with_c_bad(disk: SimDisk) -> LogManager:
    """A start with C unreadable: TP is offline and untouched; B's checkpoints are rewritten
    (the first checkpoint of a start writes every file; another partition is placed on A)."""
    disk.make_unreadable(DIR_C)
    manager = _open(disk)
    (decision,) = [d for d in manager.recovery_decisions if d.tp == TP]
    assert RecoveryRule.OFFLINE_UNTOUCHED in decision.rules
    assert manager.get(TP) is None
    manager.create(OTHER, is_new=True)
    manager.checkpoint()
    return manager


def test_a_promoted_move_keeps_the_log_start_offset_and_hw_through_an_offline_start() -> None:
    disk = SimDisk(list(DIRS))
    start, high_watermark = _swap_crashed_after_source_renamed(disk)
    _start_with_c_bad(disk).close()
    disk.crash(ExtremeRng(keep=False))  # type: ignore[arg-type]
    disk.repair_dir(DIR_C)

    manager = _open(disk)
    (decision,) = [d for d in manager.recovery_decisions if d.tp == TP]
    assert RecoveryRule.PROMOTE_MOVE in decision.rules
    partition = manager.get(TP)
    assert partition is not None
    assert partition.log_dir == DIR_B
    assert partition.log_start_offset == start
    assert partition.high_watermark == high_watermark
    with pytest.raises(OffsetOutOfRange):
        partition.read(start - 1, 1000)


def test_a_replica_created_anew_does_not_inherit_a_lost_copys_entries() -> None:
    disk = SimDisk(list(DIRS))
    _swap_crashed_after_source_renamed(disk)
    manager = _start_with_c_bad(disk)
    # the controller says the replica is new: placed on B, the online dir holding no replica,
    # next to the old tp.move (recovery leaves that to a later start)
    partition = manager.create(TP, is_new=True)
    assert partition.log_dir == DIR_B

    async def fill() -> None:
        for i in range(10):
            await partition.append_as_leader(batch(100 + i), 1)
        partition.flush()

    run(fill)
    # a crash before any other checkpoint
    disk.crash(ExtremeRng(keep=False))  # type: ignore[arg-type]
    reopened = _open(disk).get(TP)
    assert reopened is not None
    assert reopened.log_start_offset == 0
    for piece in reopened.read(0, 1000):
        piece.close()
