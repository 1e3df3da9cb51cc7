"""The nodes of the cluster simulator: brokers, controller candidates, a producer, a consumer.

Each simulated broker is a pump around the objects the trio broker runs: the storage engine's
:class:`~impl.storage.manager.LogManager` over a simulated disk and the broker node
(:class:`impl.broker.node.BrokerNode`), which owns every replication decision (produce and
acks, both sides of fetch, HW, ISR changes, truncation, controller requests and their fencing,
idempotent-producer state). :class:`SimBroker` turns messages, ticks and ZooKeeper results into
node inputs and carries out the node's effects: messages over
:class:`conformance.network.SimNetwork`, appends on the simulated disk (each completion stepped
at once), ISR writes to the simulated ZooKeeper, and the checkers' hooks. Each broker also hosts
a controller candidate: the real :class:`~impl.controller.controller.Controller` core over the
simulated ZooKeeper.

Controller-to-broker requests go through one ordered channel per (controller, broker), one
request in flight, retransmitted until answered (Kafka's ``RequestSendThread`` over TCP): the
network may lose, delay, duplicate or reorder its messages, the channel's sequence numbers make
delivery exactly once and in order, as TCP does.

This module is a sans-IO core.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from conformance.disk import SimDisk
from conformance.move_sim import SimLock
from impl.broker import group_coordinator as gc
from impl.broker.fetch_rounds import FollowerRounds
from impl.broker.node import (
    Append,
    Appended,
    BrokerNode,
    DirsFailed,
    Effect,
    EpochCall,
    EpochReply,
    FetchCall,
    FetchReply,
    GroupCall,
    HighWatermarkMoved,
    IsrScan,
    IsrWritten,
    LeaderAndIsr,
    ListOffsetsCall,
    ListOffsetsReply,
    NodeConfig,
    OtherControllerRequest,
    Produce,
    ProduceReply,
    Reply,
    ReportDirFailure,
    RoleChanged,
    Send,
    StopReplica,
    Tick,
    WriteIsr,
    append_error,
)
from impl.broker.node_store import LogManagerStore, read_whole_batches
from impl.broker.purgatory import FetchBudget, Purgatory, appended, changes_of, fetch_answered
from impl.broker.replication import ReplicaRole, ReplicaState, TruncationPolicy
from impl.controller.coordinator import (
    ConnectionLossError,
    CreateOp,
    CreateResult,
    SetOp,
    SetResult,
    multi_error,
)
from impl.controller.requests import (
    ControllerResponse,
    LeaderAndIsrRequest,
    StopReplicaRequest,
)
from impl.controller.znodes import (
    ISR_CHANGE_NOTIFICATION_PATH,
    ISR_CHANGE_PREFIX,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    LOG_DIR_EVENT_PREFIX,
    broker_path,
    encode_broker,
    encode_isr_change,
    encode_log_dir_event,
    encode_partition_state,
    partition_state_path,
)
from impl.storage import record_batch as rb
from impl.storage import replica_move as rm
from impl.storage.config import StorageConfig
from impl.storage.errors import StorageError
from impl.storage.manager import LogManager, PartitionLog
from impl.storage.names import TopicPartition
from impl.trace import TraceEvent

from ._coordinator_pump import ControllerCall, ControllerReply, SimController

if TYPE_CHECKING:
    from .cluster_sim import ClusterWorld

__sans_io__ = True


NONE: Final = 0

#: Node ids of the clients (brokers are 0..B-1).
PRODUCER_NODE: Final = 1000
CONSUMER_NODE: Final = 1001

#: A fetch returns at most this many bytes (small: a lagging follower needs several rounds).
FETCH_MAX_BYTES: Final = 1200
#: Milliseconds after which an unanswered request is sent again (and a follower's round to a
#: leader is given up, as the trio fetcher's I/O timeout is the node's retry interval).
RETRY_MS: Final = 4
#: A follower Fetch's byte budget over its partitions (``fetch.max.bytes``): two partitions'
#: worth, so that a round of more lagging partitions reaches it, as a follower of many does.
ROUND_MAX_BYTES: Final = 2 * FETCH_MAX_BYTES
#: ``replica.fetch.backoff.ms`` (simulated): a follower refused by its leader asks again after
#: this long. Kafka's 1000 ms is 1/30 of its ``replica.lag.time.max.ms``; the simulated lag
#: bound is 40 ms.
FETCH_BACKOFF_MS: Final = 1
#: ``replica.fetch.wait.max.ms`` and ``replica.fetch.min.bytes`` (simulated): a follower's fetch
#: that finds nothing waits at the leader this long for new records (a delayed fetch; below
#: RETRY_MS, as Kafka's 500 ms are below its request timeout), and one byte answers it.
FETCH_MAX_WAIT_MS: Final = 3
FETCH_MIN_BYTES: Final = 1
#: A produce unanswered for this long is retried by the client and dropped by the leader.
PRODUCE_TIMEOUT_MS: Final = 30
#: The chance that an append waits for its partition lock until the broker's next tick (a
#: LeaderAndIsr, a fetch, a produce may be stepped meanwhile), and the most ticks it waits
#: (in order: a lock is FIFO).
APPEND_WAITS_PROBABILITY: Final = 0.5
APPEND_WAIT_TICKS_MAX: Final = 4


# --- messages ------------------------------------------------------------------------------
#
# Named tuples: immutable (the network may deliver one message twice) and cheap to build (a
# frozen dataclass sets each field through ``object.__setattr__``; a run builds ~100k messages).


class RoundCall(NamedTuple):
    """A follower's round (:class:`impl.broker.fetch_rounds.Round`): one OffsetForLeaderEpoch
    or one Fetch naming its partitions, with the request's byte budget."""

    round_id: int
    calls: tuple[Any, ...]
    max_bytes: int


