"""One test per Apache Kafka bug of ``reference/kafka-implementation.md`` §4 that storage owns."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio
import trio.testing

from conformance.disk import SimDisk
from impl.storage import ErrorCode, LogDirOffline, LogManager, MoveState, TopicPartition
from impl.storage.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    parse_offsets,
)
from impl.storage.manager import PartitionLock
from impl.storage.names import DirKind, dir_name
from impl.storage.runtime import swap_when_caught_up

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
    log_bytes,
    run,
)


def _read_text(disk: SimDisk, path: str) -> str:
    return disk.read(path, 0, disk.size(path)).decode()


async def _filled(
    disk: SimDisk, count: int = 40, dirs: tuple[str, ...] = (DIR_A, DIR_B),
    lock_factory: Callable[[], PartitionLock] | None = None,
) -> LogManager:
    manager = LogManager.open(config(*dirs), disk=disk, clock=ManualClock(),
                              lock_factory=lock_factory)
    partition = manager.create(TP, is_new=True)
    assert partition.log_dir == DIR_A
    for i in range(count):
        await partition.append_as_leader(batch(i), 1 + i // 10)
    return manager


def test_kafka_8002_catch_up_compares_offsets_only() -> None:
    """The source rolled an empty active segment: equal LEOs are caught up, whatever the
    segment layout; the final catch-up then mirrors the layout exactly."""

    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        manager = await _filled(disk)
        partition = manager.get(TP)
        assert partition is not None
        manager.alter_replica_log_dir(TP, DIR_B)
        while manager.move_state(TP).state is MoveState.COPYING:
            manager.copy_step_nowait(TP, 1 << 20)
            if partition.future is not None and (
                partition.future.log_end_offset == partition.log_end_offset
            ):
                break
        partition.log.roll()  # a new, empty active segment on the source only
        assert partition.future is not None
        assert partition.future.log_end_offset == partition.log_end_offset
        assert len(partition.future.segments) < len(partition.log.segments)
        manager.copy_step_nowait(TP, 1 << 20)
        await drive_move(manager)
        assert manager.move_state(TP).state is MoveState.DONE
        assert [s.base_offset for s in partition.log.segments][-1] == partition.log_end_offset

    run(main)


def test_kafka_9087_resume_from_the_destinations_own_position() -> None:
    """After a crash mid-copy the mover resumes at the ``.move``'s recovered LEO, not at the
    source's HW nor at zero."""
    disk = SimDisk([DIR_A, DIR_B])

    async def before_crash() -> None:
        manager = await _filled(disk, 60)
        partition = manager.get(TP)
        assert partition is not None
        partition.high_watermark = 5
        partition.flush()
        manager.checkpoint()
        manager.alter_replica_log_dir(TP, DIR_B)
        for _ in range(4):
            manager.copy_step_nowait(TP, 400)
        assert partition.future is not None
        partition.future.flush()

    run(before_crash)
    disk.crash(ExtremeRng(keep=False))  # type: ignore[arg-type]

    async def after() -> None:
        manager = LogManager.open(config(), disk=disk, clock=ManualClock())
        move = manager.move_state(TP)
        assert move.state is MoveState.COPYING
        partition = manager.get(TP)
        assert partition is not None
        assert partition.future is not None
        resumed_at = partition.future.log_end_offset
        assert resumed_at > partition.high_watermark
        size_before = partition.future.size_in_bytes
        copied = manager.copy_step_nowait(TP, 400)
        assert partition.future.size_in_bytes == size_before + copied
        await drive_move(manager)
        assert log_bytes(disk, DIR_B) == source_bytes

    source_bytes = log_bytes(disk, DIR_A)
    run(after)


def test_kafka_8362_and_9263_checkpoints_and_hw_move_with_the_partition() -> None:
    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        manager = await _filled(disk)
        partition = manager.get(TP)
        assert partition is not None
        partition.high_watermark = 33
        manager.checkpoint()
        assert TP in parse_offsets(_read_text(disk, f"{DIR_A}/{REPLICATION_OFFSET_CHECKPOINT}"))
        manager.alter_replica_log_dir(TP, DIR_B)
        await drive_move(manager)
        assert partition.high_watermark == 33  # KAFKA-9263: the HW is on the new live log
        assert partition.log.log_dir == DIR_B
        for name in (REPLICATION_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT):
            assert TP not in parse_offsets(_read_text(disk, f"{DIR_A}/{name}"))  # KAFKA-8362
            assert TP in parse_offsets(_read_text(disk, f"{DIR_B}/{name}"))
        assert parse_offsets(_read_text(disk, f"{DIR_B}/{REPLICATION_OFFSET_CHECKPOINT}"))[TP] == 33
        reopened = LogManager.open(config(), disk=disk, clock=ManualClock())
        again = reopened.get(TP)
        assert again is not None
        assert again.high_watermark == 33

    run(main)


