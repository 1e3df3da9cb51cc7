"""The cluster stage of ``logproof demo``: leader failover on three child-process brokers."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from impl.broker import demo_cluster, run_cluster_demo

pytestmark = [pytest.mark.integration]


def test_cluster_demo_fails_over_restarts_and_reads_everything_back(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cluster_demo() == 0
    out = capsys.readouterr().out
    assert "[topic] created 'failover' (replication factor 3, min.insync.replicas=2)" in out
    assert "[failover] SIGKILLed the leader, broker " in out
    assert "[failover] new leader: broker " in out
    epochs = re.search(r"leader epoch (\d+) \(was (\d+)\)", out)
    assert epochs is not None
    assert int(epochs[1]) > int(epochs[2])
    assert "is back in the ISR after" in out
    assert "exactly once, in order" in out
    assert "FAILED" not in out


def test_cluster_demo_failure_is_one_line_and_leaves_nothing_behind(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def broken(cluster: Any, _observer: Any, _bootstrap: str) -> None:
        seen["data_dir"] = cluster.data_dir
        seen["processes"] = list(cluster.processes.values())
        raise demo_cluster.ClusterDemoError("injected")

    monkeypatch.setattr(demo_cluster, "_failover", broken)
    assert run_cluster_demo() == 1
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if "FAILED" in line] == [
        "[failover] FAILED: injected"
    ]
    data_dir: Path = seen["data_dir"]
    assert not data_dir.exists()
    processes: list[subprocess.Popen[bytes]] = seen["processes"]
    assert len(processes) == 3
    assert all(process.poll() is not None for process in processes)
