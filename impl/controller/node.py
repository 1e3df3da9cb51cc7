"""The controller node: one broker's controller candidate as a sans-IO ``step(input) -> effects``.

Theory of operation. Like etcd's ``raft.go``, the node decides and a pump carries: the trio
service (:mod:`impl.controller._service`) and the simulator's pumps turn ZooKeeper session
changes, watch notifications, read and write results and broker responses into inputs, and carry
out the effects the node returns. Every effect names the input that reports its completion
(:class:`ZkRead` → :class:`ReadCompleted`, :class:`ZkWrite` → :class:`WriteCompleted`,
:class:`SendToBroker` → :class:`RequestCompleted`), so a pump is a loop with no knowledge of the
protocol. Pumps hand the node bytes and stats; every znode is decoded here.

What the node owns, around the controller core (:class:`~impl.controller.controller.Controller`,
which owns partition and replica state):

- **Election** (design V3 §D 1, KAFKA-6082): one ``multi`` creates the ephemeral ``/controller``
  and sets ``/controller_epoch`` to epoch + 1 conditional on the version read, so of two
  candidates exactly one wins and the epoch znode's version names the winner's term. A candidate
  that lost waits for ``/controller`` to be deleted or for a (re)connection; one that resigned
  runs again at once.
- **Failover reads** (§D 3): the winner reads brokers, topics, partition states, pending
  deletions, reassignment and notifications, arming every watch, and hands the snapshot to the
  core.
- **Watch-to-read mapping**: each watch notification becomes the re-read it calls for (and
  re-arms the watch) and the core gets the result (``/admin/preferred_replica_election``
  included: read at failover too, since a request may have come while no controller was
  active).
- **Revalidation**: after a connection loss (SUSPENDED then CONNECTED) the node checks that its
  session still owns ``/controller`` and that the epoch znode's version is still its own, then
  re-reads everything (watches were dropped with the connection); otherwise the core resigns.
- **A term is bound to its session** (Kafka's ZooKeeperClient calls ``beforeInitializingSession``
  and the controller resigns before anything runs on a new session): ZooKeeper hands out a new
  session only once the old one expired, so a CONNECTED naming another session, or a read or
  write that the pump ran under another session (``ReadCompleted.session_id``,
  ``WriteCompleted.session_id``), proves the term's session gone. A read's results are dropped:
  a zombie never acts on what it read under a session it did not win its term in. A write has
  already been judged in ZooKeeper by the ``/controller_epoch`` check (KAFKA-6082), so the core
  learns its outcome (a fenced write resigns it). Then the node drops everything outstanding,
  the core resigns if it has not, and the node runs again once the new session's CONNECTED
  arrives.
- **Request queues**: one FIFO per broker with one request in flight (Kafka's
  ControllerChannelManager); an undelivered request is retried after a back-off while its broker
  is live and reported to the core as undelivered once the broker is gone. When the core no
  longer holds a broker live, the requests queued behind the one in flight are dropped and
  reported undelivered at once (Kafka's ``removeBroker``).

Inputs are processed one at a time: a notification, a session change or a broker response waits
while a read job of the node or a write or read of the core is outstanding (the order the trio
service has always had), so the core always sees the results of its own writes first.

This module is sans-IO.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Generator, Sequence
from dataclasses import dataclass

from .controller import (
    TP,
    BrokersRead,
    ClusterSnapshot,
    Controller,
    ControllerConfig,
    ControllerEffect,
    ControllerInput,
    ControllerMoved,
    DeleteTopicsRead,
    Elected,
    ElectionAnswered,
    EmitTrace,
    IsrChangesRead,
    LogDirEventsRead,
    PartitionStatesRead,
    PreferredElectionRead,
    ReadPartitionStates,
    ReassignmentRead,
    Resign,
    ResponseReceived,
    SendRequest,
    SessionExpired,
    TopicConfigsRead,
    TopicsRead,
    WriteCompleted,
    ZkWrite,
)
from .coordinator import (
    CreateOp,
    DeleteOp,
    NodeStat,
    OpResult,
    SessionState,
    SetOp,
    SetResult,
    WatchEvent,
    WatchEventType,
    multi_succeeded,
)
from .requests import ControllerRequest, ControllerResponse
from .znodes import (
    BROKER_IDS_PATH,
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    DELETE_TOPICS_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    PERSISTENT_PATHS,
    PREFERRED_REPLICA_ELECTION_PATH,
    REASSIGN_PARTITIONS_PATH,
    TOPICS_PATH,
    BrokerRegistration,
    LeaderIsr,
    ReassignmentTarget,
    TopicAssignment,
    ZnodeFormatError,
    broker_path,
    decode_broker,
    decode_controller_epoch,
    decode_isr_change,
    decode_log_dir_event,
    decode_partition_state,
    decode_preferred_election,
    decode_reassignment,
    decode_topic,
    encode_controller,
    encode_controller_epoch,
    partition_state_path,
    topic_path,
)

__sans_io__ = True

#: Election ``multi`` attempts before waiting for the next notification.
ELECTION_ATTEMPTS_MAX = 16
#: Requests queued for one broker; beyond this the broker is hung and a request is reported
#: undelivered at once.
BROKER_QUEUE_MAX = 10_000
#: Back-off before an undelivered request to a live broker is sent again (Kafka's
#: ``retry.backoff.ms`` in the ControllerChannelManager's send thread).
REQUEST_RETRY_BACKOFF_MS = 100
#: Kafka's config change notices and topic configs (read for unclean.leader.election.enable)
CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_TOPICS_PATH = "/config/topics"
UNCLEAN_KEY = "unclean.leader.election.enable"
#: Inputs waiting while the node is busy (notifications, session changes, responses).
INBOX_MAX = 1_000_000


# --- reads ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GetOp:
    """Read a znode's data and stat (result: ``(bytes, NodeStat)``, ``None`` if absent)."""

    path: str
    watch: bool = False


