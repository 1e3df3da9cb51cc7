"""Startup classification (KIP-113 §3 and the added rules) and the machine tables."""

from __future__ import annotations

import itertools

import pytest

from conformance.disk import SimDisk
from impl.storage import LogManager, RecoveryRule
from impl.storage import log_dir_failure as ldf
from impl.storage import replica_move as rm
from impl.storage.move_recovery import PartitionDirs, classify
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
    log_bytes,
    run,
)

R = RecoveryRule


def _dirs(live: str = "", move: str = "", delete: str = "") -> PartitionDirs:
    def names(text: str) -> frozenset[str]:
        return frozenset(f"/d/{c}" for c in text)

    return PartitionDirs(TP, names(live), names(move), names(delete))


@pytest.mark.parametrize(
    ("dirs", "bad", "rules", "offline"),
    [
        (_dirs("a"), False, (R.LIVE,), False),
        (_dirs("a", "b"), False, (R.RESUME_MOVE,), False),
        (_dirs("a", "b"), True, (R.RESUME_MOVE,), False),
        (_dirs("", "b"), False, (R.PROMOTE_MOVE,), False),
        (_dirs("", "b"), True, (R.OFFLINE_UNTOUCHED,), True),
        (_dirs("", "b", "a"), False, (R.PROMOTE_MOVE, R.DELETE_SCHEDULED), False),
        (_dirs("", "b", "a"), True, (R.OFFLINE_UNTOUCHED, R.DELETE_SCHEDULED), True),
        (_dirs("b", "", "a"), True, (R.LIVE, R.DELETE_SCHEDULED), False),
        (_dirs("", "", "a"), False, (R.DELETE_SCHEDULED,), False),
        (_dirs("", "", "a"), True, (R.DELETE_DEFERRED,), True),
        (_dirs("a", "bc"), False, (R.ABANDONED_MOVE_DELETED,), False),
        (_dirs("a", "a"), False, (R.ABANDONED_MOVE_DELETED,), False),
        (_dirs("ab"), False, (R.OFFLINE_AMBIGUOUS,), True),
        (_dirs("", "bc"), False, (R.OFFLINE_AMBIGUOUS,), True),
    ],
)
def test_classification(
    dirs: PartitionDirs, bad: bool, rules: tuple[R, ...], offline: bool
) -> None:
    decision = classify(dirs, bad)
    assert decision.rules == rules
    assert decision.offline == offline
    assert decision.trace().machine == "move_recovery"


def test_move_recovery_total_over_every_small_layout() -> None:
    """Never two live logs; never a deleted dir without a surviving copy or a clean disk set;
    offline only when a bad dir exists or the layout is ambiguous."""
    names = ("a", "b", "c")
    subsets = ["".join(c) for n in range(3) for c in itertools.combinations(names, n)]
    for live, move, delete in itertools.product(subsets, repeat=3):
        for bad in (False, True):
            decision = classify(_dirs(live, move, delete), bad)
            served = [decision.live_dir] if decision.live_dir else []
            assert len(served) <= 1
            if decision.offline:
                assert bad or len(live) >= 2 or (not live and len(move) >= 2)
                assert not decision.promote_dir
                assert not decision.delete_move_dirs
            if decision.delete_dirs and bad:
                assert live or move  # a .delete may be the last copy otherwise
            if live or move:
                assert decision.offline or decision.live_dir is not None
            if decision.delete_move_dirs:
                assert decision.live_dir is not None
                assert decision.live_dir not in decision.delete_move_dirs or len(live) == 1


