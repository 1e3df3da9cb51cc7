"""The replica-move machine (KIP-113 §1): states, events, the transition table and ``step``.

Everything that decides how a replica moves between the log dirs of one broker lives here: the
transitions, which request is a new move, a redirect or a cancel (:func:`decide_request`), which
copy result is CAUGHT_UP (:func:`copy_completion`), and, for every effect with one, the event
that reports its completion (its ``done`` field, h11's rule: the machine, not the caller, knows
what comes next). The storage shell (:class:`impl.storage.manager.LogManager`) carries out each
effect and, when it succeeded, steps :func:`completion` of it: it is a loop, not a sequence.
``spec/replica_move.md`` is the prose form of this file and ``model/replica_move.py`` the
executable model; the names agree (``spec/VOCABULARY.md``).

The swap order is the KIP's, made crash-safe (DESIGN.md): the destination ``tp.move`` is made
durable (data, index, epoch checkpoint, dir fsync) *before* the source ``tp`` is renamed to
``tp.delete``; only then does ``tp.move`` become ``tp``. A crash between any two effects leaves
disk states that :mod:`impl.storage.move_recovery` resolves without an operator.

This module is a sans-IO core.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from impl.storage.errors import ErrorCode
from impl.storage.names import TopicPartition
from impl.trace import TraceEvent

__sans_io__ = True

MACHINE = "replica_move"


class MoveState(enum.Enum):
    """Where one replica's move is (per tp on this broker)."""

    NONE = "NONE"  #: KIP-113 §1: no move requested
    PENDING_PLACEMENT = "PENDING_PLACEMENT"  #: KIP-113 §1 notes: dir remembered, replica absent
    COPYING = "COPYING"  #: KIP-113 §1.2 step 3: copying source to ``tp.move``
    CAUGHT_UP = "CAUGHT_UP"  #: KIP-113 §1.2 step 4: dest LEO == source LEO seen without the lock
    SWAPPING = "SWAPPING"  #: KIP-113 §1.2 steps 5-9: under the partition lock
    DONE = "DONE"  #: KIP-113 §1.2 step 9: the destination is the live log
    CANCELLED = "CANCELLED"  #: KIP-113 §1 notes: "any" (or the current dir) cancelled it
    FAILED = "FAILED"  #: KIP-113 §1.2 notes: source or destination dir went offline


class MoveEvent(enum.Enum):
    """What can happen to a move."""

    REQUESTED = "REQUESTED"  #: KIP-113 §1.1: AlterReplicaLogDirs names another dir
    PLACEMENT_RECORDED = "PLACEMENT_RECORDED"  #: KIP-113 §1.1 notes: replica not hosted yet
    REPLICA_CREATED = "REPLICA_CREATED"  #: KIP-113 §1.1 notes: created in the remembered dir
    CHUNK_COPIED = "CHUNK_COPIED"  #: KIP-113 §1.2 step 3: a chunk reached ``tp.move``
    SOURCE_APPENDED = "SOURCE_APPENDED"  #: KIP-113 §1.2 step 5: the source grew meanwhile
    SOURCE_TRUNCATED = "SOURCE_TRUNCATED"  #: a follower truncation cut the source and ``tp.move``
    CAUGHT_UP = "CAUGHT_UP"  #: KIP-113 §1.2 step 4: offsets equal (offsets only, KAFKA-8002)
    LOCK_ACQUIRED = "LOCK_ACQUIRED"  #: KIP-113 §1.2 step 4: partition lock taken
    FINAL_CATCH_UP = "FINAL_CATCH_UP"  #: KIP-113 §1.2 step 5: the rest copied under the lock
    DEST_DURABLE = "DEST_DURABLE"  #: DESIGN.md: ``tp.move`` data and dir fsynced
    SOURCE_RENAMED = "SOURCE_RENAMED"  #: KIP-113 §1.2 step 6: ``tp`` -> ``tp.delete``
    DEST_RENAMED = "DEST_RENAMED"  #: KIP-113 §1.2 step 7: ``tp.move`` -> ``tp``
    LOG_SWAPPED = "LOG_SWAPPED"  #: KIP-113 §1.2 steps 8-9: in-memory swap, lock released
    DELETE_COMPLETED = "DELETE_COMPLETED"  #: KIP-113 §1.2 step 6: ``tp.delete`` removed
    CANCEL_REQUESTED = "CANCEL_REQUESTED"  #: KIP-113 §1.1 notes: "any" or the current dir
    REDIRECTED = "REDIRECTED"  #: another destination while moving (Kafka: old future deleted)
    DIR_FAILED = "DIR_FAILED"  #: KIP-113 §1.2 notes / KIP-112: a dir of the move failed
    CRASHED = "CRASHED"  #: KIP-113 §3: process crash; memory lost, disk decides


