"""Campaigns on ``local[2]``: verdicts independent of partitioning, rows, summary, progress.

One Spark context serves the whole module (a JVM start costs seconds). The runner is the test
stand-in ``seeded_runner``, whose verdicts the tests know independently; it is shipped to the
Python workers in the campaign zip like any runner.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from impl.cli import main
from spark import (
    BaseConfig,
    CampaignContext,
    CampaignFailedError,
    CampaignPlan,
    CampaignProgress,
    CampaignUsageError,
    RunRecord,
    SparkOptions,
    TaskSpec,
    load_runner,
    open_context,
    run_campaign,
    run_one,
)
from spark._compiled import FALLBACK_LINE, ROOT, directory_digests
from tests.integration.spark import seeded_runner
from tests.unit.spark.test_compiled import stand_in_tree

pytestmark = pytest.mark.integration

RUNNER = seeded_runner.__name__
BASE = BaseConfig(brokers=3, log_dirs=2, steps=60)


@pytest.fixture(scope="module")
def campaign_context() -> Iterator[CampaignContext]:
    with open_context(SparkOptions(master="local[2]", show_progress=False), RUNNER) as context:
        yield context


class RecordingListener:
    """Keeps what a campaign reports, in arrival order."""

    def __init__(self) -> None:
        self.parameters: dict[str, Any] = {}
        self.progress: list[CampaignProgress] = []
        self.failures: list[RunRecord] = []
        self.shrinking: list[int] = []

    def on_start(self, parameters: dict[str, Any]) -> None:
        self.parameters = parameters

    def on_progress(self, progress: CampaignProgress) -> None:
        self.progress.append(progress)

    def on_failure(self, record: RunRecord) -> None:
        self.failures.append(record)

    def on_shrinking(self, seeds: Sequence[int]) -> None:
        self.shrinking.extend(seeds)


def _runs(directory: Path) -> dict[int, dict[str, Any]]:
    table = pq.read_table(directory / "runs")
    return {row["seed"]: row for row in table.to_pylist()}


def test_verdicts_do_not_depend_on_partitioning(
    campaign_context: CampaignContext, tmp_path: Path
) -> None:
    """The conformance simulator's seeds, cut into 3 and into 7 ranges, give the same rows."""
    seeds = range(500, 530)
    base = BaseConfig(brokers=1, log_dirs=3, steps=40)
    results = {}
    for partitions, jobs in ((3, 2), (7, 5)):
        plan = CampaignPlan(
            len(seeds), first_seed=seeds[0], base=base, runner="conformance", partitions=partitions
        )
        out = tmp_path / f"p{partitions}"
        run_campaign(campaign_context.context, plan, out, code_version="test", concurrent_jobs=jobs)
        assert json.loads((out / "campaign.json").read_text())["partitions"] == partitions
        assert len(list((out / "runs").glob("part-*.parquet"))) >= 2
        results[partitions] = {
            seed: (row["verdict"], row["trace_digest"], row["config_json"], row["events_checked"])
            for seed, row in _runs(out).items()
        }
    assert set(results[3]) == set(seeds)
    assert results[3] == results[7]
    assert len({digest for _, digest, _, _ in results[3].values()}) == len(seeds)
    # and the same as running each seed on the driver, without Spark
    runner = load_runner("conformance")
    spec = TaskSpec("test", "conformance", base)
    for seed in seeds:
        record = run_one(runner, spec, seed, executor="driver")
        expected = (record.verdict, record.trace_digest, record.config_json, record.events_checked)
        assert results[3][seed] == expected


def test_known_bad_variant_is_caught_shrunk_and_replayable(
    campaign_context: CampaignContext, tmp_path: Path
) -> None:
    """The swap without the partition lock (a bug KIP-113 prevents) fails seeds; the campaign
    lists them with commands that replay them, and shrinks the first."""
    import conformance

    base = BaseConfig(brokers=1, log_dirs=3, steps=60, variant="unlocked_swap")
    plan = CampaignPlan(12, base=base, runner="conformance", partitions=4, shrink_max=2)
    summary = run_campaign(campaign_context.context, plan, tmp_path, code_version="test")
    assert summary.failures >= 1
    assert summary.errors == 0
    assert sum(summary.failures_by_invariant.values()) == summary.failures
    for failing in summary.failing:
        assert "--variant unlocked_swap" in failing.replay_command
        config = conformance.swarm_config(
            failing.seed, brokers=1, log_dirs=3, steps=60, variant="unlocked_swap"
        )
        again = conformance.run_seed(failing.seed, config)
        assert again.verdict == "fail"
        assert (again.violated_invariant, again.trace_digest) == (
            failing.violated_invariant,
            failing.trace_digest,
        )
    shrunk = [failing.shrunk for failing in summary.failing if failing.shrunk is not None]
    assert len(shrunk) == min(2, len(summary.failing))
    assert all(record.shrunk and "--faults" in record.replay_command for record in shrunk)


