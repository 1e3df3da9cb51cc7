"""``logproof fuzz`` end to end, as a user runs it: its own process, its own Spark JVM.

Marked slow: a JVM start plus the first Python workers take 20 s idle and a minute on a busy
2-core machine; ``test_campaign.py`` runs the same command in-process on its shared context.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.integration.spark import seeded_runner

pytestmark = [pytest.mark.slow, pytest.mark.integration]

RUNNER = seeded_runner.__name__
ROOT = Path(__file__).resolve().parents[3]


def _logproof(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "impl.cli", *argv],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,  # the stand-in runner lives in tests/, importable from the checkout
        timeout=280,
    )


def test_fuzz_command_runs_reports_and_refuses_to_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "campaign"
    result = _logproof(
        "fuzz", "--seeds", "120", "--first-seed", "40", "--master", "local[2]",
        "--partitions", "4", "--steps", "30", "--shrink-max", "2", "--runner", RUNNER,
        "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 3, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    failing = [s for s in range(40, 160) if seeded_runner.expected_verdict(s) == "fail"]
    raising = [s for s in range(40, 160) if seeded_runner.expected_verdict(s) == "error"]
    assert lines[0].startswith("fuzz: seeds 40..159 on local[2], 4 seed ranges")
    printed = [line for line in lines if line.startswith("FAIL seed ")]
    assert sorted(int(line.split()[2].rstrip(":")) for line in printed) == sorted(failing + raising)
    assert any(line.startswith("[") and "120/120 runs (100%)" in line for line in lines)
    assert f"failures: {len(failing)} (invariant violated), errors: {len(raising)}" in result.stdout
    assert f"  LEADER_UNIQUE  {len(failing)}" in lines
    first = min(failing + raising)
    assert f"  seed {first}  " in result.stdout
    assert "events/s" in lines[-4] or any("events/s" in line for line in lines)
    assert lines[-1].startswith(f"results: {out / 'runs'} (Parquet)")

    summary = json.loads((out / "summary.json").read_text())
    assert summary["runs"] == 120
    assert summary["parameters"]["first_seed"] == 40
    assert summary["parameters"]["shipped_zip_sha256"]
    assert pq.read_table(out / "runs").num_rows == 120

    report = _logproof("fuzz", "report", str(out), "--json")
    assert report.returncode == 0, report.stderr
    value = json.loads(report.stdout)
    assert value["runs"] == 120
    assert [failure["seed"] for failure in value["failures"]] == sorted(failing + raising)
    assert len(value["slowest"]) == 10

    again = _logproof("fuzz", "--seeds", "5", "--runner", RUNNER, "--out", str(out))
    assert again.returncode == 1
    assert again.stderr.strip().count("\n") == 0
    assert "already holds a campaign" in again.stderr
