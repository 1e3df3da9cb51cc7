"""The Coordinator port: ZooKeeper's semantics as a small ``typing.Protocol``.

Why a port: the controller core never talks to ZooKeeper; its trio shell does, through this
protocol. Two implementations keep the same contract, checked by one suite
(``conformance/_coordinator_contract.py``): :class:`impl.controller.KazooCoordinator` against a
real ZooKeeper, and ``conformance.coordinator.SimulatedZooKeeper`` in memory under a virtual clock.

The contract, in ZooKeeper's own terms:

- **Nodes** have data (bytes), a :class:`NodeStat` (czxid, mzxid, pzxid, version, cversion,
  ephemeral owner, number of children) and children. A path is absolute, without a trailing
  slash (except ``/``); every write needs the parent to exist.
- **Versions.** ``set``/``delete``/``CheckOp`` with ``version >= 0`` fail with
  :class:`BadVersionError` unless the node's version equals it; ``-1`` matches any version.
  ``cversion`` counts child creations and deletions.
- **Ephemeral nodes** belong to the session that created them and vanish when it closes or
  expires; they cannot have children (:class:`NoChildrenForEphemeralsError`).
- **Sequential nodes** get a ten-digit suffix from the parent's ``cversion``.
- **multi** applies all ops or none. On failure every result is an error: the first failing op
  carries its own error, all others :class:`RolledBackError`; :meth:`Coordinator.multi` returns
  the results and does not raise.
- **Watches** are one-shot. A data watch (``get``/``exists`` with ``watch=True``; one per path,
  however often it is set) fires CREATED, CHANGED or DELETED; a child watch (``children`` with
  ``watch=True``) fires CHILD on a child's creation or deletion and DELETED when the node itself
  goes. A node deleted with both kinds armed fires two events, one per kind. Events arrive on
  :meth:`Coordinator.next_event` in the order ZooKeeper sent them.
- **Sessions.** :class:`SessionEvent` reports CONNECTED, SUSPENDED (connection lost: every armed
  watch is dropped, as kazoo drops them, so a user re-reads and re-arms after the next
  CONNECTED), EXPIRED (the session is gone with its ephemeral nodes; the client then connects
  with a new session and reports CONNECTED again) and CLOSED.

This module is sans-IO: it defines data and the protocol only.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__sans_io__ = True

#: ``version`` value that matches any version (ZooKeeper's -1).
ANY_VERSION = -1


class CoordinatorError(Exception):
    """Base of every error the coordinator reports (ZooKeeper's KeeperException)."""


class NoNodeError(CoordinatorError):
    """The node (or, for create, its parent) does not exist."""


class NodeExistsError(CoordinatorError):
    """Create of a node that already exists."""


class BadVersionError(CoordinatorError):
    """A conditional write or check found another version."""


class NotEmptyError(CoordinatorError):
    """Delete of a node that still has children."""


class NoChildrenForEphemeralsError(CoordinatorError):
    """Create under an ephemeral node."""


class RolledBackError(CoordinatorError):
    """This op of a failed ``multi`` was not applied because another op failed."""


class BadArgumentsError(CoordinatorError):
    """A malformed path or request (the caller's fault)."""


class SessionExpiredError(CoordinatorError):
    """The session expired while the request was pending or before it was sent."""


class ConnectionLossError(CoordinatorError):
    """The connection dropped; the request may or may not have been applied."""


class CoordinatorClosedError(CoordinatorError):
    """The coordinator was closed by its owner."""


@dataclass(frozen=True, slots=True)
class NodeStat:
    """A znode's metadata (ZooKeeper's ``Stat``).

    Attributes:
        czxid: zxid of the create; for ``/brokers/ids/<id>`` this is the broker epoch (KIP-380).
        mzxid: zxid of the last data change.
        pzxid: zxid of the last child change.
        version: number of data changes.
        cversion: number of child changes.
        ephemeral_owner: session id owning an ephemeral node, 0 for a persistent one.
        data_length: bytes of data.
        num_children: number of children.
    """

    czxid: int
    mzxid: int
    pzxid: int
    version: int
    cversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int

    def __init__(  # noqa: PLR0917 (the generated constructor's signature)
        self, czxid: int, mzxid: int, pzxid: int, version: int, cversion: int,
        ephemeral_owner: int, data_length: int, num_children: int
    ) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "czxid", czxid)
        object.__setattr__(self, "mzxid", mzxid)
        object.__setattr__(self, "pzxid", pzxid)
        object.__setattr__(self, "version", version)
        object.__setattr__(self, "cversion", cversion)
        object.__setattr__(self, "ephemeral_owner", ephemeral_owner)
        object.__setattr__(self, "data_length", data_length)
        object.__setattr__(self, "num_children", num_children)


@dataclass(frozen=True, slots=True)
class CheckOp:
    """``multi`` op: fail unless ``path`` is at ``version``."""

    path: str
    version: int


@dataclass(frozen=True, slots=True)
class CreateOp:
    """``multi`` op: create ``path`` with ``data``."""

    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True, slots=True)
class SetOp:
    """``multi`` op: set ``path``'s data, conditional on ``version`` unless -1."""

    path: str
    data: bytes
    version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class DeleteOp:
    """``multi`` op: delete ``path``, conditional on ``version`` unless -1."""

    path: str
    version: int = ANY_VERSION


