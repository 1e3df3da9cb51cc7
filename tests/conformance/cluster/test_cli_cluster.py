"""``logproof conformance run/replay --brokers 3``: the cluster simulator from the command line."""

from __future__ import annotations

import shlex

import pytest

from impl.cli import main


def test_run_a_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["conformance", "run", "--seeds", "2", "--brokers", "3", "--log-dirs", "2",
                   "--steps", "120"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "runs: 2  failing: 0" in printed
    assert "verdicts: pass 2" in printed


def test_failure_is_shrunk_and_its_replay_reproduces_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(["conformance", "run", "--seeds", "1", "--brokers", "3", "--log-dirs", "2",
                   "--partitions", "2", "--variant", "isr_expanded_early"])
    printed = capsys.readouterr().out
    assert status == 1
    assert "LOG_MATCHING" in printed
    shrunk = next(line for line in printed.splitlines() if "replay shrunk:" in line)
    command = shlex.split(shrunk.split("replay shrunk:", 1)[1].strip())
    assert command[:3] == ["logproof", "conformance", "replay"]
    assert main(command[1:]) == 1
    replayed = capsys.readouterr().out
    assert "seed 0: fail (LOG_MATCHING)" in replayed
    assert "acknowledged batches" in replayed


def test_replay_prints_a_stable_trace(capsys: pytest.CaptureFixture[str]) -> None:
    arguments = ["conformance", "replay", "--seed", "1", "--brokers", "3", "--log-dirs", "2",
                 "--steps", "60", "--trace"]
    assert main(arguments) == 0
    first = capsys.readouterr().out
    assert main(arguments) == 0
    assert capsys.readouterr().out.splitlines()[:-1] == first.splitlines()[:-1]
    assert '"machine":"replication"' in first
    assert '"machine":"controller"' in first


def test_variants_belong_to_their_simulator(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "run", "--seeds", "1", "--brokers", "1",
                 "--variant", "no_epoch_check"]) == 1
    assert "needs --brokers 2 or more" in capsys.readouterr().err
    assert main(["conformance", "run", "--seeds", "1", "--variant", "unlocked_swap"]) == 1
    assert "needs one broker" in capsys.readouterr().err
