"""A crash at every step of a move, enumerated, then recovery: MOVE_NO_LOSS, MOVE_SINGLE_LIVE,
MOVE_RECOVERY_TOTAL.

Crash points are enumerated, not sampled: every mutating disk operation the move performs (the
simulated disk's armed crash), and every effect the ``replica_move`` core emits (observed on
the manager's effect carrier). After each crash the simulated disk loses what the durability
contract allows, at both extremes (keep every unsynced change, lose every one) and with seeded
choices in between.
"""

from __future__ import annotations

import pytest

from conformance.disk import SimDisk, SimulatedCrash
from conformance.rng import SimRng
from impl.storage import LogManager, MoveState
from impl.storage import replica_move as rm
from impl.storage.names import DirKind, dir_name

from ._support import (
    DIR_A,
    DIR_B,
    TP,
    ExtremeRng,
    ManualClock,
    batch,
    config,
    drive_move,
    live_dirs,
    log_bytes,
    run,
)

RECORDS_BEFORE = 20
RECORDS_DURING = 6
#: disk operations of the uninterrupted move (set by a crash-free run)
MOVE_OPERATIONS = [0]


def _scenario(
    disk: SimDisk, crash_at_op: int | None, crash_at_effect: int | None
) -> tuple[bytes, list[str]]:
    """Fill a log on A, flush, move it to B with appends (each flushed) during the copy.

    Returns the source's durable bytes at the time of the crash (what must survive) and the
    names of the effects carried out before it.
    """
    durable = b""
    effects: list[str] = []
    move_operations = 0

    async def main() -> None:
        nonlocal durable, move_operations
        manager = LogManager.open(config(DIR_A, DIR_B), disk=disk, clock=ManualClock())
        partition = manager.create(TP, is_new=True)
        assert partition.log_dir == DIR_A
        for i in range(RECORDS_BEFORE):
            await partition.append_as_leader(batch(i), 1)
        partition.flush()
        durable = log_bytes(disk, DIR_A)
        appended = iter(range(RECORDS_BEFORE, RECORDS_BEFORE + RECORDS_DURING))

        async def append_one() -> None:
            nonlocal durable
            i = next(appended, None)
            if i is not None:
                await partition.append_as_leader(batch(i), 2)
                partition.flush()
                durable = log_bytes(disk, partition.log_dir, partition.log.kind)

        def hook(tp: object, effect: rm.MoveEffect) -> None:
            effects.append(type(effect).__name__)
            if crash_at_effect is not None and len(effects) == crash_at_effect:
                raise SimulatedCrash

        # (a white-box test of the manager: every effect, swap or not, is a crash point)
        carry_out = manager._carry_out

        def carry_out_observed(tp: object, effect: rm.MoveEffect) -> object:
            hook(tp, effect)
            return carry_out(tp, effect)  # type: ignore[arg-type]

        manager._carry_out = carry_out_observed  # type: ignore[method-assign,assignment]
        if crash_at_op is not None:
            disk.arm_crash(crash_at_op)
        operations_before = disk.statistics().operations
        try:
            assert manager.alter_replica_log_dir(TP, DIR_B) == 0
            await drive_move(manager, between_chunks=append_one)
        except SimulatedCrash:
            return
        disk.arm_crash(None)
        move_operations = disk.statistics().operations - operations_before

    run(main)
    MOVE_OPERATIONS[0] = move_operations or MOVE_OPERATIONS[0]
    return durable, effects


def _check_recovery(disk: SimDisk, durable: bytes) -> None:
    async def main() -> None:
        manager = LogManager.open(config(DIR_A, DIR_B), disk=disk, clock=ManualClock())
        # MOVE_SINGLE_LIVE: at most one live dir, right after recovery
        assert len(live_dirs(disk)) <= 1
        # MOVE_RECOVERY_TOTAL: no dir is bad, so exactly one live log, served
        partition = manager.get(TP)
        assert partition is not None, manager.recovery_decisions
        assert not partition.offline
        assert len(live_dirs(disk)) == 1
        # MOVE_NO_LOSS: every durable record is in the live log, byte for byte
        live = log_bytes(disk, partition.log_dir)
        assert live[: len(durable)] == durable
        # a resumed move finishes and leaves one identical copy
        await drive_move(manager)
        assert manager.move_state(TP).state in (MoveState.NONE, MoveState.DONE)
        assert live_dirs(disk) == [partition.log_dir]
        assert log_bytes(disk, partition.log_dir)[: len(durable)] == durable
        for log_dir in (DIR_A, DIR_B):
            names = disk.list_dir(log_dir)
            assert dir_name(TP, DirKind.MOVE) not in names or manager.get(TP) is None
        manager.close()

    run(main)


def _crash_variants() -> list[object]:
    return [ExtremeRng(keep=True), ExtremeRng(keep=False), SimRng(7), SimRng(8)]


def test_every_effect_kind_is_reached() -> None:
    _, effects = _scenario(SimDisk([DIR_A, DIR_B]), None, None)
    for name in ("CreateMoveDir", "CopyChunk", "AcquireLock", "CopyRemaining", "SyncDest",
                 "RenameSourceToDelete", "RenameMoveToLive", "SwapLog", "ReleaseLock",
                 "DeleteAsync"):
        assert name in effects


def test_crash_before_every_effect_of_the_move() -> None:
    _, effects = _scenario(SimDisk([DIR_A, DIR_B]), None, None)
    for index in range(1, len(effects) + 1):
        for rng in _crash_variants():
            disk = SimDisk([DIR_A, DIR_B])
            durable, seen = _scenario(disk, None, index)
            assert len(seen) == index
            disk.crash(rng)  # type: ignore[arg-type]
            _check_recovery(disk, durable)


def test_crash_before_every_disk_operation_of_the_move() -> None:
    _crash_at_every_operation(_crash_variants()[:2])


@pytest.mark.slow
def test_crash_before_every_disk_operation_with_seeded_partial_loss() -> None:
    _crash_at_every_operation([SimRng(seed) for seed in range(1, 9)])


def _crash_at_every_operation(variants: list[object]) -> None:
    _scenario(SimDisk([DIR_A, DIR_B]), None, None)
    total = MOVE_OPERATIONS[0]
    assert total > 50
    for op in range(1, total + 1):
        for rng in variants:
            disk = SimDisk([DIR_A, DIR_B])
            durable, _ = _scenario(disk, op, None)
            disk.crash(rng)  # type: ignore[arg-type]
            _check_recovery(disk, durable)
