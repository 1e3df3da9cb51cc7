"""The periodic flush fsyncs off the event loop (issue 19, p99 latency): the pass hands each
partition's fsyncs over as a :class:`FlushSync`, which the trio runtime runs in a worker thread
while the log takes appends; the recovery point moves only to the LEO the flush started at, and
a flush that a truncation overtook claims nothing.

Before: every second the pass fsynced each written log on the event loop, so a request waited
for up to a second's worth of writeback (25-50 ms spikes at 50 MB/s, the p99 of the latency
phase of ``bench.produce_consume``)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import trio

from conformance.disk import SimDisk
from impl.storage import LogManager, PartitionLog, StorageConfig, TopicPartition
from impl.storage import record_batch as rb
from impl.storage.checkpoint import RECOVERY_POINT_CHECKPOINT
from impl.storage.log import FlushSync
from impl.storage.os_disk import OsDisk, OsSyncHandle
from impl.storage.runtime import run_log_manager

from ._support import DIR_A, TP, ExtremeRng, ManualClock, batch, config, log_bytes, run


def _single_dir_manager(disk: SimDisk) -> LogManager:
    return LogManager.open(config(DIR_A, segment_bytes=1 << 20), disk=disk, clock=ManualClock())


async def _append(partition: PartitionLog, first: int, count: int) -> None:
    for index in range(first, first + count):
        await partition.append_as_leader(batch(index), 1)


def _rolling_manager(root: Path, disk: OsDisk) -> LogManager:
    """A manager on ``disk`` whose segments roll at the fourth batch, with no periodic flush
    during a test (a roll's is then the only segment fsync)."""
    return LogManager.open(
        StorageConfig(log_dirs=(str(root),), segment_bytes=3 * len(batch(0)),
                      flush_interval_ms=3_600_000),
        disk=disk,
    )


async def _run_offloading(manager: LogManager, nursery: trio.Nursery) -> None:
    """Start the trio runtime of ``manager`` and wait until it lends its worker threads."""
    run_log_manager(manager, nursery)
    with trio.fail_after(10):
        while not manager.has_offload:  # the runtime's task has started
            await trio.sleep(0)


def test_appends_during_the_fsyncs_stay_unsynced() -> None:
    disk = SimDisk([DIR_A])
    manager = _single_dir_manager(disk)
    partition = manager.create(TP, is_new=True)

    run(lambda: _append(partition, 0, 2))  # offsets 0-3
    steps = manager.checkpoint_steps()
    sync = next(steps)
    assert isinstance(sync, FlushSync)
    sync.run()
    run(lambda: _append(partition, 2, 1))  # offsets 4-5 arrive before the pass resumes
    assert not any(isinstance(step, FlushSync) for step in steps)  # the checkpoint files
    assert partition.log.recovery_point == 4  # the LEO when the flush started, not 6
    assert partition.log.unflushed  # the late batch waits for the next pass
    path = f"{DIR_A}/{RECOVERY_POINT_CHECKPOINT}"
    assert disk.read(path, 0, disk.size(path)).endswith(b"topic 0 4\n")

    disk.crash(ExtremeRng(keep=False))  # type: ignore[arg-type]
    reopened = _single_dir_manager(disk).get(TP)
    assert reopened is not None
    assert reopened.log_end_offset == 4  # what the flush claimed is there, the rest lost


def test_a_truncation_during_the_fsyncs_claims_nothing() -> None:
    manager = _single_dir_manager(SimDisk([DIR_A]))
    partition = manager.create(TP, is_new=True)

    run(lambda: _append(partition, 0, 3))  # offsets 0-5
    steps = manager.checkpoint_steps()
    sync = next(steps)
    assert isinstance(sync, FlushSync)
    sync.run()
    partition.truncate_to(2)  # a follower's truncation, after the fsyncs, before the claim
    run(lambda: _append(partition, 10, 1))  # offsets 2-3: other bytes where the synced ones were
    list(steps)
    # the claim (segment durable up to 3 batches, recovery point 6) would name offsets the
    # log no longer has (LEO 4) and bytes never synced
    assert partition.log.log_end_offset == 4
    assert partition.log.recovery_point == 0  # nothing claimed; the next pass syncs the rest
    assert partition.log.unflushed
    list(manager.checkpoint_steps())
    assert partition.log.recovery_point == 4


def test_an_fsync_error_takes_the_dir_offline() -> None:
    disk = SimDisk([DIR_A])
    manager = _single_dir_manager(disk)
    partition = manager.create(TP, is_new=True)
    run(lambda: partition.append_as_leader(batch(0), 1))
    steps = manager.checkpoint_steps()
    sync = next(steps)
    assert isinstance(sync, FlushSync)
    disk.fail_dir(DIR_A)
    sync.run()  # the worker thread keeps the error for the pass to act on
    assert sync.error is not None
    list(steps)
    assert manager.offline_dirs == {DIR_A}
    assert partition.log.recovery_point == 0


def test_the_runtime_fsyncs_in_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sync_threads: list[int] = []
    real_sync = OsSyncHandle.sync

    def recording_sync(handle: OsSyncHandle) -> None:
        if handle._path.endswith((".log", ".index")):  # a segment's (not a checkpoint's)
            sync_threads.append(threading.get_ident())
        real_sync(handle)

    monkeypatch.setattr(OsSyncHandle, "sync", recording_sync)
    disk = OsDisk()
    manager = LogManager.open(
        StorageConfig(log_dirs=(str(tmp_path),), flush_interval_ms=10), disk=disk
    )
    loop_thread = threading.get_ident()

    async def main() -> None:
        partition = manager.create(TopicPartition("t", 0), is_new=True)
        async with trio.open_nursery() as nursery:
            run_log_manager(manager, nursery)
            await partition.append_as_leader(batch(0), 1)
            with trio.fail_after(10):
                while partition.log.recovery_point < partition.log_end_offset:
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()

    try:
        trio.run(main)
    finally:
        manager.close()
        disk.close()
    assert sync_threads, "the flush ran no sync handle"
    assert loop_thread not in sync_threads


def test_a_crash_right_after_a_roll_leaves_no_gap() -> None:
    # the segment a roll closes is durable before the new one takes a byte: were it left to
    # the next flush pass, a crash could lose its tail whole (no torn batch to show it) and
    # keep the new segment, a gap below the LEO that recovery cannot tell from a cleaner's
    disk = SimDisk([DIR_A])
    manager = _single_dir_manager(disk)
    partition = manager.create(TP, is_new=True)
    run(lambda: _append(partition, 0, 2))  # offsets 0-3
    list(manager.checkpoint_steps())
    run(lambda: _append(partition, 2, 2))  # offsets 4-7, unsynced
    partition.log.roll()  # segment 8
    run(lambda: _append(partition, 4, 1))  # offsets 8-9, unsynced

    disk.crash(ExtremeRng(keep=False))  # type: ignore[arg-type]
    reopened = _single_dir_manager(disk).get(TP)
    assert reopened is not None
    assert reopened.log_end_offset == 8
    recovered = log_bytes(disk, DIR_A)
    assert [header.base_offset for header in rb.iter_batches(recovered)] == [0, 2, 4, 6]


@pytest.mark.parametrize("role", ["leader", "follower"])
def test_an_append_that_rolls_fsyncs_the_old_segment_in_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, role: str
) -> None:
    # the roll fsynced the segment it closed on the event loop: every request waited for the
    # device to write back up to a flush interval's appends (Kafka's roll leaves that flush to
    # its scheduler thread). Now the append that will roll hands the fsync to a worker thread
    # first, before it takes the partition lock, and the roll finds the segment durable.
    loop_fsyncs: list[str] = []
    sync_threads: list[int] = []
    real_fsync, real_sync = OsDisk.fsync, OsSyncHandle.sync

    def recording_fsync(disk: OsDisk, path: str) -> None:
        if path.endswith(".log"):  # (the roll fsyncs the closed index again: clean, small)
            loop_fsyncs.append(path)
        real_fsync(disk, path)

    def recording_sync(handle: OsSyncHandle) -> None:
        if handle._path.endswith((".log", ".index")):  # a segment's (not a checkpoint's)
            sync_threads.append(threading.get_ident())
        real_sync(handle)

    monkeypatch.setattr(OsDisk, "fsync", recording_fsync)
    monkeypatch.setattr(OsSyncHandle, "sync", recording_sync)
    disk = OsDisk()
    manager = _rolling_manager(tmp_path, disk)
    loop_thread = threading.get_ident()
    segments: list[tuple[int, int, int]] = []
    during: list[int] = []

    async def main() -> None:
        partition = manager.create(TopicPartition("t", 0), is_new=True)
        leader = LogManager.open(config(str(tmp_path / "leader")), disk=OsDisk())
        source = leader.create(TopicPartition("t", 0), is_new=True)
        async with trio.open_nursery() as nursery:
            await _run_offloading(manager, nursery)
            for index in range(4):  # the fourth rolls
                if role == "leader":
                    await partition.append_as_leader(batch(index), 1)
                else:
                    info = await source.append_as_leader(batch(index), 1)
                    fetched = source.read(info.base_offset, 1 << 20)
                    records = b"".join(piece.read_all() for piece in fetched)
                    for piece in fetched:
                        piece.close()
                    await partition.append_as_follower(records)
            segments.extend((segment.base_offset, segment.size, segment.durable_size)
                            for segment in partition.log.segments)
            during.extend(sync_threads)  # (closing the manager fsyncs the rest)
            nursery.cancel_scope.cancel()
        leader.close()

    try:
        trio.run(main)
    finally:
        manager.close()
        disk.close()
    assert [base for base, _, _ in segments] == [0, 6]
    (_, closed_size, closed_durable), (_, active_size, active_durable) = segments
    assert closed_durable == closed_size  # synced before the roll
    assert active_durable < active_size  # the new segment's bytes wait for a flush
    assert loop_fsyncs == []
    assert len(during) == 2  # the closed segment's log and index
    assert loop_thread not in during


