"""The broker's replicas: partition roles, produce and fetch on the storage engine, HW, waits.

The trio shell around the replication core (:mod:`impl.broker.replication`) and the
idempotence core (:mod:`impl.broker.producer_state`). It owns, per partition hosted here, the
:class:`~impl.broker.replication.ReplicaState` the controller last gave, the producer state, a
partition lock that makes "check sequence, append, record" atomic, and an event that wakes
delayed fetches and ``acks=all`` produces when the log or the HW moves.

Storage is reached only through the storage engine's facade (``LogManager`` / ``PartitionLog``):
this module never touches files.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

import trio

from impl.controller.requests import (
    ControllerResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaRequest,
)
from impl.storage import LogManager, PartitionLog, TopicPartition
from impl.storage import record_batch as rb
from impl.storage.errors import RecordBatchError, StorageError
from impl.trace import NullTraceSink, TraceEvent, TraceSink

from . import replication
from .producer_state import PartitionProducerState, SequenceVerdict
from .replication import (
    ControllerFence,
    PartitionAssignment,
    ReplicaRole,
    ReplicaState,
    decide_leader_and_isr,
    decide_stop_replica,
    desired_isr,
    leader_high_watermark,
)

log = logging.getLogger(__name__)

NONE: Final = 0
OFFSET_OUT_OF_RANGE: Final = 1
UNKNOWN_TOPIC_OR_PARTITION: Final = 3
NOT_LEADER_OR_FOLLOWER: Final = 6
REQUEST_TIMED_OUT: Final = 7
NOT_ENOUGH_REPLICAS: Final = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND: Final = 20
INVALID_REQUIRED_ACKS: Final = 21
KAFKA_STORAGE_ERROR: Final = 56
FENCED_LEADER_EPOCH: Final = 74
UNKNOWN_LEADER_EPOCH: Final = 75
UNKNOWN_SERVER_ERROR: Final = -1
MAGIC_V2: Final = 2
#: Bytes per read when the producer state is rebuilt from the log.
REPLAY_READ_BYTES: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class ProduceResult:
    """One partition's produce outcome."""

    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


