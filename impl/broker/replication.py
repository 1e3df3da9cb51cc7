"""The replication machine on the broker side: controller fencing, leader/follower transitions.

Decisions taken here (the trio shell and the storage engine carry them out):

* **Controller fencing** (design V3, KIP-380): a controller request whose ``broker_epoch`` is older
  than this broker's registration is STALE_BROKER_EPOCH (77) — it was meant for an earlier
  incarnation; one whose controller epoch is below the highest seen is STALE_CONTROLLER_EPOCH (11)
  — it comes from a deposed controller (``CONTROLLER_FENCED``). Neither changes any state.
* **Leader epochs** (KIP-101/279): a LeaderAndIsr partition state with a lower leader epoch than
  the replica's is FENCED_LEADER_EPOCH (74); the same leader epoch with a newer partition epoch
  (zkVersion) updates ISR and replicas; the same epochs again is an idempotent re-delivery
  (after a controller failover) answered with no error and no change (``EPOCHS_MONOTONIC``).
* **Offline replicas** (KIP-112): a replica on an offline log dir answers KAFKA_STORAGE_ERROR
  (56); a missing replica is created only when ``is_new`` is set or no log dir is offline, so a
  replica lost with a failed disk is never recreated empty on a good one
  (``DIR_FAILURE_ISOLATION``, KAFKA-10314/16234).
* **High watermark**: the leader's HW is the minimum LEO over the ISR, and never decreases.
* **acks=all** (Kafka's ``Partition.checkEnoughReplicasReachOffset``): a produce waits until the
  HW passes its batch, then succeeds only if the ISR still has ``min.insync.replicas`` members;
  otherwise NOT_ENOUGH_REPLICAS_AFTER_APPEND (20): the batch is in the log but fewer copies
  than asked for hold it (the ISR shrank after the append).
* **ISR expansion** (KIP-320 rule 4): a follower joins once its LEO reaches the leader's HW and
  the start of the leader's current epoch.
* **Follower truncation** (``replica.truncation.policy``): a replica that becomes follower
  truncates before it fetches. ``LEADER_EPOCH`` (KIP-101/279, the default) asks the leader for
  the end of its latest epoch and, while the leader answers an epoch the follower lacks
  (KAFKA-6361), truncates to its own end of an older epoch and asks again, until both hold the
  answered epoch: the log then ends where the two logs stop agreeing. ``HIGH_WATERMARK`` (the
  design V3 text) truncates to the follower's own HW, which loses an acknowledged record when
  the follower's HW lagged the leader's (KIP-101 scenario 1); it is kept to show that loss.

This module is a sans-IO core.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from impl.trace import NullTraceSink, TraceEvent, TraceSink

__sans_io__ = True

MACHINE: Final = "replication"

NONE: Final = 0
STALE_CONTROLLER_EPOCH: Final = 11
NOT_ENOUGH_REPLICAS_AFTER_APPEND: Final = 20
KAFKA_STORAGE_ERROR: Final = 56
FENCED_LEADER_EPOCH: Final = 74
STALE_BROKER_EPOCH: Final = 77
#: StopReplica's leader epoch meaning "the topic is being deleted" (``EpochDuringDelete``).
EPOCH_DURING_DELETE: Final = -2
#: A request that carries no broker epoch (older versions) is never stale.
BROKER_EPOCH_UNKNOWN: Final = -1


class ReplicaRole(enum.Enum):
    """The role of one replica on this broker (design V3 §"replica")."""

    LEADER = "LEADER"  #: serves produce and fetch; owns the HW
    FOLLOWER = "FOLLOWER"  #: fetches from the leader
    OFFLINE = "OFFLINE"  #: its log dir failed (KIP-112)


class ReplicationEvent(enum.Enum):
    """Events of the replication machine (names shared with ``model/replication.py``)."""

    BECOME_LEADER = "BECOME_LEADER"  #: LeaderAndIsr names this broker leader
    BECOME_FOLLOWER = "BECOME_FOLLOWER"  #: LeaderAndIsr names another broker leader
    LEADER_APPEND = "LEADER_APPEND"  #: produce appended at the leader
    FOLLOWER_FETCH = "FOLLOWER_FETCH"  #: a follower fetched (its LEO is known)
    HW_ADVANCE = "HW_ADVANCE"  #: the leader's HW moved up
    ISR_SHRINK = "ISR_SHRINK"  #: a replica left the ISR
    ISR_EXPAND = "ISR_EXPAND"  #: a replica joined the ISR
    TRUNCATE = "TRUNCATE"  #: a follower truncated its log
    CRASH = "CRASH"  #: the broker stopped
    RESTART = "RESTART"  #: the broker started again


class TruncationPolicy(enum.Enum):
    """How a new follower truncates (design V3 uses the HW; KIP-101/279 the leader epoch)."""

    HIGH_WATERMARK = "HIGH_WATERMARK"  #: the V3 text: truncate to the HW (known bad: KIP-101)
    LEADER_EPOCH = "LEADER_EPOCH"  #: KIP-101/279: ask the leader for the epoch's end offset

    @property
    def asks_leader(self) -> bool:
        """The follower needs the leader's epoch end offset (OffsetForLeaderEpoch) to truncate."""
        return self is TruncationPolicy.LEADER_EPOCH


