"""Helpers for the storage tests: a manual clock, extreme crash choices, move drivers, log bytes."""

from __future__ import annotations

from collections.abc import Callable

import trio

from conformance.disk import SimDisk
from impl.storage import LogManager, MoveState, StorageConfig, TopicPartition
from impl.storage.disk import Disk
from impl.storage.names import DirKind, dir_name
from impl.storage.record_batch import build_batch
from impl.storage.runtime import swap_when_caught_up

DIR_A = "/data/a"
DIR_B = "/data/b"
DIR_C = "/data/c"
TP = TopicPartition("topic", 0)


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, wall_ms: int = 1_700_000_000_000) -> None:
        self.now_ns = 0
        self.wall = wall_ms

    def monotonic_ns(self) -> int:
        return self.now_ns

    def wall_ms(self) -> int:
        return self.wall

    def advance_ms(self, ms: int) -> None:
        self.now_ns += ms * 1_000_000
        self.wall += ms


class ExtremeRng:
    """Crash choices at one extreme: keep every unsynced change, or lose every one."""

    def __init__(self, keep: bool) -> None:
        self.keep = keep

    def randint(self, low: int, high: int) -> int:
        return high if self.keep else low

    def chance(self, probability: float) -> bool:
        return not self.keep


def config(*dirs: str, **overrides: int) -> StorageConfig:
    """Small segments and chunks so that a few hundred records span several of each."""
    values = {
        "segment_bytes": 1500,
        "move_chunk_bytes": 400,
        "index_interval_bytes": 120,
    }
    values.update(overrides)
    return StorageConfig(log_dirs=dirs or (DIR_A, DIR_B), **values)


def batch(i: int) -> bytes:
    return build_batch([b"value-%d" % i, b"second-%d" % i], timestamp_ms=1_000 + i)


def log_bytes(
    disk: Disk, log_dir: str, kind: DirKind = DirKind.LIVE, tp: TopicPartition = TP
) -> bytes:
    """The concatenated segment files of a partition dir (the log's bytes, in offset order)."""
    path = f"{log_dir}/{dir_name(tp, kind)}"
    names = sorted(n for n in disk.list_dir(path) if n.endswith(".log"))
    return b"".join(disk.read(f"{path}/{n}", 0, disk.size(f"{path}/{n}")) for n in names)


def live_dirs(disk: SimDisk, tp: TopicPartition = TP) -> list[str]:
    """Log dirs (that can be listed) holding a live ``tp``."""
    found = []
    for log_dir in disk.log_dirs:
        try:
            if dir_name(tp) in disk.list_dir(log_dir):
                found.append(log_dir)
        except OSError:
            pass
    return found


async def drive_move(
    manager: LogManager,
    tp: TopicPartition = TP,
    *,
    chunk_bytes: int = 400,
    between_chunks: Callable[[], object] | None = None,
    steps_max: int = 100_000,
) -> None:
    """Run a move to its end on this task, deterministically (no scheduler, no sleeps)."""
    for _ in range(steps_max):
        move = manager.move_state(tp)
        if move.state is MoveState.COPYING:
            manager.copy_step_nowait(tp, chunk_bytes)
            if between_chunks is not None:
                result = between_chunks()
                if hasattr(result, "__await__"):
                    await result
        elif move.state is MoveState.CAUGHT_UP:
            await swap_when_caught_up(manager, tp)
        else:
            manager.delete_pending_nowait()
            return
    raise AssertionError("move did not finish")


def run(async_fn: Callable[[], object]) -> None:
    """``trio.run`` for a zero-argument coroutine function."""
    trio.run(async_fn)  # type: ignore[arg-type]
