"""Tables printed by the CLI keep every cell whole when standard output is not a terminal."""

from __future__ import annotations

import dataclasses
import io

import pytest
from rich.table import Table

from impl.cli._console import print_renderables
from impl.cli.cmd_check import print_report
from model import check_definitions
from tests.model._lockserv import LOCKSERV


def _wide_table() -> Table:
    table = Table(title="logproof check: invariants", title_justify="left")
    for column in ("model", "variant", "invariant", "expected", "result", "detail"):
        table.add_column(column)
    table.add_row("replica_move_with_a_long_name", "move_swap_races_cleaner_replace",
                  "COMPACTION_KEEPS_LATEST", "expected-counterexample", "0.123456789 s",
                  "a detail long enough to push the table past eighty columns on its own")
    return table


def test_piped_tables_are_printed_whole() -> None:
    out = io.StringIO()  # not a terminal
    print_renderables([_wide_table(), _wide_table()], file=out)
    text = out.getvalue()
    assert "…" not in text
    for cell in ("replica_move_with_a_long_name", "move_swap_races_cleaner_replace",
                 "expected-counterexample", "0.123456789 s",
                 "a detail long enough to push the table past eighty columns on its own"):
        assert text.count(cell) == 2
    assert max(len(line) for line in text.splitlines()) > 80


def test_check_report_piped_keeps_every_cell(capsys: pytest.CaptureFixture[str]) -> None:
    checked = check_definitions([LOCKSERV], variant="no_free_check")
    long_name = "lock_server_with_a_model_name_long_enough_to_overflow_any_default_width_" * 2
    report = dataclasses.replace(checked, results=tuple(
        dataclasses.replace(result, model=long_name) for result in checked.results
    ))
    print_report(report)
    text = capsys.readouterr().out
    assert "…" not in text
    assert long_name in text
    assert "no_free_check" in text
