"""Cancelling a started reassignment (KIP-455) in the controller core: the partition's entry
leaves ``/admin/reassign_partitions``; the controller reverts to the original replicas (the
revert is its target, written back into the node until done), stops and deletes the adding
replicas, and clears adding/removing in the topic znode. A cancel before the start is just
dropped; a started reassignment a new controller finds without its entry is reverted too."""

from __future__ import annotations

from impl.controller.controller import (
    ClusterSnapshot,
    Controller,
    ControllerConfig,
    ControllerEffect,
    Elected,
    ReassignmentRead,
    SendRequest,
    WriteCompleted,
    ZkWrite,
)
from impl.controller.coordinator import (
    CheckOp,
    CheckResult,
    CreateResult,
    DeleteOp,
    DeleteResult,
    NodeStat,
    OpResult,
    SetOp,
    SetResult,
)
from impl.controller.requests import StopReplicaRequest
from impl.controller.znodes import (
    REASSIGN_PARTITIONS_PATH,
    BrokerRegistration,
    LeaderIsr,
    ReassignmentTarget,
    TopicAssignment,
    decode_reassignment,
    decode_topic,
    topic_path,
)


def _brokers(*ids: int) -> dict[int, BrokerRegistration]:
    return {b: BrokerRegistration(b, "127.0.0.1", 9000 + b, None, 100 + b) for b in ids}


def _succeed(write: ZkWrite) -> list[OpResult]:
    results: list[OpResult] = []
    for op in write.ops:
        if isinstance(op, CheckOp):
            results.append(CheckResult())
        elif isinstance(op, SetOp):
            results.append(SetResult(NodeStat(1, 1, 1, max(op.version, 0) + 1, 0, 0, 10, 0)))
        elif isinstance(op, DeleteOp):
            results.append(DeleteResult())
        else:
            results.append(CreateResult(op.path))
    return results


def _run(core: Controller, effects: list[ControllerEffect]) -> list[ControllerEffect]:
    seen = list(effects)
    queue = [e for e in effects if isinstance(e, ZkWrite)]
    for _round in range(10):
        if not queue:
            return seen
        reactions: list[ControllerEffect] = []
        for write in queue:
            reactions += core.handle(WriteCompleted(write.write_id, _succeed(write)))
        seen += reactions
        queue = [e for e in reactions if isinstance(e, ZkWrite)]
    raise AssertionError("the controller never settled")


def _node_targets(effects: list[ControllerEffect]) -> list[tuple[tuple[int, ...], ...] | None]:
    """Each write of /admin/reassign_partitions: the targets' replicas (None: deleted)."""
    out: list[tuple[tuple[int, ...], ...] | None] = []
    for effect in effects:
        if not isinstance(effect, ZkWrite):
            continue
        for op in effect.ops:
            if isinstance(op, SetOp) and op.path == REASSIGN_PARTITIONS_PATH:
                out.append(tuple(t.replicas for t in decode_reassignment(op.data)))
            elif isinstance(op, DeleteOp) and op.path == REASSIGN_PARTITIONS_PATH:
                out.append(None)
    return out


def _stopped(effects: list[ControllerEffect]) -> set[tuple[int, bool]]:
    return {(e.broker_id, p.delete_partition) for e in effects if isinstance(e, SendRequest)
            and isinstance(e.request, StopReplicaRequest) for p in e.request.partitions}


def _started() -> Controller:
    """t-0 on (0, 1), ISR (0, 1); brokers 0-2 live; reassigned to (2, 1) and started (AR
    (2, 1, 0), adding (2,), removing (0,)); broker 2 has not caught up."""
    core = Controller(ControllerConfig(9))
    _run(core, core.handle(Elected(2, 5, ClusterSnapshot(
        _brokers(0, 1, 2), {"t": TopicAssignment({0: (0, 1)})},
        {("t", 0): LeaderIsr(0, 3, (0, 1), 1, 4)}))))
    _run(core, core.handle(ReassignmentRead((ReassignmentTarget("t", 0, (2, 1)),))))
    topic = core.topics["t"]
    assert (topic.partitions[0], topic.adding_replicas[0], topic.removing_replicas[0]) == (
        (2, 1, 0), (2,), (0,))
    return core