#: OffsetForLeaderEpoch answers a follower takes before it stops looking for a common epoch (each
#: step asks an older epoch than the last, so a leader that answers as KIP-279 says needs at
#: most one per epoch the follower holds).
MAX_TRUNCATION_ROUNDS: Final = 64


@dataclass(frozen=True, slots=True)
class TruncationStep:
    """One step of a new follower's truncation.

    Attributes:
        offset: the offset to truncate the log to (its LEO: nothing to truncate).
        ask_epoch: None when ``offset`` is final; else the follower still holds an epoch the
            leader may lack and must ask the leader again (OffsetForLeaderEpoch) for the end of
            ``ask_epoch``, its latest epoch below ``offset``, and step again from ``offset``.
    """

    offset: int
    ask_epoch: int | None = None

    @property
    def done(self) -> bool:
        """``offset`` is the final truncation point."""
        return self.ask_epoch is None


def epoch_end_offset(
    epochs: Sequence[tuple[int, int]], log_end_offset: int, epoch: int
) -> tuple[int, int]:
    """KIP-279 on a log's leader-epoch cache: the largest epoch <= ``epoch`` and its end offset.

    Args:
        epochs: ``(epoch, start offset)`` entries, both increasing; entries starting at or after
            ``log_end_offset`` are ignored (the log ends before them).
        log_end_offset: the log's LEO (the end of its latest epoch).
        epoch: the epoch asked for.

    Returns:
        ``(epoch, end offset)``: the end offset is the start of the next larger epoch, or the LEO
        for the latest; ``(epoch, first entry's start)`` when every entry is above ``epoch``
        (Kafka's ``LeaderEpochFileCache.endOffsetFor``, as the storage cache answers);
        ``(-1, -1)`` for a negative ``epoch`` or no entry.
    """
    entries = [(e, start) for e, start in epochs if start < log_end_offset]
    if epoch < 0 or not entries:
        return -1, -1
    if epoch < entries[0][0]:
        return epoch, entries[0][1]
    found, end = -1, -1
    for index, (entry_epoch, _start) in enumerate(entries):
        if entry_epoch > epoch:
            break
        found = entry_epoch
        end = entries[index + 1][1] if index + 1 < len(entries) else log_end_offset
    return found, end


