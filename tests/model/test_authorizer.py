"""The authorizer model against its golden expectations (ACL_DENY_WINS, ACL_NO_ESCALATION).

Fast: the golden file covers every variant and agrees with the expectations; each stored
counterexample replays concretely and breaks its invariant at its last step only; the shipped
invariants are proved by induction and the witness is reachable. Slow: the full re-check equals
the golden record.
"""

from __future__ import annotations

import pytest

from model import Status, check_variant
from model.registry import find

from ._golden import ModelGolden

GOLD = ModelGolden(find("authorizer"))


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
    assert not GOLD.violated("shipped")


def test_shipped_invariants_are_proved_and_the_witness_is_reached() -> None:
    result = check_variant(find("authorizer"), depth=2)
    for invariant in result.invariants:
        assert invariant.status is Status.PROVED, (invariant.name, invariant.note)
    assert [witness.trace is not None for witness in result.witnesses] == [True]
    assert not result.errors


@pytest.mark.slow
def test_full_check_matches_golden() -> None:
    for variant in GOLD.definition.variants:
        GOLD.assert_full_check_matches(variant.name)
