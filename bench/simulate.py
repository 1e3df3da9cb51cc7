"""Trace-checked simulated events per second on one core (target >= 5,000 events/s).

Runs seeds ``--first-seed ..`` of the move/recovery/dir-failure simulator (the real LogManager
over simulated disks, every trace event replayed in ``model.replica_move``, every end-to-end
check on) for at least ``--seconds`` seconds on one process, then the same seeds without trace
checking (the baseline: what checking costs). Prints trace events per second, events checked in
the model per second, workload steps per second and simulated disk operations per second, the
ratio to the target and to the unchecked baseline, and ends with one JSON line.

Then the same for the cluster simulator (``conformance.cluster_sim``: ``--cluster-brokers``
brokers x ``--cluster-log-dirs`` dirs, controllers over the simulated ZooKeeper, replication over
the simulated network, an acks=all producer and a consumer, faults at
``--cluster-fault-probability`` per step): trace events per second, every event replayed in its
machine's model (``replica_move``, ``replication``, ``controller``; the few events of machines
without an abstraction are counted), and the same without trace checking. The JSON line carries
both parts (``cluster_*`` keys).

The cluster part measures the steady state of a long run: ``--cluster-warm-up-seeds`` seeds (10)
far from the measured ones run first, unmeasured, so that the trace checker's per-process memo
of model answers (the models are pure functions; a fresh process evaluates them from scratch
until it has met the common abstract states) is warm, as it is after the first seconds of any
campaign. The warm-up's own rate is printed as the cold-start figure.

Each part runs the code a campaign runs: ``--code`` as ``logproof fuzz`` (by default the
compiled tree ``make compiled`` builds, when it matches the sources, else the sources with one
line saying why; the line ``code: ...`` and the JSON's ``code`` say which ran), with the garbage
collector settled as a campaign's task settles it (``spark._runner.settle_garbage``: before the
measured seeds and every hundredth).

Run: ``python -m bench.simulate [--seconds 20] [--steps 200] [--log-dirs 3]
[--cluster-seconds 20] [--cluster-steps 300] [--cluster-warm-up-seeds 10]
[--code auto|compiled|source] [--compiled-tree DIR]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from spark._compiled import SOURCE, activate, default_compiled_tree, running_digests
from spark._runner import FREEZE_EVERY_SEEDS, settle_garbage

if TYPE_CHECKING:  # (imported at run time after the code to run is chosen: ``--code``)
    from conformance import SimConfig
    from conformance.cluster_sim import ClusterConfig
    from conformance.runner import AnyConfig

TARGET_EVENTS_PER_SECOND = 5_000
#: The campaign-scale target of the cluster part (a 1,000,000-seed campaign in a night on a small
#: Spark cluster): 20,000 trace-checked events per second on one core.
CAMPAIGN_TARGET_EVENTS_PER_SECOND = 20_000


#: ``--code``: the compiled tree when it can run, else the sources (the default, as ``logproof
#: fuzz``'s); the compiled tree or an error; the interpreted sources
AUTO, COMPILED, SOURCE_CODE = "auto", "compiled", "source"


def _choose_code(code: str, tree: Path) -> str:
    """Put the compiled tree first on ``sys.path`` as ``logproof fuzz`` runs its seeds (before
    anything of ``impl``, ``model`` or ``conformance`` is imported), or not; a stale or missing
    tree runs the sources with :func:`spark._compiled.activate`'s one line (``--code compiled``:
    an error instead).

    Returns:
        The tree's label, or :data:`spark._compiled.SOURCE`.
    """
    if code == SOURCE_CODE:
        return SOURCE
    label = activate(tree, running_digests())
    if label == SOURCE and code == COMPILED:
        raise SystemExit("bench.simulate: --code compiled: the compiled tree cannot run the seeds "
                         "(make compiled builds it)")
    return label


def _measure(config: AnyConfig, first_seed: int, seconds: float) -> dict[str, float]:
    from conformance import run_seed  # (after --code chose the code)

    runs = events = checked = steps = failures = 0
    settle_garbage()  # (what a campaign's task does after its first seed and every hundredth)
    started = time.perf_counter()
    cpu_started = time.process_time()
    seed = first_seed
    while time.perf_counter() - started < seconds:
        result = run_seed(seed, config)
        runs += 1
        if runs % FREEZE_EVERY_SEEDS == 0:
            settle_garbage()
        events += result.events
        checked += result.events_checked
        steps += result.steps
        failures += result.failed
        seed += 1
    elapsed = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started
    return {
        "cpu_seconds": cpu_seconds,
        "runs": runs,
        "seeds_to": seed,
        "events": events,
        "events_checked": checked,
        "steps": steps,
        "failures": failures,
        "seconds": elapsed,
    }


def _baseline(config: SimConfig, first_seed: int, seeds_to: int) -> tuple[int, int, float]:
    from conformance.move_sim import simulate  # (after --code chose the code)

    settle_garbage()
    started = time.perf_counter()
    events = operations = 0
    for seed in range(first_seed, seeds_to):
        outcome = simulate(seed, replace(config, trace_check=False))
        events += outcome.events
        operations += outcome.steps
    return events, operations, time.perf_counter() - started


def _cluster_baseline(config: ClusterConfig, first_seed: int, seeds_to: int) -> tuple[int, float]:
    from conformance import cluster_sim  # (after --code chose the code)

    settle_garbage()
    started = time.perf_counter()
    events = 0
    for seed in range(first_seed, seeds_to):
        events += cluster_sim.simulate(seed, replace(config, trace_check=False)).events
    return events, time.perf_counter() - started


def _cluster(arguments: argparse.Namespace) -> dict[str, float]:
    from conformance import run_seed  # (after --code chose the code)
    from conformance.cluster_sim import ClusterConfig

    config = ClusterConfig(
        brokers=arguments.cluster_brokers, log_dirs=arguments.cluster_log_dirs,
        steps=arguments.cluster_steps, fault_probability=arguments.cluster_fault_probability,
    )
    warm_up_from = arguments.first_seed + 1_000_000
    warm_up_seconds = 0.0
    warm_up_events = 0
    cold = 0.0
    if arguments.cluster_warm_up_seeds > 0:
        started = time.perf_counter()
        for seed in range(warm_up_from, warm_up_from + arguments.cluster_warm_up_seeds):
            warm_up_events += run_seed(seed, config).events
        warm_up_seconds = time.perf_counter() - started
        cold = warm_up_events / warm_up_seconds
        print(f"cluster warm-up: {arguments.cluster_warm_up_seeds} seeds, {warm_up_events} "
              f"events in {warm_up_seconds:.1f} s ({cold:,.0f}/s from a cold process)")
    checked = _measure(config, arguments.first_seed, arguments.cluster_seconds)
    base_events, base_seconds = _cluster_baseline(config, arguments.first_seed,
                                                  int(checked["seeds_to"]))
    seconds = checked["seconds"]
    rate = checked["events"] / seconds
    baseline = base_events / base_seconds if base_seconds > 0 else 0.0
    print(f"cluster ({config.brokers} brokers x {config.log_dirs} dirs, fault probability "
          f"{config.fault_probability}): {int(checked['runs'])} seeds "
          f"({int(checked['failures'])} failing), {seconds:.1f} s on one core")
    print(f"cluster trace events: {int(checked['events'])}  ({rate:,.0f}/s through the trace "
          f"checker; replayed in a model: {checked['events_checked'] / seconds:,.0f}/s)")
    cpu_rate = checked["events"] / checked["cpu_seconds"] if checked["cpu_seconds"] else 0.0
    print(f"cluster ratio to the {TARGET_EVENTS_PER_SECOND:,} events/s target: "
          f"{rate / TARGET_EVENTS_PER_SECOND:.2f} (per CPU second of this process: "
          f"{cpu_rate:,.0f} events/s, ratio {cpu_rate / TARGET_EVENTS_PER_SECOND:.2f}; the "
          f"two differ when other processes share the cores)")
    print(f"cluster ratio to the campaign-scale {CAMPAIGN_TARGET_EVENTS_PER_SECOND:,} events/s "
          f"target: {rate / CAMPAIGN_TARGET_EVENTS_PER_SECOND:.2f} (per CPU second: "
          f"{cpu_rate / CAMPAIGN_TARGET_EVENTS_PER_SECOND:.2f})")
    if baseline:
        print(f"cluster without trace checking: {baseline:,.0f} events/s")
    return {
        "cluster_brokers": config.brokers,
        "cluster_log_dirs": config.log_dirs,
        "cluster_runs": int(checked["runs"]),
        "cluster_failures": int(checked["failures"]),
        "cluster_seconds": round(seconds, 3),
        "cluster_trace_events_per_second": round(rate, 1),
        "cluster_trace_events_per_cpu_second": round(cpu_rate, 1),
        "cluster_model_checked_events_per_second": round(checked["events_checked"] / seconds, 1),
        "cluster_unchecked_trace_events_per_second": round(baseline, 1),
        "cluster_ratio_to_target": round(rate / TARGET_EVENTS_PER_SECOND, 3),
        "cluster_ratio_to_campaign_target": round(rate / CAMPAIGN_TARGET_EVENTS_PER_SECOND, 3),
        "cluster_warm_up_seeds": arguments.cluster_warm_up_seeds,
        "cluster_cold_trace_events_per_second": round(cold, 1),
    }


def main() -> None:
    """Measure and print; the last line is JSON."""
    # The simulated storage engines log the faults they are dealt; here they are the workload.
    logging.getLogger("impl").setLevel(logging.CRITICAL)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--log-dirs", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--cluster-seconds", type=float, default=20.0)
    parser.add_argument("--cluster-steps", type=int, default=300)
    parser.add_argument("--cluster-brokers", type=int, default=3)
    parser.add_argument("--cluster-log-dirs", type=int, default=2)
    parser.add_argument("--cluster-fault-probability", type=float, default=0.05)
    parser.add_argument("--cluster-warm-up-seeds", type=int, default=10)
    parser.add_argument("--code", choices=(AUTO, COMPILED, SOURCE_CODE), default=AUTO,
                        help="auto (the default, as logproof fuzz): the compiled tree when it "
                             "can run, else the sources; compiled: that tree or an error; "
                             "source: the interpreted code")
    parser.add_argument("--compiled-tree", type=Path, default=None,
                        help="the compiled tree (default: logproof-compiled in the venv)")
    arguments = parser.parse_args()
    code = _choose_code(arguments.code, arguments.compiled_tree or default_compiled_tree())
    print(f"code: {code}")
    from conformance import SimConfig  # (after the code is chosen)

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
          f"{events_per_second / TARGET_EVENTS_PER_SECOND:.2f} (the target is set for the "
          f"3-broker, 2-dir cluster part below; this part is one broker's moves over "
          f"{config.log_dirs} dirs, disk-bound)")
    print(f"without trace checking: {baseline_per_second:,.0f} events/s "
          f"(checking keeps {events_per_second / baseline_per_second:.2f} of the speed)"
          if baseline_per_second else "without trace checking: no events")
    cluster = _cluster(arguments) if arguments.cluster_seconds > 0 else {}
    print(json.dumps({
        **cluster,
        "bench": "simulate",
        "code": code,
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
