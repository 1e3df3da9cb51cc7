"""Choosing a placer (``broker.replica.placer``) and running it the way the controller must.

KIP-879 "Pluggable Partition Assignment Strategy": the broker config ``broker.replica.placer``
names the placer, built in or a plugin; a placer may return ``None`` to defer to Kafka's
rack-unaware assignment, or fail with an error. :func:`place_replicas` is the one entry point
the controller (CreateTopics, CreatePartitions) and the CreateReplicaPlacement handler call: it
validates the request, honours ``force_simple_placement`` and the broker subset, defers on
``None``, and checks the placer's answer before anyone writes it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence

from impl.ports import Rng, SeededRng

from ._errors import INVALID_CONFIG, PlacementError
from ._kafka import RACK_AWARE, RACK_UNAWARE, RackAwarePlacer, RackUnawarePlacer
from ._multi_level import MULTI_LEVEL, MultiLevelRackPlacer
from ._types import Assignment, ClusterView, PlacementSpec, ReplicaPlacer, TopicPartition
from ._validate import usable_brokers, validate_assignment

__sans_io__ = True

#: The broker config naming the placer (KIP-879).
BROKER_REPLICA_PLACER_CONFIG = "broker.replica.placer"
#: The broker config declaring a broker's rack (multi-level: a path such as ``/DC1/R1``).
BROKER_RACK_CONFIG = "broker.rack"
#: KIP-879: the default stays Kafka's current rack-aware assignment.
DEFAULT_REPLICA_PLACER = RACK_AWARE

#: The built-in placers by their ``broker.replica.placer`` names.
BUILT_IN_PLACERS: Mapping[str, Callable[[Rng], ReplicaPlacer]] = {
    RACK_UNAWARE: RackUnawarePlacer,
    RACK_AWARE: RackAwarePlacer,
    MULTI_LEVEL: MultiLevelRackPlacer,
}


def load_replica_placer(name: str, rng: Rng) -> ReplicaPlacer:
    """The placer ``broker.replica.placer`` names.

    Args:
        name: a built-in name (``rack-unaware``, ``rack-aware``, ``multi-level``) or the dotted
            path of a plugin, ``package.module.Name`` or ``package.module:Name``, where ``Name``
            is a class or factory called with one keyword argument ``rng`` that returns an
            object with the :class:`ReplicaPlacer` ``place`` method.
        rng: the placer's randomness (seed it for reproducible placements).

    Returns:
        The placer.

    Raises:
        PlacementError: the name is empty, the plugin cannot be imported, or it is no placer.
    """
    name = name.strip()
    if not name:
        raise PlacementError(f"{BROKER_REPLICA_PLACER_CONFIG} is empty", INVALID_CONFIG)
    built_in = BUILT_IN_PLACERS.get(name)
    if built_in is not None:
        return built_in(rng)
    module_name, separator, attribute = name.partition(":")
    if not separator:
        module_name, _, attribute = name.rpartition(".")
    if not module_name or not attribute:
        raise PlacementError(
            f"{BROKER_REPLICA_PLACER_CONFIG}={name!r} is neither a built-in placer "
            f"({', '.join(sorted(BUILT_IN_PLACERS))}) nor a dotted path module.Name",
            INVALID_CONFIG,
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise PlacementError(
            f"{BROKER_REPLICA_PLACER_CONFIG}={name!r}: cannot import {module_name}: {error}",
            INVALID_CONFIG,
        ) from error
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise PlacementError(
            f"{BROKER_REPLICA_PLACER_CONFIG}={name!r}: {module_name} has no callable {attribute}",
            INVALID_CONFIG,
        )
    try:
        placer = factory(rng=rng)
    except Exception as error:  # a plugin's constructor can fail in any way: its blame
        raise PlacementError(
            f"{BROKER_REPLICA_PLACER_CONFIG}={name!r}: {attribute}(rng=...) failed: "
            f"{_one_line(error)}",
            INVALID_CONFIG,
        ) from error
    if not callable(getattr(placer, "place", None)):
        raise PlacementError(
            f"{BROKER_REPLICA_PLACER_CONFIG}={name!r} built a {type(placer).__name__} without a "
            "place method",
            INVALID_CONFIG,
        )
    result: ReplicaPlacer = placer
    return result


def _one_line(error: BaseException) -> str:
    return " ".join(f"{type(error).__name__}: {error}".split())


def placer_name(placer: ReplicaPlacer) -> str:
    """A placer's display name: its ``name`` attribute, else its class name."""
    name = getattr(placer, "name", None)
    return name if isinstance(name, str) else type(placer).__name__