class RoundReply(NamedTuple):
    """The leader's answer to a round: one answer per partition it names, in its order (their
    request ids are not read: the wire carries none)."""

    round_id: int
    answers: tuple[Any, ...]


class ProduceCall(NamedTuple):
    """A produce of one idempotent batch (``acks=all`` unless the prober asks otherwise)."""

    request_id: int
    tp: TopicPartition
    batch: bytes
    acks: int = -1


# --- helpers -------------------------------------------------------------------------------


def _answer_in(effects: list[Effect], call: Any) -> tuple[int, Any] | None:
    """Where among a step's effects the node answered ``call`` (a fetch or an epoch call: the
    reply of its kind, request id and partition), and that reply; None when it did not."""
    kind = FetchReply if type(call) is FetchCall else EpochReply
    for index, effect in enumerate(effects):
        if type(effect) is Reply:
            reply: Any = effect.message
            if type(reply) is kind and reply.request_id == call.request_id and (
                    reply.tp == call.tp):
                return index, reply
    return None


#: (base offset, next offset, CRC-32C, producer id, producer epoch, base sequence)
BatchKey = tuple[int, int, int, int, int, int]


def batch_keys(data: bytes) -> list[BatchKey]:
    """The keys of the whole batches in ``data``."""
    keys: list[BatchKey] = []
    for header in rb.iter_batches(data):
        keys.append((header.base_offset, header.next_offset, header.crc, header.producer_id,
                     header.producer_epoch, header.base_sequence))
    return keys


class _TaggedSink:
    """Tags storage events with the broker (``t-0@1``), as the move simulator does."""

    def __init__(self, broker: int, emit: Callable[[TraceEvent], None]) -> None:
        self._suffix = f"@{broker}"
        self._emit = emit

    def emit(self, event: TraceEvent) -> None:
        self._emit(TraceEvent(event.machine, event.event, event.subject + self._suffix,
                              event.state_before, event.state_after, event.fields))


class _DirectSink:
    def __init__(self, emit: Callable[[TraceEvent], None]) -> None:
        self.emit = emit


# --- the broker ----------------------------------------------------------------------------


