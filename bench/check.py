"""Time ``logproof check``: every model, every variant, as the command runs them.

Prints the time of every variant (checked in worker processes, one per core, as the command does)
and for every known-bad variant the solver time spent on each counterexample; then per model the
sum over its variants, and the wall-clock total against the targets (everything within 60 s on a
2-core machine, each known-bad counterexample within 10 s). Then, outside that total, the known
counterexamples longer than their variant's depth (``Variant.beyond``, e.g. KAFKA-6361's
LOG_MATCHING at depth 7), each found by a targeted search in this process and timed wall-clock
from start to replayed trace; and one JSON line.

    .venv/bin/python -m bench.check [--depth K] [--model NAME] [--jobs N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from model import Status, check_variant
from model._runner import check_in_parallel, default_jobs
from model.registry import discover

TOTAL_TARGET_SECONDS = 60.0
COUNTEREXAMPLE_TARGET_SECONDS = 10.0


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when every variant met its expectations."""
    parser = argparse.ArgumentParser(prog="python -m bench.check", description=__doc__)
    parser.add_argument("--depth", type=int, default=None)
    parser.add_argument("--model", default=None)
    parser.add_argument("--jobs", type=int, default=default_jobs(),
                        help="worker processes (default: one per core)")
    arguments = parser.parse_args(argv)
    definitions = [d for d in discover() if arguments.model in (None, d.name)]
    if not definitions:
        print(f"no model {arguments.model!r}", file=sys.stderr)
        return 2
    models: dict[str, dict[str, float]] = {}
    counterexamples: dict[str, float] = {}
    wall_start, cpu_start = time.perf_counter(), time.process_time()
    report = check_in_parallel(definitions, depth=arguments.depth, jobs=arguments.jobs)
    for result in report.results:
        kind = "shipped" if result.shipped else "known-bad"
        print(f"{result.model:>22} {result.variant:<28} {kind:<9} {result.seconds:7.2f}s "
              f"{'ok' if result.ok else 'FAILED'}")
        figures = models.setdefault(result.model, {"variant_seconds": 0.0})
        figures["variant_seconds"] = round(figures["variant_seconds"] + result.seconds, 3)
        for invariant in result.invariants:
            if (not result.shipped and invariant.kind == "safety"
                    and invariant.status is Status.VIOLATED):
                key = f"{result.model}/{result.variant}/{invariant.name}"
                counterexamples[key] = round(invariant.seconds, 3)
                print(f"{'':>22}   counterexample {invariant.name:<24} "
                      f"{invariant.seconds:7.2f}s (length {invariant.depth})")
    all_ok = report.ok
    wall = time.perf_counter() - wall_start
    cpu = time.process_time() - cpu_start
    print()
    for name, figures in models.items():
        print(f"{name:>22}: {figures['variant_seconds']:7.2f}s over its variants")
    deep: dict[str, float] = {}
    for definition in definitions:
        for variant in definition.variants:
            if arguments.depth is not None:
                continue
            for name, length in variant.beyond.items():
                started = time.perf_counter()
                found = check_variant(definition, variant, depth=length, only=(name,),
                                      clock=time.perf_counter)
                seconds = time.perf_counter() - started
                all_ok = all_ok and found.ok
                key = f"{definition.name}/{variant.name}/{name}@{length}"
                deep[key] = round(seconds, 3)
                counterexamples[key] = round(seconds, 3)
                print(f"{definition.name:>22} {variant.name:<28} beyond    {seconds:7.2f}s "
                      f"{'ok' if found.ok else 'FAILED'} (targeted: {name} at depth {length})")
    slowest = max(counterexamples.values(), default=0.0)
    print(f"{'total':>22}: {wall:7.2f}s wall with {arguments.jobs} jobs ({cpu:.2f}s cpu in this "
          f"process); target {TOTAL_TARGET_SECONDS:.0f}s "
          f"(ratio {wall / TOTAL_TARGET_SECONDS:.2f}); slowest counterexample {slowest:.2f}s "
          f"(target {COUNTEREXAMPLE_TARGET_SECONDS:.0f}s)")
    print(json.dumps({
        "benchmark": "check",
        "total_wall_seconds": round(wall, 3),
        "jobs": arguments.jobs,
        "main_process_cpu_seconds": round(cpu, 3),
        "target_seconds": TOTAL_TARGET_SECONDS,
        "ratio_to_target": round(wall / TOTAL_TARGET_SECONDS, 3),
        "models": models,
        "counterexample_seconds": counterexamples,
        "beyond_depth_counterexample_seconds": deep,
        "slowest_counterexample_seconds": slowest,
        "all_expectations_met": all_ok,
    }))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
