"""``logproof fuzz --compiled`` on the real compiled tree: same results per seed as from source.

Marked slow: the tree is built first when it is stale (``make compiled``, about 2 minutes), then
two campaigns of 20 seeds run, each in its own process and Spark JVM.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from spark._compiled import FALLBACK_LINE, ROOT, default_compiled_tree, main, read_manifest

pytestmark = [pytest.mark.slow, pytest.mark.integration]

#: the columns a run's result is made of (not its timing, executor or code)
RESULT = (
    "verdict", "violated_invariant", "message", "steps", "events", "events_checked",
    "trace_digest", "config_json", "replay_command", "error",
)  # fmt: skip


def _fuzz(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = ["fuzz", "--seeds", "20", "--master", "local[2]", "--shrink-max", "0", "--out", str(out)]
    return subprocess.run(
        [sys.executable, "-m", "impl.cli", *argv, "--no-progress", *extra],
        capture_output=True, text=True, check=False, cwd=ROOT, timeout=400,
    )  # fmt: skip


def _results(out: Path) -> dict[int, tuple[Any, ...]]:
    rows = pq.read_table(out / "runs").to_pylist()
    return {row["seed"]: tuple(row[name] for name in RESULT) for row in rows}


@pytest.mark.timeout(1200)
def test_compiled_campaign_gives_the_interpreted_results(tmp_path: Path) -> None:
    assert main([]) == 0  # builds the tree when a source changed since its build
    manifest = read_manifest(default_compiled_tree())
    assert manifest is not None
    compiled = _fuzz(tmp_path / "compiled", "--compiled")
    assert compiled.returncode == 0, compiled.stderr[-3000:]
    assert FALLBACK_LINE not in compiled.stderr
    interpreted = _fuzz(tmp_path / "interpreted")
    assert interpreted.returncode == 0, interpreted.stderr[-3000:]

    assert f"code: {manifest.label}: 20 runs" in compiled.stdout.splitlines()
    assert "code: source: 20 runs" in interpreted.stdout.splitlines()
    expected = {"compiled": manifest.label, "interpreted": "source"}
    for name, code in expected.items():
        out = tmp_path / name
        assert json.loads((out / "campaign.json").read_text())["code"] == code
        assert json.loads((out / "summary.json").read_text())["codes"] == {code: 20}
    by_seed = _results(tmp_path / "compiled")
    assert sorted(by_seed) == list(range(20))
    assert by_seed == _results(tmp_path / "interpreted")
    assert all(result[0] == "pass" and result[5] > 0 for result in by_seed.values())


_SEED = """
import json, logging, sys
from spark._compiled import ROOT, activate, default_compiled_tree, directory_digests
if sys.argv[1] == "compiled":
    assert activate(default_compiled_tree(), directory_digests(ROOT)) != "source"
logging.getLogger("impl").setLevel(logging.CRITICAL)
from conformance.runner import run_seed, swarm_config
result = run_seed(957, swarm_config(957, brokers=3, log_dirs=2, steps=200))
print(json.dumps([str(result.verdict), result.events_checked, result.trace_digest]))
"""


@pytest.mark.timeout(600)
def test_seed_957_compiled() -> None:
    # a fetch from a failed log dir: compiled, the except clause's variable was typed as the
    # int error code bound earlier in the function (TypeError); see test_compiled.py
    assert main([]) == 0
    command = [sys.executable, "-c", _SEED]
    results = [
        subprocess.run([*command, code], capture_output=True, text=True, check=True, cwd=ROOT)
        for code in ("compiled", "source")
    ]
    assert results[0].stdout == results[1].stdout, results[0].stderr[-2000:]
