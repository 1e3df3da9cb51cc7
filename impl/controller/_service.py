"""ControllerService: the trio pump around the controller node.

Theory of operation. Every broker runs one service around one
:class:`~impl.controller.node.ControllerNode`, which decides everything: the election, the
failover reads, which re-read a watch calls for, revalidation after a reconnection, the
per-broker request queues and, in its core, every partition and replica decision. The service
only carries: kazoo's session changes and watch notifications, the results of reads and writes
and brokers' responses become inputs of the node (one inbox, stepped in arrival order); the
node's effects are carried out as they come — reads and writes concurrently (kazoo pipelines
them), requests by one task each (the node keeps one request in flight per broker) — and each
reports its completion to the inbox under the id the effect named, stamped with the client's
session id read once the read or write completed (the node judges it).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeVar

import trio

from impl.ports import Clock, SystemClock
from impl.trace import NullTraceSink, TraceSink

from .controller import (
    ERROR_NOT_CONTROLLER,
    TP,
    Controller,
    ControllerConfig,
    ElectionAnswered,
    EmitTrace,
    Resign,
    UncleanElectionRequested,
    WriteCompleted,
    ZkWrite,
)
from .coordinator import (
    ConnectionLossError,
    Coordinator,
    CoordinatorClosedError,
    CoordinatorError,
    CreateOp,
    DeleteOp,
    NodeExistsError,
    NoNodeError,
    OpResult,
    SessionEvent,
    SessionExpiredError,
    SessionState,
    multi_error,
)
from .node import (
    ChildrenOp,
    ControllerNode,
    ExistsOp,
    GetOp,
    LogWarning,
    NodeEffect,
    NodeInput,
    ReadCompleted,
    ReadOp,
    ReadResult,
    RequestCompleted,
    SendToBroker,
    SessionChanged,
    ZkRead,
)
from .requests import ControllerRequest, ControllerResponse

_logger = logging.getLogger(__name__)

T = TypeVar("T")

#: ``send(broker_id, request) -> response``, supplied by the broker's transport.
SendFunction = Callable[[int, ControllerRequest], Awaitable[ControllerResponse]]

#: Bounds: queued inputs, concurrent ZooKeeper reads of one effect.
INBOX_MAX = 100_000
READS_IN_FLIGHT_MAX = 512
#: Missing parent znodes of a write created in one multi (``ZkWrite.ensure_paths``): a new
#: topic's partition nodes in one round trip, not one create each (kazoo's ``create`` also
#: leaves a reference cycle behind per call, only freed by a full collection).
ENSURE_PATHS_PER_MULTI = 500

#: A lost connection or session: the outcome of a read or write is unknown.
_LOST = (ConnectionLossError, SessionExpiredError, CoordinatorClosedError)


async def _gather(calls: Sequence[Callable[[], Awaitable[T]]], limit: int) -> list[T]:
    """Run ``calls`` concurrently (at most ``limit`` at once); the first CoordinatorError of
    any of them is raised as itself (not in an exception group) after the others are cancelled.

    At most ``limit`` tasks run them, each taking the next call when its last one completed:
    a task per call held the event loop for 0.2 s just starting 32,767 of them (the reads of a
    failover, or of a topic grown to 32,767 partitions), and 1.4 CPU-seconds in all."""
    results: list[T | None] = [None] * len(calls)
    failures: list[CoordinatorError] = []
    indexes = iter(range(len(calls)))

    async with trio.open_nursery() as nursery:

        async def run() -> None:
            for index in indexes:  # shared: each index is taken by exactly one task
                try:
                    results[index] = await calls[index]()
                except CoordinatorError as error:
                    failures.append(error)
                    nursery.cancel_scope.cancel()
                    return

        for _ in range(min(limit, len(calls))):
            nursery.start_soon(run)
    if failures:
        raise failures[0]
    return results  # type: ignore[return-value]


class ControllerService:
    """Carries one broker's :class:`ControllerNode` (see the module doc).

    Args:
        unclean_leader_election: ``unclean.leader.election.enable``.
        partitions_per_write_max: partitions per ZooKeeper ``multi``.
        request_timeout_s: how long one controller-to-broker request may take.
        trace_sink: where the core's trace events go.
        clock: the time written into ``/controller``.
    """

    def __init__(
        self,
        *,
        unclean_leader_election: bool = False,
        partitions_per_write_max: int = 500,
        request_timeout_s: float = 30.0,
        trace_sink: TraceSink | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._unclean = unclean_leader_election
        self._partitions_per_write_max = partitions_per_write_max
        self._request_timeout_s = request_timeout_s
        self._trace_sink: TraceSink = trace_sink if trace_sink is not None else NullTraceSink()
        self._clock: Clock = clock if clock is not None else SystemClock()
        self.node: ControllerNode | None = None
        self._changed = trio.Event()
        self._ensured_paths: set[str] = set()
        self._election_ids = itertools.count(1)
        #: unclean election requests in the node: id -> (answered, the answer)
        self._elections: dict[int, tuple[trio.Event, list[tuple[TP, int]]]] = {}
        self._running = False

    # --- status ------------------------------------------------------------------------------

    @property
    def core(self) -> Controller | None:
        """The controller core (``None`` before :meth:`run`)."""
        return None if self.node is None else self.node.core

    @property
    def is_active(self) -> bool:
        """True while this broker is the controller."""
        return self.node is not None and self.node.active

    @property
    def epoch(self) -> int:
        """The controller epoch this broker last won (0 if never)."""
        return 0 if self.node is None else self.node.epoch

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_active(self) -> None:
        """Wait until this broker is the controller."""
        while not self.is_active:
            await self._changed.wait()

    async def wait_inactive(self) -> None:
        """Wait until this broker is not the controller."""
        while self.is_active:
            await self._changed.wait()

    async def wait_idle(self) -> None:
        """Wait until the node has no read, write or input outstanding (requests may still be
        in flight)."""
        while self.node is None or not self.node.idle or self._pending:
            await self._changed.wait()

    async def elect_unclean(self, partitions: Sequence[TP]) -> dict[TP, int]:
        """ElectLeaders UNCLEAN: hand the request to the node and wait for the core's answer
        (one Kafka error code per partition; NOT_CONTROLLER everywhere when this broker is
        not the controller). The caller bounds the wait."""
        if not self._running or self.node is None or not self.node.active:
            return dict.fromkeys(partitions, ERROR_NOT_CONTROLLER)
        request_id = next(self._election_ids)
        answered = trio.Event()
        answer: list[tuple[TP, int]] = []
        self._elections[request_id] = (answered, answer)
        try:
            self._put(UncleanElectionRequested(request_id, tuple(partitions)))
            await answered.wait()
        finally:
            self._elections.pop(request_id, None)
        results = dict(answer)
        return {tp: results.get(tp, ERROR_NOT_CONTROLLER) for tp in partitions}

    def _answer_elections(self) -> None:
        """The pump stopped: every request still waiting is answered NOT_CONTROLLER."""
        for answered, _ in self._elections.values():
            answered.set()

    # --- the pump ----------------------------------------------------------------------------

    async def run(
        self,
        coordinator: Coordinator,
        broker_id: int,
        send: SendFunction,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run for election and act as controller when elected, until the coordinator closes.

        Args:
            coordinator: this broker's ZooKeeper session.
            broker_id: this broker's id.
            send: delivers a request to a broker and returns its response (may raise; a failed
                delivery is reported to the node as no response).
        """
        self.node = ControllerNode(ControllerConfig(broker_id, self._unclean,
                                                    self._partitions_per_write_max))
        self._coordinator = coordinator
        self._send = send
        self._pending = 0
        inbox_send, inbox = trio.open_memory_channel[NodeInput](INBOX_MAX)
        self._inbox_send = inbox_send
        self._running = True
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._pump_events)
                task_status.started()
                self._put(SessionChanged(SessionState.CONNECTED, coordinator.session_id,
                                         self._clock.wall_ms()))
                async for item in inbox:
                    # Stepped in a worker thread: one input may decide tens of thousands of
                    # partitions (a topic grown to 32,767, a broker that led 100,000), a second
                    # of CPU on this machine, and the broker's clients are served meanwhile
                    # (the broker process switches the GIL every 0.5 ms, ``impl.cli.cmd_broker``).
                    # Only this task steps the node, and it waits for the step, so inputs stay
                    # in order; the input counts as pending until its effects are carried.
                    effects = await trio.to_thread.run_sync(self.node.step, item)
                    self._pending -= 1
                    self._carry(effects)
                    self._notify()
                    if self.node.closed:
                        break
                nursery.cancel_scope.cancel()
        finally:
            self._running = False
            if self.node is not None:
                self.node.core.active = False
            self._answer_elections()
            self._notify()

    def _put(self, item: NodeInput) -> None:
        self._pending += 1
        self._inbox_send.send_nowait(item)

    async def _pump_events(self) -> None:
        while True:
            try:
                event = await self._coordinator.next_event()
            except CoordinatorClosedError:
                event = SessionEvent(SessionState.CLOSED)
            if isinstance(event, SessionEvent):
                self._put(SessionChanged(event.state, self._coordinator.session_id,
                                         self._clock.wall_ms()))
                if event.state is SessionState.CLOSED:
                    return
            else:
                self._put(event)

    def _carry(self, effects: Iterable[NodeEffect]) -> None:
        for effect in effects:
            if isinstance(effect, EmitTrace):
                self._trace_sink.emit(effect.event)
            elif isinstance(effect, ZkRead):
                self._pending += 1
                self._nursery.start_soon(self._do_read, effect)
            elif isinstance(effect, ZkWrite):
                self._pending += 1
                self._nursery.start_soon(self._do_write, effect)
            elif isinstance(effect, SendToBroker):
                self._nursery.start_soon(self._do_send, effect)
            elif isinstance(effect, Resign):
                _logger.info("controller %d resigns: %s", self.node.config.broker_id
                             if self.node is not None else -1, effect.reason.name)
            elif isinstance(effect, LogWarning):
                _logger.error("%s", effect.message)
            elif isinstance(effect, ElectionAnswered):
                waiting = self._elections.get(effect.request_id)
                if waiting is not None:
                    waiting[1].extend(effect.results)
                    waiting[0].set()

    def _complete(self, item: NodeInput) -> None:
        self._pending -= 1
        self._put(item)

    # --- effects -----------------------------------------------------------------------------

    async def _do_read(self, effect: ZkRead) -> None:
        coordinator = self._coordinator

        def reader(op: ReadOp) -> Callable[[], Awaitable[ReadResult]]:
            async def read() -> ReadResult:
                if isinstance(op, ExistsOp):
                    return await coordinator.exists(op.path, watch=op.watch)
                try:
                    if isinstance(op, ChildrenOp):
                        return tuple(await coordinator.children(op.path, watch=op.watch))
                    assert isinstance(op, GetOp)
                    return await coordinator.get(op.path, watch=op.watch)
                except NoNodeError:
                    return None
            return read

        results: tuple[ReadResult, ...] | None
        try:
            results = tuple(await _gather([reader(op) for op in effect.ops],
                                          READS_IN_FLIGHT_MAX))
        except _LOST:
            results = None
        # the session the reads ran under: the client's once they completed (a newer one if the
        # session was replaced meanwhile, which the node takes as the end of its term)
        self._complete(ReadCompleted(effect.read_id, results, coordinator.session_id))

    async def _ensure_paths(self, paths: Iterable[str]) -> None:
        missing = sorted({p for p in paths if p not in self._ensured_paths},
                         key=lambda p: (p.count("/"), p))
        by_depth: dict[int, list[str]] = {}
        for path in missing:
            by_depth.setdefault(path.count("/"), []).append(path)

        def creator(path: str) -> Callable[[], Awaitable[None]]:
            async def create() -> None:
                with contextlib.suppress(NodeExistsError):
                    await self._coordinator.create(path)
            return create

        def batch_creator(paths: list[str]) -> Callable[[], Awaitable[None]]:
            async def create_all() -> None:
                # One round trip for the paths of a new topic; when any exists already (the
                # multi fails as a whole), each is created on its own as before.
                results = await self._coordinator.multi([CreateOp(p) for p in paths])
                if multi_error(results) is not None:
                    await _gather([creator(p) for p in paths], READS_IN_FLIGHT_MAX)
            return create_all

        for depth in sorted(by_depth):
            level = by_depth[depth]
            await _gather([batch_creator(level[i:i + ENSURE_PATHS_PER_MULTI])
                           for i in range(0, len(level), ENSURE_PATHS_PER_MULTI)],
                          READS_IN_FLIGHT_MAX)
        self._ensured_paths.update(missing)

    async def _do_write(self, effect: ZkWrite) -> None:
        try:
            if effect.ensure_paths:
                await self._ensure_paths(effect.ensure_paths)
            results = await self._coordinator.multi(effect.ops)
        except _LOST:
            self._complete(WriteCompleted(effect.write_id, None, self._coordinator.session_id))
            return
        self._forget_ensured(effect, results)
        self._complete(WriteCompleted(effect.write_id, results, self._coordinator.session_id))

    def _forget_ensured(self, effect: ZkWrite, results: Sequence[OpResult]) -> None:
        """Keep the cache of ensured paths true: a path this write deleted (a topic's
        ``partitions`` nodes, when the topic is deleted) is no longer there, nor are its
        descendants; and when the write failed on a missing node, the paths it relied on are
        checked again next time (another session may have deleted them). Without this a topic
        created again after its deletion never got its partition states: each create of a state
        znode failed with NoNode under a parent the cache still believed in."""
        failure = multi_error(results)
        if failure is not None:
            if isinstance(failure[1], NoNodeError):
                self._ensured_paths.difference_update(effect.ensure_paths)
            return
        for op in effect.ops:
            if isinstance(op, DeleteOp):
                prefix = op.path + "/"
                self._ensured_paths = {path for path in self._ensured_paths
                                       if path != op.path and not path.startswith(prefix)}

    async def _do_send(self, effect: SendToBroker) -> None:
        if effect.backoff_ms:
            await trio.sleep(effect.backoff_ms / 1000)
        response: ControllerResponse | None = None
        with trio.move_on_after(self._request_timeout_s):
            try:
                response = await self._send(effect.broker_id, effect.request)
            except Exception as error:  # the transport's failure: report no response
                _logger.warning("request to broker %d failed: %r", effect.broker_id, error)
        self._put(RequestCompleted(effect.request_id, response))


__all__ = ["ControllerService", "SendFunction"]
