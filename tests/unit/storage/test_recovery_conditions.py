"""The three conditions the replica-move model needs (``spec/replica_move.md`` §Recovery):
no new ``.move`` while a dir is offline, an unmounted dir detected at startup, and a queued
deletion removed only while a served copy at least as long exists."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from conformance.disk import SimDisk
from impl.storage import ErrorCode, LogManager, MoveState
from impl.storage.checkpoint import META_PROPERTIES, parse_meta_properties, read_checkpoint
from impl.storage.disk import Disk
from impl.storage.move_recovery import RecoveryRule
from impl.storage.names import DirKind, TopicPartition, dir_name
from impl.storage.os_disk import OsDisk
from impl.storage.runtime import swap_when_caught_up

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


def test_a_redirect_whose_old_move_dir_failed_unnoticed_creates_no_second_move() -> None:
    """Seed 954 of ``logproof conformance run --brokers 1``: the destination's dir failed before
    any I/O noticed it; a redirect then failed to retire the old ``tp.move`` and created the new
    one anyway. After the dir came back, recovery found two ``.move`` dirs (the swap had renamed
    ``tp`` away) and kept the partition offline although every dir was good. The redirect now
    stops the move (the source stays served) and answers KAFKA_STORAGE_ERROR."""
    async def main() -> None:
        disk, manager = _three_dirs()
        partition = manager.create(TP, is_new=True)
        for i in range(30):
            await partition.append_as_leader(batch(i), 1)
        assert manager.alter_replica_log_dir(TP, DIR_B) == ErrorCode.NONE
        manager.copy_step_nowait(TP, 400)
        disk.fail_dir(DIR_B)  # not noticed yet: no I/O touched it
        assert manager.offline_dirs == frozenset()
        assert manager.alter_replica_log_dir(TP, DIR_C) == ErrorCode.KAFKA_STORAGE_ERROR
        assert manager.offline_dirs == {DIR_B}
        assert manager.move_state(TP).state is MoveState.FAILED
        assert partition.future is None
        assert not partition.offline
        assert partition.log_dir == DIR_A
        assert not any(n.startswith("topic") for n in disk.list_dir(DIR_C))
        end = partition.log_end_offset
        # the dir comes back and the broker restarts: one .move, the served tp: resumed or not,
        # never ambiguous
        disk.repair_dir(DIR_B)
        reopened = LogManager.open(config(DIR_A, DIR_B, DIR_C), disk=disk, clock=ManualClock())
        assert TP not in reopened.offline_replicas
        again = reopened.get(TP)
        assert again is not None
        assert again.log_end_offset == end

    run(main)


def test_move_in_progress_goes_on_when_a_third_dir_fails_but_cannot_be_redirected() -> None:
    async def main() -> None:
        dir_d = "/data/d"
        disk = SimDisk([DIR_A, DIR_B, DIR_C, dir_d])
        manager = LogManager.open(
            config(DIR_A, DIR_B, DIR_C, dir_d), disk=disk, clock=ManualClock()
        )
        partition = manager.create(TP, is_new=True)
        for i in range(30):
            await partition.append_as_leader(batch(i), 1)
        assert manager.alter_replica_log_dir(TP, DIR_B) == ErrorCode.NONE
        manager.copy_step_nowait(TP, 400)
        disk.fail_dir(DIR_C)
        manager.describe()
        assert manager.move_state(TP).state is MoveState.COPYING
        # a redirect to an online dir would create a new .move: refused, the move keeps its
        # destination
        assert manager.alter_replica_log_dir(TP, dir_d) == ErrorCode.KAFKA_STORAGE_ERROR
        assert disk.list_dir(dir_d) == ["meta.properties"]
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


# --- condition 2: an unmounted log dir is detected at startup ----------------------------------


def _wipe(disk: Disk, path: str) -> None:
    """Remove everything under ``path`` (keep ``path``): an empty mount point."""
    for name in disk.list_dir(path):
        child = f"{path}/{name}"
        if disk.is_dir(child):
            _wipe(disk, child)
            disk.rmdir(child)
        else:
            disk.remove(child)
    disk.fsync_dir(path)


def _meta(disk: Disk, log_dir: str) -> dict[str, str]:
    text = read_checkpoint(disk, log_dir, META_PROPERTIES)
    assert text is not None
    return parse_meta_properties(text)


def test_new_broker_records_every_dir_id_in_every_dir() -> None:
    disk = SimDisk([DIR_A, DIR_B, DIR_C])
    LogManager.open(config(DIR_A, DIR_B, DIR_C), disk=disk, clock=ManualClock())
    metas = [_meta(disk, d) for d in (DIR_A, DIR_B, DIR_C)]
    ids = {m["directory.id"] for m in metas}
    assert len(ids) == 3
    assert all(m["log.dir.ids"] == ",".join(sorted(ids)) for m in metas)


def _unmounted_dest_layout(disk: Disk, a: str, b: str, c: str) -> bytes:
    """``tp`` moved from ``a`` to ``b``; then a ``.move`` to ``c`` was started and partly copied.
    Returns the live log's bytes. (Built with the manager itself, all dirs online.)"""

    async def main() -> bytes:
        manager = LogManager.open(config(a, b, c), disk=disk, clock=ManualClock())
        partition = manager.create(TP, is_new=True)
        for i in range(40):
            await partition.append_as_leader(batch(i), 1)
        manager.alter_replica_log_dir(TP, b)
        await drive_move(manager)
        for i in range(40, 60):
            await partition.append_as_leader(batch(i), 1)
        manager.alter_replica_log_dir(TP, c)
        manager.copy_step_nowait(TP, 400)
        manager.close()
        return log_bytes(disk, b)

    result: list[bytes] = []

    async def wrapper() -> None:
        result.append(await main())

    run(wrapper)
    return result[0]


