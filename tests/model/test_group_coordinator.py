"""The group coordinator model against its golden expectations.

Fast: the golden file covers every variant and invariant and agrees with the variants'
expectations; every stored counterexample (commits from any generation, serving while loading,
acks=1 offsets, a zombie coordinator) replays through the concrete interpretation and breaks its
invariant at its last step; the shipped invariants are proved by induction. Slow: the whole check
of every variant equals the golden record.
"""

from __future__ import annotations

import pytest

from model import Status, check_variant
from model.registry import find

from ._golden import ModelGolden

GOLD = ModelGolden(find("group_coordinator"))


@pytest.mark.parametrize(
    ("variant", "invariant"),
    [pytest.param(variant, invariant, id=f"{variant}-{invariant}")
     for variant, invariant, _ in GOLD.violations()],
)
def test_golden_counterexample_replays_concretely(variant: str, invariant: str) -> None:
    GOLD.assert_golden_counterexample_replays(variant, invariant)


def test_golden_file_covers_and_agrees_with_every_variant() -> None:
    GOLD.assert_covers_every_variant_and_invariant()
    GOLD.assert_expectations_agree(complete=False)
    for variant in GOLD.known_bad:
        assert GOLD.violated(variant), variant
    assert not GOLD.violated(GOLD.definition.shipped.name)


def test_shipped_invariants_are_proved() -> None:
    result = check_variant(find("group_coordinator"), depth=1)
    for invariant in result.invariants:
        assert invariant.status is Status.PROVED, (invariant.name, invariant.note)
    assert not result.errors


@pytest.mark.slow
def test_full_check_matches_golden() -> None:
    for variant in GOLD.definition.variants:
        GOLD.assert_full_check_matches(variant.name)
