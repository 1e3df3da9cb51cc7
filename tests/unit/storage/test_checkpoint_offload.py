"""The checkpoint files' fsyncs off the event loop (p99 latency): a checkpoint write (temp file,
fsync, rename, dir fsync) hands each fsync over as a :class:`CheckpointSync`, which the trio
runtime runs in a worker thread; a crash before the write completes leaves the previous file
whole, and a write that a later write of the same file overtook stops without touching it.

Before: the periodic passes wrote the recovery-point and HW checkpoints with their two fsyncs on
the event loop (108 fsyncs, 69 ms in all, at most 18.6 ms, in the 8-second latency phase of
``bench.produce_consume``), and every request waited for them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from conformance.disk import SimDisk
from impl.storage import LogManager, StorageConfig, TopicPartition
from impl.storage.checkpoint import (
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    TEMP_SUFFIX,
    CheckpointSync,
    read_checkpoint,
)
from impl.storage.os_disk import OsDisk, OsSyncHandle
from impl.storage.runtime import run_log_manager

from ._support import DIR_A, TP, ExtremeRng, ManualClock, batch, config, run

HW_FILE = f"{DIR_A}/{REPLICATION_OFFSET_CHECKPOINT}"


def _manager(disk: SimDisk) -> LogManager:
    return LogManager.open(config(DIR_A, segment_bytes=1 << 20), disk=disk, clock=ManualClock())


def _with_records(disk: SimDisk, count: int) -> LogManager:
    manager = _manager(disk)
    partition = manager.create(TP, is_new=True)

    async def fill() -> None:
        for index in range(count):
            await partition.append_as_leader(batch(index), 1)

    run(fill)
    return manager


def _hw_text(disk: SimDisk) -> str | None:
    return read_checkpoint(disk, DIR_A, REPLICATION_OFFSET_CHECKPOINT)


def _until(steps: Iterator[object], path: str) -> CheckpointSync:
    """Drive ``steps`` (running every handed-over fsync, as the worker thread does) up to the
    handover of ``path``'s fsync; return it, not run."""
    for step in steps:
        if isinstance(step, CheckpointSync) and step.path == path:
            return step
        run_step = getattr(step, "run", None)
        if run_step is not None:
            run_step()
    raise AssertionError(f"no fsync of {path} was handed over")


def test_the_runtime_fsyncs_checkpoints_in_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    watching = False
    syncs: list[tuple[int, str]] = []
    real_sync = OsSyncHandle.sync

    def recording_sync(handle: OsSyncHandle) -> None:
        if watching:
            syncs.append((threading.get_ident(), handle._path))
        real_sync(handle)

    monkeypatch.setattr(OsSyncHandle, "sync", recording_sync)
    disk = OsDisk()
    manager = LogManager.open(StorageConfig(
        log_dirs=(str(tmp_path),), flush_interval_ms=10, checkpoint_interval_ms=10), disk=disk)
    loop_thread = threading.get_ident()
    recovery_point = str(tmp_path / (RECOVERY_POINT_CHECKPOINT + TEMP_SUFFIX))
    high_watermark = str(tmp_path / (REPLICATION_OFFSET_CHECKPOINT + TEMP_SUFFIX))

    async def main() -> None:
        nonlocal watching
        partition = manager.create(TopicPartition("t", 0), is_new=True)
        await partition.append_as_leader(batch(0), 1)
        partition.high_watermark = partition.log_end_offset
        watching = True  # from here on only the runtime writes checkpoints
        async with trio.open_nursery() as nursery:
            run_log_manager(manager, nursery)
            with trio.fail_after(10):
                while not ({recovery_point, high_watermark, str(tmp_path)}
                           <= {path for _, path in syncs}):
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
        watching = False

    try:
        trio.run(main)
    finally:
        manager.close()
        disk.close()
    assert all(thread != loop_thread for thread, _ in syncs), syncs
    assert read_checkpoint(disk, str(tmp_path), RECOVERY_POINT_CHECKPOINT) == "0\n1\nt 0 2\n"


@pytest.mark.parametrize("keep", [False, True])
def test_a_crash_before_the_rename_keeps_the_previous_checkpoint(keep: bool) -> None:
    disk = SimDisk([DIR_A])
    manager = _with_records(disk, 2)
    partition = manager.get(TP)
    assert partition is not None
    partition.high_watermark = 2
    manager.checkpoint()
    before = _hw_text(disk)
    assert before is not None
    assert before.endswith("topic 0 2\n")
    partition.high_watermark = 4
    steps = manager.checkpoint_high_watermark_steps()
    _until(steps, HW_FILE + TEMP_SUFFIX)  # handed over, the worker thread not done
    disk.crash(ExtremeRng(keep=keep))  # type: ignore[arg-type]
    assert _hw_text(disk) == before
    _manager(disk)  # and the broker starts from it


@pytest.mark.parametrize("keep", [False, True])
def test_a_crash_before_the_dir_fsync_leaves_one_whole_checkpoint(keep: bool) -> None:
    disk = SimDisk([DIR_A])
    manager = _with_records(disk, 2)
    partition = manager.get(TP)
    assert partition is not None
    partition.high_watermark = 2
    manager.checkpoint()
    before = _hw_text(disk)
    partition.high_watermark = 4
    steps = manager.checkpoint_high_watermark_steps()
    _until(steps, HW_FILE + TEMP_SUFFIX).run()
    _until(steps, DIR_A)  # renamed; the dir's fsync handed over, not done
    after = _hw_text(disk)
    assert after is not None
    assert after.endswith("topic 0 4\n")
    disk.crash(ExtremeRng(keep=keep))  # type: ignore[arg-type]
    assert _hw_text(disk) == (after if keep else before)


def test_an_inline_write_overtakes_a_handed_over_one() -> None:
    disk = SimDisk([DIR_A])
    manager = _with_records(disk, 2)
    partition = manager.get(TP)
    assert partition is not None
    partition.high_watermark = 2
    steps = manager.checkpoint_high_watermark_steps()
    handed = _until(steps, HW_FILE + TEMP_SUFFIX)  # this write's text says HW 2
    partition.high_watermark = 4
    manager.write_dir_checkpoints(DIR_A)  # a write that cannot wait, done meanwhile
    handed.run()  # the worker thread finishes late
    list(steps)
    assert not manager.offline_dirs  # the late write did not rename a temp file that is gone
    assert _hw_text(disk) == "0\n1\ntopic 0 4\n"  # nor put the older HW back
    assert not disk.exists(HW_FILE + TEMP_SUFFIX)


def test_concurrent_passes_do_not_interleave_on_the_temp_file() -> None:
    disk = SimDisk([DIR_A])
    manager = _with_records(disk, 2)
    partition = manager.get(TP)
    assert partition is not None
    partition.high_watermark = 2
    first = manager.checkpoint_high_watermark_steps()
    first_sync = _until(first, HW_FILE + TEMP_SUFFIX)
    partition.high_watermark = 4
    second = manager.checkpoint_steps()  # the flush pass's checkpoints, meanwhile
    second_sync = _until(second, HW_FILE + TEMP_SUFFIX)
    first_sync.run()
    second_sync.run()
    list(first)  # the overtaken pass resumes first: it must stop before its rename
    assert _hw_text(disk) != "0\n1\ntopic 0 2\n"
    assert disk.exists(HW_FILE + TEMP_SUFFIX)  # the second pass's, left for it
    list(second)
    assert not manager.offline_dirs
    assert _hw_text(disk) == "0\n1\ntopic 0 4\n"
    assert not disk.exists(HW_FILE + TEMP_SUFFIX)