@dataclass(frozen=True, slots=True)
class ChildrenOp:
    """List a znode's children (result: a tuple of names, ``None`` if absent)."""

    path: str
    watch: bool = False


@dataclass(frozen=True, slots=True)
class ExistsOp:
    """A znode's stat, arming a watch even when absent (result: ``NodeStat`` or ``None``)."""

    path: str
    watch: bool = False


ReadOp = GetOp | ChildrenOp | ExistsOp
ReadResult = tuple[bytes, NodeStat] | tuple[str, ...] | NodeStat | None


# --- inputs -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionChanged:
    """The ZooKeeper session changed state (``session_id``: the client's session now;
    ``wall_ms``: the time, written into ``/controller``)."""

    state: SessionState
    session_id: int
    wall_ms: int = 0


@dataclass(frozen=True, slots=True)
class ReadCompleted:
    """The results of a :class:`ZkRead`, one per op (``None``: the connection or the session was
    lost and nothing is known); ``session_id``: the session the pump ran the reads under, read
    from its client once they completed (0: no session)."""

    read_id: int
    results: tuple[ReadResult, ...] | None
    session_id: int


@dataclass(frozen=True, slots=True)
class RequestCompleted:
    """A :class:`SendToBroker` finished (``response`` is ``None`` if it was not delivered)."""

    request_id: int
    response: ControllerResponse | None


NodeInput = (SessionChanged | WatchEvent | ReadCompleted | WriteCompleted | RequestCompleted
             | ControllerInput)


# --- effects ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ZkRead:
    """Run ``ops`` (concurrently, in any order) and answer with :class:`ReadCompleted`."""

    read_id: int
    ops: tuple[ReadOp, ...]


@dataclass(frozen=True, slots=True)
class SendToBroker:
    """Send ``request`` to ``broker_id`` after ``backoff_ms``; answer with
    :class:`RequestCompleted` carrying ``request_id``."""

    request_id: int
    broker_id: int
    request: ControllerRequest
    backoff_ms: int = 0

    def __init__(
        self, request_id: int, broker_id: int, request: ControllerRequest, backoff_ms: int = 0
    ) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "request_id", request_id)
        object.__setattr__(self, "broker_id", broker_id)
        object.__setattr__(self, "request", request)
        object.__setattr__(self, "backoff_ms", backoff_ms)


@dataclass(frozen=True, slots=True)
class LogWarning:
    """Something in ZooKeeper was malformed and is ignored (the pump logs ``message``)."""

    message: str


NodeEffect = ZkRead | ZkWrite | SendToBroker | EmitTrace | Resign | LogWarning | ElectionAnswered


# --- jobs -------------------------------------------------------------------------------------


class _LostError(Exception):
    """A read or write of a job failed with a connection or session loss."""


_Step = ZkRead | ZkWrite
#: A job is a generator: it yields a read or a write and is resumed with its results.
_Job = Generator[_Step, object, None]


@dataclass(slots=True)
class _Queue:
    """One broker's requests: the head is in flight."""

    requests: collections.deque[tuple[int, ControllerRequest]]


