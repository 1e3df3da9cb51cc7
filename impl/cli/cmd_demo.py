"""``logproof demo``: the main job ``make run`` runs, end to end with what exists.

Each stage prints what it did; a stage that fails stops the demo with a non-zero exit.
"""

from __future__ import annotations

import argparse
from typing import Any

from impl.controller import EmbeddedZooKeeper, ZooKeeperUnavailableError, four_letter_word

from ._errors import CliError


def register(subparsers: Any) -> None:
    """Add the ``demo`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        help="run the end-to-end demonstration (what `make run` runs)",
        description="Start the pieces that exist, exercise them end to end, and report.",
    )
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    """Run every stage of the demo in order."""
    del arguments
    try:
        with EmbeddedZooKeeper() as zookeeper:
            status = four_letter_word(zookeeper.host, zookeeper.port, "srvr").splitlines()
            print(f"[zookeeper] real ZooKeeper serving on {zookeeper.connect_string}")
            for line in status[:2]:
                print(f"[zookeeper]   {line}")
    except ZooKeeperUnavailableError as error:
        raise CliError(str(error)) from error
    print("[demo] done")
    return 0
