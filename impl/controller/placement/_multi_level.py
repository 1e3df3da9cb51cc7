"""KIP-879's multi-level rack-aware placer: a rack tree with a ring pointer in every node.

KIP-879 "Multi-level rack assignment", restated:

1. Every rack is a path from the root ``/`` (``/DC1/R1``); the racks of the brokers form a tree
   whose inner nodes are levels (data centres, rooms, racks …) and whose leaves are brokers.
2. Every node holds a ring over its children (sorted: child racks by name, brokers by id) and a
   pointer into it, first set to a child drawn from the seeded randomness so that different
   topics start in different places.
3. A new replica enters at the root; each node hands it to the child its pointer designates and
   advances the pointer past that child; this repeats down to a broker.
4. The pointers live on from partition to partition, so partition ``p + 1`` continues where
   partition ``p`` left off; raising a replication factor continues the same walk.

Two guards make the walk total and even (the project's reading of "spread evenly"): a child
whose brokers all hold a replica of the partition already is skipped, and among the other
children the pointer moves on to the first, in ring order, holding the fewest replicas of the
partition. For a fresh partition the second guard never overrides the plain ring (the ring
hands out replicas round-robin); it matters when a partition already has replicas, as when the
replication factor is raised. Together they give ``PLACEMENT_SPREAD`` (:mod:`._spread`).

Racks must be absolute paths of non-empty levels, and a rack must not be both a rack of brokers
and the parent of another rack (``/DC1`` beside ``/DC1/R1``): such a node would mix brokers and
racks as children and no ring over it could spread evenly at both depths. Branches may differ
in depth (``/DC1/R1`` beside ``/DC2``). When no broker has a rack the placer returns ``None``,
deferring to Kafka's rack-unaware assignment; when only some have one, it is an error.

The leader of each partition is the replica that has led the fewest of the topic's partitions
so far (earlier partitions of this call and, when the spec names the topic, its existing
partitions), ties going to the first placed; the other replicas follow in walk order.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from impl.ports import Rng
from impl.trace import NullTraceSink, TraceEvent, TraceSink

from ._errors import INVALID_REPLICATION_FACTOR, PlacementError
from ._types import Assignment, BrokerInfo, ClusterView, PlacementSpec
from ._validate import usable_brokers

__sans_io__ = True

MULTI_LEVEL = "multi-level"
RACK_SEPARATOR = "/"
#: The machine name in trace events (VOCABULARY.md).
MACHINE = "placement"


class PlacementState(enum.Enum):
    """Where the placement of one partition stands (trace events' states)."""

    PLACING = "placing"  #: KIP-879 multi-level steps 3-4: replicas are being walked down
    PLACED = "placed"  #: the partition has all its replicas


class PlacementEvent(enum.Enum):
    """The transitions of the placement machine (model action = lower-case name)."""

    REPLICA_PLACED = "replica_placed"  #: KIP-879 multi-level steps 3-4: one replica walked down
    PARTITION_PLACED = "partition_placed"  #: the partition has its replicas; the next one starts


def parse_rack(rack: str, broker_id: int | None = None) -> tuple[str, ...]:
    """The levels of a multi-level rack: ``"/DC1/R1"`` → ``("DC1", "R1")``.

    Args:
        rack: the broker's ``broker.rack``.
        broker_id: named in the error message when given.

    Returns:
        The path's levels from the root, at least one.

    Raises:
        PlacementError: the rack does not start with ``/`` or has an empty level (``/``,
            ``//R1``, ``/DC1/``).
    """
    owner = f" of broker {broker_id}" if broker_id is not None else ""
    if not rack.startswith(RACK_SEPARATOR):
        raise PlacementError(f"rack {rack!r}{owner} does not start with '/'")
    levels = tuple(rack[1:].split(RACK_SEPARATOR))
    if any(level == "" for level in levels):
        raise PlacementError(f"rack {rack!r}{owner} has an empty level")
    if any(level != level.strip() for level in levels):
        raise PlacementError(f"rack {rack!r}{owner} has a level with surrounding spaces")
    return levels


def rack_name(path: Sequence[str]) -> str:
    """The rack string of a tree path: ``("DC1", "R1")`` → ``"/DC1/R1"``, ``()`` → ``"/"``."""
    return RACK_SEPARATOR + RACK_SEPARATOR.join(path)


@dataclass(frozen=True, slots=True)
class RackNode:
    """A node of the rack tree: either a rack of brokers or a level with child racks.

    Attributes:
        path: the levels from the root (``()`` is the root ``/``).
        children: child nodes sorted by name (empty for a rack of brokers).
        broker_ids: the brokers of this rack, sorted (empty for a level).
    """

    path: tuple[str, ...]
    children: tuple[RackNode, ...]
    broker_ids: tuple[int, ...]

    def __post_init__(self) -> None:
        assert bool(self.children) != bool(self.broker_ids), "a node holds racks or brokers"

    @property
    def name(self) -> str:
        """The rack string, ``/`` for the root."""
        return rack_name(self.path)

    @property
    def ring_size(self) -> int:
        """How many children the node's ring iterates over."""
        return len(self.children) or len(self.broker_ids)

    def subtree_broker_ids(self) -> frozenset[int]:
        """Every broker below this node."""
        if self.broker_ids:
            return frozenset(self.broker_ids)
        return frozenset().union(*(child.subtree_broker_ids() for child in self.children))

    def child_broker_sets(self) -> tuple[frozenset[int], ...]:
        """For each ring slot, the brokers below it (one broker for a rack of brokers)."""
        if self.broker_ids:
            return tuple(frozenset({broker_id}) for broker_id in self.broker_ids)
        return tuple(child.subtree_broker_ids() for child in self.children)


@dataclass(frozen=True, slots=True)
class RackTree:
    """The rack tree of a set of brokers.

    Attributes:
        root: the node ``/``.
        nodes: every node, root first, then level by level, siblings by name (the order in
            which the ring pointers draw their random start).
    """

    root: RackNode
    nodes: tuple[RackNode, ...]


def build_rack_tree(brokers: Iterable[BrokerInfo]) -> RackTree:
    """Build the tree of multi-level racks.

    Args:
        brokers: brokers that all declare a rack.

    Returns:
        The tree.

    Raises:
        PlacementError: a broker without a rack, an invalid rack, or a rack that is both a
            rack of brokers and the parent of another rack.
    """
    racks: dict[tuple[str, ...], list[int]] = {}
    for broker in brokers:
        if broker.rack is None:
            raise PlacementError(
                f"broker {broker.broker_id} has no rack; multi-level placement needs a rack on "
                "every broker or on none"
            )
        racks.setdefault(parse_rack(broker.rack, broker.broker_id), []).append(broker.broker_id)
    if not racks:
        raise PlacementError("no brokers to place replicas on")
    for path in racks:
        for depth in range(1, len(path)):
            if path[:depth] in racks:
                raise PlacementError(
                    f"rack {rack_name(path[:depth])} holds brokers and is also the parent of "
                    f"rack {rack_name(path)}; brokers and racks cannot be siblings"
                )
    root = _build_node((), racks)
    nodes: list[RackNode] = []
    level = [root]
    while level:
        nodes.extend(level)
        level = [child for node in level for child in node.children]
    return RackTree(root, tuple(nodes))


def _build_node(path: tuple[str, ...], racks: Mapping[tuple[str, ...], list[int]]) -> RackNode:
    if path in racks:
        return RackNode(path, (), tuple(sorted(racks[path])))
    child_names = sorted(
        {rack[len(path)] for rack in racks if len(rack) > len(path) and rack[: len(path)] == path}
    )
    return RackNode(path, tuple(_build_node((*path, name), racks) for name in child_names), ())


class RingWalk:
    """The ring pointers of one placement run, and the walk that places one replica.

    The pointers start at children drawn from ``rng`` (nodes in :attr:`RackTree.nodes` order)
    and live for the whole run, so each partition continues where the previous one left off.
    """

    def __init__(
        self, tree: RackTree, rng: Rng, trace: TraceSink | None = None, subject: str = "-"
    ) -> None:
        """Args:
        tree: the rack tree.
        rng: draws each node's first pointer.
        trace: receives a ``REPLICA_PLACED`` event per placed replica (with the pointers
            before the step) and a ``PARTITION_PLACED`` per :meth:`partition_placed`.
        subject: the trace events' subject prefix (the topic, or ``-``).
        """
        self.tree = tree
        self._tracing = trace is not None
        self._trace = trace if trace is not None else NullTraceSink()
        self._subject = subject
        self._partition_id = 0
        self._pointers: dict[tuple[str, ...], int] = {
            node.path: rng.randrange(node.ring_size) for node in tree.nodes
        }
        self._broker_sets = {node.path: node.child_broker_sets() for node in tree.nodes}
        self._all_broker_ids = tree.root.subtree_broker_ids()

    def pointers(self) -> dict[str, int]:
        """Each node's pointer, by rack name (for traces, tests and the model)."""
        return {rack_name(path): pointer for path, pointer in self._pointers.items()}

    def next_replica(self, taken: Iterable[int]) -> int:
        """Place one replica of a partition and advance the pointers on its way down.

        Args:
            taken: the brokers already holding a replica of this partition.

        Returns:
            The chosen broker, not in ``taken``.

        Raises:
            PlacementError: every broker of the tree already holds a replica.
        """
        taken_set = frozenset(taken)
        node = self.tree.root
        if len(taken_set & self._all_broker_ids) >= len(self._all_broker_ids):
            raise PlacementError(
                "every broker already holds a replica of the partition",
                INVALID_REPLICATION_FACTOR,
            )
        pointers_before = tuple(sorted(self.pointers().items())) if self._tracing else ()
        broker_id = self._walk(node, taken_set)
        if self._tracing:
            self._trace.emit(
                TraceEvent.of(
                    MACHINE,
                    PlacementEvent.REPLICA_PLACED.name,
                    f"{self._subject}-{self._partition_id}",
                    PlacementState.PLACING.name,
                    PlacementState.PLACING.name,
                    broker=broker_id,
                    taken=sorted(taken_set),
                    pointers=pointers_before,
                )
            )
        return broker_id

    def partition_placed(self, replicas: Sequence[int]) -> None:
        """Close the current partition (trace only: the pointers simply live on).

        Args:
            replicas: the partition's replicas, leader first.
        """
        self._trace.emit(
            TraceEvent.of(
                MACHINE,
                PlacementEvent.PARTITION_PLACED.name,
                f"{self._subject}-{self._partition_id}",
                PlacementState.PLACING.name,
                PlacementState.PLACED.name,
                replicas=list(replicas),
            )
        )
        self._partition_id += 1

    def _walk(self, node: RackNode, taken_set: frozenset[int]) -> int:
        while True:
            slots = self._broker_sets[node.path]
            # ``slot & taken`` iterates the smaller set (the partition's few replicas).
            counts = [len(slot & taken_set) for slot in slots]
            open_slots = [index for index, slot in enumerate(slots) if counts[index] < len(slot)]
            assert open_slots, "a node on the walk always has a broker free"
            fewest = min(counts[index] for index in open_slots)
            start = self._pointers[node.path]
            chosen = next(
                index
                for index in ((start + step) % len(slots) for step in range(len(slots)))
                if index in open_slots and counts[index] == fewest
            )
            self._pointers[node.path] = (chosen + 1) % len(slots)
            if node.broker_ids:
                broker_id = node.broker_ids[chosen]
                assert broker_id not in taken_set
                return broker_id
            node = node.children[chosen]


def pick_leader(replicas: Sequence[int], leader_counts: Mapping[int, int]) -> list[int]:
    """Reorder a partition's replicas so the one that led the fewest partitions leads.

    Args:
        replicas: the replicas in walk order.
        leader_counts: how many partitions each broker leads so far.

    Returns:
        The same replicas, the leader first, the rest in walk order; ties go to the earlier.
    """
    leader = min(replicas, key=lambda broker_id: leader_counts.get(broker_id, 0))
    return [leader, *(broker_id for broker_id in replicas if broker_id != leader)]


class MultiLevelRackPlacer:
    """KIP-879's multi-level rack-aware placer (see the module docstring)."""

    name = MULTI_LEVEL

    def __init__(self, rng: Rng, trace: TraceSink | None = None) -> None:
        """Args:
        rng: draws the ring pointers' first positions, once per placement run.
        trace: receives the walk's ``placement`` trace events (none by default).
        """
        self._rng = rng
        self._trace = trace

    def place(
        self,
        placement_spec: PlacementSpec,
        cluster_view: ClusterView,
        broker_ids: Sequence[int] | None,
    ) -> Assignment | None:
        """Place every replica through the rack tree.

        Args:
            placement_spec: what to place.
            cluster_view: the usable brokers with racks and the current assignments.
            broker_ids: the brokers to use, ``None`` for all.

        Returns:
            The assignment, or ``None`` (defer to rack-unaware) when no broker has a rack.

        Raises:
            PlacementError: the request cannot be placed, or a rack is invalid or missing.
        """
        brokers = usable_brokers(placement_spec, cluster_view, broker_ids)
        if all(broker.rack is None for broker in brokers):
            return None
        walk = RingWalk(
            build_rack_tree(brokers), self._rng, self._trace, placement_spec.topic or "-"
        )
        leader_counts: Counter[int] = Counter()
        if placement_spec.topic is not None:
            existing = cluster_view.topic_assignment(placement_spec.topic)
            leader_counts.update(replicas[0] for replicas in existing.values() if replicas)
        assignment: Assignment = []
        for _ in range(placement_spec.partition_count):
            replicas: list[int] = []
            for _ in range(placement_spec.replication_factor):
                replicas.append(walk.next_replica(replicas))
            ordered = pick_leader(replicas, leader_counts)
            leader_counts[ordered[0]] += 1
            walk.partition_placed(ordered)
            assignment.append(ordered)
        return assignment

    def increase_replication_factor(
        self,
        assignment: Sequence[Sequence[int]],
        replication_factor: int,
        cluster_view: ClusterView,
        broker_ids: Sequence[int] | None = None,
    ) -> Assignment:
        """Add replicas to existing partitions, continuing one walk across the partitions.

        KIP-879: "to increase the replication factor, we pick up where the algorithm left the
        last partition and continue". Existing replicas stay, in order (the leader keeps
        leading); each new replica goes where the walk, counting the existing ones, sends it.

        Args:
            assignment: the current replicas of each partition, in partition order.
            replication_factor: the new replication factor of every partition.
            cluster_view: the usable brokers with racks.
            broker_ids: the brokers new replicas may go to, ``None`` for all.

        Returns:
            The new assignment, each partition's current replicas first.

        Raises:
            PlacementError: a partition already has more replicas, too few brokers, or an
                invalid rack.
        """
        spec = PlacementSpec(
            partition_count=max(1, len(assignment)), replication_factor=replication_factor
        )
        brokers = usable_brokers(spec, cluster_view, broker_ids)
        walk = RingWalk(build_rack_tree(brokers), self._rng, self._trace)
        usable = {broker.broker_id for broker in brokers}
        increased: Assignment = []
        for partition_id, current in enumerate(assignment):
            if len(current) > replication_factor:
                raise PlacementError(
                    f"partition {partition_id} has {len(current)} replicas, more than the new "
                    f"replication factor {replication_factor}",
                    INVALID_REPLICATION_FACTOR,
                )
            missing = replication_factor - len(current)
            if missing > len(usable - set(current)):
                raise PlacementError(
                    f"partition {partition_id} needs {missing} more replicas but only "
                    f"{len(usable - set(current))} usable brokers hold none",
                    INVALID_REPLICATION_FACTOR,
                )
            replicas = list(current)
            for _ in range(missing):
                replicas.append(walk.next_replica(replicas))
            walk.partition_placed(replicas)
            increased.append(replicas)
        return increased
