"""The broker node: every replication decision of one broker, as a ``step(input) -> effects``
machine (etcd's ``raft.go`` shape).

One :class:`BrokerNode` owns, for the partitions hosted on its broker: the replica states the
controller gave (:class:`~impl.broker.replication.ReplicaState`), controller fencing, the
idempotent-producer state, what the leader knows of its followers (their LEO, incarnation and
lastCaughtUpTime), the ``acks=all`` produces waiting for the HW, and the follower side of
fetch (which leader, which epoch, the KIP-101/279 truncation exchange, back-off and failure).

Inputs (``step``): requests (:class:`Produce`, :class:`FetchCall` from a follower or a
consumer, :class:`EpochCall`, :class:`LeaderAndIsr`, :class:`StopReplica`,
:class:`OtherControllerRequest`, :class:`GroupCall`), answers (:class:`FetchReply`,
:class:`EpochReply`, :class:`IsrWritten`), completions (:class:`Appended`), :class:`Tick`,
:class:`GroupTick` and :class:`DirsFailed`. The broker's group coordinator is hosted here
(:mod:`impl.broker.node_groups`): leadership of ``__consumer_offsets`` partitions loads and
unloads it, its writes are the node's own acks=all produces. Effects: :class:`Send` (a
request to another broker), :class:`Reply` (the answer to a request), :class:`Append`
(completion: :class:`Appended`), :class:`WriteIsr` (completion: :class:`IsrWritten`),
:class:`ReportDirFailure`, :class:`RoleChanged` and :class:`HighWatermarkMoved`. Each effect
that needs an answer names the input that reports it, so a shell (the trio server, the
simulator) is a loop: carry the effect out, step the completion.

Storage is reached through :class:`NodeStore`, a port read synchronously (as ``raft.go`` reads
its ``Storage``) and used for the synchronous changes a decision needs at once (truncation,
the HW, a leader epoch's start, creating and deleting a replica); appends, which wait for the
partition lock in the trio runtime, are effects.

The decisions themselves come from the pure cores: :mod:`impl.broker.replication` (fencing,
LeaderAndIsr, StopReplica, HW, ``acks=all``, ISR, truncation) and
:mod:`impl.broker.producer_state` (sequence checks). Behaviour follows Kafka where the two
runtimes used to differ: the producer state is rebuilt from the log whenever the replica
changes role or is truncated (Kafka reloads it on ``makeLeader``/``makeFollower``); a follower
answered OFFSET_OUT_OF_RANGE starts its log afresh at the leader's log start when it ends below
it, else truncates again by leader epoch (Kafka's ``handleOutOfRangeError``); a leader forgets
the LEO of a follower that fetches from a new incarnation and ignores the fetches of an older
one (the trio server's incarnation is the connection: a restarted follower connects anew).

This module is a sans-IO core.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol

from impl.controller.requests import (
    ControllerRequest,
    ControllerResponse,
    LeaderAndIsrRequest,
    StopReplicaRequest,
)
from impl.storage import record_batch as rb
from impl.storage.errors import RecordBatchError, StorageError
from impl.storage.names import TopicPartition
from impl.trace import NullTraceSink, TraceEvent, TraceSink, freeze_fields

from . import replication
from .producer_state import PartitionProducerState, SequenceVerdict
from .replication import (
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

if TYPE_CHECKING:
    from .node_groups import GroupHost

__sans_io__ = True

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
OFFSET_NOT_AVAILABLE: Final = 78
#: ListOffsets' special timestamps
LATEST_TIMESTAMP: Final = -1
EARLIEST_TIMESTAMP: Final = -2
#: ListOffsets v7 (KIP-734): the record with the largest timestamp
MAX_TIMESTAMP: Final = -3
#: Bytes per read when the producer state is rebuilt from the log.
REPLAY_READ_BYTES: Final = 1 << 20

#: a controller request's id: opaque to the node, echoed in its answer (a named alias, as mypyc
#: resolves a compiled named tuple's field annotations by name in this module)
ControllerRequestId = object
#: ``member.value`` of the enums on the hot path (an enum's ``value`` is a descriptor call).
_ROLE_NAMES: Final = {role: role.value for role in ReplicaRole}
_EVENT_NAMES: Final = {event: event.value for event in ReplicationEvent}


# --- the storage port ----------------------------------------------------------------------


class NodeLog(Protocol):
    """One online replica's log, as the node reads it."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None: ...

    @property
    def latest_epoch(self) -> int: ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...

    def assign_epoch(self, epoch: int, start_offset: int) -> None: ...


class NodeStore(Protocol):
    """The storage engine as the node uses it (``impl.broker.node_store`` adapts the
    ``LogManager``). Calls may raise ``StorageError`` or ``OSError``."""

    def log(self, tp: TopicPartition) -> NodeLog | None:
        """The online log of ``tp``, or None (not hosted, or offline)."""

    def is_offline(self, tp: TopicPartition) -> bool:
        """``tp``'s replica is on an offline dir."""

    def any_dir_offline(self) -> bool:
        """Some configured log dir is offline."""

    def offline_replicas(self) -> Iterable[TopicPartition]:
        """The replicas on offline dirs."""

    def hosted(self) -> Iterable[TopicPartition]:
        """Every replica with a log here."""

    def create(self, tp: TopicPartition, is_new: bool) -> None:
        """Create ``tp``'s log (LeaderAndIsr for a replica not hosted yet)."""

    def delete(self, tp: TopicPartition) -> None:
        """Delete ``tp``'s log (StopReplica with ``delete_partition``)."""

    def truncate(self, tp: TopicPartition, offset: int) -> None:
        """Remove ``tp``'s records at and after ``offset``."""

    def epoch_entries(self, tp: TopicPartition) -> list[tuple[int, int]]:
        """``tp``'s leader-epoch cache as ``(epoch, start offset)``."""

    def epoch_start_offset(self, tp: TopicPartition, epoch: int) -> int:
        """Where leader epoch ``epoch`` starts in ``tp``'s log (its LEO if absent)."""

    def follow_log_start_offset(self, tp: TopicPartition, leader_log_start_offset: int) -> None:
        """A follower raises its log start offset to its leader's (DeleteRecords, retention),
        never above its own HW (Kafka's ``maybeIncrementLogStartOffset``)."""

    def delete_records(self, tp: TopicPartition, offset: int) -> None:
        """A leader makes ``offset`` (at most its HW) ``tp``'s log start offset, durably
        (DeleteRecords)."""
    def truncate_fully(self, tp: TopicPartition, start_offset: int) -> None:
        """Drop every record of ``tp`` and start its log empty at ``start_offset`` (Kafka's
        ``truncateFullyAndStartAt``: a follower whose log ends below its leader's log start)."""

    def offset_for_timestamp(self, tp: TopicPartition, timestamp_ms: int
                             ) -> tuple[int, int] | None:
        """The first record of ``tp`` with a timestamp at least ``timestamp_ms``, as
        ``(offset, timestamp)``; None if there is none."""

    def max_timestamp_record(self, tp: TopicPartition) -> tuple[int, int] | None:
        """The first record of ``tp`` (from its log start) stamped with the largest timestamp,
        as ``(offset, timestamp)``; None if no record has one."""

    def read_bytes(self, tp: TopicPartition, offset: int, max_bytes: int) -> bytes:
        """Whole batches of ``tp`` from ``offset`` (producer-state replay)."""

    def read_records(self, tp: TopicPartition, offset: int, max_bytes: int,
                     max_offset: int | None) -> object:
        """The records a fetch answers with, in the shell's own form (bytes, file slices)."""


class ReplicationThrottle(Protocol):
    """KIP-73's replication quotas as the node consults them (``ReplicationQuotas``): which
    replicas are throttled, whether a rate is used up, and the bytes fetched to charge."""

    def leader_throttled(self, topic: str, partition: int) -> bool: ...

    def follower_throttled(self, topic: str, partition: int) -> bool: ...

    def leader_exceeded(self) -> bool: ...

    def follower_exceeded(self) -> bool: ...

    def record_follower(self, byte_count: int) -> None: ...


# --- inputs --------------------------------------------------------------------------------
#
# Named tuples: immutable (the simulated network may deliver one message twice) and cheap to
# build (a run builds ~100k of them).


class Produce(NamedTuple):
    """A produce of one partition's records from ``client`` (``acks`` 0, 1 or -1)."""

    client: int
    request_id: int
    tp: TopicPartition
    records: bytes
    acks: int
    timeout_ms: int
    now_wall_ms: int = -1


class FetchCall(NamedTuple):
    """Fetch (a follower's when ``replica >= 0``, a consumer's below the HW when -1)."""

    request_id: int
    replica: int
    incarnation: int
    tp: TopicPartition
    offset: int
    leader_epoch: int
    #: the partition's read limit (-1: read nothing, the response is full)
    max_bytes: int = 1 << 20
    #: who the answer goes to when it is not the follower ``replica`` (a consumer)
    client: int = -1
    #: the follower's log start offset (Fetch v5+; DeleteRecords waits for it, -1: unknown)
    log_start_offset: int = -1
    #: the follower's broker epoch (KIP-903's ``ReplicaEpoch``; -1: not given)
    broker_epoch: int = -1
    #: a delayed fetch asked again (woken by new records): the follower's position in it was
    #: recorded when it arrived and is not recorded again (Kafka's DelayedFetch completes with
    #: a read alone; ``updateFollowerFetchState`` ran when the request came in)
    asked_again: bool = False


class FetchReply(NamedTuple):
    """A fetch's answer: records (whole batches, in the shell's form), the leader's HW and
    LEO."""

    request_id: int
    tp: TopicPartition
    error: int
    records: Any = b""
    high_watermark: int = -1
    log_end_offset: int = -1
    log_start_offset: int = -1
    #: KIP-73: the bytes sent count against the leader's replication quota
    throttled: bool = False


