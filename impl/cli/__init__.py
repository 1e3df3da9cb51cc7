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


def _hypothesis_cache_outside_the_working_directory() -> None:
    """kio registers hypothesis strategies for its types when hypothesis is installed (it is:
    the conformance suite uses it), and registering makes hypothesis build a table of every
    Unicode character, cached in ``.hypothesis/`` under the working directory: every command,
    a broker included, left that directory wherever it ran and spent about 0.8 s of CPU on the
    table the first time there. Since :func:`_kio_without_hypothesis` a command loads
    hypothesis only if something it runs imports it; then its process keeps the cache in the
    user's cache directory instead (``$XDG_CACHE_HOME/logproof/hypothesis``, else
    ``~/.cache/...``); an explicit ``HYPOTHESIS_STORAGE_DIRECTORY`` wins, and a process that
    imported hypothesis already (a test run) keeps its own."""
    if "hypothesis" in sys.modules or "HYPOTHESIS_STORAGE_DIRECTORY" in os.environ:
        return
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = os.path.join(cache, "logproof", "hypothesis")


def _kio_without_hypothesis() -> None:
    """Import kio's type layer with hypothesis hidden, so that a command's process (a broker
    included) never loads hypothesis: kio imports it, when it is installed, only to register
    test strategies for its types (``kio.static._phantom``), which no command uses. That import
    cost every process about 0.2 s and 15 MiB of RSS, and registering built hypothesis's table of
    every Unicode character (0.8 s of CPU the first time). A process that imported hypothesis or
    kio already (a test run) is left as it is; hypothesis stays importable afterwards."""
    if "hypothesis" in sys.modules or "kio" in sys.modules:
        return
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # (import raises ImportError)
    try:
        importlib.import_module("kio.static._phantom")
    finally:
        del sys.modules["hypothesis"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``logproof`` command; returns the process exit status."""
    _kio_without_hypothesis()
    _hypothesis_cache_outside_the_working_directory()
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
