"""The driver of a campaign: submit seed ranges, gather rows as they arrive, shrink failures.

Theory of operation: the seed interval is cut into ranges (:func:`spark._plan.seed_ranges`), one
per partition of ``parallelize(ranges, P).mapPartitions(run_seed_ranges)``. The partitions are
submitted as several concurrent Spark jobs (``SparkContext.runJob`` over groups of partitions,
from a bounded pool of driver threads), so that:

- the cluster stays busy (up to :data:`CONCURRENT_JOBS_MAX` jobs in flight, grouping partitions
  into jobs only on clusters of more than 16 cores);
- rows reach the driver as each job completes, not at the end: the driver writes them to Parquet
  at once and reports progress and each failing seed as it arrives (``toLocalIterator`` would do
  the same but run one partition at a time).

Nothing here decides a verdict; the order in which jobs complete decides only the order of lines
printed and of files written.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import math
import re
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from spark._compiled import SOURCE, CompiledChoice
from spark._errors import CampaignFailedError
from spark._output import (
    CAMPAIGN_FILE,
    SUMMARY_FILE,
    CampaignSummary,
    CampaignTally,
    prepare_output,
    summarize,
    write_json,
    write_part,
)
from spark._plan import CampaignPlan, SeedRange, default_partitions, seed_ranges
from spark._runner import (
    RunRecord,
    ShrinkRecord,
    TaskSpec,
    load_runner,
    run_seed_ranges,
    shrink_seed,
)

#: concurrent Spark jobs at most (driver threads, each blocked in one ``runJob``).
CONCURRENT_JOBS_MAX = 32

#: rows one job brings back to the driver at most (bounds the driver's memory per job).
ROWS_PER_JOB_MAX = 100_000

#: failing seeds shown in the printed summary (all are in the rows, the first
#: ``FAILURES_LISTED_MAX`` in ``summary.json``).
FAILURES_SHOWN_MAX = 20


@dataclass(frozen=True, slots=True)
class CampaignProgress:
    """Where a campaign stands (reported after each job's rows are written)."""

    runs_done: int
    runs_total: int
    jobs_done: int
    jobs_total: int
    failures: int
    errors: int
    events_checked: int
    seconds: float

    @property
    def events_per_second(self) -> float:
        """Trace-checked events per wall-clock second so far."""
        return self.events_checked / self.seconds if self.seconds > 0 else 0.0


class CampaignListener(Protocol):
    """Receives a campaign's progress on the driver (the command line prints it)."""

    def on_start(self, parameters: dict[str, Any]) -> None:
        """The campaign is about to submit its first job."""

    def on_progress(self, progress: CampaignProgress) -> None:
        """A job's rows were written."""

    def on_failure(self, record: RunRecord) -> None:
        """A failing run arrived (called before the ``on_progress`` of its job)."""

    def on_shrinking(self, seeds: Sequence[int]) -> None:
        """The failing ``seeds`` are about to be shrunk."""


class SilentListener:
    """A listener that ignores everything."""

    def on_start(self, parameters: dict[str, Any]) -> None:
        """Ignore."""

    def on_progress(self, progress: CampaignProgress) -> None:
        """Ignore."""

    def on_failure(self, record: RunRecord) -> None:
        """Ignore."""

    def on_shrinking(self, seeds: Sequence[int]) -> None:
        """Ignore."""


def group_partitions(
    partitions: int, concurrent_jobs: int, cores: int, seeds_per_partition_max: int = 1
) -> list[list[int]]:
    """Group partition indexes into jobs, as small as possible (results and progress arrive per
    job) but large enough that the jobs in flight keep every core busy, and none bringing back
    more than :data:`ROWS_PER_JOB_MAX` rows (unless one partition does).

    Args:
        partitions: partitions of the campaign's RDD (>= 1).
        concurrent_jobs: jobs in flight at once (>= 1).
        cores: the cluster's parallelism.
        seeds_per_partition_max: seeds in the largest partition.

    Returns:
        Consecutive, disjoint groups covering ``range(partitions)``, in order.
    """
    assert partitions >= 1
    assert concurrent_jobs >= 1
    assert seeds_per_partition_max >= 1
    # twice as many tasks in flight as cores: a job's last tasks leave no core idle
    size_for_cores = math.ceil(2 * max(cores, 1) / concurrent_jobs)
    size_for_memory = ROWS_PER_JOB_MAX // seeds_per_partition_max
    size = max(1, min(size_for_cores, size_for_memory))
    return [
        list(range(start, min(start + size, partitions))) for start in range(0, partitions, size)
    ]


def _spark_failure_message(error: BaseException) -> str:
    """The most telling line of a failed Spark job (the Python exception when there is one)."""
    text = str(error)
    python_errors = re.findall(
        r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)(?::[^\n]*)?)$", text, re.MULTILINE
    )
    foreign = ("py4j.", "org.apache", "java.")
    useful = [line for line in python_errors if not line.startswith(foreign)]
    if useful:
        return str(useful[-1])[:300]
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    return first[:300]


