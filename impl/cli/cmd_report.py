"""``logproof report show FILE``: render a JSON report written by ``logproof check --json``.

The exit status follows the report: 0 when every variant met its expectations, 1 otherwise, so a
saved report can gate a pipeline as the run that produced it would have.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from model import Report, ReportFormatError
from model._html import report_html

from ._errors import CliError
from .cmd_check import print_report, writable, write_text


def register(subparsers: Any) -> None:
    """Add the ``report`` subcommand (``report show``)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "report",
        help="render saved invariant reports",
        description="Render a JSON report written by `logproof check --json`.",
    )
    actions = parser.add_subparsers(title="actions", metavar="ACTION")
    show = actions.add_parser("show", help="print a saved report (tables and counterexamples)")
    show.add_argument("file", type=Path, metavar="FILE", help="the JSON report")
    show.add_argument("--html", type=Path, dest="html_path", metavar="OUT",
                      help="also write it as a self-contained HTML page")
    show.add_argument("--no-traces", action="store_true",
                      help="print the summary without the counterexample tables")
    show.set_defaults(handler=run_show)
    parser.set_defaults(handler=lambda _arguments: _usage(parser))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def load(path: Path) -> Report:
    """Read and parse a saved report.

    Raises:
        CliError: the file is missing, unreadable, or not a report.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise CliError(f"{path}: {error.strerror or error}") from error
    except UnicodeDecodeError as error:
        raise CliError(f"{path}: not a text file") from error
    try:
        return Report.loads(text)
    except ReportFormatError as error:
        raise CliError(f"{path}: {error}") from error


def run_show(arguments: argparse.Namespace) -> int:
    """Print the saved report; 0 when it records no failure."""
    writable(arguments.html_path, "--html")
    report = load(arguments.file)
    print_report(report, traces=not arguments.no_traces)
    if arguments.html_path is not None:
        write_text(arguments.html_path, report_html(report), "--html")
    return 0 if report.ok else 1
