"""A synchronous driver of the controller core over the in-memory ZooKeeper server.

Why: the trio shell (``impl.controller._service``) is the production runtime; the simulator and
the stateful tests want the same core with no scheduler at all, so that one seed decides every
step. This driver does what the shell does, synchronously: it runs the election ``multi``, reads
the snapshot, carries out the core's effects against :class:`SimulatedZooKeeperServer` (writes,
re-reads) and answers requests with fake brokers at once (KAFKA_STORAGE_ERROR for the partitions
a test marked as on a failed dir). Watches are not used: the test says which change happened and
the driver re-reads what the shell would re-read for that watch.

Fault model: none of its own beyond the server's (session expiry, connection loss); a request is
never lost, and a broker's answer arrives before the next input.

This module is a sans-IO core.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable

from impl.controller.controller import (
    TP,
    BrokersRead,
    ClusterSnapshot,
    Controller,
    ControllerConfig,
    ControllerEffect,
    ControllerInput,
    DeleteTopicsRead,
    Elected,
    EmitTrace,
    IsrChangesRead,
    LogDirEventsRead,
    PartitionStatesRead,
    ReadPartitionStates,
    ReassignmentRead,
    Resign,
    ResponseReceived,
    SendRequest,
    TopicsRead,
    WriteCompleted,
    ZkWrite,
)
from impl.controller.coordinator import (
    ConnectionLossError,
    CreateOp,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
    SetOp,
    SetResult,
    multi_error,
    multi_succeeded,
)
from impl.controller.requests import (
    ERROR_KAFKA_STORAGE_ERROR,
    ControllerRequest,
    ControllerResponse,
    LeaderAndIsrRequest,
)
from impl.controller.znodes import (
    BROKER_IDS_PATH,
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    DELETE_TOPICS_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    PERSISTENT_PATHS,
    REASSIGN_PARTITIONS_PATH,
    TOPICS_PATH,
    BrokerRegistration,
    LeaderIsr,
    ReassignmentTarget,
    TopicAssignment,
    broker_path,
    decode_broker,
    decode_controller_epoch,
    decode_isr_change,
    decode_log_dir_event,
    decode_partition_state,
    decode_reassignment,
    decode_topic,
    encode_controller,
    encode_controller_epoch,
    partition_state_path,
    topic_path,
)
from impl.trace import TraceEvent

from ._coordinator_server import SimulatedZooKeeperServer

__sans_io__ = True

#: Bound on the effects one input may cause (a runaway loop is a bug).
EFFECTS_PER_INPUT_MAX = 1_000_000


class ControllerDriver:
    """One broker's controller core, driven synchronously over a simulated ZooKeeper.

    Args:
        server: the ZooKeeper.
        broker_id: the controller's broker id.
        unclean_leader_election, partitions_per_write_max: the core's settings.
        session_timeout_ms: the driver's session timeout.
    """

    def __init__(self, server: SimulatedZooKeeperServer, broker_id: int, *,
                 unclean_leader_election: bool = False, partitions_per_write_max: int = 500,
                 session_timeout_ms: int = 6_000) -> None:
        self.server = server
        self.session_id = server.open_session(session_timeout_ms)
        self.core = Controller(ControllerConfig(broker_id, unclean_leader_election,
                                                partitions_per_write_max))
        self.requests: list[tuple[int, ControllerRequest]] = []
        self.traces: list[TraceEvent] = []
        self.storage_errors: dict[int, set[TP]] = collections.defaultdict(set)
        self.live_transport: set[int] | None = None

    # --- reads --------------------------------------------------------------------------------

    def _children(self, path: str) -> list[str]:
        try:
            return self.server.children(self.session_id, path, False)
        except NoNodeError:
            return []

    def _get(self, path: str) -> tuple[bytes, int, int] | None:
        try:
            data, stat = self.server.get(self.session_id, path, False)
        except NoNodeError:
            return None
        return data, stat.version, stat.czxid

    def read_brokers(self) -> dict[int, BrokerRegistration]:
        """``/brokers/ids`` with each registration."""
        brokers: dict[int, BrokerRegistration] = {}
        for name in self._children(BROKER_IDS_PATH):
            found = self._get(broker_path(int(name)))
            if found is not None:
                brokers[int(name)] = decode_broker(int(name), found[0], found[2])
        return brokers

    def read_topics(self, names: Iterable[str] | None = None) -> dict[str, TopicAssignment]:
        """Topic assignments (all topics when ``names`` is None)."""
        topics: dict[str, TopicAssignment] = {}
        for name in self._children(TOPICS_PATH) if names is None else names:
            found = self._get(topic_path(name))
            if found is not None:
                topics[name] = decode_topic(name, found[0])
        return topics

    def read_states(self, tps: Iterable[TP]) -> dict[TP, LeaderIsr | None]:
        """Partition states (``None`` where the znode is missing)."""
        states: dict[TP, LeaderIsr | None] = {}
        for tp in tps:
            try:
                data, stat = self.server.get(self.session_id, partition_state_path(*tp), False)
            except NoNodeError:
                states[tp] = None
                continue
            states[tp] = decode_partition_state(tp[0], tp[1], data, stat.version, stat.mzxid)
        return states

    def read_reassignment(self) -> tuple[ReassignmentTarget, ...]:
        """``/admin/reassign_partitions`` (empty when absent)."""
        found = self._get(REASSIGN_PARTITIONS_PATH)
        return () if found is None else decode_reassignment(found[0])

    def snapshot(self) -> ClusterSnapshot:
        """What the shell reads after winning an election."""
        topics = self.read_topics()
        states = self.read_states((t, p) for t, a in sorted(topics.items())
                                  for p in sorted(a.partitions))
        events: dict[str, int] = {}
        for name in self._children(LOG_DIR_EVENT_NOTIFICATION_PATH):
            found = self._get(f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{name}")
            if found is not None:
                events[name] = decode_log_dir_event(found[0])
        return ClusterSnapshot(
            self.read_brokers(), topics,
            {tp: s for tp, s in states.items() if s is not None},
            tuple(self._children(DELETE_TOPICS_PATH)),
            self.read_reassignment(),
            events,
            tuple(self._children(ISR_CHANGE_NOTIFICATION_PATH)),
        )

    # --- election -----------------------------------------------------------------------------

    def elect(self) -> bool:
        """Run for controller as the shell does; on a win, run the failover.

        Returns:
            True if this driver is now the controller.
        """
        for path in (*PERSISTENT_PATHS, CONTROLLER_EPOCH_PATH):
            data = encode_controller_epoch(0) if path == CONTROLLER_EPOCH_PATH else b""
            self.server.multi(self.session_id, [CreateOp(path, data)])
        if self.server.exists(self.session_id, CONTROLLER_PATH, False) is not None:
            return False
        found = self._get(CONTROLLER_EPOCH_PATH)
        assert found is not None
        epoch = decode_controller_epoch(found[0]) + 1
        results = self.server.multi(self.session_id, [
            CreateOp(CONTROLLER_PATH, encode_controller(self.core.config.broker_id, 0),
                     ephemeral=True),
            SetOp(CONTROLLER_EPOCH_PATH, encode_controller_epoch(epoch), found[1]),
        ])
        if not multi_succeeded(results):
            return False
        set_result = results[1]
        assert isinstance(set_result, SetResult)
        self.run(Elected(epoch, set_result.stat.version, self.snapshot()))
        return True

    # --- inputs the shell would derive from watches -------------------------------------------

    def brokers_changed(self) -> None:
        """``/brokers/ids`` fired."""
        self.run(BrokersRead(self.read_brokers()))

    def topics_changed(self) -> None:
        """``/brokers/topics`` (or a topic znode) fired."""
        names = set(self._children(TOPICS_PATH))
        topics = self.read_topics(sorted(names))
        states = self.read_states((t, p) for t, a in sorted(topics.items())
                                  for p in sorted(a.partitions))
        self.run(TopicsRead(frozenset(names), topics,
                            {tp: s for tp, s in states.items() if s is not None}))

    def isr_changed(self) -> None:
        """``/isr_change_notification`` fired."""
        names = self._children(ISR_CHANGE_NOTIFICATION_PATH)
        tps: set[TP] = set()
        for name in names:
            found = self._get(f"{ISR_CHANGE_NOTIFICATION_PATH}/{name}")
            if found is not None:
                tps.update(decode_isr_change(found[0]))
        states = self.read_states(sorted(tps))
        self.run(IsrChangesRead(tuple(names),
                                {tp: s for tp, s in states.items() if s is not None}))

    def log_dir_events(self) -> None:
        """``/log_dir_event_notification`` fired."""
        events: dict[str, int] = {}
        for name in self._children(LOG_DIR_EVENT_NOTIFICATION_PATH):
            found = self._get(f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{name}")
            if found is not None:
                events[name] = decode_log_dir_event(found[0])
        self.run(LogDirEventsRead(events))

    def delete_topics_changed(self) -> None:
        """``/admin/delete_topics`` fired."""
        self.run(DeleteTopicsRead(tuple(self._children(DELETE_TOPICS_PATH))))

    def reassignment_changed(self) -> None:
        """``/admin/reassign_partitions`` fired."""
        self.run(ReassignmentRead(self.read_reassignment()))

    # --- effects ------------------------------------------------------------------------------

    def _answer(self, broker_id: int, request: ControllerRequest) -> ControllerResponse | None:
        if self.live_transport is not None and broker_id not in self.live_transport:
            return None
        self.requests.append((broker_id, request))
        errors: dict[TP, int] = {}
        if isinstance(request, LeaderAndIsrRequest):
            for state in request.partition_states:
                tp = (state.topic, state.partition)
                if tp in self.storage_errors.get(broker_id, ()):
                    errors[tp] = ERROR_KAFKA_STORAGE_ERROR
        return ControllerResponse(0, errors)

    def run(self, event: ControllerInput) -> None:
        """Feed ``event`` to the core and carry out every effect until it is idle."""
        queue: collections.deque[ControllerEffect] = collections.deque(self.core.handle(event))
        handled = 0
        while queue:
            handled += 1
            assert handled < EFFECTS_PER_INPUT_MAX, "the controller does not settle"
            effect = queue.popleft()
            follow: list[ControllerEffect] = []
            if isinstance(effect, EmitTrace):
                self._emit(effect.event)
            elif isinstance(effect, ZkWrite):
                try:
                    for path in effect.ensure_paths:
                        result = self.server.multi(self.session_id, [CreateOp(path)])[0]
                        assert not isinstance(result, Exception) or isinstance(
                            result, NodeExistsError)
                    results = self.server.multi(self.session_id, effect.ops)
                except (ConnectionLossError, SessionExpiredError):
                    follow = self.core.handle(WriteCompleted(effect.write_id, None))
                else:
                    if multi_error(results) is None:
                        self._write_landed()
                    follow = self.core.handle(WriteCompleted(effect.write_id, results))
            elif isinstance(effect, ReadPartitionStates):
                follow = self.core.handle(PartitionStatesRead(self.read_states(effect.partitions)))
            elif isinstance(effect, SendRequest):
                follow = self._send(effect.broker_id, effect.request)
            elif isinstance(effect, Resign):
                self._resigned()
            queue.extend(follow)

    # Hooks for a shell that carries effects differently (the cluster simulator's controller
    # node sends requests over the simulated network and checks each landed write).

    def _emit(self, event: TraceEvent) -> None:
        """A trace event of the core."""
        self.traces.append(event)

    def _write_landed(self) -> None:
        """A write of the core succeeded in ZooKeeper."""

    def _send(self, broker_id: int, request: ControllerRequest) -> list[ControllerEffect]:
        """Deliver ``request``; here the fake broker answers at once."""
        response = self._answer(broker_id, request)
        return self.core.handle(ResponseReceived(broker_id, request, response))

    def _resigned(self) -> None:
        """The core resigned (it lost the election or its session)."""
