"""A synchronous pump of the controller node over the in-memory ZooKeeper server.

Why: the trio service (``impl.controller._service``) is the production pump; the simulator and
the stateful tests want the same :class:`~impl.controller.node.ControllerNode` with no scheduler
at all, so that one seed decides every step. This pump carries the node's effects at once
against :class:`SimulatedZooKeeperServer` (reads, writes) and feeds each completion back under
the id the effect named, stamped with the session it ran under (the driver's session on the
server, as the trio pump stamps its client's); it answers requests with fake brokers at once
(KAFKA_STORAGE_ERROR for the partitions a test marked as on a failed dir). ZooKeeper's own
watches are used: the notifications the node armed queue up in its session, and the test
decides when each kind is delivered (:meth:`brokers_changed`, :meth:`topics_changed`, ...).
It decides nothing.

Fault model: none of its own beyond the server's (session expiry, connection loss); a request is
never lost, and a broker's answer arrives before the next input.

This module is a sans-IO core.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

from impl.controller.controller import (
    TP,
    Controller,
    ControllerConfig,
    ControllerInput,
    EmitTrace,
    WriteCompleted,
    ZkWrite,
)
from impl.controller.coordinator import (
    ConnectionLossError,
    CoordinatorEvent,
    CreateOp,
    NodeExistsError,
    NoNodeError,
    SessionEvent,
    SessionExpiredError,
    SessionState,
    WatchEvent,
    multi_error,
)
from impl.controller.node import (
    ChildrenOp,
    ControllerNode,
    ExistsOp,
    GetOp,
    NodeEffect,
    NodeInput,
    ReadCompleted,
    ReadResult,
    RequestCompleted,
    SendToBroker,
    SessionChanged,
    ZkRead,
)
from impl.controller.requests import (
    ERROR_KAFKA_STORAGE_ERROR,
    ControllerRequest,
    ControllerResponse,
    LeaderAndIsrRequest,
)
from impl.controller.znodes import (
    BROKER_IDS_PATH,
    CONTROLLER_PATH,
    DELETE_TOPICS_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    REASSIGN_PARTITIONS_PATH,
    TOPICS_PATH,
)
from impl.trace import TraceEvent

from ._coordinator_server import SimulatedZooKeeperServer

__sans_io__ = True

#: Bound on the effects one input may cause (a runaway loop is a bug).
EFFECTS_PER_INPUT_MAX = 1_000_000


class ControllerDriver:
    """One broker's controller node, carried synchronously over a simulated ZooKeeper.

    Args:
        server: the ZooKeeper.
        broker_id: the controller's broker id.
        unclean_leader_election, partitions_per_write_max, fence_writes: the core's settings.
        session_timeout_ms: the driver's session timeout.
    """

    def __init__(self, server: SimulatedZooKeeperServer, broker_id: int, *,
                 unclean_leader_election: bool = False, partitions_per_write_max: int = 500,
                 fence_writes: bool = True, session_timeout_ms: int = 6_000) -> None:
        self.server = server
        self.session_id = server.open_session(session_timeout_ms)
        self.node = ControllerNode(ControllerConfig(broker_id, unclean_leader_election,
                                                    partitions_per_write_max, fence_writes))
        self.requests: list[tuple[int, ControllerRequest]] = []
        self.traces: list[TraceEvent] = []
        self.storage_errors: dict[int, set[TP]] = collections.defaultdict(set)
        #: notifications popped from the session and not yet delivered
        self.pending: list[CoordinatorEvent] = []

    @property
    def core(self) -> Controller:
        """The node's controller core."""
        return self.node.core

    # --- inputs -------------------------------------------------------------------------------

    def elect(self) -> bool:
        """The session is connected: the node runs for controller (and, on a win, fails over).

        Returns:
            True if this driver is now the controller.
        """
        self._collect()
        self.pending = [e for e in self.pending if not isinstance(e, SessionEvent)]
        self.step(SessionChanged(SessionState.CONNECTED, self.session_id))
        return self.node.active

    def brokers_changed(self) -> None:
        """Deliver the ``/brokers/ids`` notifications queued for the session."""
        self.deliver(lambda path: path == BROKER_IDS_PATH)

    def topics_changed(self) -> None:
        """Deliver ``/brokers/topics`` and topic znode notifications."""
        self.deliver(lambda path: path == TOPICS_PATH or path.startswith(TOPICS_PATH + "/"))

    def isr_changed(self) -> None:
        """Deliver ``/isr_change_notification`` notifications."""
        self.deliver(lambda path: path == ISR_CHANGE_NOTIFICATION_PATH)

    def log_dir_events(self) -> None:
        """Deliver ``/log_dir_event_notification`` notifications."""
        self.deliver(lambda path: path == LOG_DIR_EVENT_NOTIFICATION_PATH)

    def delete_topics_changed(self) -> None:
        """Deliver ``/admin/delete_topics`` notifications."""
        self.deliver(lambda path: path == DELETE_TOPICS_PATH)

    def reassignment_changed(self) -> None:
        """Deliver ``/admin/reassign_partitions`` notifications."""
        self.deliver(lambda path: path == REASSIGN_PARTITIONS_PATH)

    def controller_changed(self) -> None:
        """Deliver ``/controller`` notifications."""
        self.deliver(lambda path: path == CONTROLLER_PATH)

    def deliver(self, wanted: Callable[[str], bool]) -> None:
        """Deliver the queued watch notifications whose path is ``wanted``, in order."""
        self._collect()
        chosen = [e for e in self.pending if isinstance(e, WatchEvent) and wanted(e.path)]
        self.pending = [e for e in self.pending if e not in chosen]
        for event in chosen:
            self.step(event)

    def run(self, event: ControllerInput) -> None:
        """Hand the node a core input as is (a fault injector's stale view)."""
        self.step(event)

    def _collect(self) -> None:
        while (event := self.server.pop_event(self.session_id)) is not None:
            self.pending.append(event)

    # --- carrying -----------------------------------------------------------------------------

    def step(self, event: NodeInput) -> None:
        """Step the node with ``event`` and carry out every effect (and the effects of their
        completions) until none is left."""
        queue: collections.deque[NodeEffect] = collections.deque(self.node.step(event))
        handled = 0
        while queue:
            handled += 1
            assert handled < EFFECTS_PER_INPUT_MAX, "the controller does not settle"
            completion = self._carry(queue.popleft())
            if completion is not None:
                queue.extend(self.node.step(completion))

    def _carry(self, effect: NodeEffect) -> NodeInput | None:
        if isinstance(effect, EmitTrace):
            self._emit(effect.event)
        elif isinstance(effect, ZkRead):
            results = self._read(effect)
            return ReadCompleted(effect.read_id, results, self.session_id)
        elif isinstance(effect, ZkWrite):
            return self._write(effect)
        elif isinstance(effect, SendToBroker):
            return self._send(effect)
        return None

    def _read(self, effect: ZkRead) -> tuple[ReadResult, ...] | None:
        server, session_id = self.server, self.session_id
        results: list[ReadResult] = []
        try:
            for op in effect.ops:
                if isinstance(op, ExistsOp):
                    results.append(server.exists(session_id, op.path, op.watch))
                    continue
                try:
                    if isinstance(op, ChildrenOp):
                        results.append(tuple(server.children(session_id, op.path, op.watch)))
                    else:
                        assert isinstance(op, GetOp)
                        results.append(server.get(session_id, op.path, op.watch))
                except NoNodeError:
                    results.append(None)
        except (ConnectionLossError, SessionExpiredError):
            return None
        return tuple(results)

    def _write(self, effect: ZkWrite) -> WriteCompleted:
        try:
            for path in effect.ensure_paths:
                result = self.server.multi(self.session_id, [CreateOp(path)])[0]
                assert not isinstance(result, Exception) or isinstance(result, NodeExistsError)
            results = self.server.multi(self.session_id, effect.ops)
        except (ConnectionLossError, SessionExpiredError):
            return WriteCompleted(effect.write_id, None, self.session_id)
        if multi_error(results) is None:
            self._write_landed(effect)
        return WriteCompleted(effect.write_id, results, self.session_id)

    # Hooks for a pump that carries effects differently (the cluster simulator's controller
    # sends requests over the simulated network and checks each landed write).

    def _emit(self, event: TraceEvent) -> None:
        """A trace event of the core."""
        self.traces.append(event)

    def _write_landed(self, effect: ZkWrite) -> None:
        """A write of the node succeeded in ZooKeeper."""

    def _send(self, effect: SendToBroker) -> NodeInput | None:
        """Deliver a request; here the fake broker answers at once."""
        return RequestCompleted(effect.request_id,
                                self._answer(effect.broker_id, effect.request))

    def _answer(self, broker_id: int, request: ControllerRequest) -> ControllerResponse:
        self.requests.append((broker_id, request))
        errors: dict[TP, int] = {}
        if isinstance(request, LeaderAndIsrRequest):
            for state in request.partition_states:
                tp = (state.topic, state.partition)
                if tp in self.storage_errors.get(broker_id, ()):
                    errors[tp] = ERROR_KAFKA_STORAGE_ERROR
        return ControllerResponse(0, errors)