class _SimStore(LogManagerStore):
    """The node's storage port on a simulated broker: the checkers hear of every change."""

    def __init__(self, manager: LogManager, broker: SimBroker) -> None:
        super().__init__(manager)
        self._broker = broker

    def create(self, tp: TopicPartition, is_new: bool) -> None:
        """Create the log, then tell the checkers (DIR_FAILURE_ISOLATION)."""
        super().create(tp, is_new)
        self._broker.world.replica_created(self._broker, tp, is_new)

    def delete(self, tp: TopicPartition) -> None:
        """Delete the log (the checkers forget the replica even if that failed)."""
        try:
            super().delete(tp)
        finally:
            self._broker.world.replica_deleted(self._broker, tp)

    def truncate(self, tp: TopicPartition, offset: int) -> None:
        """Truncate, then let the checkers re-read the replica."""
        super().truncate(tp, offset)
        self._broker.world.truncated(self._broker, tp, offset)

    def truncate_fully(self, tp: TopicPartition, start_offset: int) -> None:
        """Start afresh at the leader's log start, then let the checkers re-read the replica."""
        super().truncate_fully(tp, start_offset)
        self._broker.world.truncated(self._broker, tp, start_offset)


#: a parked fetch: (the follower, its request id, the partition), or a parked round: (the
#: follower, its round id, None)
ParkedKey = tuple[int, int, TopicPartition | None]


