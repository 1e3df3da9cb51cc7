"""The controller machine (design V3 §A, B, D, F; KIP-112; Kafka's ZooKeeper-mode controller).

Theory of operation. :class:`Controller` is a sans-IO core: :meth:`Controller.handle` takes one
input (the election result with a snapshot of ZooKeeper, a re-read after a watch fired, the result
of a write, a broker's response) and returns effects (conditional ZooKeeper ``multi`` writes,
partition-state re-reads, requests to brokers, trace events, resignation). The trio shell
(:mod:`impl.controller._service`) performs the reads a watch calls for, carries out the effects
and feeds the results back; the simulator can drive the same core.

Decisions, and where they come from:

- **Fencing** (KAFKA-6082, ``CONTROLLER_FENCED``): every write is one ``multi`` whose first op
  checks ``/controller_epoch``'s version as of this controller's election. If that check fails,
  another controller has been elected: the core emits ZK_WRITE_FENCED and resigns; the write
  changed nothing.
- **Partition state** writes are also conditional on the partition's zkVersion (design V3 §A
  3.3). Many partitions go in one ``multi`` (design V3 "Potential benefits" 2); when one of them
  is stale the whole ``multi`` fails on that op: the core re-reads that partition and retries the
  others at once, so each retry removes at least one partition (bounded).
- **Leader election** (§A 3.2): the first replica of AR that is in the ISR and usable (broker
  live, replica not on an offline log dir); with none, a usable replica outside the ISR only if
  ``unclean.leader.election.enable``; otherwise no leader (-1) and the ISR is kept, so the last
  ISR member can lead cleanly when it returns. Every controller write bumps the leader epoch
  (``EPOCHS_MONOTONIC``); dead or offline replicas leave the ISR.
- **A failed broker leaves the ISR** (Kafka's OfflineReplica: ``removeReplicasFromIsr``): a broker
  that failed, or restarted between two reads of ``/brokers/ids`` (its registration's czxid, the
  broker epoch, changed: failed then started, Kafka's ``onBrokerFailure`` + ``onBrokerStartup``),
  is recorded as a pending ISR removal of each partition assigned to it. Until a write of that
  partition carries the removal out (or a fresh read shows the broker out of the ISR), every plan
  of the partition keeps the broker out of its ISR and leadership, even once it is live again:
  the removal survives being deferred behind elections, a busy partition and a stale zkVersion.
  A partition whose cached state needs no change is re-read first, so an ISR expansion a leader
  wrote before the failure (not yet seen by the controller) is not kept. The last ISR member
  stays in the ISR with no leader, so it can lead cleanly when it returns.
- **Unclean shutdowns** (KIP-966, spec/controller.md "Unclean shutdowns"): a registration's
  ``clean_since_broker_epoch`` names the incarnation since which every shutdown of the broker
  was clean (-1: the last one was not). An ISR member whose clean run does not reach back to
  an incarnation the partition state vouched for (the one this controller saw, or one
  registered before the state's last write read at the failover; a state without a leader
  vouches at the failover for no member registered after an unclean shutdown, its writer may
  not have seen that registration) may have lost committed records: it is
  marked in that partition, and while the ISR holds an unmarked member it is neither elected
  nor kept in the ISR. It rejoins through its leader after catching up.
- **Requests** are accumulated while writes or reads are outstanding and flushed as one
  LeaderAndIsr, StopReplica and UpdateMetadata per broker (§A 4: "multiple commands in one RPC").
  The first flush after an election carries the INIT flag (§D 4). A partition's LeaderAndIsr
  state is held back while a re-read of it is unanswered (the connection went with a write of
  it of unknown outcome): Kafka's controller retries the write once connected before sending;
  here the revalidation re-reads everything and resends. A state queued before a re-read that
  answers is rebuilt from what was read.
- **Log-dir failure** (KIP-112): on ``/log_dir_event_notification`` the controller deletes the
  notifications (epoch-guarded) and resends LeaderAndIsr for every replica of that broker; replicas
  answered with KAFKA_STORAGE_ERROR (56) become OFFLINE, leave the ISR and lose leadership.
  ``is_new`` is set only for replicas new to a broker (topic creation, partition addition,
  reassignment targets), so a lost replica is never recreated empty on a good dir.

This module is sans-IO.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from mypy_extensions import mypyc_attr

from impl.trace import TraceEvent, TraceValue

from .coordinator import (
    ANY_VERSION,
    BadVersionError,
    CheckOp,
    CoordinatorError,
    CreateOp,
    DeleteOp,
    NodeExistsError,
    NoNodeError,
    Op,
    OpResult,
    SetOp,
    SetResult,
    multi_error,
)
from .reassignment import (
    PartitionView,
    ReassignmentEvent,
    ReassignmentPhase,
    classify,
    expanded_assignment,
    original_replicas,
    ready_to_switch,
    switched_leader_isr,
)
from .reassignment import step as step_reassignment
from .requests import (
    ERROR_KAFKA_STORAGE_ERROR,
    ERROR_NONE,
    NO_LEADER,
    UNKNOWN_BROKER_EPOCH,
    BrokerEndpoint,
    ControllerRequest,
    ControllerResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from .znodes import (
    CONTROLLER_EPOCH_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    PREFERRED_REPLICA_ELECTION_PATH,
    REASSIGN_PARTITIONS_PATH,
    BrokerRegistration,
    LeaderIsr,
    ReassignmentTarget,
    TopicAssignment,
    delete_topic_path,
    encode_partition_state,
    encode_reassignment,
    encode_topic,
    partition_path,
    partition_state_path,
    partitions_path,
    topic_config_path,
    topic_path,
)

__sans_io__ = True

TP = tuple[str, int]

#: ``leader`` sent in UpdateMetadata for a partition being deleted (Kafka's LeaderDuringDelete).
LEADER_DURING_DELETE = -2
#: ``leader_epoch`` of a topic deletion's StopReplica (Kafka's EpochDuringDelete): the replica
#: stops and is deleted whatever epoch it holds.
EPOCH_DURING_DELETE = -2
#: Trace machine name.
MACHINE = "controller"
#: Partitions per ``multi`` (a few hundred bytes each, far below ZooKeeper's 1 MB request cap).
PARTITIONS_PER_WRITE_MAX = 500
#: Multis' worth of deferred ISR-only changes planned per round (:meth:`Controller._maybe_flush`).
DEFERRED_WRITES_PER_ROUND = 16
#: Kafka error codes of ElectLeaders' per-partition results (KIP-460).
ERROR_UNKNOWN_TOPIC_OR_PARTITION = 3
ERROR_NOT_CONTROLLER = 41
ERROR_ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
ERROR_ELECTION_NOT_NEEDED = 84


class ControllerEvent(enum.Enum):
    """What the controller reacts to (spec/VOCABULARY.md, machine ``controller``)."""

    CONTROLLER_ELECTED = "controller_elected"  #: §D 1: ``/controller`` created, epoch bumped
    CONTROLLER_RESIGNED = "controller_resigned"  #: ``/controller`` lost to another broker
    SESSION_EXPIRED = "session_expired"  #: the ZooKeeper session (and ``/controller``) is gone
    BROKER_STARTED = "broker_started"  #: §A: a broker registered in ``/brokers/ids``
    BROKER_FAILED = "broker_failed"  #: §A: a broker's registration vanished
    LEADER_ELECTED = "leader_elected"  #: §A 3.2 / §B init_leaders: a new leader written
    ZK_WRITE_FENCED = "zk_write_fenced"  #: KAFKA-6082: the ``/controller_epoch`` check failed
    LOG_DIR_FAILED = "log_dir_failed"  #: KIP-112: a replica answered KAFKA_STORAGE_ERROR
    REASSIGN_STARTED = "reassign_started"  #: §F 2.1: AR + RAR written
    REASSIGN_COMPLETED = "reassign_completed"  #: §F 3.2.6: AR := RAR, old replicas stopped
    TOPIC_CREATED = "topic_created"  #: §B 1: ``/brokers/topics/<t>`` appeared (or grew)
    TOPIC_DELETED = "topic_deleted"  #: §B 2: ``/admin/delete_topics/<t>``
    ISR_CHANGED = "isr_changed"  #: §G: the ISR changed (leader's update, or controller shrink)


class PartitionState(enum.Enum):
    """A partition's state in the controller (Kafka's PartitionStateMachine)."""

    NEW = "new"  #: §B: assigned, no leader written yet
    ONLINE = "online"  #: a live leader is written
    OFFLINE = "offline"  #: no usable leader (leader -1)
    NON_EXISTENT = "non_existent"  #: not created, or deleted


class ReplicaState(enum.Enum):
    """A replica's state in the controller (Kafka's ReplicaStateMachine)."""

    NEW = "new"  #: §B / §F: new to its broker (LeaderAndIsr ``is_new``)
    ONLINE = "online"  #: its broker is live and its log dir is online
    OFFLINE = "offline"  #: broker dead or log dir failed (KIP-112)
    DELETION_STARTED = "deletion_started"  #: §B 2: StopReplica(delete) sent
    DELETION_SUCCESSFUL = "deletion_successful"  #: the broker deleted it
    DELETION_INELIGIBLE = "deletion_ineligible"  #: broker dead or delete failed; retried later
    NON_EXISTENT = "non_existent"  #: not assigned (or removed by a reassignment)


class ControllerRole(enum.Enum):
    """The trace states of the controller itself (subject ``controller``)."""

    INACTIVE = "inactive"  #: not the controller
    ACTIVE = "active"  #: holds ``/controller`` and the current controller epoch


@mypyc_attr(native_class=False)  # mypyc: a built-in exception's subclass stays a Python class
class InvalidTransitionError(RuntimeError):
    """A (state, event) pair missing from a transition table: a controller bug."""


_P = PartitionState
_R = ReplicaState
_E = ControllerEvent

#: Partition transitions (Kafka's valid previous states per target state).
PARTITION_TRANSITIONS: Mapping[tuple[PartitionState, ControllerEvent], PartitionState] = (
    MappingProxyType(
        {
            (_P.NON_EXISTENT, _E.TOPIC_CREATED): _P.NEW,
            (_P.NEW, _E.LEADER_ELECTED): _P.ONLINE,
            (_P.ONLINE, _E.LEADER_ELECTED): _P.ONLINE,
            (_P.OFFLINE, _E.LEADER_ELECTED): _P.ONLINE,
            (_P.ONLINE, _E.ISR_CHANGED): _P.ONLINE,
            (_P.OFFLINE, _E.ISR_CHANGED): _P.OFFLINE,
            (_P.NEW, _E.BROKER_FAILED): _P.OFFLINE,
            (_P.NEW, _E.LOG_DIR_FAILED): _P.OFFLINE,
            (_P.ONLINE, _E.BROKER_FAILED): _P.OFFLINE,
            (_P.OFFLINE, _E.BROKER_FAILED): _P.OFFLINE,
            (_P.ONLINE, _E.LOG_DIR_FAILED): _P.OFFLINE,
            (_P.OFFLINE, _E.LOG_DIR_FAILED): _P.OFFLINE,
            **{(state, event): state for state in (_P.NEW, _P.ONLINE, _P.OFFLINE)
               for event in (_E.REASSIGN_STARTED, _E.REASSIGN_COMPLETED)},
            (_P.NEW, _E.TOPIC_DELETED): _P.NON_EXISTENT,
            (_P.ONLINE, _E.TOPIC_DELETED): _P.NON_EXISTENT,
            (_P.OFFLINE, _E.TOPIC_DELETED): _P.NON_EXISTENT,
        }
    )
)

_LIVE_REPLICA_STATES = (_R.NEW, _R.ONLINE, _R.OFFLINE)

#: Replica transitions (Kafka's ReplicaStateMachine).
REPLICA_TRANSITIONS: Mapping[tuple[ReplicaState, ControllerEvent], ReplicaState] = (
    MappingProxyType(
        {
            (_R.NON_EXISTENT, _E.TOPIC_CREATED): _R.NEW,
            (_R.NON_EXISTENT, _E.REASSIGN_STARTED): _R.NEW,
            (_R.NEW, _E.LEADER_ELECTED): _R.ONLINE,
            (_R.ONLINE, _E.LEADER_ELECTED): _R.ONLINE,
            (_R.OFFLINE, _E.BROKER_STARTED): _R.ONLINE,
            (_R.ONLINE, _E.BROKER_STARTED): _R.ONLINE,
            (_R.NEW, _E.BROKER_STARTED): _R.NEW,
            **{(state, _E.BROKER_FAILED): _R.OFFLINE for state in _LIVE_REPLICA_STATES},
            **{(state, _E.LOG_DIR_FAILED): _R.OFFLINE for state in _LIVE_REPLICA_STATES},
            **{(state, _E.REASSIGN_COMPLETED): _R.NON_EXISTENT for state in _LIVE_REPLICA_STATES},
            **{(state, _E.TOPIC_DELETED): _R.DELETION_STARTED for state in _LIVE_REPLICA_STATES},
            (_R.DELETION_INELIGIBLE, _E.TOPIC_DELETED): _R.DELETION_STARTED,
            (_R.DELETION_STARTED, _E.TOPIC_DELETED): _R.DELETION_SUCCESSFUL,
            (_R.DELETION_STARTED, _E.BROKER_FAILED): _R.DELETION_INELIGIBLE,
            (_R.DELETION_INELIGIBLE, _E.BROKER_FAILED): _R.DELETION_INELIGIBLE,
            (_R.DELETION_SUCCESSFUL, _E.BROKER_FAILED): _R.DELETION_SUCCESSFUL,
            (_R.DELETION_SUCCESSFUL, _E.TOPIC_DELETED): _R.NON_EXISTENT,
        }
    )
)


def step_partition(state: PartitionState, event: ControllerEvent) -> PartitionState:
    """A partition's next state.

    Raises:
        InvalidTransitionError: no table entry.
    """
    try:
        return PARTITION_TRANSITIONS[(state, event)]
    except KeyError:
        raise InvalidTransitionError(f"partition {state.name} --{event.name}-->") from None


def step_replica(state: ReplicaState, event: ControllerEvent) -> ReplicaState:
    """A replica's next state.

    Raises:
        InvalidTransitionError: no table entry.
    """
    try:
        return REPLICA_TRANSITIONS[(state, event)]
    except KeyError:
        raise InvalidTransitionError(f"replica {state.name} --{event.name}-->") from None


def tp_name(tp: TP) -> str:
    """``t-0``: the trace subject of a partition."""
    return f"{tp[0]}-{tp[1]}"


# --- inputs ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """Everything a new controller reads from ZooKeeper (design V3 §D 3)."""

    brokers: Mapping[int, BrokerRegistration]
    topics: Mapping[str, TopicAssignment]
    partition_states: Mapping[TP, LeaderIsr]
    topics_to_delete: tuple[str, ...] = ()
    reassignment: tuple[ReassignmentTarget, ...] = ()
    log_dir_events: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    isr_change_notifications: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Elected:
    """This broker won the election (or re-validated it after a reconnect)."""

    epoch: int
    epoch_zk_version: int
    snapshot: ClusterSnapshot


@dataclass(frozen=True, slots=True)
class BrokersRead:
    """``/brokers/ids`` after its child watch fired."""

    brokers: Mapping[int, BrokerRegistration]


@dataclass(frozen=True, slots=True)
class TopicsRead:
    """``/brokers/topics`` (names present) and the assignments of new or changed topics."""

    present: frozenset[str]
    assignments: Mapping[str, TopicAssignment]
    partition_states: Mapping[TP, LeaderIsr] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class DeleteTopicsRead:
    """``/admin/delete_topics`` children."""

    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ReassignmentRead:
    """``/admin/reassign_partitions`` (empty when absent)."""

    targets: tuple[ReassignmentTarget, ...]


@dataclass(frozen=True, slots=True)
class PreferredElectionRead:
    """``/admin/preferred_replica_election``: move leadership back to each partition's
    preferred replica (the first assigned) where it is alive and in the ISR."""

    partitions: tuple[TP, ...]


@dataclass(frozen=True, slots=True)
class UncleanElectionRequested:
    """ElectLeaders with ``ElectionType.UNCLEAN`` (KIP-460), asked of this controller by an
    admin client: elect a live replica outside the ISR for each partition that has no live
    leader and no live ISR member, whatever ``unclean.leader.election.enable`` says (Kafka's
    ``AdminClientTriggered`` unclean election). Answered with :class:`ElectionAnswered`
    carrying ``request_id``."""

    request_id: int
    partitions: tuple[TP, ...]


@dataclass(frozen=True, slots=True)
class TopicConfigsRead:
    """The topics whose ``/config/topics/<t>`` sets ``unclean.leader.election.enable`` (their
    value overrides the broker's, as in Kafka)."""

    unclean_leader_election: Mapping[str, bool]


@dataclass(frozen=True, slots=True)
class IsrChangesRead:
    """``/isr_change_notification`` children and the fresh states of the partitions named."""

    notifications: tuple[str, ...]
    partition_states: Mapping[TP, LeaderIsr]


@dataclass(frozen=True, slots=True)
class LogDirEventsRead:
    """``/log_dir_event_notification`` children: znode name → broker id."""

    notifications: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class PartitionStatesRead:
    """States re-read on the core's request (``None``: no state znode)."""

    partition_states: Mapping[TP, LeaderIsr | None]


@dataclass(frozen=True, slots=True)
class WriteCompleted:
    """The result of a :class:`ZkWrite` (per-op results; ``None`` when the outcome is unknown).

    ``session_id``: the ZooKeeper session the pump ran the write under, read from its client
    once the write completed; the controller node checks it against its term's session
    (:mod:`impl.controller.node`), the core ignores it (``None`` only between the node and the
    core)."""

    write_id: int
    results: Sequence[OpResult] | None
    session_id: int | None = None


@dataclass(frozen=True, slots=True)
class ResponseReceived:
    """A broker answered a request (``response`` is ``None`` if it could not be delivered)."""

    broker_id: int
    request: ControllerRequest
    response: ControllerResponse | None

    def __init__(
        self, broker_id: int, request: ControllerRequest, response: ControllerResponse | None
    ) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "broker_id", broker_id)
        object.__setattr__(self, "request", request)
        object.__setattr__(self, "response", response)


