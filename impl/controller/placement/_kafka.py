"""Apache Kafka's two built-in assignments, behind the KIP-879 :class:`ReplicaPlacer` interface.

Both follow ``AdminUtils.assignReplicasToBrokers`` (ZooKeeper mode), restated from its
definition:

* **rack-unaware**: brokers sorted by id; a random start index ``s`` and a random replica
  shift ``h``, both in ``[0, n)``. Partition ``p``'s leader is broker ``(p + s) mod n``; its
  ``j``-th follower is ``(leader + 1 + (h + j) mod (n - 1)) mod n``, so followers never land on
  the leader and are spread by the shift; ``h`` grows by one each time ``p`` passes a multiple
  of ``n`` so that later rounds do not repeat the same follower pattern.
* **rack-aware** (Kafka's default): when no broker has a rack it is the rack-unaware
  assignment; when only some have one it is an error; otherwise the brokers are listed with
  their racks alternated (racks sorted, one broker of each rack in turn, brokers of a rack in
  id order), leaders are chosen as above over that list, and followers walk the list with the
  shift multiplied by the rack count, skipping a broker whose rack already holds a replica
  while some rack holds none, and a broker that already holds one while some broker holds
  none.

When partitions are added to an existing topic, Kafka fixes both the start index and the shift
to the index (in the id-sorted broker list) of the first broker whose id is at least the leader
of partition 0, so new partitions continue the topic's pattern; these placers do the same when
the spec names the topic and the view holds its partition 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from impl.ports import Rng

from ._errors import PlacementError
from ._types import Assignment, BrokerInfo, ClusterView, PlacementSpec
from ._validate import usable_brokers

__sans_io__ = True

RACK_UNAWARE = "rack-unaware"
RACK_AWARE = "rack-aware"


def follower_index(first_replica_index: int, replica_shift: int, follower: int, n: int) -> int:
    """The broker index of follower ``follower`` (0-based) in Kafka's shifted assignment.

    Args:
        first_replica_index: the leader's index in the broker list.
        replica_shift: the partition's shift.
        follower: which follower, from 0.
        n: the number of brokers (at least 2 when there is a follower).

    Returns:
        An index different from ``first_replica_index``.
    """
    assert n >= 2, "a follower needs a second broker"
    shift = 1 + (replica_shift + follower) % (n - 1)
    return (first_replica_index + shift) % n


def rack_unaware_assignment(
    broker_ids: Sequence[int],
    partition_count: int,
    replication_factor: int,
    *,
    start_index: int,
    replica_shift: int,
    start_partition_id: int = 0,
) -> Assignment:
    """Kafka's rack-unaware assignment with the random draws given.

    Args:
        broker_ids: the brokers in placement order (Kafka: sorted by id).
        partition_count: partitions to place.
        replication_factor: replicas per partition, at most ``len(broker_ids)``.
        start_index: the leader index of partition 0.
        replica_shift: the follower shift of the first placed partition.
        start_partition_id: the id of the first placed partition.

    Returns:
        The replicas of each placed partition, leader first.
    """
    n = len(broker_ids)
    assert 0 < replication_factor <= n
    assignment: Assignment = []
    shift = replica_shift
    for partition_id in range(start_partition_id, start_partition_id + partition_count):
        if partition_id > 0 and partition_id % n == 0:
            shift += 1
        first = (partition_id + start_index) % n
        replicas = [broker_ids[first]]
        replicas.extend(
            broker_ids[follower_index(first, shift, j, n)] for j in range(replication_factor - 1)
        )
        assignment.append(replicas)
    return assignment


def rack_alternated_brokers(broker_racks: Mapping[int, str]) -> list[int]:
    """The broker list with racks alternated, as Kafka's rack-aware assignment walks it.

    Args:
        broker_racks: each broker's rack.

    Returns:
        One broker of each rack in turn (racks sorted, brokers of a rack in id order), until
        every broker is listed; a rack that runs out is skipped.
    """
    by_rack: dict[str, list[int]] = {}
    for broker_id in sorted(broker_racks):
        by_rack.setdefault(broker_racks[broker_id], []).append(broker_id)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    arranged: list[int] = []
    for round_index in range(max((len(queue) for queue in queues), default=0)):
        arranged.extend(queue[round_index] for queue in queues if round_index < len(queue))
    return arranged


def rack_aware_assignment(
    broker_racks: Mapping[int, str],
    partition_count: int,
    replication_factor: int,
    *,
    start_index: int,
    replica_shift: int,
    start_partition_id: int = 0,
) -> Assignment:
    """Kafka's rack-aware assignment with the random draws given.

    Args:
        broker_racks: each broker's rack (every broker has one).
        partition_count: partitions to place.
        replication_factor: replicas per partition, at most the broker count.
        start_index: the leader index of partition 0 in the rack-alternated list.
        replica_shift: the follower shift of the first placed partition.
        start_partition_id: the id of the first placed partition.

    Returns:
        The replicas of each placed partition, leader first.
    """
    arranged = rack_alternated_brokers(broker_racks)
    n = len(arranged)
    rack_count = len(set(broker_racks.values()))
    assert 0 < replication_factor <= n
    assignment: Assignment = []
    shift = replica_shift
    for partition_id in range(start_partition_id, start_partition_id + partition_count):
        if partition_id > 0 and partition_id % n == 0:
            shift += 1
        first = (partition_id + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_with_replicas = {broker_racks[leader]}
        brokers_with_replicas = {leader}
        step = 0
        for _ in range(replication_factor - 1):
            # The step walks all n - 1 other brokers within n - 1 tries and one of them is
            # acceptable (replication factor <= n); the bound turns a broken invariant into an
            # assertion instead of a hang.
            for _attempt in range(n):
                broker = arranged[follower_index(first, shift * rack_count, step, n)]
                rack = broker_racks[broker]
                step += 1
                rack_ok = rack not in racks_with_replicas or len(racks_with_replicas) == rack_count
                broker_ok = broker not in brokers_with_replicas or len(brokers_with_replicas) == n
                if rack_ok and broker_ok:
                    replicas.append(broker)
                    racks_with_replicas.add(rack)
                    brokers_with_replicas.add(broker)
                    break
            else:
                raise AssertionError("rack-aware assignment found no follower")
        assignment.append(replicas)
    return assignment


def existing_start_index(
    placement_spec: PlacementSpec, cluster_view: ClusterView, sorted_broker_ids: Sequence[int]
) -> int | None:
    """Kafka's fixed start index for partition addition, or ``None`` for a new topic.

    Args:
        placement_spec: the request; only ``topic`` is read.
        cluster_view: holds the topic's current assignment.
        sorted_broker_ids: the usable brokers sorted by id.

    Returns:
        The index of the first broker whose id is at least partition 0's leader (0 if none is),
        or ``None`` when the spec names no topic or the topic has no partition 0.
    """
    if placement_spec.topic is None:
        return None
    partition_zero = cluster_view.topic_assignment(placement_spec.topic).get(0)
    if not partition_zero:
        return None
    leader = partition_zero[0]
    for index, broker_id in enumerate(sorted_broker_ids):
        if broker_id >= leader:
            return index
    return 0


class RackUnawarePlacer:
    """Kafka's rack-unaware assignment (random start, shifted followers); ignores racks.

    This is also what every placement defers to when a placer returns ``None`` or the request
    sets ``force_simple_placement``.
    """

    name = RACK_UNAWARE

    def __init__(self, rng: Rng) -> None:
        """Args:
        rng: draws the start index and the replica shift.
        """
        self._rng = rng

    def place(
        self,
        placement_spec: PlacementSpec,
        cluster_view: ClusterView,
        broker_ids: Sequence[int] | None,
    ) -> Assignment:
        """Place with Kafka's rack-unaware assignment (see the module docstring).

        Args:
            placement_spec: what to place.
            cluster_view: the usable brokers (racks ignored) and current assignments.
            broker_ids: the brokers to use, ``None`` for all.

        Returns:
            The assignment, leader first in each partition.

        Raises:
            PlacementError: the request cannot be placed.
        """
        brokers = usable_brokers(placement_spec, cluster_view, broker_ids)
        ids = [broker.broker_id for broker in brokers]
        fixed = existing_start_index(placement_spec, cluster_view, ids)
        start_index = fixed if fixed is not None else self._rng.randrange(len(ids))
        replica_shift = fixed if fixed is not None else self._rng.randrange(len(ids))
        return rack_unaware_assignment(
            ids,
            placement_spec.partition_count,
            placement_spec.replication_factor,
            start_index=start_index,
            replica_shift=replica_shift,
            start_partition_id=placement_spec.start_partition_id,
        )


class RackAwarePlacer:
    """Kafka's current default: rack-aware when every broker has a rack, rack-unaware when
    none has, an error when only some have (Kafka: "Not all brokers have rack information").
    """

    name = RACK_AWARE

    def __init__(self, rng: Rng) -> None:
        """Args:
        rng: draws the start index and the replica shift.
        """
        self._rng = rng

    def place(
        self,
        placement_spec: PlacementSpec,
        cluster_view: ClusterView,
        broker_ids: Sequence[int] | None,
    ) -> Assignment:
        """Place with Kafka's rack-aware assignment (see the module docstring).

        Args:
            placement_spec: what to place.
            cluster_view: the usable brokers with racks and current assignments.
            broker_ids: the brokers to use, ``None`` for all.

        Returns:
            The assignment, leader first in each partition.

        Raises:
            PlacementError: the request cannot be placed, or only some brokers have racks.
        """
        brokers = usable_brokers(placement_spec, cluster_view, broker_ids)
        if all(broker.rack is None for broker in brokers):
            return RackUnawarePlacer(self._rng).place(placement_spec, cluster_view, broker_ids)
        _reject_partial_racks(brokers)
        broker_racks = {broker.broker_id: str(broker.rack) for broker in brokers}
        ids = [broker.broker_id for broker in brokers]
        fixed = existing_start_index(placement_spec, cluster_view, ids)
        start_index = fixed if fixed is not None else self._rng.randrange(len(ids))
        replica_shift = fixed if fixed is not None else self._rng.randrange(len(ids))
        return rack_aware_assignment(
            broker_racks,
            placement_spec.partition_count,
            placement_spec.replication_factor,
            start_index=start_index,
            replica_shift=replica_shift,
            start_partition_id=placement_spec.start_partition_id,
        )


def _reject_partial_racks(brokers: Sequence[BrokerInfo]) -> None:
    missing = sorted(broker.broker_id for broker in brokers if broker.rack is None)
    if missing:
        raise PlacementError(
            "not all brokers have rack information for rack-aware placement; no rack on "
            f"broker(s) {','.join(str(i) for i in missing)}"
        )
    empty = sorted(broker.broker_id for broker in brokers if broker.rack == "")
    if empty:
        raise PlacementError(
            f"empty rack on broker(s) {','.join(str(i) for i in empty)}"
        )
