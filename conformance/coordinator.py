"""A simulated ZooKeeper behind the Coordinator port, and the contract both ports must keep.

Fault model (what this fake injects, and why the controller can still recover):

- **Session expiry** (:meth:`SimulatedZooKeeper.expire_session`): the server forgets the session;
  its ephemeral nodes (``/controller``, ``/brokers/ids/<id>``) vanish in one transaction and the
  other sessions' watches fire. The client sees SUSPENDED, EXPIRED, then CONNECTED with a new
  session id, exactly as kazoo reports it. Recovery: the controller resigns and runs for election
  again; its stale writes are fenced by the ``/controller_epoch`` version check.
- **Connection loss** (:meth:`SimulatedZooKeeper.disconnect` / ``reconnect``): SUSPENDED, every
  armed watch of the session dropped (as kazoo drops them); requests fail with
  ConnectionLossError; the session expires if the virtual clock (:meth:`advance_ms`) passes its
  timeout before ``reconnect``. Recovery: re-read and re-arm after CONNECTED.
- **Nothing else**: no lost or reordered replies, no partial ``multi`` (ZooKeeper gives neither),
  no data corruption. Versions, cversions, czxid/mzxid/pzxid, sequential suffixes (from the
  parent's cversion), one-shot watches, and NoNode/NodeExists/BadVersion/NotEmpty/
  NoChildrenForEphemerals errors behave as ZooKeeper's, which
  :func:`check_coordinator_contract` checks against a real server.

Every run is deterministic: one thread, counters for ids and zxids, events in a per-session FIFO.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Protocol

import trio

from impl.controller._kazoo import KazooCoordinator, expire_session
from impl.controller.coordinator import (
    ANY_VERSION,
    BadArgumentsError,
    CheckOp,
    Coordinator,
    CoordinatorClosedError,
    CoordinatorEvent,
    CreateOp,
    CreateResult,
    DeleteOp,
    NodeStat,
    Op,
    OpResult,
    SessionEvent,
    SessionState,
    SetOp,
    SetResult,
)

from ._coordinator_brokers import BrokerUnreachableError, Delivery, RecordingBrokers
from ._coordinator_contract import ContractViolationError, check_coordinator_contract
from ._coordinator_driver import ControllerDriver
from ._coordinator_server import SimulatedZooKeeperServer

__all__ = [
    "BrokerUnreachableError",
    "ContractViolationError",
    "ControllerDriver",
    "CoordinatorHarness",
    "Delivery",
    "KazooHarness",
    "RecordingBrokers",
    "SimulatedCoordinator",
    "SimulatedHarness",
    "SimulatedZooKeeper",
    "check_coordinator_contract",
]


class SimulatedZooKeeper(SimulatedZooKeeperServer):
    """The in-memory ZooKeeper (see the module's fault model); clients via :meth:`connect`."""

    def connect(self, session_timeout_ms: int = 6_000) -> SimulatedCoordinator:
        """A new client with a new, connected session."""
        return SimulatedCoordinator(self, session_timeout_ms)


class SimulatedCoordinator:
    """A client of :class:`SimulatedZooKeeper` implementing the Coordinator port.

    After its session expires it opens a new one by itself (as kazoo does) once the EXPIRED event
    has been taken from the server, so later requests run in the new session.
    """

    def __init__(self, server: SimulatedZooKeeperServer, session_timeout_ms: int) -> None:
        self._server = server
        self._session_timeout_ms = session_timeout_ms
        self._event_ready = trio.Event()
        self._session_id = server.open_session(session_timeout_ms, self._on_event)
        self._events: collections.deque[CoordinatorEvent] = collections.deque()
        self._closed = False

    def _on_event(self) -> None:
        self._event_ready.set()

    @property
    def session_id(self) -> int:
        """The current session id."""
        return self._session_id

    def _drain(self) -> None:
        while (event := self._server.pop_event(self._session_id)) is not None:
            self._events.append(event)
            if isinstance(event, SessionEvent) and event.state is SessionState.EXPIRED:
                self._session_id = self._server.open_session(
                    self._session_timeout_ms, self._on_event
                )

    def _check_open(self) -> None:
        if self._closed:
            raise CoordinatorClosedError("coordinator closed")
        self._drain()

    async def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequential: bool = False
    ) -> str:
        """Create a node (see the Coordinator contract)."""
        await trio.lowlevel.checkpoint()
        self._check_open()
        result = self._server.multi(
            self._session_id, [CreateOp(path, data, ephemeral=ephemeral, sequential=sequential)]
        )[0]
        if isinstance(result, Exception):
            raise result
        assert isinstance(result, CreateResult)
        return result.path

    async def get(self, path: str, *, watch: bool = False) -> tuple[bytes, NodeStat]:
        """Read data and stat."""
        await trio.lowlevel.checkpoint()
        self._check_open()
        return self._server.get(self._session_id, path, watch)

    async def set(self, path: str, data: bytes, *, version: int = ANY_VERSION) -> NodeStat:
        """Write data, conditional on ``version``."""
        await trio.lowlevel.checkpoint()
        self._check_open()
        result = self._server.multi(self._session_id, [SetOp(path, data, version)])[0]
        if isinstance(result, Exception):
            raise result
        assert isinstance(result, SetResult)
        return result.stat

    async def delete(self, path: str, *, version: int = ANY_VERSION) -> None:
        """Delete a node, conditional on ``version``."""
        await trio.lowlevel.checkpoint()
        self._check_open()
        result = self._server.multi(self._session_id, [DeleteOp(path, version)])[0]
        if isinstance(result, Exception):
            raise result

    async def exists(self, path: str, *, watch: bool = False) -> NodeStat | None:
        """The stat or ``None``."""
        await trio.lowlevel.checkpoint()
        self._check_open()
        return self._server.exists(self._session_id, path, watch)

    async def children(self, path: str, *, watch: bool = False) -> list[str]:
        """Sorted child names."""
        await trio.lowlevel.checkpoint()
        self._check_open()
        return self._server.children(self._session_id, path, watch)

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        """Apply ``ops`` atomically."""
        await trio.lowlevel.checkpoint()
        self._check_open()
        for op in ops:
            if not isinstance(op, CheckOp | CreateOp | SetOp | DeleteOp):
                raise BadArgumentsError(f"not a multi op: {op!r}")
        return self._server.multi(self._session_id, ops)

    async def next_event(self) -> CoordinatorEvent:
        """Wait for the next event (another task of the run acts on the server meanwhile)."""
        await trio.lowlevel.checkpoint()
        while True:
            event = self.next_event_nowait()
            if event is not None:
                return event
            self._event_ready = trio.Event()
            await self._event_ready.wait()

    def next_event_nowait(self) -> CoordinatorEvent | None:
        """The next queued event, or ``None``."""
        if not self._closed:
            self._drain()
        return self._events.popleft() if self._events else None

    async def close(self) -> None:
        """Close the session (ephemeral nodes go) and report CLOSED; idempotent."""
        await trio.lowlevel.checkpoint()
        if self._closed:
            return
        self._drain()
        self._server.close_session(self._session_id)
        self._drain()
        self._closed = True