@dataclass(frozen=True, slots=True)
class SessionExpired:
    """The controller's ZooKeeper session expired."""


@dataclass(frozen=True, slots=True)
class ControllerMoved:
    """``/controller`` no longer names this broker's session."""


ControllerInput = (
    Elected
    | BrokersRead
    | TopicsRead
    | DeleteTopicsRead
    | ReassignmentRead
    | PreferredElectionRead
    | UncleanElectionRequested
    | TopicConfigsRead
    | IsrChangesRead
    | LogDirEventsRead
    | PartitionStatesRead
    | WriteCompleted
    | ResponseReceived
    | SessionExpired
    | ControllerMoved
)

# --- effects -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ZkWrite:
    """Run ``ops`` as one ``multi`` (its first op is the controller-epoch check).

    ``ensure_paths`` are persistent empty parents to create first if missing (idempotent, so a
    zombie creating them changes no state).
    """

    write_id: int
    ops: tuple[Op, ...]
    ensure_paths: tuple[str, ...] = ()

    def __init__(
        self, write_id: int, ops: tuple[Op, ...], ensure_paths: tuple[str, ...] = ()
    ) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "write_id", write_id)
        object.__setattr__(self, "ops", ops)
        object.__setattr__(self, "ensure_paths", ensure_paths)


@dataclass(frozen=True, slots=True)
class ReadPartitionStates:
    """Re-read these partitions' state znodes and answer with :class:`PartitionStatesRead`."""

    partitions: tuple[TP, ...]


@dataclass(frozen=True, slots=True)
class SendRequest:
    """Send ``request`` to ``broker_id``; answer with :class:`ResponseReceived`."""

    broker_id: int
    request: ControllerRequest


@dataclass(frozen=True, slots=True)
class EmitTrace:
    """Record a trace event."""

    event: TraceEvent

    def __init__(self, event: TraceEvent) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "event", event)


@dataclass(frozen=True, slots=True)
class Resign:
    """Stop acting as controller (the shell goes back to the election)."""

    reason: ControllerEvent


@dataclass(frozen=True, slots=True)
class ElectionAnswered:
    """The outcome of an :class:`UncleanElectionRequested`, one Kafka error code per partition:
    NONE (a leader was elected), ELECTION_NOT_NEEDED (a live leader exists),
    ELIGIBLE_LEADERS_NOT_AVAILABLE (no live replica), UNKNOWN_TOPIC_OR_PARTITION, or
    NOT_CONTROLLER (this broker is not, or stopped being, the controller)."""

    request_id: int
    results: tuple[tuple[TP, int], ...]


ControllerEffect = (ZkWrite | ReadPartitionStates | SendRequest | EmitTrace | Resign
                    | ElectionAnswered)

# --- pending writes ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _StateChange:
    tp: TP
    new: LeaderIsr  # zk_version = the expected version (-1: create the znode)
    cause: ControllerEvent
    removed: frozenset[int] = frozenset()  # the ISR removals this change carries out


@dataclass(frozen=True, slots=True)
class _StateBatch:
    changes: tuple[_StateChange, ...]


@dataclass(frozen=True, slots=True)
class _ReassignWrite:
    tp: TP
    switch: bool  # False: AR + RAR (REASSIGN_STARTED); True: AR := RAR
    assignment: TopicAssignment
    change: _StateChange


@dataclass(frozen=True, slots=True)
class _Deletes:
    """Idempotent deletions: a NoNode op is dropped and the rest retried."""

    paths: tuple[str, ...]
    topic: str | None = None  # a finished topic deletion
    reassign_node: bool = False  # the emptied /admin/reassign_partitions


@dataclass(frozen=True, slots=True)
class _ReassignNode:
    targets: tuple[ReassignmentTarget, ...]


@dataclass(slots=True)
class _ElectionWait:
    """An unclean election request: the results known so far and the partitions whose
    election is still being written."""

    results: dict[TP, int]
    waiting: set[TP]