def test_kafka_15608_leader_epoch_cache_is_carried_with_the_swap() -> None:
    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        manager = await _filled(disk)  # epochs 1..4, 20 records each
        partition = manager.get(TP)
        assert partition is not None
        before = [partition.end_offset_for_epoch(e) for e in range(6)]
        manager.alter_replica_log_dir(TP, DIR_B)
        await drive_move(manager)
        assert [partition.end_offset_for_epoch(e) for e in range(6)] == before
        text = _read_text(disk, f"{DIR_B}/{dir_name(TP)}/{LEADER_EPOCH_CHECKPOINT}")
        assert text.splitlines()[:2] == ["0", "4"]
        reopened = LogManager.open(config(), disk=disk, clock=ManualClock())
        again = reopened.get(TP)
        assert again is not None
        assert [again.end_offset_for_epoch(e) for e in range(6)] == before

    run(main)


def test_kafka_16234_lost_replica_is_not_recreated_empty_and_10314_is_new_is() -> None:
    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        failures: list[str] = []
        manager = await _filled(disk)
        manager.set_dir_failure_callback(failures.append)
        disk.fail_dir(DIR_A)
        partition = manager.get(TP)
        assert partition is not None
        with pytest.raises(LogDirOffline):
            await partition.append_as_leader(batch(0), 9)
        assert failures == [DIR_A]
        assert TP in manager.offline_replicas
        with pytest.raises(LogDirOffline):
            manager.create(TP)
        new_tp = TopicPartition("fresh", 0)
        with pytest.raises(LogDirOffline):
            manager.create(new_tp)  # a dir is offline: it may hold the replica
        assert manager.create(new_tp, is_new=True).log_dir == DIR_B  # KAFKA-10314
        # another I/O error on the same dir is not reported again
        with pytest.raises(LogDirOffline):
            partition.read(0, 100)
        assert failures == [DIR_A]

    run(main)


def test_kafka_16234_after_restart_with_an_unreadable_dir() -> None:
    disk = SimDisk([DIR_A, DIR_B])

    async def fill() -> None:
        manager = await _filled(disk)
        manager.close()

    run(fill)
    disk.make_unreadable(DIR_A)

    async def restart() -> None:
        manager = LogManager.open(config(), disk=disk, clock=ManualClock())
        assert manager.offline_dirs == {DIR_A}
        assert manager.get(TP) is None
        with pytest.raises(LogDirOffline):
            manager.create(TP)
        assert manager.alter_replica_log_dir(TP, DIR_B) == ErrorCode.REPLICA_NOT_AVAILABLE
        described = {d.path: d for d in manager.describe()}
        assert described[DIR_A].error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert described[DIR_B].online

    run(restart)


def test_kafka_6949_9750_requests_racing_the_swap() -> None:
    """A cancel that arrives while the mover waits for the lock wins cleanly; the lock is
    released; a request after the swap sees a finished move."""

    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        manager = await _filled(disk, lock_factory=trio.Lock)
        partition = manager.get(TP)
        assert partition is not None
        manager.alter_replica_log_dir(TP, DIR_B)
        while manager.move_state(TP).state is MoveState.COPYING:
            manager.copy_step_nowait(TP, 1 << 20)
        assert manager.move_state(TP).state is MoveState.CAUGHT_UP
        async with trio.open_nursery() as nursery:
            await partition.lock.acquire()  # an appender holds the lock
            nursery.start_soon(swap_when_caught_up, manager, TP)
            await trio.testing.wait_all_tasks_blocked()
            assert manager.alter_replica_log_dir(TP, "any") == ErrorCode.NONE
            partition.lock.release()
        assert manager.move_state(TP).state is MoveState.CANCELLED
        assert not partition.lock.locked()
        assert partition.log_dir == DIR_A
        await partition.append_as_leader(batch(1), 5)

    run(main)


def test_kafka_14824_failed_destination_stops_growing() -> None:
    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B, DIR_C])
        manager = await _filled(disk, dirs=(DIR_A, DIR_B, DIR_C))
        partition = manager.get(TP)
        assert partition is not None
        manager.alter_replica_log_dir(TP, DIR_B)
        manager.copy_step_nowait(TP, 400)
        disk.fail_dir(DIR_B)
        manager.copy_step_nowait(TP, 400)
        assert manager.move_state(TP).state is MoveState.FAILED
        assert partition.future is None
        assert not partition.offline
        await partition.append_as_leader(batch(7), 9)
        # no new .move while a dir is offline (spec §Recovery, condition 1): refused, and the
        # failed .move is not recreated elsewhere
        assert manager.alter_replica_log_dir(TP, DIR_C) == ErrorCode.KAFKA_STORAGE_ERROR
        assert manager.move_state(TP).state is MoveState.FAILED
        assert partition.future is None
        assert dir_name(TP, DirKind.MOVE) not in disk.list_dir(DIR_C)
        assert partition.log_dir == DIR_A

    run(main)