class EpochCall(NamedTuple):
    """OffsetForLeaderEpoch: the end of ``epoch`` in the leader's log (KIP-279)."""

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


class ListOffsetsCall(NamedTuple):
    """ListOffsets for one partition: ``timestamp`` -1 (latest), -2 (earliest) or a time in
    ms; from a follower when ``replica >= 0`` (its latest is the LEO), else from a consumer
    (``client``; its latest is the HW)."""

    request_id: int
    replica: int
    tp: TopicPartition
    timestamp: int
    current_leader_epoch: int = -1
    client: int = -1


class ListOffsetsReply(NamedTuple):
    """ListOffsets' answer: the offset (-1: no record at or after the timestamp), the record's
    timestamp (-1 for latest and earliest) and the leader epoch of the offset."""

    request_id: int
    tp: TopicPartition
    error: int
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1


class ProduceReply(NamedTuple):
    """A produce's answer (``base_offset`` on success)."""

    request_id: int
    tp: TopicPartition
    error: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


class LeaderAndIsr(NamedTuple):
    """A LeaderAndIsr request from the controller (answered with a :class:`Reply`)."""

    client: int
    request_id: ControllerRequestId
    request: LeaderAndIsrRequest


class StopReplica(NamedTuple):
    """A StopReplica request from the controller."""

    client: int
    request_id: ControllerRequestId
    request: StopReplicaRequest


class OtherControllerRequest(NamedTuple):
    """UpdateMetadata (or any other controller request): only fenced here; the metadata cache
    is the shell's."""

    client: int
    request_id: ControllerRequestId
    request: ControllerRequest


class DeleteRecords(NamedTuple):
    """DeleteRecords for one partition from ``client``: make ``offset`` (-1: the HW) the log
    start offset, answered (:class:`DeleteRecordsReply`) once every ISR member's log start
    offset has reached it, or with REQUEST_TIMED_OUT after ``timeout_ms``."""

    client: int
    request_id: int
    tp: TopicPartition
    offset: int
    timeout_ms: int


class DeleteRecordsReply(NamedTuple):
    """DeleteRecords' answer: the low watermark (the smallest log start offset of the ISR's
    replicas) on success, -1 with an error."""

    request_id: int
    tp: TopicPartition
    error: int
    low_watermark: int = -1


class Appended(NamedTuple):
    """An :class:`Append` completed: offsets, or the error code it failed with."""

    tp: TopicPartition
    token: int
    error: int
    base_offset: int = -1
    last_offset: int = -1
    append_time_ms: int = -1
    error_message: str | None = None


class IsrWritten(NamedTuple):
    """A :class:`WriteIsr` completed: the new zkVersion, or None (a stale zkVersion, a lost
    session: the controller will send the partition's state)."""

    tp: TopicPartition
    isr: tuple[int, ...]
    partition_epoch: int | None


class Tick(NamedTuple):
    """Time passed: follower requests due; with ``periodic`` also the ISR scan
    (``replica.lag.time.max.ms``) with the produce and DeleteRecords timeouts: the first
    :attr:`NodeConfig.isr_scan_step_partitions` partitions led of a new scan, or the next ones
    of the scan in progress (:class:`IsrScan` carries it on)."""

    periodic: bool = True


class IsrScan(NamedTuple):
    """The ISR scan in progress goes on with its next
    :attr:`NodeConfig.isr_scan_step_partitions` partitions (nothing when none is:
    :attr:`BrokerNode.isr_scan_pending`)."""


class DirsFailed(NamedTuple):
    """The storage engine took dirs offline: their replicas go OFFLINE (KIP-112)."""


class GroupCall(NamedTuple):
    """A group API request (a :data:`impl.broker.group_coordinator.Request`) from ``client``
    for the hosted group coordinator; answered by ``Reply(client, Respond)``. Request ids are
    unique per node (the shell allocates them)."""

    client: int
    request: Any


class GroupTick(NamedTuple):
    """Time passed for the hosted group coordinator only (the trio broker's timer; the
    node's :class:`Tick` ticks it too)."""


# --- effects -------------------------------------------------------------------------------


class Send(NamedTuple):
    """Send a request to broker ``target`` (its answer is stepped as a reply input)."""

    target: int
    message: Any


class Reply(NamedTuple):
    """Answer the request ``request_id`` of ``client``."""

    client: int
    message: Any


class Append(NamedTuple):
    """Append ``records`` to ``tp`` (as leader in ``leader_epoch``, or as follower when None);
    completion: :class:`Appended` with ``token``."""

    tp: TopicPartition
    token: int
    records: bytes
    leader_epoch: int | None
    #: the record timestamps a CreateTime topic accepts (``message.timestamp.difference.max.ms``
    #: around the broker's clock; ``None``: unbounded), checked on every record by the storage
    #: engine (the header's own timestamps may lie)
    timestamp_window_ms: tuple[int, int] | None = None
    #: the group coordinator's own write (:mod:`impl.broker.node_groups`): it may come out of
    #: any step (a tick, another group's request, a load), not only a client's produce, so a
    #: shell whose callers do not all carry appends carries it on its own
    coordinator: bool = False


class WriteIsr(NamedTuple):
    """Write ``tp``'s ISR to the coordinator (conditional on ``partition_epoch``, the
    zkVersion) with an ISR change notification; completion: :class:`IsrWritten`."""

    tp: TopicPartition
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    partition_epoch: int
    previous_isr: tuple[int, ...]
    #: per member of ``isr``, the incarnation (broker epoch) the leader saw in sync (KIP-903)
    isr_broker_epochs: tuple[int, ...] = ()


class ReportDirFailure(NamedTuple):
    """Tell the controller that a log dir of this broker failed (a log-dir event)."""


class RoleChanged(NamedTuple):
    """``tp``'s state changed (None: no longer hosted): start or stop fetching, refresh
    metadata."""

    tp: TopicPartition
    previous: ReplicaState | None
    state: ReplicaState | None


class HighWatermarkMoved(NamedTuple):
    """The leader's HW of ``tp`` moved (wake delayed fetches)."""

    tp: TopicPartition
    high_watermark: int


class LogChanged(NamedTuple):
    """A follower's log or HW of ``tp`` moved (wake waiters)."""

    tp: TopicPartition


Effect = Send | Reply | Append | WriteIsr | ReportDirFailure | RoleChanged | HighWatermarkMoved \
    | LogChanged


def append_error(error: BaseException) -> tuple[int, str]:
    """The produce error code (and message) for an append that raised ``error``: a bad batch's
    own code, a storage error's, KAFKA_STORAGE_ERROR for an I/O error."""
    if isinstance(error, RecordBatchError):
        return int(error.error_code), str(error)
    if isinstance(error, StorageError):
        return int(error.error_code), str(error)
    return KAFKA_STORAGE_ERROR, str(error)


# --- configuration and per-partition records -----------------------------------------------


#: The periodic ISR scan's partitions per step (``NodeConfig.isr_scan_step_partitions``): 512
#: partitions' checks take a few milliseconds, and a broker leading 32,000 partitions held its
#: event loop 0.2-0.5 s for a scan in one step.
ISR_SCAN_STEP_PARTITIONS: Final = 512


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """What a node is told at start.

    Attributes:
        broker_id: this broker.
        min_insync_replicas: ``min.insync.replicas``.
        replica_lag_time_max_ms: ``replica.lag.time.max.ms``.
        fetch_backoff_ms: ``replica.fetch.backoff.ms``: a partition refused by its leader is
            asked again after this long.
        request_retry_ms: a follower request unanswered this long is sent again (the shell
            reports a lost connection as an error reply before that).
        fetch_max_bytes: a follower fetch's partition limit.
        truncation_policy: ``replica.truncation.policy``.
        timestamp_difference_max_ms: ``message.timestamp.difference.max.ms``.
        isr_expanded_early: a known-bad plant (never set in production): a follower that
            fetched once joins the ISR (KIP-320 rule 4 ignored).
        isr_scan_step_partitions: the periodic ISR scan's partitions per step: a scan of more
            partitions goes on in :class:`IsrScan` steps (the shell lets other work run
            between them), so no step of a broker leading tens of thousands of partitions
            visits them all.
    """

    broker_id: int
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 30_000
    fetch_backoff_ms: int = 1_000
    request_retry_ms: int = 30_000
    fetch_max_bytes: int = 4 * 1024 * 1024
    truncation_policy: TruncationPolicy = TruncationPolicy.LEADER_EPOCH
    timestamp_difference_max_ms: int = 2**63 - 1
    isr_expanded_early: bool = False
    isr_scan_step_partitions: int = ISR_SCAN_STEP_PARTITIONS


@dataclass
class Followed:
    """One partition this broker follows: where it fetches and how far its truncation got."""

    leader: int
    leader_epoch: int
    truncated: bool = False
    in_flight: int | None = None
    sent_ms: int = 0
    #: refused by the leader: not asked again before this time (``fetch_backoff_ms``)
    retry_ms: int = 0
    #: fenced, or its own storage failed: waits for the next LeaderAndIsr (Kafka's failed
    #: partitions)
    failed: bool = False
    #: the OffsetForLeaderEpoch exchange so far (KIP-279): where the log would be truncated,
    #: the epoch to ask next, the first answer's end offset, the answers received
    truncate_at: int | None = None
    ask_epoch: int | None = None
    first_end: int | None = None
    rounds: int = 0
    #: the first of the fetches sent in a row from the log end offset ``fetch_offset`` (no
    #: OffsetForLeaderEpoch, truncation or append in between): an answer to any of them is
    #: what an answer to the latest would be, as Kafka's fetcher checks a response against the
    #: partition's fetch offset and epoch, not against the request (``None``: no such run;
    #: :meth:`BrokerNode._on_fetch_reply`)
    fetch_floor: int | None = None
    fetch_offset: int = -1

    def __init__(  # noqa: PLR0917 (the generated constructor's signature)
        self, leader: int, leader_epoch: int, truncated: bool = False,
        in_flight: int | None = None, sent_ms: int = 0, retry_ms: int = 0, failed: bool = False,
        truncate_at: int | None = None, ask_epoch: int | None = None,
        first_end: int | None = None, rounds: int = 0, fetch_floor: int | None = None,
        fetch_offset: int = -1
    ) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.truncated = truncated
        self.in_flight = in_flight
        self.sent_ms = sent_ms
        self.retry_ms = retry_ms
        self.failed = failed
        self.truncate_at = truncate_at
        self.ask_epoch = ask_epoch
        self.first_end = first_end
        self.rounds = rounds
        self.fetch_floor = fetch_floor
        self.fetch_offset = fetch_offset