_Pending = _StateBatch | _ReassignWrite | _Deletes | _ReassignNode


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """Controller settings.

    Attributes:
        broker_id: this broker.
        unclean_leader_election: ``unclean.leader.election.enable`` (off by default: a replica
            outside the ISR never leads, ``NO_COMMITTED_LOSS``).
        partitions_per_write_max: partitions per ``multi``.
        fence_writes: every write checks ``/controller_epoch``'s version (KAFKA-6082). Only the
            conformance simulator's ``no_epoch_check`` bug variant turns it off: the check op
            then accepts any version, so a deposed (zombie) controller's writes land.
    """

    broker_id: int
    unclean_leader_election: bool = False
    partitions_per_write_max: int = PARTITIONS_PER_WRITE_MAX
    fence_writes: bool = True


class Controller:
    """The controller core (see the module docstring). One instance per broker; inactive until
    :class:`Elected`."""

    def __init__(self, config: ControllerConfig) -> None:
        assert config.partitions_per_write_max >= 1
        self.config = config
        self.active = False
        self.epoch = 0
        self.epoch_zk_version = -1
        #: leader changes this controller wrote to ZooKeeper (a partition's leader became another
        #: live broker): Kafka's LeaderElectionRateAndTimeMs count, read by the metrics shell
        self.leader_elections = 0
        self._write_ids = itertools.count(1)
        self._reset()

    def _reset(self) -> None:
        self.live_brokers: dict[int, BrokerRegistration] = {}
        self.topics: dict[str, TopicAssignment] = {}
        self.leader_isr: dict[TP, LeaderIsr] = {}
        self.partition_states: dict[TP, PartitionState] = {}
        self.replica_states: dict[tuple[TP, int], ReplicaState] = {}
        self.offline_replicas: dict[int, set[TP]] = {}
        self.topics_deleting: set[str] = set()
        self.reassignments: dict[TP, ReassignmentTarget] = {}
        self.reassignment_phases: dict[TP, ReassignmentPhase] = {}
        self._pending: dict[int, _Pending] = {}
        self._reads_outstanding = 0
        self._busy: set[TP] = set()
        self._dirty: dict[TP, ControllerEvent] = {}
        self._stale_causes: dict[TP, ControllerEvent] = {}
        self._deferred: dict[TP, ControllerEvent] = {}
        self._isr_removals: dict[TP, set[int]] = {}
        #: KIP-966: per partition, the ISR members that restarted uncleanly since the state
        #: vouched for them; barred from leadership and the ISR while an unmarked member remains
        self._unclean: dict[TP, set[int]] = {}
        #: the registration epoch this controller last saw for each broker (kept after the
        #: broker fails): a registration whose clean-since epoch is not newer follows it cleanly
        self._seen_epochs: dict[int, int] = {}
        #: the mzxid of each partition state read at the failover: it vouches for the
        #: incarnations of its ISR registered before it
        self._vouched_zxid: dict[TP, int] = {}
        #: partitions whose next plan moves leadership to the preferred replica
        self._preferred: set[TP] = set()
        #: per-topic ``unclean.leader.election.enable`` overrides
        self._unclean_topics: dict[str, bool] = {}
        #: partitions whose next plan may elect outside the ISR (ElectLeaders UNCLEAN)
        self._unclean_requested: set[TP] = set()
        #: unclean election requests not answered yet, by request id
        self._elections: dict[int, _ElectionWait] = {}
        self._reassign_node_writing = False
        self._reassign_node_dirty = False
        self._effects: list[ControllerEffect] = []
        self._lair: dict[int, dict[TP, LeaderAndIsrPartitionState]] = {}
        #: LeaderAndIsr states held back while their partition's deferred change is unwritten:
        #: broker -> partition -> the held state's ``is_new`` (the rest is rebuilt on release)
        self._held: dict[int, dict[TP, bool]] = {}
        #: partitions re-read (a write of unknown outcome, a stale zkVersion, a removal to
        #: check) and not answered yet: their cached states are not sent (held as above)
        self._unconfirmed: set[TP] = set()
        self._stop: dict[int, dict[TP, StopReplicaPartition]] = {}
        self._um_partitions: set[TP] = set()
        self._um_full_brokers: set[int] = set()
        self._um_broadcast = False
        self._init_flush = False

    # --- public ------------------------------------------------------------------------------

    @property
    def writes_outstanding(self) -> int:
        """Writes issued and not yet completed."""
        return len(self._pending)

    def unclean_members(self, tp: TP) -> frozenset[int]:
        """The ISR members of ``tp`` marked as restarted uncleanly since the state vouched for
        them (KIP-966; spec/controller.md "Unclean shutdowns")."""
        return frozenset(self._unclean.get(tp, ()))

    def handle(self, event: ControllerInput) -> list[ControllerEffect]:
        """Process one input and return the effects to carry out, in order."""
        self._effects = []
        if isinstance(event, Elected):
            self._on_elected(event)
        elif isinstance(event, UncleanElectionRequested) and not self.active:
            return [ElectionAnswered(event.request_id, tuple(
                (tp, ERROR_NOT_CONTROLLER) for tp in dict.fromkeys(event.partitions)))]
        elif not self.active:
            return []
        elif isinstance(event, SessionExpired):
            self._resign(ControllerEvent.SESSION_EXPIRED)
        elif isinstance(event, ControllerMoved):
            self._resign(ControllerEvent.CONTROLLER_RESIGNED)
        elif isinstance(event, BrokersRead):
            self._on_brokers(event.brokers)
        elif isinstance(event, TopicsRead):
            self._on_topics(event)
        elif isinstance(event, DeleteTopicsRead):
            self._on_delete_topics(event.topics)
        elif isinstance(event, TopicConfigsRead):
            self._on_topic_configs(event.unclean_leader_election)
        elif isinstance(event, PreferredElectionRead):
            self._on_preferred_election(event.partitions)
        elif isinstance(event, UncleanElectionRequested):
            self._on_unclean_election(event)
        elif isinstance(event, ReassignmentRead):
            self._on_reassignment(event.targets)
        elif isinstance(event, IsrChangesRead):
            self._on_isr_changes(event)
        elif isinstance(event, LogDirEventsRead):
            self._on_log_dir_events(event.notifications)
        elif isinstance(event, PartitionStatesRead):
            self._on_states_read(event.partition_states)
        elif isinstance(event, WriteCompleted):
            self._on_write_completed(event)
        else:
            self._on_response(event)
        if self.active:
            self._maybe_flush()
        self._settle_elections()
        effects, self._effects = self._effects, []
        return effects

    # --- helpers -----------------------------------------------------------------------------

    def _trace(self, event: ControllerEvent, subject: str, before: str, after: str,
               **fields: TraceValue) -> None:
        # Field values here are already immutable trace values (ints, strings, tuples of
        # ints), so the event is built without TraceEvent.of's copying: a failover traces
        # thousands of partitions at once.
        self._effects.append(EmitTrace(TraceEvent(
            MACHINE, event.name, subject, before, after, MappingProxyType(fields)
        )))

    def _resign(self, reason: ControllerEvent) -> None:
        self._trace(reason, "controller", ControllerRole.ACTIVE.name, ControllerRole.INACTIVE.name,
                    epoch=self.epoch, broker=self.config.broker_id)
        self.active = False
        self._effects.append(Resign(reason))
        self._settle_elections()

    def _epoch_check(self) -> CheckOp:
        if not self.config.fence_writes:
            return CheckOp(CONTROLLER_EPOCH_PATH, ANY_VERSION)
        return CheckOp(CONTROLLER_EPOCH_PATH, self.epoch_zk_version)

    def _write(
        self, pending: _Pending, ops: Sequence[Op], ensure_paths: Sequence[str] = ()
    ) -> None:
        write_id = next(self._write_ids)
        self._pending[write_id] = pending
        self._effects.append(
            ZkWrite(write_id, (self._epoch_check(), *ops), tuple(ensure_paths))
        )

    def _assigned(self, tp: TP) -> tuple[int, ...]:
        assignment = self.topics.get(tp[0])
        if assignment is None:
            return ()
        return assignment.partitions.get(tp[1], ())

    def _all_tps(self) -> list[TP]:
        return [(t, p) for t, a in sorted(self.topics.items()) for p in sorted(a.partitions)]

    def _restarted_uncleanly(self, tp: TP, broker: BrokerRegistration) -> bool:
        """Whether ``broker``'s registration follows an unclean shutdown since an incarnation
        ``tp``'s state vouched for (spec/controller.md "Unclean shutdowns").

        A registration without ``clean_since_broker_epoch`` is taken as clean (Kafka's ZooKeeper
        controller takes every broker so). Otherwise every shutdown since the incarnation it
        names was clean: the registration is clean when that incarnation is not newer than the
        one this controller last saw registered, or, for a broker this controller never saw,
        was registered at or before the state's last write read at the failover.
        """
        since = broker.clean_since_epoch
        if since is None:
            return False
        if since < 0:
            return True
        seen = self._seen_epochs.get(broker.broker_id)
        if seen is not None:
            return since > seen
        known = self.leader_isr.get(tp)
        vouched = None if known is None else known.vouched_epoch(broker.broker_id)
        if vouched is not None:
            return since > vouched
        return since > self._vouched_zxid.get(tp, -1)

    def _mark_unclean(self, tp: TP, broker_id: int) -> None:
        self._unclean.setdefault(tp, set()).add(broker_id)

    def _barred(self, tp: TP, isr: Sequence[int]) -> frozenset[int]:
        """The ISR members that may neither lead nor stay in the ISR: those marked unclean,
        while the ISR holds a member that is not (KIP-966); none when every member is."""
        marked = self._unclean.get(tp)
        if not marked or all(r in marked for r in isr):
            return frozenset()
        return frozenset(r for r in isr if r in marked)

    def _usable(self, tp: TP, broker_id: int) -> bool:
        return broker_id in self.live_brokers and tp not in self.offline_replicas.get(
            broker_id, ()
        )

    def _set_partition(self, tp: TP, event: ControllerEvent, **fields: TraceValue) -> None:
        before = self.partition_states.get(tp, PartitionState.NON_EXISTENT)
        after = step_partition(before, event)
        self.partition_states[tp] = after
        self._trace(event, tp_name(tp), before.name, after.name, **fields)

    def _set_replica(self, tp: TP, broker_id: int, event: ControllerEvent) -> None:
        before = self.replica_states.get((tp, broker_id), ReplicaState.NON_EXISTENT)
        after = step_replica(before, event)
        if after is ReplicaState.NON_EXISTENT:
            self.replica_states.pop((tp, broker_id), None)
        else:
            self.replica_states[(tp, broker_id)] = after

    def _set_phase(self, tp: TP, event: ReassignmentEvent) -> None:
        before = self.reassignment_phases.get(tp, ReassignmentPhase.NONE)
        after = step_reassignment(before, event)
        self.reassignment_phases[tp] = after
        self._effects.append(
            EmitTrace(TraceEvent.of("reassignment", event.name, tp_name(tp), before.name,
                                    after.name))
        )

    # --- election (§D) -----------------------------------------------------------------------

    def _on_elected(self, event: Elected) -> None:
        assert event.epoch >= self.epoch, "EPOCHS_MONOTONIC: controller epoch went backwards"
        before = ControllerRole.ACTIVE if self.active else ControllerRole.INACTIVE
        self.active = False
        self._settle_elections()  # requests of an earlier term: NOT_CONTROLLER
        # This core's previous term: its state writes still unanswered (one may have landed
        # after registrations that term never read) and the registrations it had read.
        previous_epoch, previous_seen = self.epoch, self._seen_epochs
        stalled = {change.tp for pending in self._pending.values()
                   if isinstance(pending, _StateBatch) for change in pending.changes}
        self._reset()
        self.active = True
        self.epoch = event.epoch
        self.epoch_zk_version = event.epoch_zk_version
        self._trace(ControllerEvent.CONTROLLER_ELECTED, "controller", before.name,
                    ControllerRole.ACTIVE.name, epoch=event.epoch, broker=self.config.broker_id)
        snapshot = event.snapshot
        self.live_brokers = dict(snapshot.brokers)
        self.topics = dict(snapshot.topics)
        for tp, state in snapshot.partition_states.items():
            if tp[0] in self.topics and tp[1] in self.topics[tp[0]].partitions:
                if state.controller_epoch > self.epoch:
                    self._resign(ControllerEvent.CONTROLLER_RESIGNED)
                    return
                self.leader_isr[tp] = state
        for tp in self._all_tps():
            adding = self.topics[tp[0]].adding_replicas.get(tp[1], ())
            known = self.leader_isr.get(tp)
            if known is None:
                self.partition_states[tp] = PartitionState.NEW
            elif known.leader != NO_LEADER and self._usable(tp, known.leader):
                self.partition_states[tp] = PartitionState.ONLINE
            else:
                self.partition_states[tp] = PartitionState.OFFLINE
            for replica in self._assigned(tp):
                if known is None or replica in adding:
                    self.replica_states[(tp, replica)] = ReplicaState.NEW
                elif replica in self.live_brokers:
                    self.replica_states[(tp, replica)] = ReplicaState.ONLINE
                else:
                    self.replica_states[(tp, replica)] = ReplicaState.OFFLINE
        bounced_leaders: set[TP] = set()
        for tp, state in self.leader_isr.items():
            dead = {r for r in state.isr if r not in self.live_brokers}
            # A live ISR member registered after the state's last write restarted since the
            # state vouched for it, and no controller saw it go (its registration vanished and
            # came back unobserved, e.g. it was the controller): it may have lost unflushed
            # records. It is handled as Kafka handles a bounced broker (KIP-380: failed, then
            # started), as KRaft does a broker re-registering after an unclean shutdown
            # (KIP-966): out of the ISR, and its leadership moves to a member that kept the
            # log. Kept when no other member could take over (the partition would go offline,
            # then re-elect it: the same log, as Kafka's failure-then-startup).
            # A state that records its members' incarnations (KIP-903) says which one it
            # vouched for: any other registration restarted since. A leader's ISR write
            # vouches for no registration it read (it reads none): its mzxid alone would take
            # a member that crashed unseen and registered again before the write as vouched
            # for (fuzz seed 1915: the leader carried the restarted controller over while
            # shrinking and expanding another member).
            bounced = set()
            for r in state.isr:
                registration = self.live_brokers.get(r)
                if registration is None:
                    continue
                vouched = state.vouched_epoch(r)
                if vouched is not None:
                    if registration.epoch != vouched:
                        bounced.add(r)
                elif state.mzxid >= 0 and registration.epoch > state.mzxid:
                    bounced.add(r)
            # KIP-966: a bounced member whose registration does not follow a clean shutdown of
            # an incarnation the state vouched for may have lost committed records.
            self._vouched_zxid[tp] = state.mzxid
            for r in sorted(bounced):
                if self._restarted_uncleanly(tp, self.live_brokers[r]):
                    self._mark_unclean(tp, r)
            if state.leader == NO_LEADER:
                # A state without a leader was written by a controller, and it vouches only for
                # the incarnations that controller saw: its write may have landed after a
                # registration it never read (a write stalled across its session's expiry,
                # KAFKA-6082, or a notification still on its way), so the state's mzxid
                # proves nothing for a member whose registration follows an unclean shutdown.
                # A controller that saw such a member marked it and left it out of a
                # leaderless ISR beside a trusted member; with every member marked the last
                # replica standing is elected as before (fuzz seed 6056).
                for r in state.isr:
                    registration = self.live_brokers.get(r)
                    since = None if registration is None else registration.clean_since_epoch
                    if since is not None and since < 0:
                        self._mark_unclean(tp, r)
            if tp in stalled and state.controller_epoch == previous_epoch:
                # The state may be this core's own write of its previous term, planned before
                # registrations that term never read and landed after them (its session
                # expired meanwhile, its epoch still ZooKeeper's: KAFKA-6082). It vouches only
                # for the incarnations that term had read: a member registered since after an
                # unclean shutdown, or whose clean run began after the one read, is marked,
                # wherever its registration falls against the state's mzxid (fuzz seed 13451:
                # a preferred election planned while the member was up).
                for r in state.isr:
                    registration = self.live_brokers.get(r)
                    if registration is None or previous_seen.get(r) == registration.epoch:
                        continue
                    since = registration.clean_since_epoch
                    if since is not None and (since < 0 or (
                            r in previous_seen and since > previous_seen[r])):
                        self._mark_unclean(tp, r)
            if bounced and not set(state.isr) - dead - bounced:
                bounced = set()
            if state.leader in bounced or state.leader in self._barred(tp, state.isr):
                bounced_leaders.add(tp)
            if dead or bounced:  # Kafka's replica state machine startup: OfflineReplica
                self._isr_removals[tp] = dead | bounced
        self._seen_epochs = {b: broker.epoch for b, broker in self.live_brokers.items()}
        # §D 4: resend every known state (INIT) and the metadata to every live broker (but a
        # bounced leader's stale state: its election below sends the new one).
        self._init_flush = True
        self._um_full_brokers = set(self.live_brokers)
        self._um_broadcast = True
        for tp in self.leader_isr:
            if tp not in bounced_leaders:
                self._queue_leader_and_isr(tp)
        # §D 5-6: dead brokers' partitions, leaderless and NEW partitions (the snapshot is fresh).
        self._reconcile(self._all_tps(), ControllerEvent.BROKER_FAILED, fresh=True)
        if snapshot.isr_change_notifications:
            self._delete_nodes(ISR_CHANGE_NOTIFICATION_PATH, snapshot.isr_change_notifications)
        if snapshot.log_dir_events:
            self._on_log_dir_events(snapshot.log_dir_events)
        # §D 7: pending deletions, then pending reassignments (and the started ones a cancel
        # left out). Kafka's onControllerFailover queues the deletions (TopicDeletionManager
        # init) before initializePartitionReassignments, which skips a topic queued for
        # deletion: reassigned first, a replica it removes would be left out of the deletion's
        # StopReplica and kept by its broker if the reassignment's own StopReplica is lost
        # (fuzz seed 16677).
        self._on_delete_topics(snapshot.topics_to_delete)
        self._on_reassignment(snapshot.reassignment)
        self._revert_orphans()

    # --- leader election (§A) ----------------------------------------------------------------

    def _plan(self, tp: TP, cause: ControllerEvent) -> _StateChange | None:
        replicas = self._assigned(tp)
        if not replicas or tp[0] in self.topics_deleting:
            return None
        current = self.leader_isr.get(tp)
        live, offline = self.live_brokers, self.offline_replicas
        eligible = [r for r in replicas if r in live and (not offline or tp not in offline.get(
            r, ()))]
        if current is None:  # §B init_leaders: all live replicas form the ISR
            if not eligible:
                return None
            new = LeaderIsr(eligible[0], 0, tuple(eligible), self.epoch, -1)
            return _StateChange(tp, new, ControllerEvent.LEADER_ELECTED)
        unclean_asked = tp in self._unclean_requested
        self._unclean_requested.discard(tp)
        removals = self._isr_removals.get(tp)
        removed: frozenset[int] = frozenset()
        if removals:
            removed = frozenset(removals)
            eligible = [r for r in eligible if r not in removed]
        barred = self._barred(tp, current.isr)
        kept = current.isr  # the ISR when no member is usable
        unclean_pool = eligible  # an unclean election may take a barred member too
        if barred:  # KIP-966: restarted uncleanly while a member that kept its log remains
            eligible = [r for r in eligible if r not in barred]
            kept = tuple(r for r in current.isr if r not in barred)
        isr_usable = tuple(r for r in current.isr if r in eligible)
        preferred = replicas[0]
        if (tp in self._preferred and current.leader != preferred and preferred in isr_usable
                and current.leader in current.isr):
            # a preferred replica election (Kafka's PreferredReplicaPartitionLeaderElection)
            self._preferred.discard(tp)
            new = LeaderIsr(preferred, current.leader_epoch + 1, isr_usable, self.epoch,
                            current.zk_version)
            return _StateChange(tp, new, ControllerEvent.LEADER_ELECTED, removed)
        self._preferred.discard(tp)
        if current.leader in eligible and current.leader in current.isr:
            if isr_usable == current.isr:
                return None
            new = LeaderIsr(current.leader, current.leader_epoch + 1, isr_usable, self.epoch,
                            current.zk_version)
            return _StateChange(tp, new, ControllerEvent.ISR_CHANGED, removed)
        candidates = [r for r in replicas if r in isr_usable]
        if candidates:
            leader, isr = candidates[0], isr_usable
        elif (unclean_asked or self._unclean_topics.get(tp[0], self.config.unclean_leader_election)
              ) and unclean_pool:
            leader, isr = unclean_pool[0], (unclean_pool[0],)
        else:
            isr = isr_usable or kept
            if current.leader == NO_LEADER and isr == current.isr:
                return None
            new = LeaderIsr(NO_LEADER, current.leader_epoch + 1, isr, self.epoch,
                            current.zk_version)
            return _StateChange(tp, new, cause, removed)
        new = LeaderIsr(leader, current.leader_epoch + 1, isr, self.epoch, current.zk_version)
        return _StateChange(tp, new, ControllerEvent.LEADER_ELECTED, removed)

    def _reconcile(self, tps: Iterable[TP], cause: ControllerEvent, fresh: bool = False) -> None:
        """Plan and write new states for ``tps`` (``fresh``: their cached states were just read).

        Leadership goes first (Kafka's order: OfflinePartition → OnlinePartition, then
        OfflineReplica): when some partitions need a new leader, the partitions that only lose
        ISR members are re-planned after the leaders' writes and requests have gone out, so a
        failover's critical path carries only the elections. A pending ISR removal that the
        cached state does not call for is checked against a fresh read (the cache may miss a
        leader's ISR expansion); a fresh state that does not call for it settles it.
        """
        changes: list[_StateChange] = []
        reads: list[TP] = []
        for tp in tps:
            if tp in self._busy:
                self._dirty[tp] = cause
                continue
            if tp not in self.leader_isr:
                self._isr_removals.pop(tp, None)  # no state: the plan creates one (§B)
            change = self._plan(tp, cause)
            if change is None and tp in self._isr_removals:
                if fresh or tp[0] in self.topics_deleting:
                    del self._isr_removals[tp]
                    change = self._plan(tp, cause)
                else:
                    reads.append(tp)
                    self._stale_causes[tp] = cause
            if change is not None:
                changes.append(change)
        if reads:
            self._read_states(reads)
        leaders = [c for c in changes if c.cause is not ControllerEvent.ISR_CHANGED
                   or c.new.zk_version < 0]
        if leaders and len(leaders) < len(changes):
            for change in changes:
                if change.cause is ControllerEvent.ISR_CHANGED and change.new.zk_version >= 0:
                    self._deferred[change.tp] = cause
            changes = leaders
        self._submit(changes)

    def _isr_epochs(self, tp: TP, isr: Sequence[int]) -> tuple[int, ...]:
        """The incarnation of each ISR member a state this controller writes vouches for
        (KIP-903's ISR with broker epochs; spec/controller.md "Unclean shutdowns"): a live
        member's registration as this controller read it (a restart it has not read yet shows
        as another epoch at the next failover), a member that is not live the one the current
        state vouched for, else the last this controller saw registered (-1: none known)."""
        known = self.leader_isr.get(tp)
        epochs: list[int] = []
        for replica in isr:
            broker = self.live_brokers.get(replica)
            if broker is not None:
                epochs.append(broker.epoch)
                continue
            vouched = None if known is None else known.vouched_epoch(replica)
            epochs.append(vouched if vouched is not None
                          else self._seen_epochs.get(replica, -1))
        return tuple(epochs)

    def _with_epochs(self, change: _StateChange) -> _StateChange:
        # built directly: ``dataclasses.replace`` twice per partition was a tenth of a
        # failover's planning at 100,000 partitions
        new = change.new
        return _StateChange(change.tp, LeaderIsr(
            new.leader, new.leader_epoch, new.isr, new.controller_epoch, new.zk_version,
            new.mzxid, self._isr_epochs(change.tp, new.isr)), change.cause, change.removed)

    def _submit(self, changes: Sequence[_StateChange]) -> None:
        size = self.config.partitions_per_write_max
        changes = [self._with_epochs(change) for change in changes]
        for start in range(0, len(changes), size):
            batch = tuple(changes[start:start + size])
            ops: list[Op] = []
            ensure: list[str] = []
            for change in batch:
                self._busy.add(change.tp)
                new = change.new
                data = encode_partition_state(new.leader, new.leader_epoch, new.isr,
                                              new.controller_epoch, new.isr_broker_epochs)
                path = partition_state_path(*change.tp)
                if new.zk_version < 0:
                    ensure += [partitions_path(change.tp[0]), partition_path(*change.tp)]
                    ops.append(CreateOp(path, data))
                else:
                    ops.append(SetOp(path, data, new.zk_version))
            self._write(_StateBatch(batch), ops, sorted(set(ensure)))

    def _applied(self, change: _StateChange, zk_version: int) -> None:
        tp, new = change.tp, change.new
        old = self.leader_isr.get(tp)
        assert old is None or new.leader_epoch > old.leader_epoch, "EPOCHS_MONOTONIC"
        if new.leader != NO_LEADER and (old is None or old.leader != new.leader):
            self.leader_elections += 1
        self.leader_isr[tp] = LeaderIsr(new.leader, new.leader_epoch, new.isr,
                                        new.controller_epoch, zk_version,
                                        isr_broker_epochs=new.isr_broker_epochs)
        self._settle_unclean(tp, new)
        state = self.partition_states.get(tp, PartitionState.NON_EXISTENT)
        event = change.cause
        if event is ControllerEvent.ISR_CHANGED and state is PartitionState.NEW:
            event = ControllerEvent.LEADER_ELECTED
        self._set_partition(tp, event, leader=new.leader, leader_epoch=new.leader_epoch,
                            isr=new.isr, zk_version=zk_version,
                            controller=self.config.broker_id,
                            controller_epoch=new.controller_epoch)
        self._queue_leader_and_isr(tp)
        self._um_partitions.add(tp)

    def _settle_unclean(self, tp: TP, state: LeaderIsr) -> None:
        """``state`` is ``tp``'s state now: a marked member out of its ISR is no longer marked,
        and a marked leader (every member was marked: the last replica standing) was vouched
        for again by the write that elected it."""
        marked = self._unclean.get(tp)
        if marked is None:
            return
        if state.leader in marked:
            marked.clear()
        else:
            marked.intersection_update(state.isr)
        if not marked:
            del self._unclean[tp]

    # --- requests ----------------------------------------------------------------------------

    def _queue_leader_and_isr(self, tp: TP, brokers: Iterable[int] | None = None) -> None:
        state = self.leader_isr.get(tp)
        assignment = self.topics.get(tp[0])
        if state is None or assignment is None or tp[1] not in assignment.partitions:
            return
        replicas = assignment.partitions[tp[1]]
        targets = [r for r in replicas if self._usable(tp, r)] if brokers is None else brokers
        target = self.reassignments.get(tp)
        shared: LeaderAndIsrPartitionState | None = None
        for broker_id in targets:
            if broker_id not in self.live_brokers:
                continue
            replica_state = self.replica_states.get((tp, broker_id), ReplicaState.NON_EXISTENT)
            is_new = replica_state is ReplicaState.NEW
            log_dir = None if target is None else target.log_dir_of(broker_id)
            if shared is None or is_new or log_dir is not None:
                partition_state = LeaderAndIsrPartitionState(
                    topic=tp[0],
                    partition=tp[1],
                    controller_epoch=state.controller_epoch,
                    leader=state.leader,
                    leader_epoch=state.leader_epoch,
                    isr=state.isr,
                    zk_version=state.zk_version,
                    replicas=replicas,
                    adding_replicas=assignment.adding_replicas.get(tp[1], ()),
                    removing_replicas=assignment.removing_replicas.get(tp[1], ()),
                    is_new=is_new,
                    preferred_log_dir=log_dir,
                )
                if not is_new and log_dir is None:
                    shared = partition_state
            else:
                partition_state = shared
            self._lair.setdefault(broker_id, {})[tp] = partition_state
            if is_new:
                self._set_replica(tp, broker_id, ControllerEvent.LEADER_ELECTED)

    def _broker_epoch(self, broker_id: int) -> int:
        broker = self.live_brokers.get(broker_id)
        return UNKNOWN_BROKER_EPOCH if broker is None else broker.epoch

    def _endpoint(self, broker_id: int) -> BrokerEndpoint:
        broker = self.live_brokers[broker_id]
        return BrokerEndpoint(broker.broker_id, broker.host, broker.port, broker.rack,
                              broker.endpoints)

    def _um_state(self, tp: TP) -> UpdateMetadataPartitionState | None:
        state = self.leader_isr.get(tp)
        replicas = self._assigned(tp)
        if state is None or not replicas:
            return None
        offline = tuple(r for r in replicas if not self._usable(tp, r))
        leader = LEADER_DURING_DELETE if tp[0] in self.topics_deleting else state.leader
        return UpdateMetadataPartitionState(tp[0], tp[1], state.controller_epoch, leader,
                                            state.leader_epoch, state.isr, state.zk_version,
                                            replicas, offline)

    def _maybe_flush(self) -> None:
        """Send the queued requests once no write or read is outstanding; then plan the
        deferred ISR-only changes.

        A queued LeaderAndIsr state of a partition whose change is deferred (a broker that
        bounced is sent its replicas while the partitions that only drop it from the ISR wait
        behind the elections) is held back, not sent: that state is about to be replaced by a
        new leader epoch, and a receiver without state for the partition (the restarted broker)
        would follow it. Held states go out, refreshed from the cache, with the first flush
        after the change is written (or found unnecessary). So is the state of a partition
        whose re-read went unanswered (the connection went while a write of it was of unknown
        outcome): Kafka's controller waits for the connection and retries its write
        (``retryRequestsUntilConnected``) before any request goes out, so it never sends a
        state its pending ISR removal replaces; here the revalidation after the reconnection
        re-reads everything and resends (fuzz seed 11302).
        """
        if self._pending or self._reads_outstanding:
            return
        self._release_held()
        controller_id = self.config.broker_id
        for broker_id in sorted(self._lair):
            states = self._lair[broker_id]
            held = {tp: states.pop(tp).is_new for tp in sorted(states)
                    if tp in self._deferred or tp in self._unconfirmed}
            if held:
                self._held.setdefault(broker_id, {}).update(held)
            if broker_id not in self.live_brokers or not states:
                continue
            leaders = sorted({s.leader for s in states.values() if s.leader in self.live_brokers})
            self._effects.append(SendRequest(broker_id, LeaderAndIsrRequest(
                controller_id, self.epoch, self._broker_epoch(broker_id),
                tuple(states[tp] for tp in sorted(states)),
                tuple(self._endpoint(b) for b in leaders),
                is_init=self._init_flush,
            )))
        if self._lair:
            self._init_flush = False
        self._lair = {}
        for broker_id in sorted(self._stop):
            partitions = self._stop[broker_id]
            if broker_id in self.live_brokers and partitions:
                self._effects.append(SendRequest(broker_id, StopReplicaRequest(
                    controller_id, self.epoch, self._broker_epoch(broker_id),
                    tuple(partitions[tp] for tp in sorted(partitions)),
                )))
        self._stop = {}
        if self._um_partitions or self._um_full_brokers or self._um_broadcast:
            endpoints = tuple(self._endpoint(b) for b in sorted(self.live_brokers))
            changed = [s for tp in sorted(self._um_partitions) if (s := self._um_state(tp))]
            full: list[UpdateMetadataPartitionState] | None = None
            for broker_id in sorted(self.live_brokers):
                um_states = changed
                if broker_id in self._um_full_brokers:
                    if full is None:
                        full = [s for tp in self._all_tps() if (s := self._um_state(tp))]
                    um_states = full
                if not um_states and not self._um_broadcast:
                    continue
                self._effects.append(SendRequest(broker_id, UpdateMetadataRequest(
                    controller_id, self.epoch, self._broker_epoch(broker_id), endpoints,
                    tuple(um_states),
                )))
        self._um_partitions = set()
        self._um_full_brokers = set()
        self._um_broadcast = False
        if self._deferred:
            # The deferred ISR-only changes go in rounds of DEFERRED_WRITES_PER_ROUND multis,
            # the next round planned when this one's writes are done: planning all of them in
            # this step (67,000 at a 100,000-partition failover, about a second) kept the
            # LeaderAndIsr of the elections just flushed from leaving until the step ended.
            budget = DEFERRED_WRITES_PER_ROUND * self.config.partitions_per_write_max
            while self._deferred and not self._pending and not self._reads_outstanding:
                round_ = dict(itertools.islice(self._deferred.items(), budget))
                for tp in round_:
                    del self._deferred[tp]
                groups: dict[ControllerEvent, list[TP]] = {}
                for tp, cause in round_.items():
                    groups.setdefault(cause, []).append(tp)
                for cause, group in groups.items():
                    self._reconcile(sorted(group), cause)
            if self._held and not self._pending and not self._reads_outstanding:
                self._maybe_flush()  # nothing to write after all: send what was held

    def _release_held(self) -> None:
        """Queue the held states again, built from the current cache and assignment (a state
        queued since, for a written change, is newer and kept); ``is_new`` is kept."""
        held, self._held = self._held, {}
        for broker_id, partitions in held.items():
            for tp, is_new in partitions.items():
                if broker_id not in self._assigned(tp) or tp[0] in self.topics_deleting:
                    continue
                if tp not in self._lair.get(broker_id, {}):
                    self._queue_leader_and_isr(tp, [broker_id])
                fresh = self._lair.get(broker_id, {}).get(tp)
                if fresh is not None and is_new and not fresh.is_new:
                    self._lair[broker_id][tp] = replace(fresh, is_new=True)

    # --- writes completing -------------------------------------------------------------------

    def _on_write_completed(self, event: WriteCompleted) -> None:
        pending = self._pending.pop(event.write_id, None)
        if pending is None:
            return  # issued before a resynchronisation reset this core: its effect is re-read
        results = event.results
        if results is None:
            # Outcome unknown (connection lost): re-read what it touched; the epoch check
            # keeps a late application harmless.
            self._release(pending)
            tps = self._tps_of(pending)
            if tps:
                self._read_states(tps)
            return
        failure = multi_error(results)
        if failure is not None and failure[0] == 0:
            self._resign(ControllerEvent.ZK_WRITE_FENCED)
            return
        if isinstance(pending, _StateBatch):
            self._on_state_batch(pending, results, failure)
        elif isinstance(pending, _ReassignWrite):
            self._on_reassign_write(pending, results, failure)
            # The topic znode is free again for the topic's other reassigned partitions.
            for tp in sorted(self.reassignments):
                if tp[0] == pending.tp[0] and tp != pending.tp and self.active:
                    self._advance_reassignment(tp)
        elif isinstance(pending, _Deletes):
            self._on_deletes(pending, failure)
        else:
            if failure is not None and not isinstance(failure[1], NoNodeError):
                raise failure[1]
            self._reassign_node_written()

    def _release(self, pending: _Pending) -> None:
        if isinstance(pending, _ReassignNode) or (
            isinstance(pending, _Deletes) and pending.reassign_node
        ):
            self._reassign_node_writing = False
        for tp in self._tps_of(pending):
            self._busy.discard(tp)

    @staticmethod
    def _tps_of(pending: _Pending) -> list[TP]:
        if isinstance(pending, _StateBatch):
            return [change.tp for change in pending.changes]
        if isinstance(pending, _ReassignWrite):
            return [pending.tp]
        return []

    def _read_states(self, tps: Sequence[TP]) -> None:
        self._reads_outstanding += 1
        self._unconfirmed.update(tps)
        self._effects.append(ReadPartitionStates(tuple(tps)))

    def _on_state_batch(self, pending: _StateBatch,
                        results: Sequence[OpResult],
                        failure: tuple[int, CoordinatorError] | None) -> None:
        if failure is None:
            for change, result in zip(pending.changes, results[1:], strict=True):
                self._busy.discard(change.tp)
                version = result.stat.version if isinstance(result, SetResult) else 0
                self._applied(change, version)
                if change.removed:
                    self._isr_removed(change)
            self._after_release([c.tp for c in pending.changes])
            return
        index, error = failure
        stale = pending.changes[index - 1]
        if not isinstance(error, BadVersionError | NoNodeError | NodeExistsError):
            raise error
        for change in pending.changes:
            self._busy.discard(change.tp)
        self._dirty.pop(stale.tp, None)
        self._stale_causes[stale.tp] = stale.cause
        rest = [c for c in pending.changes if c.tp != stale.tp]
        self._submit(rest)
        self._read_states([stale.tp])

    def _isr_removed(self, change: _StateChange) -> None:
        """``change`` landed: the ISR removals it planned are done."""
        removals = self._isr_removals.get(change.tp)
        if removals is not None:
            removals -= change.removed
            if not removals:
                del self._isr_removals[change.tp]
        if change.new.leader == NO_LEADER:
            # The last ISR member was kept without leadership: it may lead now if it is live.
            self._dirty.setdefault(change.tp, change.cause)

    def _after_release(self, tps: Iterable[TP]) -> None:
        again: dict[ControllerEvent, list[TP]] = {}
        for tp in tps:
            cause = self._dirty.pop(tp, None)
            if cause is not None:
                again.setdefault(cause, []).append(tp)
        for cause, group in again.items():
            self._reconcile(group, cause)
        for tp in tps:
            if tp in self.reassignments:
                self._advance_reassignment(tp)

    def _on_states_read(self, states: Mapping[TP, LeaderIsr | None]) -> None:
        self._reads_outstanding -= 1
        assert self._reads_outstanding >= 0
        # A partition answered is confirmed: its requests queued from the cache before the
        # read are rebuilt from the fresh state when next flushed (held, then released).
        for tp in states:
            self._unconfirmed.discard(tp)
            for broker_id, queued in self._lair.items():
                state_queued = queued.pop(tp, None)
                if state_queued is not None:
                    held = self._held.setdefault(broker_id, {})
                    held[tp] = held.get(tp, False) or state_queued.is_new
        for tp, state in states.items():
            if state is None:
                self.leader_isr.pop(tp, None)
            elif state.controller_epoch > self.epoch:
                self._resign(ControllerEvent.CONTROLLER_RESIGNED)
                return
            else:
                self.leader_isr[tp] = state
                self._settle_unclean(tp, state)
        groups: dict[ControllerEvent, list[TP]] = {}
        for tp in sorted(states):
            cause = self._stale_causes.pop(tp, ControllerEvent.BROKER_FAILED)
            groups.setdefault(cause, []).append(tp)
        for cause, group in groups.items():
            self._reconcile(group, cause, fresh=True)
        for tp in sorted(states):
            if tp in self.reassignments:
                self._advance_reassignment(tp)

    # --- brokers (§A) ------------------------------------------------------------------------

    def _on_brokers(self, brokers: Mapping[int, BrokerRegistration]) -> None:
        old = self.live_brokers
        bounced = {b for b in brokers if b in old and brokers[b].epoch != old[b].epoch}
        failed = sorted((set(old) - set(brokers)) | bounced)
        started = sorted((set(brokers) - set(old)) | bounced)
        if not failed and not started:
            self.live_brokers = dict(brokers)
            return
        # KIP-966: a member registering after an unclean shutdown, or after an incarnation
        # this controller never saw, is marked in each partition whose ISR holds it.
        for broker_id in started:
            for tp in self._all_tps():
                known = self.leader_isr.get(tp)
                if (known is not None and broker_id in known.isr
                        and self._restarted_uncleanly(tp, brokers[broker_id])):
                    self._mark_unclean(tp, broker_id)
        for broker_id, broker in brokers.items():
            self._seen_epochs[broker_id] = broker.epoch
        changed = set(failed) | set(started)
        affected = [tp for tp in self._all_tps()
                    if not changed.isdisjoint(self._assigned(tp))]
        # A broker that restarted between two reads (bounced) lost its in-memory state and its
        # unflushed records: it is failed first, then started (Kafka does the same). Failing
        # records its pending ISR removals, which every plan honours until they are written.
        for broker_id in failed:
            self._trace(ControllerEvent.BROKER_FAILED, f"broker-{broker_id}",
                        ReplicaState.ONLINE.name, ReplicaState.OFFLINE.name, broker=broker_id)
            self.offline_replicas.pop(broker_id, None)
            self._lair.pop(broker_id, None)
            self._held.pop(broker_id, None)
            self._stop.pop(broker_id, None)
            replica_states = self.replica_states
            for tp in affected:
                state = replica_states.get((tp, broker_id))
                if state is not None:
                    after = REPLICA_TRANSITIONS.get((state, ControllerEvent.BROKER_FAILED))
                    if after is not None:
                        replica_states[(tp, broker_id)] = after
                if tp in self.leader_isr and broker_id in self._assigned(tp):
                    self._isr_removals.setdefault(tp, set()).add(broker_id)
        self.live_brokers = dict(brokers)
        self._um_broadcast = True
        for broker_id in started:
            self._trace(ControllerEvent.BROKER_STARTED, f"broker-{broker_id}",
                        ReplicaState.OFFLINE.name, ReplicaState.ONLINE.name, broker=broker_id,
                        broker_epoch=brokers[broker_id].epoch)
            self.offline_replicas.pop(broker_id, None)
            self._um_full_brokers.add(broker_id)
        for tp in affected:
            if tp[0] in self.topics_deleting:
                # Kafka's onBrokerStartup leaves the replicas of topics queued for deletion
                # out (deletion resumes below): a LeaderAndIsr would re-create a replica the
                # broker already deleted, which no StopReplica then deletes again.
                continue
            for broker_id in started:
                if broker_id in self._assigned(tp):
                    state = self.replica_states.get((tp, broker_id), ReplicaState.NON_EXISTENT)
                    if (state, ControllerEvent.BROKER_STARTED) in REPLICA_TRANSITIONS:
                        self._set_replica(tp, broker_id, ControllerEvent.BROKER_STARTED)
                    self._queue_leader_and_isr(tp, [broker_id])
        self._reconcile(affected, ControllerEvent.BROKER_FAILED)
        for topic in sorted(self.topics_deleting):
            self._start_topic_deletion(topic)
        for tp in sorted(self.reassignments):
            self._advance_reassignment(tp)

    # --- topics (§B) -------------------------------------------------------------------------

    def _on_topics(self, event: TopicsRead) -> None:
        for topic in sorted(set(self.topics) - event.present):
            self._forget_topic(topic)
        new_tps: list[TP] = []
        for topic, assignment in sorted(event.assignments.items()):
            if topic not in event.present:
                continue
            known = self.topics.get(topic)
            if known is None:
                added = sorted(assignment.partitions)
                self.topics[topic] = assignment
            else:
                added = sorted(set(assignment.partitions) - set(known.partitions))
                merged = dict(known.partitions)
                for partition in added:
                    merged[partition] = assignment.partitions[partition]
                self.topics[topic] = TopicAssignment(merged, known.adding_replicas,
                                                     known.removing_replicas)
            for partition in added:
                tp = (topic, partition)
                state = event.partition_states.get(tp)
                if state is not None:
                    self.leader_isr[tp] = state
                self._set_partition(tp, ControllerEvent.TOPIC_CREATED,
                                    replicas=assignment.partitions[partition])
                for replica in assignment.partitions[partition]:
                    self._set_replica(tp, replica, ControllerEvent.TOPIC_CREATED)
                new_tps.append(tp)
        for tp in new_tps:
            written = self.leader_isr.get(tp)
            if written is not None:
                # Initialised by a previous controller already: as at a failover, its replicas
                # are not new to their brokers and its state is what ZooKeeper says.
                usable = written.leader != NO_LEADER and self._usable(tp, written.leader)
                self.partition_states[tp] = (PartitionState.ONLINE if usable
                                             else PartitionState.OFFLINE)
                for replica in self._assigned(tp):
                    self.replica_states[(tp, replica)] = (
                        ReplicaState.ONLINE if replica in self.live_brokers
                        else ReplicaState.OFFLINE)
                self._queue_leader_and_isr(tp)
                self._um_partitions.add(tp)
        self._reconcile(new_tps, ControllerEvent.BROKER_FAILED)

    def _forget_topic(self, topic: str) -> None:
        for tp in [tp for tp in self.partition_states if tp[0] == topic]:
            self.partition_states.pop(tp, None)
            self.leader_isr.pop(tp, None)
            self.reassignments.pop(tp, None)
            self.reassignment_phases.pop(tp, None)
            self._isr_removals.pop(tp, None)
            self._unclean.pop(tp, None)
            self._vouched_zxid.pop(tp, None)
        for key in [key for key in self.replica_states if key[0][0] == topic]:
            del self.replica_states[key]
        for tps in self.offline_replicas.values():
            tps.difference_update({tp for tp in tps if tp[0] == topic})
        self.topics.pop(topic, None)
        self.topics_deleting.discard(topic)

    def _on_delete_topics(self, topics: Sequence[str]) -> None:
        for topic in sorted(set(topics)):
            if topic not in self.topics:
                self._write(_Deletes((delete_topic_path(topic),)),
                            [DeleteOp(delete_topic_path(topic))])
                continue
            if topic in self.topics_deleting:
                continue
            self.topics_deleting.add(topic)
            for tp in [tp for tp in self.reassignments if tp[0] == topic]:
                del self.reassignments[tp]
                self.reassignment_phases.pop(tp, None)
                self._write_reassign_node()
            for partition in self.topics[topic].partitions:
                self._um_partitions.add((topic, partition))
            self._start_topic_deletion(topic)

    def _start_topic_deletion(self, topic: str) -> None:
        assignment = self.topics[topic]
        for partition, replicas in sorted(assignment.partitions.items()):
            tp = (topic, partition)
            for replica in replicas:
                current = self.replica_states.get((tp, replica), ReplicaState.NON_EXISTENT)
                if current in (ReplicaState.DELETION_STARTED, ReplicaState.DELETION_SUCCESSFUL):
                    continue
                if replica not in self.live_brokers:
                    if current is not ReplicaState.DELETION_INELIGIBLE:
                        self.replica_states[(tp, replica)] = ReplicaState.DELETION_INELIGIBLE
                    continue
                if current is ReplicaState.NON_EXISTENT:
                    self.replica_states[(tp, replica)] = ReplicaState.OFFLINE
                self._set_replica(tp, replica, ControllerEvent.TOPIC_DELETED)
                # Kafka's EpochDuringDelete, not the cached leader epoch: an election written
                # after it was read (a new controller plans elections before it reads the
                # pending deletions) would have the replica refuse it, FENCED_LEADER_EPOCH,
                # and the replica would stay DELETION_INELIGIBLE on a live broker.
                self._stop.setdefault(replica, {})[tp] = StopReplicaPartition(
                    topic, partition, EPOCH_DURING_DELETE, True
                )
        self._maybe_finish_deletion(topic)

    def _maybe_finish_deletion(self, topic: str) -> None:
        assignment = self.topics.get(topic)
        if assignment is None or topic not in self.topics_deleting:
            return
        for partition, replicas in assignment.partitions.items():
            for replica in replicas:
                state = self.replica_states.get(((topic, partition), replica))
                if state is not ReplicaState.DELETION_SUCCESSFUL:
                    return
        paths: list[str] = []
        for partition in sorted(assignment.partitions):
            paths += [partition_state_path(topic, partition), partition_path(topic, partition)]
        # Kafka's controller removes the topic's configs with it (a NoNode is dropped)
        paths += [partitions_path(topic), topic_path(topic), topic_config_path(topic),
                  delete_topic_path(topic)]
        self._write(_Deletes(tuple(paths), topic), [DeleteOp(path) for path in paths])

    def _on_deletes(self, pending: _Deletes, failure: tuple[int, CoordinatorError] | None) -> None:
        if failure is not None:
            index, error = failure
            if not isinstance(error, NoNodeError):
                raise error
            rest = tuple(p for i, p in enumerate(pending.paths) if i != index - 1)
            if rest:
                self._write(_Deletes(rest, pending.topic, pending.reassign_node),
                            [DeleteOp(p) for p in rest])
                return
        if pending.reassign_node:
            self._reassign_node_written()
        if pending.topic is not None and pending.topic in self.topics:
            topic = pending.topic
            for partition in sorted(self.topics[topic].partitions):
                tp = (topic, partition)
                self._set_partition(tp, ControllerEvent.TOPIC_DELETED)
                for replica in self.topics[topic].partitions[partition]:
                    if self.replica_states.get((tp, replica)) is \
                            ReplicaState.DELETION_SUCCESSFUL:
                        self._set_replica(tp, replica, ControllerEvent.TOPIC_DELETED)
            self._forget_topic(topic)

    def _delete_nodes(self, parent: str, names: Iterable[str]) -> None:
        paths = tuple(f"{parent}/{name}" for name in sorted(names))
        if paths:
            self._write(_Deletes(paths), [DeleteOp(path) for path in paths])

    # --- ISR changes and log dirs ------------------------------------------------------------

    def _on_isr_changes(self, event: IsrChangesRead) -> None:
        self._delete_nodes(ISR_CHANGE_NOTIFICATION_PATH, event.notifications)
        changed: list[TP] = []
        for tp, state in sorted(event.partition_states.items()):
            current = self.leader_isr.get(tp)
            if tp[0] not in self.topics or (current is not None
                                            and state.zk_version <= current.zk_version):
                continue
            self.leader_isr[tp] = state
            self._settle_unclean(tp, state)
            self._um_partitions.add(tp)
            changed.append(tp)
            if self.partition_states.get(tp) in (PartitionState.ONLINE, PartitionState.OFFLINE):
                self._set_partition(tp, ControllerEvent.ISR_CHANGED, isr=state.isr,
                                    zk_version=state.zk_version)
        for tp in changed:
            if tp in self.reassignments:
                self._advance_reassignment(tp)

    def _on_log_dir_events(self, notifications: Mapping[str, int]) -> None:
        self._delete_nodes(LOG_DIR_EVENT_NOTIFICATION_PATH, notifications)
        for broker_id in sorted(set(notifications.values())):
            if broker_id not in self.live_brokers:
                continue
            for tp in self._all_tps():
                if broker_id in self._assigned(tp) and tp in self.leader_isr:
                    self._queue_leader_and_isr(tp, [broker_id])

    def _on_response(self, event: ResponseReceived) -> None:
        response, request, broker_id = event.response, event.request, event.broker_id
        if isinstance(request, StopReplicaRequest):
            if request.broker_epoch != self._broker_epoch(broker_id):
                # sent to an earlier incarnation (Kafka drops a restarted broker's in-flight
                # requests with its old channel): the deletion restarted on the new one, whose
                # own answer decides
                return
            for partition in request.partitions:
                tp = (partition.topic, partition.partition)
                state = self.replica_states.get((tp, broker_id))
                if state is not ReplicaState.DELETION_STARTED:
                    continue
                error = None if response is None else (
                    response.error_code or response.partition_errors.get(tp, ERROR_NONE)
                )
                if error == ERROR_NONE:
                    self._set_replica(tp, broker_id, ControllerEvent.TOPIC_DELETED)
                else:
                    self.replica_states[(tp, broker_id)] = ReplicaState.DELETION_INELIGIBLE
            for topic in sorted({p.topic for p in request.partitions}):
                self._maybe_finish_deletion(topic)
            return
        if not isinstance(request, LeaderAndIsrRequest) or response is None:
            return
        if response.error_code != ERROR_NONE or broker_id not in self.live_brokers:
            return
        failed: list[TP] = []
        for tp, error in sorted(response.partition_errors.items()):
            if error != ERROR_KAFKA_STORAGE_ERROR or tp not in self.leader_isr:
                continue
            offline = self.offline_replicas.setdefault(broker_id, set())
            if tp in offline:
                continue
            offline.add(tp)
            before = self.replica_states.get((tp, broker_id), ReplicaState.NON_EXISTENT)
            if (before, ControllerEvent.LOG_DIR_FAILED) in REPLICA_TRANSITIONS:
                self._set_replica(tp, broker_id, ControllerEvent.LOG_DIR_FAILED)
            self._trace(ControllerEvent.LOG_DIR_FAILED, f"{tp_name(tp)}@{broker_id}",
                        before.name, ReplicaState.OFFLINE.name, broker=broker_id)
            self._um_partitions.add(tp)
            failed.append(tp)
        self._reconcile(failed, ControllerEvent.LOG_DIR_FAILED)

    # --- reassignment (§F) -------------------------------------------------------------------

    def _on_topic_configs(self, unclean: Mapping[str, bool]) -> None:
        """New per-topic ``unclean.leader.election.enable`` values; a topic that now allows
        unclean elections gets one for its leaderless partitions at once (Kafka's
        ``enableTopicUncleanLeaderElection``)."""
        before = self._unclean_topics
        self._unclean_topics = dict(unclean)
        enabled = {
            topic for topic in self.topics
            if self._unclean_topics.get(topic, self.config.unclean_leader_election)
            and not before.get(topic, self.config.unclean_leader_election)
        }
        leaderless = [tp for tp, state in sorted(self.leader_isr.items())
                      if tp[0] in enabled and state.leader == NO_LEADER]
        if leaderless:
            self._reconcile(leaderless, ControllerEvent.LEADER_ELECTED)

    def _on_preferred_election(self, partitions: Sequence[TP]) -> None:
        """Elect each known partition's preferred replica, then delete the request's znode
        (Kafka's controller does both; a partition already led by it is left alone)."""
        if not partitions:
            return
        wanted = sorted({tp for tp in partitions
                         if self._assigned(tp) and tp[0] not in self.topics_deleting})
        self._preferred.update(wanted)
        self._write(_Deletes((PREFERRED_REPLICA_ELECTION_PATH,)),
                    [DeleteOp(PREFERRED_REPLICA_ELECTION_PATH)])
        self._reconcile(wanted, ControllerEvent.LEADER_ELECTED)

    def _on_unclean_election(self, event: UncleanElectionRequested) -> None:
        """ElectLeaders UNCLEAN (Kafka's ``onReplicaElection`` with an admin-triggered
        ``OfflinePartitionLeaderElectionStrategy(allowUnclean = true)``): a partition with a
        live leader needs no election; the others are planned with the ISR rule waived once, and
        answered when their write has landed (:meth:`_settle_elections`)."""
        wait = _ElectionWait({}, set())
        wanted: list[TP] = []
        for tp in dict.fromkeys(event.partitions):
            current = self.leader_isr.get(tp)
            if not self._assigned(tp) or tp[0] in self.topics_deleting or current is None:
                wait.results[tp] = ERROR_UNKNOWN_TOPIC_OR_PARTITION
            elif current.leader != NO_LEADER and self._usable(tp, current.leader):
                wait.results[tp] = ERROR_ELECTION_NOT_NEEDED
            else:
                wait.waiting.add(tp)
                wanted.append(tp)
        self._elections[event.request_id] = wait
        self._unclean_requested.update(wanted)
        self._reconcile(sorted(wanted), ControllerEvent.LEADER_ELECTED)

    def _settle_elections(self) -> None:
        """Answer each unclean election whose partitions are all settled: planned, and no write
        or re-read of them outstanding. A partition then has a live leader (NONE) or none could
        be elected (ELIGIBLE_LEADERS_NOT_AVAILABLE). When this core is not active, whatever
        is unanswered gets NOT_CONTROLLER."""
        for request_id, wait in list(self._elections.items()):
            for tp in sorted(wait.waiting):
                if self.active and (tp in self._unclean_requested or tp in self._busy
                                    or tp in self._dirty or tp in self._stale_causes
                                    or tp in self._deferred):
                    continue
                wait.waiting.discard(tp)
                self._unclean_requested.discard(tp)
                current = self.leader_isr.get(tp)
                if not self.active:
                    wait.results[tp] = ERROR_NOT_CONTROLLER
                elif not self._assigned(tp) or tp[0] in self.topics_deleting or current is None:
                    wait.results[tp] = ERROR_UNKNOWN_TOPIC_OR_PARTITION
                elif current.leader != NO_LEADER and self._usable(tp, current.leader):
                    wait.results[tp] = ERROR_NONE
                else:
                    wait.results[tp] = ERROR_ELIGIBLE_LEADERS_NOT_AVAILABLE
            if not wait.waiting:
                del self._elections[request_id]
                self._effects.append(ElectionAnswered(request_id, tuple(
                    sorted(wait.results.items()))))

    def _on_reassignment(self, targets: Sequence[ReassignmentTarget]) -> None:
        wanted: dict[TP, ReassignmentTarget] = {}
        dropped = False
        for target in targets:
            tp = (target.topic, target.partition)
            if not self._assigned(tp) or target.topic in self.topics_deleting:
                dropped = True  # unknown partition: Kafka drops it from the request
                continue
            wanted[tp] = target
        for tp in list(self.reassignments):
            if tp not in wanted:
                revert = self._reverting(tp)
                if revert is None:
                    del self.reassignments[tp]
                    self.reassignment_phases.pop(tp, None)
                else:
                    # KIP-455 cancel of a started reassignment: back to the original replicas
                    wanted[tp] = revert
                    dropped = True  # the node is rewritten with the revert as its target
        for tp, target in wanted.items():
            known = self.reassignments.get(tp)
            if known is None:
                self.reassignments[tp] = target
                self.reassignment_phases[tp] = ReassignmentPhase.NONE
            elif known.replicas != target.replicas and target == self._reverting(tp):
                self.reassignments[tp] = target  # a revert keeps the phase it has reached
        if dropped:
            self._write_reassign_node()
        for tp in sorted(wanted):
            self._advance_reassignment(tp)

    def _reverting(self, tp: TP) -> ReassignmentTarget | None:
        """The revert of ``tp``'s reassignment if it has started (its topic znode has adding or
        removing replicas): the original replicas as the target (Kafka's cancellation, KIP-455:
        the adding replicas are stopped and deleted, the original ones kept); ``None`` when it
        has not started (dropping it is enough)."""
        view = self._view(tp)
        if view is None or tp[0] in self.topics_deleting or not (view.adding or view.removing):
            return None
        return ReassignmentTarget(tp[0], tp[1], original_replicas(view))

    def _revert_orphans(self) -> None:
        """Started reassignments absent from ``/admin/reassign_partitions`` were cancelled
        (the node keeps every partition until it completes): revert them."""
        orphans = [tp for tp in self._all_tps()
                   if tp not in self.reassignments and self._reverting(tp) is not None]
        if not orphans:
            return
        for tp in orphans:
            revert = self._reverting(tp)
            assert revert is not None
            self.reassignments[tp] = revert
            self.reassignment_phases[tp] = ReassignmentPhase.NONE
        self._write_reassign_node()
        for tp in orphans:
            self._advance_reassignment(tp)

    def _view(self, tp: TP) -> PartitionView | None:
        state = self.leader_isr.get(tp)
        assignment = self.topics.get(tp[0])
        if state is None or assignment is None:
            return None
        return PartitionView(
            assignment.partitions[tp[1]],
            assignment.adding_replicas.get(tp[1], ()),
            assignment.removing_replicas.get(tp[1], ()),
            state.isr,
            state.leader,
        )

    def _with_partition(self, topic: str, partition: int, replicas: tuple[int, ...],
                        adding: tuple[int, ...], removing: tuple[int, ...]) -> TopicAssignment:
        current = self.topics[topic]
        partitions = dict(current.partitions)
        partitions[partition] = replicas
        adding_map = {p: r for p, r in current.adding_replicas.items() if p != partition}
        removing_map = {p: r for p, r in current.removing_replicas.items() if p != partition}
        if adding:
            adding_map[partition] = adding
        if removing:
            removing_map[partition] = removing
        return TopicAssignment(partitions, adding_map, removing_map)

    def _advance_reassignment(self, tp: TP) -> None:
        target = self.reassignments.get(tp)
        view = self._view(tp)
        if (target is None or view is None or tp in self._busy or tp in self._isr_removals
                or self._barred(tp, self.leader_isr[tp].isr)):
            return  # a pending ISR removal goes first (it releases the partition when done)
        if any(isinstance(p, _ReassignWrite) and p.tp[0] == tp[0] for p in self._pending.values()):
            return  # one topic-znode write per topic at a time (the znode holds all partitions)
        phase = classify(view, target.replicas)
        state = self.leader_isr[tp]
        if phase is ReassignmentPhase.DONE:
            self._complete_reassignment(tp)
            return
        if phase is ReassignmentPhase.NONE:
            replicas, adding, removing = expanded_assignment(view, target.replicas)
            change = _StateChange(tp, LeaderIsr(state.leader, state.leader_epoch + 1, state.isr,
                                                self.epoch, state.zk_version),
                                  ControllerEvent.ISR_CHANGED)
            self._write_reassignment(_ReassignWrite(
                tp, False, self._with_partition(tp[0], tp[1], replicas, adding, removing), change
            ))
            return
        if self.reassignment_phases.get(tp) is ReassignmentPhase.NONE:
            # Resumed after a failover: AR + RAR is already written.
            self._set_phase(tp, ReassignmentEvent.REASSIGN_STARTED)
            self._set_phase(tp, ReassignmentEvent.LEADER_ELECTED)
        if not ready_to_switch(view, target.replicas):
            return
        eligible = [r for r in target.replicas if self._usable(tp, r)]
        leader, isr = switched_leader_isr(view, target.replicas, eligible)
        if leader == NO_LEADER:
            return  # no live RAR member of the ISR yet: wait for a broker or ISR change
        change = _StateChange(tp, LeaderIsr(leader, state.leader_epoch + 1, isr, self.epoch,
                                            state.zk_version), ControllerEvent.LEADER_ELECTED)
        self._write_reassignment(_ReassignWrite(
            tp, True, self._with_partition(tp[0], tp[1], target.replicas, (), ()), change
        ))

    def _write_reassignment(self, pending: _ReassignWrite) -> None:
        tp = pending.tp
        pending = replace(pending, change=self._with_epochs(pending.change))
        new = pending.change.new
        self._busy.add(tp)
        self._write(pending, [
            SetOp(topic_path(tp[0]), encode_topic(pending.assignment)),
            SetOp(partition_state_path(*tp),
                  encode_partition_state(new.leader, new.leader_epoch, new.isr,
                                         new.controller_epoch, new.isr_broker_epochs),
                  new.zk_version),
        ])

    def _on_reassign_write(self, pending: _ReassignWrite, results: Sequence[OpResult],
                           failure: tuple[int, CoordinatorError] | None) -> None:
        tp = pending.tp
        self._busy.discard(tp)
        if failure is not None:
            if not isinstance(failure[1], BadVersionError | NoNodeError):
                raise failure[1]
            self._read_states([tp])
            return
        old_replicas = self._assigned(tp)
        self.topics[tp[0]] = TopicAssignment(
            {**self.topics[tp[0]].partitions, tp[1]: pending.assignment.partitions[tp[1]]},
            {**{p: r for p, r in self.topics[tp[0]].adding_replicas.items() if p != tp[1]},
             **({tp[1]: pending.assignment.adding_replicas[tp[1]]}
                if tp[1] in pending.assignment.adding_replicas else {})},
            {**{p: r for p, r in self.topics[tp[0]].removing_replicas.items() if p != tp[1]},
             **({tp[1]: pending.assignment.removing_replicas[tp[1]]}
                if tp[1] in pending.assignment.removing_replicas else {})},
        )
        result = results[2]
        assert isinstance(result, SetResult)
        target = self.reassignments.get(tp)
        if not pending.switch and target is None:
            # cancelled while its start was being written: revert it
            target = self._reverting(tp)
            if target is not None:
                self.reassignments[tp] = target
                self._write_reassign_node()
        if not pending.switch:
            self._set_phase(tp, ReassignmentEvent.REASSIGN_STARTED)
            self._set_partition(tp, ControllerEvent.REASSIGN_STARTED, replicas=self._assigned(tp),
                                target=() if target is None else target.replicas)
            for replica in self._assigned(tp):
                if replica not in old_replicas:
                    self.replica_states[(tp, replica)] = ReplicaState.NON_EXISTENT
                    self._set_replica(tp, replica, ControllerEvent.REASSIGN_STARTED)
            self._applied(pending.change, result.stat.version)
            self._set_phase(tp, ReassignmentEvent.LEADER_ELECTED)
            self._after_release([tp])
            return
        removed = [r for r in old_replicas if r not in self._assigned(tp)]
        if self.reassignment_phases.get(tp) is ReassignmentPhase.CATCHING_UP:
            self._set_phase(tp, ReassignmentEvent.LEADER_ELECTED)
        self._applied(pending.change, result.stat.version)
        for replica in removed:
            state = self.replica_states.get((tp, replica), ReplicaState.NON_EXISTENT)
            if (state, ControllerEvent.REASSIGN_COMPLETED) in REPLICA_TRANSITIONS:
                self._set_replica(tp, replica, ControllerEvent.REASSIGN_COMPLETED)
            if replica in self.live_brokers:
                self._stop.setdefault(replica, {})[tp] = StopReplicaPartition(
                    tp[0], tp[1], pending.change.new.leader_epoch, True
                )
        if self.reassignment_phases.get(tp) is ReassignmentPhase.SWITCHED:
            self._set_phase(tp, ReassignmentEvent.REASSIGN_COMPLETED)
        self._complete_reassignment(tp)

    def _complete_reassignment(self, tp: TP) -> None:
        target = self.reassignments.get(tp)
        if target is None:
            return
        if self.reassignment_phases.get(tp) is ReassignmentPhase.REMOVING:
            self._set_phase(tp, ReassignmentEvent.REASSIGN_COMPLETED)
        # Otherwise a previous controller had already switched AR := RAR: only the admin
        # znode is left to clean, and this controller's machine never started.
        del self.reassignments[tp]
        self.reassignment_phases.pop(tp, None)
        if tp in self.partition_states:
            self._set_partition(tp, ControllerEvent.REASSIGN_COMPLETED, replicas=target.replicas)
        self._write_reassign_node()

    def _write_reassign_node(self) -> None:
        if self._reassign_node_writing:
            self._reassign_node_dirty = True
            return
        self._reassign_node_writing = True
        remaining = tuple(self.reassignments[tp] for tp in sorted(self.reassignments))
        if remaining:
            self._write(_ReassignNode(remaining),
                        [SetOp(REASSIGN_PARTITIONS_PATH, encode_reassignment(remaining))])
        else:
            self._write(_Deletes((REASSIGN_PARTITIONS_PATH,), reassign_node=True),
                        [DeleteOp(REASSIGN_PARTITIONS_PATH)])

    def _reassign_node_written(self) -> None:
        self._reassign_node_writing = False
        if self._reassign_node_dirty:
            self._reassign_node_dirty = False
            self._write_reassign_node()
