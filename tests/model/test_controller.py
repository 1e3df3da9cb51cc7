"""The controller model (spec/controller.md): golden statuses, the zombie-controller
counterexample (KAFKA-6082) replayed concretely, the shipped variant proved, the witness reached;
and the ``controller_failover_vouching`` model's seed 1915 counterexample (the ``mzxid`` rule)
and the shipped failover's steps on it, concretely.

The golden file ``golden/controller.json`` records, for every variant and invariant, the status of
a full check at the model's default depth and the length of every counterexample; the full
comparison is ``slow``, the default tests check each counterexample at its own length.
"""

from __future__ import annotations

import pytest

from impl.broker.replication import ReplicationEvent
from model import ModelDefinition, Status
from model.controller import MODELS, ControllerEvent
from model.registry import find

from ._golden import ModelGolden, by_name, run

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


# -- controller_failover_vouching: what a failover trusts after restarts no controller saw ------

VOUCHING: ModelDefinition = find("controller_failover_vouching")
VOUCHING_GOLD = ModelGolden(VOUCHING)
#: The model's actions: the controller's events and the replication machine's follower fetch,
#: plus ``appended`` (a model-only action, spec/VOCABULARY.md).
VOUCHING_ACTIONS = {event.value for event in ControllerEvent} | {
    ReplicationEvent.FOLLOWER_FETCH.value.lower(), "appended"}


def test_vouching_actions_are_controller_or_replication_events() -> None:
    assert set(VOUCHING.model().actions) <= VOUCHING_ACTIONS


def test_vouching_golden_file_agrees_with_every_variant() -> None:
    VOUCHING_GOLD.assert_covers_every_variant_and_invariant()
    VOUCHING_GOLD.assert_expectations_agree()
    assert not VOUCHING_GOLD.violated(VOUCHING.shipped.name)
    for variant in VOUCHING_GOLD.known_bad:
        assert VOUCHING_GOLD.violated(variant)["NO_COMMITTED_LOSS"], variant


def test_mzxid_counterexample_is_seed_1915() -> None:
    """The ``mzxid`` rule's shortest loss: a member crashes uncleanly and registers again
    unseen, the leader's ISR write about another member carries it over, the leader stops and
    the next controller elects the member, short of a committed record."""
    entry = VOUCHING_GOLD.violated("mzxid")["NO_COMMITTED_LOSS"]
    assert entry["length"] == 5
    result = VOUCHING_GOLD.check("mzxid", entry["length"])
    trace = by_name(result)["NO_COMMITTED_LOSS"].counterexample
    assert trace is not None
    assert trace.replayed
    steps = trace.steps[1:]
    assert [step.action_name for step in steps] == [
        "broker_failed", "broker_started", "isr_changed", "broker_failed", "controller_elected"]
    member = steps[0].args["b"]  # (argument values as the trace prints them)
    assert steps[0].args["clean"] == "false"
    assert steps[1].args["b"] == member
    assert steps[2].args["add"] == "false"
    assert steps[2].args["b"] != member
    assert steps[3].args["b"] not in (member, steps[2].args["b"])
    assert steps[4].args["b"] == member


def test_shipped_failover_bars_the_member_the_leader_carried_over() -> None:
    """Seed 1915's steps, concretely: the shipped failover does not elect the member that
    restarted unseen (its recorded incarnation is the one before the crash); the ``mzxid``
    rule does."""
    labels = ["follower_fetch(b=1, to_end=False)", "broker_failed(b=1, clean=False)",
              "broker_started(b=1)", "isr_changed(b=2, add=False)",
              "broker_failed(b=0, clean=True)"]
    for variant, elects in (("shipped", False), ("mzxid", True)):
        model = VOUCHING.model(variant)
        [initial] = model.initial_states()
        state = run(model, initial, labels)
        assert state.isr[1] is True
        assert state.written_after_registration[1] is True
        assert model.enabled(state, "controller_elected", {"b": 1}) is elects
        if not elects:
            # no member is usable (0 is down, 1 barred): the partition waits for 0
            assert model.enabled(state, "controller_elected", {"b": -1})
            after = model.step(state, "controller_elected", {"b": -1})
            assert dict(after.isr.items()) == {0: True, 1: False, 2: False}
            assert model.check_invariants(after) == []


def test_shipped_leader_leaves_out_a_member_it_has_not_seen_in_sync() -> None:
    model = VOUCHING.model()
    [initial] = model.initial_states()
    state = run(model, initial,
                ["follower_fetch(b=1, to_end=True)", "isr_changed(b=2, add=False)"])
    assert dict(state.isr.items()) == {0: True, 1: True, 2: False}
    unseen = run(model, initial, ["isr_changed(b=2, add=False)"])
    assert dict(unseen.isr.items()) == {0: True, 1: False, 2: False}
    kept = run(VOUCHING.model("leader_keeps_unobserved"), initial,
               ["isr_changed(b=2, add=False)"])
    assert dict(kept.isr.items()) == {0: True, 1: True, 2: False}
    assert kept.vouch_recorded[1] is False


def test_vouching_shipped_is_proved_and_its_witness_reached() -> None:
    result = VOUCHING_GOLD.check(VOUCHING.shipped.name, SHALLOW_DEPTH + 1)
    assert result.errors == ()
    for invariant in result.invariants:
        assert invariant.status is Status.PROVED, (invariant.name, invariant.note)
    golden = VOUCHING_GOLD.golden["variants"]["shipped"]["witnesses"]
    for witness in result.witnesses:
        assert witness.trace is not None
        assert witness.trace.length == golden[witness.name]