class ControllerNode:
    """One broker's controller candidate (see the module docstring).

    Args:
        config: the core's settings (the broker id among them).
    """

    def __init__(self, config: ControllerConfig) -> None:
        self.core = Controller(config)
        self.config = config
        self.session_id = 0
        self.closed = False
        #: True between SUSPENDED and the CONNECTED that follows it
        self.suspended = False
        self._wall_ms = 0
        self._ids = itertools.count(1)
        self._inbox: collections.deque[NodeInput] = collections.deque()
        self._job: _Job | None = None
        self._job_step: int | None = None
        #: this node's id of a core write -> the core's
        self._core_writes: dict[int, int] = {}
        #: this node's id of a core partition-state read -> the partitions
        self._core_reads: dict[int, tuple[TP, ...]] = {}
        self._queues: dict[int, _Queue] = {}
        self._in_flight: dict[int, int] = {}  # request id -> broker id
        self._effects: list[NodeEffect] = []
        #: the core resigned: run for election again once nothing is outstanding
        self._elect_pending = False
        #: a completion showed the node's session gone: run again only on the new session's
        #: CONNECTED
        self._awaiting_session = False

    # --- status -------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """True while this broker is the controller."""
        return self.core.active

    @property
    def epoch(self) -> int:
        """The controller epoch this broker last won (0 if never)."""
        return self.core.epoch

    @property
    def idle(self) -> bool:
        """No read, write or queued input outstanding (requests may still be in flight)."""
        return (self._job is None and not self._core_writes and not self._core_reads
                and not self._inbox)

    def requests_queued(self, broker_id: int) -> int:
        """Requests queued for ``broker_id`` (the one in flight included)."""
        queue = self._queues.get(broker_id)
        return 0 if queue is None else len(queue.requests)

    # --- step ---------------------------------------------------------------------------------

    def step(self, event: NodeInput) -> list[NodeEffect]:
        """Process one input; return the effects to carry out, in order."""
        self._effects = []
        if isinstance(event, ReadCompleted):
            self._on_read(event)
        elif isinstance(event, WriteCompleted):
            self._on_write(event)
        else:
            assert len(self._inbox) < INBOX_MAX, "controller node inbox overflow"
            self._inbox.append(event)
        self._drain()
        effects, self._effects = self._effects, []
        return effects

    def _busy(self) -> bool:
        return self._job is not None or bool(self._core_writes) or bool(self._core_reads)

    def _drain(self) -> None:
        while not self.closed and not self._busy():
            if self._elect_pending:
                self._elect_pending = False
                self._start_job(self._elect())
            elif self._inbox:
                self._dispatch(self._inbox.popleft())
            else:
                return

    def _dispatch(self, event: NodeInput) -> None:
        if isinstance(event, SessionChanged):
            self._on_session(event)
        elif isinstance(event, WatchEvent):
            self._on_watch(event)
        elif isinstance(event, RequestCompleted):
            self._on_request_completed(event)
        elif isinstance(event, ReadCompleted | WriteCompleted):  # pragma: no cover - not queued
            raise AssertionError(event)
        else:
            self._run_core(event)  # a core input handed over as is (a fault injector's view)

    # --- the core -----------------------------------------------------------------------------

    def _run_core(self, event: ControllerInput) -> None:
        self._carry_core(self.core.handle(event))

    def _carry_core(self, effects: Sequence[ControllerEffect]) -> None:
        resigned = False
        for effect in effects:
            if isinstance(effect, ZkWrite):
                write_id = next(self._ids)
                self._core_writes[write_id] = effect.write_id
                self._effects.append(ZkWrite(write_id, effect.ops, effect.ensure_paths))
            elif isinstance(effect, ReadPartitionStates):
                read_id = next(self._ids)
                self._core_reads[read_id] = effect.partitions
                self._effects.append(ZkRead(read_id, tuple(
                    GetOp(partition_state_path(*tp)) for tp in effect.partitions)))
            elif isinstance(effect, SendRequest):
                self._enqueue(effect.broker_id, effect.request)
            elif isinstance(effect, Resign):
                self._effects.append(effect)
                resigned = True
            else:
                self._effects.append(effect)
        if resigned:
            self._clear_queues()
            self._elect_pending = True
            return
        self._drop_queues_of_failed_brokers()

    # --- completions --------------------------------------------------------------------------

    def _on_read(self, event: ReadCompleted) -> None:
        if event.read_id not in self._core_reads and event.read_id != self._job_step:
            return  # a read of a job or a term this node dropped
        if event.session_id != self.session_id:
            self._session_gone(event.session_id)  # its results are never acted on
            return
        partitions = self._core_reads.pop(event.read_id, None)
        if partitions is not None:
            if event.results is None:
                # The connection went: nothing is known; the session event that follows decides
                # (the core's partitions stay as cached until the re-read after revalidation).
                states: dict[TP, LeaderIsr | None] = {}
            else:
                states = self._decode_states(partitions, event.results)
            self._run_core(PartitionStatesRead(states))
        elif event.read_id == self._job_step:
            self._resume(event.results)

    def _on_write(self, event: WriteCompleted) -> None:
        if event.write_id not in self._core_writes and event.write_id != self._job_step:
            return  # a write of a job or a term this node dropped
        assert event.session_id is not None, "a pump states the session a write ran under"
        core_id = self._core_writes.pop(event.write_id, None)
        if event.session_id == self.session_id:
            if core_id is not None:
                self._run_core(WriteCompleted(core_id, event.results))
            else:
                self._resume(event.results)
            return
        # Ran under another session: what it did in ZooKeeper is done and the epoch check
        # judged it (KAFKA-6082), so the core learns the outcome of its own write (a fenced one
        # resigns it); then the term ends, whatever that outcome.
        if core_id is not None:
            self._run_core(WriteCompleted(core_id, event.results))
        self._session_gone(event.session_id)

    def _session_gone(self, session_id: int) -> None:
        """A completion ran under ``session_id``, not the node's session: that session is gone
        (see the module docstring). Nothing outstanding is carried on: the node drops every
        read, write and job, the core resigns, and the node waits for the new session's
        CONNECTED (already on its way: the client connected it) to run again."""
        assert session_id != self.session_id
        self._core_writes.clear()
        self._core_reads.clear()
        if self._job is not None:
            self._job.close()
        self._job = self._job_step = None
        if self.core.active:
            self._run_core(SessionExpired())
        self._elect_pending = False
        self._awaiting_session = True

    # --- jobs ---------------------------------------------------------------------------------

    def _start_job(self, job: _Job) -> None:
        assert self._job is None
        self._job = job
        self._advance(job, None, first=True)

    def _resume(self, results: object) -> None:
        job = self._job
        assert job is not None
        self._advance(job, results, first=False)

    def _advance(self, job: _Job, results: object, *, first: bool) -> None:
        try:
            if first:
                step = next(job)
            elif results is None:
                step = job.throw(_LostError())
            else:
                step = job.send(results)
        except StopIteration:
            self._job = self._job_step = None
            return
        except _LostError:
            self._job = self._job_step = None
            return
        if isinstance(step, ZkRead):
            step = ZkRead(next(self._ids), step.ops)
            self._job_step = step.read_id
        else:
            step = ZkWrite(next(self._ids), step.ops, step.ensure_paths)
            self._job_step = step.write_id
        self._effects.append(step)

    @staticmethod
    def _read(*ops: ReadOp) -> ZkRead:
        return ZkRead(0, ops)

    # --- session and election -----------------------------------------------------------------

    def _on_session(self, event: SessionChanged) -> None:
        self._wall_ms = event.wall_ms or self._wall_ms
        state = event.state
        if state is SessionState.CLOSED:
            self.closed = True
            self.core.active = False
            self._clear_queues()
            return
        if state is SessionState.SUSPENDED:
            self.suspended = True
            return
        if state is SessionState.EXPIRED:
            self.suspended = False
            if self.core.active:
                self._run_core(SessionExpired())
            return
        # CONNECTED
        if event.session_id != self.session_id and self.core.active:
            # A new session: the term's expired first (a notice still on its way). Resign
            # before anything runs on the new session, then run again on it.
            self._run_core(SessionExpired())
            self._elect_pending = False
        self.session_id = event.session_id
        self._awaiting_session = False
        was_suspended, self.suspended = self.suspended, False
        if self.core.active:
            if was_suspended:
                self._start_job(self._revalidate())
        else:
            self._start_job(self._elect())

    def _elect(self) -> _Job:
        """Run for controller; on a win, read the snapshot and hand it to the core."""
        try:
            yield ZkWrite(0, (CreateOp(CONTROLLER_EPOCH_PATH, encode_controller_epoch(0)),),
                          PERSISTENT_PATHS)
            won: tuple[int, int] | None = None
            for _attempt in range(ELECTION_ATTEMPTS_MAX):
                found = yield self._read(ExistsOp(CONTROLLER_PATH, watch=True),
                                         GetOp(CONTROLLER_EPOCH_PATH))
                owner, epoch_node = _as_results(found, 2)
                epoch_data = _as_data(epoch_node)
                assert epoch_data is not None, "/controller_epoch vanished"
                epoch = decode_controller_epoch(epoch_data[0])
                if isinstance(owner, NodeStat):
                    if owner.ephemeral_owner != self.session_id:
                        break  # another broker's: wait for it to go
                    if epoch > self.core.epoch:
                        # Our own election whose reply was lost: the term is ours.
                        won = epoch, epoch_data[1].version
                        break
                    # Ours, from a term this node has resigned: give it up (as Kafka's
                    # controller move does) and run for a new term.
                    yield ZkWrite(0, (DeleteOp(CONTROLLER_PATH, owner.version),))
                    continue
                written = yield ZkWrite(0, (
                    CreateOp(CONTROLLER_PATH,
                             encode_controller(self.config.broker_id, self._wall_ms),
                             ephemeral=True),
                    SetOp(CONTROLLER_EPOCH_PATH, encode_controller_epoch(epoch + 1),
                          epoch_data[1].version),
                ))
                results = _as_op_results(written)
                if multi_succeeded(results):
                    set_result = results[1]
                    assert isinstance(set_result, SetResult)
                    won = epoch + 1, set_result.stat.version
                    break
            if won is None:
                return  # lost: wait for /controller to go or for a (re)connection
            snapshot = yield from self._read_snapshot()
            preferred = yield from self._read_preferred_election()
            topic_configs = yield from self._read_topic_configs()
        except _LostError:
            return  # wait for the (re)connection
        self._clear_queues()
        self._run_core(Elected(won[0], won[1], snapshot))
        # a preferred replica election requested while no controller was active
        self._run_core(PreferredElectionRead(preferred))
        self._run_core(topic_configs)

    def _revalidate(self) -> _Job:
        """After a reconnection: still the owner of ``/controller`` in the same term?"""
        try:
            found = yield self._read(ExistsOp(CONTROLLER_PATH, watch=True),
                                     GetOp(CONTROLLER_EPOCH_PATH))
            owner, epoch_node = _as_results(found, 2)
            epoch_data = _as_data(epoch_node)
            if (not isinstance(owner, NodeStat) or owner.ephemeral_owner != self.session_id
                    or epoch_data is None
                    or epoch_data[1].version != self.core.epoch_zk_version):
                self._run_core(ControllerMoved())
                return
            snapshot = yield from self._read_snapshot()
            preferred = yield from self._read_preferred_election()
            topic_configs = yield from self._read_topic_configs()
        except _LostError:
            self.suspended = True  # the session event that follows decides
            return
        self._clear_queues()
        self._run_core(Elected(self.core.epoch, self.core.epoch_zk_version, snapshot))
        self._run_core(PreferredElectionRead(preferred))
        self._run_core(topic_configs)

    def _read_snapshot(self) -> Generator[_Step, object, ClusterSnapshot]:
        """Design V3 §D 3: everything a new controller reads, arming every watch."""
        found = yield self._read(
            ExistsOp(CONTROLLER_PATH, watch=True),
            ChildrenOp(BROKER_IDS_PATH, watch=True),
            ChildrenOp(TOPICS_PATH, watch=True),
            ChildrenOp(DELETE_TOPICS_PATH, watch=True),
            ExistsOp(REASSIGN_PARTITIONS_PATH, watch=True),
            GetOp(REASSIGN_PARTITIONS_PATH),
            ChildrenOp(ISR_CHANGE_NOTIFICATION_PATH, watch=True),
            ChildrenOp(LOG_DIR_EVENT_NOTIFICATION_PATH, watch=True),
        )
        (_owner, broker_names, topic_names, deletions, _reassign_stat, reassign_node,
         isr_names, log_dir_names) = _as_results(found, 8)
        brokers = yield from self._read_brokers(_as_names(broker_names))
        topics = yield from self._read_topics(_as_names(topic_names))
        states = yield from self._read_states(
            [(t, p) for t, a in sorted(topics.items()) for p in sorted(a.partitions)])
        log_dir_events = yield from self._read_log_dir_events(_as_names(log_dir_names))
        return ClusterSnapshot(
            brokers=brokers,
            topics=topics,
            partition_states={tp: s for tp, s in states.items() if s is not None},
            topics_to_delete=_as_names(deletions),
            reassignment=self._decode_reassignment(reassign_node),
            log_dir_events=log_dir_events,
            isr_change_notifications=_as_names(isr_names),
        )

    # --- watches ------------------------------------------------------------------------------

    def _on_watch(self, event: WatchEvent) -> None:
        path = event.path
        if not self.core.active:
            if (path == CONTROLLER_PATH and event.type is WatchEventType.DELETED
                    and not self._awaiting_session):
                self._start_job(self._elect())
            return
        if self.suspended:
            return  # the revalidation after the reconnection re-reads everything
        job = self._watch_job(path)
        if job is not None:
            self._start_job(job)

    def _watch_job(self, path: str) -> _Job | None:
        if path == CONTROLLER_PATH:
            return self._guarded(self._controller_changed())
        if path == BROKER_IDS_PATH:
            return self._guarded(self._brokers_changed())
        if path == TOPICS_PATH:
            return self._guarded(self._topics_changed())
        if path.startswith(TOPICS_PATH + "/") and path.count("/") == 3:
            return self._guarded(self._topic_changed(path.rsplit("/", 1)[1]))
        if path == DELETE_TOPICS_PATH:
            return self._guarded(self._deletions_changed())
        if path == REASSIGN_PARTITIONS_PATH:
            return self._guarded(self._reassignment_changed())
        if path == PREFERRED_REPLICA_ELECTION_PATH:
            return self._guarded(self._preferred_election_changed())
        if path == CONFIG_CHANGES_PATH:
            return self._guarded(self._read_topic_configs())
        if path == ISR_CHANGE_NOTIFICATION_PATH:
            return self._guarded(self._isr_changed())
        if path == LOG_DIR_EVENT_NOTIFICATION_PATH:
            return self._guarded(self._log_dir_events_changed())
        return None

    def _guarded(self, job: Generator[_Step, object, ControllerInput | None]) -> _Job:
        """Run a watch's reads; hand the result to the core (a lost connection: the session
        event that follows decides)."""
        try:
            result = yield from job
        except _LostError:
            self.suspended = True
            return
        if result is not None:
            self._run_core(result)

    def _controller_changed(self) -> Generator[_Step, object, ControllerInput | None]:
        found = yield self._read(ExistsOp(CONTROLLER_PATH, watch=True))
        (owner,) = _as_results(found, 1)
        if not isinstance(owner, NodeStat) or owner.ephemeral_owner != self.session_id:
            return ControllerMoved()
        return None

    def _brokers_changed(self) -> Generator[_Step, object, ControllerInput | None]:
        found = yield self._read(ChildrenOp(BROKER_IDS_PATH, watch=True))
        (names,) = _as_results(found, 1)
        brokers = yield from self._read_brokers(_as_names(names))
        return BrokersRead(brokers)

    def _topics_changed(self) -> Generator[_Step, object, ControllerInput | None]:
        found = yield self._read(ChildrenOp(TOPICS_PATH, watch=True))
        (listed,) = _as_results(found, 1)
        names = set(_as_names(listed))
        assignments = yield from self._read_topics(sorted(names - set(self.core.topics)))
        states = yield from self._read_states(
            [(t, p) for t, a in sorted(assignments.items()) for p in sorted(a.partitions)])
        return TopicsRead(frozenset(names), assignments,
                          {tp: s for tp, s in states.items() if s is not None})

    def _topic_changed(self, topic: str) -> Generator[_Step, object, ControllerInput | None]:
        assignments = yield from self._read_topics([topic])
        if topic not in assignments:
            return (yield from self._topics_changed())
        known = self.core.topics.get(topic)
        added = sorted(set(assignments[topic].partitions)
                       - set(() if known is None else known.partitions))
        states = yield from self._read_states([(topic, p) for p in added])
        return TopicsRead(frozenset(self.core.topics) | {topic}, assignments,
                          {tp: s for tp, s in states.items() if s is not None})

    def _deletions_changed(self) -> Generator[_Step, object, ControllerInput | None]:
        found = yield self._read(ChildrenOp(DELETE_TOPICS_PATH, watch=True))
        (names,) = _as_results(found, 1)
        return DeleteTopicsRead(_as_names(names))

    def _reassignment_changed(self) -> Generator[_Step, object, ControllerInput | None]:
        found = yield self._read(ExistsOp(REASSIGN_PARTITIONS_PATH, watch=True),
                                 GetOp(REASSIGN_PARTITIONS_PATH))
        _stat, node = _as_results(found, 2)
        return ReassignmentRead(self._decode_reassignment(node))

    def _preferred_election_changed(self) -> Generator[_Step, object, ControllerInput | None]:
        partitions = yield from self._read_preferred_election()
        return PreferredElectionRead(partitions)

    def _read_topic_configs(self) -> Generator[_Step, object, TopicConfigsRead]:
        """Every topic's ``unclean.leader.election.enable`` override, arming the watch on
        ``/config/changes`` (a notice re-reads them all: the controller needs one key)."""
        from impl.broker import configs  # noqa: PLC0415 (the config core's decoder; no cycle)

        # (created if missing: its watch must be armable; NodeExists is the usual answer)
        yield ZkWrite(0, (CreateOp(CONFIG_CHANGES_PATH),), (CONFIG_PATH,))
        found = yield self._read(ChildrenOp(CONFIG_CHANGES_PATH, watch=True),
                                 ChildrenOp(CONFIG_TOPICS_PATH))
        _notices, listed = _as_results(found, 2)
        names = _as_names(listed)
        found = yield self._read(*(GetOp(f"{CONFIG_TOPICS_PATH}/{name}") for name in names))
        unclean: dict[str, bool] = {}
        for name, node in zip(names, _as_results(found, len(names)), strict=True):
            data = _as_data(node)
            if data is None:
                continue
            try:
                value = configs.decode_entity(data[0]).get(UNCLEAN_KEY)
            except configs.InvalidConfigError as error:
                self._effects.append(LogWarning(f"ignoring the config of topic {name!r}: {error}"))
                continue
            if value is not None and value.strip().lower() in ("true", "false"):
                unclean[name] = value.strip().lower() == "true"
        return TopicConfigsRead(unclean)

    def _read_preferred_election(self) -> Generator[_Step, object, tuple[TP, ...]]:
        """``/admin/preferred_replica_election`` (arming its watch); empty when absent. A
        malformed request is logged and deleted (nobody could ever act on it)."""
        found = yield self._read(ExistsOp(PREFERRED_REPLICA_ELECTION_PATH, watch=True),
                                 GetOp(PREFERRED_REPLICA_ELECTION_PATH))
        _stat, node = _as_results(found, 2)
        data = _as_data(node)
        if data is None:
            return ()
        try:
            return decode_preferred_election(data[0])
        except ZnodeFormatError as error:
            self._effects.append(LogWarning(f"ignoring {PREFERRED_REPLICA_ELECTION_PATH}: {error}"))
            yield ZkWrite(0, (DeleteOp(PREFERRED_REPLICA_ELECTION_PATH),))
            return ()

    def _isr_changed(self) -> Generator[_Step, object, ControllerInput | None]:
        found = yield self._read(ChildrenOp(ISR_CHANGE_NOTIFICATION_PATH, watch=True))
        (listed,) = _as_results(found, 1)
        names = _as_names(listed)
        found = yield self._read(*(GetOp(f"{ISR_CHANGE_NOTIFICATION_PATH}/{name}")
                                   for name in names))
        tps: set[TP] = set()
        for name, node in zip(names, _as_results(found, len(names)), strict=True):
            data = _as_data(node)
            if data is None:
                continue
            try:
                tps.update(decode_isr_change(data[0]))
            except ZnodeFormatError as error:
                self._effects.append(LogWarning(f"ignoring ISR change {name}: {error}"))
        states = yield from self._read_states(sorted(tps))
        return IsrChangesRead(names, {tp: s for tp, s in states.items() if s is not None})

    def _log_dir_events_changed(self) -> Generator[_Step, object, ControllerInput | None]:
        found = yield self._read(ChildrenOp(LOG_DIR_EVENT_NOTIFICATION_PATH, watch=True))
        (names,) = _as_results(found, 1)
        events = yield from self._read_log_dir_events(_as_names(names))
        return LogDirEventsRead(events)

    # --- reads and decoding -------------------------------------------------------------------

    def _read_brokers(self, names: Sequence[str]
                      ) -> Generator[_Step, object, dict[int, BrokerRegistration]]:
        ids = [int(name) for name in names if name.isdigit()]
        found = yield self._read(*(GetOp(broker_path(broker_id)) for broker_id in ids))
        brokers: dict[int, BrokerRegistration] = {}
        for broker_id, node in zip(ids, _as_results(found, len(ids)), strict=True):
            data = _as_data(node)
            if data is None:
                continue
            try:
                brokers[broker_id] = decode_broker(broker_id, data[0], data[1].czxid)
            except ZnodeFormatError as error:
                self._effects.append(LogWarning(f"ignoring broker {broker_id}: {error}"))
        return brokers

    def _read_topics(self, names: Sequence[str]
                     ) -> Generator[_Step, object, dict[str, TopicAssignment]]:
        names = sorted(names)
        found = yield self._read(*(GetOp(topic_path(topic), watch=True) for topic in names))
        topics: dict[str, TopicAssignment] = {}
        for topic, node in zip(names, _as_results(found, len(names)), strict=True):
            data = _as_data(node)
            if data is None:
                continue
            try:
                topics[topic] = decode_topic(topic, data[0])
            except ZnodeFormatError as error:
                self._effects.append(LogWarning(f"ignoring topic {topic!r}: {error}"))
        return topics

    def _read_states(self, tps: Sequence[TP]
                     ) -> Generator[_Step, object, dict[TP, LeaderIsr | None]]:
        found = yield self._read(*(GetOp(partition_state_path(*tp)) for tp in tps))
        return self._decode_states(tps, _as_results(found, len(tps)))

    def _decode_states(self, tps: Sequence[TP], results: Sequence[ReadResult]
                       ) -> dict[TP, LeaderIsr | None]:
        states: dict[TP, LeaderIsr | None] = {}
        for tp, node in zip(tps, results, strict=True):
            data = _as_data(node)
            if data is None:
                states[tp] = None
                continue
            try:
                states[tp] = decode_partition_state(tp[0], tp[1], data[0], data[1].version,
                                                    data[1].mzxid)
            except ZnodeFormatError as error:
                # A state the controller cannot read is one it rewrites (as if absent).
                self._effects.append(LogWarning(f"ignoring partition state {tp}: {error}"))
                states[tp] = None
        return states

    def _read_log_dir_events(self, names: Sequence[str]
                             ) -> Generator[_Step, object, dict[str, int]]:
        found = yield self._read(*(GetOp(f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{name}")
                                   for name in names))
        events: dict[str, int] = {}
        malformed: list[str] = []
        for name, node in zip(names, _as_results(found, len(names)), strict=True):
            data = _as_data(node)
            if data is None:
                continue
            try:
                events[name] = decode_log_dir_event(data[0])
            except ZnodeFormatError as error:
                self._effects.append(LogWarning(f"ignoring log dir event {name}: {error}"))
                malformed.append(name)
        if malformed:
            # Deleted as Kafka deletes every notification it processed (the core deletes the
            # others): left there, each would be read and warned about again at every event.
            yield ZkWrite(0, tuple(DeleteOp(f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{name}")
                                   for name in malformed))
        return events

    def _decode_reassignment(self, node: ReadResult) -> tuple[ReassignmentTarget, ...]:
        data = _as_data(node)
        if data is None:
            return ()
        try:
            return decode_reassignment(data[0])
        except ZnodeFormatError as error:
            self._effects.append(LogWarning(f"ignoring {REASSIGN_PARTITIONS_PATH}: {error}"))
            return ()

    # --- request queues -----------------------------------------------------------------------

    def _enqueue(self, broker_id: int, request: ControllerRequest) -> None:
        queue = self._queues.get(broker_id)
        if queue is None:
            queue = self._queues[broker_id] = _Queue(collections.deque())
        if len(queue.requests) >= BROKER_QUEUE_MAX:
            # The broker has not taken BROKER_QUEUE_MAX requests: it is hung. This one is
            # reported undelivered (the controller resends on the broker's next change).
            self._run_core(ResponseReceived(broker_id, request, None))
            return
        request_id = next(self._ids)
        queue.requests.append((request_id, request))
        if len(queue.requests) == 1:
            self._send_head(broker_id, 0)

    def _send_head(self, broker_id: int, backoff_ms: int) -> None:
        queue = self._queues[broker_id]
        if queue.requests:
            request_id, request = queue.requests[0]
            self._in_flight[request_id] = broker_id
            self._effects.append(SendToBroker(request_id, broker_id, request, backoff_ms))

    def _on_request_completed(self, event: RequestCompleted) -> None:
        broker_id = self._in_flight.pop(event.request_id, None)
        if broker_id is None:
            return  # a request of an earlier term
        queue = self._queues[broker_id]
        request_id, request = queue.requests[0]
        assert request_id == event.request_id
        if event.response is None and broker_id in self.core.live_brokers:
            self._send_head(broker_id, REQUEST_RETRY_BACKOFF_MS)
            return
        queue.requests.popleft()
        if broker_id in self.core.live_brokers:
            self._send_head(broker_id, 0)
        self._run_core(ResponseReceived(broker_id, request, event.response))

    def _drop_queues_of_failed_brokers(self) -> None:
        """A broker the core no longer holds live loses its queued requests, each reported
        undelivered; only the one in flight may still reach it (Kafka's ControllerChannelManager
        ``removeBroker`` clears the broker's queue and closes its connection). Sent on, a
        LeaderAndIsr queued before the failure reached the broker's running process after its
        session expired, even after a deletion of the topic was asked (fuzz seed 11608)."""
        live, in_flight = self.core.live_brokers, self._in_flight
        for broker_id in sorted(self._queues):
            queue = self._queues[broker_id]
            if broker_id in live or all(rid in in_flight for rid, _ in queue.requests):
                continue
            dropped = [r for r in queue.requests if r[0] not in in_flight]
            queue.requests = collections.deque(r for r in queue.requests if r[0] in in_flight)
            for _request_id, request in dropped:
                self._run_core(ResponseReceived(broker_id, request, None))

    def _clear_queues(self) -> None:
        self._queues.clear()
        self._in_flight.clear()


# --- result shapes ----------------------------------------------------------------------------


def _as_results(found: object, count: int) -> tuple[ReadResult, ...]:
    assert isinstance(found, tuple), found
    assert len(found) == count, (found, count)
    return found


def _as_data(node: ReadResult) -> tuple[bytes, NodeStat] | None:
    if node is None:
        return None
    assert isinstance(node, tuple), node
    data, stat = node
    assert isinstance(data, bytes), node
    assert isinstance(stat, NodeStat), node
    return data, stat


def _as_names(node: ReadResult) -> tuple[str, ...]:
    if node is None:
        return ()
    assert isinstance(node, tuple), node
    return tuple(str(name) for name in node)


def _as_op_results(found: object) -> Sequence[OpResult]:
    assert isinstance(found, list | tuple), found
    return found


__all__ = [
    "ChildrenOp",
    "ControllerNode",
    "ExistsOp",
    "GetOp",
    "LogWarning",
    "NodeEffect",
    "NodeInput",
    "ReadCompleted",
    "ReadOp",
    "ReadResult",
    "RequestCompleted",
    "SendToBroker",
    "SessionChanged",
    "ZkRead",
]
