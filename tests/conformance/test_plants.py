"""The planted bugs (``conformance/plants.py``): every anchor still names its decision, a cheap
subset is caught by the default conformance run in the default test run, and every plant within
its seed budget under ``slow``."""

from __future__ import annotations

import pytest

from conformance.plants import (
    GAPS,
    PLANTS,
    Plant,
    PlantStale,
    planted_source,
    run_plant,
    source_path,
)

#: Plants the default run catches in its first seeds (a few seconds each).
CHEAP = ("hw_from_the_leader_alone", "election_keeps_the_epoch", "serve_while_loading")


def test_the_list_spans_the_four_areas() -> None:
    areas = {plant.area for plant in PLANTS}
    assert areas == {"replication", "controller", "storage", "groups"}
    assert len(PLANTS) >= 10
    every = (*PLANTS, *GAPS)
    assert len({plant.name for plant in every}) == len(every)
    assert all(plant.caught_at[0] >= 0 for plant in PLANTS)
    assert all(plant.caught_at[0] < plant.seeds for plant in PLANTS)


@pytest.mark.parametrize("plant", [*PLANTS, *GAPS], ids=lambda plant: plant.name)
def test_every_anchor_occurs_once(plant: Plant) -> None:
    """A refactor that moves a planted decision fails here, loudly, naming the plant."""
    planted = planted_source(plant)
    assert planted != source_path(plant.module).read_text()
    assert plant.replacement in planted


def test_a_moved_anchor_is_reported() -> None:
    moved = Plant("moved", "storage", "impl.storage.log", "no such code", "x", "", 1, (-1, ""))
    with pytest.raises(PlantStale, match="moved"):
        planted_source(moved)


@pytest.mark.parametrize("name", CHEAP)
def test_cheap_plants_are_caught(name: str) -> None:
    plant = next(p for p in PLANTS if p.name == name)
    result = run_plant(plant)
    assert result.caught, f"{name} survived {result.seeds_run} seeds of the default run"


def test_the_shipped_code_passes_the_seeds_that_catch_the_cheap_plants() -> None:
    """The seeds that catch a plant pass without it (the plant, not the seed, fails)."""
    from conformance.cluster_sim import ClusterConfig
    from conformance.runner import run_seed

    for name in CHEAP:
        plant = next(p for p in PLANTS if p.name == name)
        seed = plant.caught_at[0]
        if seed >= 0:
            assert not run_seed(seed, ClusterConfig()).failed


def test_a_served_torn_batch_is_reported_as_a_read_violation() -> None:
    """Recovery without its CRC check serves a torn batch: the storage broker's read of its
    compacted partition refuses it (READ_CONSISTENT), where the record walk used to raise
    CorruptBatch out of the checker (IMPLEMENTATION_ERROR, as if the broker had failed)."""
    plant = next(p for p in PLANTS if p.name == "recovery_without_crc")
    result = run_plant(plant, seeds=plant.caught_at[0] + 1)
    assert (result.caught_seed, result.invariant) == plant.caught_at == (2, "READ_CONSISTENT")


@pytest.mark.slow
@pytest.mark.parametrize("plant", PLANTS, ids=lambda plant: plant.name)
def test_every_plant_is_caught_within_its_budget(plant: Plant) -> None:
    result = run_plant(plant)
    assert result.caught, f"{plant.name} survived {result.seeds_run} seeds of the default run"