def follower_truncation_offset(
    policy: TruncationPolicy,
    *,
    log_end_offset: int,
    log_start_offset: int,
    high_watermark: int,
    leader_epoch_end_offset: int | None = None,
    leader_epoch: int | None = None,
    epochs: Sequence[tuple[int, int]] = (),
) -> TruncationStep:
    """Where a new follower truncates its log before fetching, one OffsetForLeaderEpoch answer
    at a time (KIP-101 with KIP-279's iteration).

    ``LEADER_EPOCH``: the follower asked for the end of its latest epoch (first step) or of the
    epoch the previous step named; the leader answered the largest epoch it has at or below the
    one asked (``leader_epoch``) and where that epoch ends in its log
    (``leader_epoch_end_offset``). When the follower holds the answered epoch too, the logs agree
    up to where the shorter of the two ends: truncate there, done. When it does not
    (KAFKA-6361: its records of that range belong to epochs the leader never had), truncate to
    the end of its largest epoch below the answered one and ask again for that epoch. A follower
    whose every epoch is above the answered one shares nothing with the leader after its first
    epoch's start. An answer without an epoch (-1, a KIP-101 leader) or a follower without epoch
    entries truncates to ``min(end offset, LEO)`` once; an answer without an end offset
    (None or negative: the leader has no epoch that old) truncates nothing.

    ``HIGH_WATERMARK``: the follower's own HW, without asking (design V3; loses acknowledged
    records, KIP-101 scenario 1).

    Args:
        policy: ``replica.truncation.policy``.
        log_end_offset: the follower's LEO (after the previous step's truncation).
        log_start_offset: the follower's log start offset (never truncated below).
        high_watermark: the follower's own HW.
        leader_epoch_end_offset: the leader's answered end offset.
        leader_epoch: the leader's answered epoch.
        epochs: the follower's leader-epoch cache as ``(epoch, start offset)`` entries.

    Returns:
        The step: an offset between the log start offset and the LEO, and whether to ask again.
    """

    def clamp(target: int) -> int:
        return max(log_start_offset, min(target, log_end_offset))

    if policy is TruncationPolicy.HIGH_WATERMARK:
        return TruncationStep(clamp(high_watermark))
    if leader_epoch_end_offset is None or leader_epoch_end_offset < 0:
        return TruncationStep(log_end_offset)
    own = [(e, start) for e, start in epochs if start < log_end_offset]
    if leader_epoch is None or leader_epoch < 0 or not own:
        return TruncationStep(clamp(leader_epoch_end_offset))
    # Every own epoch above the answered one: ``mine`` is the answered epoch, ending where the
    # follower's first epoch starts (it shares nothing with the leader after that).
    mine, my_end = epoch_end_offset(own, log_end_offset, leader_epoch)
    if mine == leader_epoch:
        return TruncationStep(clamp(min(my_end, leader_epoch_end_offset)))
    target = clamp(my_end)
    remaining = [e for e, start in own if start < target]
    if not remaining or target <= log_start_offset:
        return TruncationStep(target)
    return TruncationStep(target, remaining[-1])


