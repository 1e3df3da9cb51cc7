"""The nodes of the cluster simulator: brokers, controller candidates, a producer, a consumer.

Each broker is a second shell (next to the trio one in ``impl/broker``) around the same cores:
the storage engine's :class:`~impl.storage.manager.LogManager` over a simulated disk, the
replication core (:mod:`impl.broker.replication`: controller fencing, LeaderAndIsr and
StopReplica decisions, HW, ISR changes, follower truncation) and the idempotence core
(:mod:`impl.broker.producer_state`). Each broker also hosts a controller candidate: the real
:class:`~impl.controller.controller.Controller` core over the simulated ZooKeeper. Everything a
node says to another node is a message over :class:`conformance.network.SimNetwork`; ZooKeeper
is reached directly (its own fault model: session expiry).

Where the shell differs from ``impl/broker/replica_manager.py`` (each a Kafka behaviour):

* an ``acks=all`` produce completes only while the ISR still has ``min.insync.replicas``
  members (Kafka's ``checkEnoughReplicasReachOffset``), else NOT_ENOUGH_REPLICAS_AFTER_APPEND;
* the idempotence state of a partition is rebuilt from the log whenever the replica becomes
  leader (follower appends and truncation change the log under it);
* a leader forgets what it knew of a follower fetching from a new incarnation;
* a follower refused by its leader (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
  UNKNOWN_LEADER_EPOCH, a leader's storage error: its LeaderAndIsr arrived before the leader's)
  keeps the partition and asks again after :data:`FETCH_BACKOFF_MS`
  (``replica.fetch.backoff.ms``); FENCED_LEADER_EPOCH and a storage error of its own mark it
  failed until the next LeaderAndIsr. This is Kafka's ``AbstractFetcherThread``, and
  ``impl/broker/replica_fetcher.py`` does the same, except that it retries OFFSET_OUT_OF_RANGE
  where this shell truncates to the leader's LEO.

Controller-to-broker requests go through one ordered channel per (controller, broker), one
request in flight, retransmitted until answered (Kafka's ``RequestSendThread`` over TCP): the
network may lose, delay, duplicate or reorder its messages, the channel's sequence numbers make
delivery exactly once and in order, as TCP does.

This module is a sans-IO core.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar

from conformance.disk import SimDisk
from conformance.move_sim import SimLock
from impl.broker import replication
from impl.broker.producer_state import PartitionProducerState, SequenceVerdict
from impl.broker.replication import (
    MAX_TRUNCATION_ROUNDS,
    ControllerFence,
    PartitionAssignment,
    ReplicaRole,
    ReplicaState,
    ReplicationEvent,
    TruncationPolicy,
    TruncationStep,
    decide_leader_and_isr,
    decide_stop_replica,
    desired_isr,
    follower_truncation_offset,
    leader_high_watermark,
)
from impl.controller.controller import (
    Controller,
    ControllerConfig,
    ControllerEffect,
    ControllerMoved,
    ResponseReceived,
    SessionExpired,
)
from impl.controller.coordinator import (
    CreateOp,
    CreateResult,
    SetOp,
    SetResult,
    multi_error,
)
from impl.controller.requests import (
    ControllerRequest,
    ControllerResponse,
    LeaderAndIsrRequest,
    StopReplicaRequest,
)
from impl.controller.znodes import (
    CONTROLLER_EPOCH_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    ISR_CHANGE_PREFIX,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    LOG_DIR_EVENT_PREFIX,
    broker_path,
    decode_controller_epoch,
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
from impl.trace import TraceEvent, freeze_fields

from ._coordinator_driver import ControllerDriver

if TYPE_CHECKING:
    from .cluster_sim import ClusterWorld

__sans_io__ = True

T = TypeVar("T")

NONE: Final = 0
OFFSET_OUT_OF_RANGE: Final = 1
UNKNOWN_TOPIC_OR_PARTITION: Final = 3
NOT_LEADER_OR_FOLLOWER: Final = 6
REQUEST_TIMED_OUT: Final = 7
NOT_ENOUGH_REPLICAS: Final = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND: Final = 20
KAFKA_STORAGE_ERROR: Final = 56
FENCED_LEADER_EPOCH: Final = 74
UNKNOWN_LEADER_EPOCH: Final = 75
OUT_OF_ORDER_SEQUENCE_NUMBER: Final = 45
INVALID_PRODUCER_EPOCH: Final = 47

#: Node ids of the clients (brokers are 0..B-1).
PRODUCER_NODE: Final = 1000
CONSUMER_NODE: Final = 1001

#: A fetch returns at most this many bytes (small: a lagging follower needs several rounds).
FETCH_MAX_BYTES: Final = 1200
#: Milliseconds after which an unanswered request is sent again.
RETRY_MS: Final = 4
#: ``replica.fetch.backoff.ms`` (simulated): a follower refused by its leader asks again after
#: this long. Kafka's 1000 ms is 1/30 of its ``replica.lag.time.max.ms``; the simulated lag
#: bound is 40 ms.
FETCH_BACKOFF_MS: Final = 1
#: A produce unanswered for this long is retried by the client and dropped by the leader.
PRODUCE_TIMEOUT_MS: Final = 30


# --- messages ------------------------------------------------------------------------------
#
# Named tuples: immutable (the network may deliver one message twice) and cheap to build (a
# frozen dataclass sets each field through ``object.__setattr__``; a run builds ~100k messages).


class ControllerCall(NamedTuple):
    """A controller request on channel ``channel`` with sequence number ``seq``."""

    channel: int
    seq: int
    request: ControllerRequest


class ControllerReply(NamedTuple):
    """The answer to one :class:`ControllerCall`."""

    channel: int
    seq: int
    response: ControllerResponse


class FetchCall(NamedTuple):
    """Fetch (a follower's when ``replica >= 0``, a consumer's below the HW when -1)."""

    request_id: int
    replica: int
    incarnation: int
    tp: TopicPartition
    offset: int
    leader_epoch: int


class FetchReply(NamedTuple):
    """A fetch's answer: records (whole batches), the leader's HW and LEO."""

    request_id: int
    tp: TopicPartition
    error: int
    records: bytes = b""
    high_watermark: int = -1
    log_end_offset: int = -1


class EpochCall(NamedTuple):
    """OffsetForLeaderEpoch for the follower's latest epoch."""

    request_id: int
    replica: int
    tp: TopicPartition
    current_leader_epoch: int
    epoch: int


