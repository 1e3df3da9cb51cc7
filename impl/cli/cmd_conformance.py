"""``logproof conformance``: seeded simulations checked against the models, and their replay.

With ``--brokers`` above 1 the cluster simulator runs (brokers x log dirs, controllers over a
simulated ZooKeeper, replication over a simulated network, an idempotent acks=all producer and a
consumer); with one broker, the move/recovery simulator. ``run`` simulates seeds
``S .. S+N-1`` (a progress bar, then a summary: runs, events checked, verdicts by invariant,
events per second); each failing seed is shrunk to a minimal fault schedule and printed with its
replay command. ``replay`` reruns one seed (optionally with a given fault schedule) and prints
its verdict and, with ``--trace``, its trace as JSON lines.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from conformance import cluster_sim
from conformance.cluster_sim import ClusterConfig, ClusterOutcome
from conformance.move_sim import VARIANTS, SimConfig, parse_faults
from conformance.runner import (
    AnyConfig,
    AnyFault,
    RunResult,
    replay,
    run_seed,
    shrink,
    swarm_config,
)

from ._errors import CliError


def register(subparsers: Any) -> None:
    """Add the ``conformance`` subcommand and its ``run`` and ``replay`` actions."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "conformance",
        help="run seeded simulations checked against the models; replay one seed",
        description=(
            "Drive the storage engine through seeded workloads with injected faults (crashes, "
            "torn tails, failed and unreadable dirs) on simulated disks, checking every trace "
            "event against the model and the end-to-end invariants. With --brokers above 1, "
            "a whole simulated cluster (controllers, replication, clients, network and "
            "ZooKeeper faults)."
        ),
    )
    actions = parser.add_subparsers(title="actions", metavar="ACTION")

    run_parser = actions.add_parser("run", help="simulate many seeds")
    run_parser.add_argument("--seeds", type=int, default=100, help="how many seeds (default 100)")
    run_parser.add_argument("--first-seed", type=int, default=0, help="the first seed")
    run_parser.add_argument(
        "--swarm", action="store_true",
        help="draw partitions, fault rate, chunk and segment sizes from each seed",
    )
    run_parser.add_argument("--json", type=Path, help="write one JSON object per run here")
    run_parser.add_argument(
        "--no-shrink", action="store_true", help="do not shrink failing seeds"
    )
    _config_options(run_parser)
    run_parser.set_defaults(handler=run)

    replay_parser = actions.add_parser("replay", help="rerun one seed and print its verdict")
    replay_parser.add_argument("--seed", type=int, required=True, help="the seed")
    replay_parser.add_argument("--trace", action="store_true", help="print the trace")
    replay_parser.add_argument(
        "--faults", help="a fault schedule (step:kind:broker:target,…) instead of the seed's"
    )
    replay_parser.add_argument(
        "--swarm", action="store_true", help="draw the config from the seed as run --swarm does"
    )
    _config_options(replay_parser)
    replay_parser.set_defaults(handler=replay_command)
    parser.set_defaults(handler=lambda arguments: _missing_action(parser))


