"""Replica moves end to end: concurrent appends, cancel, redirect, request errors, runner."""

from __future__ import annotations

from pathlib import Path

import trio

from conformance.disk import SimDisk
from impl.storage import ErrorCode, LogManager, MoveState, StorageConfig, TopicPartition
from impl.storage import record_batch as rb
from impl.storage.names import DirKind, dir_name
from impl.storage.os_disk import OsDisk
from impl.storage.runtime import run_log_manager, wait_moves_done

from ._support import (
    DIR_A,
    DIR_B,
    DIR_C,
    TP,
    ManualClock,
    batch,
    config,
    drive_move,
    log_bytes,
    run,
)


def _expected_log(count: int, epoch_of: dict[int, int]) -> bytes:
    out = bytearray()
    offset = 0
    for i in range(count):
        data = bytearray(batch(i))
        headers = rb.validate_client_records(data, 1 << 20)
        rb.assign_offsets(data, headers, offset, epoch_of[i])
        offset += headers[0].record_count
        out += data
    return bytes(out)


def _read_all(manager: LogManager, tp: TopicPartition = TP) -> bytes:
    partition = manager.get(tp)
    assert partition is not None
    out = bytearray()
    offset = partition.log_start_offset
    while offset < partition.log_end_offset:
        slices = partition.read(offset, 1 << 20)
        assert slices
        for piece in slices:
            data = piece.read_all()
            piece.close()
            out += data
        offset = list(rb.iter_batches(bytes(out)))[-1].next_offset
    return bytes(out)


def test_move_under_concurrent_appends_real_disk_and_runner(tmp_path: Path) -> None:
    dirs = (str(tmp_path / "a"), str(tmp_path / "b"))
    cfg = StorageConfig(log_dirs=dirs, segment_bytes=4000, move_chunk_bytes=1000,
                        index_interval_bytes=200, flush_interval_ms=50)
    epochs: dict[int, int] = {}

    async def main() -> None:
        manager = LogManager.open(cfg, disk=OsDisk())
        partition = manager.create(TP, is_new=True)
        for i in range(200):
            epochs[i] = 1
            await partition.append_as_leader(batch(i), 1)
        assert manager.alter_replica_log_dir(TP, dirs[1]) == ErrorCode.NONE
        async with trio.open_nursery() as nursery:
            run_log_manager(manager, nursery)
            for i in range(200, 400):
                epochs[i] = 2
                await partition.append_as_leader(batch(i), 2)
                await trio.sleep(0)
            await wait_moves_done(manager, 30)
            manager.close()
        assert partition.log_dir == dirs[1]
        assert manager.move_state(TP).state is MoveState.DONE
        assert _read_all(manager) == _expected_log(400, epochs)
        assert not (tmp_path / "a" / dir_name(TP)).exists()
        assert not (tmp_path / "a" / dir_name(TP, DirKind.DELETE)).exists()
        reopened = LogManager.open(cfg, disk=OsDisk())
        assert _read_all(reopened) == _expected_log(400, epochs)

    run(main)


def test_cancel_with_any_and_with_the_current_dir() -> None:
    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        manager = LogManager.open(config(), disk=disk, clock=ManualClock())
        partition = manager.create(TP, is_new=True)
        for i in range(40):
            await partition.append_as_leader(batch(i), 1)
        before = log_bytes(disk, DIR_A)
        for cancel_with in ("any", DIR_A):
            assert manager.alter_replica_log_dir(TP, DIR_B) == ErrorCode.NONE
            manager.copy_step_nowait(TP, 400)
            assert dir_name(TP, DirKind.MOVE) in disk.list_dir(DIR_B)
            assert manager.alter_replica_log_dir(TP, cancel_with) == ErrorCode.NONE
            assert manager.move_state(TP).state is MoveState.CANCELLED
            assert partition.future is None
            manager.delete_pending_nowait()
            assert disk.list_dir(DIR_B) == ["meta.properties"] or all(
                not name.startswith("topic") for name in disk.list_dir(DIR_B)
            )
            assert partition.log_dir == DIR_A
            assert log_bytes(disk, DIR_A) == before

    run(main)


def test_redirect_abandons_the_old_move_and_finishes_on_the_new_dir() -> None:
    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B, DIR_C])
        manager = LogManager.open(config(DIR_A, DIR_B, DIR_C), disk=disk, clock=ManualClock())
        partition = manager.create(TP, is_new=True)
        for i in range(40):
            await partition.append_as_leader(batch(i), 1)
        source = log_bytes(disk, DIR_A)
        assert manager.alter_replica_log_dir(TP, DIR_B) == ErrorCode.NONE
        manager.copy_step_nowait(TP, 400)
        assert manager.alter_replica_log_dir(TP, DIR_B) == ErrorCode.NONE  # same dest: nothing
        assert manager.alter_replica_log_dir(TP, DIR_C) == ErrorCode.NONE
        move = manager.move_state(TP)
        assert (move.state, move.dest_dir) == (MoveState.COPYING, DIR_C)
        assert dir_name(TP, DirKind.MOVE) not in disk.list_dir(DIR_B)
        await drive_move(manager)
        assert partition.log_dir == DIR_C
        assert log_bytes(disk, DIR_C) == source
        assert not any(n.startswith("topic") for n in disk.list_dir(DIR_B))

    run(main)


