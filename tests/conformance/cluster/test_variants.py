"""Known-bad implementation variants are caught by the cluster simulator's checks.

Seeds-to-catch (default :class:`ClusterConfig`: 3 brokers x 2 dirs, 2 partitions, 300 steps,
fault probability 0.03, network faults on), measured over seeds 0..29:

* ``truncate_to_hw`` (KIP-101: followers truncate to their own HW on a leader change): first
  caught at seed 2, 11 of 30 seeds (LOG_MATCHING: an ISR member lacks records below the HW);
  stated bound: within 10 seeds.
* ``no_epoch_check`` (KAFKA-6082: writes without the ``/controller_epoch`` check): first caught
  at seed 2, 9 of 30 (CONTROLLER_FENCED: a write stalled across the controller's session expiry
  lands after the next controller won); stated bound: within 5 seeds.
* ``isr_expanded_early`` (a follower joins the ISR before reaching the HW): first caught at
  seed 0, 19 of 20 (LOG_MATCHING); stated bound: within 3 seeds.

The shipped implementation passes seeds 0..399 at fault probability 0.03 (0..99 are the slow
campaign below) and seeds 0..159 at 0.1, every event replayed in the models. The simulator found
three controller bugs, fixed since and kept here as regression seeds: a broker that restarted
between two reads of ``/brokers/ids`` stayed in the ISR of the partitions that only had to drop
it (seed 64 at 0.03), then, with the model replay on, was sent those partitions' cached states,
which its removal was about to replace (seed 64 again); and a leader's ISR expansion re-adding a
broker just before it failed was kept from the controller's stale cache (seed 1 at 0.1). Seed
176 at 0.03 (reached by seed 22 now) is a trace-checker regression: a late LeaderAndIsr. Focused
tests of the controller core: ``tests/conformance/coordinator/test_isr_removal.py`` and
``tests/unit/controller/test_core.py``.
"""

from __future__ import annotations

import pytest

from conformance.cluster_sim import ClusterConfig, simulate

from ._plans import as_found

#: variant -> (seeds within which it must be caught, the invariants that may catch it)
CAUGHT_WITHIN: dict[str, tuple[int, frozenset[str]]] = {
    "truncate_to_hw": (10, frozenset({"LOG_MATCHING", "NO_COMMITTED_LOSS"})),
    "no_epoch_check": (5, frozenset({"CONTROLLER_FENCED"})),
    "isr_expanded_early": (3, frozenset({"LOG_MATCHING", "NO_COMMITTED_LOSS"})),
}


@pytest.mark.parametrize("variant", sorted(CAUGHT_WITHIN))
def test_variant_is_caught_within_its_stated_seeds(variant: str) -> None:
    seeds, invariants = CAUGHT_WITHIN[variant]
    config = ClusterConfig(variant=variant)
    verdicts = []
    for seed in range(seeds):
        outcome = simulate(seed, config, abstractions=None)
        if outcome.violation is not None:
            assert outcome.violation.invariant in invariants, outcome.violation
            return
        verdicts.append(seed)
    pytest.fail(f"{variant} not caught in seeds {verdicts}")


#: Seeds of the default configuration that fail on a known bug.
KNOWN_FAILING: set[int] = set()


@pytest.mark.slow
def test_shipped_passes_a_campaign() -> None:
    config = ClusterConfig()
    failing = set()
    for seed in range(100):
        outcome = simulate(seed, config)
        if outcome.violation is not None:
            failing.add(seed)
    assert failing == KNOWN_FAILING


def test_a_truncation_during_a_move_replays_in_the_move_model() -> None:
    """Seed 25: a follower truncation while a move copies (``SOURCE_TRUNCATED``)."""
    config = ClusterConfig(partitions=2, steps=250, fault_probability=0.02, chunk_bytes=150)
    outcome = simulate(25, config)
    assert outcome.violation is None, outcome.violation


def test_controller_removes_a_bounced_broker_from_the_isr() -> None:
    # A broker that restarted between two reads of /brokers/ids (bounced) is failed then
    # started: it leaves the ISR of the partitions that only had to drop it too, not only of
    # those it led (it lost its unflushed records on restart).
    outcome = simulate(64, ClusterConfig(), abstractions=None)
    assert outcome.violation is None, outcome.violation


def test_a_bounced_broker_is_sent_its_replicas_only_in_their_new_epoch() -> None:
    """Seed 64 with the model replay (COMMITTED_DURABLE at the restarted broker's first
    BECOME_FOLLOWER): broker 0 restarted having lost t-1's records 63..67, committed. The
    controller wrote the election of t-0 (broker 0 led it) first and deferred t-1's ISR
    removal; the election's LeaderAndIsr also carried t-1's cached state, epoch 1 with broker 0
    in the ISR, and the new incarnation, holding no state for t-1, followed that epoch while
    ZooKeeper moved to epoch 2 without it. Such states are now held back until the deferred
    change is written: broker 0 first follows t-1 in epoch 2, outside the ISR."""
    outcome = simulate(64, ClusterConfig(), as_found(64, ClusterConfig()), keep_trace=True)
    assert outcome.violation is None, outcome.violation
    trace = list(outcome.trace)
    restart = next(i for i, e in enumerate(trace)
                   if e.event == "RESTART" and e.subject == "t-1@0")
    first = next(e for e in trace[restart:]
                 if e.subject == "t-1@0" and e.event == "BECOME_FOLLOWER")
    assert first.fields["leader_epoch"] == 2, first.to_json()
    assert first.fields["isr"] == (1,), first.to_json()


def test_a_leader_and_isr_overtaken_by_a_later_epoch_replays() -> None:
    """Found as seed 176 (STATE_MISMATCH in the trace checker), reached by seed 22 since the
    simulator runs the controller node's own pump: the controller's LeaderAndIsr making a broker
    a partition's leader in one epoch reached it only after a follower had heard of a later
    epoch. The broker rightly applies the epoch it receives (its own was older); the replication
    abstraction replayed that election from ZooKeeper's later ISR and refused the reported ISR.
    It now elects from the ISR the request carries. (Reached by seed 42 since the simulator's
    reassignments shrink and grow replica sets.)"""
    # (recorded before the simulator ran groups: their traffic changes the interleaving)
    config = ClusterConfig(groups=False)
    outcome = simulate(42, config, as_found(42, config), keep_trace=True)
    assert outcome.violation is None, outcome.violation
    newest: dict[str, int] = {}
    late = []
    for event in outcome.trace:
        if event.machine == "replication" and event.event in ("BECOME_LEADER", "BECOME_FOLLOWER"):
            partition = event.subject.rpartition("@")[0]
            epoch = event.fields["leader_epoch"]
            assert isinstance(epoch, int)
            if event.event == "BECOME_LEADER" and epoch < newest.get(partition, -1):
                late.append(event)
            newest[partition] = max(newest.get(partition, -1), epoch)
    assert late, "the run no longer delivers a leadership after a later epoch"


def test_controller_removes_a_failed_broker_from_a_concurrently_expanded_isr() -> None:
    # A leader's ISR expansion re-adding a broker, written just before that broker failed and
    # not yet seen by the controller: the removal reads the state fresh from ZooKeeper.
    outcome = simulate(1, ClusterConfig(fault_probability=0.1), abstractions=None)
    assert outcome.violation is None, outcome.violation
