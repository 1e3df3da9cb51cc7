"""The executor side of a campaign: run every seed of a range and turn each result into a row.

Theory of operation: a Spark task receives a :class:`TaskSpec` (the code version, the runner
module's name and the base configuration) and an iterator of :class:`SeedRange` s. For each seed it
draws the run's configuration from the seed (``runner.swarm_config(seed, brokers=…, log_dirs=…,
steps=…)``), runs it (``runner.run_seed(seed, config)``) and yields one flat row (a tuple in
:data:`RUN_COLUMNS` order: tuples are the cheapest thing to pickle back to the driver). The task
is therefore ``(code_version, seed, swarm_config) -> verdict``: nothing else enters a verdict.

A runner that *raises* does not stop the campaign: the seed gets verdict ``error`` with the
exception's type and message, and its replay command, so a crash of the simulator (an
``AssertionError`` from one of its executable-spec assertions included) is reported like any
other failing seed rather than swallowed or allowed to kill the million seeds around it.

This module is imported on executors from the zip the driver ships; it imports nothing from
pyspark so that it can also run (and be tested) without Spark.
"""

from __future__ import annotations

import dataclasses
import enum
import gc
import importlib
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from spark._compiled import SOURCE, CompiledChoice, activate, active, confirm, running_digests
from spark._errors import RunnerUnavailableError
from spark._plan import BaseConfig, SeedRange

#: verdicts a row can carry; ``pass`` and ``fail`` come from the runner, ``error`` means it raised.
VERDICTS = ("pass", "fail", "error")

#: characters of a runner's violation message kept in a row.
MESSAGE_CHARS_MAX = 2_000

#: a task freezes what is alive after its first seed and then every this many seeds
#: (:func:`settle_garbage`)
FREEZE_EVERY_SEEDS = 100

#: allocations between two young collections in a task's process (CPython's default: 700)
YOUNG_GENERATION_OBJECTS = 5_000

#: the Parquet columns, in the order of the tuples tasks return.
RUN_COLUMNS = (
    "seed",
    "code_version",
    "runner",
    "config_brokers",
    "config_log_dirs",
    "config_steps",
    "config_json",
    "verdict",
    "violated_invariant",
    "message",
    "steps",
    "events",
    "events_checked",
    "duration_seconds",
    "cpu_seconds",
    "trace_digest",
    "replay_command",
    "error",
    "executor",
    "code",
)

RunRow = tuple[
    int,
    str,
    str,
    int,
    int,
    int,
    str,
    str,
    str | None,
    str | None,
    int,
    int,
    int,
    float,
    float,
    str,
    str,
    str | None,
    str,
    str,
]


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """What every task of a campaign shares.

    Attributes:
        code_version: the driver's ``git`` commit (``+dirty`` when the tree differs from it).
        runner: the dotted name of the runner module.
        base: the configuration every seed shares.
        compiled: the compiled tree the seed tasks activate when it is fresh against the
            shipped sources (``logproof fuzz --compiled``); ``None``: they run from source.
    """

    code_version: str
    runner: str
    base: BaseConfig
    compiled: CompiledChoice | None = None


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One simulated run: one row of the campaign's Parquet output (see :data:`RUN_COLUMNS`)."""

    seed: int
    code_version: str
    runner: str
    config_brokers: int
    config_log_dirs: int
    config_steps: int
    config_json: str
    verdict: str
    violated_invariant: str | None
    message: str | None
    steps: int
    events: int
    events_checked: int
    duration_seconds: float
    cpu_seconds: float
    trace_digest: str
    replay_command: str
    error: str | None
    executor: str
    code: str = SOURCE

    def __post_init__(self) -> None:
        assert self.verdict in VERDICTS, self.verdict
        assert (self.verdict == "pass") == (self.violated_invariant is None and self.error is None)

    @property
    def failed(self) -> bool:
        """Whether the run found a problem (an invariant violated or the runner raising)."""
        return self.verdict != "pass"

    def to_row(self) -> RunRow:
        """The record as a tuple in :data:`RUN_COLUMNS` order."""
        row: RunRow = dataclasses.astuple(self)
        return row

    @staticmethod
    def from_row(row: Iterable[Any]) -> RunRecord:
        """The inverse of :meth:`to_row`."""
        return RunRecord(*row)


@dataclass(frozen=True, slots=True)
class RunnerModule:
    """The functions a campaign calls, taken from the runner module.

    Attributes:
        name: the module's dotted name.
        run_seed: ``run_seed(seed, config) -> result``; the result has ``verdict``,
            ``violated_invariant``, ``steps``, ``events``, ``trace_digest``, ``replay_command``
            and optionally ``events_checked`` (events replayed in a model; ``events`` if absent)
            and ``message`` (the violation explained).
        swarm_config: ``swarm_config(seed, *, brokers, log_dirs, steps) -> config``.
        shrink: ``shrink(seed, config) -> shrunk`` or ``None`` when the module cannot shrink.
    """

    name: str
    run_seed: Callable[[int, Any], Any]
    swarm_config: Callable[..., Any]
    shrink: Callable[[int, Any], Any] | None


