"""The replica-move, recovery, log-dir and throttle models against their golden expectations.

Fast: every stored counterexample replays through the concrete interpretation and ends in a state
breaking its invariant (the symbolic and concrete readings agree); the shipped invariants are
proved by induction. Slow: the whole check of every variant equals the golden record.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from model import Status, check_variant
from model.registry import find

from ._golden import load, record, replay

MODELS = ("replica_move", "move_recovery", "log_dir_failure", "throttle")


def _counterexamples() -> list[Any]:
    cases = []
    for name in MODELS:
        for variant, data in load(name)["variants"].items():
            for invariant, entry in data["counterexamples"].items():
                cases.append(pytest.param(name, variant, invariant, entry,
                                          id=f"{name}-{variant}-{invariant}"))
    return cases


@pytest.mark.parametrize(("name", "variant", "invariant", "entry"), _counterexamples())
def test_golden_counterexample_replays_concretely(
    name: str, variant: str, invariant: str, entry: dict[str, Any]
) -> None:
    model = find(name).model(variant)
    steps, initial = entry["steps"], entry["initial"]
    state = replay(model, steps, initial)
    assert invariant in model.check_invariants(state)
    before_last = replay(model, steps[:-1], initial)
    assert invariant not in model.check_invariants(before_last), "not the shortest trace"


@pytest.mark.parametrize("name", MODELS)
def test_every_known_bad_variant_has_a_golden_counterexample(name: str) -> None:
    definition = find(name)
    golden = load(name)["variants"]
    assert set(golden) == {variant.name for variant in definition.variants}
    for variant in definition.variants:
        statuses = golden[variant.name]["statuses"]
        for invariant, expected in variant.expected.items():
            assert statuses[invariant] == expected.value
        if not variant.shipped:
            assert golden[variant.name]["counterexamples"], variant.name


@pytest.mark.parametrize("name", MODELS)
def test_shipped_invariants_are_proved(name: str) -> None:
    definition = find(name)
    result = check_variant(definition, depth=1)
    for invariant in result.invariants:
        assert invariant.status is Status.PROVED, (invariant.name, invariant.note)
    assert not result.errors


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_full_check_matches_golden(name: str) -> None:
    definition = find(name)
    golden = load(name)["variants"]
    for variant in definition.variants:
        result = check_variant(definition, variant, clock=time.perf_counter)
        assert result.ok, result.problems()
        assert record(result, definition.model(variant.name)) == golden[variant.name], (
            variant.name)
        assert all(r.counterexample is None or r.counterexample.replayed
                   for r in result.invariants)
