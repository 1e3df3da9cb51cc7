"""The log-dir failure machine (KIP-18 / KIP-112): a dir goes ONLINE -> OFFLINE once.

Any ``OSError`` attributable to a dir, or a dir unreadable at startup, takes it offline until the
broker restarts. Every replica on it (live or ``.move``) goes offline with it; a move whose
destination is on it is dropped, a move whose source is on it leaves its partition offline (both
in :mod:`impl.storage.replica_move`); the broker is told once, through a callback, so it can
notify the controller (``/log_dir_event_notification``). A replica lost with its dir is remembered
so that it is never recreated empty on a good dir unless the caller says it is new (``isNew``,
KAFKA-16234, KAFKA-10314).

This module is a sans-IO core.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from impl.trace import TraceEvent

__sans_io__ = True

MACHINE = "log_dir"


class LogDirState(enum.Enum):
    """A log dir's state."""

    ONLINE = "ONLINE"  #: KIP-112: serving
    OFFLINE = "OFFLINE"  #: KIP-112: failed; nothing on it is read or written until restart


class LogDirEvent(enum.Enum):
    """What happens to a log dir."""

    IO_ERROR = "IO_ERROR"  #: KIP-18 "IO Errors": an OSError on the dir at runtime
    UNREADABLE_AT_STARTUP = "UNREADABLE_AT_STARTUP"  #: KIP-112: unreadable when loading
    CONTROLLER_NOTIFIED = "CONTROLLER_NOTIFIED"  #: KIP-112: the broker told the controller


class ReplicaStorageState(enum.Enum):
    """Whether a replica's storage can be used."""

    ONLINE = "ONLINE"  #: KIP-112: its dir is online
    OFFLINE = "OFFLINE"  #: KIP-112: its dir failed (or a move left it without a safe copy)


#: (state, event) -> next state
TRANSITIONS: dict[tuple[LogDirState, LogDirEvent], LogDirState] = {
    (LogDirState.ONLINE, LogDirEvent.IO_ERROR): LogDirState.OFFLINE,
    (LogDirState.OFFLINE, LogDirEvent.IO_ERROR): LogDirState.OFFLINE,
    (LogDirState.ONLINE, LogDirEvent.UNREADABLE_AT_STARTUP): LogDirState.OFFLINE,
    (LogDirState.OFFLINE, LogDirEvent.CONTROLLER_NOTIFIED): LogDirState.OFFLINE,
}


class InvalidLogDirTransition(Exception):  # noqa: N818 (the one error type of the table)
    """The event is not enabled in the state."""


@dataclass(frozen=True, slots=True)
class OfflineReplicas:
    """Mark these replicas offline and remember them as lost (no empty recreation)."""

    replicas: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NotifyBroker:
    """Call the broker's dir-failure callback once for this dir."""

    log_dir: str


LogDirEffect = OfflineReplicas | NotifyBroker


@dataclass(frozen=True, slots=True)
class LogDirTransition:
    """The new state, effects in order, and the trace event."""

    state: LogDirState
    effects: tuple[LogDirEffect, ...]
    trace: TraceEvent


def step(
    log_dir: str, state: LogDirState, event: LogDirEvent, replicas_on_dir: tuple[str, ...]
) -> LogDirTransition:
    """Apply ``event`` to the dir in ``state``; ``replicas_on_dir`` are its replicas' names.

    The first failure (runtime or startup) takes the dir offline, offlines its replicas and
    notifies the broker; later errors on an offline dir change nothing (each dir is reported
    once, like Kafka's ``LogDirFailureChannel``).

    Raises:
        InvalidLogDirTransition: no entry in the table.
    """
    key = (state, event)
    if key not in TRANSITIONS:
        raise InvalidLogDirTransition(f"{log_dir}: {event.name} in {state.name}")
    after = TRANSITIONS[key]
    effects: tuple[LogDirEffect, ...] = ()
    if state is LogDirState.ONLINE and after is LogDirState.OFFLINE:
        effects = (OfflineReplicas(tuple(sorted(replicas_on_dir))), NotifyBroker(log_dir))
    trace = TraceEvent.of(
        MACHINE, event.name, f"dir:{log_dir}", state.name, after.name,
        replicas=tuple(sorted(replicas_on_dir)) if effects else (),
    )
    return LogDirTransition(after, effects, trace)
