"""``logproof demo``: the main job ``make run`` runs, end to end.

Stages, each printing what it did; the first that fails stops the demo with a non-zero exit:

1. **broker** — an embedded real ZooKeeper and a broker with two log dirs: it registers, wins
   the controller election and leads the topic it creates; confluent-kafka produces with
   acks=all and kafka-python reads everything back; the partition moves to the other log dir
   (KIP-113) while a producer keeps writing; every acknowledged record is then in the log
   exactly once, in order (:func:`impl.broker.run_demo`).
2. **cluster** — an embedded ZooKeeper and three brokers as child processes with two log dirs
   each (``logproof cluster up``); a topic with replication factor 3 and
   ``min.insync.replicas=2`` receives an acks=all idempotent stream from confluent-kafka while
   its leader is SIGKILLed; another replica is elected (new leader epoch), the killed broker
   restarts and rejoins the ISR, and a consumer reads every acknowledged record exactly once, in
   order (:func:`impl.broker.run_cluster_demo`).
3. **invariants** — the Z3 check of the replica-move model: the shipped protocol proved, every
   known-bad variant refuted with its counterexample; the report is written as JSON and as a
   self-contained HTML page (``logproof check``).
4. **conformance** — seeded simulations of a 3-broker, 2-dir cluster (the real storage,
   replication and controller cores over simulated disks, network and ZooKeeper) with crashes,
   disk failures, zombie controllers, network faults, replica moves and reassignments, every
   trace event replayed through the executable models (``logproof conformance run``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._errors import CliError

DEFAULT_OUTPUT_DIR = Path("var/demo")


def register(subparsers: Any) -> None:
    """Add the ``demo`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        help="run the end-to-end demonstration (what `make run` runs)",
        description=(
            "Run a broker with real clients and a live log-dir move, prove the replica-move "
            "model, and run seeded conformance simulations; write the invariant report."
        ),
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=DEFAULT_OUTPUT_DIR,
        help=f"where the invariant reports go (default: {DEFAULT_OUTPUT_DIR})",
    )
    parser.add_argument(
        "--seeds", type=int, default=50, help="conformance seeds to simulate (default: 50)"
    )
    parser.set_defaults(handler=run)


def _stage(title: str) -> None:
    print(f"\n=== {title} ===", flush=True)


def run(arguments: argparse.Namespace) -> int:
    """Run every stage of the demo in order; returns the first non-zero status, else 0."""
    # Imported here: impl.cli imports this module while discovering commands, and the broker
    # stack is loaded only when the demo really runs.
    from impl.broker import run_cluster_demo, run_demo  # noqa: PLC0415
    from impl.cli import main  # noqa: PLC0415

    if arguments.seeds < 1:
        raise CliError(f"--seeds must be at least 1, not {arguments.seeds}")
    output_dir: Path = arguments.output_dir
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CliError(f"cannot create --output-dir {output_dir}: {error.strerror}") from error

    _stage("1/4 broker: real ZooKeeper, real clients, a replica moved between log dirs")
    status = run_demo()
    if status != 0:
        return status

    _stage("2/4 3-broker cluster: leader failover")
    status = run_cluster_demo()
    if status != 0:
        return status

    _stage("3/4 invariants: the replica-move model proved with Z3, known-bad variants refuted")
    json_path = output_dir / "invariants.json"
    html_path = output_dir / "invariants.html"
    status = main(
        [
            "check",
            "--model",
            "replica_move",
            "--no-traces",
            "--json",
            str(json_path),
            "--html",
            str(html_path),
        ]
    )
    if status != 0:
        return status
    print(f"[invariants] report: {json_path} (render with `logproof report show {json_path}`)")
    print(f"[invariants] timelines: {html_path}")

    _stage("4/4 conformance: seeded 3-broker cluster simulations with faults, trace-checked")
    status = main(["conformance", "run", "--seeds", str(arguments.seeds)])
    if status != 0:
        return status
    print("\n[demo] done: every stage passed")
    return 0
