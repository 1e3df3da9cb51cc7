"""The group coordinator: consumer groups and committed offsets (Kafka's classic protocol).

One object per broker holds every group whose offsets partition (``__consumer_offsets``
partition ``abs(javaHashCode(group)) % N``) this broker leads. It is a node in the manner of
etcd's ``raft.go``: :meth:`GroupCoordinator.step` takes one input (a group request, a tick of
the clock, "this broker became leader of / resigned an offsets partition", a chunk of the
partition read back while loading, an append completed) and returns the effects to carry out
(answer a request, append records with acks=all, read the next chunk of a partition). Every
decision lives here; the trio shell (:mod:`impl.broker._handlers_groups`) decodes requests,
carries out effects and feeds their completions back. ``spec/group_coordinator.md`` is the
specification and ``model/group_coordinator.py`` the checked model; the names are shared.

Decisions taken here, following Kafka's ``GroupCoordinator`` and ``GroupMetadataManager``:

* **Loading** (COORDINATOR_LOADED): an offsets partition answers NOT_COORDINATOR until this
  broker leads it, COORDINATOR_LOAD_IN_PROGRESS while it replays the partition, and serves only
  once the replay reached the log end. A resignation unloads it: its groups go DEAD, parked
  JoinGroup and SyncGroup requests get NOT_COORDINATOR. Leader epochs discard a stale load.
* **Durability** (OFFSETS_DURABLE): group records and offset commits are appended with acks=all
  and answered only after the append completes; the cache changes only then.
* **Fencing** (GROUP_COMMIT_FENCED): SyncGroup, Heartbeat, LeaveGroup and OffsetCommit check the
  member id (static members: the instance id's current member id) and the generation.
* **Rebalancing** (GROUP_ASSIGNMENT_EXCLUSIVE): a generation's assignment comes from its leader
  alone and is handed out only once persisted, to members of that generation.

This module is a sans-IO core.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from mypy_extensions import mypyc_attr

from impl.trace import NullTraceSink, TraceEvent, TraceSink

from . import group_records as gr

__sans_io__ = True

MACHINE: Final = "group_coordinator"
OFFSETS_TOPIC: Final = "__consumer_offsets"

NONE: Final = 0
UNKNOWN_TOPIC_OR_PARTITION: Final = 3
NOT_LEADER_OR_FOLLOWER: Final = 6
REQUEST_TIMED_OUT: Final = 7
OFFSET_METADATA_TOO_LARGE: Final = 12
COORDINATOR_LOAD_IN_PROGRESS: Final = 14
COORDINATOR_NOT_AVAILABLE: Final = 15
NOT_COORDINATOR: Final = 16
NOT_ENOUGH_REPLICAS: Final = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND: Final = 20
ILLEGAL_GENERATION: Final = 22
INCONSISTENT_GROUP_PROTOCOL: Final = 23
INVALID_GROUP_ID: Final = 24
UNKNOWN_MEMBER_ID: Final = 25
INVALID_SESSION_TIMEOUT: Final = 26
REBALANCE_IN_PROGRESS: Final = 27
INVALID_COMMIT_OFFSET_SIZE: Final = 28
MESSAGE_TOO_LARGE: Final = 10
RECORD_LIST_TOO_LARGE: Final = 18
INVALID_FETCH_SIZE: Final = 4
KAFKA_STORAGE_ERROR: Final = 56
NON_EMPTY_GROUP: Final = 68
GROUP_ID_NOT_FOUND: Final = 69
MEMBER_ID_REQUIRED: Final = 79
FENCED_INSTANCE_ID: Final = 82
GROUP_MAX_SIZE_REACHED: Final = 81
GROUP_SUBSCRIBED_TO_TOPIC: Final = 86
UNKNOWN_SERVER_ERROR: Final = -1

#: Kafka's name of each state in DescribeGroups and ListGroups.
STATE_NAMES: Final[Mapping[str, str]] = {
    "EMPTY": "Empty", "PREPARING_REBALANCE": "PreparingRebalance",
    "COMPLETING_REBALANCE": "CompletingRebalance", "STABLE": "Stable", "DEAD": "Dead",
}
#: How long a load waits before it reads again after a failed read.
LOAD_RETRY_BACKOFF_MS: Final = 500
#: A new member's parked JoinGroup expires after this long (KAFKA-7610).
NEW_MEMBER_JOIN_TIMEOUT_MS: Final = 300_000


class GroupState(enum.Enum):
    """A group's state at its coordinator (Kafka's ``GroupState``)."""

    EMPTY = "EMPTY"  #: no members; offsets may still be committed and fetched
    PREPARING_REBALANCE = "PREPARING_REBALANCE"  #: waiting for the members to (re)join
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"  #: joined; waiting for the leader's assignment
    STABLE = "STABLE"  #: the generation's assignment is persisted and handed out
    DEAD = "DEAD"  #: the coordinator does not hold the group (unloaded or deleted)


class CoordinatorState(enum.Enum):
    """This broker's state for one offsets partition (``GroupMetadataManager``)."""

    UNLOADED = "UNLOADED"  #: not the leader of the partition: NOT_COORDINATOR
    LOADING = "LOADING"  #: leader, replaying the partition: COORDINATOR_LOAD_IN_PROGRESS
    LOADED = "LOADED"  #: leader with the whole partition replayed: serving


class GroupEvent(enum.Enum):
    """Events of the group coordinator (names shared with ``model/group_coordinator.py``)."""

    COORDINATOR_ELECTED = "COORDINATOR_ELECTED"  #: leader of an offsets partition: load it
    LOAD_COMPLETED = "LOAD_COMPLETED"  #: the partition was replayed to its end
    COORDINATOR_RESIGNED = "COORDINATOR_RESIGNED"  #: no longer leader: unload
    MEMBER_JOINED = "MEMBER_JOINED"  #: a JoinGroup was parked
    JOIN_COMPLETED = "JOIN_COMPLETED"  #: the join phase ended: a new generation
    SYNC_COMPLETED = "SYNC_COMPLETED"  #: the leader's assignment was persisted: STABLE
    ASSIGNMENT_RECEIVED = "ASSIGNMENT_RECEIVED"  #: a member's SyncGroup got its assignment
    MEMBER_LEFT = "MEMBER_LEFT"  #: LeaveGroup
    SESSION_EXPIRED = "SESSION_EXPIRED"  #: no heartbeat within the session timeout
    OFFSET_COMMITTED = "OFFSET_COMMITTED"  #: an OffsetCommit was persisted and answered
    OFFSET_FETCHED = "OFFSET_FETCHED"  #: an OffsetFetch was answered from the cache
    GROUP_DELETED = "GROUP_DELETED"  #: DeleteGroups of an EMPTY group
    OFFSETS_EXPIRED = "OFFSETS_EXPIRED"  #: offsets past their retention were removed


@mypyc_attr(native_class=False)  # mypyc: a built-in exception's subclass stays a Python class
class InvalidGroupTransitionError(AssertionError):
    """A group transition outside the table: the coordinator's own invariant broke."""


#: Legal group transitions (Kafka's ``validPreviousStates``).
TRANSITIONS: Final[Mapping[GroupState, frozenset[GroupState]]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.EMPTY, GroupState.COMPLETING_REBALANCE, GroupState.STABLE}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    """The broker settings the coordinator reads (Kafka's names and defaults)."""

    #: ``offsets.topic.num.partitions``
    offsets_partitions: int = 50
    #: ``group.min.session.timeout.ms`` and ``group.max.session.timeout.ms``
    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    #: ``group.initial.rebalance.delay.ms``
    initial_rebalance_delay_ms: int = 3_000
    #: ``group.max.size``
    max_size: int = 2**31 - 1
    #: ``offset.metadata.max.bytes``
    offset_metadata_max_bytes: int = 4096
    #: ``offsets.retention.minutes`` (in milliseconds)
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    #: ``offsets.retention.check.interval.ms``
    offsets_retention_check_interval_ms: int = 600_000
    #: ``offsets.load.buffer.size``: bytes per read while loading
    load_buffer_bytes: int = 5 * 1024 * 1024


