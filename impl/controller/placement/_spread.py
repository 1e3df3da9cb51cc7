"""``PLACEMENT_SPREAD``: the invariant of multi-level placement, as a pure checker.

For every partition of an assignment over a multi-level rack tree:

* **replicas**: the replicas are distinct brokers of the tree, and at every node, between the
  children of the node, the partition's replica counts differ by at most one *towards children
  that can take them*: if child ``i`` still has a broker without a replica of the partition,
  no sibling holds more than ``count(i) + 1``. (A child whose brokers are all used may hold
  fewer: it could take no more.) At the root this spreads replicas over data centres, inside a
  data centre over racks, and so on down (KIP-879 "Motivation", items 1 and 2).
* **leaders**: partitions are taken in order; each partition's leader (its first replica) is,
  among the partition's replicas, one that led the fewest of the earlier partitions. So a
  broker leads a further partition only when every other replica of it leads at least as many.

The checker reads only the assignment and the racks: the model (``model/placement.py``), the
tests and the CreateReplicaPlacement handler's callers can all apply it to any placer's answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ._errors import PlacementError
from ._multi_level import RackNode, build_rack_tree
from ._types import ClusterView

__sans_io__ = True

PLACEMENT_SPREAD = "PLACEMENT_SPREAD"


@dataclass(frozen=True, slots=True)
class SpreadViolation:
    """One way an assignment breaks ``PLACEMENT_SPREAD``.

    Attributes:
        partition_id: the partition.
        where: the rack node (``/DC1``) or ``"leaders"``.
        detail: what is wrong, in one line.
    """

    partition_id: int
    where: str
    detail: str

    def __str__(self) -> str:
        return f"{PLACEMENT_SPREAD}: partition {self.partition_id} at {self.where}: {self.detail}"


def placement_spread_violations(
    assignment: Sequence[Sequence[int]],
    cluster_view: ClusterView,
    broker_ids: Sequence[int] | None = None,
    *,
    start_partition_id: int = 0,
    prior_leader_counts: Mapping[int, int] | None = None,
) -> list[SpreadViolation]:
    """Every violation of ``PLACEMENT_SPREAD`` in ``assignment``.

    Args:
        assignment: ``assignment[i]`` = the replicas of partition ``start_partition_id + i``,
            leader first.
        cluster_view: the brokers and their multi-level racks.
        broker_ids: the brokers the placement could use, ``None`` for all of the view.
        start_partition_id: the id of ``assignment[0]`` (for messages).
        prior_leader_counts: partitions each broker already led before ``assignment[0]``.

    Returns:
        The violations, empty when the invariant holds.

    Raises:
        PlacementError: the racks do not form a valid tree (see ``build_rack_tree``).
    """
    allowed = set(broker_ids) if broker_ids is not None else None
    tree = build_rack_tree(
        broker
        for broker in cluster_view.brokers
        if allowed is None or broker.broker_id in allowed
    )
    in_tree = tree.root.subtree_broker_ids()
    node_slots = [(node, node.child_broker_sets()) for node in tree.nodes]
    violations: list[SpreadViolation] = []
    leader_counts: Counter[int] = Counter(prior_leader_counts or {})
    for index, replicas in enumerate(assignment):
        partition_id = start_partition_id + index
        replica_set = frozenset(replicas)
        if len(replica_set) != len(replicas):
            violations.append(SpreadViolation(partition_id, "/", "two replicas on one broker"))
        outside = sorted(replica_set - in_tree)
        if outside:
            violations.append(
                SpreadViolation(partition_id, "/", f"brokers outside the tree: {outside}")
            )
        for node, slots in node_slots:
            violation = _node_violation(node, slots, replica_set)
            if violation is not None:
                violations.append(SpreadViolation(partition_id, node.name, violation))
        if replicas:
            fewest = min(leader_counts[broker_id] for broker_id in replicas)
            leader = replicas[0]
            if leader_counts[leader] != fewest:
                violations.append(
                    SpreadViolation(
                        partition_id,
                        "leaders",
                        f"leader {leader} already leads {leader_counts[leader]} partitions, "
                        f"another replica only {fewest}",
                    )
                )
            leader_counts[leader] += 1
    return violations


def placement_spread_holds(
    assignment: Sequence[Sequence[int]],
    cluster_view: ClusterView,
    broker_ids: Sequence[int] | None = None,
    *,
    prior_leader_counts: Mapping[int, int] | None = None,
) -> bool:
    """Whether ``assignment`` satisfies ``PLACEMENT_SPREAD`` (see
    :func:`placement_spread_violations` for the arguments).

    Returns:
        ``True`` when there is no violation.

    Raises:
        PlacementError: the racks do not form a valid tree.
    """
    return not placement_spread_violations(
        assignment, cluster_view, broker_ids, prior_leader_counts=prior_leader_counts
    )


def _node_violation(
    node: RackNode, slots: Sequence[frozenset[int]], replicas: frozenset[int]
) -> str | None:
    counts = [len(slot & replicas) for slot in slots]
    if not any(counts):
        return None
    open_counts = [count for count, slot in zip(counts, slots, strict=True) if count < len(slot)]
    if not open_counts or max(counts) <= min(open_counts) + 1:
        return None
    labels = (
        [child.name for child in node.children]
        if node.children
        else [f"broker {broker_id}" for broker_id in node.broker_ids]
    )
    for index, slot in enumerate(slots):
        if counts[index] >= len(slot):
            continue
        for other, count in enumerate(counts):
            if count > counts[index] + 1:
                return (
                    f"{labels[other]} holds {count} replicas while {labels[index]} holds "
                    f"{counts[index]} and could take more"
                )
    return None


def check_placement_spread(
    assignment: Sequence[Sequence[int]],
    cluster_view: ClusterView,
    broker_ids: Sequence[int] | None = None,
) -> None:
    """Raise when ``assignment`` breaks ``PLACEMENT_SPREAD``.

    Args:
        assignment: the placement, partition 0 first.
        cluster_view: the brokers and their multi-level racks.
        broker_ids: the brokers the placement could use, ``None`` for all.

    Raises:
        PlacementError: the first violation, named.
    """
    violations = placement_spread_violations(assignment, cluster_view, broker_ids)
    if violations:
        raise PlacementError(str(violations[0]))
