"""The reassignment model (spec/reassignment.md): golden statuses, the early switch and the
recreated lost replica refuted with counterexamples replayed concretely, the shipped variant
proved, a reassignment completed across a controller failover.

The golden file ``golden/reassignment.json`` records, for every variant and invariant, the status of
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
from model.controller import ControllerEvent
from model.reassignment import MODELS, ReassignmentEvent, ReassignmentPhase

DEFINITION: ModelDefinition = MODELS[0]
GOLDEN: dict[str, Any] = json.loads(
    (Path(__file__).parent / "golden" / "reassignment.json").read_text()
)
KNOWN_BAD = [variant.name for variant in DEFINITION.variants if not variant.shipped]
#: The depth the default shipped check uses (induction does not depend on it).
SHALLOW_DEPTH = 9


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


def test_actions_are_reassignment_controller_or_replication_events() -> None:
    names = {event.value for event in ReassignmentEvent} | {
        event.value for event in ControllerEvent} | {"leader_append"}
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


def test_early_switch_counterexample_switches_empty_targets() -> None:
    length = _violated("switch_before_caught_up")["REASSIGN_SAFE"]["length"]
    result = _check("switch_before_caught_up", length)
    trace = _by_name(result)["REASSIGN_SAFE"].counterexample
    assert trace is not None
    assert [step.action_name for step in trace.steps[1:]] == [
        "reassign_started", "leader_elected", "leader_elected"]
    last = trace.steps[-1].state
    assert [last[f"zk_ar[{b}]"] for b in range(4)] == ["false", "false", "true", "true"]
    assert last["complete[2]"] == "false"


def test_recreated_lost_replica_counterexample() -> None:
    result = _check("recreate_lost_replica", 2)
    trace = _by_name(result)["DIR_FAILURE_ISOLATION"].counterexample
    assert trace is not None
    assert [step.action_name for step in trace.steps[1:]] == ["log_dir_failed", "broker_started"]
    assert trace.steps[1].args["b"] == trace.steps[2].args["b"]


def test_failover_mid_reassignment_resumes_from_zookeeper() -> None:
    model = DEFINITION.model()
    [state] = model.initial_states()
    state = model.step(state, "reassign_started")
    state = model.step(state, "leader_elected")
    assert state.phase is ReassignmentPhase.CATCHING_UP
    for target in (2, 3):
        state = model.step(state, "isr_changed", {"b": target})
    state = model.step(state, "leader_elected")
    assert state.phase is ReassignmentPhase.SWITCHED
    state = model.step(state, "controller_resigned")
    assert state.ctl_active is False
    state = model.step(state, "controller_elected")
    assert state.phase is ReassignmentPhase.SWITCHED
    state = model.step(state, "reassign_completed")
    state = model.step(state, "reassign_completed")
    assert state.phase is ReassignmentPhase.DONE
    assert [state.hosted[b] for b in range(4)] == [False, False, True, True]
    assert model.check_invariants(state) == []
    assert model.holds(state, "DONE_ACROSS_FAILOVER")


def test_switch_waits_for_the_targets_in_the_shipped_variant() -> None:
    model = DEFINITION.model()
    [state] = model.initial_states()
    state = model.step(state, "reassign_started")
    state = model.step(state, "leader_elected")
    state = model.step(state, "isr_changed", {"b": 2})
    assert not model.enabled(state, "leader_elected")
    state = model.step(state, "isr_changed", {"b": 3})
    assert model.enabled(state, "leader_elected")


def test_lost_replica_stays_offline_unless_new() -> None:
    model = DEFINITION.model()
    [state] = model.initial_states()
    state = model.step(state, "log_dir_failed", {"b": 0})
    assert state.offline[0] is True
    assert state.zk_leader == 1
    assert not model.enabled(state, "broker_started", {"b": 0})
    assert model.check_invariants(state) == []


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
