"""The controller service keeps the broker's event loop free while the controller works.

A CreatePartitions growing a topic to 20,000 partitions held the loop of the broker that is the
controller for 0.6 s in the controller core's step over the new partitions, 0.5 s building the
ZooKeeper multis of their states (forty of 500 ops, all started at once) and 0.3 s starting one
task per read of a large read; a client's ApiVersions waited as long. Now the node steps in a
worker thread (one at a time, in order), a read runs in at most ``READS_IN_FLIGHT_MAX`` tasks, and
a multi yields every ``MULTI_OPS_PER_CHECKPOINT`` ops while it builds its transaction."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable

import pytest
import trio
from kazoo.client import TransactionRequest

from impl.controller import KazooCoordinator, _kazoo, _service, create_topic
from impl.controller.coordinator import CreateOp, NoNodeError
from impl.controller.node import ControllerNode, NodeEffect, NodeInput
from tests.loop_turns import LoopTurns

from ._support import WAIT_S, cluster


def test_the_node_steps_in_a_worker_thread_in_order(
        backend: tuple[str, str | None], monkeypatch: pytest.MonkeyPatch) -> None:
    stepped: list[tuple[bool, str]] = []
    step = ControllerNode.step

    def spy(self: ControllerNode, event: NodeInput) -> list[NodeEffect]:
        stepped.append((threading.current_thread() is threading.main_thread(),
                        type(event).__name__))
        return step(self, event)

    monkeypatch.setattr(ControllerNode, "step", spy)

    async def scenario() -> None:
        async with cluster(*backend) as c:
            broker = await c.add_broker(0)
            service = await c.start_controller(0, session=broker)
            with trio.fail_after(WAIT_S):
                await service.wait_active()
            await create_topic(broker, "t", assignment={0: [0], 1: [0]})
            await c.transport.wait_for(lambda: len(c.transport.leader_and_isr_states(0)) >= 2)

    trio.run(scenario)
    # the first input is the session's CONNECTED, then reads, writes, the topic's watch, ...
    assert stepped[0] == (False, "SessionChanged")
    assert len(stepped) > 5
    assert [on_loop for on_loop, _ in stepped] == [False] * len(stepped), stepped


def test_gather_runs_every_call_in_at_most_limit_tasks_and_keeps_their_order() -> None:
    limit = 8
    running = 0
    most = 0
    tasks: set[trio.lowlevel.Task] = set()

    def call(index: int) -> Callable[[], Awaitable[int]]:
        async def run() -> int:
            nonlocal running, most
            tasks.add(trio.lowlevel.current_task())
            running += 1
            most = max(most, running)
            await trio.sleep(0.001 * (index % 3))
            running -= 1
            return index * 2
        return run

    results = trio.run(_service._gather, [call(i) for i in range(1000)], limit)
    assert results == [i * 2 for i in range(1000)]
    assert most == limit
    # a task per call started a thousand tasks (and held the loop starting them)
    assert len(tasks) == limit


def test_gather_raises_the_first_failure_and_cancels_the_rest() -> None:
    started: list[int] = []

    def call(index: int) -> Callable[[], Awaitable[int]]:
        async def run() -> int:
            started.append(index)
            if index == 20:
                raise NoNodeError(f"/n/{index}")
            await trio.sleep(0.01)
            return index
        return run

    with pytest.raises(NoNodeError, match="/n/20"):
        trio.run(_service._gather, [call(i) for i in range(1000)], 4)
    assert 20 in started
    assert len(started) < 1000


@pytest.mark.integration
def test_a_large_multi_lets_other_tasks_run_while_it_is_built(
        zk_chroot: str, monkeypatch: pytest.MonkeyPatch) -> None:
    loop = LoopTurns()
    ticks_at_commit: list[int] = []
    commit = TransactionRequest.commit_async

    def spy(self: TransactionRequest) -> object:
        ticks_at_commit.append(loop.turns)
        return commit(self)

    monkeypatch.setattr(TransactionRequest, "commit_async", spy)
    ops = 500

    async def scenario() -> None:
        coordinator = await KazooCoordinator.connect(zk_chroot)
        try:
            await coordinator.create("/many")
            async with loop.counting():
                results = await coordinator.multi([CreateOp(f"/many/{i}") for i in range(ops)])
            assert len(results) == ops
            assert len(await coordinator.children("/many")) == ops
        finally:
            await coordinator.close()

    trio.run(scenario)
    # the ticker ran between the slices of the build (none ran while building in one go)
    assert ticks_at_commit[0] >= (ops - 1) // _kazoo.MULTI_OPS_PER_CHECKPOINT - 1