S, E = MoveState, MoveEvent
_ACTIVE = (S.COPYING, S.CAUGHT_UP)
_IDLE = (S.NONE, S.DONE, S.CANCELLED, S.FAILED)

#: The transition table: (state, event) -> next state. A missing entry is an invalid transition.
TRANSITIONS: dict[tuple[MoveState, MoveEvent], MoveState] = {
    **{(state, E.REQUESTED): S.COPYING for state in _IDLE},
    **{
        (state, E.PLACEMENT_RECORDED): S.PENDING_PLACEMENT
        for state in (*_IDLE, S.PENDING_PLACEMENT)
    },
    (S.PENDING_PLACEMENT, E.REPLICA_CREATED): S.DONE,
    (S.PENDING_PLACEMENT, E.CANCEL_REQUESTED): S.CANCELLED,
    (S.COPYING, E.CHUNK_COPIED): S.COPYING,
    (S.COPYING, E.SOURCE_APPENDED): S.COPYING,
    (S.COPYING, E.CAUGHT_UP): S.CAUGHT_UP,
    (S.CAUGHT_UP, E.SOURCE_APPENDED): S.CAUGHT_UP,
    (S.COPYING, E.SOURCE_TRUNCATED): S.COPYING,
    (S.CAUGHT_UP, E.SOURCE_TRUNCATED): S.CAUGHT_UP,
    (S.CAUGHT_UP, E.LOCK_ACQUIRED): S.SWAPPING,
    (S.SWAPPING, E.FINAL_CATCH_UP): S.SWAPPING,
    (S.SWAPPING, E.DEST_DURABLE): S.SWAPPING,
    (S.SWAPPING, E.SOURCE_RENAMED): S.SWAPPING,
    (S.SWAPPING, E.DEST_RENAMED): S.SWAPPING,
    (S.SWAPPING, E.LOG_SWAPPED): S.DONE,
    (S.DONE, E.DELETE_COMPLETED): S.DONE,
    **{(state, E.CANCEL_REQUESTED): S.CANCELLED for state in _ACTIVE},
    **{(state, E.REDIRECTED): S.COPYING for state in _ACTIVE},
    **{(state, E.DIR_FAILED): S.FAILED for state in (*_ACTIVE, S.SWAPPING)},
    **{(state, E.CRASHED): S.NONE for state in MoveState},
}


class InvalidMoveTransition(Exception):  # noqa: N818 (the one error type of the table)
    """The event is not enabled in the state (missing table entry or failed guard)."""


# --- effects -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordPreferredDir:
    """Remember ``log_dir`` to create the replica there later (KIP-113 §1.1 notes)."""

    log_dir: str


@dataclass(frozen=True, slots=True)
class ForgetPreferredDir:
    """Drop the remembered dir."""


@dataclass(frozen=True, slots=True)
class CreateMoveDir:
    """``mkdir dest/tp.move`` with its first segment, fsync both dirs."""

    dest_dir: str


@dataclass(frozen=True, slots=True)
class AbandonMoveDir:
    """Rename ``dest/tp.move`` to ``dest/tp.delete`` (fsync dir), then delete it asynchronously.

    The rename is durable before any new ``.move`` is created, so a crash never leaves two.
    """

    dest_dir: str


@dataclass(frozen=True, slots=True)
class CopyChunk:
    """Copy up to one chunk from the source to ``tp.move`` (throttled, zero-copy)."""


@dataclass(frozen=True, slots=True)
class AcquireLock:
    """Take the partition lock (appends and truncation wait); a mover reports ``done``."""

    done: MoveEvent = MoveEvent.LOCK_ACQUIRED


@dataclass(frozen=True, slots=True)
class CopyRemaining:
    """Copy whatever the source gained since the unlocked check, and the epoch cache; report
    ``done`` with both LEOs."""

    done: MoveEvent = MoveEvent.FINAL_CATCH_UP


@dataclass(frozen=True, slots=True)
class SyncDest:
    """Fsync ``tp.move``'s segments, index, leader-epoch checkpoint, the dir and its parent."""

    done: MoveEvent = MoveEvent.DEST_DURABLE


