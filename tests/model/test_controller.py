"""The controller model (spec/controller.md): golden statuses, the zombie-controller
counterexample (KAFKA-6082) replayed concretely, the shipped variant proved, the witness reached.

The golden file ``golden/controller.json`` records, for every variant and invariant, the status of
a full check at the model's default depth and the length of every counterexample; the full
comparison is ``slow``, the default tests check each counterexample at its own length.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from model import (
    ActionInstance,
    ActionNotEnabled,
    Model,
    ModelDefinition,
    State,
    Status,
    Trace,
    VariantResult,
    check_variant,
)
from model._report import flatten_state
from model.controller import MODELS, ControllerEvent

DEFINITION: ModelDefinition = MODELS[0]
GOLDEN: dict[str, Any] = json.loads(
    (Path(__file__).parent / "golden" / "controller.json").read_text()
)
KNOWN_BAD = [variant.name for variant in DEFINITION.variants if not variant.shipped]
#: The depth the default shipped check uses (induction does not depend on it).
SHALLOW_DEPTH = 4


@functools.cache
def _check(variant: str, depth: int) -> VariantResult:
    """One check, shared by the tests that read it (checks are deterministic)."""
    return check_variant(DEFINITION, variant, depth=depth)


def _by_name(result: VariantResult) -> dict[str, Any]:
    return {invariant.name: invariant for invariant in result.invariants}


def _replay(model: Model, trace: Trace) -> State:
    """Replay a counterexample's steps through the concrete interpretation.

    Raises:
        ActionNotEnabled: a step is not enabled in ``model`` (e.g. the shipped variant).
        KeyError: a step names an action instance ``model`` does not have.
    """
    initial = [state for state in model.initial_states()
               if flatten_state(state) == dict(trace.steps[0].state)]
    assert len(initial) == 1, "the trace starts in exactly one initial state"
    instances: dict[str, ActionInstance] = {
        instance.label: instance for instance in model.instances()
    }
    state = initial[0]
    for step in trace.steps[1:]:
        assert step.action is not None
        state = model.step_instance(state, instances[step.action])
    return state


def _violated(variant: str) -> dict[str, dict[str, Any]]:
    invariants: dict[str, dict[str, Any]] = GOLDEN["variants"][variant]["invariants"]
    return {name: entry for name, entry in invariants.items() if entry["status"] == "violated"}


def test_golden_file_covers_every_variant_and_invariant() -> None:
    assert GOLDEN["depth"] == DEFINITION.depth
    assert set(GOLDEN["variants"]) == {variant.name for variant in DEFINITION.variants}
    for variant in DEFINITION.variants:
        names = set(DEFINITION.model(variant.name).invariants)
        assert set(GOLDEN["variants"][variant.name]["invariants"]) == names


def test_variant_expectations_agree_with_the_golden_file() -> None:
    for variant in DEFINITION.variants:
        golden = GOLDEN["variants"][variant.name]["invariants"]
        assert {name: status.value for name, status in variant.expected.items()} == {
            name: entry["status"] for name, entry in golden.items()
        }


def test_every_known_bad_variant_is_refuted_in_the_golden_file() -> None:
    for variant in KNOWN_BAD:
        assert _violated(variant), variant
    assert not _violated(DEFINITION.shipped.name)


def test_actions_are_controller_events() -> None:
    names = {event.value for event in ControllerEvent}
    assert set(DEFINITION.model().actions) <= names


@pytest.mark.parametrize("variant", KNOWN_BAD)
def test_known_bad_counterexample_is_found_and_replays(variant: str) -> None:
    violated = _violated(variant)
    depth = max(entry["length"] for entry in violated.values())
    result = _check(variant, depth)
    assert result.errors == ()
    invariants = _by_name(result)
    bad_model = DEFINITION.model(variant)
    shipped_model = DEFINITION.model()
    for name, entry in violated.items():
        invariant = invariants[name]
        assert invariant.status is Status.VIOLATED, name
        trace = invariant.counterexample
        assert trace is not None
        assert trace.replayed
        assert trace.length == entry["length"]
        assert not bad_model.holds(_replay(bad_model, trace), name)
        # The shipped protocol either refuses one of the steps or keeps the invariant.
        try:
            final = _replay(shipped_model, trace)
        except (ActionNotEnabled, KeyError):
            continue
        assert shipped_model.holds(final, name)


def test_zombie_controller_counterexample_is_kafka_6082() -> None:
    length = _violated("no_controller_epoch_check")["CONTROLLER_FENCED"]["length"]
    assert length == 4
    result = _check("no_controller_epoch_check", length)
    trace = _by_name(result)["CONTROLLER_FENCED"].counterexample
    assert trace is not None
    names = [step.action_name for step in trace.steps[1:]]
    assert names == ["controller_elected", "session_expired", "controller_elected",
                     "leader_elected"]
    zombie = trace.steps[1].args["c"]
    assert trace.steps[2].args["c"] == zombie
    assert trace.steps[3].args["c"] != zombie
    assert trace.steps[4].args["c"] == zombie


def test_shipped_variant_is_proved_and_its_witness_reached() -> None:
    result = _check(DEFINITION.shipped.name, SHALLOW_DEPTH)
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
    result = check_variant(DEFINITION, variant)
    assert result.errors == ()
    golden = GOLDEN["variants"][variant]
    for invariant in result.invariants:
        entry = golden["invariants"][invariant.name]
        assert invariant.status.value == entry["status"], invariant.name
        if invariant.counterexample is not None:
            assert invariant.counterexample.length == entry["length"]
    assert {witness.name: witness.trace.length if witness.trace else None
            for witness in result.witnesses} == golden["witnesses"]
    assert not result.problems()
