"""A campaign's output directory: Parquet rows, the campaign file and the summary.

Layout of ``DIR``:

- ``campaign.json`` — written first: the plan, the master, the code version. Its presence marks
  ``DIR`` as holding a campaign (a second campaign refuses it without ``overwrite``).
- ``runs/part-NNNNN.parquet`` — one file per seed range, written by the driver (with pyarrow) as
  each task's rows arrive, atomically (temporary name, then rename): an interrupted campaign
  leaves only whole files. One row per run, columns :data:`spark._runner.RUN_COLUMNS`. The
  directory is a Parquet dataset any tool reads (pyarrow, Spark, DuckDB, pandas).
- ``summary.json`` — written last: totals, failures by invariant, rates, failing seeds with their
  replay commands and shrunk reproductions.

The driver writes everything, so ``DIR`` is a path on the driver's machine and executors need no
shared filesystem.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from spark._errors import CampaignUsageError
from spark._runner import RUN_COLUMNS, RunRecord, ShrinkRecord

CAMPAIGN_FILE = "campaign.json"
SUMMARY_FILE = "summary.json"
RUNS_DIRECTORY = "runs"

#: failing runs kept in memory and listed in the summary (all are in the Parquet rows).
FAILURES_LISTED_MAX = 1_000


def run_schema() -> Any:
    """The pyarrow schema of a run row."""
    import pyarrow as pa  # noqa: PLC0415 (executors import this package without pyarrow)

    types = {
        "seed": pa.int64(),
        "code_version": pa.string(),
        "runner": pa.string(),
        "config_brokers": pa.int32(),
        "config_log_dirs": pa.int32(),
        "config_steps": pa.int32(),
        "config_json": pa.string(),
        "verdict": pa.string(),
        "violated_invariant": pa.string(),
        "message": pa.string(),
        "steps": pa.int64(),
        "events": pa.int64(),
        "events_checked": pa.int64(),
        "duration_seconds": pa.float64(),
        "cpu_seconds": pa.float64(),
        "trace_digest": pa.string(),
        "replay_command": pa.string(),
        "error": pa.string(),
        "executor": pa.string(),
        "code": pa.string(),
    }
    assert tuple(types) == RUN_COLUMNS
    nullable = {"violated_invariant", "message", "error"}
    return pa.schema([pa.field(name, types[name], nullable=name in nullable) for name in types])


def check_output(directory: Path, *, overwrite: bool) -> Path:
    """Check that a campaign can write to ``directory``, creating it when missing; nothing in
    it is changed (run this before starting Spark, to fail in a second rather than after it).

    Args:
        directory: the output directory (created with its parents when missing).
        overwrite: whether a campaign already there may be replaced.

    Returns:
        The directory, absolute.

    Raises:
        CampaignUsageError: it is not a directory, cannot be created or written, or already
            holds a campaign and ``overwrite`` is off.
    """
    directory = directory.expanduser().absolute()
    if directory.exists() and not directory.is_dir():
        raise CampaignUsageError(f"--out {directory} exists and is not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        message = f"--out {directory} cannot be created: {error.strerror}"
        raise CampaignUsageError(message) from error
    try:
        probe_descriptor, probe = tempfile.mkstemp(dir=directory, prefix=".probe-")
        os.close(probe_descriptor)
        os.unlink(probe)
    except OSError as error:
        raise CampaignUsageError(f"--out {directory} is not writable: {error.strerror}") from error
    if not overwrite and any(path.exists() for path in _owned(directory)):
        raise CampaignUsageError(
            f"--out {directory} already holds a campaign (use --overwrite to replace it)"
        )
    return directory


def _owned(directory: Path) -> list[Path]:
    return [directory / CAMPAIGN_FILE, directory / SUMMARY_FILE, directory / RUNS_DIRECTORY]


def prepare_output(directory: Path, *, overwrite: bool) -> Path:
    """Make ``directory`` ready for a new campaign (see :func:`check_output`).

    Args:
        directory: the output directory (created with its parents when missing).
        overwrite: replace a campaign already there (only the campaign's own files are removed).

    Returns:
        The directory, absolute.

    Raises:
        CampaignUsageError: as :func:`check_output`.
    """
    directory = check_output(directory, overwrite=overwrite)
    for path in _owned(directory):
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    (directory / RUNS_DIRECTORY).mkdir()
    return directory


def write_json(path: Path, value: Mapping[str, Any]) -> None:
    """Write ``value`` as indented JSON, atomically."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
    temporary.replace(path)


def write_part(directory: Path, partition: int, records: Iterable[RunRecord]) -> Path:
    """Write one seed range's rows as ``runs/part-NNNNN.parquet``, atomically.

    Returns:
        The file written.
    """
    import pyarrow as pa  # noqa: PLC0415 (executors import this package without pyarrow)
    import pyarrow.parquet as pq  # noqa: PLC0415

    schema = run_schema()
    columns: dict[str, list[Any]] = {name: [] for name in RUN_COLUMNS}
    for record in records:
        for name, value in zip(RUN_COLUMNS, record.to_row(), strict=True):
            columns[name].append(value)
    table = pa.Table.from_pydict(columns, schema=schema)
    final = directory / RUNS_DIRECTORY / f"part-{partition:05d}.parquet"
    temporary = final.with_name(f".{final.name}.tmp")
    pq.write_table(table, temporary, compression="zstd")
    temporary.replace(final)
    return final


def read_runs(directory: Path) -> Any:
    """All run rows of the campaign in ``directory`` as a pyarrow table, sorted by seed.

    Raises:
        CampaignUsageError: ``directory`` holds no campaign rows.
    """
    import pyarrow.parquet as pq  # noqa: PLC0415

    runs = directory / RUNS_DIRECTORY
    parts = sorted(runs.glob("part-*.parquet")) if runs.is_dir() else []
    if not parts:
        raise CampaignUsageError(f"{directory} holds no campaign results (no {RUNS_DIRECTORY}/)")
    table = pq.read_table(runs, schema=run_schema())
    return table.sort_by("seed")


@dataclass(slots=True)
class CampaignTally:
    """Running totals over the rows seen so far (driver-side, updated as tasks complete)."""

    runs: int = 0
    failures: int = 0
    errors: int = 0
    events: int = 0
    events_checked: int = 0
    steps: int = 0
    run_seconds: float = 0.0
    cpu_seconds: float = 0.0
    failures_by_invariant: dict[str, int] = field(default_factory=dict)
    failing: list[RunRecord] = field(default_factory=list)
    codes: dict[str, int] = field(default_factory=dict)

    def add(self, record: RunRecord) -> None:
        """Count one run."""
        self.runs += 1
        self.codes[record.code] = self.codes.get(record.code, 0) + 1
        self.events += record.events
        self.events_checked += record.events_checked
        self.steps += record.steps
        self.run_seconds += record.duration_seconds
        self.cpu_seconds += record.cpu_seconds
        if record.verdict == "error":
            self.errors += 1
        elif record.verdict == "fail":
            self.failures += 1
            key = record.violated_invariant or "UNNAMED"
            self.failures_by_invariant[key] = self.failures_by_invariant.get(key, 0) + 1
        if record.failed:
            self.failing.append(record)
            if len(self.failing) >= 2 * FAILURES_LISTED_MAX:
                self.failing.sort(key=lambda kept: kept.seed)
                del self.failing[FAILURES_LISTED_MAX:]


@dataclass(frozen=True, slots=True)
class FailingSeed:
    """A failing seed as listed in the summary."""

    seed: int
    verdict: str
    violated_invariant: str | None
    error: str | None
    replay_command: str
    trace_digest: str
    shrunk: ShrinkRecord | None


@dataclass(frozen=True, slots=True)
class CampaignSummary:
    """What ``summary.json`` holds (and what the command line prints at the end).

    Attributes:
        parameters: the campaign's plan, master, runner and code version.
        runs: runs completed.
        failures: runs whose verdict is ``fail`` (an invariant violated).
        errors: runs whose runner raised.
        failures_by_invariant: failure counts per violated invariant.
        events: trace events emitted, over all runs.
        events_checked: trace events replayed in a model and checked, over all runs.
        steps: simulation steps, over all runs.
        seconds: wall-clock seconds from the first task submitted to the last row written.
        run_seconds: seconds spent inside the runner, summed over runs (all executors).
        cpu_seconds: CPU seconds the runs used, summed (unlike ``run_seconds``, not inflated
            when other processes take the CPU).
        failing: the failing seeds (the first :data:`FAILURES_LISTED_MAX` by seed).
        failing_listed_all: whether ``failing`` lists every failing seed.
        codes: runs per code that ran them (``source``, or a compiled tree's label).
    """

    parameters: Mapping[str, Any]
    runs: int
    failures: int
    errors: int
    failures_by_invariant: Mapping[str, int]
    events: int
    events_checked: int
    steps: int
    seconds: float
    run_seconds: float
    cpu_seconds: float
    failing: tuple[FailingSeed, ...]
    failing_listed_all: bool
    codes: Mapping[str, int] = field(default_factory=dict)

    @property
    def runs_per_second(self) -> float:
        """Runs completed per wall-clock second."""
        return self.runs / self.seconds if self.seconds > 0 else 0.0

    @property
    def events_per_second(self) -> float:
        """Trace-checked events per wall-clock second."""
        return self.events_checked / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        """The summary as plain JSON values."""
        value = asdict(self)
        value["parameters"] = dict(self.parameters)
        value["failures_by_invariant"] = dict(sorted(self.failures_by_invariant.items()))
        value["codes"] = dict(sorted(self.codes.items()))
        value["runs_per_second"] = round(self.runs_per_second, 3)
        value["events_per_second"] = round(self.events_per_second, 3)
        value["seconds"] = round(self.seconds, 3)
        value["run_seconds"] = round(self.run_seconds, 3)
        value["cpu_seconds"] = round(self.cpu_seconds, 3)
        return value


def summarize(
    parameters: Mapping[str, Any],
    tally: CampaignTally,
    seconds: float,
    shrunk: Mapping[int, ShrinkRecord],
) -> CampaignSummary:
    """Freeze the tally into a summary.

    Args:
        parameters: the campaign's parameters (as written to ``campaign.json``).
        tally: the totals over every row.
        seconds: the campaign's wall-clock duration.
        shrunk: shrink results by seed.

    Returns:
        The summary; failing seeds sorted by seed.
    """
    failing = tuple(
        FailingSeed(
            seed=record.seed,
            verdict=record.verdict,
            violated_invariant=record.violated_invariant,
            error=record.error,
            replay_command=record.replay_command,
            trace_digest=record.trace_digest,
            shrunk=shrunk.get(record.seed),
        )
        for record in sorted(tally.failing, key=lambda record: record.seed)[:FAILURES_LISTED_MAX]
    )
    return CampaignSummary(
        parameters=dict(parameters),
        runs=tally.runs,
        failures=tally.failures,
        errors=tally.errors,
        failures_by_invariant=dict(tally.failures_by_invariant),
        events=tally.events,
        events_checked=tally.events_checked,
        steps=tally.steps,
        seconds=seconds,
        run_seconds=tally.run_seconds,
        cpu_seconds=tally.cpu_seconds,
        failing=failing,
        failing_listed_all=len(failing) == tally.failures + tally.errors,
        codes=dict(tally.codes),
    )
