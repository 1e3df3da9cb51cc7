"""The three conditions the replica-move model needs (``spec/replica_move.md`` §Recovery):
no new ``.move`` while a dir is offline, an unmounted dir detected at startup, and a queued
deletion removed only while a served copy at least as long exists."""

from __future__ import annotations

from conformance.disk import SimDisk
from impl.storage import ErrorCode, LogManager, MoveState

from ._support import DIR_A, DIR_B, DIR_C, TP, ManualClock, batch, config, drive_move, run


def _three_dirs() -> tuple[SimDisk, LogManager]:
    disk = SimDisk([DIR_A, DIR_B, DIR_C])
    return disk, LogManager.open(config(DIR_A, DIR_B, DIR_C), disk=disk, clock=ManualClock())


def test_no_move_starts_while_any_dir_is_offline() -> None:
    async def main() -> None:
        disk, manager = _three_dirs()
        partition = manager.create(TP, is_new=True)
        await partition.append_as_leader(batch(0), 1)
        disk.fail_dir(DIR_C)
        manager.describe()
        assert manager.offline_dirs == {DIR_C}
        # the destination is online, but another dir is not: refused, nothing created
        assert manager.alter_replica_log_dir(TP, DIR_B) == ErrorCode.KAFKA_STORAGE_ERROR
        assert manager.move_state(TP).state is MoveState.NONE
        assert partition.future is None
        assert not any(n.startswith("topic") for n in disk.list_dir(DIR_B))
        # asking for the current dir (nothing to do) is still fine
        assert manager.alter_replica_log_dir(TP, DIR_A) == ErrorCode.NONE

    run(main)


def test_move_in_progress_goes_on_when_a_third_dir_fails_but_cannot_be_redirected() -> None:
    async def main() -> None:
        disk, manager = _three_dirs()
        partition = manager.create(TP, is_new=True)
        for i in range(30):
            await partition.append_as_leader(batch(i), 1)
        assert manager.alter_replica_log_dir(TP, DIR_B) == ErrorCode.NONE
        manager.copy_step_nowait(TP, 400)
        disk.fail_dir(DIR_C)
        manager.describe()
        assert manager.move_state(TP).state is MoveState.COPYING
        # a redirect would create a new .move: refused, the move keeps its destination
        assert manager.alter_replica_log_dir(TP, DIR_C) == ErrorCode.KAFKA_STORAGE_ERROR
        assert manager.alter_replica_log_dir(TP, DIR_B) == ErrorCode.NONE
        assert manager.move_state(TP).dest_dir == DIR_B
        await drive_move(manager)
        assert manager.move_state(TP).state is MoveState.DONE
        assert partition.log_dir == DIR_B

    run(main)


def test_cancel_is_accepted_while_a_dir_is_offline() -> None:
    async def main() -> None:
        disk, manager = _three_dirs()
        partition = manager.create(TP, is_new=True)
        for i in range(30):
            await partition.append_as_leader(batch(i), 1)
        manager.alter_replica_log_dir(TP, DIR_B)
        manager.copy_step_nowait(TP, 400)
        disk.fail_dir(DIR_C)
        manager.describe()
        assert manager.alter_replica_log_dir(TP, "any") == ErrorCode.NONE
        assert manager.move_state(TP).state is MoveState.CANCELLED
        assert partition.future is None

    run(main)
