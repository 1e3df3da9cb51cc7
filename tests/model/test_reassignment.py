"""The reassignment model (spec/reassignment.md): golden statuses, the early switch and the
recreated lost replica refuted with counterexamples replayed concretely, the shipped variant
proved, a reassignment completed across a controller failover.

The golden file ``golden/reassignment.json`` records, for every variant and invariant, the status of
a full check at the model's default depth and the length of every counterexample; the full
comparison is ``slow``, the default tests check each counterexample at its own length.
"""

from __future__ import annotations

import pytest

from model import ModelDefinition
from model.controller import ControllerEvent
from model.reassignment import MODELS, ReassignmentEvent, ReassignmentPhase

from ._golden import ModelGolden, by_name

DEFINITION: ModelDefinition = MODELS[0]
GOLD = ModelGolden(DEFINITION)
GOLDEN = GOLD.golden
KNOWN_BAD = GOLD.known_bad
#: The depth the default shipped check uses (induction does not depend on it).
SHALLOW_DEPTH = 9


def test_golden_file_covers_every_variant_and_invariant() -> None:
    GOLD.assert_covers_every_variant_and_invariant()


def test_variant_expectations_agree_with_the_golden_file() -> None:
    GOLD.assert_expectations_agree()


def test_every_known_bad_variant_is_refuted_in_the_golden_file() -> None:
    for variant in KNOWN_BAD:
        assert GOLD.violated(variant), variant
    assert not GOLD.violated(DEFINITION.shipped.name)


def test_actions_are_reassignment_controller_or_replication_events() -> None:
    names = {event.value for event in ReassignmentEvent} | {
        event.value for event in ControllerEvent} | {"leader_append"}
    assert set(DEFINITION.model().actions) <= names


@pytest.mark.parametrize("variant", KNOWN_BAD)
def test_known_bad_counterexample_is_found_and_replays(variant: str) -> None:
    GOLD.assert_counterexample_found_and_replays(variant)


def test_early_switch_counterexample_switches_empty_targets() -> None:
    length = GOLD.violated("switch_before_caught_up")["REASSIGN_SAFE"]["length"]
    result = GOLD.check("switch_before_caught_up", length)
    trace = by_name(result)["REASSIGN_SAFE"].counterexample
    assert trace is not None
    assert [step.action_name for step in trace.steps[1:]] == [
        "reassign_started", "leader_elected", "leader_elected"]
    last = trace.steps[-1].state
    assert [last[f"zk_ar[{b}]"] for b in range(4)] == ["false", "false", "true", "true"]
    assert last["complete[2]"] == "false"


def test_recreated_lost_replica_counterexample() -> None:
    result = GOLD.check("recreate_lost_replica", 2)
    trace = by_name(result)["DIR_FAILURE_ISOLATION"].counterexample
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
    GOLD.assert_full_check_matches(variant)