@dataclass
class PendingProduce:
    """An ``acks=all`` produce waiting for the HW to pass its batch."""

    client: int
    request_id: int
    last_offset: int
    base_offset: int
    deadline_ms: int
    append_time_ms: int = -1


@dataclass
class PendingDelete:
    """A DeleteRecords waiting for the followers' log start offsets (Kafka's
    DelayedDeleteRecords)."""

    client: int
    request_id: int
    offset: int
    deadline_ms: int


class _Appending(NamedTuple):
    produce: Produce
    header: rb.BatchHeader | None
    leader_epoch: int
    token: int


# --- the node ------------------------------------------------------------------------------


class BrokerNode:
    """Every replication decision of one broker (one incarnation: a restart builds a new one).

    Args:
        config: the broker's settings.
        store: the storage engine's port.
        trace: where the replication events go (the trace checker replays them).
        clock_ms: the monotonic clock in milliseconds (the shell's).
        wall_ms: the wall clock in milliseconds (timestamps are checked against it).
        incarnation: this incarnation's number, sent with follower fetches.
    """

    def __init__(self, config: NodeConfig, store: NodeStore, *, trace: TraceSink | None = None,
                 clock_ms: Callable[[], int], wall_ms: Callable[[], int] | None = None,
                 incarnation: int = -1) -> None:
        self.config = config
        self.id = config.broker_id
        self.store = store
        self.trace: TraceSink = trace if trace is not None else NullTraceSink()
        self.now_ms = clock_ms
        self.wall_ms = wall_ms if wall_ms is not None else clock_ms
        self.incarnation = incarnation
        self.fence = ControllerFence(self.id)
        self.states: dict[TopicPartition, ReplicaState] = {}
        self.producers: dict[TopicPartition, PartitionProducerState] = {}
        self.follower_leos: dict[TopicPartition, dict[int, int]] = {}
        #: per led partition: the LEO when this broker last became its leader (Kafka's
        #: ``leaderEpochStartOffsetOpt``, set by ``makeLeader``)
        self.leader_epoch_start_offsets: dict[TopicPartition, int] = {}
        self.follower_incarnations: dict[TopicPartition, dict[int, int]] = {}
        self.leo_at_previous_fetch: dict[TopicPartition, dict[int, int]] = {}
        self.last_caught_up_ms: dict[TopicPartition, dict[int, int]] = {}
        #: per led partition: the broker epoch of each follower's latest fetch, and the one it
        #: last caught up under in this leadership (what an ISR write vouches for, KIP-903)
        self.follower_broker_epochs: dict[TopicPartition, dict[int, int]] = {}
        self.in_sync_epochs: dict[TopicPartition, dict[int, int]] = {}
        self.followed: dict[TopicPartition, Followed] = {}
        self.pending: dict[TopicPartition, list[PendingProduce]] = {}
        #: per led partition: each follower's log start offset as its last fetch said
        self.follower_log_starts: dict[TopicPartition, dict[int, int]] = {}
        #: per led partition: DeleteRecords waiting for the followers
        self.pending_deletes: dict[TopicPartition, list[PendingDelete]] = {}
        #: per partition: the ISR write in flight (one at a time, as Kafka's AlterPartition)
        self.isr_writes_in_flight: set[TopicPartition] = set()
        #: per partition: the append in flight and the produces queued behind it (check,
        #: append and record are one step for each batch)
        self._appending: dict[TopicPartition, _Appending] = {}
        self._queued: dict[TopicPartition, collections.deque[Produce]] = {}
        #: per partition: the follower append in flight (its token) and the leader's HW that
        #: came with its records
        self._follower_appending: dict[TopicPartition, tuple[int, int, int]] = {}
        self._tokens = 0
        self._request_ids = 0
        #: bumped whenever ``follower_leos`` or ``last_caught_up_ms`` may change
        self._isr_inputs = 0
        #: per partition: (state, now_ms, ``_isr_inputs``) of the last ISR check that found a
        #: full ISR to keep (the same inputs give the same answer: nothing to do)
        self._isr_kept: dict[TopicPartition, tuple[ReplicaState, int, int]] = {}
        self._subjects: dict[TopicPartition, str] = {}
        #: a topic's ``min.insync.replicas`` (the shell wires in the topic's config)
        self.min_insync_of: Callable[[str], int] = lambda topic: config.min_insync_replicas
        #: KIP-73 replication throttles (None: never throttle)
        self.quotas: ReplicationThrottle | None = None
        #: per followed partition: the leader's HW in its last answer (below it: catching up)
        self._leader_hw: dict[TopicPartition, int] = {}
        #: the group coordinator this broker hosts (None: no group APIs)
        self.groups: GroupHost | None = None
        #: the periodic ISR scan in progress: the partitions led when it began, in order, and
        #: how many of them it has visited (done: every one)
        self._isr_scan: list[TopicPartition] = []
        self._isr_scanned = 0

    # --- the interface ---------------------------------------------------------------------

    def register(self, broker_epoch: int) -> None:
        """This incarnation registered with ``broker_epoch`` (older controller requests are
        fenced)."""
        self.fence.register(broker_epoch)

    def host_groups(self, coordinator: Any, commit_timeout_ms: int) -> GroupHost:
        """Host ``coordinator`` (a :class:`~impl.broker.group_coordinator.GroupCoordinator`):
        from now on the node loads and unloads its ``__consumer_offsets`` partitions as it
        gains and loses their leadership, carries its writes as produces and answers its
        requests (:mod:`impl.broker.node_groups`)."""
        from .node_groups import GroupHost  # noqa: PLC0415 (node_groups imports this module)
        host = self.groups = GroupHost(self, coordinator, commit_timeout_ms)
        out: list[Effect] = [RoleChanged(tp, None, state)
                             for tp, state in sorted(self.states.items())
                             if state.role is ReplicaRole.LEADER]
        host.follow_roles(out)
        return host

    def step_produce(self, call: Produce, out: list[Effect]) -> None:
        """A produce from this broker itself (the group coordinator's writes)."""
        self._on_produce(call, out)

    def started(self) -> None:
        """Trace RESTART for every hosted replica (a new incarnation knows no role yet)."""
        for tp in sorted(self.store.hosted()):
            self.trace.emit(TraceEvent.of(replication.MACHINE, ReplicationEvent.RESTART.value,
                                          self.subject(tp), "NONE", "NONE"))

    def crashed(self) -> None:
        """Trace CRASH for every replica with a role (the process is going away)."""
        for tp, state in sorted(self.states.items()):
            self.trace.emit(TraceEvent.of(replication.MACHINE, ReplicationEvent.CRASH.value,
                                          self.subject(tp), state.role.value, "NONE"))

    def step(self, event: object) -> list[Effect]:
        """Apply one input; returns the effects to carry out, in order."""
        out: list[Effect] = []
        kind = type(event)
        if kind is FetchCall:
            self._on_fetch(event, out)  # type: ignore[arg-type]
        elif kind is FetchReply:
            self._on_fetch_reply(event, out)  # type: ignore[arg-type]
        elif kind is Tick:
            self._on_tick(event.periodic, out)  # type: ignore[attr-defined]
            if self.groups is not None:
                self.groups.tick(out)
        elif kind is IsrScan:
            self._scan_isr(out)
        elif kind is Produce:
            self._on_produce(event, out)  # type: ignore[arg-type]
        elif kind is Appended:
            self._on_appended(event, out)  # type: ignore[arg-type]
        elif kind is DeleteRecords:
            self._on_delete_records(event, out)  # type: ignore[arg-type]
        elif kind is EpochCall:
            self._on_epoch_call(event, out)  # type: ignore[arg-type]
        elif kind is EpochReply:
            self._on_epoch_reply(event, out)  # type: ignore[arg-type]
        elif kind is ListOffsetsCall:
            self._on_list_offsets(event, out)  # type: ignore[arg-type]
        elif kind is IsrWritten:
            self._on_isr_written(event, out)  # type: ignore[arg-type]
        elif kind is LeaderAndIsr:
            self._on_leader_and_isr(event, out)  # type: ignore[arg-type]
            if self.groups is not None:
                self.groups.follow_roles(out)
        elif kind is StopReplica:
            self._on_stop_replica(event, out)  # type: ignore[arg-type]
            if self.groups is not None:
                self.groups.follow_roles(out)
        elif kind is OtherControllerRequest:
            request = event.request  # type: ignore[attr-defined]
            top = self.fence.check(request.controller_id, request.controller_epoch,
                                   request.broker_epoch)
            out.append(Reply(event.client,  # type: ignore[attr-defined]
                             (event.request_id,  # type: ignore[attr-defined]
                              ControllerResponse(error_code=top))))
        elif kind is DirsFailed:
            self._on_dirs_failed(out)
            if self.groups is not None:
                self.groups.follow_roles(out)
        elif kind is GroupCall or kind is GroupTick:
            if self.groups is None:
                raise TypeError("this node hosts no group coordinator")
            if kind is GroupCall:
                self.groups.call(event, out)  # type: ignore[arg-type]
            else:
                self.groups.tick(out)
        else:
            raise TypeError(f"not a node input: {event!r}")
        groups = self.groups
        if groups is not None and groups.produces:
            groups.route(out)
        return out

    # --- lookups ---------------------------------------------------------------------------

    def subject(self, tp: TopicPartition) -> str:
        """``t-0@1``: the subject of this broker's replication events about ``tp``."""
        found = self._subjects.get(tp)
        if found is None:
            found = self._subjects[tp] = f"{tp}@{self.id}"
        return found

    def leader_log(self, tp: TopicPartition, epoch: int | None = None
                   ) -> tuple[int, NodeLog | None]:
        """(error code, log) for a partition this broker must lead (in ``epoch`` if given:
        FENCED_LEADER_EPOCH below it, UNKNOWN_LEADER_EPOCH above)."""
        state = self.states.get(tp)
        if state is None:
            return UNKNOWN_TOPIC_OR_PARTITION, None
        if state.role is ReplicaRole.OFFLINE:
            return KAFKA_STORAGE_ERROR, None
        if state.role is not ReplicaRole.LEADER:
            return NOT_LEADER_OR_FOLLOWER, None
        if epoch is not None and epoch >= 0 and epoch != state.leader_epoch:
            return (FENCED_LEADER_EPOCH if epoch < state.leader_epoch
                    else UNKNOWN_LEADER_EPOCH), None
        partition = self.store.log(tp)
        if partition is None:
            return KAFKA_STORAGE_ERROR, None
        return NONE, partition

    def _emit(self, tp: TopicPartition, event: ReplicationEvent, fields: dict[str, Any]) -> None:
        if type(self.trace) is NullTraceSink:
            return  # (a broker not traced: the event would be built for nobody)
        state = self.states.get(tp)
        role = _ROLE_NAMES[state.role] if state is not None else "NONE"
        self.trace.emit(TraceEvent(replication.MACHINE, _EVENT_NAMES[event], self.subject(tp),
                                   role, role, freeze_fields(fields)))

    def producer_state(self, tp: TopicPartition) -> PartitionProducerState:
        """The idempotence state of ``tp``, rebuilt from the log after a change of role or a
        truncation (Kafka reloads it on ``makeLeader``/``makeFollower``)."""
        state = self.producers.get(tp)
        if state is None:
            state = PartitionProducerState()
            partition = self.store.log(tp)
            offset = -1 if partition is None else partition.log_start_offset
            while partition is not None and offset < partition.log_end_offset:
                data = self.store.read_bytes(tp, offset, REPLAY_READ_BYTES)
                headers = list(rb.iter_batches(data))
                if not headers:
                    break
                for header in headers:
                    # the sequence span is the offset span: compaction may have removed
                    # records (even all of them: the producer's last batch is kept empty)
                    state.replay(header.producer_id, header.producer_epoch,
                                 first_sequence=header.base_sequence,
                                 record_count=header.last_offset_delta + 1,
                                 first_offset=header.base_offset, last_offset=header.last_offset)
                offset = headers[-1].next_offset
            self.producers[tp] = state
        return state

    # --- produce and acks ------------------------------------------------------------------

    def _on_produce(self, call: Produce, out: list[Effect]) -> None:
        tp = call.tp
        if call.acks not in (0, 1, -1):
            out.append(Reply(call.client, ProduceReply(call.request_id, tp,
                                                       INVALID_REQUIRED_ACKS)))
            return
        if tp in self._appending:
            self._queued.setdefault(tp, collections.deque()).append(call)
            return
        self._produce(call, out)

    def _produce(self, call: Produce, out: list[Effect]) -> None:
        tp = call.tp
        error, partition = self.leader_log(tp)
        if partition is None:
            out.append(Reply(call.client, ProduceReply(call.request_id, tp, error)))
            return
        state = self.states[tp]
        if call.acks == -1 and len(state.isr) < self.min_insync_of(tp.topic):
            out.append(Reply(call.client, ProduceReply(call.request_id, tp,
                                                       NOT_ENOUGH_REPLICAS)))
            return
        data = call.records
        # The storage engine validates the whole batch (CRC included) when appending; the
        # sequence check only needs the header of a v2 batch, read here without a CRC pass.
        header: rb.BatchHeader | None = None
        if len(data) >= rb.HEADER_SIZE and data[rb.MAGIC_OFFSET] == 2:
            try:
                header = rb.parse_header(data, 0)
            except RecordBatchError:
                header = None
        now_ms = call.now_wall_ms if call.now_wall_ms >= 0 else self.wall_ms()
        if header is not None:
            code = replication.timestamp_error(
                header.base_timestamp, header.max_timestamp,
                log_append_time=header.is_log_append_time,
                now_ms=now_ms,
                difference_max_ms=self.config.timestamp_difference_max_ms)
            if code != NONE:
                out.append(Reply(call.client, ProduceReply(
                    call.request_id, tp, code, error_message="timestamp out of range")))
                return
            # (a batch whose header miscounts its records is not judged by its sequence: the
            # append's validation refuses it, INVALID_RECORD, as Kafka validates a batch before
            # it looks at its producer's state)
            if header.producer_id >= 0 and header.base_sequence >= 0 and (
                    rb.count_consistent(header)):
                try:
                    producers = self.producer_state(tp)
                except (StorageError, OSError):
                    out.append(Reply(call.client, ProduceReply(call.request_id, tp,
                                                               KAFKA_STORAGE_ERROR)))
                    return
                verdict = producers.check(header.producer_id, header.producer_epoch,
                                          header.base_sequence, header.record_count)
                if verdict.verdict is SequenceVerdict.REJECT:
                    out.append(Reply(call.client, ProduceReply(call.request_id, tp,
                                                               verdict.error_code)))
                    return
                if verdict.verdict is SequenceVerdict.DUPLICATE:
                    assert verdict.duplicate_of is not None
                    self._acknowledge(call, (verdict.duplicate_of.first_offset,
                                             verdict.duplicate_of.last_offset, -1),
                                      partition, out)
                    return
        self._tokens += 1
        self._appending[tp] = _Appending(call, header, state.leader_epoch, self._tokens)
        window = replication.timestamp_window(now_ms, self.config.timestamp_difference_max_ms)
        out.append(Append(tp, self._tokens, data, state.leader_epoch, window))

    def _on_appended(self, done: Appended, out: list[Effect]) -> None:
        tp = done.tp
        follower = self._follower_appending.get(tp)
        if follower is not None and follower[0] == done.token:
            self._follower_appended(done, out)
            return
        appending = self._appending.pop(tp, None)
        if appending is None:
            return
        call = appending.produce
        if done.error != NONE:
            out.append(Reply(call.client, ProduceReply(call.request_id, tp, done.error,
                                                       error_message=done.error_message)))
        else:
            self._emit(tp, ReplicationEvent.LEADER_APPEND, {
                "base_offset": done.base_offset, "last_offset": done.last_offset,
                "leader_epoch": appending.leader_epoch})
            header = appending.header
            if header is not None and header.producer_id >= 0 and header.base_sequence >= 0:
                producers = self.producers.get(tp)
                if producers is not None:
                    producers.record(header.producer_id, header.producer_epoch,
                                     first_sequence=header.base_sequence,
                                     record_count=header.record_count,
                                     first_offset=done.base_offset,
                                     last_offset=done.last_offset)
            partition = self.store.log(tp)
            if not self._leads_in(tp, appending.leader_epoch) or partition is None:
                out.append(Reply(call.client, ProduceReply(call.request_id, tp,
                                                           NOT_LEADER_OR_FOLLOWER)))
            else:
                self._acknowledge(call, (done.base_offset, done.last_offset,
                                         done.append_time_ms), partition, out)
        queued = self._queued.get(tp)
        while queued and tp not in self._appending:
            self._produce(queued.popleft(), out)
        if queued is not None and not queued:
            del self._queued[tp]

    def _leads_in(self, tp: TopicPartition, leader_epoch: int) -> bool:
        """This broker still leads ``tp`` in ``leader_epoch`` (a newer LeaderAndIsr deposes
        it: its appends in flight are neither written nor acknowledged)."""
        state = self.states.get(tp)
        return (state is not None and state.role is ReplicaRole.LEADER
                and state.leader_epoch == leader_epoch)

    def append_wanted(self, append: Append) -> bool:
        """Whether ``append`` may still be written: the shell asks holding the partition lock,
        right before the write (the append may have waited for the lock, or for validation off
        the event loop, while a LeaderAndIsr changed the replica's role). A leader's append
        needs the same leader epoch; a follower's the fetch it came from still current."""
        tp = append.tp
        if append.leader_epoch is None:
            followed = self.followed.get(tp)
            return followed is not None and followed.in_flight == -append.token
        appending = self._appending.get(tp)
        return appending is not None and appending.token == append.token and (
            self._leads_in(tp, append.leader_epoch))

    def _acknowledge(self, call: Produce, offsets: tuple[int, int, int], partition: NodeLog,
                     out: list[Effect]) -> None:
        """Answer now (acks 0/1) or once the HW passes the batch (acks=all); ``offsets``: base,
        last and append time."""
        base, last, append_time_ms = offsets
        tp = call.tp
        if call.acks != -1:
            self.advance_hw(tp, partition, out)
            out.append(Reply(call.client, ProduceReply(
                call.request_id, tp, NONE, base, append_time_ms, partition.log_start_offset)))
            return
        self.pending.setdefault(tp, []).append(PendingProduce(
            call.client, call.request_id, last, base,
            self.now_ms() + max(call.timeout_ms, 0), append_time_ms))
        self.advance_hw(tp, partition, out)
        self._complete(tp, out)

    def _complete(self, tp: TopicPartition, out: list[Effect]) -> None:
        """Answer the ``acks=all`` produces the HW passed (Kafka's
        ``checkEnoughReplicasReachOffset``) or whose timeout ran out."""
        waiting = self.pending.get(tp)
        if not waiting:
            return
        partition = self.store.log(tp)
        state = self.states.get(tp)
        if partition is None or state is None:
            return
        high_watermark = partition.high_watermark
        now_ms = self.now_ms()
        min_insync = self.min_insync_of(tp.topic)
        kept: list[PendingProduce] = []
        for item in waiting:
            outcome = replication.acks_all_result(high_watermark, item.last_offset,
                                                  len(state.isr), min_insync)
            if outcome is not None:
                out.append(Reply(item.client, ProduceReply(
                    item.request_id, tp, outcome, item.base_offset if outcome == NONE else -1,
                    item.append_time_ms, partition.log_start_offset)))
            elif now_ms >= item.deadline_ms:
                out.append(Reply(item.client, ProduceReply(item.request_id, tp,
                                                           REQUEST_TIMED_OUT)))
            else:
                kept.append(item)
        self.pending[tp] = kept

    def _fail_pending(self, tp: TopicPartition, error: int, out: list[Effect]) -> None:
        for item in self.pending.pop(tp, []):
            out.append(Reply(item.client, ProduceReply(item.request_id, tp, error)))
        for waiting in self.pending_deletes.pop(tp, []):
            out.append(Reply(waiting.client, DeleteRecordsReply(waiting.request_id, tp, error)))
        self.follower_log_starts.pop(tp, None)

    # --- DeleteRecords ---------------------------------------------------------------------

    def _on_delete_records(self, call: DeleteRecords, out: list[Effect]) -> None:
        """Move the leader's log start offset to ``call.offset`` (durably, through the store),
        then wait for the followers (Kafka's DelayedDeleteRecords)."""
        tp = call.tp
        error, partition = self.leader_log(tp)
        if partition is None:
            out.append(Reply(call.client, DeleteRecordsReply(call.request_id, tp, error)))
            return
        offset = partition.high_watermark if call.offset == -1 else call.offset
        if offset < 0 or offset > partition.high_watermark:
            out.append(Reply(call.client, DeleteRecordsReply(call.request_id, tp,
                                                             OFFSET_OUT_OF_RANGE)))
            return
        try:
            self.store.delete_records(tp, offset)
        except StorageError as storage_error:
            out.append(Reply(call.client, DeleteRecordsReply(call.request_id, tp,
                                                             int(storage_error.error_code))))
            return
        except OSError:
            out.append(Reply(call.client, DeleteRecordsReply(call.request_id, tp,
                                                             KAFKA_STORAGE_ERROR)))
            return
        out.append(LogChanged(tp))
        self.pending_deletes.setdefault(tp, []).append(PendingDelete(
            call.client, call.request_id, offset, self.now_ms() + max(call.timeout_ms, 0)))
        self._complete_deletes(tp, out)

    def low_watermark(self, tp: TopicPartition) -> int:
        """The smallest log start offset over the ISR's replicas (this leader's own included);
        -1 while a follower's is unknown."""
        state = self.states.get(tp)
        partition = self.store.log(tp)
        if state is None or partition is None:
            return -1
        low = partition.log_start_offset
        known = self.follower_log_starts.get(tp, {})
        for replica in state.isr:
            if replica != self.id:
                low = min(low, known.get(replica, -1))
        return low

    def _complete_deletes(self, tp: TopicPartition, out: list[Effect]) -> None:
        """Answer the DeleteRecords whose offset every ISR member's log start reached, or
        whose timeout ran out."""
        waiting = self.pending_deletes.get(tp)
        if not waiting:
            return
        low = self.low_watermark(tp)
        now_ms = self.now_ms()
        kept: list[PendingDelete] = []
        for item in waiting:
            if low >= item.offset:
                out.append(Reply(item.client, DeleteRecordsReply(item.request_id, tp, NONE,
                                                                 low)))
            elif now_ms >= item.deadline_ms:
                out.append(Reply(item.client, DeleteRecordsReply(item.request_id, tp,
                                                                 REQUEST_TIMED_OUT)))
            else:
                kept.append(item)
        if kept:
            self.pending_deletes[tp] = kept
        else:
            del self.pending_deletes[tp]

    def advance_hw(self, tp: TopicPartition, partition: NodeLog, out: list[Effect]) -> None:
        """The leader's HW: the minimum LEO over the ISR, never decreasing."""
        state = self.states.get(tp)
        if state is None or state.role is not ReplicaRole.LEADER:
            return
        new = leader_high_watermark(partition.high_watermark, partition.log_end_offset,
                                    self.follower_leos.get(tp, {}), state.isr, self.id)
        if new != partition.high_watermark:
            partition.high_watermark = new
            self._emit(tp, ReplicationEvent.HW_ADVANCE, {"high_watermark": new,
                                                         "isr": state.isr})
            out.append(HighWatermarkMoved(tp, new))

    # --- the leader side of fetch ----------------------------------------------------------

    def _on_fetch(self, call: FetchCall, out: list[Effect]) -> None:
        """A follower's fetch (records up to the LEO) or a consumer's (up to the HW)."""
        tp = call.tp
        consumer = call.replica < 0
        client = call.client if consumer else call.replica
        error, partition = self.leader_log(tp, None if consumer else call.leader_epoch)
        if partition is None:
            out.append(Reply(client, FetchReply(call.request_id, tp, error)))
            return
        if call.offset > partition.log_end_offset or call.offset < partition.log_start_offset:
            out.append(Reply(client, FetchReply(
                call.request_id, tp, OFFSET_OUT_OF_RANGE,
                high_watermark=partition.high_watermark,
                log_end_offset=partition.log_end_offset,
                log_start_offset=partition.log_start_offset)))
            return
        if not consumer and not call.asked_again:
            self._record_follower_fetch(tp, call, partition, out)
            partition = self.store.log(tp)
            if partition is None:
                out.append(Reply(client, FetchReply(call.request_id, tp,
                                                          KAFKA_STORAGE_ERROR)))
                return
        limit = partition.high_watermark if consumer else None
        quotas = self.quotas
        throttled = quotas is not None and not consumer and (
            call.replica not in self.states[tp].isr) and quotas.leader_throttled(
            tp.topic, tp.partition)
        # KIP-73: a throttled replica outside the ISR gets no data while the leader's
        # leader.replication.throttled.rate is used up
        starved = throttled and quotas is not None and quotas.leader_exceeded()
        try:
            records: object = b""
            if call.max_bytes >= 0 and not starved and call.offset < (
                    limit if limit is not None else partition.log_end_offset):
                records = self.store.read_records(tp, call.offset, call.max_bytes, limit)
        except StorageError as failure:  # not ``error``: an int above (compiled, typed so)
            out.append(Reply(client, FetchReply(call.request_id, tp, int(failure.error_code))))
            return
        except OSError:
            out.append(Reply(client, FetchReply(call.request_id, tp, KAFKA_STORAGE_ERROR)))
            return
        if call.asked_again and not consumer:
            # a delayed fetch's read: its response, which the trace's FOLLOWER_FETCH at arrival
            # did not carry (the model's follower_fetch again, from the offset it recorded)
            fields: dict[str, Any] = {"replica": call.replica, "fetch_offset": call.offset,
                                      "asked_again": True}
            if call.leader_epoch >= 0:
                fields["leader_epoch"] = call.leader_epoch
            self._emit(tp, ReplicationEvent.FOLLOWER_FETCH, fields)
        out.append(Reply(client, FetchReply(
            call.request_id, tp, NONE, records, partition.high_watermark,
            partition.log_end_offset, partition.log_start_offset, throttled)))

    def _record_follower_fetch(self, tp: TopicPartition, call: FetchCall, partition: NodeLog,
                               out: list[Effect]) -> None:
        """A follower fetched from ``call.offset``: its LEO is at least that (a new
        incarnation starts afresh); lastCaughtUpTime, HW and ISR follow."""
        replica, offset = call.replica, call.offset
        incarnations = self.follower_incarnations.setdefault(tp, {})
        offsets = self.follower_leos.setdefault(tp, {})
        if call.incarnation >= 0:
            known = incarnations.get(replica, call.incarnation)
            if call.incarnation < known:
                # A fetch of an incarnation overtaken by a later one (a dead process's request
                # still queued, a duplicate): what that log held says nothing of this one's.
                return
            if known != call.incarnation:
                offsets.pop(replica, None)
            incarnations[replica] = call.incarnation
        now_ms = self.now_ms()
        self._isr_inputs += 1
        previous = self.leo_at_previous_fetch.setdefault(tp, {})
        log_end_offset = partition.log_end_offset
        self.follower_broker_epochs.setdefault(tp, {})[replica] = call.broker_epoch
        if offset >= log_end_offset or offset >= previous.get(replica, 2**63):
            self.last_caught_up_ms.setdefault(tp, {})[replica] = now_ms
            self.in_sync_epochs.setdefault(tp, {})[replica] = call.broker_epoch
        previous[replica] = log_end_offset
        fields: dict[str, Any] = {"replica": replica, "fetch_offset": offset}
        if call.leader_epoch >= 0:
            fields["leader_epoch"] = call.leader_epoch
        self._emit(tp, ReplicationEvent.FOLLOWER_FETCH, fields)
        if call.log_start_offset >= 0:
            starts = self.follower_log_starts.setdefault(tp, {})
            if starts.get(replica) != call.log_start_offset:
                starts[replica] = call.log_start_offset
                if tp in self.pending_deletes:
                    self._complete_deletes(tp, out)
        if offsets.get(replica, -1) < offset:
            offsets[replica] = offset
            self.advance_hw(tp, partition, out)
            self._complete(tp, out)
        self.maybe_change_isr(tp, out, fetched=replica)

    def maybe_change_isr(self, tp: TopicPartition, out: list[Effect],
                         fetched: int | None = None) -> None:
        """Ask for a new ISR when followers caught up or fell behind.

        Only ``fetched``, the follower whose fetch the leader is handling, may join (Kafka's
        ``maybeExpandIsr``, called from ``updateFollowerFetchState``); the periodic check only
        shrinks. A follower's LEO recorded at an older fetch says nothing of its log now: it
        may have crashed since and lost its unflushed tail, and a leader re-adding it from that
        LEO after each shrink (fuzz seeds 7829 and 8630) kept it in ZooKeeper's ISR, the state
        rewritten after it registered again, so a controller failover took it as vouched for.
        """
        state = self.states.get(tp)
        if state is None or state.role is not ReplicaRole.LEADER or (
                tp in self.isr_writes_in_flight):
            return
        isr = state.isr
        now_ms = self.now_ms()
        early = self.config.isr_expanded_early
        full = not early
        if full and isr != state.replicas:
            for replica in state.replicas:  # (a plain loop: no generator for all())
                if replica not in isr:
                    full = False
                    break
        if full:
            # Nobody can join: desired_isr reads neither the HW nor the epoch's start, only the
            # state, the clock and the catch-up times; with all three as last time, the ISR
            # stays.
            kept = self._isr_kept.get(tp)
            if kept is not None and kept[0] is state and kept[1] == now_ms and (
                    kept[2] == self._isr_inputs):
                return
        partition = self.store.log(tp)
        if partition is None:
            return
        if early:
            high_watermark = epoch_start = 0  # the plant: any follower that fetched once joins
        elif full:
            high_watermark = epoch_start = -1
        else:
            high_watermark = partition.high_watermark
            epoch_start = self.leader_epoch_start_offsets.get(tp, -1)
            if epoch_start < 0:
                epoch_start = self.store.epoch_start_offset(tp, state.leader_epoch)
        leos = self.follower_leos.get(tp, {})
        joining: Mapping[int, int] = (
            {} if fetched is None or fetched not in leos else {fetched: leos[fetched]})
        wanted = desired_isr(
            state, high_watermark, follower_log_end_offsets=joining,
            last_caught_up_ms=self.last_caught_up_ms.get(tp, {}),
            now_ms=now_ms, lag_time_max_ms=self.config.replica_lag_time_max_ms,
            leader_epoch_start_offset=epoch_start,
        )
        if wanted == isr or set(wanted) == set(isr):
            if full:
                self._isr_kept[tp] = (state, now_ms, self._isr_inputs)
            return
        wanted, epochs = self._vouched_isr(tp, state, wanted, fetched)
        if set(wanted) == set(isr):
            return
        self.isr_writes_in_flight.add(tp)
        out.append(WriteIsr(tp, state.leader, state.leader_epoch, wanted,
                            state.controller_epoch, state.partition_epoch, isr, epochs))

    def _vouched_isr(self, tp: TopicPartition, state: ReplicaState, wanted: tuple[int, ...],
                     fetched: int | None) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The ISR a leader's write names and the incarnation it vouches for of each member
        (KIP-903: the state records them, spec/controller.md "Unclean shutdowns").

        The leader vouches for itself, for the joining follower ``fetched`` under the broker
        epoch of the fetch that brought it in, and for each member it keeps under the epoch
        of the latest fetch that found it caught up, or brought it in, in this leadership
        (model ``controller_failover_vouching``: recording the incarnation seen caught up
        before the member rejoined lost a record it held). A member that has not
        caught up since this broker became leader is left out: the leader knows nothing of
        its log (it may have crashed and registered again unseen, fuzz seed 1915), and a
        write naming it would vouch for it. It joins again on its own fetch. Kafka's leader
        writes it (its lastCaughtUpTime starts at ``makeLeader``); a shrink finds it out of
        sync by then anyway, only an early expansion drops it.
        """
        own = self.fence.broker_epoch
        in_sync = self.in_sync_epochs.get(tp, {})
        members: list[int] = []
        epochs: list[int] = []
        for replica in wanted:
            if replica == state.leader:
                epoch = own
            elif replica == fetched and replica not in state.isr:
                epoch = self.follower_broker_epochs.get(tp, {}).get(replica, -1)
                # the fetch that brings it in shows this incarnation in sync: a later write
                # keeping it names this one, not one it was seen caught up under before (an
                # incarnation that may since have lost its tail)
                self.in_sync_epochs.setdefault(tp, {})[replica] = epoch
            elif replica in in_sync:
                epoch = in_sync[replica]
            else:
                continue
            members.append(replica)
            epochs.append(epoch)
        return tuple(members), tuple(epochs)

    def _on_isr_written(self, done: IsrWritten, out: list[Effect]) -> None:
        """The leader's ISR write landed (cache the ISR and zkVersion) or was refused."""
        tp = done.tp
        self.isr_writes_in_flight.discard(tp)
        state = self.states.get(tp)
        if done.partition_epoch is None or state is None or (
                state.role is not ReplicaRole.LEADER) or (
                done.partition_epoch < state.partition_epoch):
            return
        self.states[tp] = replication.with_isr(state, done.isr, done.partition_epoch)
        event = (ReplicationEvent.ISR_SHRINK if len(done.isr) < len(state.isr)
                 else ReplicationEvent.ISR_EXPAND)
        self._emit(tp, event, {"isr": done.isr, "partition_epoch": done.partition_epoch})
        partition = self.store.log(tp)
        if partition is not None:
            self.advance_hw(tp, partition, out)
            self._complete(tp, out)

    def _on_epoch_call(self, call: EpochCall, out: list[Effect]) -> None:
        """OffsetForLeaderEpoch (KIP-279)."""
        error, partition = self.leader_log(call.tp, call.current_leader_epoch)
        if partition is None:
            out.append(Reply(call.replica, EpochReply(call.request_id, call.tp, error)))
            return
        try:
            epoch, end_offset = partition.end_offset_for_epoch(call.epoch)
        except (StorageError, OSError):
            out.append(Reply(call.replica, EpochReply(call.request_id, call.tp,
                                                      KAFKA_STORAGE_ERROR)))
            return
        out.append(Reply(call.replica, EpochReply(call.request_id, call.tp, NONE, end_offset,
                                                  epoch)))

    def _on_list_offsets(self, call: ListOffsetsCall, out: list[Effect]) -> None:
        """ListOffsets: latest is the HW for a consumer (it reads below it) and the LEO for a
        follower, earliest the log start offset; a timestamp finds the first record at or
        after it, and max timestamp (KIP-734) the first record stamped with the largest
        timestamp, either below the HW for a consumer or none (Kafka's
        ``fetchOffsetForTimestamp``).

        While a leader's HW is still below the start of its own epoch (just elected: the HW
        it inherited lags the one its predecessor had exposed), a consumer's latest, and a
        search by time that finds nothing below that HW, are OFFSET_NOT_AVAILABLE (retriable),
        as in Kafka: answering the lagging HW would move a consumer's end offset backwards."""
        tp = call.tp
        client = call.client if call.replica < 0 else call.replica
        error, partition = self.leader_log(tp, call.current_leader_epoch)
        if partition is None:
            out.append(Reply(client, ListOffsetsReply(call.request_id, tp, error)))
            return
        consumer = call.replica < 0
        try:
            leader_epoch = self.states[tp].leader_epoch
            lagging = consumer and (
                self.store.epoch_start_offset(tp, leader_epoch) > partition.high_watermark)
            if call.timestamp == LATEST_TIMESTAMP:
                offset = partition.high_watermark if consumer else partition.log_end_offset
                answer = (ListOffsetsReply(call.request_id, tp, OFFSET_NOT_AVAILABLE) if lagging
                          else ListOffsetsReply(call.request_id, tp, NONE, offset, -1,
                                                leader_epoch))
            elif call.timestamp == EARLIEST_TIMESTAMP:
                offset = partition.log_start_offset
                answer = ListOffsetsReply(call.request_id, tp, NONE, offset, -1,
                                          self._epoch_of(tp, offset))
            else:
                found = (self.store.max_timestamp_record(tp) if call.timestamp == MAX_TIMESTAMP
                         else self.store.offset_for_timestamp(tp, call.timestamp))
                if found is not None and consumer and found[0] >= partition.high_watermark:
                    found = None
                if found is not None:
                    answer = ListOffsetsReply(call.request_id, tp, NONE, found[0], found[1],
                                              self._epoch_of(tp, found[0]))
                else:
                    answer = ListOffsetsReply(call.request_id, tp,
                                              OFFSET_NOT_AVAILABLE if lagging else NONE)
        except StorageError as failure:
            answer = ListOffsetsReply(call.request_id, tp, int(failure.error_code))
        except OSError:
            answer = ListOffsetsReply(call.request_id, tp, KAFKA_STORAGE_ERROR)
        out.append(Reply(client, answer))

    def _epoch_of(self, tp: TopicPartition, offset: int) -> int:
        """The leader epoch ``offset`` was written in (the epoch cache's), -1 if unknown."""
        epoch = -1
        for entry, start in self.store.epoch_entries(tp):
            if start > offset:
                break
            epoch = entry
        return epoch

    # --- the follower side -----------------------------------------------------------------

    def _on_tick(self, periodic: bool, out: list[Effect]) -> None:
        now_ms = self.now_ms()
        retry_ms = self.config.request_retry_ms
        # Which partitions ask now is decided up front: asking for one never changes another's
        # record, and most ticks ask for none.
        due: list[TopicPartition] = []
        for tp, followed in self.followed.items():
            if not followed.failed and now_ms >= followed.retry_ms and (
                    followed.in_flight is None or now_ms - followed.sent_ms >= retry_ms):
                due.append(tp)
        for tp in sorted(due) if len(due) > 1 else due:
            followed = self.followed[tp]
            partition = self.store.log(tp)
            if partition is None:
                continue
            self._request_ids += 1
            request_id = self._request_ids
            followed.in_flight, followed.sent_ms = request_id, now_ms
            if not followed.truncated:
                if self.config.truncation_policy.asks_leader:
                    asked = (partition.latest_epoch if followed.ask_epoch is None
                             else followed.ask_epoch)
                    followed.fetch_floor = None
                    out.append(Send(followed.leader, EpochCall(
                        request_id, self.id, tp, followed.leader_epoch, asked)))
                    continue
                try:
                    self._truncate(tp, followed, partition, follower_truncation_offset(
                        self.config.truncation_policy,
                        log_end_offset=partition.log_end_offset,
                        log_start_offset=partition.log_start_offset,
                        high_watermark=partition.high_watermark))
                except (StorageError, OSError):
                    followed.failed = True
                    continue
            quotas = self.quotas
            if quotas is not None and quotas.follower_throttled(tp.topic, tp.partition) and (
                    partition.log_end_offset < self._leader_hw.get(tp, 0)) and (
                    quotas.follower_exceeded()):
                # KIP-73: a throttled replica catching up waits while the follower's
                # follower.replication.throttled.rate is used up (an in-sync one never does)
                followed.in_flight = None
                continue
            if followed.fetch_floor is None or (
                    followed.fetch_offset != partition.log_end_offset):
                followed.fetch_floor, followed.fetch_offset = (
                    request_id, partition.log_end_offset)
            out.append(Send(followed.leader, FetchCall(
                request_id, self.id, self.incarnation, tp, partition.log_end_offset,
                followed.leader_epoch, self.config.fetch_max_bytes,
                log_start_offset=partition.log_start_offset,
                broker_epoch=self.fence.broker_epoch)))
        if periodic:
            if self._isr_scanned >= len(self._isr_scan):
                leading: list[TopicPartition] = []
                for tp, state in self.states.items():
                    if state.role is ReplicaRole.LEADER:
                        leading.append(tp)
                if len(leading) > 1:
                    leading.sort()
                self._isr_scan, self._isr_scanned = leading, 0
            self._scan_isr(out)

    @property
    def isr_scan_pending(self) -> bool:
        """A periodic ISR scan has partitions left (step :class:`IsrScan` to go on)."""
        return self._isr_scanned < len(self._isr_scan)

    def _scan_isr(self, out: list[Effect]) -> None:
        """The scan's next partitions: each one still led has its ISR checked (it only
        shrinks) and its produces and DeleteRecords answered or timed out. A partition that
        stopped being led since the scan began is passed over; one led since waits for the
        next scan."""
        scan = self._isr_scan
        start = self._isr_scanned
        end = min(start + max(self.config.isr_scan_step_partitions, 1), len(scan))
        self._isr_scanned = end
        states = self.states
        pending = self.pending
        deletes = self.pending_deletes
        # (an ISR check changes only its own partition's state, never its role)
        for index in range(start, end):
            tp = scan[index]
            state = states.get(tp)
            if state is None or state.role is not ReplicaRole.LEADER:
                continue
            self.maybe_change_isr(tp, out)
            if pending.get(tp):
                self._complete(tp, out)
            if tp in deletes:
                self._complete_deletes(tp, out)
        if end >= len(scan):
            self._isr_scan, self._isr_scanned = [], 0

    def _truncate(self, tp: TopicPartition, followed: Followed, partition: NodeLog,
                  step: TruncationStep) -> None:
        """Truncate where ``step`` says, once the exchange is over (one TRUNCATE event)."""
        before = partition.log_end_offset
        high_watermark = partition.high_watermark
        leader_epoch_end = followed.first_end
        target = step.offset
        followed.truncate_at = followed.ask_epoch = followed.first_end = None
        rounds, followed.rounds = followed.rounds, 0
        if target < before:
            self.store.truncate(tp, target)
            self.producers.pop(tp, None)
            fields: dict[str, Any] = {"policy": self.config.truncation_policy.value,
                                      "log_end_offset": before, "truncated_to": target}
            if leader_epoch_end is not None:
                fields["leader_epoch_end"] = leader_epoch_end
                fields["rounds"] = rounds
            else:
                fields["high_watermark"] = high_watermark
            self.trace.emit(TraceEvent.of(
                replication.MACHINE, ReplicationEvent.TRUNCATE.value, self.subject(tp),
                ReplicaRole.FOLLOWER.value, ReplicaRole.FOLLOWER.value, **fields))
        partition.high_watermark = min(partition.high_watermark, partition.log_end_offset)
        followed.truncated = True

    def _on_epoch_reply(self, reply: EpochReply, out: list[Effect]) -> None:
        """The leader's end offset: truncate (or ask for an older epoch), then fetch."""
        followed = self.followed.get(reply.tp)
        if followed is None or followed.in_flight != reply.request_id:
            return  # answers a request of an earlier state
        followed.in_flight = None
        partition = self.store.log(reply.tp)
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
                self.config.truncation_policy,
                log_end_offset=leo if followed.truncate_at is None
                else min(followed.truncate_at, leo),
                log_start_offset=partition.log_start_offset,
                high_watermark=partition.high_watermark,
                leader_epoch_end_offset=reply.end_offset, leader_epoch=reply.leader_epoch,
                epochs=self.store.epoch_entries(reply.tp))
            followed.rounds += 1
            if step.done or followed.rounds >= MAX_TRUNCATION_ROUNDS:
                self._truncate(reply.tp, followed, partition, step)
            else:
                # KIP-279: the leader answered an epoch this log lacks; ask for an older one.
                followed.truncate_at, followed.ask_epoch = step.offset, step.ask_epoch
        except (StorageError, OSError):
            followed.failed = True

    def _on_fetch_reply(self, reply: FetchReply, out: list[Effect]) -> None:
        """Append what the leader sent; the follower's HW is min(leader's HW, own LEO).

        The answer to the fetch in flight, or to an earlier one of the same run of fetches from
        this log end offset (:attr:`Followed.fetch_floor`): a fetch sent again after
        ``request_retry_ms`` while the first was still on its way (queued behind a round of
        delayed fetches to the same leader) would otherwise turn away every answer that came
        later than the retry interval, and the follower fetch from the same offset forever
        (simulated cluster seed 11608: a retry interval of 4 ms against answers 4-5 ms away).
        Kafka's fetcher applies a response while the partition's fetch offset and epoch are
        still the ones the request carried (a new epoch is a new :class:`Followed`), and
        drops one whose fetch offset is no longer the partition's: so does this node, for
        the fetch in flight too (sent again while the append of an earlier answer was under
        way, in a shell whose append completes later: it would append its records again,
        below the log end)."""
        tp = reply.tp
        followed = self.followed.get(tp)
        if followed is None:
            return
        if followed.in_flight != reply.request_id:
            in_flight, floor = followed.in_flight, followed.fetch_floor
            if in_flight is None or in_flight < 0 or floor is None or not (
                    floor <= reply.request_id < in_flight):
                return  # answers a request of an earlier state
        partition = self.store.log(tp)
        if partition is None:
            followed.in_flight = None
            return
        if partition.log_end_offset != followed.fetch_offset:
            # (every fetch from fetch_floor on was sent from fetch_offset)
            if followed.in_flight == reply.request_id:
                followed.in_flight = None  # the next tick fetches from the log end
            return
        if reply.error == OFFSET_OUT_OF_RANGE:
            # Kafka's handleOutOfRangeError, from what a Fetch answer carries (the leader's log
            # start; not its LEO): the fetch offset is outside the leader's log.
            followed.in_flight = None
            self._restart_truncation(followed)
            if reply.log_start_offset > partition.log_end_offset:
                # This log ends below the leader's log start (DeleteRecords or retention there
                # while this replica lagged): Kafka's truncateFullyAndStartAt.
                try:
                    self._start_at(tp, partition, reply.log_start_offset)
                except (StorageError, OSError):
                    followed.failed = True
                    return
                followed.truncated = True
            else:
                # The leader's log ends below this one (a truncated or uncleanly elected
                # leader): truncate again by leader epoch (KIP-101), which ends this log at
                # most where the leader's ends, after the back-off.
                followed.retry_ms = self.now_ms() + self.config.fetch_backoff_ms
            return
        if reply.error != NONE:
            followed.in_flight = None
            self._refused(followed, reply.error)
            return
        records = reply.records
        if self.quotas is not None:
            self._leader_hw[tp] = reply.high_watermark
        if records:
            quotas = self.quotas
            if quotas is not None and quotas.follower_throttled(tp.topic, tp.partition):
                quotas.record_follower(len(records))
            self._tokens += 1
            out.append(Append(tp, self._tokens, records, None))
            # (in flight until Appended: a second answer cannot race this one)
            followed.in_flight = -self._tokens
            self._follower_appending[tp] = (self._tokens, reply.high_watermark,
                                            reply.log_start_offset)
            return
        followed.in_flight = None
        self._follower_high_watermark(tp, partition, reply.high_watermark,
                                      reply.log_start_offset, out)

    @staticmethod
    def _restart_truncation(followed: Followed) -> None:
        followed.truncated = False
        followed.truncate_at = followed.ask_epoch = followed.first_end = None
        followed.rounds = 0
        followed.fetch_floor = None

    def _follower_appended(self, done: Appended, out: list[Effect]) -> None:
        """A follower append completed: the HW follows the leader's."""
        tp = done.tp
        _, high_watermark, log_start_offset = self._follower_appending.pop(tp)
        followed = self.followed.get(tp)
        if followed is None or followed.in_flight != -done.token:
            return
        followed.in_flight = None
        if done.error != NONE:
            followed.failed = True
            return
        self.producers.pop(tp, None)
        partition = self.store.log(tp)
        if partition is not None:
            self._follower_high_watermark(tp, partition, high_watermark, log_start_offset, out)

    def _follower_high_watermark(self, tp: TopicPartition, partition: NodeLog, leader_hw: int,
                                 leader_log_start_offset: int, out: list[Effect]) -> None:
        """The follower's HW is min(leader's HW, own LEO); its log start follows the
        leader's (DeleteRecords reaches followers this way)."""
        high_watermark = min(leader_hw, partition.log_end_offset)
        if high_watermark > partition.high_watermark:
            partition.high_watermark = high_watermark
            out.append(LogChanged(tp))
        if leader_log_start_offset > partition.log_start_offset:
            # (a failed dir: the shell steps DirsFailed)
            with contextlib.suppress(StorageError, OSError):
                self.store.follow_log_start_offset(tp, leader_log_start_offset)

    def _refused(self, followed: Followed, error: int) -> None:
        """The leader refused a follower request. Kafka marks the partition failed only when
        fenced (a LeaderAndIsr with a newer epoch is on its way); any other refusal (a leader
        that has not yet heard of its leadership: NOT_LEADER_OR_FOLLOWER, UNKNOWN_*) is asked
        again after ``replica.fetch.backoff.ms``."""
        if error == FENCED_LEADER_EPOCH:
            followed.failed = True
        else:
            followed.retry_ms = self.now_ms() + self.config.fetch_backoff_ms

    def _start_at(self, tp: TopicPartition, partition: NodeLog, offset: int) -> None:
        """Empty the log and start it at ``offset``, the leader's log start (one TRUNCATE
        event, policy ``LOG_START``)."""
        before = partition.log_end_offset
        self.store.truncate_fully(tp, offset)
        self.producers.pop(tp, None)
        self.trace.emit(TraceEvent.of(
            replication.MACHINE, ReplicationEvent.TRUNCATE.value, self.subject(tp),
            ReplicaRole.FOLLOWER.value, ReplicaRole.FOLLOWER.value, policy="LOG_START",
            log_end_offset=before, truncated_to=before, log_start_offset=offset))

    # --- controller requests ---------------------------------------------------------------

    def _on_leader_and_isr(self, call: LeaderAndIsr, out: list[Effect]) -> None:
        """Apply a LeaderAndIsr request (fencing, per-partition epochs, log creation)."""
        request = call.request
        top = self.fence.check(request.controller_id, request.controller_epoch,
                               request.broker_epoch)
        if top != NONE:
            out.append(Reply(call.client, (call.request_id, ControllerResponse(error_code=top))))
            return
        store = self.store
        errors: dict[tuple[str, int], int] = {}
        for item in request.partition_states:
            tp = TopicPartition(item.topic, item.partition)
            offline = store.is_offline(tp)
            existing = None if offline else store.log(tp)
            decision = decide_leader_and_isr(
                self.id, self.states.get(tp),
                PartitionAssignment(item.topic, item.partition, item.controller_epoch,
                                    item.leader, item.leader_epoch, item.isr, item.zk_version,
                                    item.replicas, item.is_new),
                hosted=existing is not None, replica_offline=offline,
                any_dir_offline=store.any_dir_offline(), trace=self.trace,
                log_end_offset=None if existing is None else existing.log_end_offset,
                high_watermark=None if existing is None else existing.high_watermark,
            )
            if decision.error_code != NONE:
                errors[(item.topic, item.partition)] = decision.error_code
                if decision.error_code == KAFKA_STORAGE_ERROR:
                    self._mark_offline(tp, item.leader, item.isr, item.replicas, out)
                continue
            if decision.state is None:
                continue
            if decision.create_log:
                try:
                    store.create(tp, item.is_new)
                except StorageError as error:
                    errors[(item.topic, item.partition)] = int(error.error_code)
                    continue
                except OSError:
                    errors[(item.topic, item.partition)] = KAFKA_STORAGE_ERROR
                    continue
            previous = self.states.get(tp)
            state = self.states[tp] = decision.state
            if previous is None or previous.role is not state.role or (
                    previous.leader_epoch != state.leader_epoch):
                # Kafka reloads the producer state on makeLeader/makeFollower: follower
                # appends and truncations changed the log under any cached copy.
                self.producers.pop(tp, None)
            if decision.became_leader:
                self._isr_inputs += 1
                self.follower_leos[tp] = {}
                self.follower_log_starts[tp] = {}
                self.follower_incarnations[tp] = {}
                self.leo_at_previous_fetch[tp] = {}
                self.last_caught_up_ms[tp] = dict.fromkeys(state.isr, self.now_ms())
                self.follower_broker_epochs[tp] = {}
                self.in_sync_epochs[tp] = {}
            if state.role is ReplicaRole.FOLLOWER:
                self.followed[tp] = Followed(state.leader, state.leader_epoch)
                self._fail_pending(tp, NOT_LEADER_OR_FOLLOWER, out)
            else:
                self.followed.pop(tp, None)
            partition = store.log(tp)
            if partition is not None and state.role is ReplicaRole.LEADER:
                # (a failed dir: the shell steps DirsFailed)
                if previous is None or previous.role is not ReplicaRole.LEADER or (
                        previous.leader_epoch != state.leader_epoch):
                    # Kafka's makeLeader: a follower joins only once it reaches the LEO the
                    # leader had when it became leader, even when the epoch's cache entry
                    # starts lower (a leader restarted and led the same epoch again, its HW
                    # checkpoint behind the HW it had exposed; fuzz seed 1351).
                    self.leader_epoch_start_offsets[tp] = partition.log_end_offset
                with contextlib.suppress(StorageError, OSError):
                    partition.assign_epoch(state.leader_epoch, partition.log_end_offset)
                self.advance_hw(tp, partition, out)
            out.append(RoleChanged(tp, previous, state))
        out.append(Reply(call.client, (call.request_id,
                                       ControllerResponse(partition_errors=errors))))

    def _mark_offline(self, tp: TopicPartition, leader: int, isr: tuple[int, ...],
                      replicas: tuple[int, ...], out: list[Effect]) -> None:
        current = self.states.get(tp)
        state = ReplicaState(
            tp.topic, tp.partition, ReplicaRole.OFFLINE, leader,
            current.leader_epoch if current is not None else -1,
            current.partition_epoch if current is not None else -1, isr, replicas)
        if current != state:
            self.states[tp] = state
            self.followed.pop(tp, None)
            out.append(RoleChanged(tp, current, state))

    def _on_stop_replica(self, call: StopReplica, out: list[Effect]) -> None:
        """Apply a StopReplica request: forget the replica, delete its log when asked."""
        request = call.request
        top = self.fence.check(request.controller_id, request.controller_epoch,
                               request.broker_epoch)
        if top != NONE:
            out.append(Reply(call.client, (call.request_id, ControllerResponse(error_code=top))))
            return
        errors: dict[tuple[str, int], int] = {}
        for item in request.partitions:
            tp = TopicPartition(item.topic, item.partition)
            code = decide_stop_replica(self.states.get(tp), item.leader_epoch,
                                       replica_offline=self.store.is_offline(tp))
            if code != NONE:
                errors[(item.topic, item.partition)] = code
                continue
            previous = self.states.pop(tp, None)
            self.followed.pop(tp, None)
            self.follower_leos.pop(tp, None)
            self.leader_epoch_start_offsets.pop(tp, None)
            self._fail_pending(tp, NOT_LEADER_OR_FOLLOWER, out)
            if previous is not None:
                out.append(RoleChanged(tp, previous, None))
            if item.delete_partition:
                self.producers.pop(tp, None)
                try:
                    self.store.delete(tp)
                except StorageError as error:
                    errors[(item.topic, item.partition)] = int(error.error_code)
                except OSError:
                    errors[(item.topic, item.partition)] = KAFKA_STORAGE_ERROR
        out.append(Reply(call.client, (call.request_id,
                                       ControllerResponse(partition_errors=errors))))

    # --- dir failures ----------------------------------------------------------------------

    def _on_dirs_failed(self, out: list[Effect]) -> None:
        """The replicas on failed dirs go OFFLINE and stop serving; the controller is told."""
        for tp in sorted(self.store.offline_replicas()):
            current = self.states.get(tp)
            self.followed.pop(tp, None)
            self._fail_pending(tp, KAFKA_STORAGE_ERROR, out)
            if current is not None and current.role is not ReplicaRole.OFFLINE:
                state = ReplicaState(
                    current.topic, current.partition, ReplicaRole.OFFLINE, current.leader,
                    current.leader_epoch, current.partition_epoch, current.isr,
                    current.replicas)
                self.states[tp] = state
                out.append(RoleChanged(tp, current, state))
        out.append(ReportDirFailure())


__all__ = [
    "ISR_SCAN_STEP_PARTITIONS",
    "Append",
    "Appended",
    "BrokerNode",
    "DirsFailed",
    "Effect",
    "EpochCall",
    "EpochReply",
    "FetchCall",
    "FetchReply",
    "Followed",
    "GroupCall",
    "GroupTick",
    "HighWatermarkMoved",
    "IsrScan",
    "IsrWritten",
    "LeaderAndIsr",
    "ListOffsetsCall",
    "ListOffsetsReply",
    "LogChanged",
    "NodeConfig",
    "NodeLog",
    "NodeStore",
    "OtherControllerRequest",
    "PendingProduce",
    "Produce",
    "ProduceReply",
    "Reply",
    "ReportDirFailure",
    "RoleChanged",
    "Send",
    "StopReplica",
    "Tick",
    "WriteIsr",
]
