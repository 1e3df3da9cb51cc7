"""``logproof check``: prove the models' invariants, refute the known-bad variants, report.

Every model module of ``model/`` with a ``MODELS`` list is checked: each invariant of each variant
is ``proved`` (inductive with its lemmas), ``holds to depth K`` (bounded) or ``violated`` (with a
step-by-step counterexample, replayed through the concrete model). ``--invariant NAME`` checks
only that invariant (a targeted search: ``logproof check --model replication --variant
kip101_without_kip279 --depth 7 --invariant LOG_MATCHING`` finds KAFKA-6361's divergence). The
exit status is non-zero when a shipped invariant fails, a known-bad variant is not refuted, a
status differs from its golden expectation, or a witness is unreachable.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from model import ModelDefinition, Report
from model._html import report_html
from model._render import report_renderables
from model._runner import check_in_parallel, default_jobs
from model.registry import discover

from ._console import print_renderables
from ._errors import CliError


def register(subparsers: Any) -> None:
    """Add the ``check`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "check",
        help="prove the models' invariants with Z3 and refute the known-bad variants",
        description=(
            "Check every model of model/ (or one): induction proofs per (action, invariant) "
            "pair, bounded model checking to a depth, reachability witnesses, known-bad "
            "variants refuted with counterexamples. Prints a table; writes JSON and HTML."
        ),
    )
    parser.add_argument("--model", help="check only this model (default: all)")
    parser.add_argument("--variant", help="check only this variant of each model")
    parser.add_argument("--depth", type=int, help="bounded-checking depth (default: per model)")
    parser.add_argument("--invariant", action="append", dest="invariants", metavar="NAME",
                        help="a targeted search: check only this invariant (repeatable), "
                        "e.g. a known counterexample past the variant's depth; no witnesses")
    parser.add_argument("--json", type=Path, dest="json_path", metavar="FILE",
                        help="write the report as JSON to FILE")
    parser.add_argument("--html", type=Path, dest="html_path", metavar="FILE",
                        help="write a self-contained HTML page with timelines to FILE")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="check N variants at once in worker processes (default: one per "
                        "core; 1: in this process)")
    parser.add_argument("--no-traces", action="store_true",
                        help="print the summary without the counterexample tables")
    parser.set_defaults(handler=run)


def writable(path: Path | None, option: str) -> None:
    """Fail early, before minutes of solving, when a report file cannot be written.

    Raises:
        CliError: the file's directory is missing or not writable, or the file is not.
    """
    if path is None:
        return
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise CliError(f"{option} {path}: is a directory")
    if not parent.is_dir():
        raise CliError(f"{option} {path}: no such directory {parent}")
    if path.exists() and not os.access(path, os.W_OK):
        raise CliError(f"{option} {path}: not writable")
    if not path.exists() and not os.access(parent, os.W_OK):
        raise CliError(f"{option} {path}: directory {parent} is not writable")


def select(
    definitions: list[ModelDefinition], model: str | None, variant: str | None
) -> list[ModelDefinition]:
    """The definitions to check, validated against ``--model`` and ``--variant``.

    Raises:
        CliError: unknown model, or a variant no selected model has.
    """
    if model is not None:
        known = {definition.name: definition for definition in definitions}
        if model not in known:
            raise CliError(f"unknown model {model!r} (known: {', '.join(sorted(known))})")
        definitions = [known[model]]
    if variant is not None:
        having = [d for d in definitions
                  if any(candidate.name == variant for candidate in d.variants)]
        if not having:
            variants = sorted({c.name for d in definitions for c in d.variants})
            raise CliError(f"unknown variant {variant!r} (known: {', '.join(variants)})")
        definitions = having
    return definitions


def write_text(path: Path, text: str, option: str) -> None:
    """Write a report file.

    Raises:
        CliError: the write failed.
    """
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise CliError(f"{option} {path}: {error.strerror or error}") from error


def run(arguments: argparse.Namespace) -> int:
    """Check, print, write the files; 0 when every variant meets its expectations."""
    if arguments.depth is not None and arguments.depth < 1:
        raise CliError(f"--depth must be at least 1, not {arguments.depth}")
    if arguments.jobs is not None and arguments.jobs < 1:
        raise CliError(f"--jobs must be at least 1, not {arguments.jobs}")
    writable(arguments.json_path, "--json")
    writable(arguments.html_path, "--html")
    definitions = select(discover(), arguments.model, arguments.variant)
    only = None if arguments.invariants is None else tuple(arguments.invariants)
    if only is not None:
        known = {name for definition in definitions for candidate in definition.variants
                 for name in definition.build(candidate).invariants}
        missing = sorted(set(only) - known)
        if missing:
            raise CliError(f"unknown invariant {', '.join(missing)}")
        definitions = [definition for definition in definitions
                       if set(only) <= set(definition.model().invariants)]
        if not definitions:
            raise CliError(f"no selected model has every invariant of {', '.join(only)}")
    report = check_in_parallel(
        definitions, variant=arguments.variant, depth=arguments.depth,
        jobs=arguments.jobs or default_jobs(), meta={"command": "logproof check"}, only=only,
    )
    print_report(report, traces=not arguments.no_traces)
    if arguments.json_path is not None:
        write_text(arguments.json_path, report.dumps(), "--json")
    if arguments.html_path is not None:
        write_text(arguments.html_path, report_html(report), "--html")
    return 0 if report.ok else 1


def print_report(report: Report, traces: bool = True) -> None:
    """Print a report's tables on standard output."""
    print_renderables(report_renderables(report, traces=traces))
