"""Controller-to-broker requests and their responses, as frozen dataclasses.

Why: the controller core decides; the broker's transport puts these on the wire as Kafka's
LeaderAndIsr (4), StopReplica (5) and UpdateMetadata (6) and hands back per-partition error codes.
Field names follow the Kafka schemas (and the design V3 ``LeaderAndISRRequest``), so the broker's
conversion is a rename, not a decision.

This module is sans-IO.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .znodes import ListenerEndpoint

__sans_io__ = True

#: Kafka error codes the controller reads in responses.
ERROR_NONE = 0
ERROR_STALE_CONTROLLER_EPOCH = 11
ERROR_KAFKA_STORAGE_ERROR = 56
ERROR_STALE_BROKER_EPOCH = 77
ERROR_FENCED_LEADER_EPOCH = 74

#: ``leader`` value of a partition without a leader.
NO_LEADER = -1

#: Broker epoch sent when the controller does not know the target's epoch.
UNKNOWN_BROKER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """Where a broker listens (from ``/brokers/ids/<id>``)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    #: every advertised listener (empty: only ``host:port``, a PLAINTEXT listener)
    listeners: tuple[ListenerEndpoint, ...] = ()


@dataclass(frozen=True, slots=True)
class LeaderAndIsrPartitionState:
    """One partition of a LeaderAndIsr request (design V3 ``LeaderAndISR`` + Kafka's fields).

    Attributes:
        topic, partition: the partition.
        controller_epoch: epoch of the controller that last wrote this state.
        leader: the leader's broker id, or ``NO_LEADER``.
        leader_epoch: incremented on each leadership change.
        isr: the in-sync replicas.
        zk_version: version of ``/brokers/topics/<t>/partitions/<p>/state`` (partition epoch):
            the leader's ISR updates are conditional on it.
        replicas: the assigned replicas (AR), preferred first.
        adding_replicas, removing_replicas: a reassignment's additions and removals.
        is_new: the replica is new to the receiving broker, so it may be created even while a
            log dir of that broker is offline (KAFKA-10314); never set for an existing replica, so
            a replica lost with a failed dir is never recreated empty (KIP-112).
        preferred_log_dir: the log dir a reassignment asked for on the receiving broker, if any.
    """

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False
    preferred_log_dir: str | None = None


@dataclass(frozen=True, slots=True)
class LeaderAndIsrRequest:
    """LeaderAndIsr to one broker.

    Attributes:
        controller_id, controller_epoch: the sender (brokers reject an older epoch).
        broker_epoch: the target's epoch (czxid of its registration) or ``UNKNOWN_BROKER_EPOCH``.
        partition_states: the partitions this broker hosts that changed.
        live_leaders: endpoints of the leaders named in ``partition_states``.
        is_init: the first request a new controller sends (design V3 ``isInit``). Not on the
            wire (the LeaderAndIsr versions spoken have no such field): a broker applies it as
            any other and keeps local partitions no request names (strays, as ZooKeeper-era
            Kafka's broker keeps them).
    """

    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[LeaderAndIsrPartitionState, ...]
    live_leaders: tuple[BrokerEndpoint, ...]
    is_init: bool = False


@dataclass(frozen=True, slots=True)
class StopReplicaPartition:
    """One partition of a StopReplica request."""

    topic: str
    partition: int
    leader_epoch: int
    delete_partition: bool


@dataclass(frozen=True, slots=True)
class StopReplicaRequest:
    """StopReplica to one broker; ``delete_partition`` removes the local log too."""

    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[StopReplicaPartition, ...]


@dataclass(frozen=True, slots=True)
class UpdateMetadataPartitionState:
    """One partition of an UpdateMetadata request, with the replicas known offline."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]

    def __init__(  # noqa: PLR0917 (the generated constructor's signature)
        self, topic: str, partition: int, controller_epoch: int, leader: int, leader_epoch: int,
        isr: tuple[int, ...], zk_version: int, replicas: tuple[int, ...],
        offline_replicas: tuple[int, ...]
    ) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "topic", topic)
        object.__setattr__(self, "partition", partition)
        object.__setattr__(self, "controller_epoch", controller_epoch)
        object.__setattr__(self, "leader", leader)
        object.__setattr__(self, "leader_epoch", leader_epoch)
        object.__setattr__(self, "isr", isr)
        object.__setattr__(self, "zk_version", zk_version)
        object.__setattr__(self, "replicas", replicas)
        object.__setattr__(self, "offline_replicas", offline_replicas)


@dataclass(frozen=True, slots=True)
class UpdateMetadataRequest:
    """UpdateMetadata to one broker: live brokers and partition states for client routing."""

    controller_id: int
    controller_epoch: int
    broker_epoch: int
    live_brokers: tuple[BrokerEndpoint, ...]
    partition_states: tuple[UpdateMetadataPartitionState, ...]


ControllerRequest = LeaderAndIsrRequest | StopReplicaRequest | UpdateMetadataRequest


@dataclass(frozen=True, slots=True)
class ControllerResponse:
    """A broker's answer: a top-level error and per-partition error codes.

    Attributes:
        error_code: 0, or e.g. ``ERROR_STALE_CONTROLLER_EPOCH`` for the whole request.
        partition_errors: ``(topic, partition) -> error code`` (e.g. ``ERROR_KAFKA_STORAGE_ERROR``
            for a replica on an offline log dir); partitions not named succeeded.
    """

    error_code: int = ERROR_NONE
    partition_errors: Mapping[tuple[str, int], int] = field(
        default_factory=lambda: MappingProxyType({})
    )
