"""The move/recovery/dir-failure simulator slice: determinism, checks, shrinking, bug variants.

A failing run prints its seed and ``logproof conformance replay --seed N``.
"""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest

from conformance import run_seed, shrink, swarm_config
from conformance.move_sim import Fault, SimConfig, format_faults, parse_faults, plan_faults
from conformance.runner import replay

SHORT = SimConfig(steps=150)

#: Each known-bad variant, the invariant it breaks, and within how many seeds it is caught.
CAUGHT_WITHIN = {
    "unlocked_swap": (("MOVE_NO_LOSS", "READ_CONSISTENT"), 3),
    "swap_before_durable": (("MOVE_NO_LOSS",), 10),
}


def _explain(seed: int, config: SimConfig) -> str:
    result = run_seed(seed, config)
    return f"seed {seed}: {result.violated_invariant}\n{result.message}\n{result.replay_command}"


def test_same_seed_same_trace_byte_for_byte() -> None:
    first, outcome = replay(7, SHORT)
    second = run_seed(7, SHORT)
    assert first.trace_digest == second.trace_digest
    assert first.events == second.events == len(outcome.trace)
    assert outcome.trace, "the run emitted no trace"
    assert run_seed(8, SHORT).trace_digest != first.trace_digest


@pytest.mark.parametrize("seed", range(12))
def test_shipped_implementation_passes(seed: int) -> None:
    result = run_seed(seed, SHORT)
    assert not result.failed, _explain(seed, SHORT)
    assert result.events_checked > 0, "nothing was checked against the model"


def test_runs_exercise_moves_crashes_and_faults() -> None:
    results = [run_seed(seed, SHORT) for seed in range(12)]
    assert sum(result.moves_done for result in results) > 20
    assert sum(result.restarts for result in results) > 5
    kinds = {fault.kind for seed in range(12) for fault in plan_faults(seed, SHORT)}
    assert kinds >= {"crash", "crash_mid_operation", "crash_in_swap", "torn_tail", "dir_failure",
                     "dir_repaired"}


@pytest.mark.parametrize("variant", sorted(CAUGHT_WITHIN))
def test_known_bad_variant_is_caught(variant: str) -> None:
    invariants, seeds = CAUGHT_WITHIN[variant]
    config = SimConfig(steps=150, variant=variant)
    caught = [run_seed(seed, config) for seed in range(seeds)]
    failing = [result for result in caught if result.failed]
    assert failing, f"{variant} survived {seeds} seeds"
    assert failing[0].violated_invariant in invariants, failing[0].message
    assert f"--variant {variant}" in failing[0].replay_command


def test_shrinks_to_a_minimal_schedule_that_replays() -> None:
    config = SimConfig(steps=150, variant="swap_before_durable")
    seed = next(seed for seed in range(10) if run_seed(seed, config).failed)
    shrunk = shrink(seed, config)
    assert shrunk.original_faults >= len(parse_faults(shrunk.faults))
    faults = parse_faults(shrunk.faults)
    assert shrunk.steps <= config.steps
    config = replace(config, steps=shrunk.steps)
    replayed = run_seed(seed, config, faults)
    assert replayed.violated_invariant == shrunk.invariant
    assert replayed.replay_command == shrunk.replay_command
    for index in range(len(faults)):
        fewer = faults[:index] + faults[index + 1 :]
        result = run_seed(seed, config, fewer)
        assert result.violated_invariant != shrunk.invariant, f"fault {index} was not needed"
    assert f"--faults '{shrunk.faults}'" in shrunk.replay_command
    assert shrink(seed, SimConfig(steps=150, variant="swap_before_durable")) == shrunk


def test_resumed_move_after_crash_keeps_no_stale_tail() -> None:
    """Found by the simulator (shrunk from seed 33): a move resumed after a crash kept a stale
    tp.move tail whose offsets the source had reused with new records."""
    faults = parse_faults("16:crash:0:0,20:crash_mid_operation:0:29")
    result = run_seed(33, SHORT, faults)
    assert not result.failed, result.message


def test_fault_specs_round_trip_and_reject_garbage() -> None:
    faults = plan_faults(3, SimConfig(steps=400, fault_probability=0.1))
    assert faults
    assert parse_faults(format_faults(faults)) == faults
    assert parse_faults("") == ()
    with pytest.raises(ValueError, match="not a fault spec"):
        Fault.parse("3:meteor:0:0")


