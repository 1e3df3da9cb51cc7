"""A move that fills its destination is cancelled: its ``tp.move`` is removed, "disk full" is
logged, and the destination stays online, now and after a restart (issue 15, defect 6: the
``.move`` stayed and kept the dir offline across restarts, and nothing said "disk full")."""

from __future__ import annotations

import logging

import pytest

from conformance.disk import SimDisk
from impl.storage import LogManager, MoveState

from ._support import DIR_A, DIR_B, TP, ManualClock, batch, config, drive_move, log_bytes, run


def test_a_move_into_a_full_dir_is_cancelled(caplog: pytest.LogCaptureFixture) -> None:
    disk = SimDisk([DIR_A, DIR_B])
    before: list[bytes] = []

    async def scenario() -> None:
        manager = LogManager.open(config(DIR_A, DIR_B), disk=disk, clock=ManualClock())
        partition = manager.create(TP, is_new=True)
        for i in range(30):
            await partition.append_as_leader(batch(i), 1)
        source = partition.log_dir
        destination = DIR_B if source == DIR_A else DIR_A
        before.append(log_bytes(disk, source))
        disk.fill_dir(destination, free_bytes=700)
        with caplog.at_level(logging.WARNING, logger="impl.storage.manager"):
            manager.alter_replica_log_dir(TP, destination)
            await drive_move(manager)
        assert manager.move_state(TP).state is MoveState.CANCELLED
        assert destination not in manager.offline_dirs
        assert destination in manager.disk_full_dirs
        assert not any(name.endswith(".move") for name in disk.list_dir(destination))
        assert partition.log_dir == source
        assert log_bytes(disk, source) == before[0]
        assert partition.log_end_offset == 60
        manager.close()
        reopened = LogManager.open(config(DIR_A, DIR_B), disk=disk, clock=ManualClock())
        assert not reopened.offline_dirs
        assert reopened.get(TP) is not None
        reopened.close()

    run(scenario)
    assert any("disk full" in record.getMessage() for record in caplog.records)
