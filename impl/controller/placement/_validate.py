"""Checks shared by every placer and by the driver: the request and the brokers are placeable.

Kafka's ``AdminUtils.assignReplicasToBrokers`` rejects a non-positive partition count or
replication factor and a replication factor above the broker count; KIP-879 adds the broker
subset, which must name known brokers. Every failure is one :class:`PlacementError`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ._errors import INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, PlacementError
from ._types import Assignment, BrokerInfo, ClusterView, PlacementSpec

__sans_io__ = True

#: Kafka's bound on a replication factor: the wire type is int16.
REPLICATION_FACTOR_MAX = 32767
#: Partition ids are int32 on the wire.
PARTITION_ID_MAX = 2**31 - 1
#: The most partitions one request may place: the broker's bound on a topic's partitions
#: (CreateTopics answers INVALID_PARTITIONS past it too). Without it a 40-byte request asking
#: for 2^31-1 partitions kept the broker placing replicas until it ran out of memory.
PARTITION_COUNT_MAX = 100_000


def validate_placement_spec(placement_spec: PlacementSpec) -> None:
    """Reject counts no placer can honour.

    Args:
        placement_spec: the request.

    Raises:
        PlacementError: a count is out of range.
    """
    if placement_spec.partition_count <= 0:
        raise PlacementError(
            f"number of partitions must be larger than 0, got {placement_spec.partition_count}",
            INVALID_PARTITIONS,
        )
    if placement_spec.partition_count > PARTITION_COUNT_MAX:
        raise PlacementError(
            f"number of partitions must be at most {PARTITION_COUNT_MAX}, "
            f"got {placement_spec.partition_count}",
            INVALID_PARTITIONS,
        )
    if placement_spec.start_partition_id < 0:
        raise PlacementError(
            f"start partition id must not be negative, got {placement_spec.start_partition_id}",
            INVALID_PARTITIONS,
        )
    last_partition_id = placement_spec.start_partition_id + placement_spec.partition_count - 1
    if last_partition_id > PARTITION_ID_MAX:
        raise PlacementError(
            f"partition id {last_partition_id} does not fit in an int32", INVALID_PARTITIONS
        )
    if placement_spec.replication_factor <= 0:
        raise PlacementError(
            f"replication factor must be larger than 0, got {placement_spec.replication_factor}",
            INVALID_REPLICATION_FACTOR,
        )
    if placement_spec.replication_factor > REPLICATION_FACTOR_MAX:
        raise PlacementError(
            f"replication factor {placement_spec.replication_factor} does not fit in an int16",
            INVALID_REPLICATION_FACTOR,
        )


def usable_brokers(
    placement_spec: PlacementSpec,
    cluster_view: ClusterView,
    broker_ids: Sequence[int] | None,
) -> list[BrokerInfo]:
    """The brokers to place on, sorted by id, after checking the request against them.

    Args:
        placement_spec: the request.
        cluster_view: the usable brokers of the cluster.
        broker_ids: the subset asked for, or ``None`` for all.

    Returns:
        The chosen brokers sorted by broker id (Kafka sorts its broker list the same way).

    Raises:
        PlacementError: bad counts, no brokers, duplicate or unknown broker ids, or a
            replication factor above the number of brokers.
    """
    validate_placement_spec(placement_spec)
    duplicates = sorted(
        broker_id
        for broker_id, count in Counter(b.broker_id for b in cluster_view.brokers).items()
        if count > 1
    )
    if duplicates:
        raise PlacementError(f"duplicate broker ids in the cluster: {_ids(duplicates)}")
    by_id = {broker.broker_id: broker for broker in cluster_view.brokers}
    if broker_ids is None:
        chosen = list(by_id.values())
    else:
        duplicates = sorted(i for i, count in Counter(broker_ids).items() if count > 1)
        if duplicates:
            raise PlacementError(f"duplicate broker ids in the broker list: {_ids(duplicates)}")
        unknown = sorted(i for i in broker_ids if i not in by_id)
        if unknown:
            raise PlacementError(f"unknown broker ids in the broker list: {_ids(unknown)}")
        chosen = [by_id[i] for i in broker_ids]
    if not chosen:
        raise PlacementError("no brokers to place replicas on")
    negative = sorted(b.broker_id for b in chosen if b.broker_id < 0)
    if negative:
        raise PlacementError(f"broker ids must not be negative: {_ids(negative)}")
    if placement_spec.replication_factor > len(chosen):
        raise PlacementError(
            f"replication factor {placement_spec.replication_factor} larger than the "
            f"{len(chosen)} available brokers",
            INVALID_REPLICATION_FACTOR,
        )
    return sorted(chosen, key=lambda broker: broker.broker_id)


def validate_assignment(
    assignment: Assignment,
    placement_spec: PlacementSpec,
    brokers: Sequence[BrokerInfo],
    placer_name: str,
) -> None:
    """Check a placer's answer before anyone writes it (a plugin can be wrong).

    Args:
        assignment: the placer's answer.
        placement_spec: the request it answers.
        brokers: the brokers it was allowed to use.
        placer_name: named in the error message.

    Raises:
        PlacementError: wrong partition count, wrong replication factor, a duplicate replica or
            a broker outside the allowed set.
    """
    allowed = {broker.broker_id for broker in brokers}
    if not isinstance(assignment, list):
        raise PlacementError(
            f"placer {placer_name} returned a {type(assignment).__name__}, not a list of lists"
        )
    if len(assignment) != placement_spec.partition_count:
        raise PlacementError(
            f"placer {placer_name} returned {len(assignment)} partitions, expected "
            f"{placement_spec.partition_count}"
        )
    for index, replicas in enumerate(assignment):
        partition_id = placement_spec.start_partition_id + index
        if not isinstance(replicas, list):
            raise PlacementError(
                f"placer {placer_name} returned a {type(replicas).__name__} for partition "
                f"{partition_id}, not a list of broker ids"
            )
        if len(replicas) != placement_spec.replication_factor:
            raise PlacementError(
                f"placer {placer_name} returned {len(replicas)} replicas for partition "
                f"{partition_id}, expected {placement_spec.replication_factor}"
            )
        if any(isinstance(r, bool) or not isinstance(r, int) for r in replicas):
            raise PlacementError(
                f"placer {placer_name} returned a non-integer replica for partition {partition_id}"
            )
        if len(set(replicas)) != len(replicas):
            raise PlacementError(
                f"placer {placer_name} placed two replicas of partition {partition_id} on one "
                f"broker: {_ids(replicas)}"
            )
        outside = sorted(set(replicas) - allowed)
        if outside:
            raise PlacementError(
                f"placer {placer_name} used brokers outside the allowed set for partition "
                f"{partition_id}: {_ids(outside)}"
            )


def _ids(broker_ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in broker_ids)