def _parameters(
    plan: CampaignPlan,
    partitions: int,
    master: str,
    version: str,
    *,
    shipped_sha256: str | None,
    compiled: CompiledChoice | None,
) -> dict[str, Any]:
    return {
        "first_seed": plan.first_seed,
        "seeds": plan.seeds_count,
        "stop_seed": plan.stop_seed,
        "partitions": partitions,
        "brokers": plan.base.brokers,
        "log_dirs": plan.base.log_dirs,
        "steps": plan.base.steps,
        "variant": plan.base.variant,
        "runner": plan.runner,
        "shrink_max": plan.shrink_max,
        "master": master,
        "code_version": version,
        "shipped_zip_sha256": shipped_sha256,
        "code": SOURCE if compiled is None else compiled.label,
        "started_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def run_campaign(
    context: Any,
    plan: CampaignPlan,
    out_dir: Path,
    *,
    code_version: str,
    overwrite: bool = False,
    listener: CampaignListener | None = None,
    shipped_sha256: str | None = None,
    concurrent_jobs: int | None = None,
    compiled: CompiledChoice | None = None,
) -> CampaignSummary:
    """Run every seed of ``plan`` on ``context`` and write the results under ``out_dir``.

    Args:
        context: a running ``SparkContext`` whose executors can import the runner (ship the
            project first, see :func:`spark.ship_project`).
        plan: the seeds, base configuration, runner and partitioning.
        out_dir: the output directory (see :mod:`spark._output`).
        code_version: the code the campaign runs (recorded in every row).
        overwrite: replace a campaign already in ``out_dir``.
        listener: receives progress and failures as they arrive.
        shipped_sha256: the digest of the shipped zip, recorded in ``campaign.json``.
        concurrent_jobs: Spark jobs in flight (default: twice the parallelism, bounded by
            :data:`CONCURRENT_JOBS_MAX`).
        compiled: run the seed tasks on this compiled tree where it is fresh (workers must not
            be reused: shrinking runs from source); recorded in ``campaign.json``, and per row.

    Returns:
        The campaign's summary (also written to ``out_dir/summary.json``).

    Raises:
        CampaignUsageError: ``out_dir`` cannot be used.
        RunnerUnavailableError: the runner cannot be imported on the driver.
        CampaignFailedError: a Spark job failed; rows already written stay.
    """
    sink: CampaignListener = listener or SilentListener()
    runner = load_runner(plan.runner)  # fail on the driver, before any job, when it is missing
    directory = prepare_output(out_dir, overwrite=overwrite)
    cores = int(context.defaultParallelism)
    partitions = plan.partitions or default_partitions(plan.seeds_count, cores)
    ranges = seed_ranges(plan.first_seed, plan.seeds_count, partitions)
    slots = concurrent_jobs or min(CONCURRENT_JOBS_MAX, max(2, 2 * cores))
    largest = max(len(seed_range) for seed_range in ranges)
    groups = group_partitions(len(ranges), slots, cores, largest)
    parameters = _parameters(
        plan,
        len(ranges),
        str(context.master),
        code_version,
        shipped_sha256=shipped_sha256,
        compiled=compiled,
    )
    write_json(directory / CAMPAIGN_FILE, parameters)
    spec = TaskSpec(code_version, plan.runner, plan.base, compiled)
    ranges_rdd = context.parallelize(ranges, len(ranges))
    task = functools.partial(run_seed_ranges, spec)
    job_group = f"logproof-fuzz-{uuid.uuid4().hex[:12]}"
    tally = CampaignTally()
    sink.on_start(parameters)
    started = time.perf_counter()

    def run_group(group: list[int]) -> tuple[list[int], list[Any]]:
        first, last = ranges[group[0]], ranges[group[-1]]
        context.setJobGroup(
            job_group, f"logproof seeds {first.first_seed}..{last.stop_seed - 1}", False
        )
        return group, context.runJob(ranges_rdd, task, group)

    with ThreadPoolExecutor(max_workers=min(slots, len(groups)), thread_name_prefix="fuzz") as pool:
        futures: list[Future[tuple[list[int], list[Any]]]] = [
            pool.submit(run_group, group) for group in groups
        ]
        try:
            for jobs_done, future in enumerate(as_completed(futures), start=1):
                group, rows = future.result()
                records = [RunRecord.from_row(row) for row in rows]
                _check_rows(records, [ranges[index] for index in group])
                write_part(directory, group[0], records)
                for record in records:
                    tally.add(record)
                    if record.failed:
                        sink.on_failure(record)
                sink.on_progress(
                    CampaignProgress(
                        runs_done=tally.runs,
                        runs_total=plan.seeds_count,
                        jobs_done=jobs_done,
                        jobs_total=len(groups),
                        failures=tally.failures,
                        errors=tally.errors,
                        events_checked=tally.events_checked,
                        seconds=time.perf_counter() - started,
                    )
                )
        except BaseException as error:
            for pending in futures:
                pending.cancel()
            context.cancelJobGroup(job_group)
            if isinstance(error, Exception) and type(error).__name__ == "Py4JJavaError":
                raise CampaignFailedError(
                    f"a Spark job failed: {_spark_failure_message(error)}"
                ) from error
            raise
    seconds = time.perf_counter() - started
    assert tally.runs == plan.seeds_count, (tally.runs, plan.seeds_count)
    shrunk = _shrink_failures(
        context,
        dataclasses.replace(spec, compiled=None),
        tally,
        shrink_max=plan.shrink_max,
        can_shrink=runner.shrink is not None,
        sink=sink,
    )
    summary = summarize(parameters, tally, seconds, shrunk)
    write_json(directory / SUMMARY_FILE, summary.to_json())
    return summary


