"""``logproof fuzz``: randomized conformance campaigns over many seeds, on Spark.

``logproof fuzz --seeds N --out DIR`` runs seeds ``S..S+N-1`` as Spark tasks (``local[*]`` unless
``--master`` names a cluster), writes one Parquet row per run under ``DIR/runs/``, prints progress
and every failing seed as it arrives, shrinks the failures, and prints and writes
(``DIR/summary.json``) the summary. ``logproof fuzz report DIR`` summarises a campaign directory;
``logproof fuzz replay --seed N`` re-runs one seed here, without Spark; ``logproof fuzz pack``
writes what ``spark-submit`` needs.

Exit status: 0 when every run passed, 3 when some seed failed, 1 for a usage or Spark error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spark import (
    DEFAULT_RUNNER,
    FALLBACK_LINE,
    PROJECT_PACKAGES,
    BaseConfig,
    CampaignError,
    CampaignPlan,
    CampaignProgress,
    CompiledChoice,
    RunRecord,
    ShippedZip,
    SparkOptions,
    TaskSpec,
    build_report,
    build_zip,
    check_compiled,
    check_output,
    code_version,
    default_compiled_tree,
    load_runner,
    open_context,
    report_lines,
    run_campaign,
    run_one,
    running_digests,
    summary_lines,
    validate_master,
    zip_digests,
)

from ._errors import CliError

#: exit status when the campaign ran and some seed failed.
EXIT_FAILURES_FOUND = 3

#: failing seeds printed as they arrive; later ones are counted and listed in the summary.
FAILURES_PRINTED_MAX = 50

#: ``--code``: the compiled tree when it can run, else the sources (the default)
AUTO = "auto"
#: ``--code``: the compiled tree or a one-line error
COMPILED = "compiled"
#: ``--code``: the interpreted sources
SOURCE_CODE = "source"
CODES = (AUTO, COMPILED, SOURCE_CODE)

_LAUNCHER = '''"""Run ``logproof fuzz`` under spark-submit; ship logproof.zip with --py-files."""

import sys

from impl.cli import main

sys.exit(main(["fuzz", *sys.argv[1:]]))
'''


def register(subparsers: Any) -> None:
    """Add the ``fuzz`` subcommand and its ``report``, ``replay`` and ``pack`` subcommands."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "fuzz",
        help="run seeded conformance simulations over many seeds on Spark",
        description=(
            "Run the conformance simulator over seeds S..S+N-1 as Spark tasks, one task per "
            "seed range; write one Parquet row per run under DIR/runs, DIR/summary.json, and "
            "the replay command of every failing seed. Exit status 3 when some seed failed."
        ),
    )
    _add_size_arguments(parser)
    parser.add_argument("--seeds", type=int, default=None, metavar="N", help="seeds to run")
    parser.add_argument("--first-seed", type=int, default=0, metavar="S", help="first seed (0)")
    parser.add_argument(
        "--master",
        default=None,
        metavar="URL",
        help="Spark master: local[*] (default), local[N], local-cluster[W,C,M], "
        "spark://host:port, yarn, k8s://host:port",
    )
    parser.add_argument(
        "--partitions",
        type=int,
        default=None,
        metavar="P",
        help="seed ranges, i.e. Spark tasks (default: 4 per core, at most 5000 seeds each)",
    )
    parser.add_argument("--out", type=Path, default=None, metavar="DIR", help="output directory")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace a campaign already in DIR"
    )
    parser.add_argument(
        "--shrink-max",
        type=int,
        default=20,
        metavar="M",
        help="failing seeds to shrink, the first by seed (20; 0 shrinks none)",
    )
    parser.add_argument(
        "--executor-python",
        default=None,
        metavar="PATH",
        help="interpreter of the executors (default: this one for local masters)",
    )
    parser.add_argument(
        "--no-ship",
        action="store_true",
        help="do not ship the project as a zip (executors have logproof installed)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a further Spark setting (repeatable), e.g. spark.executor.memory=2g",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="no Spark progress bar, no per-job lines"
    )
    parser.add_argument(
        "--code",
        choices=CODES,
        default=AUTO,
        help="what runs the seeds: auto (the default) the mypyc-compiled simulator that make "
        "setup builds, when it was built from exactly the shipped sources, else the sources "
        "(one line says why); compiled: that tree or an error; source: the interpreted code. "
        "Shrinking and replay always run from source",
    )
    parser.add_argument(
        "--compiled",
        dest="code",
        action="store_const",
        const=COMPILED,
        help="the same as --code compiled",
    )
    parser.add_argument(
        "--compiled-tree",
        type=Path,
        default=None,
        metavar="DIR",
        help="the compiled tree (default: logproof-compiled in the venv)",
    )
    parser.set_defaults(handler=run)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=False)

    report = commands.add_parser(
        "report",
        help="summarise a campaign directory",
        description="Summarise a campaign's Parquet rows: totals, slowest seeds, failures.",
    )
    report.add_argument("directory", type=Path, metavar="DIR", help="a campaign's output dir")
    report.add_argument(
        "--slowest", type=int, default=10, metavar="K", help="slowest seeds to list (10)"
    )
    report.add_argument("--json", action="store_true", help="print the report as JSON")
    report.set_defaults(handler=run_report)

    replay = commands.add_parser(
        "replay",
        help="re-run one seed here, without Spark",
        description="Re-run one seed of a campaign on this machine and print its result.",
    )
    _add_size_arguments(replay)
    replay.add_argument("--seed", type=int, required=True, metavar="N", help="the seed")
    replay.set_defaults(handler=run_replay)

    pack = commands.add_parser(
        "pack",
        help="write logproof.zip and logproof_fuzz.py for spark-submit",
        description=(
            "Write DIR/logproof.zip (the project's packages, for --py-files) and "
            "DIR/logproof_fuzz.py (the application file spark-submit runs)."
        ),
    )
    pack.add_argument("--out", type=Path, required=True, metavar="DIR", help="where to write")
    pack.set_defaults(handler=run_pack)