def _check_unmounted_dir_is_offline(disk: Disk, a: str, b: str, c: str) -> None:
    live = _unmounted_dest_layout(disk, a, b, c)
    assert dir_name(TP, DirKind.MOVE) in disk.list_dir(c)
    _wipe(disk, b)  # B's disk is not mounted: its mount point reads as an empty dir
    manager = LogManager.open(config(a, b, c), disk=disk, clock=ManualClock())
    assert manager.offline_dirs == {b}
    assert disk.list_dir(b) == []  # never re-initialised
    assert TP in manager.offline_replicas  # rule 3: the partial .move on C is not promoted
    assert dir_name(TP, DirKind.MOVE) in disk.list_dir(c)
    assert dir_name(TP) not in disk.list_dir(c)
    (decision,) = manager.recovery_decisions
    assert decision.rules == (RecoveryRule.OFFLINE_UNTOUCHED,)
    assert len(live) > len(log_bytes(disk, c, DirKind.MOVE))


def test_unmounted_dir_is_offline_not_reinitialised_sim_disk() -> None:
    _check_unmounted_dir_is_offline(SimDisk([DIR_A, DIR_B, DIR_C]), DIR_A, DIR_B, DIR_C)


def test_unmounted_dir_is_offline_not_reinitialised_real_disk(tmp_path: Path) -> None:
    a, b, c = (str(tmp_path / n) for n in "abc")
    disk = OsDisk()
    _check_unmounted_dir_is_offline(disk, a, b, c)
    # still unmounted at the next start: still offline, still untouched
    assert LogManager.open(config(a, b, c), disk=disk, clock=ManualClock()).offline_dirs == {b}


def test_added_dir_is_initialised_then_recorded(tmp_path: Path) -> None:
    a, b, c = (str(tmp_path / n) for n in "abc")
    disk = OsDisk()
    LogManager.open(config(a, b), disk=disk, clock=ManualClock()).close()
    before = {_meta(disk, d)["directory.id"] for d in (a, b)}
    manager = LogManager.open(config(a, b, c), disk=disk, clock=ManualClock())
    assert manager.offline_dirs == frozenset()
    ids = {_meta(disk, d)["directory.id"] for d in (a, b, c)}
    assert before < ids
    assert all(_meta(disk, d)["log.dir.ids"] == ",".join(sorted(ids)) for d in (a, b, c))
    assert not any(name.endswith(".tmp") for d in (a, b, c) for name in disk.list_dir(d))


def test_missing_dir_while_another_is_unreadable_keeps_its_id_recorded() -> None:
    disk = SimDisk([DIR_A, DIR_B, DIR_C])
    LogManager.open(config(DIR_A, DIR_B, DIR_C), disk=disk, clock=ManualClock())
    ids = _meta(disk, DIR_A)["log.dir.ids"]
    disk.fail_dir(DIR_C)
    manager = LogManager.open(config(DIR_A, DIR_B, DIR_C), disk=disk, clock=ManualClock())
    assert manager.offline_dirs == {DIR_C}
    assert _meta(disk, DIR_A)["log.dir.ids"] == ids  # C's id is not forgotten while offline
    disk.repair_dir(DIR_C)
    _wipe(disk, DIR_B)
    manager = LogManager.open(config(DIR_A, DIR_B, DIR_C), disk=disk, clock=ManualClock())
    assert manager.offline_dirs == {DIR_B}