# --- inputs ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Elected:
    """This broker became leader of offsets partition ``partition`` in ``leader_epoch``."""

    partition: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class Resigned:
    """This broker no longer leads offsets partition ``partition`` (``leader_epoch`` is the
    epoch of the LeaderAndIsr or StopReplica that said so; -1 when unknown)."""

    partition: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class PartitionRead:
    """The answer to :class:`ReadPartition`: the whole batches read from ``offset``."""

    partition: int
    leader_epoch: int
    batches: tuple[bytes, ...]
    next_offset: int
    at_end: bool
    error: str | None = None


@dataclass(frozen=True, slots=True)
class AppendCompleted:
    """The answer to :class:`Append`: an error code (0: the records are committed)."""

    token: int
    error_code: int


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed (session timeouts, join and sync deadlines, offset expiry)."""


@dataclass(frozen=True, slots=True)
class JoinGroup:
    """A JoinGroup request."""

    request_id: int
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    #: v4+: a member without an id is told MEMBER_ID_REQUIRED first (KIP-394)
    require_known_member_id: bool


@dataclass(frozen=True, slots=True)
class SyncGroup:
    """A SyncGroup request."""

    request_id: int
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A Heartbeat request."""

    request_id: int
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None

    def __init__(
        self, request_id: int, group_id: str, generation_id: int, member_id: str,
        group_instance_id: str | None
    ) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "request_id", request_id)
        object.__setattr__(self, "group_id", group_id)
        object.__setattr__(self, "generation_id", generation_id)
        object.__setattr__(self, "member_id", member_id)
        object.__setattr__(self, "group_instance_id", group_instance_id)


@dataclass(frozen=True, slots=True)
class LeaveGroup:
    """A LeaveGroup request (v3+ carries several members; older ones one member id)."""

    request_id: int
    group_id: str
    members: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True, slots=True)
class CommitEntry:
    """One partition of an OffsetCommit."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    """An OffsetCommit request (generation -1: a commit outside any group protocol)."""

    request_id: int
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    retention_ms: int
    entries: tuple[CommitEntry, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetch:
    """An OffsetFetch request for one group (``partitions`` None: every committed one)."""

    request_id: int
    group_id: str
    partitions: tuple[tuple[str, int], ...] | None


@dataclass(frozen=True, slots=True)
class DescribeGroups:
    """A DescribeGroups request."""

    request_id: int
    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ListGroups:
    """A ListGroups request (``states`` empty: every state; Kafka's state names)."""

    request_id: int
    states: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeleteGroups:
    """A DeleteGroups request."""

    request_id: int
    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class OffsetDelete:
    """An OffsetDelete request."""

    request_id: int
    group_id: str
    partitions: tuple[tuple[str, int], ...]


Request = (JoinGroup | SyncGroup | Heartbeat | LeaveGroup | OffsetCommit | OffsetFetch
           | DescribeGroups | ListGroups | DeleteGroups | OffsetDelete)
Input = Elected | Resigned | PartitionRead | AppendCompleted | Tick | Request


# --- effects --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Respond:
    """Answer request ``request_id`` with ``body`` (the response's fields, Kafka's names)."""

    request_id: int
    body: Mapping[str, Any]

    def __init__(self, request_id: int, body: Mapping[str, Any]) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "request_id", request_id)
        object.__setattr__(self, "body", body)


@dataclass(frozen=True, slots=True)
class Append:
    """Append ``records`` (key, value or None) to offsets partition ``partition`` as leader in
    ``leader_epoch`` with acks=all (``acks`` -1) and report :class:`AppendCompleted` with
    ``token``; ``acks`` 0 (expiry tombstones, as Kafka writes them) needs no completion."""

    token: int
    partition: int
    leader_epoch: int
    records: tuple[tuple[bytes, bytes | None], ...]
    acks: int = -1


@dataclass(frozen=True, slots=True)
class ReadPartition:
    """Read whole batches of offsets partition ``partition`` from ``offset`` (-1: its log
    start), at most ``max_bytes`` (at least one batch), and report :class:`PartitionRead`."""

    partition: int
    leader_epoch: int
    offset: int
    max_bytes: int
    #: wait this long first (a retry after a failed read)
    backoff_ms: int = 0


Effect = Respond | Append | ReadPartition


# --- state ----------------------------------------------------------------------------------


@dataclass
class Member:
    """A member of a group."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    join_request: int | None = None
    sync_request: int | None = None
    heartbeat_deadline_ms: int = 0
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        """This member's metadata for ``protocol``."""
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""


@dataclass
class Group:
    """A group at its coordinator."""

    group_id: str
    partition: int
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    #: KIP-394: member ids handed out, awaiting the member's rejoin, with their deadlines
    pending: dict[str, int] = field(default_factory=dict)
    #: KIP-345: instance id -> member id
    static: dict[str, str] = field(default_factory=dict)
    offsets: dict[tuple[str, int], gr.OffsetValue] = field(default_factory=dict)
    state_timestamp_ms: int = -1
    join_deadline_ms: int | None = None
    #: the initial delay (``group.initial.rebalance.delay.ms``) is running until then
    initial_delay_until_ms: int | None = None
    #: the rebalance timeout bounds the extended initial delay
    initial_delay_bound_ms: int | None = None
    sync_deadline_ms: int | None = None
    #: a leader's assignment being appended: its token
    sync_token: int | None = None


@dataclass
class _Partition:
    """This broker's view of one offsets partition."""

    state: CoordinatorState = CoordinatorState.UNLOADED
    leader_epoch: int = -1
    #: replayed so far while loading: offsets and group records by key
    loaded_offsets: dict[tuple[str, str, int], gr.OffsetValue] = field(default_factory=dict)
    loaded_groups: dict[str, gr.GroupValue] = field(default_factory=dict)
    load_started_ms: int = 0


@dataclass
class _PendingAppend:
    """What an append's completion decides."""

    kind: str
    partition: int
    leader_epoch: int
    group_id: str
    request_id: int | None = None
    generation: int = -1
    offsets: tuple[tuple[tuple[str, int], gr.OffsetValue], ...] = ()
    answer: dict[tuple[str, int], int] = field(default_factory=dict)
    groups: tuple[str, ...] = ()
    member_id: str = ""
    #: a commit: the group's generation and state when it was accepted
    group_generation: int = -1
    group_state: str = ""


def _consumer_topics(subscription: bytes) -> set[str] | None:
    """The topics of a ``consumer`` protocol subscription (None if it does not parse)."""
    try:
        position = 2
        (count,) = struct.unpack_from(">i", subscription, position)
        position += 4
        if count < 0 or count > len(subscription):
            return None
        topics = set()
        for _ in range(count):
            (size,) = struct.unpack_from(">h", subscription, position)
            position += 2
            if size < 0 or position + size > len(subscription):
                return None
            topics.add(subscription[position:position + size].decode("utf-8"))
            position += size
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


