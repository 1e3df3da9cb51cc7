"""``logproof fuzz`` argument handling: every mistake is one line and a non-zero exit, found
before Spark starts (these tests start no JVM)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from impl.cli import cmd_fuzz, main

RUNNER = "tests.integration.spark.seeded_runner"


@pytest.fixture(autouse=True)
def _no_compiled_tree(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every campaign here finds no compiled tree (as after an edit of the sources): its
    fallback line must not come before a usage error, which is the one line printed."""
    monkeypatch.setattr(cmd_fuzz, "default_compiled_tree", lambda: tmp_path / "no-tree")


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str) -> None:
    status = main(argv)
    err = capsys.readouterr().err
    assert status == 1, err
    assert err.count("\n") == 1, err
    assert err.startswith("logproof: error: ")
    assert fragment in err


def test_zero_seeds(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _one_line_error(
        capsys, ["fuzz", "--seeds", "0", "--out", str(tmp_path)], "--seeds must be >= 1"
    )


def test_missing_out(capsys: pytest.CaptureFixture[str]) -> None:
    _one_line_error(capsys, ["fuzz", "--seeds", "5"], "--out DIR is required")


def test_missing_seeds(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _one_line_error(capsys, ["fuzz", "--out", str(tmp_path)], "--seeds N is required")


def test_unwritable_out(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "campaign"
    _one_line_error(capsys, ["fuzz", "--seeds", "5", "--out", str(out)], "cannot be created")


def test_existing_campaign_needs_overwrite(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "campaign.json").write_text("{}")
    _one_line_error(
        capsys, ["fuzz", "--seeds", "5", "--out", str(tmp_path)], "already holds a campaign"
    )


def test_bad_master(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _one_line_error(
        capsys,
        ["fuzz", "--seeds", "5", "--master", "spark:/nohost", "--out", str(tmp_path)],
        "bad --master 'spark:/nohost'",
    )


def test_bad_conf(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _one_line_error(
        capsys,
        ["fuzz", "--seeds", "5", "--conf", "novalue", "--out", str(tmp_path)],
        "--conf must be KEY=VALUE",
    )


def test_bad_sizes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _one_line_error(
        capsys, ["fuzz", "--seeds", "5", "--brokers", "0", "--out", str(tmp_path)], "brokers"
    )


def test_missing_runner(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    argv = ["fuzz", "--seeds", "5", "--runner", "no_such_runner", "--out", str(tmp_path)]
    _one_line_error(capsys, argv, "runner module 'no_such_runner' cannot be imported")
    assert not (tmp_path / "campaign.json").exists()


def test_report_of_a_directory_without_campaign(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _one_line_error(capsys, ["fuzz", "report", str(tmp_path)], "holds no campaign results")


def test_replay_of_a_failing_seed(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["fuzz", "replay", "--runner", RUNNER, "--seed", "3", "--steps", "20"])
    out = capsys.readouterr().out
    assert status == 3
    assert "seed 3: fail" in out
    assert "violated invariant: LEADER_UNIQUE" in out
    assert "steps: 20" in out


def test_replay_of_a_passing_seed(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["fuzz", "replay", "--runner", RUNNER, "--seed", "4", "--steps", "20"])
    config = json.loads(capsys.readouterr().out.split("config: ")[1].splitlines()[0])
    assert status == 0
    assert config["steps"] == 20


def test_pack_writes_zip_and_launcher(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["fuzz", "pack", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "spark-submit" in out
    with zipfile.ZipFile(tmp_path / "logproof.zip") as archive:
        names = set(archive.namelist())
    assert {"spark/_runner.py", "impl/cli/cmd_fuzz.py", "conformance/__init__.py"} <= names
    launcher = (tmp_path / "logproof_fuzz.py").read_text()
    compile(launcher, "logproof_fuzz.py", "exec")
    assert 'main(["fuzz", *sys.argv[1:]])' in launcher
