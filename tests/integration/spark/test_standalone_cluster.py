"""``logproof fuzz --master spark://…`` against a real standalone cluster on loopback.

A Spark master and a worker run as processes of their own (``spark-class`` of the pip-installed
pyspark, through the private ``SPARK_HOME``), bound to 127.0.0.1; ``logproof fuzz`` runs in client
mode in a third process. The worker launches the executors, which fetch the shipped zip from the
driver into the worker's work dir. Rows equal the same seeds run without Spark.

Marked slow: three JVMs and the executors' start take a minute or more on a busy 2-core machine.
"""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pyarrow.parquet as pq
import pytest

from spark import BaseConfig, TaskSpec, load_runner, run_one
from spark._session import _private_spark_home, runtime_directory

pytestmark = [pytest.mark.slow, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[3]
REGISTERED = "Successfully registered with master"
START_TIMEOUT_SECONDS = 180.0


@dataclass(frozen=True)
class Standalone:
    master_url: str
    work_dir: Path
    environment: dict[str, str]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _pump(stream: IO[str], lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line)


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    home = _private_spark_home(runtime_directory())
    assert home is not None, "pyspark is not pip-installed here"
    base = tmp_path_factory.mktemp("standalone")
    work_dir = base / "work"
    work_dir.mkdir()
    environment = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(base),
        "SPARK_NO_DAEMONIZE": "1",
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    }
    port = _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    spark_class = str(home / "bin" / "spark-class")
    with (base / "master.log").open("w") as master_log:
        master = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(_free_port())],
            stdout=master_log, stderr=subprocess.STDOUT, env=environment, text=True,
        )  # fmt: skip
    worker = subprocess.Popen(
        [spark_class, "org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
         "--cores", "2", "--memory", "1g", "--work-dir", str(work_dir),
         "--webui-port", str(_free_port())],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=environment, text=True,
    )  # fmt: skip
    assert worker.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    pump = threading.Thread(target=_pump, args=(worker.stdout, lines), daemon=True)
    pump.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        seen: list[str] = []
        while not any(REGISTERED in line for line in seen):
            remaining = deadline - time.monotonic()
            assert remaining > 0, "worker did not register:\n" + "".join(seen[-20:])
            try:
                seen.append(lines.get(timeout=remaining))
            except queue.Empty:
                continue
        yield Standalone(master_url, work_dir, environment)
    finally:
        _stop(worker)
        _stop(master)
        pump.join(timeout=30)  # the pipe ends with the worker
        worker.stdout.close()


def test_fuzz_on_a_standalone_cluster(standalone: Standalone, tmp_path: Path) -> None:
    out = tmp_path / "campaign"
    argv = [
        sys.executable, "-m", "impl.cli", "fuzz", "--master", standalone.master_url,
        "--seeds", "16", "--first-seed", "300", "--steps", "40", "--partitions", "4",
        "--executor-python", sys.executable, "--no-progress", "--out", str(out),
        "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
        "--conf", "spark.ui.enabled=false", "--conf", "spark.executor.memory=512m",
    ]  # fmt: skip
    environment = {**standalone.environment}
    del environment["SPARK_HOME"]  # the campaign's driver makes its own private one
    driver = subprocess.Popen(
        argv, cwd=ROOT, env=environment, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    stdout, stderr = driver.communicate(timeout=280)
    assert driver.returncode in (0, 3), stderr[-3000:]
    assert f"on {standalone.master_url}, 4 seed ranges" in stdout
    rows = pq.read_table(out / "runs").to_pylist()
    assert sorted(row["seed"] for row in rows) == list(range(300, 316))
    assert all(not row["executor"].endswith(f":{driver.pid}") for row in rows)
    runner = load_runner("conformance")
    spec = TaskSpec("test", "conformance", BaseConfig(steps=40))
    for row in rows:
        record = run_one(runner, spec, row["seed"], executor="here")
        assert (row["verdict"], row["trace_digest"]) == (record.verdict, record.trace_digest)
    fetched = list(standalone.work_dir.glob("app-*/*/logproof-*.zip"))
    assert fetched, "the executors did not fetch the shipped zip"