class CoordinatorHarness(Protocol):
    """How the contract suite gets clients of one ZooKeeper and injects session expiry."""

    async def connect(self) -> Coordinator:
        """A new connected client (with a new session)."""

    async def expire(self, coordinator: Coordinator) -> None:
        """Make the server expire ``coordinator``'s current session."""


class SimulatedHarness:
    """The contract harness over a :class:`SimulatedZooKeeper`."""

    def __init__(self, server: SimulatedZooKeeper | None = None) -> None:
        self.server = server if server is not None else SimulatedZooKeeper()

    async def connect(self) -> Coordinator:
        """A new simulated client."""
        await trio.lowlevel.checkpoint()
        return self.server.connect()

    async def expire(self, coordinator: Coordinator) -> None:
        """Expire the session and let the client find out on reconnecting."""
        await trio.lowlevel.checkpoint()
        session_id = coordinator.session_id
        self.server.expire_session(session_id)
        self.server.reconnect(session_id)


class KazooHarness:
    """The contract harness over a real ZooKeeper through :class:`KazooCoordinator`.

    Expiry is injected as kazoo's own tests do it (:func:`impl.controller.expire_session`).

    Args:
        hosts: connect string, usually with a chroot unique to the test.
        session_timeout_ms: the sessions' timeout.
    """

    def __init__(self, hosts: str, session_timeout_ms: int = 6_000) -> None:
        self.hosts = hosts
        self.session_timeout_ms = session_timeout_ms

    async def connect(self) -> Coordinator:
        """A new real client."""
        return await KazooCoordinator.connect(
            self.hosts, session_timeout_ms=self.session_timeout_ms
        )

    async def expire(self, coordinator: Coordinator) -> None:
        """Expire the client's session through a second client on the same session."""
        assert isinstance(coordinator, KazooCoordinator)
        client_id = coordinator.client_id
        assert client_id is not None, "not connected"
        await expire_session(self.hosts, client_id)