def _check_rows(records: list[RunRecord], ranges: list[SeedRange]) -> None:
    """Every seed of the job's ranges came back exactly once, and nothing else."""
    expected = [
        seed for seed_range in ranges for seed in range(seed_range.first_seed, seed_range.stop_seed)
    ]
    got = sorted(record.seed for record in records)
    assert got == expected, f"job returned seeds {got[:5]}… for ranges {ranges[:2]}…"


def _shrink_failures(
    context: Any,
    spec: TaskSpec,
    tally: CampaignTally,
    *,
    shrink_max: int,
    can_shrink: bool,
    sink: CampaignListener,
) -> dict[int, ShrinkRecord]:
    """Shrink the first ``shrink_max`` failing seeds (by seed), one Spark task each."""
    failing = sorted(tally.failing, key=lambda record: record.seed)[:shrink_max]
    if not failing:
        return {}
    if not can_shrink:
        reason = f"{spec.runner} has no shrink()"
        return {
            record.seed: ShrinkRecord(record.seed, False, reason, record.replay_command, "")
            for record in failing
        }
    sink.on_shrinking([record.seed for record in failing])
    context.setJobGroup(f"logproof-shrink-{uuid.uuid4().hex[:12]}", "logproof shrink", False)
    work = [(record.seed, record.replay_command) for record in failing]
    try:
        results: list[ShrinkRecord] = (
            context.parallelize(work, len(work)).map(functools.partial(shrink_seed, spec)).collect()
        )
    except Exception as error:
        if type(error).__name__ == "Py4JJavaError":
            message = _spark_failure_message(error)
            raise CampaignFailedError(f"shrinking failed: {message}") from error
        raise
    return {result.seed: result for result in results}


def summary_lines(summary: CampaignSummary) -> list[str]:
    """The end-of-campaign summary as printed lines (the first failing seeds by seed)."""
    lines = [
        f"campaign: {summary.runs} runs in {summary.seconds:.1f} s "
        f"({summary.runs_per_second:,.1f} runs/s, "
        f"{summary.events_per_second:,.0f} checked events/s; "
        f"{summary.events_checked:,} of {summary.events:,} trace events checked)",
        f"failures: {summary.failures} (invariant violated), "
        f"errors: {summary.errors} (runner raised)",
        "code: "
        + "; ".join(f"{name}: {runs} runs" for name, runs in sorted(summary.codes.items())),
    ]
    if summary.failures_by_invariant:
        lines.append("failures by invariant:")
        width = max(len(name) for name in summary.failures_by_invariant)
        for name, count in sorted(summary.failures_by_invariant.items()):
            lines.append(f"  {name:<{width}}  {count}")
    if summary.failing:
        lines.append("failing seeds:")
        for failing in summary.failing[:FAILURES_SHOWN_MAX]:
            what = failing.violated_invariant or failing.error or failing.verdict
            lines.append(f"  seed {failing.seed}  {what}")
            lines.append(f"    replay: {failing.replay_command}")
            if failing.shrunk is not None and failing.shrunk.shrunk:
                lines.append(f"    shrunk: {failing.shrunk.description}")
                lines.append(f"    replay shrunk: {failing.shrunk.replay_command}")
            elif failing.shrunk is not None:
                lines.append(f"    not shrunk: {failing.shrunk.description}")
        unshown = summary.failures + summary.errors - min(len(summary.failing), FAILURES_SHOWN_MAX)
        if unshown > 0:
            lines.append(f"  … and {unshown} more (summary.json, or: logproof fuzz report DIR)")
    return lines