def _add_size_arguments(parser: argparse.ArgumentParser) -> None:
    default = BaseConfig()
    parser.add_argument(
        "--brokers", type=int, default=default.brokers, metavar="B",
        help=f"brokers ({default.brokers})",
    )  # fmt: skip
    parser.add_argument(
        "--log-dirs", type=int, default=default.log_dirs, metavar="D",
        help=f"log dirs per broker ({default.log_dirs})",
    )  # fmt: skip
    parser.add_argument(
        "--steps", type=int, default=default.steps, metavar="K",
        help=f"steps per run ({default.steps})",
    )  # fmt: skip
    parser.add_argument(
        "--variant", default=None, metavar="NAME",
        help="implementation variant, e.g. a known-bad one (default: the shipped one)",
    )  # fmt: skip
    parser.add_argument(
        "--runner",
        default=DEFAULT_RUNNER,
        metavar="MODULE",
        help=f"module with run_seed and swarm_config ({DEFAULT_RUNNER})",
    )


def _extra_conf(pairs: Sequence[str]) -> dict[str, str]:
    conf: dict[str, str] = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator or not key.strip():
            raise CliError(f"--conf must be KEY=VALUE, not {pair!r}")
        conf[key.strip()] = value
    return conf


class _Printer:
    """Prints a campaign's progress and failures on stdout as they arrive."""

    def __init__(self, *, per_job: bool) -> None:
        self._per_job = per_job
        self._failures_printed = 0

    def on_start(self, parameters: dict[str, Any]) -> None:
        last_seed = parameters["stop_seed"] - 1
        print(
            f"fuzz: seeds {parameters['first_seed']}..{last_seed} on {parameters['master']}, "
            f"{parameters['partitions']} seed ranges; runner {parameters['runner']}, "
            f"{parameters['brokers']} brokers x {parameters['log_dirs']} log dirs, "
            f"{parameters['steps']} steps, variant {parameters['variant'] or 'default'}; "
            f"code {parameters['code_version']}, {parameters['code']}",
            flush=True,
        )

    def on_progress(self, progress: CampaignProgress) -> None:
        if not self._per_job and progress.jobs_done != progress.jobs_total:
            return
        percent = 100.0 * progress.runs_done / progress.runs_total
        print(
            f"[{progress.seconds:7.1f} s] {progress.runs_done}/{progress.runs_total} runs "
            f"({percent:.0f}%), {progress.failures} failed, {progress.errors} errors, "
            f"{progress.events_per_second:,.0f} checked events/s",
            flush=True,
        )

    def on_failure(self, record: RunRecord) -> None:
        self._failures_printed += 1
        if self._failures_printed > FAILURES_PRINTED_MAX:
            if self._failures_printed == FAILURES_PRINTED_MAX + 1:
                print("further failing seeds are counted and listed in the summary", flush=True)
            return
        what = record.violated_invariant or record.error
        print(f"FAIL seed {record.seed}: {what}; replay: {record.replay_command}", flush=True)

    def on_shrinking(self, seeds: Sequence[int]) -> None:
        print(f"shrinking {len(seeds)} failing seed(s)", flush=True)


