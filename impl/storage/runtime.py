"""The trio runtime of the log manager: it carries, the manager decides.

:func:`run_log_manager` starts, in the broker's nursery, what the manager needs time for: one
task per mover slot the manager hands out (:meth:`LogManager.mover_slots`), each doing what
:meth:`LogManager.mover_action` says (copy a chunk, sleep while the throttle admits nothing,
take the partition lock and swap), the removal of queued ``.delete`` dirs, periodic flush
and checkpoints and HW checkpoints (their fsyncs in a worker thread), and retention. It has no
scheduling rule of its own: the simulators ask the same two methods.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator

import trio

from impl.storage.checkpoint import CheckpointSync
from impl.storage.log import FlushSync
from impl.storage.manager import LogManager, MoverCopy, MoverWait
from impl.storage.names import TopicPartition
from impl.storage.replica_move import MoveState

#: How long the scheduler sleeps when nothing wakes it (a bound, not a rule).
IDLE_WAKEUP_S = 1.0


def run_log_manager(manager: LogManager, nursery: trio.Nursery) -> None:
    """Start ``manager``'s background work in ``nursery``; it stops when the manager closes."""
    nursery.start_soon(_background, manager)


async def _background(manager: LogManager) -> None:
    wakeup = trio.Event()

    def wake() -> None:
        wakeup.set()

    manager.set_work_listener(wake)
    manager.set_cpu_offload(trio.to_thread.run_sync)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_periodic, manager, manager.config.flush_interval_ms,
                               manager.checkpoint_steps)
            nursery.start_soon(_periodic, manager, manager.config.checkpoint_interval_ms,
                               manager.checkpoint_high_watermark_steps)
            nursery.start_soon(_periodic, manager, manager.config.retention_check_interval_ms,
                               manager.enforce_retention_steps)
            running: set[TopicPartition] = set()
            while not manager.closed:
                # one removal (a tree and a dir fsync) per turn of the loop: deleting a topic of
                # thousands of partitions must not hold the event loop for all of them
                while manager.delete_pending_nowait(max_count=1):
                    await trio.sleep(0)
                for tp in manager.mover_slots():
                    if tp not in running:
                        running.add(tp)
                        nursery.start_soon(_mover, manager, tp, running, wake)
                wakeup = trio.Event()
                with trio.move_on_after(IDLE_WAKEUP_S):
                    await wakeup.wait()
            nursery.cancel_scope.cancel()
    finally:
        manager.set_work_listener(None)
        manager.set_cpu_offload(None)


_PASS_DONE = object()


async def _periodic(manager: LogManager, interval_ms: int,
                    steps: Callable[[], Iterator[object]]) -> None:
    """Every ``interval_ms``, run ``steps`` (a flush, checkpoint or retention pass over every
    partition), letting other tasks run after each step: a pass over thousands of partitions,
    each with fsyncs, would otherwise hold the event loop for all of them. A step that is a
    :class:`FlushSync` (a partition's segment fsyncs) or a :class:`CheckpointSync` (a
    checkpoint file's or its dir's fsync) runs in a worker thread meanwhile: even a small
    file's fsync waits for the device, which is busy with whatever else is writing back."""
    while not manager.closed:
        await trio.sleep(interval_ms / 1000)
        pass_steps = steps()
        try:
            while not manager.closed:
                step = next(pass_steps, _PASS_DONE)
                if step is _PASS_DONE:
                    break
                if isinstance(step, (FlushSync, CheckpointSync)):
                    await trio.to_thread.run_sync(step.run)
                else:
                    await trio.sleep(0)
        finally:
            if isinstance(pass_steps, Generator):
                pass_steps.close()  # a pass cut short releases its handles on this thread


async def _mover(manager: LogManager, tp: TopicPartition, running: set[TopicPartition],
                 wake: Callable[[], None]) -> None:
    try:
        while not manager.closed:
            action = manager.mover_action(tp, manager.clock.monotonic_ns())
            if action is None:
                return
            if isinstance(action, MoverWait):
                await trio.sleep(action.wait_ns / 1e9)
            elif isinstance(action, MoverCopy):
                manager.copy_step_nowait(tp, manager.config.move_chunk_bytes)
                await trio.sleep(0)
            else:
                await swap_when_caught_up(manager, tp)
                await trio.sleep(0)
    finally:
        running.discard(tp)
        wake()


async def swap_when_caught_up(manager: LogManager, tp: TopicPartition) -> None:
    """KIP-113 steps 4-9 for a CAUGHT_UP move: take the partition lock, then final catch-up,
    durability, renames and swap run without yielding; the lock is released by the swap (or by
    the failure path)."""
    partition = manager.get(tp)
    assert partition is not None
    await partition.lock.acquire()
    if manager.move_state(tp).state is not MoveState.CAUGHT_UP or manager.get(tp) is not partition:
        partition.lock.release()  # cancelled or redirected while we waited
        return
    manager.swap_locked_nowait(tp)


async def wait_moves_done(manager: LogManager, timeout_s: float = 60.0) -> None:
    """Wait (bounded) until no move is COPYING, CAUGHT_UP or SWAPPING."""
    busy = (MoveState.COPYING, MoveState.CAUGHT_UP, MoveState.SWAPPING)
    with trio.fail_after(timeout_s):
        while any(m.state in busy for m in manager.moves().values()):
            await trio.sleep(0.001)


__all__ = ["run_log_manager", "swap_when_caught_up", "wait_moves_done"]
