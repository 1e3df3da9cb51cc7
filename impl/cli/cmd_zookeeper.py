"""``logproof zookeeper``: run the embedded ZooKeeper in the foreground until interrupted."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from impl.controller import EmbeddedZooKeeper, ZooKeeperUnavailableError

from ._errors import CliError


def register(subparsers: Any) -> None:
    """Add the ``zookeeper`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "zookeeper",
        help="run a real ZooKeeper (Debian's package) on loopback until interrupted",
        description=(
            "Start the real ZooKeeper server from Debian's zookeeper package on a loopback port, "
            "print its connect string, and run until interrupted."
        ),
    )
    parser.add_argument("--port", type=int, default=None, help="client port (default: a free one)")
    parser.add_argument(
        "--data-dir", type=Path, default=None, help="data dir (default: a temporary one)"
    )
    parser.set_defaults(handler=run)


def run(arguments: argparse.Namespace) -> int:
    """Start ZooKeeper, print the connect string, wait for SIGINT or SIGTERM, stop it."""
    if arguments.port is not None and not 0 < arguments.port < 65536:
        raise CliError(f"--port must be between 1 and 65535, not {arguments.port}")
    if arguments.data_dir is not None:
        arguments.data_dir.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        with EmbeddedZooKeeper(port=arguments.port, data_dir=arguments.data_dir) as zookeeper:
            print(zookeeper.connect_string, flush=True)
            try:
                while not stop.wait(0.5):
                    if not zookeeper.is_running():
                        print("logproof: ZooKeeper exited", file=sys.stderr)
                        return 1
            except KeyboardInterrupt:
                pass
    except ZooKeeperUnavailableError as error:
        raise CliError(str(error)) from error
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0
