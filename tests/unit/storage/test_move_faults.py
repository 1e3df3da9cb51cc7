"""A failed disk at every step of a move (KIP-18/KIP-112), then a restart with the disk still bad.

The failing dir is the move's destination or its source; the failure strikes before each disk
operation the move performs (enumerated). A third dir holds another partition that must keep
being served (DIR_FAILURE_ISOLATION). After the failure and again after a crash and restart:
MOVE_SINGLE_LIVE, MOVE_RECOVERY_TOTAL (one live copy holding every durable record, or offline
because the bad dir may hold it), and no durable record lost from a live copy (MOVE_NO_LOSS).
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.disk import SimDisk
from impl.storage import LogDirOffline, LogManager, MoveState, TopicPartition

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

OTHER = TopicPartition("other", 0)


class FailAt:
    """Forwards to a SimDisk; fails ``log_dir`` just before the ``at``-th call."""

    def __init__(self, disk: SimDisk, log_dir: str, at: int | None) -> None:
        self.disk = disk
        self.log_dir = log_dir
        self.at = at
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.disk, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.at is not None and self.calls == self.at:
                self.disk.fail_dir(self.log_dir)
            return target(*args, **kwargs)

        return call


def _scenario(disk: SimDisk, failing: str, at: int | None) -> tuple[bytes, list[str], int]:
    durable = b""
    notified: list[str] = []
    calls = 0

    async def main() -> None:
        nonlocal durable, calls
        proxy = FailAt(disk, failing, None)
        manager = LogManager.open(
            config(DIR_A, DIR_B, DIR_C), disk=proxy, clock=ManualClock(),
            on_dir_failure=notified.append,
        )
        partition = manager.create(TP, is_new=True)
        other = manager.create(OTHER, is_new=True)
        assert (partition.log_dir, other.log_dir) == (DIR_A, DIR_B)
        manager.alter_replica_log_dir(OTHER, DIR_C)
        await drive_move(manager, OTHER)
        assert other.log_dir == DIR_C
        for i in range(20):
            await partition.append_as_leader(batch(i), 1)
            await other.append_as_leader(batch(i), 1)
        partition.flush()
        other.flush()
        durable = log_bytes(disk, DIR_A)
        proxy.calls = 0
        proxy.at = at
        manager.alter_replica_log_dir(TP, DIR_B)
        await drive_move(manager)
        calls = proxy.calls
        state = manager.move_state(TP).state
        # the other partition, on a good dir, is still served (DIR_FAILURE_ISOLATION)
        await other.append_as_leader(batch(99), 1)
        slices = other.read(0, 1 << 20)
        assert slices
        for piece in slices:
            piece.close()
        try:  # a read notices a failure nothing has touched yet
            for piece in partition.read(0, 1 << 20):
                piece.close()
        except LogDirOffline:
            assert partition.offline
        if not partition.offline:
            served = partition.log_dir
            assert served not in manager.offline_dirs
            assert log_bytes(disk, served)[: len(durable)] == durable
        else:
            with pytest.raises(LogDirOffline):
                partition.read(0, 100)
            assert state in (MoveState.FAILED, MoveState.DONE)
        assert len(notified) == len(set(notified))
        assert manager.offline_dirs <= {failing}

    run(main)
    return durable, notified, calls


def _restart(disk: SimDisk, durable: bytes, failing: str) -> None:
    async def main() -> None:
        manager = LogManager.open(config(DIR_A, DIR_B, DIR_C), disk=disk, clock=ManualClock())
        assert failing in manager.offline_dirs
        other = manager.get(OTHER)
        assert other is not None
        assert not other.offline
        good_live = [
            d for d in (DIR_A, DIR_B, DIR_C)
            if d != failing and str(TP) in disk.list_dir(d)
        ]
        assert len(good_live) <= 1  # MOVE_SINGLE_LIVE
        partition = manager.get(TP)
        if partition is None:
            # MOVE_RECOVERY_TOTAL: offline only because the bad dir may hold the copy
            assert TP in manager.offline_replicas or good_live == []
            with pytest.raises(LogDirOffline):
                manager.create(TP)  # never recreated empty (KAFKA-16234)
            return
        assert good_live == [partition.log_dir]
        assert log_bytes(disk, partition.log_dir)[: len(durable)] == durable
        await drive_move(manager)

    run(main)


def _total_calls(failing: str) -> int:
    return _scenario(SimDisk([DIR_A, DIR_B, DIR_C]), failing, None)[2]


@pytest.mark.parametrize("failing", [DIR_B, DIR_A], ids=["destination", "source"])
def test_dir_failure_at_every_step_of_a_move(failing: str) -> None:
    total = _total_calls(failing)
    assert total > 30
    for at in range(1, total + 1):
        for keep in (True, False):
            disk = SimDisk([DIR_A, DIR_B, DIR_C])
            durable, notified, _ = _scenario(disk, failing, at)
            assert notified in ([], [failing])
            disk.crash(ExtremeRng(keep))  # type: ignore[arg-type]
            _restart(disk, durable, failing)
