"""The values a replica placer reads and the :class:`ReplicaPlacer` interface (KIP-879).

KIP-879 "Interfaces": ``place(PlacementSpec, ClusterView, List<Integer> brokerIds)`` returns the
assignment as a zero-based list of lists (the outer index is the partition, counted from the
spec's start partition; the inner list is the replicas, preferred leader first) or ``null`` to
defer to Kafka's rack-unaware assignment. Here ``null`` is ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

__sans_io__ = True

#: An assignment as KIP-879 returns it: ``assignment[i]`` is the replica list of partition
#: ``start_partition_id + i``, preferred leader first.
Assignment = list[list[int]]


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """A partition of a topic, the key of the cluster view's current assignment."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacementSpec:
    """What to place (KIP-879 ``PlacementSpec`` plus ``CreateReplicaPlacementOptions``).

    Attributes:
        partition_count: how many partitions to place (CreateTopics: all of them; CreatePartitions:
            the new ones).
        replication_factor: replicas per partition.
        start_partition_id: the id of the first partition placed; 0 for a new topic, the current
            partition count when partitions are added.
        force_simple_placement: use Kafka's rack-unaware assignment whatever placer is configured
            (``--disable-rack-aware``).
        topic: the topic, when its existing partitions in the cluster view should be taken into
            account (partition addition); ``None`` for a topic that does not exist yet.
    """

    partition_count: int
    replication_factor: int
    start_partition_id: int = 0
    force_simple_placement: bool = False
    topic: str | None = None


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A usable broker and its ``broker.rack`` (``None`` when the broker declares no rack)."""

    broker_id: int
    rack: str | None = None


def _frozen_assignments(
    assignments: Mapping[TopicPartition, Sequence[int]],
) -> Mapping[TopicPartition, tuple[int, ...]]:
    return MappingProxyType({tp: tuple(replicas) for tp, replicas in assignments.items()})


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What a placer may see of the cluster (KIP-879 ``ClusterView``).

    Attributes:
        brokers: the usable brokers with their racks, in any order.
        partition_assignments: the current replicas of existing partitions, preferred leader
            first (read when partitions are added to a topic).
    """

    brokers: tuple[BrokerInfo, ...]
    partition_assignments: Mapping[TopicPartition, tuple[int, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )

    @staticmethod
    def of(
        broker_racks: Mapping[int, str | None] | Sequence[BrokerInfo],
        partition_assignments: Mapping[TopicPartition, Sequence[int]] | None = None,
    ) -> ClusterView:
        """Build a view from ``{broker_id: rack}`` (or broker infos) and current assignments.

        Args:
            broker_racks: each usable broker's rack, ``None`` for none.
            partition_assignments: the current replicas of existing partitions.

        Returns:
            The immutable view.
        """
        if isinstance(broker_racks, Mapping):
            brokers = tuple(BrokerInfo(broker_id, rack) for broker_id, rack in broker_racks.items())
        else:
            brokers = tuple(broker_racks)
        return ClusterView(brokers, _frozen_assignments(partition_assignments or {}))

    def topic_assignment(self, topic: str) -> dict[int, tuple[int, ...]]:
        """The current replicas of ``topic``'s partitions, by partition id."""
        return {
            tp.partition: replicas
            for tp, replicas in self.partition_assignments.items()
            if tp.topic == topic
        }


class ReplicaPlacer(Protocol):
    """A replica placement strategy (KIP-879 ``ReplicaPlacer``), chosen by
    ``broker.replica.placer``.

    A placer owns its randomness (a seeded :class:`impl.ports.Rng` given at construction), so
    the same seed and the same calls give the same placements. It never performs I/O.
    """

    def place(
        self,
        placement_spec: PlacementSpec,
        cluster_view: ClusterView,
        broker_ids: Sequence[int] | None,
    ) -> Assignment | None:
        """Place the replicas of ``placement_spec.partition_count`` partitions.

        Args:
            placement_spec: what to place.
            cluster_view: the usable brokers with racks and the current assignments.
            broker_ids: the brokers to place on, or ``None`` for every broker of the view.

        Returns:
            ``assignment[i]`` = the replicas of partition ``start_partition_id + i``, preferred
            leader first; or ``None`` to defer to Kafka's rack-unaware assignment.

        Raises:
            PlacementError: the request cannot be placed (the message names why).
        """
        ...