class GroupCoordinator:
    """The group coordinator of one broker.

    Args:
        broker_id: this broker (trace subjects).
        config: the coordinator's settings.
        new_member_suffix: a fresh unique string per call (a UUID in the shell, a seeded
            counter in tests and the simulator): new member ids are ``<client id>-<suffix>``.
        trace: where the coordinator's events go.
    """

    def __init__(self, broker_id: int, config: CoordinatorConfig,
                 new_member_suffix: Callable[[], str], trace: TraceSink | None = None) -> None:
        self.broker_id = broker_id
        self.config = config
        self._suffix = new_member_suffix
        self.trace: TraceSink = trace if trace is not None else NullTraceSink()
        self.partitions: dict[int, _Partition] = {}
        self.groups: dict[str, Group] = {}
        self._appends: dict[int, _PendingAppend] = {}
        self._next_token = 0
        self._next_expiry_ms: int | None = None
        self.now_ms = 0

    # --- public --------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        """The offsets partition of ``group_id``."""
        return gr.partition_for(group_id, self.config.offsets_partitions)

    def coordinator_state(self, partition: int) -> CoordinatorState:
        """This broker's load state of an offsets partition."""
        state = self.partitions.get(partition)
        return CoordinatorState.UNLOADED if state is None else state.state

    def next_deadline_ms(self) -> int | None:
        """The earliest time a :class:`Tick` has something to do (None: nothing pending)."""
        deadlines: list[int] = []
        for group in self.groups.values():
            for member in group.members.values():
                if member.join_request is None:
                    deadlines.append(member.heartbeat_deadline_ms)
            deadlines += group.pending.values()
            for deadline in (group.join_deadline_ms, group.sync_deadline_ms,
                             group.initial_delay_until_ms):
                if deadline is not None:
                    deadlines.append(deadline)
        if self._next_expiry_ms is not None:
            deadlines.append(self._next_expiry_ms)
        return min(deadlines) if deadlines else None

    def step(self, event: Input, now_ms: int) -> list[Effect]:
        """Take one input at time ``now_ms`` (milliseconds, monotonic); the effects to carry
        out, in order."""
        self.now_ms = max(self.now_ms, now_ms)
        out: list[Effect] = []
        handler: Callable[[Any, list[Effect]], None] = getattr(self, self._HANDLERS[type(event)])
        handler(event, out)
        return out

    # --- helpers -------------------------------------------------------------------------

    def _emit(self, event: GroupEvent, subject: str, before: str, after: str,
              **fields: object) -> None:
        self.trace.emit(TraceEvent.of(MACHINE, event.value, subject, before, after,
                                      broker=self.broker_id, **fields))

    def _transition(self, group: Group, to: GroupState, event: GroupEvent,
                    **fields: object) -> None:
        if group.state not in TRANSITIONS[to]:
            raise InvalidGroupTransitionError(f"group {group.group_id}: {group.state.name} -> "
                                         f"{to.name} on {event.name}")
        before = group.state
        group.state = to
        group.state_timestamp_ms = self.now_ms
        self._emit(event, group.group_id, before.name, to.name, generation=group.generation,
                   **fields)

    def _token(self, pending: _PendingAppend) -> int:
        self._next_token += 1
        self._appends[self._next_token] = pending
        return self._next_token

    def _status(self, group_id: str, *, loading_error: int = COORDINATOR_LOAD_IN_PROGRESS
                ) -> int:
        """The group-level error of a request about ``group_id`` (Kafka's
        ``validateGroupStatus``), NONE when this broker serves it."""
        if not group_id:
            return INVALID_GROUP_ID
        state = self.coordinator_state(self.partition_for(group_id))
        if state is CoordinatorState.UNLOADED:
            return NOT_COORDINATOR
        if state is CoordinatorState.LOADING:
            return loading_error
        return NONE

    def _member_error(self, group: Group, member_id: str, instance_id: str | None) -> int:
        """Kafka's ``validateCurrentMember``: FENCED_INSTANCE_ID or UNKNOWN_MEMBER_ID."""
        if instance_id is not None:
            known = group.static.get(instance_id)
            if known is not None and known != member_id:
                return FENCED_INSTANCE_ID
            if known is None:
                return UNKNOWN_MEMBER_ID
        if member_id not in group.members:
            return UNKNOWN_MEMBER_ID
        return NONE

    def _group_record(self, group: Group) -> tuple[bytes, bytes | None]:
        key = gr.encode_group_key(gr.GroupKey(group.group_id))
        value = gr.GroupValue(
            protocol_type=group.protocol_type or "", generation=group.generation,
            protocol=group.protocol, leader=group.leader,
            current_state_timestamp_ms=group.state_timestamp_ms,
            members=tuple(
                gr.MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                               m.rebalance_timeout_ms, m.session_timeout_ms,
                               m.metadata(group.protocol), m.assignment)
                for m in group.members.values()),
        )
        return key, gr.encode_group_value(value)

    def _partition_epoch(self, partition: int) -> int:
        state = self.partitions.get(partition)
        return -1 if state is None else state.leader_epoch

    def _heartbeat(self, member: Member) -> None:
        member.heartbeat_deadline_ms = self.now_ms + member.session_timeout_ms

    @staticmethod
    def _append_error(code: int, *, commit: bool) -> int:
        """Kafka's mapping of an append error to the group API's error."""
        if code in (UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS,
                    NOT_ENOUGH_REPLICAS_AFTER_APPEND):
            return COORDINATOR_NOT_AVAILABLE
        if code in (NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR):
            return NOT_COORDINATOR
        if code == REQUEST_TIMED_OUT:
            return REQUEST_TIMED_OUT if commit else REBALANCE_IN_PROGRESS
        if code in (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_FETCH_SIZE):
            return INVALID_COMMIT_OFFSET_SIZE if commit else UNKNOWN_SERVER_ERROR
        return code

    # --- partitions: load and unload -----------------------------------------------------

    def _on_elected(self, event: Elected, out: list[Effect]) -> None:
        state = self.partitions.setdefault(event.partition, _Partition())
        if event.leader_epoch < state.leader_epoch:
            return
        if state.state is not CoordinatorState.UNLOADED and \
                event.leader_epoch == state.leader_epoch:
            return
        if state.state is not CoordinatorState.UNLOADED:
            self._unload(event.partition, out)
        before = state.state
        state.state = CoordinatorState.LOADING
        state.leader_epoch = event.leader_epoch
        state.loaded_offsets = {}
        state.loaded_groups = {}
        state.load_started_ms = self.now_ms
        self._emit(GroupEvent.COORDINATOR_ELECTED, self._subject(event.partition), before.name,
                   state.state.name, leader_epoch=event.leader_epoch)
        out.append(ReadPartition(event.partition, event.leader_epoch, -1,
                                 self.config.load_buffer_bytes))

    def _subject(self, partition: int) -> str:
        return f"{OFFSETS_TOPIC}-{partition}@{self.broker_id}"

    def _on_read(self, event: PartitionRead, out: list[Effect]) -> None:
        state = self.partitions.get(event.partition)
        if state is None or state.state is not CoordinatorState.LOADING or \
                state.leader_epoch != event.leader_epoch:
            return  # a stale load (KAFKA-10614)
        if event.error is not None:
            out.append(ReadPartition(event.partition, event.leader_epoch, event.next_offset,
                                     self.config.load_buffer_bytes, LOAD_RETRY_BACKOFF_MS))
            return
        for batch in event.batches:
            try:
                for _, key, value in gr.iter_records(batch):
                    self._replay(state, key, value)
            except gr.GroupRecordError:
                continue
        if not event.at_end and event.batches:
            out.append(ReadPartition(event.partition, event.leader_epoch, event.next_offset,
                                     self.config.load_buffer_bytes))
            return
        self._finish_load(event.partition, state, out)

    @staticmethod
    def _replay(state: _Partition, key_bytes: bytes | None, value: bytes | None) -> None:
        if key_bytes is None:
            return
        try:
            key = gr.decode_key(key_bytes)
            if isinstance(key, gr.OffsetKey):
                slot = (key.group_id, key.topic, key.partition)
                if value is None:
                    state.loaded_offsets.pop(slot, None)
                else:
                    state.loaded_offsets[slot] = gr.decode_offset_value(value)
            elif isinstance(key, gr.GroupKey):
                if value is None:
                    state.loaded_groups.pop(key.group_id, None)
                    for slot in [s for s in state.loaded_offsets if s[0] == key.group_id]:
                        del state.loaded_offsets[slot]
                else:
                    state.loaded_groups[key.group_id] = gr.decode_group_value(value)
        except gr.GroupRecordError:
            return

    def _finish_load(self, partition: int, state: _Partition, out: list[Effect]) -> None:
        for group_id, value in state.loaded_groups.items():
            group = Group(group_id, partition, generation=value.generation,
                          protocol_type=value.protocol_type or None, protocol=value.protocol,
                          leader=value.leader, state_timestamp_ms=self.now_ms)
            for stored in value.members:
                member = Member(stored.member_id, stored.group_instance_id, stored.client_id,
                                stored.client_host, stored.session_timeout_ms,
                                stored.rebalance_timeout_ms, value.protocol_type,
                                ((value.protocol or "", stored.subscription),),
                                assignment=stored.assignment)
                self._heartbeat(member)
                group.members[member.member_id] = member
                if member.group_instance_id is not None:
                    group.static[member.group_instance_id] = member.member_id
            group.state = GroupState.STABLE if group.members else GroupState.EMPTY
            self.groups[group_id] = group
        for (group_id, topic, index), offset in state.loaded_offsets.items():
            holder = self.groups.get(group_id)
            if holder is None:
                holder = self.groups[group_id] = Group(group_id, partition,
                                                       state_timestamp_ms=self.now_ms)
            holder.offsets[(topic, index)] = offset
        loaded = len([g for g in self.groups.values() if g.partition == partition])
        state.loaded_offsets = {}
        state.loaded_groups = {}
        state.state = CoordinatorState.LOADED
        self._emit(GroupEvent.LOAD_COMPLETED, self._subject(partition),
                   CoordinatorState.LOADING.name, CoordinatorState.LOADED.name,
                   leader_epoch=state.leader_epoch, groups=loaded)
        if self._next_expiry_ms is None:
            self._next_expiry_ms = self.now_ms + self.config.offsets_retention_check_interval_ms

    def _on_resigned(self, event: Resigned, out: list[Effect]) -> None:
        state = self.partitions.get(event.partition)
        if state is None or state.state is CoordinatorState.UNLOADED:
            if state is not None:
                state.leader_epoch = max(state.leader_epoch, event.leader_epoch)
            return
        if 0 <= event.leader_epoch < state.leader_epoch:
            return
        self._unload(event.partition, out)
        state.leader_epoch = max(state.leader_epoch, event.leader_epoch)

    def _unload(self, partition: int, out: list[Effect]) -> None:
        state = self.partitions[partition]
        before = state.state
        for group in [g for g in self.groups.values() if g.partition == partition]:
            for member in group.members.values():
                for request in (member.join_request, member.sync_request):
                    if request is not None:
                        out.append(Respond(request, {"error_code": NOT_COORDINATOR}))
                member.join_request = member.sync_request = None
            group.state = GroupState.DEAD
            del self.groups[group.group_id]
        state.state = CoordinatorState.UNLOADED
        state.loaded_offsets = {}
        state.loaded_groups = {}
        self._emit(GroupEvent.COORDINATOR_RESIGNED, self._subject(partition), before.name,
                   CoordinatorState.UNLOADED.name, leader_epoch=state.leader_epoch)

    # --- JoinGroup -----------------------------------------------------------------------

    def _on_join(self, request: JoinGroup, out: list[Effect]) -> None:
        def fail(code: int, member_id: str = "") -> None:
            out.append(Respond(request.request_id, {
                "error_code": code, "generation_id": -1, "protocol_type": None,
                "protocol_name": None, "leader": "", "member_id": member_id, "members": []}))

        code = self._status(request.group_id)
        if code != NONE:
            return fail(code, request.member_id)
        if not (self.config.min_session_timeout_ms <= request.session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return fail(INVALID_SESSION_TIMEOUT, request.member_id)
        if not request.protocol_type or not request.protocols:
            return fail(INCONSISTENT_GROUP_PROTOCOL, request.member_id)
        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_id:
                return fail(UNKNOWN_MEMBER_ID, request.member_id)
            group = Group(request.group_id, self.partition_for(request.group_id),
                          state_timestamp_ms=self.now_ms)
            self.groups[request.group_id] = group
        if group.state is GroupState.DEAD:
            return fail(COORDINATOR_NOT_AVAILABLE, request.member_id)
        if not self._protocols_compatible(group, request):
            return fail(INCONSISTENT_GROUP_PROTOCOL, request.member_id)
        if not request.member_id:
            self._join_unknown(group, request, out, fail)
        else:
            self._join_known(group, request, out, fail)
        self._try_complete_join(group, out)
        return None

    @staticmethod
    def _protocols_compatible(group: Group, request: JoinGroup) -> bool:
        if not group.members:
            return True
        if group.protocol_type != request.protocol_type:
            return False
        names = {name for name, _ in request.protocols}
        others = [m for m in group.members.values() if m.member_id != request.member_id]
        if not others:
            return True
        common = set.intersection(*[{name for name, _ in m.protocols} for m in others])
        return bool(names & common)

    def _join_unknown(self, group: Group, request: JoinGroup, out: list[Effect],
                      fail: Callable[[int, str], None]) -> None:
        if len(group.members) >= self.config.max_size:
            return fail(GROUP_MAX_SIZE_REACHED, "")
        prefix = request.group_instance_id or request.client_id
        member_id = f"{prefix}-{self._suffix()}"
        instance = request.group_instance_id
        if instance is not None and instance in group.static:
            return self._replace_static(group, request, member_id, out)
        if instance is None and request.require_known_member_id:
            group.pending[member_id] = self.now_ms + request.session_timeout_ms
            return fail(MEMBER_ID_REQUIRED, member_id)
        self._add_and_park(group, request, member_id, out)
        return None

    def _replace_static(self, group: Group, request: JoinGroup, member_id: str,
                        out: list[Effect]) -> None:
        """KIP-345: a known instance rejoins without its member id: it takes a new id and the
        old one is fenced."""
        assert request.group_instance_id is not None
        old_id = group.static[request.group_instance_id]
        old = group.members.pop(old_id)
        for parked in (old.join_request, old.sync_request):
            if parked is not None:
                out.append(Respond(parked, {"error_code": FENCED_INSTANCE_ID,
                                            "generation_id": -1, "member_id": old_id,
                                            "leader": "", "members": []}))
        unchanged = old.protocols == request.protocols
        old.member_id = member_id
        old.join_request = old.sync_request = None
        old.session_timeout_ms = request.session_timeout_ms
        old.rebalance_timeout_ms = request.rebalance_timeout_ms
        old.protocols = request.protocols
        old.client_id, old.client_host = request.client_id, request.client_host
        group.members[member_id] = old
        group.static[request.group_instance_id] = member_id
        if group.leader == old_id:
            group.leader = member_id
        self._heartbeat(old)
        if group.state is GroupState.STABLE and unchanged:
            self._emit(GroupEvent.MEMBER_JOINED, group.group_id, group.state.name,
                       group.state.name, member=member_id, replaced=old_id,
                       generation=group.generation)
            # Same generation: persist the new member id, then answer (KAFKA-10284).
            key, value = self._group_record(group)
            token = self._token(_PendingAppend("static_rejoin", group.partition,
                                               self._partition_epoch(group.partition),
                                               group.group_id, request.request_id,
                                               group.generation, member_id=member_id))
            out.append(Append(token, group.partition, self._partition_epoch(group.partition),
                              ((key, value),)))
            return
        old.join_request = request.request_id
        self._joined(group, member_id, out, replaced=old_id)

    def _add_and_park(self, group: Group, request: JoinGroup, member_id: str,
                      out: list[Effect]) -> None:
        if not group.members:
            group.protocol_type = request.protocol_type
        member = Member(member_id, request.group_instance_id, request.client_id,
                        request.client_host, request.session_timeout_ms,
                        request.rebalance_timeout_ms, request.protocol_type, request.protocols,
                        join_request=request.request_id, is_new=True)
        self._heartbeat(member)
        group.members[member_id] = member
        if request.group_instance_id is not None:
            group.static[request.group_instance_id] = member_id
        was_preparing = group.state is GroupState.PREPARING_REBALANCE
        self._joined(group, member_id, out)
        if was_preparing and group.initial_delay_until_ms is not None and \
                group.initial_delay_bound_ms is not None:
            # A new member arrived during the initial delay: extend it, bounded.
            extended = min(self.now_ms + self.config.initial_rebalance_delay_ms,
                           group.initial_delay_bound_ms)
            group.initial_delay_until_ms = max(group.initial_delay_until_ms, extended)

    def _join_known(self, group: Group, request: JoinGroup, out: list[Effect],
                    fail: Callable[[int, str], None]) -> None:
        member_id = request.member_id
        if member_id in group.pending:
            del group.pending[member_id]
            return self._add_and_park(group, request, member_id, out)
        code = self._member_error(group, member_id, request.group_instance_id)
        if code != NONE:
            return fail(code, member_id)
        member = group.members[member_id]
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return fail(UNKNOWN_MEMBER_ID, member_id)
        changed = member.protocols != request.protocols
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        self._heartbeat(member)
        if group.state is GroupState.COMPLETING_REBALANCE and not changed:
            out.append(Respond(request.request_id, self._join_answer(group, member)))
            return None
        if group.state is GroupState.STABLE and not changed and member_id != group.leader:
            out.append(Respond(request.request_id, self._join_answer(group, member)))
            return None
        member.protocols = request.protocols
        if member.join_request is not None and member.join_request != request.request_id:
            out.append(Respond(member.join_request, {"error_code": REBALANCE_IN_PROGRESS,
                                                     "generation_id": -1, "member_id": member_id,
                                                     "leader": "", "members": []}))
        member.join_request = request.request_id
        self._joined(group, member_id, out)
        return None

    def _joined(self, group: Group, member_id: str, out: list[Effect], **fields: object
                ) -> None:
        """A JoinGroup was parked: MEMBER_JOINED, a rebalance unless one is under way."""
        if group.state is GroupState.PREPARING_REBALANCE:
            self._emit(GroupEvent.MEMBER_JOINED, group.group_id, group.state.name,
                       group.state.name, member=member_id, generation=group.generation,
                       **fields)
        else:
            self._prepare_rebalance(group, out, GroupEvent.MEMBER_JOINED, member=member_id,
                                    **fields)

    def _join_answer(self, group: Group, member: Member) -> dict[str, Any]:
        members = []
        if member.member_id == group.leader:
            members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "metadata": m.metadata(group.protocol)} for m in group.members.values()]
        return {"error_code": NONE, "generation_id": group.generation,
                "protocol_type": group.protocol_type, "protocol_name": group.protocol,
                "leader": group.leader or "", "member_id": member.member_id,
                "members": members}

    def _prepare_rebalance(self, group: Group, out: list[Effect], event: GroupEvent,
                           **fields: object) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():
                if member.sync_request is not None:
                    out.append(Respond(member.sync_request,
                                       {"error_code": REBALANCE_IN_PROGRESS, "assignment": b""}))
                    member.sync_request = None
                member.assignment = b""
        group.sync_deadline_ms = None
        group.sync_token = None
        was_empty = group.state is GroupState.EMPTY
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        group.join_deadline_ms = self.now_ms + timeout
        if was_empty and self.config.initial_rebalance_delay_ms > 0:
            group.initial_delay_until_ms = self.now_ms + min(
                self.config.initial_rebalance_delay_ms, timeout)
            group.initial_delay_bound_ms = self.now_ms + timeout
        else:
            group.initial_delay_until_ms = group.initial_delay_bound_ms = None
        self._transition(group, GroupState.PREPARING_REBALANCE, event, **fields)

    def _try_complete_join(self, group: Group, out: list[Effect]) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        if group.initial_delay_until_ms is not None:
            if self.now_ms < group.initial_delay_until_ms:
                return
            group.initial_delay_until_ms = group.initial_delay_bound_ms = None
        everyone = all(m.join_request is not None for m in group.members.values())
        deadline = group.join_deadline_ms
        if not (everyone and not group.pending) and \
                not (deadline is not None and self.now_ms >= deadline):
            return
        self._complete_join(group, out)

    def _complete_join(self, group: Group, out: list[Effect]) -> None:
        for member in list(group.members.values()):
            if member.join_request is None and member.group_instance_id is None:
                self._remove_member(group, member)
        group.pending.clear()
        joined = [m for m in group.members.values() if m.join_request is not None]
        if group.members and not joined:
            # Only static members that did not rejoin: wait another rebalance timeout.
            timeout = max(m.rebalance_timeout_ms for m in group.members.values())
            group.join_deadline_ms = self.now_ms + timeout
            return
        group.join_deadline_ms = None
        group.generation += 1
        if not group.members:
            group.protocol = None
            group.leader = None
            self._transition(group, GroupState.EMPTY, GroupEvent.JOIN_COMPLETED, members=0)
            key, value = self._group_record(group)
            token = self._token(_PendingAppend("empty", group.partition,
                                               self._partition_epoch(group.partition),
                                               group.group_id))
            out.append(Append(token, group.partition, self._partition_epoch(group.partition),
                              ((key, value),)))
            return
        if group.leader not in group.members or group.members[group.leader].join_request is None:
            group.leader = joined[0].member_id
        group.protocol = self._select_protocol(group)
        self._transition(group, GroupState.COMPLETING_REBALANCE, GroupEvent.JOIN_COMPLETED,
                         members=len(group.members), leader=group.leader,
                         protocol=group.protocol)
        timeout = max(m.rebalance_timeout_ms for m in group.members.values())
        group.sync_deadline_ms = self.now_ms + timeout
        for member in group.members.values():
            member.is_new = False
            member.assignment = b""
            if member.join_request is not None:
                out.append(Respond(member.join_request, self._join_answer(group, member)))
                member.join_request = None
            self._heartbeat(member)

    @staticmethod
    def _select_protocol(group: Group) -> str:
        members = list(group.members.values())
        common = set.intersection(*[{name for name, _ in m.protocols} for m in members])
        votes: dict[str, int] = {}
        order: list[str] = []
        for member in members:
            for name, _ in member.protocols:
                if name in common:
                    if name not in votes:
                        votes[name] = 0
                        order.append(name)
                    votes[name] += 1
                    break
        return max(order, key=lambda name: (votes[name], -order.index(name)))

    def _remove_member(self, group: Group, member: Member) -> None:
        del group.members[member.member_id]
        if member.group_instance_id is not None and \
                group.static.get(member.group_instance_id) == member.member_id:
            del group.static[member.group_instance_id]
        if group.leader == member.member_id:
            group.leader = next(iter(group.members), None)

    # --- SyncGroup -----------------------------------------------------------------------

    def _on_sync(self, request: SyncGroup, out: list[Effect]) -> None:
        def answer(code: int, assignment: bytes = b"") -> None:
            out.append(Respond(request.request_id, {
                "error_code": code, "assignment": assignment,
                "protocol_type": group.protocol_type if group else None,
                "protocol_name": group.protocol if group else None}))

        group: Group | None = None
        code = self._status(request.group_id, loading_error=REBALANCE_IN_PROGRESS)
        if code != NONE:
            return answer(code)
        group = self.groups.get(request.group_id)
        if group is None:
            return answer(UNKNOWN_MEMBER_ID)
        if group.state is GroupState.DEAD:
            return answer(COORDINATOR_NOT_AVAILABLE)
        code = self._member_error(group, request.member_id, request.group_instance_id)
        if code != NONE:
            return answer(code)
        if request.generation_id != group.generation:
            return answer(ILLEGAL_GENERATION)
        if (request.protocol_type is not None and request.protocol_type != group.protocol_type) \
                or (request.protocol_name is not None and request.protocol_name != group.protocol):
            return answer(INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[request.member_id]
        if group.state is GroupState.EMPTY:
            return answer(UNKNOWN_MEMBER_ID)
        if group.state is GroupState.PREPARING_REBALANCE:
            return answer(REBALANCE_IN_PROGRESS)
        self._heartbeat(member)
        if group.state is GroupState.STABLE:
            self._emit(GroupEvent.ASSIGNMENT_RECEIVED, group.group_id, "STABLE", "STABLE",
                       member=member.member_id, generation=group.generation)
            return answer(NONE, member.assignment)
        member.sync_request = request.request_id
        if request.member_id == group.leader and group.sync_token is None:
            assignments = dict(request.assignments)
            for other in group.members.values():
                other.assignment = assignments.get(other.member_id, b"")
            key, value = self._group_record(group)
            epoch = self._partition_epoch(group.partition)
            token = self._token(_PendingAppend("sync", group.partition, epoch, group.group_id,
                                               generation=group.generation))
            group.sync_token = token
            out.append(Append(token, group.partition, epoch, ((key, value),)))
        return None

    def _sync_done(self, pending: _PendingAppend, token: int, code: int,
                   out: list[Effect]) -> None:
        group = self.groups.get(pending.group_id)
        if group is None or group.sync_token != token or \
                group.state is not GroupState.COMPLETING_REBALANCE or \
                group.generation != pending.generation:
            return
        group.sync_token = None
        if code != NONE:
            error = self._append_error(code, commit=False)
            for member in group.members.values():
                if member.sync_request is not None:
                    out.append(Respond(member.sync_request,
                                       {"error_code": error, "assignment": b""}))
                    member.sync_request = None
                member.assignment = b""
            self._prepare_rebalance(group, out, GroupEvent.MEMBER_LEFT, error=code)
            return
        group.sync_deadline_ms = None
        self._transition(group, GroupState.STABLE, GroupEvent.SYNC_COMPLETED)
        for member in group.members.values():
            self._heartbeat(member)
            if member.sync_request is not None:
                out.append(Respond(member.sync_request, {
                    "error_code": NONE, "assignment": member.assignment,
                    "protocol_type": group.protocol_type, "protocol_name": group.protocol}))
                member.sync_request = None
                self._emit(GroupEvent.ASSIGNMENT_RECEIVED, group.group_id, "STABLE", "STABLE",
                           member=member.member_id, generation=group.generation)

    # --- Heartbeat, LeaveGroup -----------------------------------------------------------

    def _on_heartbeat(self, request: Heartbeat, out: list[Effect]) -> None:
        def answer(code: int) -> None:
            out.append(Respond(request.request_id, {"error_code": code}))

        code = self._status(request.group_id, loading_error=NONE)
        if code != NONE or self.coordinator_state(self.partition_for(request.group_id)) \
                is CoordinatorState.LOADING:
            return answer(code)
        group = self.groups.get(request.group_id)
        if group is None:
            return answer(UNKNOWN_MEMBER_ID)
        if group.state is GroupState.DEAD:
            return answer(COORDINATOR_NOT_AVAILABLE)
        code = self._member_error(group, request.member_id, request.group_instance_id)
        if code != NONE:
            return answer(code)
        if request.generation_id != group.generation:
            return answer(ILLEGAL_GENERATION)
        if group.state is GroupState.EMPTY:
            return answer(UNKNOWN_MEMBER_ID)
        self._heartbeat(group.members[request.member_id])
        if group.state is GroupState.PREPARING_REBALANCE:
            return answer(REBALANCE_IN_PROGRESS)
        return answer(NONE)

    def _on_leave(self, request: LeaveGroup, out: list[Effect]) -> None:
        code = self._status(request.group_id)
        if code != NONE:
            out.append(Respond(request.request_id, {"error_code": code, "members": []}))
            return
        group = self.groups.get(request.group_id)
        results = []
        if group is None:
            results = [{"member_id": member_id, "group_instance_id": instance,
                        "error_code": UNKNOWN_MEMBER_ID} for member_id, instance in request.members]
            out.append(Respond(request.request_id, {"error_code": NONE, "members": results}))
            return
        if group.state is GroupState.DEAD:
            out.append(Respond(request.request_id,
                               {"error_code": COORDINATOR_NOT_AVAILABLE, "members": []}))
            return
        for member_id, instance in request.members:
            target = member_id
            if not member_id and instance is not None:
                target = group.static.get(instance, "")
                error = NONE if target else UNKNOWN_MEMBER_ID
            elif member_id in group.pending:
                del group.pending[member_id]
                results.append({"member_id": member_id, "group_instance_id": instance,
                                "error_code": NONE})
                continue
            else:
                error = self._member_error(group, member_id, instance)
            if error == NONE:
                member = group.members[target]
                if member.join_request is not None:
                    out.append(Respond(member.join_request, {
                        "error_code": UNKNOWN_MEMBER_ID, "generation_id": -1,
                        "member_id": target, "leader": "", "members": []}))
                if member.sync_request is not None:
                    out.append(Respond(member.sync_request, {"error_code": UNKNOWN_MEMBER_ID,
                                                             "assignment": b""}))
                self._remove_member(group, member)
                self._membership_changed(group, out, GroupEvent.MEMBER_LEFT, member=target)
            results.append({"member_id": member_id, "group_instance_id": instance,
                            "error_code": error})
        top = results[0]["error_code"] if len(results) == 1 and \
            request.members and request.members[0][1] is None else NONE
        out.append(Respond(request.request_id, {"error_code": top, "members": results}))

    def _membership_changed(self, group: Group, out: list[Effect], event: GroupEvent,
                            **fields: object) -> None:
        """A member was removed: a rebalance (or the join under way may now complete)."""
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, out, event, **fields)
        else:
            self._emit(event, group.group_id, group.state.name, group.state.name,
                       generation=group.generation, **fields)
        # The remaining members may all have rejoined already (or none is left).
        self._try_complete_join(group, out)

    # --- offsets -------------------------------------------------------------------------

    def _on_commit(self, request: OffsetCommit, out: list[Effect]) -> None:
        def answer(code: int) -> None:
            out.append(Respond(request.request_id, {"partitions": {
                (entry.topic, entry.partition): code for entry in request.entries}}))

        code = self._status(request.group_id)
        if code != NONE:
            return answer(code)
        group = self.groups.get(request.group_id)
        if group is None:
            if request.generation_id >= 0:
                return answer(ILLEGAL_GENERATION)
            group = Group(request.group_id, self.partition_for(request.group_id),
                          state_timestamp_ms=self.now_ms)
            self.groups[request.group_id] = group
        if group.state is GroupState.DEAD:
            return answer(COORDINATOR_NOT_AVAILABLE)
        simple = request.generation_id < 0 and not request.member_id and \
            request.group_instance_id is None
        if simple and group.state is not GroupState.EMPTY:
            return answer(UNKNOWN_MEMBER_ID)
        if not simple:
            code = self._member_error(group, request.member_id, request.group_instance_id)
            if code != NONE:
                return answer(code)
            if request.generation_id != group.generation:
                return answer(ILLEGAL_GENERATION)
            if group.state is GroupState.COMPLETING_REBALANCE:
                return answer(REBALANCE_IN_PROGRESS)
            self._heartbeat(group.members[request.member_id])
        expire = self.now_ms + request.retention_ms if request.retention_ms >= 0 else -1
        results: dict[tuple[str, int], int] = {}
        records: list[tuple[bytes, bytes | None]] = []
        offsets: list[tuple[tuple[str, int], gr.OffsetValue]] = []
        for entry in request.entries:
            metadata = entry.metadata or ""
            if len(metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                results[(entry.topic, entry.partition)] = OFFSET_METADATA_TOO_LARGE
                continue
            value = gr.OffsetValue(entry.offset, entry.leader_epoch, metadata, self.now_ms,
                                   expire)
            key = gr.OffsetKey(request.group_id, entry.topic, entry.partition)
            records.append((gr.encode_offset_key(key), gr.encode_offset_value(value)))
            offsets.append(((entry.topic, entry.partition), value))
            results[(entry.topic, entry.partition)] = NONE
        if not records:
            out.append(Respond(request.request_id, {"partitions": results}))
            return None
        epoch = self._partition_epoch(group.partition)
        token = self._token(_PendingAppend("commit", group.partition, epoch, group.group_id,
                                           request.request_id, request.generation_id,
                                           offsets=tuple(offsets), answer=results,
                                           member_id=request.member_id,
                                           group_generation=group.generation,
                                           group_state=group.state.name))
        out.append(Append(token, group.partition, epoch, tuple(records)))
        return None

    def _commit_done(self, pending: _PendingAppend, code: int, out: list[Effect]) -> None:
        assert pending.request_id is not None
        results = dict(pending.answer)
        group = self.groups.get(pending.group_id)
        if code == NONE and (group is None or
                             self._partition_epoch(pending.partition) != pending.leader_epoch):
            code = NOT_LEADER_OR_FOLLOWER  # unloaded meanwhile: the append may be lost
        error = NONE if code == NONE else self._append_error(code, commit=True)
        for slot, _ in pending.offsets:
            results[slot] = error
        if error == NONE and group is not None:
            for slot, value in pending.offsets:
                group.offsets[slot] = value
            # (the fence was decided when the commit was accepted: the member, its
            # generation and the group's generation and state then)
            self._emit(GroupEvent.OFFSET_COMMITTED, group.group_id, group.state.name,
                       group.state.name, generation=pending.generation,
                       member=pending.member_id, group_generation=pending.group_generation,
                       accepted_in=pending.group_state,
                       offsets=tuple((t, p, v.offset) for (t, p), v in pending.offsets))
        out.append(Respond(pending.request_id, {"partitions": results}))

    def _on_fetch(self, request: OffsetFetch, out: list[Effect]) -> None:
        code = self._status(request.group_id)
        if code != NONE:
            out.append(Respond(request.request_id, {"error_code": code, "partitions": {}}))
            return
        group = self.groups.get(request.group_id)
        offsets = group.offsets if group is not None else {}
        wanted = request.partitions if request.partitions is not None else tuple(offsets)
        answer = {slot: offsets.get(slot) for slot in wanted}
        # (the epoch the answer's cache was loaded in: a leader deposed by a later epoch its
        # LeaderAndIsr has not reached yet answers from it, as Kafka's does)
        self._emit(GroupEvent.OFFSET_FETCHED, request.group_id,
                   group.state.name if group else "DEAD", group.state.name if group else "DEAD",
                   offsets=tuple((t, p, v.offset) for (t, p), v in answer.items()
                                 if v is not None),
                   leader_epoch=self._partition_epoch(self.partition_for(request.group_id)))
        out.append(Respond(request.request_id, {"error_code": NONE, "partitions": answer}))

    def _on_offset_delete(self, request: OffsetDelete, out: list[Effect]) -> None:
        code = self._status(request.group_id)
        group = self.groups.get(request.group_id) if code == NONE else None
        if code == NONE and group is None:
            code = GROUP_ID_NOT_FOUND
        if code != NONE or group is None:
            out.append(Respond(request.request_id, {"error_code": code, "partitions": {}}))
            return
        subscribed: set[str] = set()
        if group.state is not GroupState.EMPTY and group.protocol_type == "consumer":
            for member in group.members.values():
                subscribed |= _consumer_topics(member.metadata(group.protocol)) or set()
        results: dict[tuple[str, int], int] = {}
        records = []
        removed = []
        for slot in request.partitions:
            if slot[0] in subscribed:
                results[slot] = GROUP_SUBSCRIBED_TO_TOPIC
                continue
            results[slot] = NONE
            if slot in group.offsets:
                removed.append(slot)
                key = gr.OffsetKey(group.group_id, slot[0], slot[1])
                records.append((gr.encode_offset_key(key), None))
        if not records:
            out.append(Respond(request.request_id, {"error_code": NONE, "partitions": results}))
            return
        epoch = self._partition_epoch(group.partition)
        token = self._token(_PendingAppend(
            "offset_delete", group.partition, epoch, group.group_id, request.request_id,
            offsets=tuple((slot, group.offsets[slot]) for slot in removed), answer=results))
        out.append(Append(token, group.partition, epoch, tuple(records)))

    def _offset_delete_done(self, pending: _PendingAppend, code: int, out: list[Effect]) -> None:
        assert pending.request_id is not None
        group = self.groups.get(pending.group_id)
        if code != NONE:
            out.append(Respond(pending.request_id, {
                "error_code": self._append_error(code, commit=True), "partitions": {}}))
            return
        if group is not None:
            for slot, _ in pending.offsets:
                group.offsets.pop(slot, None)
        out.append(Respond(pending.request_id, {"error_code": NONE,
                                                "partitions": pending.answer}))

    # --- admin ---------------------------------------------------------------------------

    def _on_describe(self, request: DescribeGroups, out: list[Effect]) -> None:
        groups = []
        for group_id in request.group_ids:
            code = self._status(group_id)
            group = self.groups.get(group_id) if code == NONE else None
            if group is None:
                groups.append({"error_code": code, "group_id": group_id,
                               "group_state": "Dead", "protocol_type": "",
                               "protocol_data": "", "members": []})
                continue
            stable = group.state is GroupState.STABLE
            members = [{
                "member_id": m.member_id, "group_instance_id": m.group_instance_id,
                "client_id": m.client_id, "client_host": m.client_host,
                "member_metadata": m.metadata(group.protocol),
                "member_assignment": m.assignment if stable else b"",
            } for m in group.members.values()]
            groups.append({
                "error_code": NONE, "group_id": group_id,
                "group_state": STATE_NAMES[group.state.name],
                "protocol_type": group.protocol_type or "",
                "protocol_data": (group.protocol or "") if stable else "",
                "members": members,
            })
        out.append(Respond(request.request_id, {"groups": groups}))

    def _on_list(self, request: ListGroups, out: list[Effect]) -> None:
        loading = any(p.state is CoordinatorState.LOADING for p in self.partitions.values())
        wanted = {state.lower() for state in request.states}
        groups = [{"group_id": g.group_id, "protocol_type": g.protocol_type or "",
                   "group_state": STATE_NAMES[g.state.name]}
                  for g in self.groups.values()
                  if not wanted or STATE_NAMES[g.state.name].lower() in wanted]
        out.append(Respond(request.request_id, {
            "error_code": COORDINATOR_LOAD_IN_PROGRESS if loading else NONE,
            "groups": sorted(groups, key=lambda g: str(g["group_id"]))}))

    def _on_delete(self, request: DeleteGroups, out: list[Effect]) -> None:
        results: dict[str, int] = {}
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        deleted: list[str] = []
        for group_id in request.group_ids:
            code = self._status(group_id)
            group = self.groups.get(group_id) if code == NONE else None
            if code == NONE and (group is None or group.state is GroupState.DEAD):
                code = GROUP_ID_NOT_FOUND
            elif group is not None and group.state is not GroupState.EMPTY:
                code = NON_EMPTY_GROUP
            results[group_id] = code
            if code != NONE or group is None:
                continue
            records = by_partition.setdefault(group.partition, [])
            for topic, index in group.offsets:
                records.append((gr.encode_offset_key(gr.OffsetKey(group_id, topic, index)),
                                None))
            records.append((gr.encode_group_key(gr.GroupKey(group_id)), None))
            deleted.append(group_id)
        if not deleted:
            out.append(Respond(request.request_id, {"results": results}))
            return
        pending = _PendingAppend("delete", -1, -1, "", request.request_id,
                                 groups=tuple(deleted))
        pending.answer = {(group_id, 0): code for group_id, code in results.items()}
        remaining = len(by_partition)
        pending.generation = remaining
        token = self._token(pending)
        for partition, records in by_partition.items():
            out.append(Append(token, partition, self._partition_epoch(partition), tuple(records)))

    def _delete_done(self, pending: _PendingAppend, token: int, code: int,
                     out: list[Effect]) -> None:
        assert pending.request_id is not None
        pending.generation -= 1
        if code != NONE:
            error = self._append_error(code, commit=True)
            for group_id in pending.groups:
                pending.answer[(group_id, 0)] = error
        if pending.generation > 0:
            self._appends[token] = pending  # more partitions to hear from
            return
        for group_id in pending.groups:
            group = self.groups.get(group_id)
            if pending.answer[(group_id, 0)] != NONE or group is None:
                continue
            if group.state is not GroupState.EMPTY:
                pending.answer[(group_id, 0)] = NON_EMPTY_GROUP
                continue
            self._transition(group, GroupState.DEAD, GroupEvent.GROUP_DELETED)
            del self.groups[group_id]
        out.append(Respond(pending.request_id, {
            "results": {group_id: code for (group_id, _), code in pending.answer.items()}}))

    # --- appends and time ------------------------------------------------------------------

    def _on_append(self, event: AppendCompleted, out: list[Effect]) -> None:
        pending = self._appends.pop(event.token, None)
        if pending is None:
            return
        if pending.kind == "sync":
            self._sync_done(pending, event.token, event.error_code, out)
        elif pending.kind == "commit":
            self._commit_done(pending, event.error_code, out)
        elif pending.kind == "delete":
            self._delete_done(pending, event.token, event.error_code, out)
        elif pending.kind == "offset_delete":
            self._offset_delete_done(pending, event.error_code, out)
        elif pending.kind == "static_rejoin":
            self._static_rejoin_done(pending, event.error_code, out)

    def _static_rejoin_done(self, pending: _PendingAppend, code: int, out: list[Effect]) -> None:
        assert pending.request_id is not None
        group = self.groups.get(pending.group_id)
        member = group.members.get(pending.member_id) if group is not None else None
        if code != NONE or group is None or member is None or \
                group.generation != pending.generation:
            error = self._append_error(code, commit=False) if code != NONE else \
                REBALANCE_IN_PROGRESS if group is not None else NOT_COORDINATOR
            out.append(Respond(pending.request_id, {
                "error_code": error, "generation_id": -1, "member_id": pending.member_id,
                "leader": "", "members": []}))
            return
        answer = self._join_answer(group, member)
        answer["members"] = []  # the assignment stands: nothing for a leader to compute
        out.append(Respond(pending.request_id, answer))

    def _on_tick(self, event: Tick, out: list[Effect]) -> None:
        now = self.now_ms
        for group in list(self.groups.values()):
            for member_id, deadline in list(group.pending.items()):
                if now >= deadline:
                    del group.pending[member_id]
            for member in list(group.members.values()):
                if group.members.get(member.member_id) is not member:
                    continue  # removed meanwhile: a join completed without it
                if member.join_request is None and now >= member.heartbeat_deadline_ms:
                    if member.sync_request is not None:
                        out.append(Respond(member.sync_request,
                                           {"error_code": UNKNOWN_MEMBER_ID, "assignment": b""}))
                    self._remove_member(group, member)
                    self._membership_changed(group, out, GroupEvent.SESSION_EXPIRED,
                                             member=member.member_id)
                elif member.join_request is not None and member.is_new and \
                        now >= member.heartbeat_deadline_ms + NEW_MEMBER_JOIN_TIMEOUT_MS:
                    out.append(Respond(member.join_request, {
                        "error_code": UNKNOWN_MEMBER_ID, "generation_id": -1,
                        "member_id": member.member_id, "leader": "", "members": []}))
                    self._remove_member(group, member)
            if group.state is GroupState.COMPLETING_REBALANCE and \
                    group.sync_deadline_ms is not None and now >= group.sync_deadline_ms:
                # KAFKA-12890: members that never synced are removed, then a rebalance.
                late = [m for m in group.members.values() if m.sync_request is None]
                for member in late:
                    self._remove_member(group, member)
                self._prepare_rebalance(group, out, GroupEvent.SESSION_EXPIRED,
                                        members=tuple(m.member_id for m in late))
            self._try_complete_join(group, out)
        if self._next_expiry_ms is not None and now >= self._next_expiry_ms:
            self._next_expiry_ms = now + self.config.offsets_retention_check_interval_ms
            self._expire_offsets(out)

    def _expire_offsets(self, out: list[Effect]) -> None:
        """Offsets past ``offsets.retention.minutes`` (KIP-211 rules) are removed with
        tombstones (acks 0, as Kafka writes them); an EMPTY group left without offsets dies."""
        now = self.now_ms
        retention = self.config.offsets_retention_ms
        for group in list(self.groups.values()):
            if self.coordinator_state(group.partition) is not CoordinatorState.LOADED:
                continue
            subscribed: set[str] | None = None
            if group.state is GroupState.STABLE and group.protocol_type == "consumer":
                subscribed = set()
                for member in group.members.values():
                    subscribed |= _consumer_topics(member.metadata(group.protocol)) or set()
            expired = []
            for slot, value in group.offsets.items():
                if value.expire_timestamp_ms >= 0:
                    due = now >= value.expire_timestamp_ms
                elif group.state is GroupState.EMPTY and group.protocol_type:
                    due = now >= group.state_timestamp_ms + retention
                elif group.protocol_type is None or \
                        (subscribed is not None and slot[0] not in subscribed):
                    due = now >= value.commit_timestamp_ms + retention
                else:
                    due = False
                if due:
                    expired.append(slot)
            records: list[tuple[bytes, bytes | None]] = []
            for slot in expired:
                del group.offsets[slot]
                records.append((gr.encode_offset_key(gr.OffsetKey(group.group_id, *slot)), None))
            dead = group.state is GroupState.EMPTY and not group.offsets and bool(expired)
            if expired:
                self._emit(GroupEvent.OFFSETS_EXPIRED, group.group_id, group.state.name,
                           GroupState.DEAD.name if dead else group.state.name,
                           partitions=len(expired))
            if dead:
                group.state = GroupState.DEAD
                del self.groups[group.group_id]
                if group.generation > 0:
                    records.append((gr.encode_group_key(gr.GroupKey(group.group_id)), None))
            if records:
                out.append(Append(0, group.partition, self._partition_epoch(group.partition),
                                  tuple(records), acks=0))

    #: The method that takes each input (by name, so a subclass's override is the one called).
    _HANDLERS: Final[Mapping[type, str]] = {
        Elected: "_on_elected",
        Resigned: "_on_resigned",
        PartitionRead: "_on_read",
        AppendCompleted: "_on_append",
        Tick: "_on_tick",
        JoinGroup: "_on_join",
        SyncGroup: "_on_sync",
        Heartbeat: "_on_heartbeat",
        LeaveGroup: "_on_leave",
        OffsetCommit: "_on_commit",
        OffsetFetch: "_on_fetch",
        DescribeGroups: "_on_describe",
        ListGroups: "_on_list",
        DeleteGroups: "_on_delete",
        OffsetDelete: "_on_offset_delete",
    }


def groups_of(coordinator: GroupCoordinator, partitions: Iterable[int]) -> list[str]:
    """The ids of the groups held for ``partitions`` (tests, the CLI's views)."""
    wanted = set(partitions)
    return sorted(g.group_id for g in coordinator.groups.values() if g.partition in wanted)
