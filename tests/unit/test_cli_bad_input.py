"""Bad input on the command line gets one line on stderr and a non-zero exit, never a traceback
(issue 15, defect 6)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from impl.cli import main

UNREACHABLE = "127.0.0.1:1"


def _one_line_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    status = main(list(argv))
    err = capsys.readouterr().err
    assert status != 0
    assert err.count("\n") == 1, err
    assert err.startswith("logproof: error: ")
    return err


def test_topic_counts_out_of_range(capsys: pytest.CaptureFixture[str]) -> None:
    err = _one_line_error(capsys, "topics", "create", "--topic", "t", "--partitions",
                          "2147483648", "--bootstrap-server", UNREACHABLE)
    assert "--partitions must be at most" in err
    err = _one_line_error(capsys, "topics", "create", "--topic", "t", "--replication-factor",
                          "40000", "--bootstrap-server", UNREACHABLE)
    assert "--replication-factor must be at most 32767" in err
    err = _one_line_error(capsys, "topics", "alter", "--topic", "t", "--partitions", "0",
                          "--bootstrap-server", UNREACHABLE)
    assert "--partitions must be between 1 and" in err


@pytest.mark.parametrize("pair", ["retention.ms", "=1", "a=1 --config a=2"])
def test_topic_configs_not_key_value(capsys: pytest.CaptureFixture[str], pair: str) -> None:
    configs = [part for item in pair.split(" --config ") for part in ("--config", item)]
    err = _one_line_error(capsys, "topics", "create", "--topic", "t", *configs,
                          "--bootstrap-server", UNREACHABLE)
    assert err.startswith("logproof: error: --config: "), err


def test_a_deeply_nested_reassignment_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    err = _one_line_error(capsys, "reassign", "--execute", "--reassignment-json-file", str(deep),
                          "--bootstrap-server", UNREACHABLE)
    assert "nested too deeply" in err
    moves = tmp_path / "topics.json"
    moves.write_text("[" * 100_000)
    err = _one_line_error(capsys, "reassign", "--generate", "--topics-to-move-json-file",
                          str(moves), "--broker-list", "1", "--bootstrap-server", UNREACHABLE)
    assert "nested too deeply" in err


def test_cluster_data_dir_that_is_a_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    err = _one_line_error(capsys, "cluster", "up", "--data-dir", str(a_file))
    assert "is not a directory" in err


def test_broker_with_unreachable_zookeeper(tmp_path: Path) -> None:
    config = tmp_path / "broker.properties"
    config.write_text(
        f"broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs={tmp_path / 'd0'}\n"
        f"zookeeper.connect={UNREACHABLE}\nzookeeper.connection.timeout.ms=2000\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "impl.cli", "broker", "--config", str(config)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode != 0
    lines = result.stderr.splitlines()
    assert "Traceback" not in result.stderr
    assert len(lines) <= 4, result.stderr
    assert lines[-1].startswith("logproof: error: broker 1: ZooKeeper: cannot connect")


def test_command_config_of_reassign_and_placement(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]}]}')
    err = _one_line_error(capsys, "reassign", "--verify", "--reassignment-json-file", str(plan),
                          "--bootstrap-server", UNREACHABLE, "--command-config",
                          str(tmp_path / "absent.properties"))
    assert "--command-config: cannot read" in err
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=CARRIER_PIGEON\n")
    err = _one_line_error(capsys, "placement", "--partitions", "1", "--replication-factor", "1",
                          "--bootstrap-server", UNREACHABLE, "--command-config", str(bad))
    assert f"--command-config {bad}" in err
    err = _one_line_error(capsys, "placement", "--partitions", "1", "--replication-factor", "1",
                          "--command-config", str(bad))
    assert "--command-config goes with --bootstrap-server" in err
