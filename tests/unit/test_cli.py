"""The command line: help lists the subcommands, user mistakes are one line and non-zero."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from impl.cli import CliError, main


def test_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "zookeeper" in out


def test_unknown_command_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["no-such-command"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_bad_port_is_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["zookeeper", "--port", "70000"])
    assert status == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("logproof: error: --port")


def test_console_script_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "impl.cli", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert "usage: logproof" in result.stdout


def test_cli_error_carries_exit_status() -> None:
    assert CliError("x", exit_status=3).exit_status == 3



def test_demo_rejects_bad_seed_count(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--seeds", "0"]) == 1
    err = capsys.readouterr().err
    assert err == "logproof: error: --seeds must be at least 1, not 0\n"


def test_a_command_leaves_no_hypothesis_directory_where_it_runs(tmp_path: Path) -> None:
    """kio's hypothesis strategies made every command cache a Unicode table in ``.hypothesis/``
    under its working directory; a command now imports kio without hypothesis, so nothing is
    cached anywhere (were hypothesis loaded, its cache would go to the user's cache directory)."""
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    environment = {key: value for key, value in os.environ.items()
                   if key != "HYPOTHESIS_STORAGE_DIRECTORY"}
    environment["XDG_CACHE_HOME"] = str(cache)
    environment["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    result = subprocess.run([sys.executable, "-m", "impl.cli", "--help"], cwd=work,
                            env=environment, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert list(work.iterdir()) == []
    assert not cache.exists()
