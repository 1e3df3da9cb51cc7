"""Line coverage of the broker node, the controller core and the storage cores by the default
conformance run alone (target >= 90 % each).

Runs ``logproof conformance run --seeds 200`` (the default configuration: 3 brokers x 2 log
dirs, the storage broker, the default fault rate; ``--seeds`` and ``--first-seed`` change the
range) in this process under ``coverage`` (no test suite, nothing else), then prints the line
coverage of each group of modules and of each module in it, the ratio of each group to the
target, and ends with one JSON line. The exit status is the conformance run's (1 when a seed
failed), so a failing run is never mistaken for evidence.

Groups (the code the issue's "same objects in both runtimes" is about):

* ``node``: the broker node and the replication decisions (``impl/broker/node.py``,
  ``impl/broker/replication.py``, ``impl/broker/producer_state.py``) and its storage adapter
  (``impl/broker/node_store.py``);
* ``controller``: the controller node (``impl/controller/node.py``: election, revalidation,
  watch-to-read mapping, request queues) and the controller core
  (``impl/controller/controller.py``, ``requests.py``, ``reassignment.py``, ``znodes.py``);
* ``storage``: the storage cores (``impl/storage/manager.py``, ``log.py``, ``replica_move.py``,
  ``move_recovery.py``, ``log_dir_failure.py``, ``mover.py``, ``throttle.py``,
  ``leader_epoch.py``).

Run: ``python -m bench.sim_coverage [--seeds 200] [--first-seed 0] [--target 90]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

GROUPS: dict[str, tuple[str, ...]] = {
    "node": ("impl/broker/node.py", "impl/broker/replication.py",
             "impl/broker/producer_state.py", "impl/broker/node_store.py"),
    "controller": ("impl/controller/node.py", "impl/controller/controller.py",
                   "impl/controller/requests.py",
                   "impl/controller/reassignment.py", "impl/controller/znodes.py"),
    "storage": ("impl/storage/manager.py", "impl/storage/log.py",
                "impl/storage/replica_move.py", "impl/storage/move_recovery.py",
                "impl/storage/log_dir_failure.py", "impl/storage/mover.py",
                "impl/storage/throttle.py", "impl/storage/leader_epoch.py"),
}


def main(argv: list[str] | None = None) -> int:
    """Measure, print, and return the conformance run's exit status."""
    parser = argparse.ArgumentParser(prog="python -m bench.sim_coverage")
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--target", type=float, default=90.0, help="percent per group")
    arguments = parser.parse_args(argv)

    import coverage

    files = [str(ROOT / path) for paths in GROUPS.values() for path in paths]
    measured = coverage.Coverage(data_file=None, include=files, branch=False)
    command = ["conformance", "run", "--seeds", str(arguments.seeds),
               "--first-seed", str(arguments.first_seed), "--no-shrink"]
    started = time.perf_counter()
    measured.start()
    try:
        from impl.cli import main as cli

        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            try:
                status = cli(command)
            except SystemExit as leaving:
                status = leaving.code if isinstance(leaving.code, int) else 1
    finally:
        measured.stop()
    seconds = time.perf_counter() - started
    summary = [line for line in output.getvalue().splitlines() if line.strip()][-4:]
    print(f"logproof {' '.join(command)}  ({seconds:.0f} s, exit status {status})")
    for line in summary:
        print(f"  {line}")

    report: dict[str, object] = {"seeds": arguments.seeds, "first_seed": arguments.first_seed,
                                 "target_percent": arguments.target, "status": status,
                                 "seconds": round(seconds, 1)}
    for group, paths in GROUPS.items():
        statements = missing = 0
        lines = []
        for path in paths:
            _, found, _, absent, _ = measured.analysis2(str(ROOT / path))
            statements += len(found)
            missing += len(absent)
            percent = 100.0 * (len(found) - len(absent)) / max(1, len(found))
            lines.append(f"    {path:40} {percent:6.1f} %  ({len(absent)} of {len(found)} "
                         "lines not run)")
        percent = 100.0 * (statements - missing) / max(1, statements)
        ratio = percent / arguments.target
        print(f"{group:10} {percent:6.1f} %  ratio to the {arguments.target:.0f} % target "
              f"{ratio:.2f}  ({statements - missing} of {statements} lines)")
        for line in lines:
            print(line)
        report[f"{group}_percent"] = round(percent, 1)
        report[f"{group}_ratio"] = round(ratio, 3)
    print(json.dumps(report))
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