@dataclass(frozen=True, slots=True)
class RenameSourceToDelete:
    """``source/tp`` -> ``source/tp.delete``, fsync the source dir (KIP-113 step 6)."""

    source_dir: str
    done: MoveEvent = MoveEvent.SOURCE_RENAMED


@dataclass(frozen=True, slots=True)
class RenameMoveToLive:
    """``dest/tp.move`` -> ``dest/tp``, fsync the dest dir (KIP-113 step 7)."""

    dest_dir: str
    done: MoveEvent = MoveEvent.DEST_RENAMED


@dataclass(frozen=True, slots=True)
class SwapLog:
    """Make the destination the live log: HW, epoch cache, per-dir checkpoints move with it
    (KAFKA-9263, KAFKA-8362, KAFKA-15608)."""


@dataclass(frozen=True, slots=True)
class ReleaseLock:
    """Release the partition lock (``done``: LOG_SWAPPED after a swap; nothing after an
    aborted one)."""

    done: MoveEvent | None = None


@dataclass(frozen=True, slots=True)
class DeleteAsync:
    """Remove ``log_dir/tp.delete`` in the background; report ``done`` once it is gone."""

    log_dir: str
    done: MoveEvent = MoveEvent.DELETE_COMPLETED


@dataclass(frozen=True, slots=True)
class RestoreSource:
    """Rename ``source/tp.delete`` back to ``source/tp`` (dest failed mid-swap, source intact)."""

    source_dir: str


@dataclass(frozen=True, slots=True)
class DropMove:
    """Forget the destination log in memory (its dir failed: leave it untouched on disk)."""


@dataclass(frozen=True, slots=True)
class MarkPartitionOffline:
    """The live copy is (or may be) on a failed dir: serve nothing for this partition."""


MoveEffect = (
    RecordPreferredDir
    | ForgetPreferredDir
    | CreateMoveDir
    | AbandonMoveDir
    | CopyChunk
    | AcquireLock
    | CopyRemaining
    | SyncDest
    | RenameSourceToDelete
    | RenameMoveToLive
    | SwapLog
    | ReleaseLock
    | DeleteAsync
    | RestoreSource
    | DropMove
    | MarkPartitionOffline
)


# --- state and step ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Move:
    """One replica's move as the core sees it.

    Attributes:
        tp: the partition.
        state: the machine state.
        source_dir: the log dir of the live ``tp`` (``None`` when not hosted).
        dest_dir: the destination (or the remembered dir while PENDING_PLACEMENT).
        source_leo: last source LEO reported to the core.
        dest_leo: last ``tp.move`` LEO reported.
        lock_held: the mover holds the partition lock.
        dest_durable: ``tp.move`` is fsynced at ``dest_leo == source_leo`` under the lock.
        source_renamed: ``tp.delete`` exists durably on the source dir.
        dest_renamed: ``tp.move`` became ``tp`` durably.
    """

    tp: TopicPartition
    state: MoveState = MoveState.NONE
    source_dir: str | None = None
    dest_dir: str | None = None
    source_leo: int = 0
    dest_leo: int = 0
    lock_held: bool = False
    dest_durable: bool = False
    source_renamed: bool = False
    dest_renamed: bool = False

    def __init__(  # noqa: PLR0917 (the generated constructor's signature)
        self, tp: TopicPartition, state: MoveState = MoveState.NONE,
        source_dir: str | None = None, dest_dir: str | None = None,
        source_leo: int = 0, dest_leo: int = 0, lock_held: bool = False,
        dest_durable: bool = False, source_renamed: bool = False,
        dest_renamed: bool = False
    ) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "tp", tp)
        object.__setattr__(self, "state", state)
        object.__setattr__(self, "source_dir", source_dir)
        object.__setattr__(self, "dest_dir", dest_dir)
        object.__setattr__(self, "source_leo", source_leo)
        object.__setattr__(self, "dest_leo", dest_leo)
        object.__setattr__(self, "lock_held", lock_held)
        object.__setattr__(self, "dest_durable", dest_durable)
        object.__setattr__(self, "source_renamed", source_renamed)
        object.__setattr__(self, "dest_renamed", dest_renamed)