Op = CheckOp | CreateOp | SetOp | DeleteOp


@dataclass(frozen=True, slots=True)
class CheckResult:
    """A ``CheckOp`` that passed."""


@dataclass(frozen=True, slots=True)
class CreateResult:
    """A ``CreateOp`` that succeeded; ``path`` carries the sequential suffix if any."""

    path: str


@dataclass(frozen=True, slots=True)
class SetResult:
    """A ``SetOp`` that succeeded, with the node's new stat."""

    stat: NodeStat


@dataclass(frozen=True, slots=True)
class DeleteResult:
    """A ``DeleteOp`` that succeeded."""


OpResult = CheckResult | CreateResult | SetResult | DeleteResult | CoordinatorError


def multi_succeeded(results: Sequence[OpResult]) -> bool:
    """True when no result of a ``multi`` is an error."""
    return not any(isinstance(result, CoordinatorError) for result in results)


def multi_error(results: Sequence[OpResult]) -> tuple[int, CoordinatorError] | None:
    """The index and error of the op that failed a ``multi`` (not a RolledBackError), if any."""
    for index, result in enumerate(results):
        if isinstance(result, CoordinatorError) and not isinstance(result, RolledBackError):
            return index, result
    return None


class WatchKind(enum.Enum):
    """Which kind of watch fired."""

    DATA = "data"  #: set by ``get``/``exists``
    CHILD = "child"  #: set by ``children``


class WatchEventType(enum.Enum):
    """What happened to the watched node (ZooKeeper's EventType)."""

    CREATED = "created"
    DELETED = "deleted"
    CHANGED = "changed"
    CHILD = "child"


class SessionState(enum.Enum):
    """Session state changes reported as :class:`SessionEvent`."""

    CONNECTED = "connected"
    SUSPENDED = "suspended"
    EXPIRED = "expired"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """A one-shot watch fired."""

    type: WatchEventType
    path: str
    kind: WatchKind


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """The session changed state."""

    state: SessionState


CoordinatorEvent = WatchEvent | SessionEvent


def validate_path(path: str) -> None:
    """Check ``path`` is a ZooKeeper path.

    Raises:
        BadArgumentsError: not absolute, empty component, trailing slash, or a NUL.
    """
    if not isinstance(path, str) or not path.startswith("/"):
        raise BadArgumentsError(f"path must be absolute: {path!r}")
    if path == "/":
        return
    if path.endswith("/") or "//" in path or "\x00" in path:
        raise BadArgumentsError(f"malformed path: {path!r}")
    for part in path.split("/")[1:]:
        if part in (".", ".."):
            raise BadArgumentsError(f"relative component in path: {path!r}")


def parent_path(path: str) -> str:
    """``/a/b`` → ``/a``; ``/a`` → ``/``."""
    head = path.rsplit("/", 1)[0]
    return head or "/"


def join_path(parent: str, child: str) -> str:
    """``/a`` + ``b`` → ``/a/b``; ``/`` + ``b`` → ``/b``."""
    return f"{parent.rstrip('/')}/{child}"


class Coordinator(Protocol):
    """ZooKeeper as seen by the controller and the brokers (see the module docstring).

    Every method may raise :class:`SessionExpiredError`, :class:`ConnectionLossError` or
    :class:`CoordinatorClosedError` besides the errors it names.
    """

    @property
    def session_id(self) -> int:
        """The current session's id (changes after an expiry); 0 before connecting."""

    async def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequential: bool = False
    ) -> str:
        """Create a node.

        Returns:
            The created path (with the sequential suffix).

        Raises:
            NodeExistsError, NoNodeError (parent missing), NoChildrenForEphemeralsError,
            BadArgumentsError.
        """

    async def get(self, path: str, *, watch: bool = False) -> tuple[bytes, NodeStat]:
        """Read a node's data and stat, optionally arming a data watch.

        Raises:
            NoNodeError (no watch is armed then).
        """

    async def set(self, path: str, data: bytes, *, version: int = ANY_VERSION) -> NodeStat:
        """Write a node's data, conditional on ``version`` unless -1.

        Raises:
            NoNodeError, BadVersionError.
        """

    async def delete(self, path: str, *, version: int = ANY_VERSION) -> None:
        """Delete a node, conditional on ``version`` unless -1.

        Raises:
            NoNodeError, BadVersionError, NotEmptyError.
        """

    async def exists(self, path: str, *, watch: bool = False) -> NodeStat | None:
        """The node's stat or ``None``; a watch is armed in both cases when asked."""

    async def children(self, path: str, *, watch: bool = False) -> list[str]:
        """The node's children, sorted by name, optionally arming a child watch.

        Raises:
            NoNodeError (no watch is armed then).
        """

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        """Apply ``ops`` atomically; per-op results (errors on failure, see the module docstring).

        Raises:
            BadArgumentsError: an empty or malformed op list.
        """

    async def next_event(self) -> CoordinatorEvent:
        """Wait for the next watch or session event."""

    def next_event_nowait(self) -> CoordinatorEvent | None:
        """The next queued event, or ``None`` when none is queued."""

    async def close(self) -> None:
        """End the session (its ephemeral nodes vanish) and report CLOSED; idempotent."""