# --- condition 3: a queued deletion needs a served copy at least as long ---------------------


async def _swapped_not_deleted(disk: SimDisk, manager: LogManager, records: int) -> bytes:
    """Move ``TP`` from A to B up to the swap; the old source's deletion is queued, not run.
    Returns the source's bytes."""
    partition = manager.create(TP, is_new=True)
    for i in range(records):
        await partition.append_as_leader(batch(i), 1)
    source = log_bytes(disk, DIR_A)
    manager.alter_replica_log_dir(TP, DIR_B)
    while manager.move_state(TP).state is MoveState.COPYING:
        manager.copy_step_nowait(TP, 400)
    await swap_when_caught_up(manager, TP)
    assert manager.move_state(TP).state is MoveState.DONE
    assert partition.log_dir == DIR_B
    assert dir_name(TP, DirKind.DELETE) in disk.list_dir(DIR_A)
    return source


def test_queued_delete_is_kept_when_the_served_copy_goes_offline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        disk, manager = _three_dirs()
        source = await _swapped_not_deleted(disk, manager, 30)
        disk.fail_dir(DIR_B)  # the new live copy's dir dies before the deletion runs
        manager.describe()
        assert TP in manager.offline_replicas
        with caplog.at_level(logging.WARNING, logger="impl.storage.manager"):
            assert manager.delete_pending_nowait() == 0
            assert manager.delete_pending_nowait() == 0
        assert log_bytes(disk, DIR_A, DirKind.DELETE) == source  # the last readable copy
        kept = [r.getMessage() for r in caplog.records if "keeping" in r.getMessage()]
        assert len(kept) == 1  # logged once, not at every retry
        assert "no online dir serves the partition" in kept[0]
        # a topic deletion removes it after all
        manager.delete(TP)
        assert manager.delete_pending_nowait() == 1
        assert dir_name(TP, DirKind.DELETE) not in disk.list_dir(DIR_A)

    run(main)


def test_queued_delete_waits_until_the_served_log_is_as_long() -> None:
    async def main() -> None:
        disk, manager = _three_dirs()
        await _swapped_not_deleted(disk, manager, 30)
        partition = manager.get(TP)
        assert partition is not None
        doomed_leo = partition.log_end_offset
        partition.truncate_to(doomed_leo - 10)  # the served log is now shorter than the copy
        assert manager.delete_pending_nowait() == 0
        assert dir_name(TP, DirKind.DELETE) in disk.list_dir(DIR_A)
        i = 100
        while partition.log_end_offset < doomed_leo:
            assert manager.delete_pending_nowait() == 0
            await partition.append_as_leader(batch(i), 2)
            i += 1
        assert manager.delete_pending_nowait() == 1
        assert dir_name(TP, DirKind.DELETE) not in disk.list_dir(DIR_A)
        assert manager.move_state(TP).state is MoveState.DONE

    run(main)


def test_recovered_delete_is_measured_on_disk_and_kept_while_longer() -> None:
    async def main() -> None:
        disk, manager = _three_dirs()
        source = await _swapped_not_deleted(disk, manager, 30)
        manager.close()
        restarted = LogManager.open(config(DIR_A, DIR_B, DIR_C), disk=disk, clock=ManualClock())
        (decision,) = restarted.recovery_decisions
        assert decision.rules == (RecoveryRule.LIVE, RecoveryRule.DELETE_SCHEDULED)
        partition = restarted.get(TP)
        assert partition is not None
        partition.truncate_to(partition.log_end_offset - 1)
        assert restarted.delete_pending_nowait() == 0  # the .delete's LEO is read from disk
        assert log_bytes(disk, DIR_A, DirKind.DELETE) == source
        await partition.append_as_leader(batch(99), 2)
        assert restarted.delete_pending_nowait() == 1

    run(main)