def place_replicas(
    placer: ReplicaPlacer,
    placement_spec: PlacementSpec,
    cluster_view: ClusterView,
    broker_ids: Sequence[int] | None = None,
    *,
    rng: Rng,
) -> Assignment:
    """Place replicas as the controller does: validate, run the placer, defer, check.

    Args:
        placer: the configured placer (:func:`load_replica_placer`).
        placement_spec: what to place.
        cluster_view: the usable brokers with racks and the current assignments.
        broker_ids: the brokers to use, ``None`` for all.
        rng: the randomness of Kafka's rack-unaware assignment, used when the spec forces
            simple placement or the placer returns ``None``.

    Returns:
        ``assignment[i]`` = the replicas of partition ``start_partition_id + i``, leader first.

    Raises:
        PlacementError: the request cannot be placed, or the placer's answer is malformed.
    """
    brokers = usable_brokers(placement_spec, cluster_view, broker_ids)
    assignment: Assignment | None = None
    used = placer
    if not placement_spec.force_simple_placement:
        try:
            assignment = placer.place(placement_spec, cluster_view, broker_ids)
        except (PlacementError, AssertionError):
            raise
        except Exception as error:  # a plugin's bug is answered as an error, not a crash
            raise PlacementError(
                f"placer {placer_name(placer)} failed: {_one_line(error)}"
            ) from error
    if assignment is None:
        used = RackUnawarePlacer(rng)
        assignment = used.place(placement_spec, cluster_view, broker_ids)
    validate_assignment(assignment, placement_spec, brokers, placer_name(used))
    return [list(replicas) for replicas in assignment]


def propose_reassignment(
    current_assignment: Mapping[TopicPartition, Sequence[int]],
    cluster_view: ClusterView,
    placer: ReplicaPlacer | str,
    seed: int,
    *,
    broker_ids: Sequence[int] | None = None,
    force_simple_placement: bool = False,
) -> dict[TopicPartition, list[int]]:
    """A new assignment for the given partitions, as ``kafka-reassign-partitions --generate``.

    Each topic is placed afresh, topics in name order, with the number of partitions given for
    it and the replication factor of its lowest partition (Kafka reads the first partition's);
    the i-th lowest partition id gets the i-th placed replica list. One seed drives every draw,
    so the same inputs and seed give the same proposal.

    Args:
        current_assignment: the partitions to move, with their current replicas.
        cluster_view: the usable brokers with racks (and the whole current assignment).
        placer: the placer, or its ``broker.replica.placer`` name (then built with the seed).
        seed: the seed of every random draw.
        broker_ids: the brokers to move to (``--broker-list``), ``None`` for all.
        force_simple_placement: use Kafka's rack-unaware assignment (``--disable-rack-aware``).

    Returns:
        The proposed replicas of every given partition, leader first.

    Raises:
        PlacementError: a partition without replicas, or the topics cannot be placed.
    """
    rng = SeededRng(seed)
    chosen = load_replica_placer(placer, rng) if isinstance(placer, str) else placer
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in current_assignment:
        by_topic.setdefault(tp.topic, []).append(tp)
    proposal: dict[TopicPartition, list[int]] = {}
    for topic in sorted(by_topic):
        partitions = sorted(by_topic[topic])
        replication_factor = len(current_assignment[partitions[0]])
        if replication_factor == 0:
            raise PlacementError(f"partition {partitions[0]} has no replicas to reassign")
        spec = PlacementSpec(
            partition_count=len(partitions),
            replication_factor=replication_factor,
            force_simple_placement=force_simple_placement,
        )
        assignment = place_replicas(chosen, spec, cluster_view, broker_ids, rng=rng)
        for tp, replicas in zip(partitions, assignment, strict=True):
            proposal[tp] = replicas
    return proposal
