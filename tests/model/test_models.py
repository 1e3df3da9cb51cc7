"""The replica-move, recovery, log-dir and throttle models against their golden expectations.

Fast: the golden file covers every variant and invariant and agrees with the variants'
expectations; every stored counterexample replays through the concrete interpretation and breaks
its invariant at its last step, not before (the symbolic and concrete readings agree); the
shipped invariants are proved by induction. Slow: the whole check of every variant equals the
golden record.
"""

from __future__ import annotations

import pytest

from model import Status, check_variant
from model.registry import find

from ._golden import ModelGolden

MODELS = ("replica_move", "move_recovery", "log_dir_failure", "throttle", "log_cleaner",
          "controller_election", "controller_failover_vouching")
GOLDS = {name: ModelGolden(find(name)) for name in MODELS}


@pytest.mark.parametrize(
    ("name", "variant", "invariant"),
    [pytest.param(name, variant, invariant, id=f"{name}-{variant}-{invariant}")
     for name, gold in GOLDS.items() for variant, invariant, _ in gold.violations()],
)
def test_golden_counterexample_replays_concretely(name: str, variant: str, invariant: str) -> None:
    GOLDS[name].assert_golden_counterexample_replays(variant, invariant)


@pytest.mark.parametrize("name", MODELS)
def test_golden_file_covers_and_agrees_with_every_variant(name: str) -> None:
    gold = GOLDS[name]
    gold.assert_covers_every_variant_and_invariant()
    gold.assert_expectations_agree(complete=False)
    for variant in gold.known_bad:
        assert gold.violated(variant), variant
    assert not gold.violated(gold.definition.shipped.name)


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
    for variant in GOLDS[name].definition.variants:
        GOLDS[name].assert_full_check_matches(variant.name)