def _missing_action(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _config_options(parser: argparse.ArgumentParser) -> None:
    cluster, single = ClusterConfig(), SimConfig()
    parser.add_argument(
        "--brokers", type=int, default=cluster.brokers,
        help=f"brokers (default {cluster.brokers}: the cluster simulator; 1: the single-broker "
        "move simulator)",
    )
    parser.add_argument(
        "--log-dirs", type=int, default=None,
        help=f"dirs per broker (default {cluster.log_dirs}; {single.log_dirs} for one broker)",
    )
    parser.add_argument("--steps", type=int, default=None,
                        help=f"workload steps per run (default {cluster.steps}; {single.steps} "
                        "for one broker)")
    parser.add_argument("--partitions", type=int, default=None, help="partitions per broker")
    parser.add_argument(
        "--fault-probability", type=float, default=None,
        help=f"chance of a fault per step (default {cluster.fault_probability}; "
        f"{single.fault_probability} for one broker)",
    )
    parser.add_argument(
        "--variant", default="shipped",
        choices=sorted(set(VARIANTS) | set(cluster_sim.VARIANTS)),
        help="implementation variant (known-bad ones must be caught); "
        f"one broker: {', '.join(sorted(VARIANTS))}; "
        f"a cluster: {', '.join(sorted(cluster_sim.VARIANTS))}",
    )
    parser.add_argument("--segment-bytes", type=int, default=None)
    parser.add_argument("--chunk-bytes", type=int, default=None)
    parser.add_argument(
        "--compacted", type=int, default=0,
        help="one broker: how many of the partitions are cleanup.policy=compact, with the log "
        "cleaner racing appends, truncations, moves and crashes (its trace replayed in "
        "model/log_cleaner.py; default 0)",
    )
    parser.add_argument(
        "--no-network-faults", action="store_true",
        help="a cluster's network neither loses, duplicates nor reorders (partitions remain)",
    )
    parser.add_argument(
        "--no-storage-broker", action="store_true",
        help="a cluster runs without its storage broker (the single-broker simulator's storage "
        "workload and disk faults, run alongside the replicated topic)",
    )
    parser.add_argument(
        "--no-groups", action="store_true",
        help="a cluster runs without consumer groups (the brokers' group coordinators and the "
        "simulated group members)",
    )
    parser.add_argument(
        "--no-delete-records", action="store_true",
        help="a cluster runs without its DeleteRecords admin client",
    )
    parser.add_argument(
        "--no-admin", action="store_true",
        help="a cluster runs without its admin workload (topics created, grown and deleted, "
        "preferred replica elections)",
    )
    parser.add_argument(
        "--no-delayed-fetches", action="store_true",
        help="a cluster's leaders answer every follower fetch at once instead of parking one "
        "that found nothing (how the regression tests' older seeds were recorded)",
    )
    parser.add_argument(
        "--no-fetch-rounds", action="store_true",
        help="a cluster's followers send each of the node's fetch and epoch calls alone instead "
        "of one request per leader at a time (how the regression tests' older seeds were "
        "recorded)",
    )
    parser.add_argument(
        "--isr-scan-step", type=int, default=cluster.isr_scan_step_partitions,
        help="a cluster's brokers visit at most this many partitions led per step of their "
        f"periodic ISR scan (default {cluster.isr_scan_step_partitions}, the shipped step; "
        "smaller: a scan goes on over several pumps, messages delivered between its steps)",
    )
    parser.add_argument(
        "--model-machines", default=",".join(cluster.model_machines),
        help="a cluster's machines replayed in their models besides replica_move "
        "(comma-separated: replication,controller; default both; none: end-to-end checks only)",
    )


def _quiet_simulated_components() -> None:
    """The simulated brokers' storage engines log the faults they are dealt (a dir unreadable
    at start-up, ...); in a simulation those are the workload, not news, and the verdicts say
    what matters."""
    logging.getLogger("impl").setLevel(logging.CRITICAL)


def _resolve(arguments: argparse.Namespace) -> None:
    """Fill the options left unset with the chosen simulator's defaults."""
    default: ClusterConfig | SimConfig = ClusterConfig() if arguments.brokers > 1 else SimConfig()
    for name in ("log_dirs", "steps", "partitions", "fault_probability", "segment_bytes",
                 "chunk_bytes"):
        if getattr(arguments, name) is None:
            setattr(arguments, name, getattr(default, name))


def _config(arguments: argparse.Namespace, seed: int) -> AnyConfig:
    _resolve(arguments)
    if arguments.brokers < 1 or arguments.log_dirs < 2 or arguments.steps < 0:
        raise CliError("need --brokers >= 1, --log-dirs >= 2 and --steps >= 0")
    if arguments.partitions < 1 or not 0.0 <= arguments.fault_probability <= 1.0:
        raise CliError("need --partitions >= 1 and --fault-probability in [0, 1]")
    if arguments.isr_scan_step < 1:
        raise CliError("need --isr-scan-step >= 1")
    if not 0 <= arguments.compacted <= arguments.partitions:
        raise CliError("need 0 <= --compacted <= --partitions")
    if arguments.compacted and arguments.brokers > 1:
        raise CliError("--compacted needs --brokers 1 (the storage simulator)")
    if arguments.variant == "clean_active_segment" and not arguments.compacted:
        raise CliError("the clean_active_segment variant needs --compacted 1 or more")
    cluster = arguments.brokers > 1
    variants = cluster_sim.VARIANTS if cluster else VARIANTS
    if arguments.variant not in variants:
        raise CliError(f"variant {arguments.variant!r} needs "
                       f"{'one broker' if cluster else '--brokers 2 or more'}")
    machines = tuple(
        m.strip() for m in arguments.model_machines.split(",")
        if m.strip() and arguments.model_machines.strip() != "none"
    )
    if not set(machines) <= {"replication", "controller"}:
        raise CliError("--model-machines takes replication and/or controller")
    if arguments.swarm:
        drawn = swarm_config(
            seed, brokers=arguments.brokers, log_dirs=arguments.log_dirs, steps=arguments.steps,
            variant=arguments.variant if not arguments.compacted else "shipped",
        )
        if arguments.compacted and isinstance(drawn, SimConfig):
            # the drawn partition count, at least the compacted ones
            drawn = dataclasses.replace(
                drawn, partitions=max(drawn.partitions, arguments.compacted),
                compacted=arguments.compacted, variant=arguments.variant)
        return drawn
    if cluster:
        return ClusterConfig(
            brokers=arguments.brokers,
            log_dirs=arguments.log_dirs,
            partitions=arguments.partitions,
            steps=arguments.steps,
            fault_probability=arguments.fault_probability,
            variant=arguments.variant,
            segment_bytes=arguments.segment_bytes,
            chunk_bytes=arguments.chunk_bytes,
            network_faults=not arguments.no_network_faults,
            model_machines=machines,
            storage_broker=not arguments.no_storage_broker,
            groups=not arguments.no_groups,
            delete_records=not arguments.no_delete_records,
            admin=not arguments.no_admin,
            delayed_fetches=not arguments.no_delayed_fetches,
            fetch_rounds=not arguments.no_fetch_rounds,
            isr_scan_step_partitions=arguments.isr_scan_step,
        )
    return SimConfig(
        brokers=arguments.brokers,
        log_dirs=arguments.log_dirs,
        partitions=arguments.partitions,
        steps=arguments.steps,
        fault_probability=arguments.fault_probability,
        variant=arguments.variant,
        segment_bytes=arguments.segment_bytes,
        chunk_bytes=arguments.chunk_bytes,
        compacted=arguments.compacted,
    )


def run(arguments: argparse.Namespace) -> int:
    """Simulate ``--seeds`` seeds; print a summary; shrink and print each failure."""
    if arguments.seeds < 1:
        raise CliError("--seeds must be at least 1")
    _quiet_simulated_components()
    console = Console(soft_wrap=True)
    results: list[RunResult] = []
    started = time.perf_counter()
    json_file = arguments.json.open("w") if arguments.json is not None else None
    try:
        with Progress(
            TextColumn("[bold]simulating"), BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TextColumn("{task.fields[failures]} failing"), TimeRemainingColumn(),
            console=console, transient=True,
        ) as progress:
            task = progress.add_task("seeds", total=arguments.seeds, failures=0)
            for seed in range(arguments.first_seed, arguments.first_seed + arguments.seeds):
                result = run_seed(seed, _config(arguments, seed))
                results.append(result)
                if json_file is not None:
                    json_file.write(json.dumps(_as_json(result), sort_keys=True) + "\n")
                progress.update(
                    task, advance=1, failures=sum(1 for r in results if r.failed)
                )
    finally:
        if json_file is not None:
            json_file.close()
    elapsed_seconds = time.perf_counter() - started
    _summary(console, results, elapsed_seconds)
    failures = [result for result in results if result.failed]
    for result in failures[:10]:
        console.print(f"[red]seed {result.seed}[/red]: {result.violated_invariant}")
        console.print(f"  {result.message.splitlines()[0][:300]}")
        console.print(f"  replay: {result.replay_command}")
        if not arguments.no_shrink:
            shrunk = shrink(result.seed, _config(arguments, result.seed))
            console.print(f"  shrunk: {shrunk.description}")
            console.print(f"  replay shrunk: {shrunk.replay_command}")
    return 1 if failures else 0


def _summary(console: Console, results: list[RunResult], elapsed_seconds: float) -> None:
    events = sum(result.events for result in results)
    checked = sum(result.events_checked for result in results)
    steps = sum(result.steps for result in results)
    verdicts = Counter(result.violated_invariant or "pass" for result in results)
    console.print(f"runs: {len(results)}  failing: {sum(1 for r in results if r.failed)}")
    console.print(
        f"events: {events} (checked in the model: {checked})  steps: {steps}  "
        f"restarts: {sum(r.restarts for r in results)}  moves done: "
        f"{sum(r.moves_done for r in results)}"
    )
    rate = events / elapsed_seconds if elapsed_seconds > 0 else 0.0
    console.print(f"time: {elapsed_seconds:.2f} s  events/s: {rate:,.0f}")
    console.print(
        "verdicts: " + ", ".join(f"{name} {count}" for name, count in sorted(verdicts.items()))
    )


def _as_json(result: RunResult) -> dict[str, object]:
    return {
        "seed": result.seed,
        "verdict": result.verdict,
        "violated_invariant": result.violated_invariant,
        "steps": result.steps,
        "events": result.events,
        "events_checked": result.events_checked,
        "duration_seconds": round(result.duration_seconds, 6),
        "trace_digest": result.trace_digest,
        "replay_command": result.replay_command,
        "faults": result.faults,
    }


def replay_command(arguments: argparse.Namespace) -> int:
    """Rerun one seed; print the trace (``--trace``) and the verdict."""
    _quiet_simulated_components()
    config = _config(arguments, arguments.seed)
    faults: tuple[AnyFault, ...] | None = None
    try:
        if arguments.faults is not None:
            faults = (cluster_sim.parse_faults(arguments.faults)
                      if isinstance(config, ClusterConfig) else parse_faults(arguments.faults))
    except ValueError as error:
        raise CliError(str(error)) from error
    result, outcome = replay(arguments.seed, config, faults)
    if arguments.trace:
        for event in outcome.trace:
            print(event.to_json())
    print(f"seed {result.seed}: {result.verdict}"
          + (f" ({result.violated_invariant})" if result.failed else ""))
    print(f"steps {result.steps}  events {result.events} (checked {result.events_checked})  "
          f"restarts {result.restarts}  moves done {result.moves_done}")
    if isinstance(outcome, ClusterOutcome):
        print(f"acknowledged batches {outcome.acknowledged_batches}  consumed "
              f"{outcome.consumed_batches}  leader elections {outcome.leader_elections}  "
              f"controller elections {outcome.controller_elections}  faults skipped "
              f"{outcome.faults_skipped}")
        if outcome.config.groups:
            print(f"group commits acknowledged {outcome.group_commits}  offset fetches checked "
                  f"{outcome.group_fetches}  assignments {outcome.group_assignments}")
    print(f"faults: {result.faults or 'none'}")
    print(f"trace digest: {result.trace_digest}")
    if result.failed:
        print(result.message)
    print(f"replay: {result.replay_command}")
    return 1 if result.failed else 0
