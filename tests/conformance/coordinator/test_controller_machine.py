"""The controller core under random faults, checked against ZooKeeper after every step.

A hypothesis state machine drives the real controller core (synchronously, over the simulated
ZooKeeper) through broker deaths and restarts, leader ISR changes (and stale ones), failed log
dirs, reassignments, controller session expiry and a zombie controller acting on its old epoch.
After every step it reads ZooKeeper and checks the named invariants: LEADER_UNIQUE,
EPOCHS_MONOTONIC, CONTROLLER_FENCED, NO_COMMITTED_LOSS (no leader from outside the ISR),
REASSIGN_SAFE (AR shrinks to RAR only when RAR was in the ISR) and DIR_FAILURE_ISOLATION (no
leadership or ISR membership on a failed dir). In lockstep, every trace event the controllers
emit (the zombie's included) is replayed in ``model.controller`` through the controller
abstraction: the action must be enabled and the model's invariants hold after it.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from conformance._coordinator_driver import ControllerDriver
from conformance.controller_abstraction import abstractions as controller_abstractions
from conformance.coordinator import SimulatedZooKeeper
from conformance.trace_check import TraceChecker
from impl.controller.controller import (
    PARTITION_TRANSITIONS,
    BrokersRead,
    ControllerEvent,
    PartitionState,
)
from impl.controller.coordinator import BadVersionError, CreateOp, SetOp
from impl.controller.reassignment import (
    REASSIGNMENT_TRANSITIONS,
    ReassignmentEvent,
    ReassignmentPhase,
)
from impl.controller.requests import NO_LEADER
from impl.controller.znodes import (
    CONTROLLER_EPOCH_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    ISR_CHANGE_PREFIX,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    LOG_DIR_EVENT_PREFIX,
    REASSIGN_PARTITIONS_PATH,
    LeaderIsr,
    ReassignmentTarget,
    TopicAssignment,
    broker_path,
    decode_controller_epoch,
    decode_partition_state,
    decode_topic,
    encode_broker,
    encode_isr_change,
    encode_log_dir_event,
    encode_partition_state,
    encode_reassignment,
    encode_topic,
    partition_state_path,
    topic_path,
)

BROKERS = (0, 1, 2, 3)
PARTITIONS = 6
TOPIC = "m"
ASSIGNMENT = {p: tuple((p + k) % len(BROKERS) for k in range(3)) for p in range(PARTITIONS)}


class ControllerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.server = SimulatedZooKeeper()
        self.controller = ControllerDriver(self.server, 100, partitions_per_write_max=2)
        # The model in lockstep: every trace event is replayed in model.controller.
        self.checker = TraceChecker(controller_abstractions())
        assert self.controller.elect()
        self.admin = self.server.open_session(60_000)
        self.zombie: ControllerDriver | None = None
        self.next_controller_id = 101
        self.sessions: dict[int, int] = {}
        for broker_id in BROKERS:
            self._register(broker_id)
        self.controller.brokers_changed()
        self.server.multi(self.admin, [CreateOp(topic_path(TOPIC), encode_topic(
            TopicAssignment(ASSIGNMENT)))])
        self.controller.topics_changed()
        self.history: dict[tuple[int, int], int] = {}
        self.last_replicas: dict[int, tuple[int, ...]] = {}
        self.last: dict[int, LeaderIsr] = {}
        self.failed_dirs: dict[int, set[int]] = {b: set() for b in BROKERS}

    # --- helpers ------------------------------------------------------------------------------

    def _register(self, broker_id: int) -> None:
        session = self.server.open_session(60_000)
        self.sessions[broker_id] = session
        result = self.server.multi(session, [CreateOp(
            broker_path(broker_id), encode_broker("127.0.0.1", 9000 + broker_id, None, 0),
            ephemeral=True)])[0]
        assert not isinstance(result, Exception), result

    def _state(self, partition: int) -> LeaderIsr:
        data, stat = self.server.get(self.admin, partition_state_path(TOPIC, partition), False)
        return decode_partition_state(TOPIC, partition, data, stat.version)

    def _states(self) -> dict[int, LeaderIsr]:
        return {p: self._state(p) for p in range(PARTITIONS)}

    def _replicas(self) -> dict[int, tuple[int, ...]]:
        return dict(decode_topic(TOPIC, self.server.data_of(topic_path(TOPIC))).partitions)

    def _sync_transport(self) -> None:
        for driver in (self.controller, self.zombie):
            if driver is not None:
                driver.storage_errors.clear()
                for broker_id, partitions in self.failed_dirs.items():
                    driver.storage_errors[broker_id] = {(TOPIC, p) for p in partitions}

    # --- rules --------------------------------------------------------------------------------

    @rule(broker_id=st.sampled_from(BROKERS))
    def kill_broker(self, broker_id: int) -> None:
        if broker_id not in self.sessions:
            return
        self.server.close_session(self.sessions.pop(broker_id))
        self.controller.brokers_changed()

    @rule(broker_id=st.sampled_from(BROKERS))
    def start_broker(self, broker_id: int) -> None:
        if broker_id in self.sessions:
            return
        self._register(broker_id)
        self._sync_transport()
        self.controller.brokers_changed()

    @rule(partition=st.integers(0, PARTITIONS - 1))
    def leader_shrinks_isr(self, partition: int) -> None:
        state = self._state(partition)
        if state.leader not in self.sessions or len(state.isr) < 2:
            return
        isr = [r for r in state.isr if r != state.isr[-1] or r == state.leader]
        self._leader_writes(partition, state, isr, state.zk_version)

    @rule(partition=st.integers(0, PARTITIONS - 1), replica=st.sampled_from(BROKERS))
    def leader_expands_isr(self, partition: int, replica: int) -> None:
        state = self._state(partition)
        if (state.leader not in self.sessions or replica in state.isr
                or replica not in self._replicas()[partition] or replica not in self.sessions
                or partition in self.failed_dirs[replica]):
            return
        self._leader_writes(partition, state, [*state.isr, replica], state.zk_version)

    @rule(partition=st.integers(0, PARTITIONS - 1))
    def new_replica_catches_up(self, partition: int) -> None:
        topic = decode_topic(TOPIC, self.server.data_of(topic_path(TOPIC)))
        state = self._state(partition)
        if state.leader not in self.sessions:
            return
        for replica in topic.adding_replicas.get(partition, ()):
            if (replica in self.sessions and replica not in state.isr
                    and partition not in self.failed_dirs[replica]):
                self._leader_writes(partition, state, [*state.isr, replica], state.zk_version)
                return

    @rule(partition=st.integers(0, PARTITIONS - 1))
    def deposed_leader_writes_stale_isr(self, partition: int) -> None:
        state = self._state(partition)
        if state.zk_version == 0:
            return
        before = self._states()
        results = self.server.multi(self.admin, [SetOp(
            partition_state_path(TOPIC, partition),
            encode_partition_state(state.leader, state.leader_epoch, state.isr[:1],
                                   state.controller_epoch),
            state.zk_version - 1)])
        assert isinstance(results[0], BadVersionError)
        assert self._states() == before

    def _leader_writes(self, partition: int, state: LeaderIsr, isr: list[int],
                       version: int) -> None:
        results = self.server.multi(self.admin, [
            SetOp(partition_state_path(TOPIC, partition),
                  encode_partition_state(state.leader, state.leader_epoch, isr,
                                         state.controller_epoch), version),
            CreateOp(f"{ISR_CHANGE_NOTIFICATION_PATH}/{ISR_CHANGE_PREFIX}",
                     encode_isr_change([(TOPIC, partition)]), sequential=True),
        ])
        assert not isinstance(results[0], Exception), results
        self.controller.isr_changed()

    @rule(broker_id=st.sampled_from(BROKERS), partition=st.integers(0, PARTITIONS - 1))
    def log_dir_fails(self, broker_id: int, partition: int) -> None:
        if broker_id not in self.sessions or broker_id not in self._replicas()[partition]:
            return
        self.failed_dirs[broker_id].add(partition)
        self._sync_transport()
        self.server.multi(self.sessions[broker_id], [CreateOp(
            f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{LOG_DIR_EVENT_PREFIX}",
            encode_log_dir_event(broker_id), sequential=True)])
        self.controller.log_dir_events()

    @rule(partition=st.integers(0, PARTITIONS - 1),
          replicas=st.permutations(BROKERS).map(lambda order: tuple(order[:3])))
    def reassign(self, partition: int, replicas: tuple[int, ...]) -> None:
        if self.server.exists(self.admin, REASSIGN_PARTITIONS_PATH, False) is not None:
            return
        self.server.multi(self.admin, [CreateOp(REASSIGN_PARTITIONS_PATH, encode_reassignment(
            [ReassignmentTarget(TOPIC, partition, replicas)]))])
        self.controller.reassignment_changed()

    @rule()
    def controller_session_expires(self) -> None:
        old = self.controller
        self.server.expire_session(old.session_id)
        # The old controller's client reconnects with a new session before it has processed
        # the expiry (KAFKA-6082): it is now a zombie that still believes in its epoch.
        old.session_id = self.server.open_session(60_000)
        self.zombie = old
        self.controller = ControllerDriver(self.server, self.next_controller_id,
                                           partitions_per_write_max=2)
        self.next_controller_id += 1
        self._sync_transport()
        assert self.controller.elect()

    @precondition(lambda self: self.zombie is not None and self.zombie.core.active)
    @rule(broker_id=st.sampled_from(BROKERS))
    def zombie_acts_on_its_old_epoch(self, broker_id: int) -> None:
        zombie = self.zombie
        assert zombie is not None
        before = self._states()
        topic_before = self.server.data_of(topic_path(TOPIC))
        # The zombie believes a broker died (a stale view) and moves leaders off it.
        brokers = dict(zombie.core.live_brokers)
        brokers.pop(broker_id, None)
        zombie.run(BrokersRead(brokers))
        zombie.isr_changed()
        assert self._states() == before, "CONTROLLER_FENCED: a zombie changed partition state"
        assert self.server.data_of(topic_path(TOPIC)) == topic_before

    # --- invariants ---------------------------------------------------------------------------

    @invariant()
    def partition_states_are_sound(self) -> None:
        epoch = decode_controller_epoch(self.server.data_of(CONTROLLER_EPOCH_PATH))
        assert self.controller.core.active
        assert self.controller.core.epoch == epoch
        assignment = self._replicas()
        for partition, state in self._states().items():
            replicas = assignment[partition]
            assert set(state.isr) <= set(replicas)
            old_replicas = self.last_replicas.get(partition, ASSIGNMENT[partition])
            if not set(old_replicas) <= set(replicas):
                # AR shrank: a reassignment switched to RAR, which must have been in the ISR.
                old_state = self.last.get(partition)
                assert old_state is not None
                assert set(replicas) <= set(old_state.isr) | set(state.isr), "REASSIGN_SAFE"
                assert set(state.isr) == set(replicas), "REASSIGN_SAFE: switched before RAR ⊆ ISR"
            self.last_replicas[partition] = replicas
            assert state.leader == NO_LEADER or state.leader in state.isr
            assert state.controller_epoch <= epoch, "CONTROLLER_FENCED"
            old = self.last.get(partition)
            if old is not None:
                assert state.leader_epoch >= old.leader_epoch, "EPOCHS_MONOTONIC"
                assert state.zk_version >= old.zk_version
                if state.leader not in (old.leader, NO_LEADER):
                    assert state.leader in old.isr, "NO_COMMITTED_LOSS: leader outside the ISR"
            key = (partition, state.leader_epoch)
            assert self.history.setdefault(key, state.leader) == state.leader, "LEADER_UNIQUE"
            self.last[partition] = state
            for broker_id in self.sessions:
                if partition in self.failed_dirs[broker_id]:
                    assert state.leader != broker_id, "DIR_FAILURE_ISOLATION: leads on a lost dir"
                    # Kafka keeps the last ISR member even when it is offline, so that only it
                    # may lead again (no unclean election); otherwise a lost replica leaves.
                    assert broker_id not in state.isr or (
                        state.isr == (broker_id,) and state.leader == NO_LEADER
                    ), "DIR_FAILURE_ISOLATION: lost dir in ISR"

    @invariant()
    def traces_follow_the_transition_tables(self) -> None:
        for driver in (self.controller, self.zombie):
            if driver is None:
                continue
            for event in driver.traces:
                violation = self.checker.feed(event)
                assert violation is None, violation.describe()
                if event.machine == "reassignment":
                    key = (ReassignmentPhase[event.state_before], ReassignmentEvent[event.event])
                    assert REASSIGNMENT_TRANSITIONS[key].name == event.state_after, event
                elif event.subject.startswith(f"{TOPIC}-") and "@" not in event.subject:
                    pkey = (PartitionState[event.state_before], ControllerEvent[event.event])
                    assert PARTITION_TRANSITIONS[pkey].name == event.state_after, event
                else:
                    assert event.event in ControllerEvent.__members__, event
            driver.traces.clear()

    @invariant()
    def live_leaders_are_live(self) -> None:
        for partition, state in self._states().items():
            live_isr = [r for r in state.isr if r in self.sessions
                        and partition not in self.failed_dirs[r]]
            if live_isr:
                assert state.leader in live_isr, f"m-{partition} has a usable ISR but no leader"

    def teardown(self) -> None:
        self.traces_follow_the_transition_tables()
        verdict = self.checker.verdict()
        # The election alone is replayed: the lockstep check is never vacuous.
        assert verdict.events_checked > 0, verdict
        assert not verdict.events_unchecked or verdict.events_checked > verdict.events_unchecked


ControllerMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=25, deadline=None, derandomize=True
)
TestControllerMachine = ControllerMachine.TestCase
