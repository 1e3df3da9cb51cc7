"""The multi-level placement walk (KIP-879 "Multi-level rack assignment"), spec/placement.md.

One small rack tree, fixed per model definition; the state is the ring pointer of every node
with more than one child and the brokers holding a replica of the partition being placed.
``replica_placed(b)`` is the walk placing the next replica on broker ``b``: it is enabled for
exactly the broker the walk reaches (at every node on the way, the child the pointer designates
among the children with a free broker and the fewest replicas of the partition), and it
advances every pointer on the way past the chosen child. ``partition_placed`` closes the
partition after any number of replicas (so every replication factor up to the broker count is
covered, and a closed partition's successor starts from the pointers where it left off). The
initial pointers are every combination: the seeded random start of the implementation.

``PLACEMENT_SPREAD`` (the replica part; the leader part spans partitions and is checked by the
implementation's property tests) must hold after every placed replica: at every node, no child
holds more than one replica more than a sibling that still has a free broker. Because it holds
after each replica, a replication factor raised later (replicas added to a closed partition by
the same walk) keeps it too. ``run_started`` redraws the pointers while a partition keeps its
replicas: a later placement run raising the replication factor of an existing partition.

Variants: ``shipped`` (the implementation's walk); ``plain_ring`` (the KIP's text read
literally: the first child with a free broker from the pointer, no fewest-replicas guard) is
refuted once a later run raises a replication factor from fresh pointers (within one run it
holds: the ring alone hands replicas out round-robin); ``no_advance``
(step 3 without advancing the pointer) and ``flat_racks`` (Kafka's rack-aware view, each full
rack path one flat rack: the KIP's motivation) are refuted.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._dsl import Bool, Int, Model, ModelDefinition, Ops, State, Status, Term, Transition, Variant

__sans_io__ = True


class PlacementEvent(enum.Enum):
    """The transitions of the placement machine (model action = lower-case name)."""

    REPLICA_PLACED = "replica_placed"  #: KIP-879 multi-level steps 3-4: one replica walked down
    PARTITION_PLACED = "partition_placed"  #: the partition has its replicas; the next one starts


PLACEMENT_SPREAD = "PLACEMENT_SPREAD"

#: An irregular tree: branches of different depths, a rack of two brokers, a one-broker DC.
IRREGULAR_TREE: Mapping[int, str] = {
    0: "/DC0/R0",
    1: "/DC0/R1",
    2: "/DC0/R1",
    3: "/DC1",
    4: "/DC2/R0",
}
#: The KIP's example: three data centres of two racks, one broker per rack.
KIP_EXAMPLE_TREE: Mapping[int, str] = {
    0: "/DC1/R1",
    1: "/DC1/R2",
    2: "/DC2/R1",
    3: "/DC2/R2",
    4: "/DC3/R1",
    5: "/DC3/R2",
}


@dataclass(frozen=True)
class _Node:
    """A tree node: its path, its ring of children (paths, or broker ids at a rack)."""

    path: tuple[str, ...]
    child_paths: tuple[tuple[str, ...], ...]
    broker_ids: tuple[int, ...]

    @property
    def ring_size(self) -> int:
        return len(self.child_paths) or len(self.broker_ids)

    @property
    def variable(self) -> str:
        return pointer_variable(self.path)


def pointer_variable(path: Sequence[str]) -> str:
    """The state variable holding the ring pointer of the node at ``path`` (``()`` = root)."""
    name = "_".join(path) if path else "root"
    return "pointer_" + "".join(c if c.isalnum() else "_" for c in name)


def _levels(rack: str) -> tuple[str, ...]:
    assert rack.startswith("/"), rack
    assert all(rack[1:].split("/")), rack
    return tuple(rack[1:].split("/"))


def _tree(racks: Mapping[int, str]) -> dict[tuple[str, ...], _Node]:
    """Every node by path; children sorted by name, brokers by id (the implementation's order)."""
    paths = {broker: _levels(rack) for broker, rack in racks.items()}
    inner: set[tuple[str, ...]] = {path[:depth] for path in paths.values()
                                   for depth in range(len(path))}
    leaves = set(paths.values())
    assert not inner & leaves, "a rack of brokers cannot also be a parent"
    nodes: dict[tuple[str, ...], _Node] = {}
    for path in sorted(inner | leaves):
        children = tuple(sorted(
            {p[: len(path) + 1] for p in inner | leaves if len(p) > len(path)
             and p[: len(path)] == path}
        ))
        brokers = tuple(sorted(b for b, p in paths.items() if p == path))
        nodes[path] = _Node(path, () if brokers else children, brokers)
    return nodes


def _subtree(nodes: Mapping[tuple[str, ...], _Node], path: tuple[str, ...]) -> tuple[int, ...]:
    node = nodes[path]
    if node.broker_ids:
        return node.broker_ids
    return tuple(b for child in node.child_paths for b in _subtree(nodes, child))


def build_for(racks: Mapping[int, str], variant: Variant) -> Model:
    """The placement model over the tree of ``racks`` for one variant.

    Flags (defaults are the shipped walk):
        fewest_guard: among children with a free broker take the first, from the pointer, with
            the fewest replicas of the partition (``True``); else the first with a free broker.
        advance: move each pointer on the way past the chosen child (``True``).
        flat_racks: walk a tree whose levels are the full rack strings (Kafka's flat racks)
            while the invariant judges the real tree (``False``).
    """
    fewest_guard: bool = variant.flags.get("fewest_guard", True)
    advance: bool = variant.flags.get("advance", True)
    flat_racks: bool = variant.flags.get("flat_racks", False)

    brokers = tuple(sorted(racks))
    real_nodes = _tree(racks)
    walk_nodes = (
        _tree({b: "/" + rack.replace("/", "|") for b, rack in racks.items()})
        if flat_racks else real_nodes
    )
    ringed = [node for node in walk_nodes.values() if node.ring_size > 1]

    m = Model("placement", "the multi-level placement walk over one rack tree (KIP-879)")
    m.var("held", Bool(), over=[brokers], doc="the broker holds a replica of the partition")
    for node in ringed:
        m.var(node.variable, Int(0, node.ring_size - 1),
              doc=f"ring pointer of {'/' + '/'.join(node.path)}")

    def slots(node: _Node) -> list[tuple[int, ...]]:
        if node.broker_ids:
            return [(b,) for b in node.broker_ids]
        return [_subtree(walk_nodes, child) for child in node.child_paths]

    def count(o: Ops, s: State, members: Sequence[int]) -> Term:
        return o.Count(*[s.held[b] for b in members])

    def is_open(o: Ops, s: State, members: Sequence[int]) -> Term:
        return o.Or(*[o.Not(s.held[b]) for b in members])

    def candidate(o: Ops, s: State, node: _Node, index: int) -> Term:
        """Child ``index`` may be taken: it has a free broker (and the fewest, if guarded)."""
        ring = slots(node)
        own = ring[index]
        conditions = [is_open(o, s, own)]
        if fewest_guard:
            conditions.extend(
                o.Implies(is_open(o, s, other), count(o, s, own) <= count(o, s, other))
                for other in ring
            )
        return o.And(*conditions)

    def pointer(s: State, node: _Node) -> Term:
        return s[node.variable] if node.ring_size > 1 else 0

    def chooses(o: Ops, s: State, node: _Node, index: int) -> Term:
        """The node's ring, read from its pointer, reaches child ``index`` first."""
        size = node.ring_size
        cases = []
        for start in range(size):
            skipped = [(start + step) % size for step in range((index - start) % size)]
            cases.append(o.Implies(
                pointer(s, node) == start,
                o.And(*[o.Not(candidate(o, s, node, other)) for other in skipped]),
            ))
        return o.And(candidate(o, s, node, index), *cases)

    def path_to(broker: int) -> list[tuple[_Node, int]]:
        """The (node, child index) pairs the walk passes to reach ``broker``."""
        steps: list[tuple[_Node, int]] = []
        node = walk_nodes[()]
        while True:
            if node.broker_ids:
                steps.append((node, node.broker_ids.index(broker)))
                return steps
            index = next(i for i, child in enumerate(node.child_paths)
                         if broker in _subtree(walk_nodes, child))
            steps.append((node, index))
            node = walk_nodes[node.child_paths[index]]

    start_params = {node.variable: range(node.ring_size) for node in ringed}

    @m.init(params=start_params)
    def init(o: Ops, **starts: int) -> dict[str, Any]:
        return {"held": False, **starts}

    @m.action(modifies=["held", *(node.variable for node in ringed)], params={"b": brokers})
    def replica_placed(o: Ops, s: State, b: int) -> Transition:
        """The walk places the partition's next replica on ``b`` (KIP-879 steps 3 and 4)."""
        steps = path_to(b)
        update: dict[str, Any] = {"held": {b: True}}
        if advance:
            for node, index in steps:
                if node.ring_size > 1:
                    update[node.variable] = (index + 1) % node.ring_size
        return Transition(o.And(*[chooses(o, s, node, index) for node, index in steps]), update)

    @m.action(modifies=[node.variable for node in ringed], params=start_params)
    def run_started(o: Ops, s: State, **starts: int) -> Transition:
        """A later placement run (another request, a replication factor raised later) draws
        fresh pointers while the partition keeps the replicas it has."""
        return Transition(True, dict(starts))

    @m.action(modifies=["held"])
    def partition_placed(o: Ops, s: State) -> Transition:
        """The partition has its replicas; the next partition starts from these pointers."""
        return Transition(o.Or(*[s.held[b] for b in brokers]), {"held": dict.fromkeys(brokers,
                                                                                     False)})

    @m.invariant(PLACEMENT_SPREAD)
    def placement_spread(o: Ops, s: State) -> Term:
        """At every node of the real tree, no child holds more than one replica more than a
        sibling that still has a free broker."""
        conditions = []
        for node in real_nodes.values():
            ring = (
                [(b,) for b in node.broker_ids] if node.broker_ids
                else [_subtree(real_nodes, child) for child in node.child_paths]
            )
            for own in ring:
                for other in ring:
                    conditions.append(o.Implies(
                        is_open(o, s, own), count(o, s, other) <= count(o, s, own) + 1
                    ))
        return o.And(*conditions)

    @m.witness("EVERY_BROKER_HOLDS_A_REPLICA")
    def every_broker(o: Ops, s: State) -> Term:
        """A partition with as many replicas as brokers."""
        return o.And(*[s.held[b] for b in brokers])

    @m.witness("SECOND_PARTITION_STARTED")
    def second_partition(o: Ops, s: State) -> Term:
        """Some replica of a later partition, placed from the pointers the first one left."""
        moved = [s[node.variable] != 0 for node in ringed]
        return o.And(o.Or(*[s.held[b] for b in brokers]), o.Or(*moved) if moved else True)

    return m


P, V = Status.PROVED, Status.VIOLATED


def _variants() -> tuple[Variant, ...]:
    return (
        Variant("shipped", "the implementation's walk: free broker, fewest replicas, advance",
                shipped=True, expected={PLACEMENT_SPREAD: P}),
        Variant("plain_ring", "the KIP's text literally: first child with a free broker; "
                "breaks when a later run raises a replication factor",
                {"fewest_guard": False}, expected={PLACEMENT_SPREAD: V}),
        Variant("no_advance", "step 3 without advancing the pointer",
                {"fewest_guard": False, "advance": False}, expected={PLACEMENT_SPREAD: V}),
        Variant("flat_racks", "Kafka's rack-aware view: every rack path one flat rack",
                {"flat_racks": True}, expected={PLACEMENT_SPREAD: V}),
    )


MODELS = (
    ModelDefinition(
        name="placement",
        doc="multi-level placement walk over an irregular five-broker tree",
        build=lambda variant: build_for(IRREGULAR_TREE, variant),
        variants=_variants(),
        depth=7,
        source="KIP-879 Multi-level rack assignment",
    ),
    ModelDefinition(
        name="placement_kip_example",
        doc="multi-level placement walk over the KIP's three DCs of two racks",
        build=lambda variant: build_for(KIP_EXAMPLE_TREE, variant),
        variants=_variants(),
        depth=7,
        source="KIP-879 Multi-level rack assignment",
    ),
)