def test_startup_applies_the_rules() -> None:
    disk = SimDisk([DIR_A, DIR_B, DIR_C])

    async def fill() -> None:
        manager = LogManager.open(config(DIR_A, DIR_B, DIR_C), disk=disk, clock=ManualClock())
        partition = manager.create(TP, is_new=True)
        for i in range(20):
            await partition.append_as_leader(batch(i), 1)
        manager.close()

    run(fill)
    # hand-made: two .move dirs next to the live log (never produced by our protocol)
    for log_dir in (DIR_B, DIR_C):
        disk.mkdir(f"{log_dir}/{dir_name(TP, DirKind.MOVE)}")
        disk.fsync_dir(log_dir)
    manager = LogManager.open(config(DIR_A, DIR_B, DIR_C), disk=disk, clock=ManualClock())
    (decision,) = manager.recovery_decisions
    assert decision.rules == (R.ABANDONED_MOVE_DELETED,)
    partition = manager.get(TP)
    assert partition is not None
    assert partition.log_end_offset == 40
    manager.delete_pending_nowait()
    for log_dir in (DIR_B, DIR_C):
        assert not any(n.startswith("topic") for n in disk.list_dir(log_dir))


def test_move_table_rejects_missing_entries_and_failed_guards() -> None:
    move = rm.Move(TP)
    with pytest.raises(rm.InvalidMoveTransition):
        rm.step(move, rm.MoveInput(rm.MoveEvent.CAUGHT_UP))
    copying = rm.step(
        rm.Move(TP, source_dir=DIR_A), rm.MoveInput(rm.MoveEvent.REQUESTED, DIR_B, source_leo=9)
    ).move
    assert copying.state is rm.MoveState.COPYING
    with pytest.raises(rm.InvalidMoveTransition, match="dest LEO"):
        rm.step(copying, rm.MoveInput(rm.MoveEvent.CAUGHT_UP, source_leo=9, dest_leo=8))
    with pytest.raises(rm.InvalidMoveTransition, match="destination is the source"):
        rm.step(rm.Move(TP, source_dir=DIR_A), rm.MoveInput(rm.MoveEvent.REQUESTED, DIR_A))
    with pytest.raises(rm.InvalidMoveTransition):
        rm.step(copying, rm.MoveInput(rm.MoveEvent.SOURCE_RENAMED))
    # every table entry is reachable by name from the enums; every state has a CRASHED entry
    assert all((s, rm.MoveEvent.CRASHED) in rm.TRANSITIONS for s in rm.MoveState)
    for state, event in rm.TRANSITIONS:
        assert isinstance(state, rm.MoveState)
        assert isinstance(event, rm.MoveEvent)


def test_swap_effects_come_in_the_durable_order() -> None:
    move = rm.Move(TP, rm.MoveState.CAUGHT_UP, DIR_A, DIR_B, 10, 10)
    order: list[str] = []
    for event in (rm.MoveInput(rm.MoveEvent.LOCK_ACQUIRED),
                  rm.MoveInput(rm.MoveEvent.FINAL_CATCH_UP, source_leo=12, dest_leo=12),
                  rm.MoveInput(rm.MoveEvent.DEST_DURABLE),
                  rm.MoveInput(rm.MoveEvent.SOURCE_RENAMED),
                  rm.MoveInput(rm.MoveEvent.DEST_RENAMED),
                  rm.MoveInput(rm.MoveEvent.LOG_SWAPPED)):
        transition = rm.step(move, event)
        order += [type(effect).__name__ for effect in transition.effects]
        move = transition.move
    assert order == ["CopyRemaining", "SyncDest", "RenameSourceToDelete", "RenameMoveToLive",
                     "SwapLog", "ReleaseLock", "DeleteAsync"]
    assert move.state is rm.MoveState.DONE
    assert move.source_dir == DIR_B


def test_dir_failure_effects_by_side_and_step() -> None:
    base = rm.Move(TP, rm.MoveState.SWAPPING, DIR_A, DIR_B, 5, 5, lock_held=True,
                   dest_durable=True)

    def effects(move: rm.Move, failed: str) -> list[str]:
        transition = rm.step(move, rm.MoveInput(rm.MoveEvent.DIR_FAILED, failed))
        assert transition.move.state is rm.MoveState.FAILED
        return [type(effect).__name__ for effect in transition.effects]

    assert effects(base, DIR_B) == ["DropMove", "ReleaseLock"]
    renamed = rm.Move(TP, rm.MoveState.SWAPPING, DIR_A, DIR_B, 5, 5, True, True, True)
    assert effects(renamed, DIR_B) == ["DropMove", "RestoreSource", "ReleaseLock"]
    assert effects(base, DIR_A) == ["DropMove", "MarkPartitionOffline", "ReleaseLock"]


