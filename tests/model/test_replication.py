"""The replication model (spec/replication.md): golden statuses, the known counterexamples
(KIP-101 scenarios 1 and 2, Jepsen 2013, KAFKA-6361, KIP-320 rule 4) found and replayed
concretely, the shipped variant checked, the witness reached.

The golden file ``golden/replication.json`` records, for every variant and invariant, the status
of a full check at the model's default depth, and for every violation the counterexample's
length, initial state and steps. By default the counterexamples are replayed concretely, the
short ones are searched with Z3 at their own length and the shipped variant is checked to a
shallow depth; the full check of every variant is ``slow``. The scenarios as the anchors tell
them (from the empty partition, longer than the default depth) are replayed concretely too.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from model import (
    ActionNotEnabled,
    ModelDefinition,
    State,
    Status,
    check_variant,
)
from model._report import flatten_state
from model.replication import MODELS, ReplicationEvent

from ._golden import ModelGolden, by_name, replay, run

DEFINITION: ModelDefinition = MODELS[0]
GOLD = ModelGolden(DEFINITION)
GOLDEN = GOLD.golden
KNOWN_BAD = GOLD.known_bad
#: The depth the default shipped check uses (the witness needs 2 steps).
SHALLOW_DEPTH = 3
#: Counterexamples up to this length are searched with Z3 in the default run, for these
#: variants (the others' searches, and the longer ones, are ``slow``; every golden counterexample
#: is replayed concretely by default).
FAST_LENGTH = 3
FAST_VARIANTS = ("truncate_to_hw", "unclean_election")
EMPTY, COMMITTED = 0, 1


def _shipped_keeps(name: str, labels: Sequence[str], initial: int) -> None:
    """The shipped protocol refuses one of the steps, or keeps the invariant."""
    shipped = DEFINITION.model()
    try:
        final = run(shipped, shipped.initial_states()[initial], labels)
    except (ActionNotEnabled, KeyError):
        return
    assert shipped.holds(final, name)


def test_golden_file_covers_every_variant_and_invariant() -> None:
    GOLD.assert_covers_every_variant_and_invariant()


def test_variant_expectations_agree_with_the_golden_file() -> None:
    GOLD.assert_expectations_agree()


def test_every_known_bad_variant_is_refuted_and_the_shipped_one_is_not() -> None:
    refuted = {variant for variant, _, _ in GOLD.violations()}
    assert refuted == set(KNOWN_BAD)
    shipped = GOLDEN["variants"]["shipped"]["invariants"]
    assert all(entry["status"] == "proved" for entry in shipped.values())


def test_actions_are_replication_events() -> None:
    names = {event.name.lower() for event in ReplicationEvent}
    for variant in DEFINITION.variants:
        assert set(DEFINITION.model(variant.name).actions) <= names


def test_initial_states_are_the_empty_partition_and_one_committed_record() -> None:
    model = DEFINITION.model()
    empty, committed = model.initial_states()
    assert model.check_invariants(empty) == []
    assert model.check_invariants(committed) == []
    reached = run(model, empty, ["leader_append(r=0)", "follower_fetch(f=1, delivered=True)",
                                  "follower_fetch(f=1, delivered=True)", "hw_advance(r=0)"])
    assert reached == committed


@pytest.mark.parametrize(("variant", "name", "length"), GOLD.violations())
def test_golden_counterexample_replays_concretely(variant: str, name: str, length: int) -> None:
    entry = GOLDEN["variants"][variant]["invariants"][name]
    labels: list[str] = entry["trace"]
    assert len(labels) == length
    model = DEFINITION.model(variant)
    final = run(model, model.initial_states()[entry["initial"]], labels)
    assert not model.holds(final, name)
    _shipped_keeps(name, labels, entry["initial"])


@pytest.mark.parametrize(
    ("variant", "name", "length"),
    [pytest.param(*case, marks=[] if case[2] <= FAST_LENGTH and case[0] in FAST_VARIANTS
                  else [pytest.mark.slow])
     for case in GOLD.violations()],
)
def test_known_bad_counterexample_is_found(variant: str, name: str, length: int) -> None:
    # One check per variant serves all its short counterexamples: BMC finds the shortest.
    depth = max(other for bad, _, other in GOLD.violations()
                if bad == variant and (other <= FAST_LENGTH or other == length))
    depth = length if length > FAST_LENGTH else min(depth, FAST_LENGTH)
    result = GOLD.check(variant, depth)
    assert result.errors == ()
    invariant = by_name(result)[name]
    assert invariant.status is Status.VIOLATED
    trace = invariant.counterexample
    assert trace is not None
    assert trace.replayed
    assert trace.length == length
    model = DEFINITION.model(variant)
    assert not model.holds(replay(model, trace), name)


def test_shipped_variant_is_proved_and_reaches_its_witness() -> None:
    result = GOLD.check(DEFINITION.shipped.name, SHALLOW_DEPTH)
    assert result.errors == ()
    golden = GOLDEN["variants"]["shipped"]
    for invariant in result.invariants:
        assert invariant.status.value == golden["invariants"][invariant.name]["status"]
    for witness in result.witnesses:
        assert witness.reached
        assert witness.trace is not None
        assert witness.trace.length == golden["witnesses"][witness.name]
    assert not result.problems()


# -- the anchors' scenarios, from the empty partition -------------------------------------

#: One record committed while follower 1's HW lags (KIP-101 scenario 1, steps 1-2).
COMMIT = ["leader_append(r=0)", "follower_fetch(f=1, delivered=True)",
          "follower_fetch(f=1, delivered=True)", "hw_advance(r=0)"]


def _scenario(variant: str, labels: Sequence[str]) -> State:
    model = DEFINITION.model(variant)
    return run(model, model.initial_states()[EMPTY], labels)


def test_kip101_scenario_1_truncation_to_hw_loses_a_committed_record() -> None:
    restart = ["crash(r=1)", "restart(r=1)", "become_follower(r=1)"]
    failover = ["crash(r=0)", "become_leader(r=1)"]
    model = DEFINITION.model("truncate_to_hw")
    after_restart = _scenario("truncate_to_hw", COMMIT + restart)
    assert after_restart.leo[1] == 0
    assert not model.holds(after_restart, "COMMITTED_DURABLE")
    after_failover = _scenario("truncate_to_hw", COMMIT + restart + failover)
    assert not model.holds(after_failover, "NO_COMMITTED_LOSS")
    shipped = _scenario("shipped", COMMIT + restart + failover)
    assert shipped.leo[1] == 1
    assert DEFINITION.model().check_invariants(shipped) == []


def test_kip101_scenario_2_logs_diverge_after_a_power_failure() -> None:
    steps = [*COMMIT, "crash(r=1, keep=0)", "restart(r=1)", "become_leader(r=1)",
             "leader_append(r=1)", "become_follower(r=0)", "leader_append(r=1)",
             "follower_fetch(f=0, delivered=True)"]
    model = DEFINITION.model("truncate_to_hw_power_failure")
    diverged = _scenario("truncate_to_hw_power_failure", steps)
    assert [diverged.log[(0, i)] for i in range(2)] == [1, 2]
    assert [diverged.log[(1, i)] for i in range(2)] == [2, 2]
    assert not model.holds(diverged, "LOG_MATCHING")
    epochs = DEFINITION.model("power_failure")
    matched = _scenario("power_failure", steps)
    assert [matched.log[(0, i)] for i in range(2)] == [2, 2]
    assert epochs.holds(matched, "LOG_MATCHING")
    assert not epochs.holds(matched, "NO_COMMITTED_LOSS")


def test_kafka_6361_fast_leader_change_diverges_without_kip279() -> None:
    steps = ["leader_append(r=0)", "become_leader(r=1)", "leader_append(r=1)",
             "become_leader(r=0)", "leader_append(r=0)", "become_follower(r=1)",
             "follower_fetch(f=1, delivered=True)"]
    model = DEFINITION.model("kip101_without_kip279")
    diverged = _scenario("kip101_without_kip279", steps)
    assert [diverged.log[(0, i)] for i in range(2)] == [1, 3]
    assert [diverged.log[(1, i)] for i in range(2)] == [2, 3]
    assert not model.holds(diverged, "LOG_MATCHING")
    shipped = _scenario("shipped", steps)
    assert [shipped.log[(1, i)] for i in range(2)] == [1, 3]
    assert DEFINITION.model().check_invariants(shipped) == []


def test_jepsen_2013_unclean_election_loses_committed_records() -> None:
    steps = ["leader_append(r=0)", "isr_shrink(f=1)", "hw_advance(r=0)", "crash(r=0)",
             "become_leader(r=2)"]
    model = DEFINITION.model("unclean_election")
    lost = _scenario("unclean_election", steps)
    assert lost.zk_leader == 2
    assert not model.holds(lost, "NO_COMMITTED_LOSS")
    shipped = DEFINITION.model()
    before = _scenario("shipped", steps[:-1])
    assert not shipped.enabled(before, "become_leader", {"r": 2})


def test_rule4_keeps_a_follower_out_until_the_hw_reaches_the_epoch_start() -> None:
    steps = ["become_leader(r=1)", "become_follower(r=2)", "follower_fetch(f=2, delivered=False)"]
    for variant, allowed in (("shipped", False), ("kip320_without_rule4", True)):
        model = DEFINITION.model(variant)
        state = run(model, model.initial_states()[COMMITTED], steps)
        assert model.enabled(state, "isr_expand", {"f": 2}) is allowed


def test_log_matching_is_known_broken_past_the_default_depth_where_logs_diverge() -> None:
    beyond = {variant.name: dict(variant.beyond) for variant in DEFINITION.variants
              if variant.beyond}
    assert beyond == {"kip101_without_kip279": {"LOG_MATCHING": 7},
                      "truncate_to_hw_power_failure": {"LOG_MATCHING": 7}}
    assert all(length > DEFINITION.depth for lengths in beyond.values()
               for length in lengths.values())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("variant", "name", "length"),
    [(variant.name, name, length) for variant in DEFINITION.variants
     for name, length in variant.beyond.items()],
)
def test_log_matching_itself_is_violated_past_the_default_depth(
    variant: str, name: str, length: int
) -> None:
    result = check_variant(DEFINITION, variant, depth=length, only=(name,))
    assert result.errors == ()
    assert [invariant.name for invariant in result.invariants] == [name]
    invariant = result.invariants[0]
    assert invariant.status is Status.VIOLATED
    assert invariant.expected is Status.VIOLATED
    trace = invariant.counterexample
    assert trace is not None
    assert trace.replayed
    assert trace.length == length
    assert not result.problems()
    model = DEFINITION.model(variant)
    assert not model.holds(replay(model, trace), name)
    initial = [flatten_state(state) for state in model.initial_states()].index(
        dict(trace.steps[0].state))
    _shipped_keeps(name, [step.action or "" for step in trace.steps[1:]], initial)


@pytest.mark.slow
@pytest.mark.parametrize("variant", [variant.name for variant in DEFINITION.variants])
def test_full_check_matches_the_golden_file(variant: str) -> None:
    GOLD.assert_full_check_matches(variant)
