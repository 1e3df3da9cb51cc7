"""The reassignment tool's log-dir part (KIP-113 §2): requests to send and move states.

``reassign --execute`` sends AlterReplicaLogDirs for every replica whose target dir is not
``"any"``; ``--verify`` classifies each such replica from DescribeLogDirs, with the states of
Kafka's ``ReassignPartitionsCommand.findLogDirMoveStates``:

* MISSING_REPLICA — the broker hosts no replica of the partition in any live dir;
* MISSING_LOG_DIR — the target is not one of the broker's log dirs;
* ACTIVE — a temporary (``.move``) copy exists; ``offset_lag`` tells how far it trails;
* CANCELLED — no temporary copy and the replica is in another dir than the target;
* COMPLETED — the replica is in the target dir.

This module is a sans-IO core.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

__sans_io__ = True

ANY_LOG_DIR = "any"


class LogDirMoveState(enum.Enum):
    """Where a replica's log-dir move stands (the tool's view)."""

    MISSING_REPLICA = "MISSING_REPLICA"
    MISSING_LOG_DIR = "MISSING_LOG_DIR"
    ACTIVE = "ACTIVE"
    CANCELLED = "CANCELLED"
    COMPLETED = "COMPLETED"


@dataclass(frozen=True, slots=True)
class ReplicaMove:
    """One replica to move: a partition on a broker, and its target dir."""

    topic: str
    partition: int
    broker_id: int
    target_log_dir: str


@dataclass(frozen=True, slots=True)
class ReplicaMoveStatus:
    """A replica's move state and what it is based on."""

    move: ReplicaMove
    state: LogDirMoveState
    current_log_dir: str | None = None
    future_log_dir: str | None = None
    offset_lag: int = 0

    def describe(self) -> str:
        """One human line, in the words of Kafka's tool."""
        move = self.move
        name = f"{move.topic}-{move.partition}"
        if self.state is LogDirMoveState.MISSING_REPLICA:
            return (f"Partition {name} is not found in any live log dir on broker "
                    f"{move.broker_id}. There is likely an offline log directory on the broker.")
        if self.state is LogDirMoveState.MISSING_LOG_DIR:
            return (f"Partition {name} on broker {move.broker_id} cannot move to "
                    f"{move.target_log_dir}: it is not a log dir of the broker.")
        if self.state is LogDirMoveState.COMPLETED:
            return (f"Reassignment of replica {name}-{move.broker_id} to log dir "
                    f"{move.target_log_dir} completed successfully.")
        if self.state is LogDirMoveState.CANCELLED:
            return (f"Partition {name} on broker {move.broker_id} is not being moved from log "
                    f"dir {self.current_log_dir} to {move.target_log_dir}.")
        if self.future_log_dir == move.target_log_dir:
            return (f"Reassignment of replica {name}-{move.broker_id} is still in progress "
                    f"(from {self.current_log_dir} to {move.target_log_dir}, offset lag "
                    f"{self.offset_lag}).")
        return (f"Partition {name} on broker {move.broker_id} is being moved to log dir "
                f"{self.future_log_dir} instead of {move.target_log_dir}.")


class ReassignmentTargetLike(Protocol):
    """A partition's target as decoded from the reassignment JSON."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def replicas(self) -> tuple[int, ...]: ...
    @property
    def log_dirs(self) -> Sequence[str] | None: ...


class ReassignmentFileError(ValueError):
    """The reassignment JSON names a log dir that is neither ``any`` nor absolute."""


def replica_moves(targets: Iterable[ReassignmentTargetLike]) -> list[ReplicaMove]:
    """The replicas with an explicit target dir, from decoded reassignment targets.

    Args:
        targets: ``ReassignmentTarget``-like objects (topic, partition, replicas, log_dirs).

    Raises:
        ReassignmentFileError: a dir that is neither ``"any"`` nor an absolute path.
    """
    moves: list[ReplicaMove] = []
    for target in targets:
        if target.log_dirs is None:
            continue
        topic, partition = target.topic, target.partition
        for broker_id, log_dir in zip(target.replicas, target.log_dirs, strict=True):
            if log_dir == ANY_LOG_DIR:
                continue
            if not log_dir.startswith("/"):
                raise ReassignmentFileError(
                    f"{topic}-{partition}: log dir {log_dir!r} must be \"any\" or an absolute path"
                )
            moves.append(ReplicaMove(topic, partition, broker_id, log_dir))
    return moves


def move_state(
    move: ReplicaMove,
    broker_log_dirs: Iterable[str],
    current_log_dir: str | None,
    future_log_dir: str | None,
    offset_lag: int,
) -> ReplicaMoveStatus:
    """Classify one replica's move (Kafka's ``findLogDirMoveStates``).

    Args:
        move: the replica and its target.
        broker_log_dirs: the dirs the broker reported.
        current_log_dir: the live dir holding the replica (None: not found).
        future_log_dir: the dir holding its temporary copy (None: none).
        offset_lag: the temporary copy's lag.
    """
    if current_log_dir is None:
        return ReplicaMoveStatus(move, LogDirMoveState.MISSING_REPLICA)
    if move.target_log_dir not in set(broker_log_dirs):
        return ReplicaMoveStatus(move, LogDirMoveState.MISSING_LOG_DIR, current_log_dir)
    if future_log_dir is None:
        state = (LogDirMoveState.COMPLETED if current_log_dir == move.target_log_dir
                 else LogDirMoveState.CANCELLED)
        return ReplicaMoveStatus(move, state, current_log_dir)
    return ReplicaMoveStatus(
        move, LogDirMoveState.ACTIVE, current_log_dir, future_log_dir, offset_lag
    )


def all_completed(statuses: Mapping[ReplicaMove, ReplicaMoveStatus]) -> bool:
    """Whether every move is COMPLETED."""
    return all(s.state is LogDirMoveState.COMPLETED for s in statuses.values())
