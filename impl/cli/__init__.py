"""The ``logproof`` command line.

Each subcommand lives in its own module ``impl/cli/cmd_<name>.py`` exposing
``register(subparsers)``, which adds a parser whose ``handler`` default takes the parsed
arguments and returns the exit status. Modules are discovered, so ``logproof --help`` lists
exactly what exists and adding a subcommand touches no shared file.

User mistakes raise :class:`CliError`: one line on stderr, a non-zero exit, no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from collections.abc import Callable, Sequence

from ._errors import CliError as CliError

Handler = Callable[[argparse.Namespace], int]

__all__ = ["CliError", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every discovered subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="logproof",
        description=(
            "A Kafka-compatible broker for JBOD disks whose hardest protocols are state "
            "machines proven with Z3 and checked against the implementation."
        ),
    )
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    package_path = __path__
    for module_info in sorted(pkgutil.iter_modules(package_path), key=lambda m: m.name):
        if not module_info.name.startswith("cmd_"):
            continue
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``logproof`` command; returns the process exit status."""
    parser = build_parser()
    arguments = parser.parse_args(argv)
    handler: Handler | None = getattr(arguments, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return handler(arguments)
    except CliError as error:
        print(f"logproof: error: {error}", file=sys.stderr)
        return error.exit_status
    except KeyboardInterrupt:
        print("logproof: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`logproof … | head`): stop quietly, as Unix tools do, and keep
        # the interpreter from complaining again when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