class SimBroker:
    """One simulated broker: a LogManager on its own disk and the broker node
    (:class:`impl.broker.node.BrokerNode`) that ships, driven by messages, ticks and the
    simulated ZooKeeper. It carries inputs and effects and decides nothing.

    A follower sends each leader one round at a time (:mod:`impl.broker.fetch_rounds`, the
    trio fetcher's own rules): the node's calls wait in its ``FollowerRounds``, a
    ``RoundCall`` carries a round, a ``RoundReply`` its answers, matched back to the calls by
    the same core.

    A follower's fetch that finds nothing is parked, as the trio broker's Fetch handler parks
    it (a round whole, a lone call with ``fetch_rounds`` off): :mod:`impl.broker.purgatory`
    says when it is answered and which changes (the node's effects, a completed append) wake
    it; a woken or expired one is asked again (``FetchCall.asked_again``) once the input that
    woke it is carried out, as the trio broker's handler runs after the task that woke it."""

    def __init__(self, world: ClusterWorld, broker_id: int) -> None:
        self.world = world
        self.id = broker_id
        self._clock = world.clock
        self._network = world.network
        config = world.config
        self.log_dirs = tuple(f"/sim/broker-{broker_id}/data-{i}" for i in range(config.log_dirs))
        self.disk = SimDisk(self.log_dirs)
        self.storage_config = StorageConfig(
            log_dirs=self.log_dirs, broker_id=broker_id, segment_bytes=config.segment_bytes,
            index_interval_bytes=256, move_chunk_bytes=config.chunk_bytes,
        )
        self.storage_sink = _TaggedSink(broker_id, world.emit)
        self.sink = _DirectSink(world.emit)
        self.node_config = NodeConfig(
            broker_id=broker_id,
            min_insync_replicas=config.min_insync_replicas,
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            fetch_backoff_ms=FETCH_BACKOFF_MS,
            request_retry_ms=RETRY_MS,
            fetch_max_bytes=FETCH_MAX_BYTES,
            truncation_policy=(TruncationPolicy.HIGH_WATERMARK
                               if config.variant == "truncate_to_hw"
                               else TruncationPolicy.LEADER_EPOCH),
            isr_expanded_early=config.variant == "isr_expanded_early",
            isr_scan_step_partitions=config.isr_scan_step_partitions,
        )
        self.alive = False
        self.incarnation = 0
        self.session = -1
        self.broker_epoch = -1
        #: the broker epoch since which every shutdown was clean (KIP-966)
        self.clean_since_epoch = -1
        self.manager: LogManager | None = None
        self.store: _SimStore | None = None
        self.node: BrokerNode | None = None
        self.controller: SimController | None = None
        self.restarts = 0
        self.failed_dirs_seen: list[str] = []
        self.channels: dict[int, tuple[int, ControllerResponse]] = {}
        self._controller_requests = 0
        #: the node's appends waiting for the partition lock (the tick they are carried out)
        self._waiting_appends: list[tuple[int, Append]] = []
        self._ticks = 0
        self._append_rng = world.append_rng(broker_id)
        #: group request ids this incarnation took (a duplicated request is dropped, as TCP
        #: delivers once)
        self._group_requests: set[int] = set()
        self._member_ids = 0
        #: a log-dir event notification that the ZooKeeper connection's loss held back
        self._dir_failure_unreported = False
        #: the delayed fetches: each parked call and its deadline (simulated ms), the changes
        #: that wake them, and those woken or expired, to be asked again
        self._parked: dict[ParkedKey, tuple[FetchCall, int]] = {}
        self._purgatory: Purgatory[ParkedKey] = Purgatory()
        self._to_ask: list[ParkedKey] = []
        self._asking = False
        self._delays_fetches = config.delayed_fetches
        #: a follower sends each leader one round at a time (:mod:`impl.broker.fetch_rounds`,
        #: as the trio fetcher); off, each of the node's calls is a message of its own
        self._fetch_rounds = config.fetch_rounds
        self._rounds: FollowerRounds | None = None
        #: the parked rounds: the follower, the round and its deadline (simulated ms)
        self._parked_rounds: dict[ParkedKey, tuple[int, RoundCall, int]] = {}
        #: parked fetches answered later (woken or expired)
        self.delayed_fetches = 0

    # --- the node's state, for the checkers --------------------------------------------------

    @property
    def states(self) -> dict[TopicPartition, ReplicaState]:
        """The node's replica states (empty while down)."""
        return {} if self.node is None else self.node.states

    @property
    def follower_incarnations(self) -> dict[TopicPartition, dict[int, int]]:
        """Per led partition: the incarnation each follower last fetched from."""
        return {} if self.node is None else self.node.follower_incarnations

    # --- life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Open the logs (recovery), register in ZooKeeper, start the controller candidate."""
        world = self.world
        self.failed_dirs_seen = []
        self._dir_failure_unreported = False
        self.channels = {}
        self._waiting_appends = []
        self._forget_parked()
        self.manager = LogManager.open(self.storage_config, disk=self.disk, clock=world.clock,
                                       trace=self.storage_sink,
                                       on_dir_failure=self.failed_dirs_seen.append,
                                       lock_factory=SimLock)
        self.alive = True
        self.incarnation += 1
        self.store = _SimStore(self.manager, self)
        self.node = BrokerNode(self.node_config, self.store, trace=self.sink,
                               clock_ms=self.now_ms, wall_ms=world.clock.wall_ms,
                               incarnation=self.incarnation)
        self._group_requests = set()
        self._rounds = FollowerRounds(RETRY_MS) if self._fetch_rounds else None
        if world.config.groups:
            from ._cluster_groups import COMMIT_TIMEOUT_MS, coordinator_config  # noqa: PLC0415
            self.node.host_groups(gc.GroupCoordinator(
                self.id, coordinator_config(), new_member_suffix=self._member_suffix,
                trace=self.sink), COMMIT_TIMEOUT_MS)
        self.clean_since_epoch = self.manager.clean_since_broker_epoch
        self._register_session()
        self.controller = SimController(world, self)
        self.node.started()

    def _member_suffix(self) -> str:
        """A new member id's suffix: unique in the run, the same for the same seed."""
        self._member_ids += 1
        return f"{self.id}.{self.incarnation}.{self._member_ids}"

    def _register_session(self) -> None:
        """Open a ZooKeeper session and register ``/brokers/ids/<id>``; its czxid is the new
        broker epoch (older controller requests are fenced). The registration carries the
        clean-since epoch (KIP-966): the markers' at a start, else (after an unclean shutdown)
        the first registration's own epoch; a re-registration of the process keeps it."""
        world = self.world
        assert self.node is not None
        self.session = world.zk.open_session(6_000)
        results = world.zk.multi(self.session, [CreateOp(
            broker_path(self.id), encode_broker(f"broker-{self.id}", 9092, None,
                                                world.clock.wall_ms(),
                                                clean_since_broker_epoch=self.clean_since_epoch),
            ephemeral=True)])
        assert isinstance(results[0], CreateResult), results
        stat = world.zk.exists(self.session, broker_path(self.id), False)
        assert stat is not None
        self.broker_epoch = stat.czxid
        if self.clean_since_epoch < 0:
            self.clean_since_epoch = self.broker_epoch
        self.node.register(self.broker_epoch)

    def expire_session(self) -> None:
        """The broker's ZooKeeper session expires (its process keeps running, its node keeps
        its state): the controller sees it leave."""
        zk = self.world.zk
        if zk.session_alive(self.session):
            zk.expire_session(self.session)

    def register(self) -> None:
        """Register again after a session expiry (Kafka's re-registration), same process: it
        lost nothing, its clean-since epoch stands."""
        self._register_session()

    def crash(self, *, lose_unflushed: bool) -> None:
        """The process dies: memory is lost; the disk keeps what its contract says."""
        world = self.world
        assert self.manager is not None
        assert self.node is not None
        self.node.crashed()
        for tp in sorted(self.manager.partitions()):
            move = self.manager.move_state(tp)
            if move.state is not rm.MoveState.NONE:
                self.storage_sink.emit(rm.step(move, rm.MoveInput(rm.MoveEvent.CRASHED)).trace)
        if not lose_unflushed:  # a clean shutdown: flushed, then the markers (KIP-966)
            with contextlib.suppress(StorageError, OSError):
                self.manager.close(clean_since_epoch=self.clean_since_epoch)
        self.disk.crash(world.crash_rng(self.id))
        self.alive = False
        self.restarts += 1
        if world.zk.session_alive(self.session):
            world.zk.expire_session(self.session)
        if self.controller is not None:
            self.controller.stop()
        self.controller = None
        world.network.drop_to(self.id)
        self._forget_parked()
        self._rounds = None
        self.manager = None
        self.store = None
        self.node = None

    def log(self, tp: TopicPartition) -> PartitionLog | None:
        """The online log of ``tp`` here, or ``None``."""
        store = self.store
        return None if store is None else store.log(tp)

    def now_ms(self) -> int:
        """Simulated milliseconds."""
        return self._clock.monotonic_ns() // 1_000_000

    # --- the pump ------------------------------------------------------------------------------

    def step(self, event: object) -> None:
        """Step the node and carry out its effects (completions stepped at once, in order),
        then ask again the delayed fetches they woke."""
        node = self.node
        assert node is not None
        self._carry_out(node, node.step(event))
        self._ask_again()

    def _carry_out(self, node: BrokerNode, effects: list[Effect]) -> None:
        network = self._network
        for effect in effects:
            kind = type(effect)
            e: Any = effect  # (dispatched on its exact type: the hot path avoids isinstance)
            if kind is Reply:
                message = e.message
                if type(message) is tuple:  # a controller response: (channel, seq) request id
                    (channel, seq), response = message
                    self.channels[channel] = (seq, response)
                    message = ControllerReply(channel, seq, response)
                network.send(self.id, e.client, message)
            elif kind is Send:
                rounds = self._rounds
                message = e.message
                if rounds is not None and type(message) in (EpochCall, FetchCall):
                    rounds.add(e.target, message)
                else:
                    network.send(self.id, e.target, message)
            elif kind is Append:
                if self._append_rng.chance(APPEND_WAITS_PROBABILITY):
                    # it waits for the partition lock (a mover's swap, validation off the
                    # loop): carried out some ticks later, the node stepping other inputs
                    self._waiting_appends.append(
                        (self._ticks + self._append_rng.randint(1, APPEND_WAIT_TICKS_MAX), e))
                else:
                    self._append(node, e)
            elif kind is HighWatermarkMoved:
                self.world.hw_moved(self, e.tp, e.high_watermark)
            elif kind is WriteIsr:
                self._write_isr(node, e)
            elif kind is RoleChanged:
                state = e.state
                if state is not None and state.role is not ReplicaRole.OFFLINE:
                    self.world.role_changed(self, e.tp, e.previous, state)
            elif kind is ReportDirFailure:
                self._dir_failure_unreported = True
                self._report_dir_failure()
        if self._parked or self._parked_rounds:
            for change in changes_of(effects):
                self._to_ask.extend(self._purgatory.woken(change))

    def _append(self, node: BrokerNode, effect: Append) -> None:
        tp = effect.tp
        partition = self.log(tp)

        def guard() -> bool:  # (asked holding the partition lock, as the trio broker does)
            return node.append_wanted(effect)

        try:
            if partition is None:
                raise StorageError(f"{tp} is not online")
            base = partition.log_end_offset
            if effect.leader_epoch is None:
                info = partition.append_as_follower_nowait(effect.records, guard=guard)
            else:
                info = partition.append_as_leader_nowait(effect.records, effect.leader_epoch,
                                                         effect.timestamp_window_ms, guard=guard)
            self.world.appended(self, tp, partition, base)
            done = Appended(tp, effect.token, NONE, info[0], info[1], info[2])
        except (StorageError, OSError) as error:
            code, message = append_error(error)
            done = Appended(tp, effect.token, code, error_message=message)
        self._carry_out(node, node.step(done))
        if self._parked or self._parked_rounds:
            self._to_ask.extend(self._purgatory.woken(appended(tp)))

    # --- delayed fetches ----------------------------------------------------------------------

    def _fetch(self, call: FetchCall, deadline_ms: int) -> None:
        """Step a follower's fetch; park it when the purgatory says it is not answered yet
        (its answer withheld, every other effect carried out first: as in the trio broker, it
        starts waiting after its own step, whose changes do not wake it)."""
        node = self.node
        assert node is not None
        effects = node.step(call)
        key = (call.replica, call.request_id, call.tp)
        park = False
        found = _answer_in(effects, call)
        if found is not None:
            index, reply = found
            if key not in self._parked and not fetch_answered(
                    total_bytes=len(reply.records), min_bytes=FETCH_MIN_BYTES,
                    errors=reply.error != NONE, now=self.now_ms(), deadline=deadline_ms,
                    stopping=False):
                del effects[index]
                park = True
            elif call.asked_again:
                self.delayed_fetches += 1
        self._carry_out(node, effects)
        if park and self.node is node:
            self._parked[key] = (call, deadline_ms)
            self._purgatory.watch(key, (call.tp,), records_only=True)

    def _ask_again(self) -> None:
        """Ask the woken and expired delayed fetches again, in the order they woke (each
        answered, or parked again until its deadline)."""
        if self._asking or not self._to_ask:
            return
        self._asking = True
        try:
            to_ask = self._to_ask
            while to_ask:
                key = to_ask.pop(0)
                if key[2] is None:
                    parked_round = self._parked_rounds.pop(key, None)
                    if parked_round is not None and self.node is not None:
                        source, round_call, deadline_ms = parked_round
                        self._answer_round(source, round_call, deadline_ms, asked_again=True)
                    continue
                parked = self._parked.pop(key, None)
                if parked is not None and self.node is not None:
                    call, deadline_ms = parked
                    self._fetch(call._replace(asked_again=True), deadline_ms)
        finally:
            self._asking = False

    def _expire_parked(self) -> None:
        """The delayed fetches whose deadline passed are asked again (and so answered)."""
        now_ms = self.now_ms()
        for key, (_, deadline_ms) in list(self._parked.items()):
            if deadline_ms <= now_ms:
                self._purgatory.forget(key)
                self._to_ask.append(key)
        for key, (_, _, deadline_ms) in list(self._parked_rounds.items()):
            if deadline_ms <= now_ms:
                self._purgatory.forget(key)
                self._to_ask.append(key)

    # --- rounds -------------------------------------------------------------------------------

    def _answer_round(self, source: int, round_call: RoundCall, deadline_ms: int, *,
                      asked_again: bool = False) -> None:
        """A follower's round, as the trio broker's OffsetForLeaderEpoch and Fetch handlers
        answer it: each partition stepped in turn (a fetch's within what is left of the
        request's byte budget), every other effect carried out; a Fetch that found nothing is
        parked whole and asked again, every partition, when woken or expired."""
        node = self.node
        assert node is not None
        key: ParkedKey = (source, round_call.round_id, None)
        if not asked_again and key in self._parked_rounds:
            return  # (a copy of a round that waits here: the network duplicated it)
        answers: list[Any] = []
        budget = FetchBudget(round_call.max_bytes)
        fetch = False
        for asked in round_call.calls:
            call: Any = asked
            if type(asked) is FetchCall:
                fetch = True
                call = asked._replace(max_bytes=budget.limit(asked.max_bytes),
                                      asked_again=asked_again)
            effects = node.step(call)
            found = _answer_in(effects, call)
            if found is None:
                raise AssertionError(f"no answer for {call.tp} in a round")
            index, reply = found
            del effects[index]
            self._carry_out(node, effects)
            if self.node is not node:  # (a dir failure took the process's node: it is gone)
                return
            answers.append(reply._replace(request_id=-1))  # (the wire has no request ids)
            if type(reply) is FetchReply:
                budget.took(len(reply.records), error=reply.error != NONE)
        if fetch and self._delays_fetches and not budget.answered(
                min_bytes=FETCH_MIN_BYTES, now=self.now_ms(), deadline=deadline_ms,
                stopping=False):
            self._parked_rounds[key] = (source, round_call, deadline_ms)
            self._purgatory.watch(key, tuple(call.tp for call in round_call.calls),
                                  records_only=True)
            return
        if asked_again and fetch:
            self.delayed_fetches += 1
        self._network.send(self.id, source, RoundReply(round_call.round_id, tuple(answers)))

    def _on_round_reply(self, source: int, reply: RoundReply) -> None:
        """A leader answered a round: the answers matched to the node's calls are stepped in
        its order (each fetch's append carried out before the next, as the trio fetcher); a
        reply to a round no longer in flight is dropped."""
        rounds = self._rounds
        if rounds is None:
            return
        sent = rounds.in_flight(source)
        if sent is None or sent.round_id != reply.round_id:
            return
        for answer in rounds.answered(sent, list(reply.answers)):
            if self.node is None:
                return
            self.step(answer)
        if sent.asks and self.node is not None:
            # (the trio fetcher steps a tick after an ask: the partitions whose truncation
            # ended fetch in the next round, not at the next periodic tick)
            self.step(Tick(periodic=False))

    def _send_rounds(self) -> None:
        """Give up the rounds overdue (their calls refused), then send each leader its next
        round where none is in flight."""
        rounds = self._rounds
        if rounds is None or self.node is None:
            return
        now_ms = self.now_ms()
        for leader in rounds.overdue(now_ms):
            for answer in rounds.lost(leader):
                self.step(answer)
        for leader in rounds.leaders():
            sent = rounds.next_round(leader, now_ms)
            if sent is not None:
                self._network.send(self.id, leader,
                                   RoundCall(sent.round_id, sent.calls, ROUND_MAX_BYTES))

    def _forget_parked(self) -> None:
        """The process died or starts afresh: its delayed fetches are gone."""
        self._parked.clear()
        self._parked_rounds.clear()
        self._purgatory = Purgatory()
        self._to_ask.clear()

    def _report_dir_failure(self) -> None:
        """Write the log-dir event notification; while the ZooKeeper connection is down, again
        at each tick until it is back (Kafka's ZooKeeper client holds a request until it
        reconnects)."""
        zk = self.world.zk
        if not zk.session_alive(self.session):
            self._dir_failure_unreported = False
            return
        try:
            zk.multi(self.session, [CreateOp(
                f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{LOG_DIR_EVENT_PREFIX}",
                encode_log_dir_event(self.id), sequential=True)])
        except ConnectionLossError:
            return
        self._dir_failure_unreported = False

    def _write_isr(self, node: BrokerNode, effect: WriteIsr) -> None:
        """The leader's ISR change: one ``multi`` (state conditional on its zkVersion, plus an
        ISR change notification)."""
        tp = effect.tp
        zk = self.world.zk
        version: int | None = None
        if zk.session_alive(self.session):
            try:
                results = zk.multi(self.session, [
                    SetOp(partition_state_path(tp.topic, tp.partition),
                          encode_partition_state(effect.leader, effect.leader_epoch, effect.isr,
                                                 effect.controller_epoch,
                                                 effect.isr_broker_epochs or None),
                          effect.partition_epoch),
                    CreateOp(f"{ISR_CHANGE_NOTIFICATION_PATH}/{ISR_CHANGE_PREFIX}",
                             encode_isr_change([(tp.topic, tp.partition)]), sequential=True),
                ])
            except ConnectionLossError:  # (as the trio broker: the write failed, no version)
                results = []
            if results and multi_error(results) is None:
                result = results[0]
                assert isinstance(result, SetResult)
                version = result.stat.version
        self._carry_out(node, node.step(IsrWritten(tp, effect.isr, version)))
        if version is not None:
            self.world.isr_written(self, tp, effect.previous_isr, effect.isr)

    # --- dir failures ----------------------------------------------------------------------

    def after_io(self) -> None:
        """Hand dir failures the storage engine reported to the node."""
        if not self.failed_dirs_seen or self.node is None:
            return
        self.failed_dirs_seen.clear()
        self.step(DirsFailed())

    # --- inputs --------------------------------------------------------------------------------

    def tick(self, *, periodic: bool = True) -> None:
        """Time passed: the appends that waited are carried out; the node's follower
        requests, produce timeouts and ISR scan (the next step of a scan in progress)."""
        node = self.node
        assert node is not None
        self._ticks += 1
        if self._parked:
            self._expire_parked()
            self._ask_again()
        waiting = self._waiting_appends
        while waiting and waiting[0][0] <= self._ticks:
            self._append(node, waiting.pop(0)[1])
        self.step(Tick(periodic))
        if not periodic and self.node is not None and self.node.isr_scan_pending:
            # (the trio broker goes on with a long ISR scan in steps, its other tasks running
            # between them: here one step a pump, messages delivered between them)
            self.step(IsrScan())
        if self.failed_dirs_seen:
            self.after_io()
        if self._dir_failure_unreported:
            self._report_dir_failure()
        self._send_rounds()

    def on_controller_call(self, source: int, call: ControllerCall) -> None:
        """Exactly-once, in-order delivery per channel (TCP), then the request itself."""
        last = self.channels.get(call.channel)
        if last is not None and call.seq <= last[0]:
            if call.seq == last[0]:
                self._network.send(self.id, source, ControllerReply(call.channel, call.seq,
                                                                    last[1]))
            return
        if last is not None and call.seq != last[0] + 1:
            return  # a gap: the sender retransmits in order
        # (an unknown channel is a new connection: this incarnation accepts its head request)
        request = call.request
        request_id = (call.channel, call.seq)
        if isinstance(request, LeaderAndIsrRequest):
            self.step(LeaderAndIsr(source, request_id, request))
        elif isinstance(request, StopReplicaRequest):
            self.step(StopReplica(source, request_id, request))
        else:
            self.step(OtherControllerRequest(source, request_id, request))

    def deliver(self, source: int, payload: object) -> None:
        """Dispatch one message addressed to this broker."""
        if not self.alive:
            return
        kind = type(payload)
        if kind is ProduceCall:
            call: Any = payload
            self.step(Produce(source, call.request_id, call.tp, call.batch, call.acks,
                              PRODUCE_TIMEOUT_MS))
        elif kind is ControllerCall:
            self.on_controller_call(source, payload)  # type: ignore[arg-type]
        elif kind is ControllerReply:
            if self.controller is not None:
                self.controller.on_reply(payload)  # type: ignore[arg-type]
        elif kind is RoundCall:
            self._answer_round(source, payload,  # type: ignore[arg-type]
                               self.now_ms() + FETCH_MAX_WAIT_MS)
            self._ask_again()
        elif kind is RoundReply:
            self._on_round_reply(source, payload)  # type: ignore[arg-type]
        elif kind is FetchCall and payload.replica >= 0 and (  # type: ignore[attr-defined]
                self._delays_fetches):
            self._fetch(payload, self.now_ms() + FETCH_MAX_WAIT_MS)  # type: ignore[arg-type]
            self._ask_again()
        elif kind is GroupCall:
            request_id = payload.request.request_id  # type: ignore[attr-defined]
            if request_id in self._group_requests:
                return
            self._group_requests.add(request_id)
            self.step(payload)
            request = payload.request  # type: ignore[attr-defined]
            if type(request) is gc.OffsetFetch:
                self.world.offsets_fetch_served(self, request)
        else:
            self.step(payload)
        if self.failed_dirs_seen:
            self.after_io()
        self._send_rounds()


#: the node's messages, carried by the simulated network (re-exported for the clients)
read_bytes = read_whole_batches

__all__ = [
    "CONSUMER_NODE",
    "PRODUCER_NODE",
    "EpochCall",
    "EpochReply",
    "FetchCall",
    "FetchReply",
    "ListOffsetsCall",
    "ListOffsetsReply",
    "ProduceCall",
    "ProduceReply",
    "SimBroker",
    "read_bytes",
]
