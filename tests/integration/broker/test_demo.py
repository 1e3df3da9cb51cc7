"""The broker demo (what ``logproof demo`` runs for ``make run``) succeeds end to end."""

from __future__ import annotations

import pytest

from impl.broker import run_demo

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def test_run_demo(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_demo() == 0
    out = capsys.readouterr().out
    for stage in ("[broker]", "[topic]", "[produce]", "[consume]", "[log-dirs]", "[move]",
                  "[verify]"):
        assert stage in out, out
    assert "FAILED" not in out