def test_a_cancelled_started_reassignment_reverts_to_the_original_replicas() -> None:
    core = _started()
    seen = _run(core, core.handle(ReassignmentRead(())))  # the admin withdrew the entry
    topic = core.topics["t"]
    # Kafka's origin replicas: AR without the adding ones, in AR's order (RAR went first)
    assert topic.partitions[0] == (1, 0)
    assert not topic.adding_replicas
    assert not topic.removing_replicas
    assert set(core.leader_isr[("t", 0)].isr) == {0, 1}
    assert core.leader_isr[("t", 0)].leader == 0, "the leader, an original replica, stays"
    assert (2, True) in _stopped(seen), "the adding replica is stopped and deleted"
    assert (0, True) not in _stopped(seen)
    assert _node_targets(seen) == [((1, 0),), None], "the revert is the target until done"
    written = [decode_topic("t", op.data) for e in seen if isinstance(e, ZkWrite) for op in e.ops
               if isinstance(op, SetOp) and op.path == topic_path("t")]
    assert written[-1].partitions[0] == (1, 0)
    assert not core.reassignments


def test_a_revert_waits_for_the_original_replicas_in_the_isr() -> None:
    core = _started()
    # broker 1 fell out of the ISR meanwhile: the revert must not switch before it is back
    core.leader_isr[("t", 0)] = LeaderIsr(0, 4, (0,), 2, 5)
    seen = _run(core, core.handle(ReassignmentRead(())))
    assert core.topics["t"].partitions[0] == (2, 1, 0), "REASSIGN_SAFE: not switched yet"
    assert _node_targets(seen) == [((1, 0),)]
    assert core.reassignments[("t", 0)].replicas == (1, 0)


def test_a_new_controller_reverts_a_started_reassignment_missing_from_the_node() -> None:
    core = Controller(ControllerConfig(9))
    seen = _run(core, core.handle(Elected(2, 5, ClusterSnapshot(
        _brokers(0, 1, 2), {"t": TopicAssignment({0: (2, 1, 0)}, {0: (2,)}, {0: (0,)})},
        {("t", 0): LeaderIsr(0, 3, (0, 1), 1, 4)}))))
    assert core.topics["t"].partitions[0] == (1, 0)
    assert (2, True) in _stopped(seen)
    assert not core.reassignments


def test_a_new_controller_does_not_reassign_a_topic_queued_for_deletion() -> None:
    """Fuzz seed 16677: a reassignment dropping broker 2 and the deletion of its topic are both
    pending when a controller is elected. As Kafka's ``onControllerFailover`` (the deletions
    queued before ``initializePartitionReassignments``, which skips a topic queued for
    deletion), the reassignment is dropped from the node and every replica of the assignment,
    broker 2's included, is sent StopReplica (delete); reassigned first, broker 2's replica
    would leave the deletion's scope."""
    core = Controller(ControllerConfig(9))
    seen = _run(core, core.handle(Elected(2, 5, ClusterSnapshot(
        _brokers(0, 1, 2), {"a1": TopicAssignment({0: (2, 0, 1)})},
        {("a1", 0): LeaderIsr(2, 0, (2, 0, 1), 1, 0)}, topics_to_delete=("a1",),
        reassignment=(ReassignmentTarget("a1", 0, (0, 1)),)))))
    assert not core.reassignments
    assert _node_targets(seen) == [None]
    assert {(b, True) for b in (0, 1, 2)} <= _stopped(seen)
    assert core.topics.get("a1") is None or core.topics["a1"].partitions[0] == (2, 0, 1)