class ReplicaManager:
    """The replicas of this broker.

    Args:
        broker_id: this broker.
        logs: the storage engine's log manager (see :class:`LogManagerPort`).
        min_insync_replicas: ``min.insync.replicas``.
        message_max_bytes: ``message.max.bytes``.
        timestamp_difference_max_ms: ``message.timestamp.difference.max.ms``.
        trace: where the replication core's events go.
    """

    def __init__(
        self,
        broker_id: int,
        logs: LogManager,
        *,
        min_insync_replicas: int,
        message_max_bytes: int,
        timestamp_difference_max_ms: int = 2**63 - 1,
        trace: TraceSink | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.logs = logs
        self.fence = ControllerFence(broker_id)
        self.min_insync_replicas = min_insync_replicas
        #: a topic's ``min.insync.replicas`` (the broker wires in the topic's config)
        self.min_insync_of: Callable[[str], int] = lambda topic: self.min_insync_replicas
        self.message_max_bytes = message_max_bytes
        self.timestamp_difference_max_ms = timestamp_difference_max_ms
        self.trace: TraceSink = trace if trace is not None else NullTraceSink()
        self.states: dict[TopicPartition, ReplicaState] = {}
        self._producers: dict[TopicPartition, PartitionProducerState] = {}
        self._locks: dict[TopicPartition, trio.Lock] = {}
        self._changed = trio.Event()
        self.follower_log_end_offsets: dict[TopicPartition, dict[int, int]] = {}
        #: per partition and follower: the leader's LEO at that follower's previous fetch, and
        #: when the follower last fetched from at least that offset (Kafka's lastCaughtUpTime)
        self._leo_at_previous_fetch: dict[TopicPartition, dict[int, int]] = {}
        self.last_caught_up_ms: dict[TopicPartition, dict[int, int]] = {}
        self.replica_lag_time_max_ms = 30_000
        self.on_state_change: Callable[[], None] | None = None
        #: follower fetch loops (set by the broker): ``follow(tp, leader, epoch)``/``unfollow``
        self.fetcher: Any = None
        #: writes a new ISR through ZooKeeper (set by the broker): ``(tp, state, isr)``
        self.isr_updater: Callable[[TopicPartition, ReplicaState, tuple[int, ...]], None] | None = (
            None
        )
        self.isr_updates_in_flight: set[TopicPartition] = set()
        #: the broker is stopping: delayed fetches answer with what they have at once
        self.stopping = False
        #: the wall clock (milliseconds since the epoch) timestamps are checked against
        self.wall_ms: Callable[[], int] = lambda: int(time.time() * 1000)

    # --- waiting ---------------------------------------------------------------------------

    def notify(self) -> None:
        """Wake every task waiting for a log or HW change."""
        self._changed.set()
        self._changed = trio.Event()

    async def wait_changed(self, deadline: float) -> None:
        """Wait until the next :meth:`notify` or ``deadline`` (``trio.current_time`` scale)."""
        event = self._changed
        with trio.move_on_at(deadline):
            await event.wait()

    # --- lookups ---------------------------------------------------------------------------

    def _lock(self, tp: TopicPartition) -> trio.Lock:
        lock = self._locks.get(tp)
        if lock is None:
            lock = self._locks[tp] = trio.Lock()
        return lock

    def leader_log(self, tp: TopicPartition) -> tuple[int, PartitionLog | None]:
        """(error code, live log) for a partition this broker must lead."""
        state = self.states.get(tp)
        if state is None:
            return UNKNOWN_TOPIC_OR_PARTITION, None
        if state.role is ReplicaRole.OFFLINE:
            return KAFKA_STORAGE_ERROR, None
        if state.role is not ReplicaRole.LEADER:
            return NOT_LEADER_OR_FOLLOWER, None
        partition_log = self._get_log(tp)
        if partition_log is None or partition_log.offline:
            return KAFKA_STORAGE_ERROR, None
        return NONE, partition_log

    def _get_log(self, tp: TopicPartition) -> PartitionLog | None:
        try:
            return self.logs.get(tp)
        except StorageError:
            return None

    def producer_state(self, tp: TopicPartition) -> PartitionProducerState:
        """The idempotence state of ``tp`` (rebuilt from the log on first use)."""
        state = self._producers.get(tp)
        if state is None:
            state = PartitionProducerState()
            partition_log = self._get_log(tp)
            if partition_log is not None:
                self._replay_producers(tp, partition_log, state)
            self._producers[tp] = state
        return state

    def _replay_producers(self, tp: TopicPartition, partition_log: PartitionLog,
                          state: PartitionProducerState) -> None:
        # A read stops at its size limit, not at a batch boundary (Kafka's read does the same):
        # its last batch may be cut. Only the whole batches are replayed; the next read starts
        # at the cut batch.
        offset = partition_log.log_start_offset
        end = partition_log.log_end_offset
        while offset < end:
            slices = partition_log.read(offset, REPLAY_READ_BYTES, None)
            if not slices:
                return
            try:
                data = b"".join(piece.read_all() for piece in slices)
            finally:
                for piece in slices:
                    piece.close()
            whole = rb.valid_prefix(data)
            if not whole.headers:
                log.warning("replaying the producers of %s stopped at offset %d: %s",
                            tp, offset, whole.error)
                return
            advanced = False
            for header in whole.headers:
                if header.next_offset <= offset:
                    continue
                state.replay(
                    header.producer_id,
                    header.producer_epoch,
                    first_sequence=header.base_sequence,
                    record_count=header.record_count,
                    first_offset=header.base_offset,
                    last_offset=header.last_offset,
                )
                offset = header.next_offset
                advanced = True
            if not advanced:
                return

    def _emit(self, tp: TopicPartition, event: replication.ReplicationEvent, **fields: object
              ) -> None:
        state = self.states.get(tp)
        role = state.role.value if state is not None else "NONE"
        self.trace.emit(TraceEvent.of(replication.MACHINE, event.value,
                                      f"{tp}@{self.broker_id}", role, role, **fields))

    # --- produce ---------------------------------------------------------------------------

    async def produce(
        self, tp: TopicPartition, records: bytes | None, acks: int, timeout_ms: int
    ) -> ProduceResult:
        """Append one partition's batch as leader, honouring idempotence and ``acks``.

        Returns:
            The partition's result (error codes per Kafka: 3, 6, 19, 20, 21, 56, 2, 10, 87, 45,
            47, 7).
        """
        if acks not in (0, 1, -1):
            return ProduceResult(INVALID_REQUIRED_ACKS)
        error, partition_log = self.leader_log(tp)
        if partition_log is None:
            return ProduceResult(error)
        state = self.states[tp]
        min_insync_replicas = self.min_insync_of(tp.topic)
        if acks == -1 and len(state.isr) < min_insync_replicas:
            return ProduceResult(NOT_ENOUGH_REPLICAS)
        data = records if records is not None else b""
        # The storage engine validates the whole batch (CRC included) when appending; the
        # sequence check only needs the header of a v2 batch, read here without a CRC pass.
        header: rb.BatchHeader | None = None
        if len(data) >= rb.HEADER_SIZE and data[rb.MAGIC_OFFSET] == MAGIC_V2:
            try:
                header = rb.parse_header(data, 0)
            except RecordBatchError:
                header = None
        if header is not None:
            code = replication.timestamp_error(
                header.base_timestamp,
                header.max_timestamp,
                log_append_time=header.is_log_append_time,
                now_ms=self.wall_ms(),
                difference_max_ms=self.timestamp_difference_max_ms,
            )
            if code != NONE:
                return ProduceResult(code, error_message="timestamp out of range")
        async with self._lock(tp):
            producers = (
                self.producer_state(tp)
                if header is not None and header.producer_id >= 0 and header.base_sequence >= 0
                else None
            )
            if producers is not None:
                assert header is not None
                verdict = producers.check(
                    header.producer_id,
                    header.producer_epoch,
                    header.base_sequence,
                    header.record_count,
                )
                if verdict.verdict is SequenceVerdict.REJECT:
                    return ProduceResult(verdict.error_code, log_start_offset=-1)
                if verdict.verdict is SequenceVerdict.DUPLICATE:
                    assert verdict.duplicate_of is not None
                    return ProduceResult(
                        NONE,
                        verdict.duplicate_of.first_offset,
                        -1,
                        partition_log.log_start_offset,
                    )
            try:
                base_offset, last_offset, append_time_ms = await partition_log.append_as_leader(
                    data, state.leader_epoch
                )
            except RecordBatchError as batch_error:
                return ProduceResult(int(batch_error.error_code), error_message=str(batch_error))
            except StorageError as storage_error:
                return ProduceResult(
                    int(storage_error.error_code), error_message=str(storage_error)
                )
            except OSError as os_error:
                log.warning("append to %s failed: %s", tp, os_error)
                return ProduceResult(KAFKA_STORAGE_ERROR, error_message=str(os_error))
            self._emit(tp, replication.ReplicationEvent.LEADER_APPEND, base_offset=base_offset,
                       last_offset=last_offset, leader_epoch=state.leader_epoch)
            if producers is not None:
                assert header is not None
                producers.record(
                    header.producer_id,
                    header.producer_epoch,
                    first_sequence=header.base_sequence,
                    record_count=header.record_count,
                    first_offset=base_offset,
                    last_offset=last_offset,
                )
            self._advance_high_watermark(tp, partition_log)
        self.notify()
        if acks == -1:
            # Kafka's checkEnoughReplicasReachOffset: wait for the HW to pass the batch, then
            # answer by the ISR at that moment (it may have shrunk below min.insync.replicas
            # since the append: NOT_ENOUGH_REPLICAS_AFTER_APPEND).
            deadline = trio.current_time() + max(timeout_ms, 0) / 1000.0
            while True:
                current = self.states.get(tp)
                outcome = replication.acks_all_result(
                    partition_log.high_watermark, last_offset,
                    len((state if current is None else current).isr), min_insync_replicas)
                if outcome is not None:
                    if outcome != NONE:
                        return ProduceResult(outcome)
                    break
                if current is None or current.role is not ReplicaRole.LEADER:
                    return ProduceResult(NOT_LEADER_OR_FOLLOWER)
                if trio.current_time() >= deadline:
                    return ProduceResult(REQUEST_TIMED_OUT)
                await self.wait_changed(deadline)
        log_append_time = append_time_ms if append_time_ms >= 0 else -1
        return ProduceResult(NONE, base_offset, log_append_time, partition_log.log_start_offset)

    def _advance_high_watermark(self, tp: TopicPartition, partition_log: PartitionLog) -> None:
        state = self.states.get(tp)
        if state is None or state.role is not ReplicaRole.LEADER:
            return
        new_high_watermark = leader_high_watermark(
            partition_log.high_watermark,
            partition_log.log_end_offset,
            self.follower_log_end_offsets.get(tp, {}),
            state.isr,
            self.broker_id,
        )
        if new_high_watermark != partition_log.high_watermark:
            partition_log.high_watermark = new_high_watermark
            self._emit(tp, replication.ReplicationEvent.HW_ADVANCE,
                       high_watermark=new_high_watermark, isr=state.isr)

    def record_follower_fetch(self, tp: TopicPartition, replica_id: int, fetch_offset: int,
                              current_leader_epoch: int = -1) -> None:
        """A follower fetched from ``fetch_offset``: its LEO is at least that; maybe move the HW
        and change the ISR. ``current_leader_epoch`` is the request's (-1: not given), traced."""
        partition_log = self._get_log(tp)
        if partition_log is None:
            return
        now_ms = int(trio.current_time() * 1000)
        previous = self._leo_at_previous_fetch.setdefault(tp, {})
        if fetch_offset >= partition_log.log_end_offset or fetch_offset >= previous.get(
            replica_id, 2**63
        ):
            self.last_caught_up_ms.setdefault(tp, {})[replica_id] = now_ms
        previous[replica_id] = partition_log.log_end_offset
        self._emit(tp, replication.ReplicationEvent.FOLLOWER_FETCH, replica=replica_id,
                   fetch_offset=fetch_offset,
                   **({"leader_epoch": current_leader_epoch} if current_leader_epoch >= 0
                      else {}))
        offsets = self.follower_log_end_offsets.setdefault(tp, {})
        if offsets.get(replica_id, -1) < fetch_offset:
            offsets[replica_id] = fetch_offset
            before = partition_log.high_watermark
            self._advance_high_watermark(tp, partition_log)
            if partition_log.high_watermark != before:
                self.notify()
        self.maybe_change_isr(tp)

    def maybe_change_isr(self, tp: TopicPartition) -> None:
        """Ask the ISR updater for a new ISR when followers caught up or fell behind."""
        state = self.states.get(tp)
        partition_log = self._get_log(tp)
        if (state is None or state.role is not ReplicaRole.LEADER or partition_log is None
                or self.isr_updater is None or tp in self.isr_updates_in_flight):
            return
        wanted = desired_isr(
            state,
            partition_log.high_watermark,
            follower_log_end_offsets=self.follower_log_end_offsets.get(tp, {}),
            last_caught_up_ms=self.last_caught_up_ms.get(tp, {}),
            now_ms=int(trio.current_time() * 1000),
            lag_time_max_ms=self.replica_lag_time_max_ms,
            leader_epoch_start_offset=partition_log.log.epochs.start_offset_of(
                state.leader_epoch, partition_log.log_end_offset),
        )
        if set(wanted) != set(state.isr):
            self.isr_updates_in_flight.add(tp)
            self.isr_updater(tp, state, wanted)

    def isr_changed(self, tp: TopicPartition, isr: tuple[int, ...], partition_epoch: int) -> None:
        """The leader's ISR write succeeded: cache the ISR and zkVersion, maybe move the HW."""
        self.isr_updates_in_flight.discard(tp)
        state = self.states.get(tp)
        if state is None or state.role is not ReplicaRole.LEADER:
            return
        self.states[tp] = replication.with_isr(state, isr, partition_epoch)
        event = (replication.ReplicationEvent.ISR_SHRINK if len(isr) < len(state.isr)
                 else replication.ReplicationEvent.ISR_EXPAND)
        self._emit(tp, event, isr=isr, partition_epoch=partition_epoch)
        partition_log = self._get_log(tp)
        if partition_log is not None:
            self._advance_high_watermark(tp, partition_log)
        self.notify()

    def check_isr_all(self) -> None:
        """Re-evaluate the ISR of every led partition (followers that stopped fetching)."""
        for tp in list(self.states):
            self.maybe_change_isr(tp)

    # --- controller requests ---------------------------------------------------------------

    def _offline(self, tp: TopicPartition) -> bool:
        if tp in self.logs.offline_replicas:
            return True
        partition_log = self._get_log(tp)
        return partition_log is not None and bool(partition_log.offline)

    def _any_dir_offline(self) -> bool:
        return bool(self.logs.offline_dirs)

    def _create_log(self, tp: TopicPartition, is_new: bool) -> PartitionLog:
        return self.logs.create(tp, is_new)

    def leader_and_isr(self, request: LeaderAndIsrRequest) -> ControllerResponse:
        """Apply a LeaderAndIsr request (fencing, per-partition epochs, log creation).

        Returns:
            The response: a top-level error, or per-partition errors.
        """
        top = self.fence.check(request.controller_id, request.controller_epoch,
                               request.broker_epoch)
        if top != NONE:
            return ControllerResponse(error_code=top)
        errors: dict[tuple[str, int], int] = {}
        for item in request.partition_states:
            tp = TopicPartition(item.topic, item.partition)
            offline = self._offline(tp)
            existing = None if offline else self._get_log(tp)
            hosted = existing is not None
            decision = decide_leader_and_isr(
                self.broker_id,
                self.states.get(tp),
                PartitionAssignment(
                    topic=item.topic,
                    partition=item.partition,
                    controller_epoch=item.controller_epoch,
                    leader=item.leader,
                    leader_epoch=item.leader_epoch,
                    isr=item.isr,
                    partition_epoch=item.zk_version,
                    replicas=item.replicas,
                    is_new=item.is_new,
                ),
                hosted=hosted,
                replica_offline=offline,
                any_dir_offline=self._any_dir_offline(),
                trace=self.trace,
                log_end_offset=None if existing is None else existing.log_end_offset,
                high_watermark=None if existing is None else existing.high_watermark,
            )
            if decision.error_code != NONE:
                errors[(item.topic, item.partition)] = decision.error_code
                if decision.error_code == KAFKA_STORAGE_ERROR:
                    self._mark_offline(tp, item)
                continue
            if decision.state is None:
                continue
            if decision.create_log:
                try:
                    self._create_log(tp, item.is_new)
                except StorageError as error:
                    errors[(item.topic, item.partition)] = int(error.error_code)
                    continue
                except OSError as error:
                    log.warning("creating %s failed: %s", tp, error)
                    errors[(item.topic, item.partition)] = KAFKA_STORAGE_ERROR
                    continue
            self.states[tp] = decision.state
            if decision.became_leader:
                self.follower_log_end_offsets[tp] = {}
                self._leo_at_previous_fetch[tp] = {}
                now_ms = int(trio.current_time() * 1000)
                self.last_caught_up_ms[tp] = dict.fromkeys(decision.state.isr, now_ms)
            if self.fetcher is not None:
                if decision.state.role is ReplicaRole.FOLLOWER:
                    self.fetcher.follow(tp, decision.state.leader, decision.state.leader_epoch)
                else:
                    self.fetcher.unfollow(tp)
            partition_log = self._get_log(tp)
            if partition_log is not None and decision.state.role is ReplicaRole.LEADER:
                self._set_leader_epoch(partition_log, decision.state.leader_epoch)
                self._advance_high_watermark(tp, partition_log)
        self.notify()
        if self.on_state_change is not None:
            self.on_state_change()
        return ControllerResponse(partition_errors=errors)

    def _set_leader_epoch(self, partition_log: PartitionLog, leader_epoch: int) -> None:
        try:
            partition_log.assign_epoch(leader_epoch, partition_log.log_end_offset)
        except StorageError as error:
            log.warning("recording leader epoch %d: %s", leader_epoch, error)

    def _mark_offline(self, tp: TopicPartition, item: LeaderAndIsrPartitionState) -> None:
        current = self.states.get(tp)
        self.states[tp] = ReplicaState(
            topic=tp.topic,
            partition=tp.partition,
            role=ReplicaRole.OFFLINE,
            leader=item.leader,
            leader_epoch=current.leader_epoch if current is not None else -1,
            partition_epoch=current.partition_epoch if current is not None else -1,
            isr=item.isr,
            replicas=item.replicas,
        )

    def stop_replica(self, request: StopReplicaRequest) -> ControllerResponse:
        """Apply a StopReplica request: forget the replica, delete its log when asked."""
        top = self.fence.check(request.controller_id, request.controller_epoch,
                               request.broker_epoch)
        if top != NONE:
            return ControllerResponse(error_code=top)
        errors: dict[tuple[str, int], int] = {}
        for item in request.partitions:
            tp = TopicPartition(item.topic, item.partition)
            offline = self._offline(tp)
            code = decide_stop_replica(
                self.states.get(tp), item.leader_epoch, replica_offline=offline
            )
            if code != NONE:
                errors[(item.topic, item.partition)] = code
                continue
            self.states.pop(tp, None)
            self.follower_log_end_offsets.pop(tp, None)
            if self.fetcher is not None:
                self.fetcher.unfollow(tp)
            if item.delete_partition:
                self._producers.pop(tp, None)
                try:
                    self.logs.delete(tp)
                except StorageError as error:
                    errors[(item.topic, item.partition)] = int(error.error_code)
                except OSError as error:
                    log.warning("deleting %s failed: %s", tp, error)
                    errors[(item.topic, item.partition)] = KAFKA_STORAGE_ERROR
        self.notify()
        if self.on_state_change is not None:
            self.on_state_change()
        return ControllerResponse(partition_errors=errors)

    def mark_dir_offline(self, partitions: Iterable[TopicPartition]) -> None:
        """A log dir failed: its replicas go OFFLINE (KIP-112) and stop serving."""
        for tp in partitions:
            current = self.states.get(tp)
            if current is None:
                continue
            if self.fetcher is not None:
                self.fetcher.unfollow(tp)
            self.states[tp] = ReplicaState(
                topic=current.topic,
                partition=current.partition,
                role=ReplicaRole.OFFLINE,
                leader=current.leader,
                leader_epoch=current.leader_epoch,
                partition_epoch=current.partition_epoch,
                isr=current.isr,
                replicas=current.replicas,
            )
        self.notify()


__all__ = [
    "ProduceResult",
    "ReplicaManager",
    "replication",
]
