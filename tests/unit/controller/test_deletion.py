"""Topic deletion waits for replicas on dead brokers (DELETION_INELIGIBLE), then finishes."""

from __future__ import annotations

from conformance.coordinator import ControllerDriver, SimulatedZooKeeper
from impl.controller.controller import EPOCH_DURING_DELETE, ReplicaState
from impl.controller.coordinator import CreateOp
from impl.controller.requests import StopReplicaRequest
from impl.controller.znodes import (
    DELETE_TOPICS_PATH,
    TOPICS_PATH,
    TopicAssignment,
    broker_path,
    delete_topic_path,
    encode_broker,
    encode_topic,
    topic_path,
)


def _register(server: SimulatedZooKeeper, broker_id: int) -> int:
    session = server.open_session(60_000)
    result = server.multi(session, [CreateOp(broker_path(broker_id),
                                             encode_broker("h", 9000 + broker_id, None, 0),
                                             ephemeral=True)])[0]
    assert not isinstance(result, Exception)
    return session


def test_deletion_waits_for_a_dead_replica_and_completes_when_it_returns() -> None:
    server = SimulatedZooKeeper()
    controller = ControllerDriver(server, 100)
    assert controller.elect()
    admin = server.open_session(60_000)
    sessions = {b: _register(server, b) for b in (0, 1)}
    controller.brokers_changed()
    server.multi(admin, [CreateOp(topic_path("gone"), encode_topic(
        TopicAssignment({0: (0, 1), 1: (1, 0)})))])
    controller.topics_changed()
    assert "gone" in controller.core.topics

    server.close_session(sessions.pop(1))
    controller.brokers_changed()
    server.multi(admin, [CreateOp(delete_topic_path("gone"))])
    controller.delete_topics_changed()
    stopped = [(b, r) for b, r in controller.requests if isinstance(r, StopReplicaRequest)]
    assert {b for b, _ in stopped} == {0}, "no StopReplica to the dead broker"
    assert all(p.delete_partition for _, r in stopped for p in r.partitions)
    # Kafka's EpochDuringDelete, whatever epoch the controller cached: a replica already at a
    # later epoch (an election written after the cache was read) must not refuse it
    # (fuzz seed 67 of the admin workload)
    assert all(p.leader_epoch == EPOCH_DURING_DELETE for _, r in stopped for p in r.partitions)
    assert controller.core.replica_states[(("gone", 0), 1)] is ReplicaState.DELETION_INELIGIBLE
    assert "gone" in server.children(admin, TOPICS_PATH, False), "not deleted while waiting"

    sessions[1] = _register(server, 1)
    controller.brokers_changed()
    stopped_1 = [r for b, r in controller.requests if b == 1 and isinstance(r, StopReplicaRequest)]
    assert stopped_1
    assert "gone" not in server.children(admin, TOPICS_PATH, False)
    assert server.children(admin, DELETE_TOPICS_PATH, False) == []
    assert "gone" not in controller.core.topics
    deleted = [t for t in controller.traces if t.event == "TOPIC_DELETED"]
    assert sorted(t.subject for t in deleted) == ["gone-0", "gone-1"]
