"""``logproof conformance run`` and ``replay``."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from impl.cli import main


def test_run_summarises_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "runs.jsonl"
    status = main(["conformance", "run", "--seeds", "3", "--steps", "60", "--json", str(out)])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "runs: 3  failing: 0" in printed
    assert "events/s" in printed
    assert "verdicts: pass 3" in printed
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["seed"] for row in rows] == [0, 1, 2]
    assert all(row["verdict"] == "pass" for row in rows)


def test_failing_run_is_shrunk_with_its_replay(capsys: pytest.CaptureFixture[str]) -> None:
    status = main([
        "conformance", "run", "--brokers", "1", "--seeds", "2", "--steps", "150",
        "--variant", "unlocked_swap",
    ])
    printed = capsys.readouterr().out
    assert status == 1
    replay = "logproof conformance replay --seed 0 --brokers 1 --steps 150 --variant unlocked_swap"
    assert replay in printed
    assert "shrunk:" in printed
    assert "replay shrunk:" in printed


def test_replay_prints_the_trace_and_is_stable(capsys: pytest.CaptureFixture[str]) -> None:
    for brokers in ("1", "3"):
        command = ["conformance", "replay", "--seed", "4", "--brokers", brokers, "--steps", "80",
                   "--trace"]
        assert main(command) == 0
        first = capsys.readouterr().out
        assert main(command) == 0
        assert capsys.readouterr().out == first
        assert '"machine":"replica_move"' in first or brokers == "3"
        assert '"machine":"replication"' in first or brokers == "1"
        assert "trace digest: " in first


def test_user_mistakes_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "replay", "--seed", "1", "--faults", "x:y"]) == 1
    assert "not a cluster fault spec" in capsys.readouterr().err
    assert main(["conformance", "replay", "--seed", "1", "--brokers", "1", "--faults", "x:y"]) == 1
    assert "not a fault spec" in capsys.readouterr().err
    assert main(["conformance", "run", "--seeds", "0"]) == 1
    assert main(["conformance", "run", "--seeds", "1", "--log-dirs", "1"]) == 1


def test_a_swarm_run_replays_from_its_printed_command(capsys: pytest.CaptureFixture[str]) -> None:
    from conformance import run_seed, swarm_config

    seeds = [seed for seed in range(40) if swarm_config(seed, steps=80).partitions != 3]
    result = run_seed(seeds[0], swarm_config(seeds[0], steps=80))
    command = shlex.split(result.replay_command)
    assert command[:3] == ["logproof", "conformance", "replay"]
    assert "--partitions" in command
    main(command[1:])
    assert f"trace digest: {result.trace_digest}" in capsys.readouterr().out
