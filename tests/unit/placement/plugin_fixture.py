"""Placer plugins for the ``broker.replica.placer`` loading tests."""

from __future__ import annotations

from collections.abc import Sequence

from impl.controller.placement import ClusterView, PlacementSpec
from impl.ports import Rng


class LowestBrokersPlacer:
    """Places every partition on the lowest broker ids (a deterministic toy strategy)."""

    name = "lowest-brokers"

    def __init__(self, rng: Rng) -> None:
        self.rng = rng

    def place(
        self, placement_spec: PlacementSpec, cluster_view: ClusterView,
        broker_ids: Sequence[int] | None,
    ) -> list[list[int]]:
        ids = sorted(broker_ids if broker_ids is not None
                     else [b.broker_id for b in cluster_view.brokers])
        return [ids[: placement_spec.replication_factor]] * placement_spec.partition_count


class DeferringPlacer:
    """Always defers to Kafka's rack-unaware assignment."""

    def __init__(self, rng: Rng) -> None:
        self.rng = rng

    def place(self, *_: object) -> None:
        return None


class DuplicatingPlacer:
    """A broken plugin: both replicas on one broker."""

    def __init__(self, rng: Rng) -> None:
        self.rng = rng

    def place(self, placement_spec: PlacementSpec, *_: object) -> list[list[int]]:
        return [[1, 1] for _ in range(placement_spec.partition_count)]


NOT_A_PLACER = 42


def no_place_method(rng: Rng) -> object:
    """A factory returning something without ``place``."""
    return object()


class CrashingPlacer:
    """A broken plugin whose place raises."""

    def __init__(self, rng: Rng) -> None:
        self.rng = rng

    def place(self, *_: object) -> list[list[int]]:
        raise KeyError("lost\nits way")


class NoRngPlacer:
    """A plugin whose constructor does not take ``rng``."""

    def place(self, *_: object) -> None:
        return None
