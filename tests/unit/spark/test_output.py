"""The campaign directory: Parquet rows any tool reads, the summary, the report, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from spark import (
    BaseConfig,
    CampaignUsageError,
    TaskSpec,
    build_report,
    check_output,
    load_runner,
    read_runs,
    report_lines,
    run_one,
)
from spark._output import (
    CampaignTally,
    prepare_output,
    summarize,
    write_json,
    write_part,
)
from spark._runner import RUN_COLUMNS, RunRecord, shrink_seed
from tests.integration.spark import seeded_runner

RUNNER = "tests.integration.spark.seeded_runner"
SPEC = TaskSpec(code_version="abc123", runner=RUNNER, base=BaseConfig(3, 2, 30))


def _records(seeds: range) -> list[RunRecord]:
    runner = load_runner(RUNNER)
    return [run_one(runner, SPEC, seed, executor="here:1") for seed in seeds]


def _campaign(directory: Path, seeds: range, *, with_summary: bool) -> list[RunRecord]:
    prepare_output(directory, overwrite=False)
    records = _records(seeds)
    half = len(records) // 2
    write_part(directory, 1, records[half:])
    write_part(directory, 0, records[:half])
    if with_summary:
        tally = CampaignTally()
        for record in records:
            tally.add(record)
        shrunk = {
            record.seed: shrink_seed(SPEC, (record.seed, record.replay_command))
            for record in records
            if record.verdict == "fail"
        }
        summary = summarize({"seeds": len(records)}, tally, 2.0, shrunk)
        write_json(directory / "summary.json", summary.to_json())
    return records


def test_rows_are_plain_parquet(tmp_path: Path) -> None:
    records = _campaign(tmp_path / "c", range(100, 160), with_summary=False)
    table = pq.read_table(tmp_path / "c" / "runs")
    assert table.num_rows == 60
    assert tuple(table.column_names) == RUN_COLUMNS
    by_seed = {row["seed"]: row for row in table.to_pylist()}
    assert set(by_seed) == set(range(100, 160))
    for record in records:
        row = by_seed[record.seed]
        assert row["verdict"] == seeded_runner.expected_verdict(record.seed)
        assert row["trace_digest"] == record.trace_digest
        assert row["replay_command"] == record.replay_command


def test_read_runs_sorts_by_seed(tmp_path: Path) -> None:
    _campaign(tmp_path / "c", range(40), with_summary=False)
    assert read_runs(tmp_path / "c").column("seed").to_pylist() == list(range(40))


def test_summary_counts(tmp_path: Path) -> None:
    _campaign(tmp_path / "c", range(120), with_summary=True)
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    failing = [seed for seed in range(120) if seeded_runner.expected_verdict(seed) == "fail"]
    raising = [seed for seed in range(120) if seeded_runner.expected_verdict(seed) == "error"]
    assert summary["runs"] == 120
    assert summary["failures"] == len(failing)
    assert summary["errors"] == len(raising)
    assert summary["failures_by_invariant"] == {"LEADER_UNIQUE": len(failing)}
    assert [entry["seed"] for entry in summary["failing"]] == sorted(failing + raising)
    assert summary["events_per_second"] == pytest.approx(summary["events"] / 2.0)


def test_report_lists_slowest_and_failures(tmp_path: Path) -> None:
    records = _campaign(tmp_path / "c", range(80), with_summary=True)
    report = build_report(tmp_path / "c", slowest_count=5)
    assert report.runs == 80
    assert report.complete
    assert report.verdicts["fail"] == sum(record.verdict == "fail" for record in records)
    slowest = sorted(records, key=lambda record: (-record.duration_seconds, record.seed))[:5]
    assert [slow.seed for slow in report.slowest] == [record.seed for record in slowest]
    failing = [record.seed for record in records if record.failed]
    assert [failure.seed for failure in report.failures] == failing
    first_fail = next(f for f in report.failures if f.verdict == "fail")
    assert first_fail.shrunk_replay_command == f"walk-replay --seed {first_fail.seed} --faults 1"
    text = "\n".join(report_lines(report))
    assert "slowest 5 seeds:" in text
    assert f"replay: walk-replay --seed {first_fail.seed}" in text
    assert "LEADER_UNIQUE" in text


def test_report_of_an_interrupted_campaign(tmp_path: Path) -> None:
    _campaign(tmp_path / "c", range(10), with_summary=False)
    report = build_report(tmp_path / "c")
    assert not report.complete
    assert "incomplete" in report_lines(report)[0]


def test_report_of_an_empty_directory(tmp_path: Path) -> None:
    with pytest.raises(CampaignUsageError, match="holds no campaign results"):
        build_report(tmp_path)


def test_output_refuses_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(CampaignUsageError, match="exists and is not a directory"):
        check_output(tmp_path / "file", overwrite=False)
    with pytest.raises(CampaignUsageError, match="cannot be created"):
        check_output(tmp_path / "file" / "below", overwrite=False)


def test_output_refuses_an_existing_campaign_unless_overwrite(tmp_path: Path) -> None:
    directory = tmp_path / "c"
    _campaign(directory, range(10), with_summary=True)
    (directory / "notes.txt").write_text("mine")
    with pytest.raises(CampaignUsageError, match="already holds a campaign"):
        check_output(directory, overwrite=False)
    prepare_output(directory, overwrite=True)
    assert sorted(path.name for path in directory.iterdir()) == ["notes.txt", "runs"]
    assert list((directory / "runs").iterdir()) == []
