"""KazooCoordinator: the Coordinator port over a real ZooKeeper, through kazoo, for trio.

Theory of operation: kazoo runs its own threads (a connection thread and a callback worker). We
never block a trio task on them: every request uses kazoo's ``*_async`` API, and the completion
callback (on kazoo's worker thread) only schedules ``trio.Event.set`` into the trio run with
``TrioToken.run_sync_soon``, which is thread-safe and never blocks. Watch callbacks and session
state changes reach the trio side the same way and are queued for :meth:`next_event`. So many
requests can be in flight at once (a controller pipelines its batched ``multi`` calls), and a
trio cancellation only abandons the wait, never a kazoo thread. Only ``start`` and ``stop`` block,
and they run in ``trio.to_thread.run_sync``.

Kazoo drops all watches when the connection is lost and delivers a ``NONE`` event to each watcher;
we drop those (the SUSPENDED session event says the same) so users see one contract.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

import trio
from kazoo import exceptions as kazoo_errors
from kazoo.client import KazooClient
from kazoo.protocol.serialization import SetData
from kazoo.protocol.states import EventType, KazooState, WatchedEvent

from .coordinator import (
    ANY_VERSION,
    BadArgumentsError,
    BadVersionError,
    CheckOp,
    CheckResult,
    ConnectionLossError,
    CoordinatorClosedError,
    CoordinatorError,
    CoordinatorEvent,
    CreateOp,
    CreateResult,
    DeleteOp,
    DeleteResult,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NodeStat,
    NoNodeError,
    NotEmptyError,
    Op,
    OpResult,
    RolledBackError,
    SessionEvent,
    SessionExpiredError,
    SessionState,
    SetOp,
    SetResult,
    WatchEvent,
    WatchEventType,
    WatchKind,
    validate_path,
)

_logger = logging.getLogger(__name__)

_ERROR_MAP: tuple[tuple[type[Exception], type[CoordinatorError]], ...] = (
    (kazoo_errors.NoNodeError, NoNodeError),
    (kazoo_errors.NodeExistsError, NodeExistsError),
    (kazoo_errors.BadVersionError, BadVersionError),
    (kazoo_errors.NotEmptyError, NotEmptyError),
    (kazoo_errors.NoChildrenForEphemeralsError, NoChildrenForEphemeralsError),
    (kazoo_errors.RolledBackError, RolledBackError),
    (kazoo_errors.RuntimeInconsistency, RolledBackError),
    (kazoo_errors.BadArgumentsError, BadArgumentsError),
    (kazoo_errors.ConnectionClosedError, CoordinatorClosedError),
    (kazoo_errors.SessionExpiredError, SessionExpiredError),
    (kazoo_errors.ConnectionLoss, ConnectionLossError),
    (kazoo_errors.ConnectionDropped, ConnectionLossError),
    (kazoo_errors.ZookeeperStoppedError, CoordinatorClosedError),
)

_EVENT_TYPES = {
    EventType.CREATED: WatchEventType.CREATED,
    EventType.DELETED: WatchEventType.DELETED,
    EventType.CHANGED: WatchEventType.CHANGED,
    EventType.CHILD: WatchEventType.CHILD,
}

#: Bound on queued events; watches are one-shot, so only a consumer that never reads reaches it.
EVENTS_MAX = 1_000_000
#: A multi's ops built (and results translated) between two yields to the event loop: the
#: controller starts its writes at once, 500 ops each, and forty of them built in one go held
#: the loop for half a second when a topic grew to 20,000 partitions.
MULTI_OPS_PER_CHECKPOINT = 50


def _translate(error: BaseException) -> CoordinatorError:
    for kazoo_type, our_type in _ERROR_MAP:
        if isinstance(error, kazoo_type):
            translated = our_type(str(error) or kazoo_type.__name__)
            translated.__cause__ = error
            return translated
    if isinstance(error, kazoo_errors.ZookeeperError):
        translated = CoordinatorError(f"{type(error).__name__}: {error}")
        translated.__cause__ = error
        return translated
    raise error


def _stat(raw: Any) -> NodeStat:
    return NodeStat(
        czxid=raw.czxid,
        mzxid=raw.mzxid,
        pzxid=raw.pzxid,
        version=raw.version,
        cversion=raw.cversion,
        ephemeral_owner=raw.ephemeralOwner,
        data_length=raw.dataLength,
        num_children=raw.numChildren,
    )


def _validate_version(version: int) -> None:
    if isinstance(version, bool) or not isinstance(version, int) or version < ANY_VERSION:
        raise BadArgumentsError(f"version must be an integer >= -1, not {version!r}")


class KazooCoordinator:
    """The :class:`~impl.controller.coordinator.Coordinator` port over kazoo (see module doc).

    Create it with :meth:`connect` inside a trio run; close it with :meth:`close`.
    """

    def __init__(self, client: KazooClient, token: trio.lowlevel.TrioToken) -> None:
        self._client = client
        self._token = token
        self._events: collections.deque[CoordinatorEvent] = collections.deque()
        self._event_ready = trio.Event()
        self._closing = False
        self._closed = False
        client.add_listener(self._on_state)

    @classmethod
    async def connect(
        cls,
        hosts: str,
        *,
        session_timeout_ms: int = 6_000,
        connect_timeout_s: float = 15.0,
        client_id: tuple[int, bytes] | None = None,
    ) -> KazooCoordinator:
        """Connect to ZooKeeper and return a connected coordinator.

        Args:
            hosts: ``host:port[,host:port…][/chroot]``.
            session_timeout_ms: requested session timeout (the server clamps it to its bounds).
            connect_timeout_s: how long to wait for the first connection.
            client_id: ``(session id, password)`` to resume an existing session.

        Raises:
            ConnectionLossError: no connection within ``connect_timeout_s``.
        """
        client = KazooClient(
            hosts=hosts,
            timeout=session_timeout_ms / 1000.0,
            client_id=client_id,
            connection_retry={"max_tries": -1, "delay": 0.05, "max_delay": 0.5},
        )
        coordinator = cls(client, trio.lowlevel.current_trio_token())
        try:
            await trio.to_thread.run_sync(functools.partial(client.start, connect_timeout_s))
        except Exception as error:
            await trio.to_thread.run_sync(client.stop)
            client.close()
            raise ConnectionLossError(f"cannot connect to ZooKeeper at {hosts}: {error}") from error
        return coordinator

    @property
    def session_id(self) -> int:
        """The current session id, 0 when not connected."""
        client_id = self._client.client_id
        return int(client_id[0]) if client_id else 0

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """``(session id, password)`` of the current session (to resume or expire it)."""
        client_id = self._client.client_id
        return (int(client_id[0]), bytes(client_id[1])) if client_id else None

    # --- callbacks from kazoo's threads (only schedule work into trio) ---------------------

    def _schedule(self, function: Callable[..., object], *args: object) -> None:
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(function, *args)

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            event = SessionEvent(SessionState.CONNECTED)
        elif state == KazooState.SUSPENDED:
            event = SessionEvent(SessionState.SUSPENDED)
        elif self._closing:
            return
        else:
            event = SessionEvent(SessionState.EXPIRED)
        self._schedule(self._enqueue, event)

    def _on_data_watch(self, event: WatchedEvent) -> None:
        self._on_watch(event, WatchKind.DATA)

    def _on_child_watch(self, event: WatchedEvent) -> None:
        self._on_watch(event, WatchKind.CHILD)

    def _on_watch(self, event: WatchedEvent, kind: WatchKind) -> None:
        event_type = _EVENT_TYPES.get(event.type)
        if event_type is None or event.path is None:
            return  # connection loss: reported as a SUSPENDED session event
        self._schedule(self._enqueue, WatchEvent(event_type, event.path, kind))

    # --- trio side ------------------------------------------------------------------------

    def _enqueue(self, event: CoordinatorEvent) -> None:
        assert len(self._events) < EVENTS_MAX, "coordinator events not consumed"
        self._events.append(event)
        self._event_ready.set()

    async def next_event(self) -> CoordinatorEvent:
        """Wait for the next watch or session event."""
        while not self._events:
            self._event_ready = trio.Event()
            await self._event_ready.wait()
        return self._events.popleft()

    def next_event_nowait(self) -> CoordinatorEvent | None:
        """The next queued event, or ``None``."""
        return self._events.popleft() if self._events else None

    async def _wait(self, start: Callable[[], Any]) -> Any:
        if self._closed:
            raise CoordinatorClosedError("coordinator closed")
        done = trio.Event()
        try:
            async_result = start()
        except Exception as error:
            raise _translate(error) from error
        async_result.rawlink(lambda _result: self._schedule(done.set))
        await done.wait()
        if async_result.successful():
            return async_result.value
        # Not ``get_nowait()``: it raises the stored exception inside a method of the result,
        # and that exception's traceback then holds the result, which holds the exception: a
        # cycle only a full collection frees (one per missing znode read; the broker defers
        # full collections, see ``impl.broker.garbage``).
        failure = async_result.exception
        if failure is None:  # not ready: kazoo's own timeout error, as ``get_nowait()`` raises
            return async_result.get_nowait()
        raise _translate(failure) from failure

    async def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequential: bool = False
    ) -> str:
        """Create a node (see :class:`~impl.controller.coordinator.Coordinator`)."""
        validate_path(path)
        created: str = await self._wait(
            lambda: self._client.create_async(
                path, data, ephemeral=ephemeral, sequence=sequential
            )
        )
        return created

    async def get(self, path: str, *, watch: bool = False) -> tuple[bytes, NodeStat]:
        """Read data and stat."""
        validate_path(path)
        watcher = self._on_data_watch if watch else None
        data, stat = await self._wait(lambda: self._client.get_async(path, watch=watcher))
        return bytes(data or b""), _stat(stat)

    async def set(self, path: str, data: bytes, *, version: int = ANY_VERSION) -> NodeStat:
        """Write data, conditional on ``version``."""
        validate_path(path)
        _validate_version(version)
        stat = await self._wait(lambda: self._client.set_async(path, data, version))
        return _stat(stat)

    async def delete(self, path: str, *, version: int = ANY_VERSION) -> None:
        """Delete a node, conditional on ``version``."""
        validate_path(path)
        _validate_version(version)
        await self._wait(lambda: self._client.delete_async(path, version))

    async def exists(self, path: str, *, watch: bool = False) -> NodeStat | None:
        """The stat or ``None``; arms a data watch when asked."""
        validate_path(path)
        watcher = self._on_data_watch if watch else None
        stat = await self._wait(lambda: self._client.exists_async(path, watch=watcher))
        return None if stat is None else _stat(stat)

    async def children(self, path: str, *, watch: bool = False) -> list[str]:
        """Sorted child names; arms a child watch when asked."""
        validate_path(path)
        watcher = self._on_child_watch if watch else None
        names = await self._wait(lambda: self._client.get_children_async(path, watch=watcher))
        return sorted(names)

    def _chroot_prefix(self) -> str:
        """The client's chroot as a path prefix (``""`` for none), as kazoo prefixes paths."""
        chroot: str = self._client.chroot or ""
        if not chroot or chroot == "/":
            return ""
        return "/" + chroot.strip("/")

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        """Apply ``ops`` atomically and return per-op results."""
        if not ops:
            raise BadArgumentsError("multi needs at least one op")
        transaction = self._client.transaction()
        root = self._chroot_prefix()
        for index, op in enumerate(ops):
            if index and not index % MULTI_OPS_PER_CHECKPOINT:
                await trio.lowlevel.checkpoint()
            validate_path(op.path)
            if isinstance(op, SetOp):
                # The hot op of a failover (one per partition state): the request is built
                # here, from the path checked above and the chroot, because kazoo's
                # ``set_data`` normalises every path again (half of a multi's build time,
                # on the event loop, for 500 ops a multi).
                _validate_version(op.version)
                transaction.operations.append(
                    SetData(root + op.path if root else op.path, op.data, op.version))
            elif isinstance(op, CheckOp):
                _validate_version(op.version)
                transaction.check(op.path, op.version)
            elif isinstance(op, CreateOp):
                transaction.create(
                    op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequential
                )
            elif isinstance(op, DeleteOp):
                _validate_version(op.version)
                transaction.delete(op.path, op.version)
            else:
                raise BadArgumentsError(f"not a multi op: {op!r}")
        raw_results = await self._wait(transaction.commit_async)
        if len(raw_results) != len(ops):
            raise CoordinatorError(f"multi of {len(ops)} ops returned {len(raw_results)} results")
        results: list[OpResult] = []
        for index, (op, raw) in enumerate(zip(ops, raw_results, strict=True)):
            if index and not index % MULTI_OPS_PER_CHECKPOINT:
                await trio.lowlevel.checkpoint()
            if isinstance(raw, Exception):
                results.append(_translate(raw))
            elif isinstance(op, CheckOp):
                results.append(CheckResult())
            elif isinstance(op, CreateOp):
                results.append(CreateResult(str(raw)))
            elif isinstance(op, SetOp):
                results.append(SetResult(_stat(raw)))
            else:
                results.append(DeleteResult())
        return results

    async def close(self) -> None:
        """Stop the client (ending the session) and report CLOSED; idempotent."""
        if self._closed:
            return
        self._closing = True
        try:
            await trio.to_thread.run_sync(self._client.stop)
        finally:
            self._client.close()
            self._closed = True
            self._enqueue(SessionEvent(SessionState.CLOSED))


async def expire_session(hosts: str, client_id: tuple[int, bytes]) -> None:
    """Expire a live session the way kazoo's own tests do.

    A second client attaches to the session with its id and password, which makes the server drop
    the first client's connection, and then closes the session; the first client finds it expired
    on reconnecting.

    Args:
        hosts: the connect string (a chroot is irrelevant).
        client_id: ``(session id, password)`` of the session to expire.

    Raises:
        ConnectionLossError: the second client could not attach.
    """
    client = KazooClient(hosts=hosts, client_id=client_id, timeout=10.0)
    try:
        await trio.to_thread.run_sync(functools.partial(client.start, 15.0))
    except Exception as error:
        raise ConnectionLossError(f"cannot attach to session {client_id[0]:#x}: {error}") from error
    finally:
        await trio.to_thread.run_sync(client.stop)
        client.close()