def load_runner(name: str) -> RunnerModule:
    """Import the runner module ``name`` and take its functions.

    Args:
        name: a dotted module name, e.g. ``"conformance"``.

    Returns:
        The module's ``run_seed``, ``swarm_config`` and (optional) ``shrink``.

    Raises:
        RunnerUnavailableError: the module cannot be imported or lacks ``run_seed`` or
            ``swarm_config``.
    """
    # The simulated components log the faults they are dealt (a dir unreadable at start-up,
    # ...): in a campaign those are the workload, and the rows say what matters.
    logging.getLogger("impl").setLevel(logging.CRITICAL)
    try:
        module: ModuleType = importlib.import_module(name)
    except ImportError as error:
        message = f"runner module {name!r} cannot be imported: {error}"
        raise RunnerUnavailableError(message) from error
    required = ("run_seed", "swarm_config")
    missing = [attr for attr in required if not callable(getattr(module, attr, None))]
    if missing:
        raise RunnerUnavailableError(
            f"runner module {name!r} has no {' and no '.join(missing)}: it cannot run a campaign"
        )
    shrink = getattr(module, "shrink", None)
    return RunnerModule(
        name=name,
        run_seed=module.run_seed,
        swarm_config=module.swarm_config,
        shrink=shrink if callable(shrink) else None,
    )


def config_for_seed(runner: RunnerModule, seed: int, base: BaseConfig) -> Any:
    """The run configuration of ``seed``: drawn from the seed by the runner (``options_swarm``)."""
    if base.variant is None:
        return runner.swarm_config(
            seed, brokers=base.brokers, log_dirs=base.log_dirs, steps=base.steps
        )
    return runner.swarm_config(
        seed, brokers=base.brokers, log_dirs=base.log_dirs, steps=base.steps, variant=base.variant
    )


def config_to_json(config: Any) -> str:
    """A byte-stable JSON rendering of a run configuration (a dataclass or a mapping)."""
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        value: Any = dataclasses.asdict(config)
    elif isinstance(config, dict):
        value = config
    else:
        value = {"repr": repr(config)}
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=_json_default)


def _json_default(value: object) -> object:
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, frozenset | set):
        return sorted(value, key=repr)
    return repr(value)


def verdict_name(verdict: object) -> str:
    """Normalise a runner's verdict (an enum member or a string) to ``pass`` or ``fail``.

    Raises:
        ValueError: the verdict is neither.
    """
    text = verdict.name if isinstance(verdict, enum.Enum) else str(verdict)
    lowered = text.lower()
    if lowered in ("pass", "passed", "ok"):
        return "pass"
    if lowered in ("fail", "failed", "violation", "violated"):
        return "fail"
    raise ValueError(f"unknown verdict {verdict!r}")


def fallback_replay_command(spec: TaskSpec, seed: int) -> str:
    """The command that re-runs one seed without Spark (used when the runner raised)."""
    command = (
        f"logproof fuzz replay --runner {spec.runner} --seed {seed} "
        f"--brokers {spec.base.brokers} --log-dirs {spec.base.log_dirs} --steps {spec.base.steps}"
    )
    if spec.base.variant is not None:
        command += f" --variant {spec.base.variant}"
    return command


def run_one(
    runner: RunnerModule, spec: TaskSpec, seed: int, executor: str, code: str = SOURCE
) -> RunRecord:
    """Run one seed and describe it.

    Args:
        runner: the loaded runner module.
        spec: the campaign's shared task description.
        seed: the seed.
        executor: ``host:pid`` of the process running it (reported, never used in a verdict).
        code: what ran it: :data:`spark._compiled.SOURCE` or a compiled tree's label.

    Returns:
        The run's record; verdict ``error`` when the runner raised.
    """
    config_json = ""
    started = time.perf_counter()
    started_cpu = time.process_time()
    try:
        config = config_for_seed(runner, seed, spec.base)
        config_json = config_to_json(config)
        result = runner.run_seed(seed, config)
        duration_seconds = time.perf_counter() - started
        cpu_seconds = time.process_time() - started_cpu
        verdict = verdict_name(result.verdict)
        invariant = result.violated_invariant
        return RunRecord(
            seed=seed,
            code_version=spec.code_version,
            runner=spec.runner,
            config_brokers=spec.base.brokers,
            config_log_dirs=spec.base.log_dirs,
            config_steps=spec.base.steps,
            config_json=config_json,
            verdict=verdict,
            violated_invariant=None if verdict == "pass" else str(invariant or "UNNAMED"),
            message=str(getattr(result, "message", "") or "")[:MESSAGE_CHARS_MAX] or None,
            steps=int(result.steps),
            events=int(result.events),
            events_checked=int(getattr(result, "events_checked", result.events)),
            duration_seconds=duration_seconds,
            cpu_seconds=cpu_seconds,
            trace_digest=str(result.trace_digest),
            replay_command=str(result.replay_command),
            error=None,
            executor=executor,
            code=code,
        )
    except Exception as error:  # a crashing seed is a finding, reported with its replay command
        return RunRecord(
            seed=seed,
            code_version=spec.code_version,
            runner=spec.runner,
            config_brokers=spec.base.brokers,
            config_log_dirs=spec.base.log_dirs,
            config_steps=spec.base.steps,
            config_json=config_json,
            verdict="error",
            violated_invariant=None,
            message=None,
            steps=0,
            events=0,
            events_checked=0,
            duration_seconds=time.perf_counter() - started,
            cpu_seconds=time.process_time() - started_cpu,
            trace_digest="",
            replay_command=fallback_replay_command(spec, seed),
            error=f"{type(error).__name__}: {error}".splitlines()[0][:500],
            executor=executor,
            code=code,
        )


