"""The executor side without Spark: one seed in, one row out, whatever the runner does."""

from __future__ import annotations

import enum
import gc
import json
from typing import Any

import pytest

from spark import (
    DEFAULT_RUNNER,
    BaseConfig,
    RunnerUnavailableError,
    RunRecord,
    TaskSpec,
    _runner,
    load_runner,
    run_one,
)
from spark._plan import SeedRange
from spark._runner import (
    FREEZE_EVERY_SEEDS,
    RUN_COLUMNS,
    YOUNG_GENERATION_OBJECTS,
    config_to_json,
    run_seed_ranges,
    settle_garbage,
    shrink_seed,
    verdict_name,
)
from tests.integration.spark import seeded_runner

RUNNER = "tests.integration.spark.seeded_runner"
SPEC = TaskSpec(code_version="abc123", runner=RUNNER, base=BaseConfig(3, 2, 40))


def test_passing_seed_row() -> None:
    record = run_one(load_runner(RUNNER), SPEC, 1, executor="here:1")
    assert record.verdict == "pass"
    assert record.violated_invariant is None
    assert record.error is None
    assert record.steps == 40
    assert record.events >= 40
    assert record.code_version == "abc123"
    assert json.loads(record.config_json)["brokers"] == 3
    assert record.replay_command == "walk-replay --seed 1"


def test_failing_seed_row() -> None:
    record = run_one(load_runner(RUNNER), SPEC, 3, executor="here:1")
    assert record.verdict == "fail"
    assert record.violated_invariant == "LEADER_UNIQUE"
    assert record.failed


def test_raising_runner_gives_an_error_row_with_a_replay_command() -> None:
    record = run_one(load_runner(RUNNER), SPEC, 7, executor="here:1")
    assert record.verdict == "error"
    assert record.error == "AssertionError: walk invariant broken at seed 7"
    assert record.replay_command == (
        f"logproof fuzz replay --runner {RUNNER} --seed 7 --brokers 3 --log-dirs 2 --steps 40"
    )


def test_same_seed_same_digest_other_seed_other_digest() -> None:
    runner = load_runner(RUNNER)
    first = run_one(runner, SPEC, 11, executor="a:1")
    again = run_one(runner, SPEC, 11, executor="b:2")
    other = run_one(runner, SPEC, 12, executor="a:1")
    assert first.trace_digest == again.trace_digest
    assert first.trace_digest != other.trace_digest


def test_row_round_trip() -> None:
    record = run_one(load_runner(RUNNER), SPEC, 3, executor="here:1")
    row = record.to_row()
    assert len(row) == len(RUN_COLUMNS)
    assert RunRecord.from_row(row) == record


@pytest.fixture(autouse=True)
def _no_real_freeze(monkeypatch: pytest.MonkeyPatch) -> None:
    """The task body settles the collector of the process it runs in: not pytest's."""
    monkeypatch.setattr(_runner, "settle_garbage", lambda: None)


def test_a_task_settles_the_collector_after_its_first_seed_and_every_hundred(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events: list[str] = []
    real_run_one = _runner.run_one
    monkeypatch.setattr(_runner, "settle_garbage", lambda: events.append("settle"))
    def run_one(*args: Any) -> RunRecord:
        events.append("seed")
        return real_run_one(*args)

    monkeypatch.setattr(_runner, "run_one", run_one)
    rows = list(run_seed_ranges(SPEC, [SeedRange(0, 150), SeedRange(500, 551)]))
    assert len(rows) == 201
    settled_after = [events[:index].count("seed") for index, event in enumerate(events)
                     if event == "settle"]
    assert settled_after == [1, FREEZE_EVERY_SEEDS, 2 * FREEZE_EVERY_SEEDS]


def test_settling_collects_then_freezes_and_spaces_young_collections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[object] = []
    def collect(*_: object) -> int:
        calls.append("collect")
        return 0

    monkeypatch.setattr(gc, "collect", collect)
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(gc, "get_threshold", lambda: (700, 11, 12))
    monkeypatch.setattr(gc, "set_threshold", lambda *args: calls.append(args))
    settle_garbage()
    assert calls == ["collect", "freeze", (YOUNG_GENERATION_OBJECTS, 11, 12)]


def test_task_body_yields_every_seed_in_order() -> None:
    rows = list(run_seed_ranges(SPEC, [SeedRange(5, 9), SeedRange(20, 22)]))
    assert [row[0] for row in rows] == [5, 6, 7, 8, 20, 21]
    verdicts = [row[RUN_COLUMNS.index("verdict")] for row in rows]
    assert verdicts == [seeded_runner.expected_verdict(seed) for seed in (5, 6, 7, 8, 20, 21)]


def test_shrink_seed_uses_the_runner_shrink() -> None:
    shrunk = shrink_seed(SPEC, (3, "walk-replay --seed 3"))
    assert shrunk.shrunk
    assert shrunk.description == "1 fault: crash broker 0"
    assert shrunk.replay_command == "walk-replay --seed 3 --faults 1"
    assert json.loads(shrunk.detail_json)["faults"] == ["crash broker 0"]


def test_missing_runner_module() -> None:
    with pytest.raises(RunnerUnavailableError, match="cannot be imported"):
        load_runner("tests.integration.spark.no_such_runner")


def test_runner_module_without_run_seed() -> None:
    with pytest.raises(RunnerUnavailableError, match="has no run_seed and no swarm_config"):
        load_runner("tests.integration.spark")


class _Verdict(enum.Enum):
    PASS = 1
    FAIL = 2


def test_verdict_names() -> None:
    assert verdict_name(_Verdict.PASS) == "pass"
    assert verdict_name(_Verdict.FAIL) == "fail"
    assert verdict_name("Passed") == "pass"
    with pytest.raises(ValueError, match="unknown verdict"):
        verdict_name("maybe")


def test_config_json_is_stable_and_sorted() -> None:
    config = seeded_runner.swarm_config(9, brokers=3, log_dirs=2, steps=5)
    assert config_to_json(config) == config_to_json(config)
    assert list(json.loads(config_to_json(config))) == sorted(json.loads(config_to_json(config)))
    assert config_to_json({"b": frozenset({2, 1}), "a": _Verdict.PASS}) == '{"a":"PASS","b":[1,2]}'


def test_the_conformance_simulator_is_the_default_runner() -> None:
    runner = load_runner(DEFAULT_RUNNER)
    assert DEFAULT_RUNNER == "conformance"
    spec = TaskSpec("v", DEFAULT_RUNNER, BaseConfig(brokers=1, log_dirs=3, steps=30))
    record = run_one(runner, spec, 5, executor="here:1")
    assert record.verdict in ("pass", "fail"), record  # a real finding would be "fail"
    assert record.events_checked > 0
    assert record.replay_command.startswith("logproof conformance replay --seed 5")
    assert json.loads(record.config_json)["steps"] == 30


def test_a_variant_reaches_the_runner() -> None:
    runner = load_runner(DEFAULT_RUNNER)
    base = BaseConfig(brokers=1, log_dirs=3, steps=30, variant="unlocked_swap")
    spec = TaskSpec("v", DEFAULT_RUNNER, base)
    records = [run_one(runner, spec, seed, executor="here:1") for seed in range(6)]
    assert all(json.loads(r.config_json)["variant"] == "unlocked_swap" for r in records)
    failing = [record for record in records if record.verdict == "fail"]
    assert failing, [record.verdict for record in records]
    assert all("--variant unlocked_swap" in record.replay_command for record in failing)
    assert all(record.message for record in failing)
    assert all(record.message is None for record in records if record.verdict == "pass")
