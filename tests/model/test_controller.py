"""The controller model (spec/controller.md): golden statuses, the zombie-controller
counterexample (KAFKA-6082) replayed concretely, the shipped variant proved, the witness reached.

The golden file ``golden/controller.json`` records, for every variant and invariant, the status of
a full check at the model's default depth and the length of every counterexample; the full
comparison is ``slow``, the default tests check each counterexample at its own length.
"""

from __future__ import annotations

import pytest

from model import ModelDefinition, Status
from model.controller import MODELS, ControllerEvent

from ._golden import ModelGolden, by_name

DEFINITION: ModelDefinition = MODELS[0]
GOLD = ModelGolden(DEFINITION)
GOLDEN = GOLD.golden
KNOWN_BAD = GOLD.known_bad
#: The depth the default shipped check uses (induction does not depend on it).
SHALLOW_DEPTH = 4


def test_golden_file_covers_every_variant_and_invariant() -> None:
    GOLD.assert_covers_every_variant_and_invariant()


def test_variant_expectations_agree_with_the_golden_file() -> None:
    GOLD.assert_expectations_agree()


def test_every_known_bad_variant_is_refuted_in_the_golden_file() -> None:
    for variant in KNOWN_BAD:
        assert GOLD.violated(variant), variant
    assert not GOLD.violated(DEFINITION.shipped.name)


def test_actions_are_controller_events() -> None:
    names = {event.value for event in ControllerEvent}
    assert set(DEFINITION.model().actions) <= names


@pytest.mark.parametrize("variant", KNOWN_BAD)
def test_known_bad_counterexample_is_found_and_replays(variant: str) -> None:
    GOLD.assert_counterexample_found_and_replays(variant)


def test_zombie_controller_counterexample_is_kafka_6082() -> None:
    length = GOLD.violated("no_controller_epoch_check")["CONTROLLER_FENCED"]["length"]
    assert length == 4
    result = GOLD.check("no_controller_epoch_check", length)
    trace = by_name(result)["CONTROLLER_FENCED"].counterexample
    assert trace is not None
    names = [step.action_name for step in trace.steps[1:]]
    assert names == ["controller_elected", "session_expired", "controller_elected",
                     "leader_elected"]
    zombie = trace.steps[1].args["c"]
    assert trace.steps[2].args["c"] == zombie
    assert trace.steps[3].args["c"] != zombie
    assert trace.steps[4].args["c"] == zombie


def test_shipped_variant_is_proved_and_its_witness_reached() -> None:
    result = GOLD.check(DEFINITION.shipped.name, SHALLOW_DEPTH)
    assert result.errors == ()
    golden = GOLDEN["variants"]["shipped"]
    for invariant in result.invariants:
        assert invariant.status.value == golden["invariants"][invariant.name]["status"]
        assert invariant.status is Status.PROVED
    for witness in result.witnesses:
        assert witness.reached
        assert witness.trace is not None
        assert witness.trace.length == golden["witnesses"][witness.name]


def test_concrete_zombie_write_is_refused_by_the_shipped_check() -> None:
    shipped = DEFINITION.model()
    bad = DEFINITION.model("no_controller_epoch_check")
    for model, lands in ((shipped, False), (bad, True)):
        [state] = model.initial_states()
        state = model.step(state, "controller_elected", {"c": 0})
        state = model.step(state, "session_expired", {"c": 0})
        state = model.step(state, "controller_elected", {"c": 1})
        assert model.enabled(state, "leader_elected", {"c": 0, "b": 2}) is lands
        assert model.enabled(state, "zk_write_fenced", {"c": 0}) is not lands
        if not lands:
            state = model.step(state, "zk_write_fenced", {"c": 0})
            assert state.active[0] is False


@pytest.mark.slow
@pytest.mark.parametrize("variant", [variant.name for variant in DEFINITION.variants])
def test_full_check_matches_the_golden_file(variant: str) -> None:
    GOLD.assert_full_check_matches(variant)