def test_request_errors_and_pending_placement() -> None:
    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        manager = LogManager.open(config(), disk=disk, clock=ManualClock())
        for bad in ("/data/a/../b", "/data/b/", "data/b", "/data", "", "/data/x"):
            assert manager.alter_replica_log_dir(TP, bad) == 57
        # not hosted: remembered, REPLICA_NOT_AVAILABLE, created there later
        assert manager.alter_replica_log_dir(TP, DIR_B) == 9
        assert manager.move_state(TP).state is MoveState.PENDING_PLACEMENT
        partition = manager.create(TP, is_new=True)
        assert partition.log_dir == DIR_B
        assert manager.move_state(TP).state is MoveState.DONE
        # same dir as now: nothing to do
        assert manager.alter_replica_log_dir(TP, DIR_B) == ErrorCode.NONE
        assert manager.move_state(TP).state is MoveState.DONE
        assert partition.future is None
        # offline destination
        disk.fail_dir(DIR_A)
        manager.describe()
        assert DIR_A in manager.offline_dirs
        assert manager.alter_replica_log_dir(TP, DIR_A) == 56

    run(main)


def test_pending_placement_can_be_cancelled_with_any() -> None:
    async def main() -> None:
        manager = LogManager.open(config(), disk=SimDisk([DIR_A, DIR_B]), clock=ManualClock())
        assert manager.alter_replica_log_dir(TP, DIR_B) == ErrorCode.REPLICA_NOT_AVAILABLE
        assert manager.alter_replica_log_dir(TP, "any") == ErrorCode.REPLICA_NOT_AVAILABLE
        assert manager.move_state(TP).state is MoveState.CANCELLED
        assert manager.create(TP, is_new=True).log_dir == DIR_A

    run(main)


def test_describe_reports_temporary_replica_and_lag() -> None:
    async def main() -> None:
        manager = LogManager.open(config(), disk=SimDisk([DIR_A, DIR_B]), clock=ManualClock())
        partition = manager.create(TP, is_new=True)
        for i in range(40):
            await partition.append_as_leader(batch(i), 1)
        manager.alter_replica_log_dir(TP, DIR_B)
        manager.copy_step_nowait(TP, 400)
        by_dir = {d.path: d for d in manager.describe()}
        (live,) = by_dir[DIR_A].replicas
        (temp,) = by_dir[DIR_B].replicas
        assert (live.is_temporary, temp.is_temporary) == (False, True)
        assert temp.offset_lag == partition.log_end_offset - temp.log_end_offset > 0
        assert by_dir[DIR_A].total_bytes > 0
        info = manager.replica_dir_info(TP)
        assert (info.current_dir, info.future_dir) == (DIR_A, DIR_B)
        assert info.future_offset_lag == temp.offset_lag
        assert info.move_state is MoveState.COPYING

    run(main)


def test_runner_respects_mover_count_and_live_throttle_changes(tmp_path: Path) -> None:
    dirs = (str(tmp_path / "a"), str(tmp_path / "b"))
    cfg = StorageConfig(log_dirs=dirs, move_chunk_bytes=2000, num_replica_alter_log_dirs_threads=1,
                        intra_broker_throttled_rate=20_000)
    tps = [TopicPartition("t", p) for p in range(3)]

    async def main() -> None:
        manager = LogManager.open(cfg, disk=OsDisk())
        for tp in tps:
            partition = manager.create(tp, is_new=True)
            for i in range(30):
                await partition.append_as_leader(batch(i), 1)
            if partition.log_dir != dirs[1]:
                manager.alter_replica_log_dir(tp, dirs[1])
            else:
                manager.alter_replica_log_dir(tp, dirs[0])
        async with trio.open_nursery() as nursery:
            run_log_manager(manager, nursery)
            await trio.sleep(0.05)
            moving = [tp for tp in tps if manager.move_state(tp).state is MoveState.COPYING
                      and manager.get(tp).future is not None  # type: ignore[union-attr]
                      and manager.get(tp).future.size_in_bytes > 0]  # type: ignore[union-attr]
            assert len(moving) <= 1
            manager.set_throttle_rate(1 << 40)
            manager.set_mover_count(3)
            await wait_moves_done(manager, 30)
            manager.close()
        assert all(manager.move_state(tp).state is MoveState.DONE for tp in tps)

    run(main)