@dataclass(frozen=True, slots=True)
class MoveInput:
    """An event with its data (``log_dir`` for REQUESTED/REDIRECTED/PLACEMENT/DIR_FAILED)."""

    event: MoveEvent
    log_dir: str | None = None
    source_leo: int | None = None
    dest_leo: int | None = None

    def __init__(
        self, event: MoveEvent, log_dir: str | None = None, source_leo: int | None = None,
        dest_leo: int | None = None
    ) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "event", event)
        object.__setattr__(self, "log_dir", log_dir)
        object.__setattr__(self, "source_leo", source_leo)
        object.__setattr__(self, "dest_leo", dest_leo)


@dataclass(frozen=True, slots=True)
class Transition:
    """What ``step`` returns: the new move, the effects to carry out in order, the trace."""

    move: Move
    effects: tuple[MoveEffect, ...]
    trace: TraceEvent

    def __init__(self, move: Move, effects: tuple[MoveEffect, ...], trace: TraceEvent) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "move", move)
        object.__setattr__(self, "effects", effects)
        object.__setattr__(self, "trace", trace)


def _require(condition: bool, move: Move, event: MoveInput, why: str) -> None:
    if not condition:
        raise InvalidMoveTransition(f"{move.tp}: {event.event.name} in {move.state.name}: {why}")


def _offsets(move: Move, event: MoveInput) -> Move:
    return replace(
        move,
        source_leo=move.source_leo if event.source_leo is None else event.source_leo,
        dest_leo=move.dest_leo if event.dest_leo is None else event.dest_leo,
    )


def step(move: Move, event: MoveInput) -> Transition:
    """Apply ``event`` to ``move``.

    Raises:
        InvalidMoveTransition: the table has no entry for (state, event) or a guard fails.
    """
    key = (move.state, event.event)
    if key not in TRANSITIONS:
        raise InvalidMoveTransition(f"{move.tp}: no transition for {event.event.name} in "
                                    f"{move.state.name}")
    after = TRANSITIONS[key]
    new = _offsets(move, event)
    effects: tuple[MoveEffect, ...] = ()
    match event.event:
        case E.REQUESTED:
            _require(event.log_dir is not None, move, event, "no destination")
            _require(event.log_dir != move.source_dir, move, event, "destination is the source")
            new = Move(move.tp, after, move.source_dir, event.log_dir, new.source_leo, 0)
            effects = (CreateMoveDir(event.log_dir or ""), CopyChunk())
        case E.PLACEMENT_RECORDED:
            _require(event.log_dir is not None, move, event, "no dir")
            new = Move(move.tp, after, None, event.log_dir)
            effects = (RecordPreferredDir(event.log_dir or ""),)
        case E.REPLICA_CREATED:
            new = Move(move.tp, after, move.dest_dir, None)
            effects = (ForgetPreferredDir(),)
        case E.CHUNK_COPIED | E.SOURCE_APPENDED:
            effects = (CopyChunk(),) if after is S.COPYING else ()
        case E.SOURCE_TRUNCATED:
            _require(new.dest_leo <= new.source_leo, move, event, "tp.move not truncated along")
            effects = (CopyChunk(),) if after is S.COPYING else ()
        case E.CAUGHT_UP:
            _require(new.dest_leo == new.source_leo, move, event, "dest LEO != source LEO")
            effects = (AcquireLock(),)
        case E.LOCK_ACQUIRED:
            new = replace(new, lock_held=True)
            effects = (CopyRemaining(),)
        case E.FINAL_CATCH_UP:
            _require(new.lock_held, move, event, "lock not held")
            _require(not move.dest_durable, move, event, "destination already durable")
            _require(new.dest_leo == new.source_leo, move, event, "dest LEO != source LEO")
            effects = (SyncDest(),)
        case E.DEST_DURABLE:
            _require(new.lock_held and new.dest_leo == new.source_leo, move, event, "not caught up")
            _require(not move.dest_durable, move, event, "destination already durable")
            new = replace(new, dest_durable=True)
            effects = (RenameSourceToDelete(move.source_dir or ""),)
        case E.SOURCE_RENAMED:
            _require(move.dest_durable, move, event, "destination not durable")
            _require(not move.source_renamed, move, event, "source already renamed")
            new = replace(new, source_renamed=True)
            effects = (RenameMoveToLive(move.dest_dir or ""),)
        case E.DEST_RENAMED:
            _require(move.source_renamed, move, event, "source not renamed")
            _require(not move.dest_renamed, move, event, "destination already renamed")
            new = replace(new, dest_renamed=True)
            effects = (SwapLog(), ReleaseLock(done=E.LOG_SWAPPED))
        case E.LOG_SWAPPED:
            _require(move.dest_renamed, move, event, "destination not renamed")
            new = Move(move.tp, after, move.dest_dir, None, new.source_leo, new.dest_leo)
            effects = (DeleteAsync(move.source_dir or ""),)
        case E.DELETE_COMPLETED:
            effects = ()
        case E.CANCEL_REQUESTED:
            if move.state is S.PENDING_PLACEMENT:
                new = Move(move.tp, after)
                effects = (ForgetPreferredDir(),)
            else:
                new = Move(move.tp, after, move.source_dir, move.dest_dir, new.source_leo)
                effects = (AbandonMoveDir(move.dest_dir or ""),)
        case E.REDIRECTED:
            _require(event.log_dir not in (None, move.source_dir, move.dest_dir), move, event,
                     "redirect must name a third dir")
            new = Move(move.tp, after, move.source_dir, event.log_dir, new.source_leo, 0)
            effects = (
                AbandonMoveDir(move.dest_dir or ""),
                CreateMoveDir(event.log_dir or ""),
                CopyChunk(),
            )
        case E.DIR_FAILED:
            effects = _dir_failed_effects(move, event.log_dir)
            new = replace(new, lock_held=False)
        case E.CRASHED:
            new = Move(move.tp)
    new = replace(new, state=after)
    trace = TraceEvent.of(
        MACHINE,
        event.event.name,
        str(move.tp),
        move.state.name,
        after.name,
        source_dir=new.source_dir,
        dest_dir=new.dest_dir,
        source_leo=new.source_leo,
        dest_leo=new.dest_leo,
        dest_durable=new.dest_durable,
        source_renamed=new.source_renamed,
        dest_renamed=new.dest_renamed,
    )
    return Transition(new, effects, trace)