@dataclass(frozen=True, slots=True)
class PartitionAssignment:
    """One partition state of a LeaderAndIsr request (the fields this broker uses)."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    is_new: bool

    def __init__(  # noqa: PLR0917 (the generated constructor's signature)
        self, topic: str, partition: int, controller_epoch: int, leader: int, leader_epoch: int,
        isr: tuple[int, ...], partition_epoch: int, replicas: tuple[int, ...], is_new: bool
    ) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "topic", topic)
        object.__setattr__(self, "partition", partition)
        object.__setattr__(self, "controller_epoch", controller_epoch)
        object.__setattr__(self, "leader", leader)
        object.__setattr__(self, "leader_epoch", leader_epoch)
        object.__setattr__(self, "isr", isr)
        object.__setattr__(self, "partition_epoch", partition_epoch)
        object.__setattr__(self, "replicas", replicas)
        object.__setattr__(self, "is_new", is_new)


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """What this broker knows about one of its replicas."""

    topic: str
    partition: int
    role: ReplicaRole
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    controller_epoch: int = 0

    def __init__(  # noqa: PLR0917 (the generated constructor's signature)
        self, topic: str, partition: int, role: ReplicaRole, leader: int, leader_epoch: int,
        partition_epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...],
        controller_epoch: int = 0
    ) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "topic", topic)
        object.__setattr__(self, "partition", partition)
        object.__setattr__(self, "role", role)
        object.__setattr__(self, "leader", leader)
        object.__setattr__(self, "leader_epoch", leader_epoch)
        object.__setattr__(self, "partition_epoch", partition_epoch)
        object.__setattr__(self, "isr", isr)
        object.__setattr__(self, "replicas", replicas)
        object.__setattr__(self, "controller_epoch", controller_epoch)

    @property
    def subject(self) -> str:
        """The trace subject ``topic-partition``."""
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class LeaderAndIsrDecision:
    """The verdict for one partition of a LeaderAndIsr request.

    Attributes:
        error_code: what to answer for the partition.
        state: the replica's new state (None: unchanged or refused).
        create_log: the replica is missing and may be created.
        became_leader: the state moved to LEADER (reset follower tracking, set the HW).
    """

    error_code: int
    state: ReplicaState | None = None
    create_log: bool = False
    became_leader: bool = False


class ControllerFence:
    """Controller-epoch and broker-epoch fencing of controller-to-broker requests.

    Args:
        broker_id: this broker's id.
        broker_epoch: this incarnation's epoch (the czxid of ``/brokers/ids/<id>``).
    """

    def __init__(self, broker_id: int, broker_epoch: int = BROKER_EPOCH_UNKNOWN) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.controller_epoch = 0
        self.controller_id = -1

    def register(self, broker_epoch: int) -> None:
        """Record this broker's (new) registration epoch; epochs only increase."""
        assert broker_epoch >= self.broker_epoch, (broker_epoch, self.broker_epoch)
        self.broker_epoch = broker_epoch

    def check(self, controller_id: int, controller_epoch: int, broker_epoch: int) -> int:
        """The top-level error for a controller request, updating the highest epoch seen.

        Args:
            controller_id: the sender.
            controller_epoch: the sender's controller epoch.
            broker_epoch: the broker epoch the request is addressed to (-1: not given).

        Returns:
            NONE, STALE_BROKER_EPOCH or STALE_CONTROLLER_EPOCH.
        """
        if broker_epoch != BROKER_EPOCH_UNKNOWN and broker_epoch < self.broker_epoch:
            return STALE_BROKER_EPOCH
        if controller_epoch < self.controller_epoch:
            return STALE_CONTROLLER_EPOCH
        self.controller_epoch = controller_epoch
        self.controller_id = controller_id
        return NONE


def decide_leader_and_isr(
    broker_id: int,
    current: ReplicaState | None,
    assignment: PartitionAssignment,
    *,
    hosted: bool,
    replica_offline: bool,
    any_dir_offline: bool,
    trace: TraceSink | None = None,
    log_end_offset: int | None = None,
    high_watermark: int | None = None,
) -> LeaderAndIsrDecision:
    """Decide one partition of a LeaderAndIsr request already past :class:`ControllerFence`.

    Args:
        broker_id: this broker.
        current: the replica's state, None if this broker has no state for it.
        assignment: the request's partition state.
        hosted: a log for the partition exists on an online dir.
        replica_offline: the partition's log is on an offline dir.
        any_dir_offline: some configured log dir is offline.
        trace: where to emit BECOME_LEADER / BECOME_FOLLOWER.
        log_end_offset, high_watermark: the replica's LEO and HW, traced when given (the trace
            checker then uses them instead of what it inferred from earlier events).

    Returns:
        The decision (error code, new state, whether to create the log).
    """
    sink = trace if trace is not None else NullTraceSink()
    if replica_offline:
        return LeaderAndIsrDecision(KAFKA_STORAGE_ERROR)
    create_log = False
    if not hosted:
        if any_dir_offline and not assignment.is_new:
            return LeaderAndIsrDecision(KAFKA_STORAGE_ERROR)
        create_log = True
    if current is not None and hosted:
        if assignment.leader_epoch < current.leader_epoch:
            return LeaderAndIsrDecision(FENCED_LEADER_EPOCH)
        if (
            assignment.leader_epoch == current.leader_epoch
            and assignment.partition_epoch <= current.partition_epoch
        ):
            return LeaderAndIsrDecision(NONE)
    role = ReplicaRole.LEADER if assignment.leader == broker_id else ReplicaRole.FOLLOWER
    state = ReplicaState(
        topic=assignment.topic,
        partition=assignment.partition,
        role=role,
        leader=assignment.leader,
        leader_epoch=assignment.leader_epoch,
        partition_epoch=assignment.partition_epoch,
        isr=assignment.isr,
        replicas=assignment.replicas,
        controller_epoch=assignment.controller_epoch,
    )
    before = current.role.value if current is not None else "NONE"
    became_leader = role is ReplicaRole.LEADER and (
        current is None
        or current.role is not ReplicaRole.LEADER
        or current.leader_epoch != assignment.leader_epoch
        or create_log
    )
    event = (
        ReplicationEvent.BECOME_LEADER
        if role is ReplicaRole.LEADER
        else ReplicationEvent.BECOME_FOLLOWER
    )
    sink.emit(
        TraceEvent.of(
            MACHINE,
            event.value,
            f"{state.subject}@{broker_id}",
            before,
            role.value,
            leader_epoch=assignment.leader_epoch,
            isr=assignment.isr,
            leader=assignment.leader,
            replicas=assignment.replicas,
            partition_epoch=assignment.partition_epoch,
            **({} if log_end_offset is None else {"log_end_offset": log_end_offset}),
            **({} if high_watermark is None else {"high_watermark": high_watermark}),
        )
    )
    return LeaderAndIsrDecision(NONE, state, create_log, became_leader)