class EpochReply(NamedTuple):
    """The leader's largest epoch at or below the asked one and where it ends (KIP-279)."""

    request_id: int
    tp: TopicPartition
    error: int
    end_offset: int = -1
    leader_epoch: int = -1


class ProduceCall(NamedTuple):
    """An ``acks=all`` produce of one idempotent batch."""

    request_id: int
    tp: TopicPartition
    batch: bytes


class ProduceReply(NamedTuple):
    """A produce's answer (``base_offset`` on success)."""

    request_id: int
    tp: TopicPartition
    error: int
    base_offset: int = -1


# --- helpers -------------------------------------------------------------------------------


def drive(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that must not suspend (a storage call on an uncontended SimLock)."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        result: T = stop.value
        return result
    coroutine.close()
    raise AssertionError("a simulated call suspended")


#: (base offset, next offset, CRC-32C, producer id, producer epoch, base sequence)
BatchKey = tuple[int, int, int, int, int, int]


def batch_keys(data: bytes) -> list[BatchKey]:
    """The keys of the whole batches in ``data``."""
    keys: list[BatchKey] = []
    for header in rb.iter_batches(data):
        keys.append((header.base_offset, header.next_offset, header.crc, header.producer_id,
                     header.producer_epoch, header.base_sequence))
    return keys


def read_bytes(partition: PartitionLog, offset: int, max_bytes: int,
               max_offset: int | None = None) -> bytes:
    """Whole batches from ``offset`` (at most ``max_bytes`` unless the first is larger)."""
    slices = partition.read(offset, max_bytes, max_offset)
    chunks = []
    for piece in slices:
        try:
            chunks.append(piece.read_all())
        finally:
            piece.close()
    return rb.whole_batches(b"".join(chunks))


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


@dataclass
class _Followed:
    leader: int
    leader_epoch: int
    truncated: bool = False
    in_flight: int | None = None
    sent_ms: int = 0
    #: refused by the leader: not asked again before this time (``FETCH_BACKOFF_MS``)
    retry_ms: int = 0
    #: fenced, or its own storage failed: waits for the next LeaderAndIsr (Kafka's failed
    #: partitions)
    failed: bool = False
    #: the OffsetForLeaderEpoch exchange so far (KIP-279): where the log would be truncated, the
    #: epoch to ask next, the first answer's end offset, the answers received
    truncate_at: int | None = None
    ask_epoch: int | None = None
    first_end: int | None = None
    rounds: int = 0


@dataclass
class _PendingProduce:
    client: int
    request_id: int
    last_offset: int
    base_offset: int
    deadline_ms: int


#: ``member.value`` of the enums on the hot path (an enum's ``value`` is a descriptor call).
_ROLE_NAMES: Final = {role: role.value for role in ReplicaRole}
_EVENT_NAMES: Final = {event: event.value for event in ReplicationEvent}


# --- the broker ----------------------------------------------------------------------------


class SimBroker:
    """One broker: a LogManager on its own disk plus the replication and idempotence cores."""

    def __init__(self, world: ClusterWorld, broker_id: int) -> None:
        self.world = world
        self.id = broker_id
        self._clock = world.clock
        self._network = world.network
        self._config = world.config
        self._isr_expanded_early = world.config.variant == "isr_expanded_early"
        #: ``f"{tp}@{id}"`` per partition: the subject of this broker's replication events
        self._subjects: dict[TopicPartition, str] = {}
        config = world.config
        self.log_dirs = tuple(f"/sim/broker-{broker_id}/data-{i}" for i in range(config.log_dirs))
        self.disk = SimDisk(self.log_dirs)
        self.storage_config = StorageConfig(
            log_dirs=self.log_dirs, broker_id=broker_id, segment_bytes=config.segment_bytes,
            index_interval_bytes=256, move_chunk_bytes=config.chunk_bytes,
        )
        self.storage_sink = _TaggedSink(broker_id, world.emit)
        self.sink = _DirectSink(world.emit)
        self.policy = (TruncationPolicy.HIGH_WATERMARK if config.variant == "truncate_to_hw"
                       else TruncationPolicy.LEADER_EPOCH)
        self.alive = False
        self.incarnation = 0
        self.session = -1
        self.broker_epoch = -1
        self.manager: LogManager | None = None
        self.controller: ControllerNode | None = None
        self._request_ids = itertools.count(1)
        self.restarts = 0
        self._reset_volatile()

    def _reset_volatile(self) -> None:
        self.fence = ControllerFence(self.id)
        self.states: dict[TopicPartition, ReplicaState] = {}
        self.producers: dict[TopicPartition, PartitionProducerState] = {}
        self.follower_leos: dict[TopicPartition, dict[int, int]] = {}
        self.follower_incarnations: dict[TopicPartition, dict[int, int]] = {}
        self.leo_at_previous_fetch: dict[TopicPartition, dict[int, int]] = {}
        self.last_caught_up_ms: dict[TopicPartition, dict[int, int]] = {}
        #: bumped whenever ``follower_leos`` or ``last_caught_up_ms`` may change
        self._isr_inputs = 0
        #: per partition: (state, now_ms, ``_isr_inputs``) of the last ISR check that found a
        #: full ISR to keep (the same inputs give the same answer: nothing to do)
        self._isr_kept: dict[TopicPartition, tuple[ReplicaState, int, int]] = {}
        self.followed: dict[TopicPartition, _Followed] = {}
        self.pending: dict[TopicPartition, list[_PendingProduce]] = {}
        self.failed_dirs_seen: list[str] = []
        self.channels: dict[int, tuple[int, ControllerResponse]] = {}

    # --- life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Open the logs (recovery), register in ZooKeeper, start the controller candidate."""
        world = self.world
        self._reset_volatile()
        self.manager = LogManager.open(self.storage_config, disk=self.disk, clock=world.clock,
                                       trace=self.storage_sink,
                                       on_dir_failure=self.failed_dirs_seen.append)
        self.adopt_locks()
        self.session = world.zk.open_session(6_000)
        results = world.zk.multi(self.session, [CreateOp(
            broker_path(self.id), encode_broker(f"broker-{self.id}", 9092, None,
                                                world.clock.wall_ms()), ephemeral=True)])
        assert isinstance(results[0], CreateResult), results
        stat = world.zk.exists(self.session, broker_path(self.id), False)
        assert stat is not None
        self.broker_epoch = stat.czxid
        self.fence.register(self.broker_epoch)
        self.alive = True
        self.incarnation += 1
        self.controller = ControllerNode(world, self)
        for tp in sorted(self.manager.partitions()):
            self.sink.emit(TraceEvent.of(replication.MACHINE, ReplicationEvent.RESTART.value,
                                         f"{tp}@{self.id}", "NONE", "NONE"))
        world.watch_all("brokers")
        self.controller.watch("controller")

    def crash(self, *, lose_unflushed: bool) -> None:
        """The process dies: memory is lost; the disk keeps what its contract says."""
        world = self.world
        assert self.manager is not None
        for tp, state in sorted(self.states.items()):
            self.sink.emit(TraceEvent.of(replication.MACHINE, ReplicationEvent.CRASH.value,
                                         f"{tp}@{self.id}", state.role.value, "NONE"))
        for tp in sorted(self.manager.partitions()):
            move = self.manager.move_state(tp)
            if move.state is not rm.MoveState.NONE:
                self.storage_sink.emit(rm.step(move, rm.MoveInput(rm.MoveEvent.CRASHED)).trace)
        if not lose_unflushed:
            with contextlib.suppress(StorageError, OSError):
                self.manager.checkpoint(flush=True)
        self.disk.crash(world.crash_rng(self.id))
        self.alive = False
        self.restarts += 1
        if world.zk.session_alive(self.session):
            world.zk.expire_session(self.session)
        if self.controller is not None:
            self.controller.stop()
        self.controller = None
        world.network.drop_to(self.id)
        self.manager = None
        world.watch_all("brokers")
        world.watch_all("controller")

    def adopt_locks(self) -> None:
        """Replace each partition's trio lock with a :class:`SimLock`."""
        assert self.manager is not None
        for partition in self.manager.partitions().values():
            current: object = partition.lock
            if not isinstance(current, SimLock):
                partition.__dict__["lock"] = SimLock(True)

    def log(self, tp: TopicPartition) -> PartitionLog | None:
        """The online log of ``tp`` here, or ``None``."""
        manager = self.manager
        if manager is None:
            return None
        # (LogManager.get's table itself: this is the hottest lookup of a run)
        partition = manager._partitions.get(tp)
        if partition is None or partition.offline:
            return None
        return partition

    def subject(self, tp: TopicPartition) -> str:
        """``t-0@1``: the subject of this broker's replication events about ``tp``."""
        found = self._subjects.get(tp)
        if found is None:
            found = self._subjects[tp] = f"{tp}@{self.id}"
        return found

    def _send(self, target: int, payload: object) -> None:
        self._network.send(self.id, target, payload)

    def now_ms(self) -> int:
        """Simulated milliseconds."""
        return self._clock.monotonic_ns() // 1_000_000

    # --- dir failures ----------------------------------------------------------------------

    def after_io(self) -> None:
        """Handle dir failures the storage engine reported during the last operation."""
        if not self.failed_dirs_seen or self.manager is None:
            return
        self.failed_dirs_seen.clear()
        for tp in sorted(self.manager.offline_replicas):
            current = self.states.get(tp)
            self.followed.pop(tp, None)
            self._fail_pending(tp, KAFKA_STORAGE_ERROR)
            if current is not None and current.role is not ReplicaRole.OFFLINE:
                self.states[tp] = ReplicaState(
                    current.topic, current.partition, ReplicaRole.OFFLINE, current.leader,
                    current.leader_epoch, current.partition_epoch, current.isr, current.replicas,
                )
        zk = self.world.zk
        if zk.session_alive(self.session):
            zk.multi(self.session, [CreateOp(
                f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{LOG_DIR_EVENT_PREFIX}",
                encode_log_dir_event(self.id), sequential=True)])
            self.world.watch_all("log_dir")

    # --- controller requests ---------------------------------------------------------------

    def on_controller_call(self, source: int, call: ControllerCall) -> None:
        """Exactly-once, in-order delivery per channel (TCP), then the request itself."""
        last = self.channels.get(call.channel)
        if last is not None and call.seq <= last[0]:
            if call.seq == last[0]:
                self._send(source, ControllerReply(call.channel, call.seq, last[1]))
            return
        if last is not None and call.seq != last[0] + 1:
            return  # a gap: the sender retransmits in order
        # (an unknown channel is a new connection: this incarnation accepts its head request)
        request = call.request
        if isinstance(request, LeaderAndIsrRequest):
            response = self.leader_and_isr(request)
        elif isinstance(request, StopReplicaRequest):
            response = self.stop_replica(request)
        else:
            top = self.fence.check(request.controller_id, request.controller_epoch,
                                   request.broker_epoch)
            response = ControllerResponse(error_code=top)
        self.after_io()
        self.channels[call.channel] = (call.seq, response)
        self._send(source, ControllerReply(call.channel, call.seq, response))

    def _offline(self, tp: TopicPartition) -> bool:
        assert self.manager is not None
        if tp in self.manager.offline_replicas:
            return True
        partition = self.manager.get(tp)
        return partition is not None and bool(partition.offline)

    def leader_and_isr(self, request: LeaderAndIsrRequest) -> ControllerResponse:
        """As ``ReplicaManager.leader_and_isr``, synchronously."""
        assert self.manager is not None
        top = self.fence.check(request.controller_id, request.controller_epoch,
                               request.broker_epoch)
        if top != NONE:
            return ControllerResponse(error_code=top)
        errors: dict[tuple[str, int], int] = {}
        for item in request.partition_states:
            tp = TopicPartition(item.topic, item.partition)
            offline = self._offline(tp)
            existing = None if offline else self.manager.get(tp)
            hosted = existing is not None
            decision = decide_leader_and_isr(
                self.id, self.states.get(tp),
                PartitionAssignment(item.topic, item.partition, item.controller_epoch,
                                    item.leader, item.leader_epoch, item.isr, item.zk_version,
                                    item.replicas, item.is_new),
                hosted=hosted, replica_offline=offline,
                any_dir_offline=bool(self.manager.offline_dirs), trace=self.sink,
                log_end_offset=None if existing is None else existing.log_end_offset,
                high_watermark=None if existing is None else existing.high_watermark,
            )
            if decision.error_code != NONE:
                errors[(item.topic, item.partition)] = decision.error_code
                continue
            if decision.state is None:
                continue
            if decision.create_log:
                try:
                    self.manager.create(tp, item.is_new)
                except (StorageError, OSError):
                    errors[(item.topic, item.partition)] = KAFKA_STORAGE_ERROR
                    continue
                self.adopt_locks()
                self.world.replica_created(self, tp, item.is_new)
            previous = self.states.get(tp)
            self.states[tp] = decision.state
            if decision.became_leader:
                self._isr_inputs += 1
                self.follower_leos[tp] = {}
                self.follower_incarnations[tp] = {}
                self.leo_at_previous_fetch[tp] = {}
                self.last_caught_up_ms[tp] = dict.fromkeys(decision.state.isr, self.now_ms())
                self.producers.pop(tp, None)
            if decision.state.role is ReplicaRole.FOLLOWER:
                self.followed[tp] = _Followed(decision.state.leader, decision.state.leader_epoch)
                self._fail_pending(tp, NOT_LEADER_OR_FOLLOWER)
            else:
                self.followed.pop(tp, None)
            partition = self.log(tp)
            if partition is not None and decision.state.role is ReplicaRole.LEADER:
                with contextlib.suppress(StorageError, OSError):
                    partition.assign_epoch(decision.state.leader_epoch, partition.log_end_offset)
                self.advance_hw(tp, partition)
            self.world.role_changed(self, tp, previous, decision.state)
        return ControllerResponse(partition_errors=errors)

    def stop_replica(self, request: StopReplicaRequest) -> ControllerResponse:
        """As ``ReplicaManager.stop_replica``, synchronously."""
        assert self.manager is not None
        top = self.fence.check(request.controller_id, request.controller_epoch,
                               request.broker_epoch)
        if top != NONE:
            return ControllerResponse(error_code=top)
        errors: dict[tuple[str, int], int] = {}
        for item in request.partitions:
            tp = TopicPartition(item.topic, item.partition)
            code = decide_stop_replica(self.states.get(tp), item.leader_epoch,
                                       replica_offline=self._offline(tp))
            if code != NONE:
                errors[(item.topic, item.partition)] = code
                continue
            self.states.pop(tp, None)
            self.followed.pop(tp, None)
            self._fail_pending(tp, NOT_LEADER_OR_FOLLOWER)
            if item.delete_partition:
                self.producers.pop(tp, None)
                try:
                    self.manager.delete(tp)
                except (StorageError, OSError):
                    errors[(item.topic, item.partition)] = KAFKA_STORAGE_ERROR
                self.world.replica_deleted(self, tp)
        return ControllerResponse(partition_errors=errors)

    # --- the leader side -------------------------------------------------------------------

    def _emit(self, tp: TopicPartition, event: ReplicationEvent, **fields: Any) -> None:
        self._emit_fields(tp, event, fields)

    def _emit_fields(self, tp: TopicPartition, event: ReplicationEvent,
                     fields: dict[str, Any]) -> None:
        """As ``TraceEvent.of(..., **fields)``, from a dict (hot: every follower fetch)."""
        state = self.states.get(tp)
        role = _ROLE_NAMES[state.role] if state is not None else "NONE"
        self.sink.emit(TraceEvent(replication.MACHINE, _EVENT_NAMES[event], self.subject(tp),
                                  role, role, freeze_fields(fields)))

    def _leader(self, tp: TopicPartition, epoch: int | None) -> tuple[int, PartitionLog | None]:
        state = self.states.get(tp)
        if state is None:
            return UNKNOWN_TOPIC_OR_PARTITION, None
        if state.role is ReplicaRole.OFFLINE:
            return KAFKA_STORAGE_ERROR, None
        if state.role is not ReplicaRole.LEADER:
            return NOT_LEADER_OR_FOLLOWER, None
        if epoch is not None and epoch != state.leader_epoch:
            return (FENCED_LEADER_EPOCH if epoch < state.leader_epoch
                    else UNKNOWN_LEADER_EPOCH), None
        partition = self.log(tp)
        if partition is None:
            return KAFKA_STORAGE_ERROR, None
        return NONE, partition

    def producer_state(self, tp: TopicPartition, partition: PartitionLog
                       ) -> PartitionProducerState:
        """The idempotence state, rebuilt from the log after each change of leadership."""
        state = self.producers.get(tp)
        if state is None:
            state = PartitionProducerState()
            offset = partition.log_start_offset
            while offset < partition.log_end_offset:
                data = read_bytes(partition, offset, 1 << 20)
                headers = list(rb.iter_batches(data))
                if not headers:
                    break
                for header in headers:
                    state.replay(header.producer_id, header.producer_epoch,
                                 first_sequence=header.base_sequence,
                                 record_count=header.record_count,
                                 first_offset=header.base_offset, last_offset=header.last_offset)
                offset = headers[-1].next_offset
            self.producers[tp] = state
        return state

    def on_produce(self, source: int, call: ProduceCall) -> None:
        """An acks=all produce: sequence check, append, answer once the HW passes it."""
        tp = call.tp
        error, partition = self._leader(tp, None)
        if partition is None:
            self._send(source, ProduceReply(call.request_id, tp, error))
            return
        state = self.states[tp]
        if len(state.isr) < self.world.config.min_insync_replicas:
            self._send(source, ProduceReply(call.request_id, tp, NOT_ENOUGH_REPLICAS))
            return
        header = rb.parse_header(call.batch, 0)
        try:
            producers = self.producer_state(tp, partition)
            verdict = producers.check(header.producer_id, header.producer_epoch,
                                      header.base_sequence, header.record_count)
            if verdict.verdict is SequenceVerdict.REJECT:
                self._send(source, ProduceReply(call.request_id, tp, verdict.error_code))
                return
            if verdict.verdict is SequenceVerdict.DUPLICATE:
                assert verdict.duplicate_of is not None
                base, last = verdict.duplicate_of.first_offset, verdict.duplicate_of.last_offset
            else:
                base, last, _ = drive(partition.append_as_leader(call.batch, state.leader_epoch))
                self.world.appended(self, tp, partition, base)
                self._emit(tp, ReplicationEvent.LEADER_APPEND, base_offset=base,
                           last_offset=last, leader_epoch=state.leader_epoch)
                producers.record(header.producer_id, header.producer_epoch,
                                 first_sequence=header.base_sequence,
                                 record_count=header.record_count, first_offset=base,
                                 last_offset=last)
        except (StorageError, OSError):
            self.after_io()
            self._send(source, ProduceReply(call.request_id, tp, KAFKA_STORAGE_ERROR))
            return
        self.pending.setdefault(tp, []).append(_PendingProduce(
            source, call.request_id, last, base, self.now_ms() + PRODUCE_TIMEOUT_MS))
        self.advance_hw(tp, partition)
        self._complete(tp)

    def _complete(self, tp: TopicPartition) -> None:
        waiting = self.pending.get(tp)
        if not waiting:
            return
        partition = self.log(tp)
        state = self.states.get(tp)
        if partition is None or state is None:
            return
        high_watermark = partition.high_watermark
        now_ms = self.now_ms()
        kept: list[_PendingProduce] = []
        for item in waiting:
            if high_watermark > item.last_offset:
                enough = len(state.isr) >= self.world.config.min_insync_replicas
                code = NONE if enough else NOT_ENOUGH_REPLICAS_AFTER_APPEND
                self._send(item.client, ProduceReply(item.request_id, tp, code,
                                                     item.base_offset))
            elif now_ms >= item.deadline_ms:
                self._send(item.client, ProduceReply(item.request_id, tp, REQUEST_TIMED_OUT))
            else:
                kept.append(item)
        self.pending[tp] = kept

    def _fail_pending(self, tp: TopicPartition, error: int) -> None:
        for item in self.pending.pop(tp, []):
            self._send(item.client, ProduceReply(item.request_id, tp, error))

    def advance_hw(self, tp: TopicPartition, partition: PartitionLog) -> None:
        """The leader's HW: the minimum LEO over the ISR, never decreasing."""
        state = self.states.get(tp)
        if state is None or state.role is not ReplicaRole.LEADER:
            return
        new = leader_high_watermark(partition.high_watermark, partition.log_end_offset,
                                    self.follower_leos.get(tp, {}), state.isr, self.id)
        if new != partition.high_watermark:
            partition.high_watermark = new
            self._emit(tp, ReplicationEvent.HW_ADVANCE, high_watermark=new, isr=state.isr)
            self.world.hw_moved(self, tp, new)

    def on_fetch(self, source: int, call: FetchCall) -> None:
        """A follower's fetch (records up to the LEO) or a consumer's (up to the HW)."""
        tp = call.tp
        consumer = call.replica < 0
        error, partition = self._leader(tp, None if consumer else call.leader_epoch)
        if partition is None:
            self._send(source, FetchReply(call.request_id, tp, error))
            return
        if call.offset > partition.log_end_offset or call.offset < partition.log_start_offset:
            self._send(source, FetchReply(call.request_id, tp, OFFSET_OUT_OF_RANGE,
                                          high_watermark=partition.high_watermark,
                                          log_end_offset=partition.log_end_offset))
            return
        if not consumer:
            self.record_follower_fetch(tp, call.replica, call.incarnation, call.offset,
                                       call.leader_epoch, partition=partition)
            partition = self.log(tp)
            if partition is None:
                self._send(source, FetchReply(call.request_id, tp, KAFKA_STORAGE_ERROR))
                return
        limit = partition.high_watermark if consumer else None
        try:
            records = b""
            if call.offset < (limit if limit is not None else partition.log_end_offset):
                records = read_bytes(partition, call.offset, FETCH_MAX_BYTES, limit)
        except (StorageError, OSError):
            self.after_io()
            self._send(source, FetchReply(call.request_id, tp, KAFKA_STORAGE_ERROR))
            return
        self._network.send(self.id, source, FetchReply(
            call.request_id, tp, NONE, records, partition.high_watermark,
            partition.log_end_offset))

    def record_follower_fetch(self, tp: TopicPartition, replica: int, incarnation: int,
                              offset: int, leader_epoch: int = -1, *,
                              partition: PartitionLog | None = None) -> None:
        """As ``ReplicaManager.record_follower_fetch`` (a new incarnation starts afresh).

        ``partition``: ``self.log(tp)`` when the caller has just looked it up.
        """
        if partition is None:
            partition = self.log(tp)
        if partition is None:
            return
        now_ms = self._clock.monotonic_ns() // 1_000_000
        self._isr_inputs += 1
        incarnations = self.follower_incarnations.setdefault(tp, {})
        offsets = self.follower_leos.setdefault(tp, {})
        if incarnations.get(replica, incarnation) != incarnation:
            offsets.pop(replica, None)
        incarnations[replica] = incarnation
        previous = self.leo_at_previous_fetch.setdefault(tp, {})
        log_end_offset = partition.log_end_offset
        if offset >= log_end_offset or offset >= previous.get(replica, 2**63):
            self.last_caught_up_ms.setdefault(tp, {})[replica] = now_ms
        previous[replica] = log_end_offset
        fields: dict[str, Any] = {"replica": replica, "fetch_offset": offset}
        if leader_epoch >= 0:
            fields["leader_epoch"] = leader_epoch
        self._emit_fields(tp, ReplicationEvent.FOLLOWER_FETCH, fields)
        if offsets.get(replica, -1) < offset:
            offsets[replica] = offset
            self.advance_hw(tp, partition)
            self._complete(tp)
        self.maybe_change_isr(tp)

    def maybe_change_isr(self, tp: TopicPartition) -> None:
        """Write a new ISR to ZooKeeper when followers caught up or fell behind."""
        state = self.states.get(tp)
        if state is None or state.role is not ReplicaRole.LEADER:
            return
        isr = state.isr
        now_ms = self._clock.monotonic_ns() // 1_000_000
        full = not self._isr_expanded_early
        if full and isr != state.replicas:
            for replica in state.replicas:  # (a plain loop: no generator for all())
                if replica not in isr:
                    full = False
                    break
        if full:
            # Nobody can join: desired_isr reads neither the HW nor the epoch's start, only the
            # state, the clock and the catch-up times; with all three as last time, the ISR
            # stays (the periodic scan runs twice at one instant each step).
            kept = self._isr_kept.get(tp)
            if kept is not None and kept[0] is state and kept[1] == now_ms and (
                    kept[2] == self._isr_inputs):
                return
        partition = self.log(tp)
        if partition is None:
            return
        config = self._config
        if self._isr_expanded_early:
            high_watermark = epoch_start = 0  # the bug: any follower that fetched once joins
        elif full:
            high_watermark = epoch_start = -1
        else:
            high_watermark = partition.high_watermark
            epoch_start = partition.log.epochs.start_offset_of(state.leader_epoch,
                                                               partition.log_end_offset)
        wanted = desired_isr(
            state, high_watermark, follower_log_end_offsets=self.follower_leos.get(tp, {}),
            last_caught_up_ms=self.last_caught_up_ms.get(tp, {}),
            now_ms=now_ms, lag_time_max_ms=config.replica_lag_time_max_ms,
            leader_epoch_start_offset=epoch_start,
        )
        if wanted == isr or set(wanted) == set(isr):
            if full:
                self._isr_kept[tp] = (state, now_ms, self._isr_inputs)
            return
        zk = self.world.zk
        if not zk.session_alive(self.session):
            return
        results = zk.multi(self.session, [
            SetOp(partition_state_path(tp.topic, tp.partition),
                  encode_partition_state(state.leader, state.leader_epoch, wanted,
                                         state.controller_epoch), state.partition_epoch),
            CreateOp(f"{ISR_CHANGE_NOTIFICATION_PATH}/{ISR_CHANGE_PREFIX}",
                     encode_isr_change([(tp.topic, tp.partition)]), sequential=True),
        ])
        if multi_error(results) is not None:
            return  # a stale zkVersion: the controller changed the partition; wait for it
        result = results[0]
        assert isinstance(result, SetResult)
        self.states[tp] = replication.with_isr(state, wanted, result.stat.version)
        event = (ReplicationEvent.ISR_SHRINK if len(wanted) < len(state.isr)
                 else ReplicationEvent.ISR_EXPAND)
        self._emit(tp, event, isr=wanted, partition_epoch=result.stat.version)
        self.world.isr_written(self, tp, state.isr, wanted)
        self.world.watch_all("isr")
        self.advance_hw(tp, partition)
        self._complete(tp)

    def on_epoch_call(self, source: int, call: EpochCall) -> None:
        """OffsetForLeaderEpoch (KIP-279)."""
        error, partition = self._leader(call.tp, call.current_leader_epoch)
        if partition is None:
            self._send(source, EpochReply(call.request_id, call.tp, error))
            return
        epoch, end_offset = partition.end_offset_for_epoch(call.epoch)
        self._send(source, EpochReply(call.request_id, call.tp, NONE, end_offset, epoch))

    # --- the follower side -----------------------------------------------------------------

    def tick(self, *, periodic: bool = True) -> None:
        """Follower fetches; with ``periodic`` also produce timeouts and ISR checks (the
        leader's ``replica.lag.time.max.ms`` scan)."""
        now_ms = self._clock.monotonic_ns() // 1_000_000
        # Which partitions ask now is decided up front: asking for one never changes another's
        # record, and most ticks ask for none.
        # (a plain loop: a comprehension is a function call of its own)
        due: list[TopicPartition] = []
        for tp, followed in self.followed.items():
            if not followed.failed and now_ms >= followed.retry_ms and (
                    followed.in_flight is None or now_ms - followed.sent_ms >= RETRY_MS):
                due.append(tp)
        for tp in sorted(due) if len(due) > 1 else due:
            followed = self.followed[tp]
            partition = self.log(tp)
            if partition is None:
                continue
            request_id = next(self._request_ids)
            followed.in_flight, followed.sent_ms = request_id, now_ms
            if not followed.truncated:
                if self.policy.asks_leader:
                    asked = (partition.latest_epoch if followed.ask_epoch is None
                             else followed.ask_epoch)
                    self._send(followed.leader, EpochCall(
                        request_id, self.id, tp, followed.leader_epoch, asked))
                    continue
                self._truncate(tp, followed, partition, follower_truncation_offset(
                    self.policy, log_end_offset=partition.log_end_offset,
                    log_start_offset=partition.log_start_offset,
                    high_watermark=partition.high_watermark))
            self._network.send(self.id, followed.leader, FetchCall(
                request_id, self.id, self.incarnation, tp, partition.log_end_offset,
                followed.leader_epoch))
        if periodic:
            # (an ISR check changes only its own partition's state, never its role)
            leading: list[TopicPartition] = []
            for tp, state in self.states.items():
                if state.role is ReplicaRole.LEADER:
                    leading.append(tp)
            pending = self.pending
            for tp in sorted(leading) if len(leading) > 1 else leading:
                self.maybe_change_isr(tp)
                if pending.get(tp):
                    self._complete(tp)
        if self.failed_dirs_seen:
            self.after_io()

    def _truncate(self, tp: TopicPartition, followed: _Followed, partition: PartitionLog,
                  step: TruncationStep) -> None:
        """Truncate where ``step`` says, once the exchange is over (one TRUNCATE event)."""
        before = partition.log_end_offset
        high_watermark = partition.high_watermark
        leader_epoch_end = followed.first_end
        target = step.offset
        followed.truncate_at = followed.ask_epoch = followed.first_end = None
        rounds, followed.rounds = followed.rounds, 0
        if target < before:
            partition.truncate_to(target)
            fields: dict[str, Any] = {"policy": self.policy.value, "log_end_offset": before,
                                      "truncated_to": target}
            if leader_epoch_end is not None:
                fields["leader_epoch_end"] = leader_epoch_end
                fields["rounds"] = rounds
            else:
                fields["high_watermark"] = high_watermark
            self.sink.emit(TraceEvent.of(
                replication.MACHINE, ReplicationEvent.TRUNCATE.value, f"{tp}@{self.id}",
                ReplicaRole.FOLLOWER.value, ReplicaRole.FOLLOWER.value, **fields))
            self.world.truncated(self, tp, target)
        partition.high_watermark = min(partition.high_watermark, partition.log_end_offset)
        followed.truncated = True

    def on_epoch_reply(self, reply: EpochReply) -> None:
        """The leader's end offset: truncate, then fetch."""
        followed = self.followed.get(reply.tp)
        if followed is None or followed.in_flight != reply.request_id:
            return
        followed.in_flight = None
        partition = self.log(reply.tp)
        if partition is None:
            return
        if reply.error != NONE:
            self._refused(followed, reply.error)
            return
        try:
            leo = partition.log_end_offset
            if followed.first_end is None:
                followed.first_end = reply.end_offset
            step = follower_truncation_offset(
                self.policy,
                log_end_offset=leo if followed.truncate_at is None
                else min(followed.truncate_at, leo),
                log_start_offset=partition.log_start_offset,
                high_watermark=partition.high_watermark,
                leader_epoch_end_offset=reply.end_offset, leader_epoch=reply.leader_epoch,
                epochs=[(e.epoch, e.start_offset) for e in partition.log.epochs.entries])
            followed.rounds += 1
            if step.done or followed.rounds >= MAX_TRUNCATION_ROUNDS:
                self._truncate(reply.tp, followed, partition, step)
            else:
                # KIP-279: the leader answered an epoch this log lacks; ask for an older one.
                followed.truncate_at, followed.ask_epoch = step.offset, step.ask_epoch
        except (StorageError, OSError):
            self.after_io()

    def on_fetch_reply(self, reply: FetchReply) -> None:
        """Append what the leader sent; the follower's HW follows the leader's."""
        tp = reply.tp
        followed = self.followed.get(tp)
        if followed is None or followed.in_flight != reply.request_id:
            return
        followed.in_flight = None
        partition = self.log(tp)
        if partition is None:
            return
        try:
            if reply.error == OFFSET_OUT_OF_RANGE and reply.log_end_offset >= 0:
                if partition.log_end_offset > reply.log_end_offset:
                    followed.truncated = False
                    followed.truncate_at = followed.ask_epoch = followed.first_end = None
                    followed.rounds = 0
                    self._truncate_to(tp, partition, reply.log_end_offset)
                return
            if reply.error != NONE:
                self._refused(followed, reply.error)
                return
            if reply.records:
                base = partition.log_end_offset
                drive(partition.append_as_follower(reply.records))
                self.world.appended(self, tp, partition, base)
            high_watermark = min(reply.high_watermark, partition.log_end_offset)
            partition.high_watermark = max(partition.high_watermark, high_watermark)
        except (StorageError, OSError):
            self.after_io()
            followed.failed = True

    def _refused(self, followed: _Followed, error: int) -> None:
        """The leader refused a follower request. Kafka marks the partition failed only when
        fenced (a LeaderAndIsr with a newer epoch is on its way); any other refusal (a leader
        that has not yet heard of its leadership: NOT_LEADER_OR_FOLLOWER, UNKNOWN_*) is asked
        again after ``replica.fetch.backoff.ms``."""
        if error == FENCED_LEADER_EPOCH:
            followed.failed = True
        else:
            followed.retry_ms = self.now_ms() + FETCH_BACKOFF_MS

    def _truncate_to(self, tp: TopicPartition, partition: PartitionLog, offset: int) -> None:
        before = partition.log_end_offset
        partition.truncate_to(offset)
        partition.high_watermark = min(partition.high_watermark, partition.log_end_offset)
        self.sink.emit(TraceEvent.of(
            replication.MACHINE, ReplicationEvent.TRUNCATE.value, f"{tp}@{self.id}",
            ReplicaRole.FOLLOWER.value, ReplicaRole.FOLLOWER.value, policy="OUT_OF_RANGE",
            log_end_offset=before, truncated_to=offset))
        self.world.truncated(self, tp, offset)
        self.producers.pop(tp, None)

    def deliver(self, source: int, payload: object) -> None:
        """Dispatch one message addressed to this broker."""
        if not self.alive:
            return
        if isinstance(payload, FetchCall):
            self.on_fetch(source, payload)
        elif isinstance(payload, FetchReply):
            self.on_fetch_reply(payload)
        elif isinstance(payload, ProduceCall):
            self.on_produce(source, payload)
        elif isinstance(payload, EpochCall):
            self.on_epoch_call(source, payload)
        elif isinstance(payload, EpochReply):
            self.on_epoch_reply(payload)
        elif isinstance(payload, ControllerCall):
            self.on_controller_call(source, payload)
        elif isinstance(payload, ControllerReply) and self.controller is not None:
            self.controller.on_reply(payload)
        if self.failed_dirs_seen:
            self.after_io()


# --- the controller candidate ----------------------------------------------------------------


@dataclass
class _Channel:
    channel: int
    queue: collections.deque[ControllerRequest] = field(default_factory=collections.deque)
    seq: int = 0
    sent_ms: int = -1
    attempts: int = 0


class ControllerNode(ControllerDriver):
    """A controller candidate on one broker: the real core over the simulated ZooKeeper, its
    requests carried over the network, its watch notifications delivered after a delay."""

    def __init__(self, world: ClusterWorld, broker: SimBroker) -> None:
        super().__init__(world.zk, broker.id,
                         unclean_leader_election=world.config.unclean_leader_election)
        self.core = Controller(ControllerConfig(
            broker.id, world.config.unclean_leader_election,
            fence_writes=world.config.variant != "no_epoch_check"))
        self.world = world
        self.broker = broker
        self._clock = world.clock
        self.pending_watches: dict[str, int] = {}
        self.expiry_notice_ms: int | None = None
        self.stopped = False
        self._channels: dict[int, _Channel] = {}
        self.writes_landed = 0

    def watch(self, kind: str, delay_ms: int = 1) -> None:
        """A ZooKeeper watch of ``kind`` fired; it is handled after ``delay_ms``."""
        due = self.broker.now_ms() + delay_ms
        if kind not in self.pending_watches:
            self.pending_watches[kind] = due

    def stop(self) -> None:
        """The broker died: this candidate is gone."""
        self.stopped = True
        self._channels.clear()
        if self.world.zk.session_alive(self.session_id):
            self.world.zk.expire_session(self.session_id)

    def expire(self, notice_delay_ms: int) -> None:
        """The controller's session expires; the client re-creates one at once but the core
        learns of the expiry only after ``notice_delay_ms`` (KAFKA-6082's zombie window)."""
        self.world.zk.expire_session(self.session_id)
        self.session_id = self.world.zk.open_session(6_000)
        self.expiry_notice_ms = self.broker.now_ms() + notice_delay_ms
        self.world.watch_all("controller")

    def tick(self) -> None:
        """Handle due watches and notices; retransmit unanswered requests."""
        if self.stopped:
            return
        now_ms = self._clock.monotonic_ns() // 1_000_000
        if self.expiry_notice_ms is not None and now_ms >= self.expiry_notice_ms:
            self.expiry_notice_ms = None
            self.run(SessionExpired())
            self.pending_watches["controller"] = now_ms
        pending = self.pending_watches
        # (no watch due: the loop below would do nothing, and it is most ticks)
        if pending and min(pending.values()) <= now_ms:
            for kind in sorted(pending, key=lambda k: (pending[k], k)):
                if pending.get(kind, now_ms + 1) > now_ms:
                    continue
                del pending[kind]
                self._handle_watch(kind)
        for channel in self._channels.values():
            if channel.queue and channel.sent_ms >= 0 and now_ms - channel.sent_ms >= RETRY_MS:
                break
        else:
            return  # nothing to retransmit (most ticks): the loop below would do nothing
        for broker_id in sorted(self._channels):
            channel = self._channels[broker_id]
            if channel.queue and channel.sent_ms >= 0 and now_ms - channel.sent_ms >= RETRY_MS:
                if channel.attempts >= 40 and broker_id not in self.core.live_brokers:
                    request = channel.queue.popleft()
                    channel.sent_ms, channel.attempts = -1, 0
                    self.run(ResponseReceived(broker_id, request, None))
                    self._send_head(broker_id)
                else:
                    self._transmit(broker_id, channel)

    def _handle_watch(self, kind: str) -> None:
        if kind == "controller":
            if not self.core.active and self.expiry_notice_ms is None:
                if self.elect():
                    self.world.controller_elected(self)
            elif self.core.active and self.expiry_notice_ms is None:
                owner = self.server.exists(self.session_id, "/controller", False)
                if owner is None or owner.ephemeral_owner != self.session_id:
                    self.run(ControllerMoved())
            return
        if not self.core.active:
            return
        if kind == "brokers":
            self.brokers_changed()
        elif kind == "topics":
            self.topics_changed()
        elif kind == "isr":
            self.isr_changed()
        elif kind == "log_dir":
            self.log_dir_events()
        elif kind == "reassign":
            self.reassignment_changed()

    # --- effects over the network ------------------------------------------------------------

    def _send_head(self, broker_id: int) -> None:
        channel = self._channels[broker_id]
        if channel.queue:
            channel.seq += 1
            channel.attempts = 0
            self._transmit(broker_id, channel)

    def _transmit(self, broker_id: int, channel: _Channel) -> None:
        channel.sent_ms = self.broker.now_ms()
        channel.attempts += 1
        self.world.network.send(self.broker.id, broker_id,
                                ControllerCall(channel.channel, channel.seq, channel.queue[0]))

    def _enqueue(self, broker_id: int, request: ControllerRequest) -> None:
        channel = self._channels.get(broker_id)
        if channel is None:
            channel = self._channels[broker_id] = _Channel(next(self.world.channel_ids))
        channel.queue.append(request)
        if len(channel.queue) == 1:
            self._send_head(broker_id)

    def on_reply(self, reply: ControllerReply) -> None:
        """A broker answered the head of one channel."""
        if self.stopped:
            return
        for broker_id, channel in self._channels.items():
            if channel.channel == reply.channel:
                if reply.seq != channel.seq or not channel.queue:
                    return
                request = channel.queue.popleft()
                channel.sent_ms, channel.attempts = -1, 0
                self._send_head(broker_id)
                self.run(ResponseReceived(broker_id, request, reply.response))
                return

    def _emit(self, event: TraceEvent) -> None:
        self.world.emit(event)

    def _send(self, broker_id: int, request: ControllerRequest) -> list[ControllerEffect]:
        self._enqueue(broker_id, request)
        return []

    def _resigned(self) -> None:
        self._channels.clear()
        self.pending_watches["controller"] = self.broker.now_ms() + 1

    def _write_landed(self) -> None:
        """CONTROLLER_FENCED: a controller write lands only under the current epoch."""
        self.writes_landed += 1
        found = self._get(CONTROLLER_EPOCH_PATH)
        current = decode_controller_epoch(found[0]) if found is not None else 0
        if self.core.epoch != current:
            self.world.violation(
                "CONTROLLER_FENCED",
                f"controller on broker {self.broker.id} (epoch {self.core.epoch}) wrote to "
                f"ZooKeeper while the controller epoch is {current}",
            )


__all__ = ["CONSUMER_NODE", "PRODUCER_NODE", "ControllerNode", "SimBroker"]
