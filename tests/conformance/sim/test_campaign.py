"""Campaign-sized runs (``-m slow``): many swarm seeds of the shipped implementation pass, and
each known-bad variant is caught in most seeds."""

from __future__ import annotations

import pytest

from conformance import run_seed, swarm_config
from conformance.move_sim import SimConfig

pytestmark = pytest.mark.slow


def test_shipped_passes_a_swarm_campaign() -> None:
    failures = []
    for seed in range(300):
        result = run_seed(seed, swarm_config(seed, steps=300))
        if result.failed:
            failures.append(f"{result.violated_invariant}: {result.replay_command}")
    assert not failures, "\n".join(failures[:10])


@pytest.mark.parametrize("variant", ["unlocked_swap", "swap_before_durable"])
def test_known_bad_variants_fail_most_seeds(variant: str) -> None:
    config = SimConfig(steps=300, variant=variant)
    caught = sum(run_seed(seed, config).failed for seed in range(60))
    assert caught >= 30, f"{variant} caught in only {caught} of 60 seeds"