def _dir_failed_effects(move: Move, failed_dir: str | None) -> tuple[MoveEffect, ...]:
    """KIP-113 §1.2 notes and KIP-112: what a failed dir does to a move in progress.

    * destination failed before the source was renamed: drop the move, the source stays live;
    * destination failed after the source was renamed but before ``tp.move`` became ``tp``: the
      source (complete: it was renamed under the lock) is renamed back and stays live;
    * the previous destination of a redirect failed while its ``tp.move`` was being retired: as
      the destination (the new ``tp.move`` is not created: the old one may survive on the failed
      dir, and two would make the partition ambiguous at the next start);
    * source failed (any step), or the destination failed once it was live: partition offline,
      nothing on the good dir is touched (KIP-113 §3 rule 3 decides at the next start).
    """
    release: tuple[MoveEffect, ...] = (ReleaseLock(),) if move.lock_held else ()
    if failed_dir != move.source_dir and not move.dest_renamed:
        if move.source_renamed:
            return (DropMove(), RestoreSource(move.source_dir or ""), *release)
        return (DropMove(), *release)
    return (DropMove(), MarkPartitionOffline(), *release)


def request_error(
    *,
    requested_dir: str,
    configured_dirs: tuple[str, ...],
    offline_dirs: frozenset[str],
    hosted: bool,
    partition_offline: bool,
) -> ErrorCode | None:
    """Validate an AlterReplicaLogDirs entry before any transition (KIP-113 §1.1).

    Returns:
        the error to answer, or ``None`` to go on. ``"any"`` is always acceptable; any other
        string must be exactly one of the configured dirs (so ``..`` tricks are
        LOG_DIR_NOT_FOUND), an offline destination or an offline replica is
        KAFKA_STORAGE_ERROR.
    """
    if requested_dir == "any":
        return None
    if requested_dir not in configured_dirs:
        return ErrorCode.LOG_DIR_NOT_FOUND
    if requested_dir in offline_dirs or (hosted and partition_offline):
        return ErrorCode.KAFKA_STORAGE_ERROR
    return None


@dataclass(frozen=True, slots=True)
class RequestDecision:
    """What one AlterReplicaLogDirs entry does (see :func:`decide_request`).

    Attributes:
        input: the event to step first (``None``: nothing changes).
        error: the answer; ``None`` means "answer :func:`request_answer` of the outcome".
    """

    input: MoveInput | None
    error: ErrorCode | None