def _plan(arguments: argparse.Namespace) -> CampaignPlan:
    if arguments.seeds is None:
        raise CliError("--seeds N is required (or use: logproof fuzz report DIR)")
    if arguments.out is None:
        raise CliError("--out DIR is required")
    try:
        return CampaignPlan(
            seeds_count=arguments.seeds,
            first_seed=arguments.first_seed,
            base=BaseConfig(
                arguments.brokers, arguments.log_dirs, arguments.steps, arguments.variant
            ),
            runner=arguments.runner,
            partitions=arguments.partitions,
            shrink_max=arguments.shrink_max,
        )
    except CampaignError as error:
        raise CliError(str(error)) from error


def _compiled_choice(
    tree: Path, context: Any, shipped: ShippedZip | None, *, required: bool
) -> CompiledChoice | None:
    """The compiled tree checked against the zip the workers get (or the sources they import)
    and the Spark context: the choice, or ``None`` after the fallback line.

    Raises:
        CliError: ``required`` (``--code compiled``) and the tree cannot run the seeds.
    """
    sources = zip_digests(shipped.path) if shipped is not None else running_digests()
    choice, reason = check_compiled(tree, sources)
    if choice is not None and context.getConf().get("spark.python.worker.reuse", "true") != "false":
        choice, reason = None, "this Spark context reuses Python workers"
    if choice is None:
        _without_tree(reason, required=required)
    return choice


def _without_tree(reason: str, *, required: bool) -> None:
    """The compiled tree cannot run the seeds: the fallback line, or for ``--code compiled`` the
    error."""
    if required:
        raise CliError(f"--code compiled: the compiled tree cannot run the seeds: {reason}")
    print(f"{FALLBACK_LINE} ({reason})", file=sys.stderr, flush=True)


def run(arguments: argparse.Namespace) -> int:
    """Run a campaign: validate everything cheap first, then start Spark."""
    plan = _plan(arguments)
    extra_conf = _extra_conf(arguments.conf)
    try:  # (a usage error is the one line it prints: before the compiled tree is looked at)
        if arguments.master is not None:
            validate_master(arguments.master)
        out_dir = check_output(arguments.out, overwrite=arguments.overwrite)
        load_runner(plan.runner)
    except CampaignError as error:
        raise CliError(str(error)) from error
    tree = arguments.compiled_tree or default_compiled_tree()
    # checked here against the driver's sources (to start Spark without reusing Python workers,
    # so that shrinking runs from source), then against the zip shipped
    required = arguments.code == COMPILED
    compiled = False
    if arguments.code != SOURCE_CODE:
        choice, reason = check_compiled(tree, running_digests())
        if choice is None:
            _without_tree(reason, required=required)
        compiled = choice is not None
    if compiled:
        extra_conf.setdefault("spark.python.worker.reuse", "false")
    options = SparkOptions(
        master=arguments.master,
        executor_python=arguments.executor_python,
        ship=not arguments.no_ship,
        show_progress=not arguments.no_progress,
        extra_conf=extra_conf,
    )
    try:
        version = code_version()
        with open_context(options, plan.runner) as campaign_context:
            web_url = campaign_context.context.uiWebUrl
            if web_url:
                print(f"Spark UI: {web_url}", flush=True)
            choice = (
                _compiled_choice(
                    tree, campaign_context.context, campaign_context.shipped, required=required
                )
                if compiled
                else None
            )
            summary = run_campaign(
                campaign_context.context,
                plan,
                out_dir,
                code_version=version,
                overwrite=arguments.overwrite,
                listener=_Printer(per_job=not arguments.no_progress),
                shipped_sha256=(
                    campaign_context.shipped.sha256 if campaign_context.shipped else None
                ),
                compiled=choice,
            )
    except CampaignError as error:
        raise CliError(str(error)) from error
    for line in summary_lines(summary):
        print(line)
    print(f"results: {out_dir / 'runs'} (Parquet), summary: {out_dir / 'summary.json'}")
    return EXIT_FAILURES_FOUND if summary.failures or summary.errors else 0