def test_a_roll_syncs_the_index_a_truncation_rewrote() -> None:
    # the closed segment's log is durable already (the truncation fsynced it), so the roll
    # skips its fsync; its index, rewritten by the truncation without one, must still be
    # synced: once the recovery point passes the segment, recovery trusts it
    disk = SimDisk([DIR_A])
    manager = LogManager.open(config(DIR_A, segment_bytes=1 << 20, index_interval_bytes=1),
                              disk=disk, clock=ManualClock())
    partition = manager.create(TP, is_new=True)
    run(lambda: _append(partition, 0, 6))  # offsets 0-11, an index entry per batch
    list(manager.checkpoint_steps())
    partition.truncate_to(6)  # index rewritten: 3 entries
    closed = partition.log.active
    assert closed.durable_size == closed.size
    partition.log.roll()
    disk.crash(ExtremeRng(keep=False))  # type: ignore[arg-type]
    index = disk.read(closed.index_path, 0, disk.size(closed.index_path))
    assert len(index) == 8 * (len(closed.index))  # not the 6 entries of the last flush
    assert len(closed.index) < 6


def test_the_partition_lock_is_free_while_the_roll_s_fsync_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the partition lock never waits (MoveLock): the mover's swap and the cleaner take it
    # without suspending, so no one may hold it across an await (the first version of the
    # roll's offload did, and the swap found it held)
    entered, release = threading.Event(), threading.Event()
    real_sync = OsSyncHandle.sync

    def slow_sync(handle: OsSyncHandle) -> None:
        if handle._path.endswith(".log"):
            entered.set()
            assert release.wait(10)
        real_sync(handle)

    monkeypatch.setattr(OsSyncHandle, "sync", slow_sync)
    disk = OsDisk()
    manager = _rolling_manager(tmp_path, disk)
    held: list[bool] = []

    async def main() -> None:
        partition = manager.create(TopicPartition("t", 0), is_new=True)
        async with trio.open_nursery() as nursery:
            await _run_offloading(manager, nursery)
            for index in range(3):
                await partition.append_as_leader(batch(index), 1)
            nursery.start_soon(partition.append_as_leader, batch(3), 1)  # rolls
            with trio.fail_after(10):
                while not entered.is_set():
                    await trio.sleep(0.001)
            held.append(partition.lock.locked())
            await partition.lock.acquire()  # as the mover's swap does
            partition.lock.release()
            release.set()
            with trio.fail_after(10):
                while len(partition.log.segments) < 2:
                    await trio.sleep(0.001)
            nursery.cancel_scope.cancel()

    try:
        trio.run(main)
    finally:
        release.set()
        manager.close()
        disk.close()
    assert held == [False]
