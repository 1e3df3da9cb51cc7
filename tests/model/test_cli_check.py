"""``logproof check`` and ``logproof report show``: tables, files, exit statuses, one-line errors.

The commands are run on the layer's worked example (the registry is pointed at it) so the tests
stay fast; the real models are checked in ``test_models.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from impl.cli import cmd_check, main
from model import ModelDefinition, Status, Variant

from ._lockserv import LOCKSERV

#: The worked example with its two well-formed variants (``leak_frame`` is malformed on purpose).
WELL_FORMED = ModelDefinition(
    LOCKSERV.name, LOCKSERV.doc, LOCKSERV.build,
    (LOCKSERV.variant("shipped"), LOCKSERV.variant("no_free_check")), LOCKSERV.depth)


@pytest.fixture
def lockserv_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cmd_check, "discover", lambda: [WELL_FORMED])


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("logproof: error: ")
    return err


@pytest.mark.usefixtures("lockserv_only")
def test_check_writes_json_and_html_and_report_show_renders_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report_path = tmp_path / "report.json"
    html_path = tmp_path / "report.html"
    status = main(["check", "--jobs", "1", "--json", str(report_path), "--html", str(html_path)])
    out = capsys.readouterr().out
    assert status == 0
    assert "MUTEX" in out
    assert "proved" in out
    assert "invariant MUTEX is violated after 2 steps" in out
    data = json.loads(report_path.read_text())
    assert data["ok"] is True
    variants = {result["variant"]: result for result in data["results"]}
    mutex = next(r for r in variants["no_free_check"]["invariants"] if r["name"] == "MUTEX")
    assert mutex["status"] == "violated"
    assert [step["action"] for step in mutex["counterexample"]["steps"][1:]] in (
        ["lock(n=0)", "lock(n=1)"], ["lock(n=1)", "lock(n=0)"])
    page = html_path.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert "<svg" in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page
    assert "<script" not in page

    assert main(["report", "show", str(report_path)]) == 0
    shown = capsys.readouterr().out
    assert "invariant MUTEX is violated after 2 steps" in shown
    assert "OK:" in shown


@pytest.mark.usefixtures("lockserv_only")
def test_check_one_variant_at_a_depth(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--model", "lockserv", "--variant", "shipped", "--depth", "6",
                 "--no-traces", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "no_free_check" not in out
    assert "1 variants" in out


def test_exit_status_is_non_zero_when_expectations_fail(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = ModelDefinition(
        "lockserv", "", LOCKSERV.build,
        (Variant("shipped", "", shipped=True, expected={"MUTEX": Status.VIOLATED}),
         Variant("leak_frame", "not refuted", {"leak_frame": False})),
        depth=4)
    monkeypatch.setattr(cmd_check, "discover", lambda: [wrong])
    assert main(["check", "--jobs", "1"]) == 1
    out = capsys.readouterr().out
    assert "MUTEX is proved, expected violated" in out
    assert "known-bad variant is not refuted" in out
    assert "FAILED" in out


@pytest.mark.usefixtures("lockserv_only")
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["check", "--model", "nope"], "unknown model 'nope' (known: lockserv)"),
        (["check", "--variant", "nope"], "unknown variant 'nope'"),
        (["check", "--depth", "0"], "--depth must be at least 1"),
        (["check", "--jobs", "0"], "--jobs must be at least 1"),
        (["check", "--json", "/nonexistent-dir/x.json"], "no such directory"),
        (["check", "--html", "."], "is a directory"),
    ],
)
def test_bad_arguments_are_one_line_errors(
    arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(arguments) == 1
    assert message in _one_error_line(capsys)


def test_check_in_worker_processes_matches_the_sequential_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sequential = tmp_path / "sequential.json"
    parallel = tmp_path / "parallel.json"
    arguments = ["check", "--model", "log_dir_failure", "--no-traces"]
    assert main([*arguments, "--jobs", "1", "--json", str(sequential)]) == 0
    assert main([*arguments, "--jobs", "2", "--json", str(parallel)]) == 0
    capsys.readouterr()

    def statuses(path: Path) -> list[tuple[str, str, str]]:
        data = json.loads(path.read_text())
        return [(r["variant"], i["name"], i["status"])
                for r in data["results"] for i in r["invariants"]]

    assert statuses(sequential) == statuses(parallel)
    assert json.loads(parallel.read_text())["meta"]["jobs"] == "2"


def test_report_show_rejects_malformed_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert main(["report", "show", str(broken)]) == 1
    assert "not JSON" in _one_error_line(capsys)
    other = tmp_path / "other.json"
    other.write_text('{"tool": "something else"}')
    assert main(["report", "show", str(other)]) == 1
    assert "not a logproof check report" in _one_error_line(capsys)
    truncated = tmp_path / "truncated.json"
    truncated.write_text('{"tool": "logproof check", "format": 1, "results": [{}]}')
    assert main(["report", "show", str(truncated)]) == 1
    assert "malformed report" in _one_error_line(capsys)
    assert main(["report", "show", str(tmp_path / "missing.json")]) == 1
    assert "missing.json" in _one_error_line(capsys)


@pytest.mark.usefixtures("lockserv_only")
def test_check_one_invariant_is_a_targeted_search(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report_path = tmp_path / "report.json"
    status = main(["check", "--jobs", "1", "--invariant", "MUTEX", "--json", str(report_path)])
    capsys.readouterr()
    assert status == 0
    data = json.loads(report_path.read_text())
    for result in data["results"]:
        assert [invariant["name"] for invariant in result["invariants"]] == ["MUTEX"]
        assert result["witnesses"] == []
    statuses = {result["variant"]: result["invariants"][0]["status"] for result in data["results"]}
    assert statuses == {"shipped": "proved", "no_free_check": "violated"}


@pytest.mark.usefixtures("lockserv_only")
def test_check_unknown_invariant_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--jobs", "1", "--invariant", "NO_SUCH"]) != 0
    assert "unknown invariant NO_SUCH" in _one_error_line(capsys)