def executor_name() -> str:
    """``host:pid`` of this process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def settle_garbage() -> None:
    """Collect, then freeze what is alive (``gc.freeze``) out of every later collection, and
    collect the young generation every :data:`YOUNG_GENERATION_OBJECTS` allocations.

    Between two seeds what is alive is the imported code, the models and the checker's memos,
    which only grow: CPython's full collections traversed them again and again, 10-15 % of a
    compiled simulator's time (``perf``: ``gc_collect_main``, ``visit_decref``,
    ``visit_reachable``); frozen after the first seed and every :data:`FREEZE_EVERY_SEEDS`,
    a seed ran 9 % faster compiled and 6 % interpreted, and 3-4 % more with young collections
    seven times rarer (docs/performance.md). Collecting first frees the finished seed's world,
    so only live objects are frozen. Nothing a seed decides depends on when collections run:
    the campaigns' rows are identical seed by seed with and without.
    """
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_OBJECTS, middle, old)


def run_seed_ranges(spec: TaskSpec, ranges: Iterable[SeedRange]) -> Iterator[RunRow]:
    """The body of one Spark task: every seed of every range, in order (the garbage collector
    settled after the first seed and every :data:`FREEZE_EVERY_SEEDS`, between seeds).

    Args:
        spec: the campaign's shared task description.
        ranges: the partition's seed ranges (one, as the driver builds them).

    Yields:
        One row per seed, in :data:`RUN_COLUMNS` order.

    Raises:
        RunnerUnavailableError: the runner module is missing on the executor.
    """
    code = active() or SOURCE
    if spec.compiled is not None:
        # before the runner's import: checked against the sources this worker was shipped
        code = activate(
            Path(spec.compiled.tree), running_digests(), expected=spec.compiled.manifest_sha256
        )
    runner = load_runner(spec.runner)
    if code != SOURCE and spec.compiled is not None:
        confirm(Path(spec.compiled.tree))
    executor = executor_name()
    ran = 0
    for seed_range in ranges:
        for seed in range(seed_range.first_seed, seed_range.stop_seed):
            row = run_one(runner, spec, seed, executor, code).to_row()
            ran += 1
            if ran == 1 or ran % FREEZE_EVERY_SEEDS == 0:
                settle_garbage()
            yield row


@dataclass(frozen=True, slots=True)
class ShrinkRecord:
    """A failing seed after shrinking.

    Attributes:
        seed: the failing seed.
        shrunk: ``True`` when the runner produced a smaller reproduction.
        description: the minimal fault schedule (or why there is none), one line.
        replay_command: the command that replays the shrunk run (the seed's own when not shrunk).
        detail_json: the runner's shrink result as JSON (``""`` when not shrunk).
    """

    seed: int
    shrunk: bool
    description: str
    replay_command: str
    detail_json: str


def shrink_seed(spec: TaskSpec, seed_and_replay: tuple[int, str]) -> ShrinkRecord:
    """Shrink one failing seed with the runner's ``shrink`` (runs as a Spark task).

    Args:
        spec: the campaign's shared task description.
        seed_and_replay: the failing seed and its replay command.

    Returns:
        The shrunk reproduction, or the seed itself with the reason it was not shrunk.
    """
    seed, replay_command = seed_and_replay
    if active() is not None:  # shrinking runs from source (compiled campaigns reuse no worker)
        reason = "this worker runs the compiled tree; replay the seed to shrink it from source"
        return ShrinkRecord(seed, False, reason, replay_command, "")
    runner = load_runner(spec.runner)
    if runner.shrink is None:
        return ShrinkRecord(seed, False, f"{spec.runner} has no shrink()", replay_command, "")
    try:
        shrunk = runner.shrink(seed, config_for_seed(runner, seed, spec.base))
    except Exception as error:  # a shrinker crash must not hide the failure it was shrinking
        message = f"shrink raised {type(error).__name__}: {error}".splitlines()[0][:500]
        return ShrinkRecord(seed, False, message, replay_command, "")
    description = str(getattr(shrunk, "description", "") or repr(shrunk)).splitlines()[0][:500]
    return ShrinkRecord(
        seed=seed,
        shrunk=True,
        description=description,
        replay_command=str(getattr(shrunk, "replay_command", replay_command)),
        detail_json=config_to_json(shrunk),
    )