def run_report(arguments: argparse.Namespace) -> int:
    """Print the report of a campaign directory."""
    try:
        report = build_report(arguments.directory, slowest_count=max(arguments.slowest, 0))
    except CampaignError as error:
        raise CliError(str(error)) from error
    if arguments.json:
        value = {
            "directory": str(report.directory),
            "runs": report.runs,
            "seeds_first": report.seeds_first,
            "seeds_last": report.seeds_last,
            "verdicts": report.verdicts,
            "failures_by_invariant": report.failures_by_invariant,
            "events": report.events,
            "events_checked": report.events_checked,
            "run_seconds": round(report.run_seconds, 6),
            "code_versions": list(report.code_versions),
            "complete": report.complete,
            "slowest": [_fields_of(slow) for slow in report.slowest],
            "failures": [_fields_of(failure) for failure in report.failures],
        }
        print(json.dumps(value, indent=2, sort_keys=True))
    else:
        for line in report_lines(report):
            print(line)
    return 0


def _fields_of(record: Any) -> dict[str, Any]:
    """The fields of a slotted dataclass instance as a dict."""
    return {name: getattr(record, name) for name in record.__slots__}


def run_replay(arguments: argparse.Namespace) -> int:
    """Re-run one seed on this machine."""
    try:
        base = BaseConfig(arguments.brokers, arguments.log_dirs, arguments.steps, arguments.variant)
        runner = load_runner(arguments.runner)
    except CampaignError as error:
        raise CliError(str(error)) from error
    spec = TaskSpec(code_version=code_version(), runner=arguments.runner, base=base)
    started = time.perf_counter()
    record = run_one(runner, spec, arguments.seed, executor="replay")
    print(f"seed {record.seed}: {record.verdict}")
    if record.violated_invariant:
        print(f"violated invariant: {record.violated_invariant}")
    if record.error:
        print(f"runner raised: {record.error}", file=sys.stderr)
    print(f"config: {record.config_json}")
    print(
        f"steps: {record.steps}, events: {record.events}, checked: {record.events_checked}, "
        f"trace digest: {record.trace_digest}"
    )
    print(f"seconds: {time.perf_counter() - started:.3f}")
    return 0 if record.verdict == "pass" else EXIT_FAILURES_FOUND


def run_pack(arguments: argparse.Namespace) -> int:
    """Write the zip and the launcher spark-submit needs."""
    out_dir: Path = arguments.out
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        shipped = build_zip(out_dir / "logproof.zip", PROJECT_PACKAGES)
        (out_dir / "logproof_fuzz.py").write_text(_LAUNCHER)
    except OSError as error:
        raise CliError(f"cannot write to {out_dir}: {error.strerror}") from error
    print(f"{shipped.path} ({len(shipped.members)} files, sha256 {shipped.sha256[:16]})")
    print(f"{out_dir / 'logproof_fuzz.py'}")
    print(
        "spark-submit --master spark://HOST:7077 "
        f"--py-files {shipped.path} {out_dir / 'logproof_fuzz.py'} --seeds N --out DIR"
    )
    return 0