def test_campaign_rows_summary_progress_and_shrinking(
    campaign_context: CampaignContext, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "campaign"
    listener = RecordingListener()
    plan = CampaignPlan(200, base=BASE, runner=RUNNER, partitions=6, shrink_max=4)
    summary = run_campaign(
        campaign_context.context,
        plan,
        out,
        code_version="test",
        listener=listener,
        concurrent_jobs=2,
    )
    failing = [seed for seed in range(200) if seeded_runner.expected_verdict(seed) == "fail"]
    raising = [seed for seed in range(200) if seeded_runner.expected_verdict(seed) == "error"]

    # progress: every job reported once, counts only grow, failures arrive as they come
    assert [p.jobs_done for p in listener.progress] == list(range(1, len(listener.progress) + 1))
    assert listener.progress[-1].runs_done == 200
    runs_done = [p.runs_done for p in listener.progress]
    assert runs_done == sorted(runs_done)
    assert sorted(record.seed for record in listener.failures) == sorted(failing + raising)
    assert listener.shrinking == sorted(failing + raising)[:4]

    # rows: plain Parquet, one per seed, with the configuration and the replay command
    rows = _runs(out)
    assert sorted(rows) == list(range(200))
    assert rows[3]["violated_invariant"] == "LEADER_UNIQUE"
    assert rows[3]["replay_command"] == "walk-replay --seed 3"
    assert rows[7]["verdict"] == "error"
    assert rows[7]["replay_command"].startswith(f"logproof fuzz replay --runner {RUNNER} --seed 7")
    assert json.loads(rows[10]["config_json"])["steps"] == 60
    assert all(row["executor"] for row in rows.values())

    # summary: returned, written, and consistent with the rows
    written = json.loads((out / "summary.json").read_text())
    assert summary.runs == written["runs"] == 200
    assert written["failures"] == len(failing)
    assert written["errors"] == len(raising)
    assert written["failures_by_invariant"] == {"LEADER_UNIQUE": len(failing)}
    assert written["events"] == sum(row["events"] for row in rows.values())
    shrunk = [entry for entry in written["failing"] if entry["shrunk"] is not None]
    assert [entry["seed"] for entry in shrunk] == sorted(failing + raising)[:4]
    assert shrunk[0]["shrunk"]["replay_command"] == "walk-replay --seed 3 --faults 1"

    # the report reads the same directory
    assert main(["fuzz", "report", str(out), "--slowest", "3"]) == 0
    report = capsys.readouterr().out
    assert "runs: 200 (seeds 0..199)" in report
    assert "slowest 3 seeds:" in report
    assert "replay shrunk: walk-replay --seed 3 --faults 1" in report


def test_second_campaign_in_the_same_directory_needs_overwrite(
    campaign_context: CampaignContext, tmp_path: Path
) -> None:
    plan = CampaignPlan(20, base=BASE, runner=RUNNER, partitions=2)
    run_campaign(campaign_context.context, plan, tmp_path, code_version="test")
    with pytest.raises(CampaignUsageError, match="already holds a campaign"):
        run_campaign(campaign_context.context, plan, tmp_path, code_version="test")
    again = run_campaign(
        campaign_context.context, plan, tmp_path, code_version="t2", overwrite=True
    )
    assert again.runs == 20
    assert {row["code_version"] for row in _runs(tmp_path).values()} == {"t2"}


def test_fuzz_command_on_the_running_context(
    campaign_context: CampaignContext, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "campaign"
    argv = ["fuzz", "--seeds", "90", "--first-seed", "10", "--master", "local[2]"]
    argv += ["--partitions", "3", "--steps", "20", "--runner", RUNNER, "--out", str(out)]
    assert main(argv) == 3
    lines = capsys.readouterr().out.splitlines()
    seeds = range(10, 100)
    failing = [seed for seed in seeds if seeded_runner.expected_verdict(seed) != "pass"]
    assert lines[0].startswith("fuzz: seeds 10..99 on local[2], 3 seed ranges")
    printed = [line for line in lines if line.startswith("FAIL seed ")]
    assert sorted(int(line.split()[2].rstrip(":")) for line in printed) == failing
    assert any("90/90 runs (100%)" in line for line in lines)
    assert f"  seed {failing[0]}  LEADER_UNIQUE" in lines
    assert lines[-1] == f"results: {out / 'runs'} (Parquet), summary: {out / 'summary.json'}"
    assert json.loads((out / "summary.json").read_text())["runs"] == 90

    assert main(["fuzz", "--seeds", "5", "--runner", RUNNER, "--out", str(out)]) == 1
    assert "already holds a campaign" in capsys.readouterr().err
    other_master = ["fuzz", "--seeds", "5", "--master", "local[1]", "--runner", RUNNER]
    assert main([*other_master, "--out", str(tmp_path / "other")]) == 1
    assert "already runs a SparkContext on local[2]" in capsys.readouterr().err


def test_a_runner_missing_on_the_executors_fails_the_campaign_in_one_line(
    campaign_context: CampaignContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # importable on the driver only: not shipped (the context shipped before it existed)
    source = tmp_path / "source"
    source.mkdir()
    (source / "driver_only_runner.py").write_text(
        "from tests.integration.spark.seeded_runner import run_seed, swarm_config\n"
    )
    monkeypatch.syspath_prepend(str(source))
    plan = CampaignPlan(4, base=BASE, runner="driver_only_runner", partitions=2)
    with pytest.raises(CampaignFailedError) as failure:
        run_campaign(campaign_context.context, plan, tmp_path / "out", code_version="test")
    message = str(failure.value)
    assert "\n" not in message
    assert (
        "RunnerUnavailableError: runner module 'driver_only_runner' cannot be imported" in message
    )


def test_python_workers_run_the_driver_interpreter(campaign_context: CampaignContext) -> None:
    def interpreter(items: Iterable[int]) -> Iterator[str]:
        import sys as worker_sys  # a nested function: pickled by value

        del items
        yield worker_sys.executable

    found = campaign_context.context.parallelize(range(2), 2).mapPartitions(interpreter).collect()
    assert found == [sys.executable, sys.executable]


def _campaign_with_tree(tmp_path: Path, tree: str, options: list[str]) -> tuple[list[str], Path]:
    """A 12-seed campaign's argv with ``options`` and a compiled tree that is ``missing`` or a
    ``fresh`` stand-in built from these sources; and its output dir."""
    directory = tmp_path / "tree"
    if tree == "fresh":
        stand_in_tree(directory, directory_digests(ROOT))
    out = tmp_path / "campaign"
    argv = ["fuzz", "--seeds", "12", "--master", "local[2]", "--steps", "20", "--runner", RUNNER]
    return [*argv, *options, "--compiled-tree", str(directory), "--out", str(out)], out


@pytest.mark.parametrize("tree", ["missing", "fresh"])
@pytest.mark.parametrize("code", [[], ["--code", "auto"], ["--code", "source"]])
def test_a_campaign_without_a_usable_compiled_tree_runs_from_source(
    campaign_context: CampaignContext,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    tree: str,
    code: list[str],
) -> None:
    # missing: nothing was built; fresh (a stand-in tree built from these sources): this test
    # module's context reuses its Python workers, where shrinking would then run compiled code.
    # auto (the default) says so in one line; source never looks at the tree
    argv, out = _campaign_with_tree(tmp_path, tree, code)
    assert main(argv) == 3
    captured = capsys.readouterr()
    fallbacks = [line for line in captured.err.splitlines() if line.startswith(FALLBACK_LINE)]
    if code[1:] == ["source"]:
        assert fallbacks == [], captured.err
    else:
        assert len(fallbacks) == 1, captured.err
        assert ("reuses Python workers" in fallbacks[0]) == (tree == "fresh")
    assert "code: source: 12 runs" in captured.out.splitlines()
    assert json.loads((out / "campaign.json").read_text())["code"] == "source"
    assert {row["code"] for row in _runs(out).values()} == {"source"}


@pytest.mark.parametrize("tree", ["missing", "fresh"])
@pytest.mark.parametrize("flag", [["--code", "compiled"], ["--compiled"]])
def test_code_compiled_without_a_usable_tree_is_a_one_line_error(
    campaign_context: CampaignContext,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    tree: str,
    flag: list[str],
) -> None:
    argv, out = _campaign_with_tree(tmp_path, tree, flag)
    assert main(argv) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1
    assert "--code compiled: the compiled tree cannot run the seeds" in lines[0]
    assert ("reuses Python workers" in lines[0]) == (tree == "fresh")
    assert "Traceback" not in captured.err
    assert not (out / "runs").exists()
