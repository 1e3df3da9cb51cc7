"""Trace-checked simulated events per second on one core (target >= 5,000 events/s).

Runs seeds ``--first-seed ..`` of the move/recovery/dir-failure simulator (the real LogManager
over simulated disks, every trace event replayed in ``model.replica_move``, every end-to-end
check on) for at least ``--seconds`` seconds on one process, then the same seeds without trace
checking (the baseline: what checking costs). Prints trace events per second, events checked in
the model per second, workload steps per second and simulated disk operations per second, the
ratio to the target and to the unchecked baseline, and ends with one JSON line.

Run: ``python -m bench.simulate [--seconds 20] [--steps 200] [--log-dirs 3]``.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

from conformance import SimConfig, run_seed
from conformance.move_sim import simulate

TARGET_EVENTS_PER_SECOND = 5_000


def _measure(config: SimConfig, first_seed: int, seconds: float) -> dict[str, float]:
    runs = events = checked = steps = failures = 0
    started = time.perf_counter()
    seed = first_seed
    while time.perf_counter() - started < seconds:
        result = run_seed(seed, config)
        runs += 1
        events += result.events
        checked += result.events_checked
        steps += result.steps
        failures += result.failed
        seed += 1
    elapsed = time.perf_counter() - started
    return {
        "runs": runs,
        "seeds_to": seed,
        "events": events,
        "events_checked": checked,
        "steps": steps,
        "failures": failures,
        "seconds": elapsed,
    }


def _baseline(config: SimConfig, first_seed: int, seeds_to: int) -> tuple[int, int, float]:
    started = time.perf_counter()
    events = operations = 0
    for seed in range(first_seed, seeds_to):
        outcome = simulate(seed, replace(config, trace_check=False))
        events += outcome.events
        operations += outcome.steps
    return events, operations, time.perf_counter() - started


def main() -> None:
    """Measure and print; the last line is JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--log-dirs", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=3)
    arguments = parser.parse_args()
    config = SimConfig(
        steps=arguments.steps, log_dirs=arguments.log_dirs, partitions=arguments.partitions
    )
    checked = _measure(config, arguments.first_seed, arguments.seconds)
    base_events, _, base_seconds = _baseline(config, arguments.first_seed, int(checked["seeds_to"]))
    seconds = checked["seconds"]
    events_per_second = checked["events"] / seconds
    checked_per_second = checked["events_checked"] / seconds
    steps_per_second = checked["steps"] / seconds
    baseline_per_second = base_events / base_seconds if base_seconds > 0 else 0.0
    print(f"runs: {int(checked['runs'])} seeds ({int(checked['failures'])} failing), "
          f"{seconds:.1f} s on one core")
    print(f"trace events: {int(checked['events'])}  ({events_per_second:,.0f}/s; "
          f"replayed in the model: {checked_per_second:,.0f}/s)")
    print(f"workload steps: {int(checked['steps'])}  ({steps_per_second:,.0f}/s)")
    print(f"ratio to the {TARGET_EVENTS_PER_SECOND:,} events/s target: "
          f"{events_per_second / TARGET_EVENTS_PER_SECOND:.2f}")
    print(f"without trace checking: {baseline_per_second:,.0f} events/s "
          f"(checking keeps {events_per_second / baseline_per_second:.2f} of the speed)"
          if baseline_per_second else "without trace checking: no events")
    print(json.dumps({
        "bench": "simulate",
        "runs": int(checked["runs"]),
        "failures": int(checked["failures"]),
        "seconds": round(seconds, 3),
        "trace_events_per_second": round(events_per_second, 1),
        "model_checked_events_per_second": round(checked_per_second, 1),
        "workload_steps_per_second": round(steps_per_second, 1),
        "unchecked_trace_events_per_second": round(baseline_per_second, 1),
        "target_events_per_second": TARGET_EVENTS_PER_SECOND,
        "ratio_to_target": round(events_per_second / TARGET_EVENTS_PER_SECOND, 3),
    }, sort_keys=True))


if __name__ == "__main__":
    main()
