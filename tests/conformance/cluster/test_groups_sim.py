"""Consumer groups in the cluster simulator: the brokers' nodes host the group coordinators,
simulated members join, sync, heartbeat, commit, fetch, leave, crash and pause under the run's
faults; coordinator events are replayed in ``model.group_coordinator`` and what members were told
is checked end to end."""

from __future__ import annotations

from typing import Any

from conformance.cluster_sim import ClusterConfig, replay_command, simulate
from conformance.group_abstraction import abstractions
from conformance.trace_check import TraceChecker
from impl.trace import TraceEvent


def test_a_default_run_runs_groups_and_checks_their_events() -> None:
    outcome = simulate(1, ClusterConfig())
    assert outcome.violation is None, outcome.violation
    assert outcome.group_commits > 0
    assert outcome.group_fetches > 0
    assert outcome.group_assignments > 0
    checked = {name for name in outcome.trace_verdict.actions
               if name.startswith("group_coordinator.")}
    assert {"group_coordinator.coordinator_elected", "group_coordinator.load_completed",
            "group_coordinator.join_completed", "group_coordinator.sync_completed",
            "group_coordinator.offset_committed",
            "group_coordinator.offset_fetched"} <= checked, checked


def test_without_groups_the_replay_command_says_so() -> None:
    config = ClusterConfig(groups=False, steps=20)
    assert replay_command(3, config).endswith("--no-groups")
    outcome = simulate(3, config)
    assert outcome.violation is None
    assert outcome.group_commits == 0


def event(name: str, subject: str, before: str = "STABLE", after: str = "STABLE",
          **fields: Any) -> TraceEvent:
    return TraceEvent.of("group_coordinator", name, subject, before, after, **fields)


def check(*events: TraceEvent) -> Any:
    checker = TraceChecker(abstractions(2), "replay")
    for each in events:
        found = checker.feed(each)
        if found is not None:
            return found
    return None


GROUP = "group-0"  # (offsets partition 0 of 2)
LOADED = (event("COORDINATOR_ELECTED", "__consumer_offsets-0@1", "UNLOADED", "LOADING",
                leader_epoch=1),
          event("LOAD_COMPLETED", "__consumer_offsets-0@1", "LOADING", "LOADED",
                leader_epoch=1, groups=0))


def commit(generation: int, at_acceptance: int, offset: int) -> TraceEvent:
    return event("OFFSET_COMMITTED", GROUP, broker=1, generation=generation, member="m",
                 group_generation=at_acceptance, accepted_in="STABLE",
                 offsets=(("t", 0, offset),))


def test_the_abstraction_accepts_a_fenced_commit_and_a_current_answer() -> None:
    assert check(*LOADED, commit(3, 3, 5),
                 event("OFFSET_FETCHED", GROUP, broker=1, offsets=(("t", 0, 5),))) is None


def test_a_commit_of_an_older_generation_is_refused_by_the_model() -> None:
    found = check(*LOADED, commit(2, 3, 5))
    assert found is not None
    assert found.kind == "not_enabled", found


def test_an_answer_older_than_the_acknowledged_commit_breaks_coordinator_loaded() -> None:
    found = check(*LOADED, commit(3, 3, 5),
                  event("OFFSET_FETCHED", GROUP, broker=1, offsets=(("t", 0, 4),)))
    assert found is not None
    assert found.invariant == "COORDINATOR_LOADED", found


def test_answers_while_loading_or_from_another_broker_are_refused() -> None:
    loading = check(LOADED[0], event("OFFSET_FETCHED", GROUP, broker=1, offsets=()))
    assert loading is not None
    assert loading.kind == "not_enabled", loading
    elsewhere = check(*LOADED, event("OFFSET_FETCHED", GROUP, broker=2, offsets=()))
    assert elsewhere is not None
    assert elsewhere.kind == "not_enabled", elsewhere
    unloaded = check(*LOADED, event("COORDINATOR_RESIGNED", "__consumer_offsets-0@1", "LOADED",
                                    "UNLOADED", leader_epoch=1),
                     event("OFFSET_FETCHED", GROUP, broker=1, offsets=()))
    assert unloaded is not None
    assert unloaded.kind == "not_enabled", unloaded
