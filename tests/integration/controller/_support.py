"""Shared pieces of the controller tests: a waitable trace sink and a cluster of sessions."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import trio

from conformance.coordinator import RecordingBrokers, SimulatedZooKeeper
from impl.controller import (
    ControllerService,
    Coordinator,
    CoordinatorEvent,
    KazooCoordinator,
    NodeStat,
    Op,
    OpResult,
    expire_session,
    register_broker,
)
from impl.trace import TraceEvent

WAIT_S = 30.0


class WaitableTraceSink:
    """Keeps trace events and lets a test wait (bounded) for a condition over them."""

    def __init__(self) -> None:
        self.events: list[TraceEvent] = []
        self._changed = trio.Event()

    def emit(self, event: TraceEvent) -> None:
        self.events.append(event)
        self._changed.set()
        self._changed = trio.Event()

    def named(self, event: str, subject: str | None = None) -> list[TraceEvent]:
        return [e for e in self.events
                if e.event == event and (subject is None or e.subject == subject)]

    async def wait_for(self, condition: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
        with trio.fail_after(timeout_s):
            while not condition():
                await self._changed.wait()


class RecordingCoordinator:
    """A Coordinator that records every ``multi`` it passes on (to see the batching)."""

    def __init__(self, inner: Coordinator) -> None:
        self.inner = inner
        self.multis: list[tuple[Op, ...]] = []

    @property
    def session_id(self) -> int:
        return self.inner.session_id

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     sequential: bool = False) -> str:
        return await self.inner.create(path, data, ephemeral=ephemeral, sequential=sequential)

    async def get(self, path: str, *, watch: bool = False) -> tuple[bytes, NodeStat]:
        return await self.inner.get(path, watch=watch)

    async def set(self, path: str, data: bytes, *, version: int = -1) -> NodeStat:
        return await self.inner.set(path, data, version=version)

    async def delete(self, path: str, *, version: int = -1) -> None:
        await self.inner.delete(path, version=version)

    async def exists(self, path: str, *, watch: bool = False) -> NodeStat | None:
        return await self.inner.exists(path, watch=watch)

    async def children(self, path: str, *, watch: bool = False) -> list[str]:
        return await self.inner.children(path, watch=watch)

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        self.multis.append(tuple(ops))
        return await self.inner.multi(ops)

    async def next_event(self) -> CoordinatorEvent:
        return await self.inner.next_event()

    def next_event_nowait(self) -> CoordinatorEvent | None:
        return self.inner.next_event_nowait()

    async def close(self) -> None:
        await self.inner.close()

    def state_multis(self) -> list[tuple[Op, ...]]:
        """The multis that wrote partition state znodes."""
        return [ops for ops in self.multis
                if any(op.path.endswith("/state") for op in ops)]


@dataclass
class Cluster:
    """Sessions of one ZooKeeper: brokers' sessions and controller services."""

    connect: Callable[[], Awaitable[Coordinator]]
    expire: Callable[[Coordinator], Awaitable[None]]
    nursery: trio.Nursery
    server: SimulatedZooKeeper | None = None
    transport: RecordingBrokers = field(default_factory=RecordingBrokers)
    sessions: dict[int, Coordinator] = field(default_factory=dict)
    services: dict[int, ControllerService] = field(default_factory=dict)
    traces: dict[int, WaitableTraceSink] = field(default_factory=dict)
    recorders: dict[int, RecordingCoordinator] = field(default_factory=dict)

    async def add_broker(self, broker_id: int) -> Coordinator:
        coordinator = await self.connect()
        self.sessions[broker_id] = coordinator
        await register_broker(coordinator, broker_id, "127.0.0.1", 9000 + broker_id,
                              rack=f"r{broker_id % 2}")
        return coordinator

    async def start_controller(
        self, service_id: int, *, unclean_leader_election: bool = False,
        partitions_per_write_max: int = 500, session: Coordinator | None = None,
    ) -> ControllerService:
        """Start a controller service; on ``session`` (a broker's own) or on a new session."""
        coordinator = RecordingCoordinator(session if session is not None else await self.connect())
        if session is None:
            assert service_id not in self.sessions, f"session {service_id} exists"
            self.sessions[service_id] = coordinator
        self.recorders[service_id] = coordinator
        sink = WaitableTraceSink()
        service = ControllerService(
            trace_sink=sink,
            unclean_leader_election=unclean_leader_election,
            partitions_per_write_max=partitions_per_write_max,
        )
        self.services[service_id] = service
        self.traces[service_id] = sink
        await self.nursery.start(service.run, coordinator, service_id, self.transport.send)
        return service


@asynccontextmanager
async def cluster(backend: str, hosts: str | None = None) -> AsyncIterator[Cluster]:
    """A cluster over the real ZooKeeper (``backend == "zookeeper"``) or the simulated one."""
    server = SimulatedZooKeeper()

    async def open_real() -> Coordinator:
        assert hosts is not None
        return await KazooCoordinator.connect(hosts, session_timeout_ms=4_000)

    async def open_simulated() -> Coordinator:
        await trio.lowlevel.checkpoint()
        return server.connect(4_000)

    async def expire_real(coordinator: Coordinator) -> None:
        if isinstance(coordinator, RecordingCoordinator):
            coordinator = coordinator.inner
        assert hosts is not None
        assert isinstance(coordinator, KazooCoordinator)
        client_id = coordinator.client_id
        assert client_id is not None
        await expire_session(hosts, client_id)

    async def expire_simulated(coordinator: Coordinator) -> None:
        await trio.lowlevel.checkpoint()
        server.expire_session(coordinator.session_id)
        server.reconnect(coordinator.session_id)

    real = backend == "zookeeper"
    async with trio.open_nursery() as nursery:
        state = Cluster(open_real if real else open_simulated,
                        expire_real if real else expire_simulated, nursery,
                        None if real else server)
        try:
            yield state
        finally:
            for coordinator in state.sessions.values():
                await coordinator.close()
            nursery.cancel_scope.cancel()


async def wait_any_active(*services: ControllerService) -> None:
    """Wait (bounded) until one of ``services`` is the controller."""
    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:

            async def wait_one(service: ControllerService) -> None:
                await service.wait_active()
                nursery.cancel_scope.cancel()

            for service in services:
                nursery.start_soon(wait_one, service)