def test_log_dir_machine_reports_each_dir_once() -> None:
    first = ldf.step(DIR_A, ldf.LogDirState.ONLINE, ldf.LogDirEvent.IO_ERROR, ("t-0",))
    assert first.state is ldf.LogDirState.OFFLINE
    assert [type(e).__name__ for e in first.effects] == ["OfflineReplicas", "NotifyBroker"]
    again = ldf.step(DIR_A, first.state, ldf.LogDirEvent.IO_ERROR, ("t-0",))
    assert again.effects == ()
    with pytest.raises(ldf.InvalidLogDirTransition):
        ldf.step(DIR_A, ldf.LogDirState.OFFLINE, ldf.LogDirEvent.UNREADABLE_AT_STARTUP, ())


@pytest.mark.parametrize("repeated", ["DEST_DURABLE", "SOURCE_RENAMED",
                                      "DEST_RENAMED"])
def test_a_swap_step_is_never_taken_twice(repeated: str) -> None:
    move = rm.Move(TP, rm.MoveState.CAUGHT_UP, DIR_A, DIR_B, 10, 10)
    steps = [rm.MoveInput(rm.MoveEvent.LOCK_ACQUIRED),
             rm.MoveInput(rm.MoveEvent.FINAL_CATCH_UP, source_leo=10, dest_leo=10),
             rm.MoveInput(rm.MoveEvent.DEST_DURABLE),
             rm.MoveInput(rm.MoveEvent.SOURCE_RENAMED),
             rm.MoveInput(rm.MoveEvent.DEST_RENAMED)]
    for step in steps:
        move = rm.step(move, step).move
        if step.event.name == repeated:
            with pytest.raises(rm.InvalidMoveTransition, match="already"):
                rm.step(move, step)
            return
    raise AssertionError(repeated)


def test_resume_drops_a_move_tail_the_source_no_longer_has() -> None:
    """The source lost an unflushed tail that the ``.move`` kept, then reused the offsets with
    other records: the resumed copy must not keep the stale bytes (offsets agree, bytes not)."""
    disk = SimDisk([DIR_A, DIR_B])

    async def before_crash() -> None:
        manager = LogManager.open(config(segment_bytes=1 << 20), disk=disk, clock=ManualClock())
        partition = manager.create(TP, is_new=True)
        for i in range(10):
            await partition.append_as_leader(batch(i), 1)
        partition.flush()
        for i in range(10, 14):
            await partition.append_as_leader(batch(i), 1)  # never flushed on the source
        manager.alter_replica_log_dir(TP, DIR_B)
        while manager.move_state(TP).state is rm.MoveState.COPYING:
            manager.copy_step_nowait(TP, 1 << 20)
        assert partition.future is not None
        partition.future.flush()  # ... but flushed on the destination

    run(before_crash)
    disk.crash(ExtremeRng(keep=False))  # type: ignore[arg-type]

    async def after() -> None:
        manager = LogManager.open(config(segment_bytes=1 << 20), disk=disk, clock=ManualClock())
        partition = manager.get(TP)
        assert partition is not None
        assert partition.log_end_offset == 20
        for i in range(100, 104):  # the same offsets, other records
            await partition.append_as_leader(batch(i), 2)
        await drive_move(manager)
        assert partition.log_dir == DIR_B
        assert log_bytes(disk, DIR_B) == expected

    expected_holder: list[bytes] = []
    run(lambda: _snapshot_after_appends(disk, expected_holder))
    expected = expected_holder[0]
    run(after)


async def _snapshot_after_appends(disk: SimDisk, out: list[bytes]) -> None:
    """What the source will hold once the reused offsets are appended (computed on a copy)."""
    import copy

    twin = copy.deepcopy(disk)
    manager = LogManager.open(config(segment_bytes=1 << 20), disk=twin, clock=ManualClock())
    partition = manager.get(TP)
    assert partition is not None
    manager.alter_replica_log_dir(TP, "any")
    for i in range(100, 104):
        await partition.append_as_leader(batch(i), 2)
    out.append(log_bytes(twin, DIR_A))
