"""A failed broker leaves the ISR of every partition, whatever the controller's cache says.

The real controller core is driven synchronously over the simulated ZooKeeper (as in
``test_controller_machine``), in the two situations the cluster simulator found it keeping a
failed broker in an ISR (Kafka's OfflineReplica: remove from the ISR, read fresh from ZooKeeper,
written conditionally on the zkVersion):

* a broker that restarted between two reads of ``/brokers/ids`` (its broker epoch, the czxid of
  its registration, changed) is failed then started, and leaves the ISR of every partition it is
  assigned, including those that only lose it from the ISR (not only those it led);
* a leader's ISR expansion re-adding a broker, written just before that broker fails and not
  yet seen by the controller, does not keep the dead broker in the ISR.
"""

from __future__ import annotations

from conformance._coordinator_driver import ControllerDriver
from conformance.coordinator import SimulatedZooKeeper
from impl.controller.coordinator import CreateOp, SetOp
from impl.controller.znodes import (
    ISR_CHANGE_NOTIFICATION_PATH,
    ISR_CHANGE_PREFIX,
    LeaderIsr,
    TopicAssignment,
    broker_path,
    decode_partition_state,
    encode_broker,
    encode_isr_change,
    encode_partition_state,
    encode_topic,
    partition_state_path,
    topic_path,
)

TOPIC = "r"
BROKERS = (0, 1, 2)
#: Broker 1 leads partition 1 and follows in partitions 0 and 2.
ASSIGNMENT = {p: tuple((p + k) % len(BROKERS) for k in range(3)) for p in range(3)}


class _Cluster:
    def __init__(self) -> None:
        self.server = SimulatedZooKeeper()
        self.controller = ControllerDriver(self.server, 100)
        assert self.controller.elect()
        self.admin = self.server.open_session(60_000)
        self.sessions: dict[int, int] = {}
        for broker_id in BROKERS:
            self.register(broker_id)
        self.controller.brokers_changed()
        self.server.multi(self.admin, [CreateOp(topic_path(TOPIC), encode_topic(
            TopicAssignment(ASSIGNMENT)))])
        self.controller.topics_changed()

    def register(self, broker_id: int) -> None:
        session = self.server.open_session(60_000)
        self.sessions[broker_id] = session
        result = self.server.multi(session, [CreateOp(
            broker_path(broker_id), encode_broker("127.0.0.1", 9000 + broker_id, None, 0),
            ephemeral=True)])[0]
        assert not isinstance(result, Exception), result

    def kill(self, broker_id: int) -> None:
        self.server.close_session(self.sessions.pop(broker_id))

    def state(self, partition: int) -> LeaderIsr:
        data, stat = self.server.get(self.admin, partition_state_path(TOPIC, partition), False)
        return decode_partition_state(TOPIC, partition, data, stat.version)

    def leader_sets_isr(self, partition: int, isr: tuple[int, ...]) -> None:
        """The partition's leader writes its ISR (conditionally) and notifies the controller."""
        state = self.state(partition)
        results = self.server.multi(self.admin, [
            SetOp(partition_state_path(TOPIC, partition),
                  encode_partition_state(state.leader, state.leader_epoch, isr,
                                         state.controller_epoch), state.zk_version),
            CreateOp(f"{ISR_CHANGE_NOTIFICATION_PATH}/{ISR_CHANGE_PREFIX}",
                     encode_isr_change([(TOPIC, partition)]), sequential=True),
        ])
        assert not any(isinstance(r, Exception) for r in results), results


def test_a_bounced_broker_leaves_every_isr_it_was_in() -> None:
    cluster = _Cluster()
    assert all(cluster.state(p).isr == ASSIGNMENT[p] for p in range(3))
    # Broker 1 restarts between two reads of /brokers/ids: a new registration, a new czxid.
    cluster.kill(1)
    cluster.register(1)
    cluster.controller.brokers_changed()
    assert cluster.controller.core.live_brokers.keys() == set(BROKERS)
    states = {p: cluster.state(p) for p in range(3)}
    assert states[1].leader == 2, "the bounced broker's leadership moved"
    for partition, state in states.items():
        assert 1 not in state.isr, (
            f"partition {partition}: the bounced broker, which lost its unflushed records, "
            f"is still in the ISR {state.isr}")
        assert state.leader_epoch == 1
    # Its replicas were re-sent to the new incarnation, with the ISR it is not in.
    sent = [request for broker_id, request in cluster.controller.requests if broker_id == 1]
    assert sent


def test_a_concurrent_isr_expansion_does_not_keep_a_failed_broker() -> None:
    cluster = _Cluster()
    cluster.kill(1)
    cluster.controller.brokers_changed()
    assert 1 not in cluster.state(0).isr
    cluster.register(1)
    cluster.controller.brokers_changed()
    assert 1 not in cluster.state(0).isr, "a restarted broker rejoins through its leader"
    # Broker 1 caught up: partition 0's leader re-adds it, and broker 1 dies right after, before
    # the controller has read the ISR change.
    cluster.leader_sets_isr(0, (0, 2, 1))
    cluster.kill(1)
    cluster.controller.brokers_changed()
    assert 1 not in cluster.state(0).isr, "removed from the ISR read fresh from ZooKeeper"
    cluster.controller.isr_changed()
    state = cluster.state(0)
    assert state.isr == (0, 2)
    assert state.leader == 0
    assert cluster.controller.core.leader_isr[(TOPIC, 0)] == state, "cache matches ZooKeeper"
