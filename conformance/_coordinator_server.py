"""The in-memory ZooKeeper server behind ``conformance.coordinator`` (see its fault model).

Synchronous and deterministic: every operation is applied at once, in call order; zxids, session
ids and sequential suffixes come from counters; watch events are appended to each session's queue
in the order ZooKeeper would send them. A ``multi`` is applied to a copy-on-write view of the tree
and committed only if every op succeeded, with one zxid for the whole transaction, as in
ZooKeeper.

This module is a sans-IO core.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from impl.controller.coordinator import (
    ANY_VERSION,
    BadArgumentsError,
    BadVersionError,
    CheckOp,
    CheckResult,
    ConnectionLossError,
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
    join_path,
    parent_path,
    validate_path,
)

__sans_io__ = True

#: The first session id handed out (ZooKeeper's ids are large; the value only has to be unique).
FIRST_SESSION_ID = 0x1_0000_0000
#: Bound on events queued for one session.
SESSION_EVENTS_MAX = 1_000_000


@dataclass(frozen=True, slots=True)
class _Node:
    data: bytes
    czxid: int
    mzxid: int
    pzxid: int
    version: int
    cversion: int
    ephemeral_owner: int
    children: frozenset[str]
    #: Children ever created: ZooKeeper's sequential suffix (its cversion also counts deletions).
    creations: int = 0
    #: :meth:`stat`, built once (a node is immutable; every change makes a new one)
    _stat: NodeStat | None = dataclasses.field(default=None, init=False, repr=False,
                                               compare=False)

    def stat(self) -> NodeStat:
        found = self._stat
        if found is not None:
            return found
        found = NodeStat(
            czxid=self.czxid,
            mzxid=self.mzxid,
            pzxid=self.pzxid,
            version=self.version,
            cversion=self.cversion,
            ephemeral_owner=self.ephemeral_owner,
            data_length=len(self.data),
            num_children=len(self.children),
        )
        object.__setattr__(self, "_stat", found)
        return found


@dataclass
class _Session:
    session_id: int
    timeout_ms: int
    connected: bool = True
    expired: bool = False
    closed: bool = False
    disconnected_at_ms: int = 0
    events: collections.deque[CoordinatorEvent] = dataclasses.field(
        default_factory=collections.deque
    )
    data_watches: set[str] = dataclasses.field(default_factory=set)
    child_watches: set[str] = dataclasses.field(default_factory=set)
    listener: Callable[[], None] | None = None


# (path, event type) of one change, fired after a successful transaction.
_Trigger = tuple[str, WatchEventType]


class SimulatedZooKeeperServer:
    """One ZooKeeper ensemble in memory: a tree, sessions and their watches.

    Args:
        session_timeout_ms_min, session_timeout_ms_max: the server's bounds on a session timeout
            (ZooKeeper's 2 and 20 ticks by default); requested timeouts are clamped to them.
    """

    def __init__(self, session_timeout_ms_min: int = 400, session_timeout_ms_max: int = 60_000):
        self._nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0, 0, 0, 0, 0, frozenset())}
        self._valid_paths: set[str] = set()
        self._sessions: dict[int, _Session] = {}
        self._zxid = 0
        self._next_session_id = FIRST_SESSION_ID
        self._now_ms = 0
        self._timeout_min_ms = session_timeout_ms_min
        self._timeout_max_ms = session_timeout_ms_max

    # --- sessions and faults ------------------------------------------------------------------

    def open_session(self, timeout_ms: int, listener: Callable[[], None] | None = None) -> int:
        """Open a connected session; its queue starts with CONNECTED.

        Args:
            timeout_ms: the requested session timeout (clamped to the server's bounds).
            listener: called (synchronously) whenever an event is queued for the session.

        Returns:
            The session id.
        """
        session_id = self._next_session_id
        self._next_session_id += 1
        timeout_ms = min(max(timeout_ms, self._timeout_min_ms), self._timeout_max_ms)
        session = _Session(session_id, timeout_ms, listener=listener)
        self._sessions[session_id] = session
        self._push(session, SessionEvent(SessionState.CONNECTED))
        return session_id

    def session_alive(self, session_id: int) -> bool:
        """True until the session expires or is closed."""
        session = self._sessions.get(session_id)
        return session is not None and not session.expired and not session.closed

    def close_session(self, session_id: int) -> None:
        """Close a session (its ephemeral nodes go); the client sees CLOSED."""
        session = self._sessions[session_id]
        if session.closed:
            return
        if not session.expired:
            self._end_session(session)
        session.closed = True
        session.data_watches.clear()
        session.child_watches.clear()
        self._push(session, SessionEvent(SessionState.CLOSED))

    def expire_session(self, session_id: int) -> None:
        """Expire a session now, as the server does when it stops hearing from a client.

        Its ephemeral nodes vanish at once (other sessions' watches fire). The client sees
        SUSPENDED (if it was connected) and EXPIRED when it reconnects.
        """
        session = self._sessions[session_id]
        if session.expired or session.closed:
            return
        if session.connected:
            self._drop_connection(session)
        self._end_session(session)

    def disconnect(self, session_id: int) -> None:
        """Cut a session's connection: SUSPENDED, watches dropped, the session lives on until
        its timeout passes on the virtual clock (:meth:`advance_ms`)."""
        session = self._sessions[session_id]
        if session.connected and not session.closed:
            self._drop_connection(session)

    def reconnect(self, session_id: int) -> bool:
        """Restore a session's connection.

        Returns:
            True if the session survived (the client sees CONNECTED); False if it expired meanwhile
            (the client sees EXPIRED and must open a new session).
        """
        session = self._sessions[session_id]
        if session.closed or session.connected:
            return not session.expired
        if session.expired:
            self._push(session, SessionEvent(SessionState.EXPIRED))
            return False
        session.connected = True
        self._push(session, SessionEvent(SessionState.CONNECTED))
        return True

    def advance_ms(self, delta_ms: int) -> None:
        """Move virtual time; disconnected sessions past their timeout expire."""
        if delta_ms < 0:
            raise ValueError(f"time cannot move backwards ({delta_ms} ms)")
        self._now_ms += delta_ms
        for session in list(self._sessions.values()):
            if (
                not session.connected
                and not session.expired
                and not session.closed
                and self._now_ms - session.disconnected_at_ms >= session.timeout_ms
            ):
                self._end_session(session)

    @property
    def now_ms(self) -> int:
        """Virtual milliseconds since the server started."""
        return self._now_ms

    def pop_event(self, session_id: int) -> CoordinatorEvent | None:
        """The session's next queued event, or ``None``."""
        events = self._sessions[session_id].events
        return events.popleft() if events else None

    def _push(self, session: _Session, event: CoordinatorEvent) -> None:
        assert len(session.events) < SESSION_EVENTS_MAX, "simulated session events not consumed"
        session.events.append(event)
        if session.listener is not None:
            session.listener()

    def _drop_connection(self, session: _Session) -> None:
        session.connected = False
        session.disconnected_at_ms = self._now_ms
        session.data_watches.clear()
        session.child_watches.clear()
        self._push(session, SessionEvent(SessionState.SUSPENDED))

    def _end_session(self, session: _Session) -> None:
        session.expired = True
        session.data_watches.clear()
        session.child_watches.clear()
        owned = sorted(
            (
                path
                for path, node in self._nodes.items()
                if node.ephemeral_owner == session.session_id
            ),
            reverse=True,
        )
        if not owned:
            return
        self._zxid += 1
        nodes = dict(self._nodes)
        triggers: list[_Trigger] = []
        for path in owned:
            self._apply_delete(nodes, DeleteOp(path), self._zxid, triggers)
        self._nodes = nodes
        self._fire(triggers)

    def _usable(self, session_id: int) -> _Session:
        session = self._sessions.get(session_id)
        if session is None or session.closed:
            raise SessionExpiredError("session closed")
        if not session.connected:
            raise ConnectionLossError("connection lost")
        if session.expired:
            raise SessionExpiredError("session expired")
        return session

    # --- reads --------------------------------------------------------------------------------

    def _validate(self, path: str) -> None:
        """``validate_path``, once per distinct path (reads repeat a few paths all run long)."""
        if type(path) is not str or path not in self._valid_paths:
            validate_path(path)
            if len(self._valid_paths) < 100_000:
                self._valid_paths.add(path)

    def get(self, session_id: int, path: str, watch: bool) -> tuple[bytes, NodeStat]:
        """ZooKeeper ``getData``."""
        session = self._usable(session_id)
        self._validate(path)
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        if watch:
            session.data_watches.add(path)
        return node.data, node.stat()

    def exists(self, session_id: int, path: str, watch: bool) -> NodeStat | None:
        """ZooKeeper ``exists`` (the watch is armed whether or not the node exists)."""
        session = self._usable(session_id)
        self._validate(path)
        if watch:
            session.data_watches.add(path)
        node = self._nodes.get(path)
        return None if node is None else node.stat()

    def children(self, session_id: int, path: str, watch: bool) -> list[str]:
        """ZooKeeper ``getChildren``, sorted."""
        session = self._usable(session_id)
        validate_path(path)
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        if watch:
            session.child_watches.add(path)
        return sorted(node.children)

    # --- writes -------------------------------------------------------------------------------

    def multi(self, session_id: int, ops: Sequence[Op]) -> list[OpResult]:
        """Apply ``ops`` atomically (see the Coordinator contract)."""
        self._usable(session_id)
        if not ops:
            raise BadArgumentsError("multi needs at least one op")
        for op in ops:
            self._validate(op.path)
            if isinstance(op, CheckOp | SetOp | DeleteOp) and (
                isinstance(op.version, bool) or op.version < ANY_VERSION
            ):
                raise BadArgumentsError(f"bad version in {op!r}")
        zxid = self._zxid + 1
        nodes = dict(self._nodes)
        triggers: list[_Trigger] = []
        results: list[OpResult] = []
        for index, op in enumerate(ops):
            try:
                results.append(self._apply(nodes, op, zxid, session_id, triggers))
            except CoordinatorError as error:
                failed: list[OpResult] = [RolledBackError("rolled back") for _ in ops]
                failed[index] = error
                return failed
        self._zxid = zxid
        self._nodes = nodes
        self._fire(triggers)
        return results

    def _apply(
        self, nodes: dict[str, _Node], op: Op, zxid: int, session_id: int,
        triggers: list[_Trigger],
    ) -> OpResult:
        if isinstance(op, CheckOp):
            node = nodes.get(op.path)
            if node is None:
                raise NoNodeError(op.path)
            if op.version not in (ANY_VERSION, node.version):
                raise BadVersionError(f"{op.path} is at version {node.version}, not {op.version}")
            return CheckResult()
        if isinstance(op, CreateOp):
            return CreateResult(self._apply_create(nodes, op, zxid, session_id, triggers))
        if isinstance(op, SetOp):
            node = nodes.get(op.path)
            if node is None:
                raise NoNodeError(op.path)
            if op.version not in (ANY_VERSION, node.version):
                raise BadVersionError(f"{op.path} is at version {node.version}, not {op.version}")
            if not isinstance(op.data, bytes):
                raise BadArgumentsError("data must be bytes")
            updated = dataclasses.replace(node, data=op.data, mzxid=zxid, version=node.version + 1)
            nodes[op.path] = updated
            triggers.append((op.path, WatchEventType.CHANGED))
            return SetResult(updated.stat())
        self._apply_delete(nodes, op, zxid, triggers)
        return DeleteResult()

    def _apply_create(
        self, nodes: dict[str, _Node], op: CreateOp, zxid: int, session_id: int,
        triggers: list[_Trigger],
    ) -> str:
        if op.path == "/":
            raise NodeExistsError("/")
        if not isinstance(op.data, bytes):
            raise BadArgumentsError("data must be bytes")
        parent = parent_path(op.path)
        parent_node = nodes.get(parent)
        if parent_node is None:
            raise NoNodeError(parent)
        if parent_node.ephemeral_owner != 0:
            raise NoChildrenForEphemeralsError(parent)
        path = op.path
        if op.sequential:
            path = f"{op.path}{parent_node.creations:010d}"
        name = path.rsplit("/", 1)[1]
        if path in nodes:
            raise NodeExistsError(path)
        nodes[path] = _Node(
            op.data, zxid, zxid, zxid, 0, 0, session_id if op.ephemeral else 0, frozenset()
        )
        nodes[parent] = dataclasses.replace(
            parent_node,
            children=parent_node.children | {name},
            cversion=parent_node.cversion + 1,
            pzxid=zxid,
            creations=parent_node.creations + 1,
        )
        triggers.append((path, WatchEventType.CREATED))
        triggers.append((parent, WatchEventType.CHILD))
        return path

    def _apply_delete(
        self, nodes: dict[str, _Node], op: DeleteOp, zxid: int, triggers: list[_Trigger]
    ) -> None:
        if op.path == "/":
            raise BadArgumentsError("cannot delete /")
        node = nodes.get(op.path)
        if node is None:
            raise NoNodeError(op.path)
        if op.version not in (ANY_VERSION, node.version):
            raise BadVersionError(f"{op.path} is at version {node.version}, not {op.version}")
        if node.children:
            raise NotEmptyError(op.path)
        parent = parent_path(op.path)
        parent_node = nodes[parent]
        del nodes[op.path]
        nodes[parent] = dataclasses.replace(
            parent_node,
            children=parent_node.children - {op.path.rsplit("/", 1)[1]},
            cversion=parent_node.cversion + 1,
            pzxid=zxid,
        )
        triggers.append((op.path, WatchEventType.DELETED))
        triggers.append((parent, WatchEventType.CHILD))

    def _fire(self, triggers: list[_Trigger]) -> None:
        if not triggers:
            return
        for session in self._sessions.values():
            if not session.connected or session.expired or session.closed:
                continue
            if not session.data_watches and not session.child_watches:
                continue  # (nothing to fire; dead sessions of past incarnations stay listed)
            for path, event_type in triggers:
                if event_type in (WatchEventType.CREATED, WatchEventType.CHANGED,
                                  WatchEventType.DELETED) and path in session.data_watches:
                    session.data_watches.discard(path)
                    self._push(session, WatchEvent(event_type, path, WatchKind.DATA))
                if event_type in (WatchEventType.CHILD, WatchEventType.DELETED) and (
                    path in session.child_watches
                ):
                    session.child_watches.discard(path)
                    self._push(session, WatchEvent(event_type, path, WatchKind.CHILD))

    # --- inspection (tests and the simulator) -------------------------------------------------

    def paths(self) -> list[str]:
        """Every path in the tree, sorted."""
        return sorted(self._nodes)

    def data_of(self, path: str) -> bytes:
        """A node's data, without a session (for checks).

        Raises:
            NoNodeError: no such node.
        """
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        return node.data


__all__ = ["FIRST_SESSION_ID", "SimulatedZooKeeperServer", "join_path"]