def test_config_and_result_are_picklable_and_swarm_is_seeded() -> None:
    config = swarm_config(5, brokers=2, log_dirs=3, steps=60)
    assert config == swarm_config(5, brokers=2, log_dirs=3, steps=60)
    assert {swarm_config(seed).partitions for seed in range(20)} != {config.partitions}
    assert pickle.loads(pickle.dumps(config)) == config
    result = run_seed(5, config)
    assert pickle.loads(pickle.dumps(result)) == result
    assert result.verdict in ("pass", "fail")


def test_four_dirs_fit_the_three_dir_model() -> None:
    """Found by a campaign: with four log dirs a redirect and a queued tp.delete both wanted the
    model's third dir."""
    config = SimConfig(log_dirs=4, partitions=5, steps=300, fault_probability=0.08)
    result = run_seed(1086, config)
    assert not result.failed, result.message


def test_several_brokers_run_independently() -> None:
    result = run_seed(2, SimConfig(brokers=2, steps=120))
    assert not result.failed, result.message
    assert result.events_checked > 0


def test_seed_954_a_redirect_off_a_failed_dir_leaves_one_move() -> None:
    """Seed 954 of ``logproof conformance run --brokers 1`` (DIR_FAILURE_ISOLATION). t-2 was
    moving to data-1 when data-1 failed, unnoticed; a redirect to data-0 could not retire
    data-1's ``tp.move`` and created data-0's anyway. A crash in the swap (after ``tp`` was
    renamed ``tp.delete``) and the repair of data-1 left two ``.move`` dirs: recovery kept t-2
    offline with every dir online. The redirect now fails the move and creates nothing."""
    # the schedule the seed planned before the partial disk faults were added
    faults = parse_faults("2:dir_failure:0:2,4:dir_repaired:0:0,6:unreadable_at_startup:0:1,"
                          "11:dir_repaired:0:0,27:crash_in_swap:0:5,83:crash_in_swap:0:3,"
                          "92:dir_failure:0:1,141:dir_repaired:0:0,155:crash_in_swap:0:1,"
                          "198:torn_tail:0:0")
    result, outcome = replay(954, SimConfig(brokers=1), faults)
    assert not result.failed, result.message
    events = [e for e in outcome.trace if e.subject == "t-2@0"]
    redirect = next(i for i, e in enumerate(events) if e.event == "REDIRECTED")
    assert events[redirect + 1].event == "DIR_FAILED", events[redirect + 1]
    assert not any(e.event == "CLASSIFIED" and "OFFLINE_AMBIGUOUS" in e.to_json()
                   for e in events)


@pytest.mark.parametrize(("seed", "config", "schedule"), [
    (167, SimConfig(brokers=1, steps=259),
     "118:crash_in_swap:0:3,120:dir_failure:0:2,258:dir_repaired:0:0"),
    (557, SimConfig(brokers=1, steps=199, compacted=1),
     "95:file_failure:0:53744,107:crash_in_swap:0:3,198:dir_repaired:0:0"),
])
def test_an_untouched_move_keeps_its_log_start_offset(
    seed: int, config: SimConfig, schedule: str
) -> None:
    """Seeds 167 and 557 (``--compacted 1``) of ``logproof conformance run --brokers 1 --steps
    300`` (MOVE_NO_LOSS), shrunk. DeleteRecords moved t-1's log start inside its first segment;
    a move's swap made t-1.move durable (its dir's checkpoints got t-1's HW and log start) and
    crashed once t-1 was renamed t-1.delete. A dir was bad at the next starts: t-1 stayed
    offline and untouched, and the first rewrite of the .move's dir checkpoints dropped t-1's
    entries. Once the dir was repaired, t-1.move was promoted with log start 0: the deleted
    records came back. A dir's checkpoints now keep the entries of a lost replica's copies."""
    result, outcome = replay(seed, config, parse_faults(schedule))
    assert not result.failed, f"{result.message}\n{result.replay_command}"
    classified = [e.to_json() for e in outcome.trace
                  if e.subject == "t-1@0" and e.event == "CLASSIFIED"]
    assert any("OFFLINE_UNTOUCHED" in each for each in classified), classified
    assert "PROMOTE_MOVE" in classified[-1], classified[-1]


def test_an_interleaved_flush_pass_keeps_what_it_claims() -> None:
    """Seed 852 hands a partition's fsyncs over (``flush_pass_step``: the worker thread's share
    of the periodic flush), appends while they are pending, and later checkpoints and crashes.
    Under a ``Log.finish_flush`` that claimed the log as it is when the pass resumes (every
    segment durable, the recovery point at the current LEO) instead of as it was when the fsyncs
    were taken, the appended batches were never fsynced and the crash lost them
    (MOVE_NO_LOSS); the only seed of 950 (150-949) that caught that mutation."""
    result = run_seed(852, SimConfig())
    assert not result.failed, _explain(852, SimConfig())