def decide_request(
    move: Move,
    requested_dir: str,
    *,
    configured_dirs: tuple[str, ...],
    offline_dirs: frozenset[str],
    current_dir: str | None,
    partition_offline: bool,
    source_leo: int,
) -> RequestDecision:
    """Decide an AlterReplicaLogDirs entry (KIP-113 §1.1): a new move, a redirect, a cancel, a
    placement for a replica not hosted yet, or nothing.

    * invalid or offline dirs: :func:`request_error`;
    * a replica not hosted (``current_dir`` None): its dir is remembered (``"any"`` forgets it),
      REPLICA_NOT_AVAILABLE; an offline replica is KAFKA_STORAGE_ERROR;
    * ``"any"`` or the current dir while moving: cancelled; otherwise nothing to do;
    * the destination being moved to: nothing to do; another dir while moving: redirected;
    * else a new move.

    A request that would create a ``tp.move`` (a new move or a redirect) while *any* log dir is
    offline is KAFKA_STORAGE_ERROR and changes nothing (Kafka: "a future log cannot be created
    while any dir is offline"; model variant ``move_while_dir_offline``): an offline dir may hold
    a ``tp.move`` nobody can abandon.

    Args:
        move: the replica's move as it stands (never SWAPPING: a swap does not yield).
        requested_dir: the dir asked for, or ``"any"``.
        configured_dirs: ``log.dirs``.
        offline_dirs: the dirs offline now.
        current_dir: the live replica's dir (``None``: not hosted).
        partition_offline: the replica is offline (on a failed dir).
        source_leo: the live replica's LEO.
    """
    error = request_error(requested_dir=requested_dir, configured_dirs=configured_dirs,
                          offline_dirs=offline_dirs, hosted=current_dir is not None,
                          partition_offline=partition_offline)
    if error is not None:
        return RequestDecision(None, error)
    if current_dir is None:
        if partition_offline:
            return RequestDecision(None, ErrorCode.KAFKA_STORAGE_ERROR)
        if requested_dir == "any":
            cancel = (MoveInput(E.CANCEL_REQUESTED) if move.state is S.PENDING_PLACEMENT
                      else None)
            return RequestDecision(cancel, ErrorCode.REPLICA_NOT_AVAILABLE)
        return RequestDecision(MoveInput(E.PLACEMENT_RECORDED, requested_dir),
                               ErrorCode.REPLICA_NOT_AVAILABLE)
    assert move.state is not S.SWAPPING, "swaps never yield"
    moving = move.state in _ACTIVE
    cancels = requested_dir in ("any", current_dir)
    if not cancels and not (moving and requested_dir == move.dest_dir) and offline_dirs:
        return RequestDecision(None, ErrorCode.KAFKA_STORAGE_ERROR)
    if moving:
        if cancels:
            return RequestDecision(MoveInput(E.CANCEL_REQUESTED), None)
        if requested_dir != move.dest_dir:
            return RequestDecision(MoveInput(E.REDIRECTED, requested_dir), None)
        return RequestDecision(None, None)
    if cancels:
        return RequestDecision(None, None)
    return RequestDecision(MoveInput(E.REQUESTED, requested_dir, source_leo=source_leo), None)


def request_answer(requested_dir: str, offline_before: frozenset[str],
                   offline_after: frozenset[str]) -> ErrorCode:
    """The answer to an accepted request once its step ran: KAFKA_STORAGE_ERROR when the
    destination is offline or the request's own I/O failed a dir (Kafka's
    KafkaStorageException: a cancel or a redirect whose old ``tp.move`` could not be retired is
    not acknowledged), else NONE."""
    if requested_dir != "any" and requested_dir in offline_after:
        return ErrorCode.KAFKA_STORAGE_ERROR
    if offline_after - offline_before:
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.NONE


def copy_completion(source_leo: int, dest_leo: int) -> MoveInput:
    """What a chunk copy reports: CAUGHT_UP when ``tp.move`` reached the source's LEO (offsets
    only, KAFKA-8002), else CHUNK_COPIED."""
    event = E.CAUGHT_UP if source_leo == dest_leo else E.CHUNK_COPIED
    return MoveInput(event, source_leo=source_leo, dest_leo=dest_leo)


def completion(effect: MoveEffect, *, source_leo: int | None = None,
               dest_leo: int | None = None) -> MoveInput | None:
    """The input reporting that ``effect`` was carried out (``None``: it has none). A runtime
    reports it at once after carrying the effect out, except for :class:`AcquireLock` (the mover
    reports it once it holds the lock) and :class:`DeleteAsync` (the background deleter, once
    ``tp.delete`` is gone)."""
    done = getattr(effect, "done", None)
    if done is None:
        return None
    assert isinstance(done, MoveEvent)
    return MoveInput(done, source_leo=source_leo, dest_leo=dest_leo)
