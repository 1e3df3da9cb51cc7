"""The cluster simulator compiled with mypyc against the same code interpreted.

The measurement behind ``logproof fuzz --compiled`` (docs/performance.md, "Verification
throughput"): the modules the cluster simulation spends its time in
(:data:`spark._compiled.COMPILED`: the simulator, its network, disk and ZooKeeper, the trace
checker and its abstractions, the broker node and its stores, the controller and group cores, the
storage manager and log, the model layer's concrete operations) are copied to ``--build-dir`` with
the rest of ``impl``, ``model`` and ``conformance`` and compiled there, one mypyc group, by the
build ``make compiled`` runs (:func:`spark._compiled.build`); the repository itself is left alone.

Then, each in a fresh process (the compiled tree activated by :func:`spark._compiled.activate`,
which refuses a stale one, or not at all):

1. **equivalence**: seeds ``0 .. --seeds - 1`` of the default campaign configuration
   (``swarm_config(seed, brokers=3, log_dirs=2, steps=200)``), per seed: verdict, invariant,
   message, steps, events, events checked and unchecked, model action counts, trace digest, fault
   schedule, restarts, moves, acknowledged and consumed batches, elections, group counters; the
   two lists must be identical (mypyc enforces annotations at run time that the interpreter never
   checks, so a wrong annotation shows up as a ``TypeError`` or as a different outcome);
2. **throughput**: ``--runs`` runs of each, alternating (interpreted first), each 10 warm-up seeds
   (1,000,000 on) and then seeds 1..20 timed in CPU seconds of the process: trace-checked events
   per CPU second, the measurement of docs/performance.md.

Run: ``python -m bench.mypyc_sim --build-dir /tmp/lp-mypyc [--opt 3] [--seeds 100] [--runs 3]
[--no-build]`` (prints the build time, the equivalence verdict, every run with the load average,
then one JSON line). Exits 1 when the outcomes differ.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from spark._compiled import (
    COMPILED,
    SOURCE,
    CompiledBuildError,
    activate,
    build,
    directory_digests,
)

ROOT = Path(__file__).resolve().parent.parent

WARM_UP_FROM = 1_000_000
WARM_UP_SEEDS = 10
TIMED_SEEDS = range(1, 21)


def _outcomes(seeds: int) -> list[dict[str, Any]]:
    from conformance import cluster_sim  # (after the child chose its sys.path)
    from conformance.runner import swarm_config

    rows = []
    for seed in range(seeds):
        config = swarm_config(seed, brokers=3, log_dirs=2, steps=200)
        assert isinstance(config, cluster_sim.ClusterConfig)
        outcome = cluster_sim.simulate(seed, config)
        violation = outcome.violation
        verdict = outcome.trace_verdict
        rows.append({
            "seed": seed, "violation": None if violation is None else [
                violation.invariant, violation.message],
            "steps": outcome.steps, "events": outcome.events,
            "events_checked": verdict.events_checked,
            "events_unchecked": verdict.events_unchecked,
            "actions": dict(sorted(verdict.actions.items())),
            "trace_violation": None if verdict.violation is None else str(verdict.violation),
            "trace_digest": outcome.trace_digest,
            "faults": cluster_sim.format_faults(outcome.faults),
            "restarts": outcome.restarts, "moves_done": outcome.moves_done,
            "acknowledged": outcome.acknowledged_batches, "consumed": outcome.consumed_batches,
            "leader_elections": outcome.leader_elections,
            "controller_elections": outcome.controller_elections,
            "faults_skipped": outcome.faults_skipped, "group_commits": outcome.group_commits,
            "group_fetches": outcome.group_fetches,
            "group_assignments": outcome.group_assignments,
        })
    return rows


def _rate() -> dict[str, Any]:
    from conformance.runner import run_seed, swarm_config

    for seed in range(WARM_UP_FROM, WARM_UP_FROM + WARM_UP_SEEDS):
        run_seed(seed, swarm_config(seed, brokers=3, log_dirs=2, steps=200))
    cpu_started = time.process_time()
    events = checked = 0
    for seed in TIMED_SEEDS:
        result = run_seed(seed, swarm_config(seed, brokers=3, log_dirs=2, steps=200))
        events += result.events
        checked += result.events_checked
    cpu_seconds = time.process_time() - cpu_started
    return {"events": events, "events_checked": checked, "cpu_seconds": round(cpu_seconds, 3),
            "checked_per_cpu_second": round(checked / cpu_seconds, 1)}


def _child(arguments: argparse.Namespace) -> None:
    """Run in a fresh process: the compiled tree first on ``sys.path`` (or the sources)."""
    import logging

    logging.getLogger("impl").setLevel(logging.CRITICAL)
    if arguments.child_compiled:
        code = activate(Path(arguments.child_compiled), directory_digests(ROOT))
        assert code != SOURCE, "the compiled tree is stale: build it again"
    from conformance import cluster_sim  # (after the child chose its sys.path)

    compiled = str(cluster_sim.__file__).endswith(".so")
    assert compiled == bool(arguments.child_compiled), f"imported {cluster_sim.__file__}"
    if arguments.child == "outcomes":
        print(json.dumps(_outcomes(arguments.seeds)))
    else:
        print(json.dumps(_rate()))


def _run_child(kind: str, compiled_dir: Path | None, seeds: int) -> Any:
    command = [sys.executable, "-m", "bench.mypyc_sim", "--child", kind, "--seeds", str(seeds)]
    if compiled_dir is not None:
        command += ["--child-compiled", str(compiled_dir)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{kind} ({'compiled' if compiled_dir else 'interpreted'}) failed:\n"
                         f"{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    """Build, compare and measure (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path, default=Path("/tmp/logproof-mypyc-sim"))
    parser.add_argument("--opt", default="3", help="mypyc's opt_level (3: as setup.py)")
    parser.add_argument("--seeds", type=int, default=100, help="seeds of the equivalence check")
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each")
    parser.add_argument("--no-build", action="store_true", help="reuse --build-dir as it is")
    parser.add_argument("--child", choices=("outcomes", "rate"), help=argparse.SUPPRESS)
    parser.add_argument("--child-compiled", default="", help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.child:
        _child(arguments)
        return 0
    build_dir = arguments.build_dir.resolve()
    build_seconds = None
    if not arguments.no_build:
        try:
            build_seconds = round(build(build_dir, opt=arguments.opt), 1)
        except CompiledBuildError as error:
            raise SystemExit(str(error)) from error
        print(f"mypyc build of {len(COMPILED)} modules: {build_seconds} s wall")
    interpreted = _run_child("outcomes", None, arguments.seeds)
    compiled = _run_child("outcomes", build_dir, arguments.seeds)
    differing = [a["seed"] for a, b in zip(interpreted, compiled, strict=True) if a != b]
    print(f"equivalence, seeds 0..{arguments.seeds - 1}: "
          f"{arguments.seeds - len(differing)} of {arguments.seeds} identical"
          + (f" (differ: {differing[:20]})" if differing else ""))
    rates: dict[str, list[float]] = {"interpreted": [], "compiled": []}
    for run in range(1, arguments.runs + 1):
        for label, directory in (("interpreted", None), ("compiled", build_dir)):
            load = os.getloadavg()[0]
            figures = _run_child("rate", directory, 0)
            rates[label].append(figures["checked_per_cpu_second"])
            print(f"run {run} {label:>11}: {figures['checked_per_cpu_second']:9,.0f} checked "
                  f"events per CPU second ({figures['events_checked']} in "
                  f"{figures['cpu_seconds']:.2f} s; load {load:.2f})")
    means = {label: sum(values) / len(values) for label, values in rates.items()}
    speedup = means["compiled"] / means["interpreted"]
    print(f"mean: {means['interpreted']:,.0f} interpreted, {means['compiled']:,.0f} compiled "
          f"(x {speedup:.2f}); target 20,000")
    print(json.dumps({"build_seconds": build_seconds, "modules": len(COMPILED),
                      "identical": not differing, "differing_seeds": differing, "rates": rates,
                      "speedup": round(speedup, 3)}))
    return 1 if differing else 0


if __name__ == "__main__":
    raise SystemExit(main())