def decide_stop_replica(
    current: ReplicaState | None, leader_epoch: int, *, replica_offline: bool
) -> int:
    """The error for one partition of a StopReplica request (past :class:`ControllerFence`).

    Args:
        current: the replica's state (None if unknown here: stopping it is a no-op).
        leader_epoch: the request's leader epoch (-1 none given, -2 topic deletion).
        replica_offline: the replica's log dir is offline.

    Returns:
        NONE, KAFKA_STORAGE_ERROR or FENCED_LEADER_EPOCH.
    """
    if replica_offline:
        return KAFKA_STORAGE_ERROR
    if current is None or leader_epoch in (EPOCH_DURING_DELETE, -1):
        return NONE
    if leader_epoch < current.leader_epoch:
        return FENCED_LEADER_EPOCH
    return NONE


def leader_high_watermark(
    current_high_watermark: int,
    leader_log_end_offset: int,
    follower_log_end_offsets: Mapping[int, int],
    isr: Sequence[int],
    leader_id: int,
) -> int:
    """The leader's new HW: the minimum LEO over the ISR, never below the current HW.

    Args:
        current_high_watermark: the HW now.
        leader_log_end_offset: the leader's LEO.
        follower_log_end_offsets: the last LEO each follower reported by fetching.
        isr: the in-sync replicas (including the leader).
        leader_id: the leader's broker id.

    Returns:
        The HW to set.
    """
    offsets = [leader_log_end_offset]
    for replica in isr:
        if replica == leader_id:
            continue
        offsets.append(follower_log_end_offsets.get(replica, 0))
    return max(current_high_watermark, min(offsets))


def acks_all_result(
    high_watermark: int, last_offset: int, isr_size: int, min_insync_replicas: int
) -> int | None:
    """The answer to an ``acks=all`` produce whose batch ends at ``last_offset`` (Kafka's
    ``Partition.checkEnoughReplicasReachOffset``).

    Returns:
        ``None`` while the HW has not passed the batch (keep waiting); then NONE if the ISR
        still has ``min_insync_replicas`` members, else NOT_ENOUGH_REPLICAS_AFTER_APPEND (20).
    """
    if high_watermark <= last_offset:
        return None
    return NONE if isr_size >= min_insync_replicas else NOT_ENOUGH_REPLICAS_AFTER_APPEND


#: The client id prefix of a follower's Fetch that names its broker epoch.
_FETCHER_CLIENT_ID: Final = "replica-fetcher-"


def fetcher_client_id(broker_id: int, broker_epoch: int) -> str:
    """The request header client id of a follower's Fetch: ``replica-fetcher-<id>``, plus
    ``-epoch-<broker epoch>`` when known. Fetch v11 (the last without topic ids) has no
    field for KIP-903's ``ReplicaEpoch``, so the follower names its incarnation here."""
    if broker_epoch < 0:
        return f"{_FETCHER_CLIENT_ID}{broker_id}"
    return f"{_FETCHER_CLIENT_ID}{broker_id}-epoch-{broker_epoch}"


