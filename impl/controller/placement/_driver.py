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

from impl.ports import Rng

from ._errors import INVALID_CONFIG, PlacementError
from ._kafka import RACK_AWARE, RACK_UNAWARE, RackAwarePlacer, RackUnawarePlacer
from ._multi_level import MULTI_LEVEL, MultiLevelRackPlacer
from ._types import Assignment, ClusterView, PlacementSpec, ReplicaPlacer
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
    placer = factory(rng=rng)
    if not callable(getattr(placer, "place", None)):
        raise PlacementError(
            f"{BROKER_REPLICA_PLACER_CONFIG}={name!r} built a {type(placer).__name__} without a "
            "place method",
            INVALID_CONFIG,
        )
    result: ReplicaPlacer = placer
    return result


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
        assignment = placer.place(placement_spec, cluster_view, broker_ids)
    if assignment is None:
        used = RackUnawarePlacer(rng)
        assignment = used.place(placement_spec, cluster_view, broker_ids)
    validate_assignment(assignment, placement_spec, brokers, placer_name(used))
    return [list(replicas) for replicas in assignment]
