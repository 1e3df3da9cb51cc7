from __future__ import annotations

import pytest

from impl.broker.log_dir_moves import (
    LogDirMoveState,
    ReassignmentFileError,
    ReplicaMove,
    move_state,
    replica_moves,
)
from impl.controller.znodes import decode_reassignment

MOVE = ReplicaMove("t", 0, 1, "/b")
DIRS = ["/a", "/b"]


def test_moves_skip_any_and_reject_relative_dirs() -> None:
    targets = decode_reassignment(
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],'
        b'"log_dirs":["/b","any"]},{"topic":"u","partition":1,"replicas":[3]}]}'
    )
    assert replica_moves(targets) == [MOVE]
    bad = decode_reassignment(
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1],'
        b'"log_dirs":["b"]}]}'
    )
    with pytest.raises(ReassignmentFileError):
        replica_moves(bad)


@pytest.mark.parametrize(
    ("current", "future", "state"),
    [
        (None, None, LogDirMoveState.MISSING_REPLICA),
        ("/b", None, LogDirMoveState.COMPLETED),
        ("/a", None, LogDirMoveState.CANCELLED),
        ("/a", "/b", LogDirMoveState.ACTIVE),
    ],
)
def test_move_states(current: str | None, future: str | None, state: LogDirMoveState) -> None:
    status = move_state(MOVE, DIRS, current, future, 7)
    assert status.state is state
    assert str(MOVE.broker_id) in status.describe()


def test_target_that_is_not_a_dir_of_the_broker() -> None:
    status = move_state(ReplicaMove("t", 0, 1, "/c"), DIRS, "/a", None, 0)
    assert status.state is LogDirMoveState.MISSING_LOG_DIR
    active = move_state(MOVE, DIRS, "/a", "/b", 42)
    assert "offset lag 42" in active.describe()