def fetcher_broker_epoch(client_id: str | None, replica_id: int) -> int:
    """The broker epoch a follower's Fetch names in its client id (see
    :func:`fetcher_client_id`); -1 when it names none or names another broker."""
    if client_id is None:
        return BROKER_EPOCH_UNKNOWN
    prefix = f"{_FETCHER_CLIENT_ID}{replica_id}-epoch-"
    if not client_id.startswith(prefix):
        return BROKER_EPOCH_UNKNOWN
    text = client_id[len(prefix):]
    if not text.isdigit() or len(text) > 19:
        return BROKER_EPOCH_UNKNOWN
    epoch = int(text)
    return epoch if epoch < 2**63 else BROKER_EPOCH_UNKNOWN


def desired_isr(
    state: ReplicaState,
    high_watermark: int,
    *,
    follower_log_end_offsets: Mapping[int, int],
    last_caught_up_ms: Mapping[int, int],
    now_ms: int,
    lag_time_max_ms: int,
    leader_epoch_start_offset: int,
) -> tuple[int, ...]:
    """The ISR the leader should write (design V3 ``maybe_change_ISR``; Kafka's
    ``replica.lag.time.max.ms``).

    A follower leaves the ISR when it has not caught up with the leader's LEO for longer than
    ``lag_time_max_ms``; a follower outside joins once its LEO reaches both the HW and
    ``leader_epoch_start_offset``, the LEO at which the leader became leader of its epoch
    (KIP-320 rule 4: a re-elected leader's HW may still lag records an earlier leader committed;
    a follower that only reached that HW may lack them). Only the followers in
    ``follower_log_end_offsets`` may join: the broker passes the one whose fetch it is handling
    (none at its periodic check), as Kafka's ``maybeExpandIsr``. The leader always stays.
    Order follows the assigned replicas.

    Returns:
        The new ISR (equal to ``state.isr`` as a set when nothing changes).
    """
    assert state.role is ReplicaRole.LEADER
    members: list[int] = []
    for replica in state.replicas:
        if replica == state.leader:
            members.append(replica)
            continue
        caught_up_ms = last_caught_up_ms.get(replica, -1)
        if replica in state.isr:
            if caught_up_ms >= 0 and now_ms - caught_up_ms > lag_time_max_ms:
                continue
            members.append(replica)
        elif follower_log_end_offsets.get(replica, -1) >= max(
            high_watermark, leader_epoch_start_offset
        ):
            members.append(replica)
    return tuple(members)


INVALID_TIMESTAMP: Final = 32
_LONG_MAX: Final = 2**63 - 1


def timestamp_error(
    base_timestamp_ms: int,
    max_timestamp_ms: int,
    *,
    log_append_time: bool,
    now_ms: int,
    difference_max_ms: int,
) -> int:
    """INVALID_TIMESTAMP (32) when a CREATE_TIME batch's first or newest timestamp is further
    than ``message.timestamp.difference.max.ms`` from the broker's clock, else NONE.

    Kafka checks every record; the first and the newest timestamps bound the batch for records
    written in time order, which is what clients produce.
    """
    if log_append_time:
        return NONE
    for timestamp in (base_timestamp_ms, max_timestamp_ms):
        if abs(now_ms - timestamp) > difference_max_ms:
            return INVALID_TIMESTAMP
    return NONE


def timestamp_window(now_ms: int, difference_max_ms: int) -> tuple[int, int] | None:
    """The record timestamps ``message.timestamp.difference.max.ms`` accepts around ``now_ms``
    (``None``: the default, unbounded). The storage engine checks every record of a CREATE_TIME
    batch against it, as Kafka's LogValidator does, since the header can lie."""
    if difference_max_ms >= _LONG_MAX:
        return None
    return now_ms - difference_max_ms, now_ms + difference_max_ms


def with_isr(state: ReplicaState, isr: tuple[int, ...], partition_epoch: int) -> ReplicaState:
    """``state`` with a new ISR and partition epoch (an ISR change the controller confirmed)."""
    assert partition_epoch >= state.partition_epoch
    return replace(state, isr=isr, partition_epoch=partition_epoch)
