"""``logproof fuzz report DIR``: what a finished (or interrupted) campaign found.

Reads only the Parquet rows (and ``summary.json`` when present, for shrunk reproductions), so it
works on any campaign directory, including one copied off a cluster or cut short.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark._errors import CampaignUsageError
from spark._output import SUMMARY_FILE, read_runs

#: slowest seeds listed by default.
SLOWEST_COUNT = 10


@dataclass(frozen=True, slots=True)
class SlowSeed:
    """A seed among the slowest of a campaign."""

    seed: int
    duration_seconds: float
    steps: int
    events: int
    events_checked: int
    verdict: str


@dataclass(frozen=True, slots=True)
class ReportedFailure:
    """A failing seed as the report lists it."""

    seed: int
    verdict: str
    what: str
    message: str | None
    replay_command: str
    shrunk_description: str | None
    shrunk_replay_command: str | None


@dataclass(frozen=True, slots=True)
class CampaignReport:
    """A campaign's results, summarised from its Parquet rows.

    Attributes:
        directory: the campaign directory.
        runs: rows read.
        seeds_first: the smallest seed.
        seeds_last: the largest seed.
        verdicts: rows per verdict.
        failures_by_invariant: failing rows per violated invariant.
        events: trace events emitted, over all runs.
        events_checked: trace events replayed in a model, over all runs.
        run_seconds: seconds inside the runner, summed.
        code_versions: the code versions the rows were produced by.
        slowest: the slowest seeds, slowest first.
        failures: every failing seed, by seed.
        complete: whether ``summary.json`` exists (the campaign finished).
    """

    directory: Path
    runs: int
    seeds_first: int
    seeds_last: int
    verdicts: dict[str, int]
    failures_by_invariant: dict[str, int]
    events: int
    events_checked: int
    run_seconds: float
    code_versions: tuple[str, ...]
    slowest: tuple[SlowSeed, ...]
    failures: tuple[ReportedFailure, ...]
    complete: bool


def _shrunk_by_seed(directory: Path) -> dict[int, dict[str, Any]]:
    path = directory / SUMMARY_FILE
    if not path.is_file():
        return {}
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise CampaignUsageError(f"{path} is not readable JSON: {error}") from error
    shrunk: dict[int, dict[str, Any]] = {}
    for failing in summary.get("failing", []):
        if failing.get("shrunk"):
            shrunk[int(failing["seed"])] = failing["shrunk"]
    return shrunk


def build_report(directory: Path, slowest_count: int = SLOWEST_COUNT) -> CampaignReport:
    """Summarise the campaign in ``directory``.

    Args:
        directory: a campaign's output directory.
        slowest_count: how many of the slowest seeds to list.

    Returns:
        The report.

    Raises:
        CampaignUsageError: ``directory`` holds no campaign rows.
    """
    directory = directory.expanduser().absolute()
    if not directory.is_dir():
        raise CampaignUsageError(f"{directory} is not a directory")
    table = read_runs(directory)
    rows: dict[str, list[Any]] = table.to_pydict()
    seeds: list[int] = rows["seed"]
    verdicts = Counter(rows["verdict"])
    by_invariant = Counter(
        invariant
        for verdict, invariant in zip(rows["verdict"], rows["violated_invariant"], strict=True)
        if verdict == "fail"
    )
    durations: list[float] = rows["duration_seconds"]
    order = sorted(range(len(seeds)), key=lambda index: (-durations[index], seeds[index]))
    slowest = tuple(
        SlowSeed(
            seed=seeds[index],
            duration_seconds=rows["duration_seconds"][index],
            steps=rows["steps"][index],
            events=rows["events"][index],
            events_checked=rows["events_checked"][index],
            verdict=rows["verdict"][index],
        )
        for index in order[:slowest_count]
    )
    shrunk = _shrunk_by_seed(directory)
    failures = tuple(
        ReportedFailure(
            seed=seeds[index],
            verdict=rows["verdict"][index],
            what=rows["violated_invariant"][index] or rows["error"][index] or "",
            message=rows["message"][index],
            replay_command=rows["replay_command"][index],
            shrunk_description=(
                shrunk[seeds[index]]["description"] if seeds[index] in shrunk else None
            ),
            shrunk_replay_command=(
                shrunk[seeds[index]]["replay_command"]
                if seeds[index] in shrunk and shrunk[seeds[index]].get("shrunk")
                else None
            ),
        )
        for index in range(len(seeds))
        if rows["verdict"][index] != "pass"
    )
    return CampaignReport(
        directory=directory,
        runs=len(seeds),
        seeds_first=min(seeds),
        seeds_last=max(seeds),
        verdicts=dict(sorted(verdicts.items())),
        failures_by_invariant=dict(sorted(by_invariant.items())),
        events=sum(rows["events"]),
        events_checked=sum(rows["events_checked"]),
        run_seconds=sum(rows["duration_seconds"]),
        code_versions=tuple(sorted(set(rows["code_version"]))),
        slowest=slowest,
        failures=failures,
        complete=(directory / SUMMARY_FILE).is_file(),
    )


def report_lines(report: CampaignReport) -> list[str]:
    """The report as printed lines."""
    state = "complete" if report.complete else "incomplete (no summary.json: interrupted?)"
    verdicts = ", ".join(f"{count} {verdict}" for verdict, count in report.verdicts.items())
    lines = [
        f"campaign {report.directory}: {state}",
        f"runs: {report.runs} (seeds {report.seeds_first}..{report.seeds_last}): {verdicts}",
        f"trace events: {report.events:,}, checked: {report.events_checked:,}; "
        f"time in runs: {report.run_seconds:.2f} s",
        f"code: {', '.join(report.code_versions)}",
    ]
    if report.failures_by_invariant:
        lines.append("failures by invariant:")
        width = max(len(name) for name in report.failures_by_invariant)
        for name, count in report.failures_by_invariant.items():
            lines.append(f"  {name:<{width}}  {count}")
    lines.append(f"slowest {len(report.slowest)} seeds:")
    for slow in report.slowest:
        lines.append(
            f"  seed {slow.seed}  {slow.duration_seconds * 1000:.1f} ms  "
            f"{slow.steps} steps  {slow.events} events  {slow.verdict}"
        )
    if report.failures:
        lines.append(f"failing seeds ({len(report.failures)}):")
        for failure in report.failures:
            lines.append(f"  seed {failure.seed}  {failure.verdict}  {failure.what}")
            if failure.message:
                lines.append(f"    {failure.message.splitlines()[0][:200]}")
            lines.append(f"    replay: {failure.replay_command}")
            if failure.shrunk_replay_command is not None:
                lines.append(f"    shrunk: {failure.shrunk_description}")
                lines.append(f"    replay shrunk: {failure.shrunk_replay_command}")
    else:
        lines.append("no failing seeds")
    return lines