def test_a_dir_that_fails_during_recovery_serves_none_of_its_partitions() -> None:
    """Found by the simulator's partial disk faults (seed 170 of ``conformance run --brokers
    1``): a dir with one failing file (or full, or read-only) opens fine until recovery touches
    the fault in one partition and takes the dir offline; the partitions recovered after that
    one were still loaded from it and served online from an offline dir, and the next failure
    on it, reported once already, offlined nothing. Every partition of the dir is now offline
    with it."""
    async def main() -> None:
        disk, manager = _three_dirs()
        first, second = TopicPartition("topic", 0), TopicPartition("topic", 1)
        for tp in (first, second):
            # placed on DIR_A (remembered for the creation, KIP-113)
            assert manager.alter_replica_log_dir(tp, DIR_A) == ErrorCode.REPLICA_NOT_AVAILABLE
            partition = manager.create(tp, is_new=True)
            assert partition.log_dir == DIR_A
            await partition.append_as_leader(batch(0), 1)
            partition.flush()
        # a bad sector in the first partition's segment: recovery reads it, the dir fails
        disk.fail_file(f"{DIR_A}/{dir_name(first)}/00000000000000000000.log")
        reopened = LogManager.open(config(DIR_A, DIR_B, DIR_C), disk=disk, clock=ManualClock())
        assert DIR_A in reopened.offline_dirs
        assert {first, second} <= reopened.offline_replicas
        for tp in (first, second):
            found = reopened.get(tp)
            assert found is None or found.offline

    run(main)


def test_a_move_is_not_resumed_into_a_dir_that_failed_during_recovery() -> None:
    """Found by ``logproof fuzz`` (seed 182, the storage broker): a move's destination dir
    failed during startup recovery (another partition's failing file) after the move had been
    classified RESUME_MOVE; the move was resumed into the offline dir, swapped, and the
    partition was served from it. A destination that failed is not resumed into."""
    async def main() -> None:
        disk, manager = _three_dirs()
        first, second = TopicPartition("topic", 0), TopicPartition("topic", 1)
        assert manager.alter_replica_log_dir(first, DIR_B) == ErrorCode.REPLICA_NOT_AVAILABLE
        assert manager.alter_replica_log_dir(second, DIR_A) == ErrorCode.REPLICA_NOT_AVAILABLE
        for tp in (first, second):
            partition = manager.create(tp, is_new=True)
            for i in range(20):
                await partition.append_as_leader(batch(i), 1)
            partition.flush()
        assert manager.alter_replica_log_dir(second, DIR_B) == ErrorCode.NONE
        manager.copy_step_nowait(second, 400)
        assert dir_name(second, DirKind.MOVE) in disk.list_dir(DIR_B)
        disk.fail_file(f"{DIR_B}/{dir_name(first)}/00000000000000000000.log")
        reopened = LogManager.open(config(DIR_A, DIR_B, DIR_C), disk=disk, clock=ManualClock())
        assert DIR_B in reopened.offline_dirs
        served = reopened.get(second)
        assert served is not None
        assert served.log_dir == DIR_A
        assert reopened.move_state(second).state is MoveState.NONE
        assert served.future is None

    run(main)


def test_a_queued_delete_stays_while_the_served_copys_disk_died_unnoticed() -> None:
    """Found by the simulator's composite fault ``fail_after_swap`` (``conformance run --brokers
    1``, seed 13 of the first run with it): a move swapped, then the served copy's disk died
    with no I/O since; the background removal of the swap's ``tp.delete`` saw the partition
    online (nothing had noticed the failure) and removed the only copy on a working disk. It
    now looks at the served copy first: the failure is noticed, the copy is kept."""
    async def main() -> None:
        disk, manager = _three_dirs()
        partition = manager.create(TP, is_new=True)
        for i in range(5):
            await partition.append_as_leader(batch(i), 1)
        partition.flush()
        source = partition.log_dir
        dest = next(d for d in (DIR_A, DIR_B, DIR_C) if d != source)
        assert manager.alter_replica_log_dir(TP, dest) == ErrorCode.NONE
        for _ in range(1000):
            state = manager.move_state(TP).state
            if state is MoveState.COPYING:
                manager.copy_step_nowait(TP, 1 << 20)
            elif state is MoveState.CAUGHT_UP:
                partition.lock.acquire_nowait()
                manager.swap_locked_nowait(TP)
            else:
                break
        assert manager.move_state(TP).state is MoveState.DONE
        assert disk.exists(f"{source}/{dir_name(TP, DirKind.DELETE)}")
        disk.fail_dir(dest)
        assert manager.delete_pending_nowait() == 0
        assert disk.exists(f"{source}/{dir_name(TP, DirKind.DELETE)}")
        assert dest in manager.offline_dirs

    run(main)
