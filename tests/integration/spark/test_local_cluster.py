"""A campaign on ``local-cluster[2,1,1024]``: a standalone master and two workers in the driver's
JVM, each executor a JVM of its own with its own Python workers, as on a real cluster.

The runner is the conformance simulator. The executors do not get logproof from the driver's
environment: the tasks report that they imported ``spark``, ``conformance``, ``impl`` and
``model`` from the zip the driver shipped (the workers'
current directory is the worker's own scratch dir, and the zip comes first on their
``sys.path``). Verdicts and trace digests equal those of the same seeds run on the driver.

When the interpreter this virtual environment was made from has the simulator's dependencies but
not logproof (as on the project's machines), the executors run *that* interpreter: the zip is
then their only copy of logproof. Otherwise they run this one, and the module paths show the
zip is what they import.

Marked slow: two executor JVMs start, which takes 20 s on an idle 2-core machine and over a
minute on a busy one; run with ``-m slow``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pyspark
import pytest

from spark import (
    BaseConfig,
    CampaignContext,
    CampaignPlan,
    SparkOptions,
    TaskSpec,
    load_runner,
    open_context,
    run_campaign,
    run_one,
)
from spark._session import runtime_directory

pytestmark = [pytest.mark.slow, pytest.mark.integration]

RUNNER = "conformance"
BASE = BaseConfig(brokers=1, log_dirs=3, steps=40)
ROOT = Path(__file__).resolve().parents[3]
MODULES = ("spark", "spark._runner", "conformance", "conformance.runner", "impl.trace", "model")


def _executor_python() -> str:
    """The interpreter logproof came from, without logproof, when it has the simulator's
    dependencies (then the zip is the executors' only copy of logproof); else this one."""
    base = getattr(sys, "_base_executable", sys.executable)
    probe = (
        "import importlib.util as u, sys; sys.path = [p for p in sys.path if p]; "
        "import pyspark, z3, crc32c, kio; "
        "sys.exit(0 if u.find_spec('spark') is None and u.find_spec('conformance') is None else 1)"
    )
    if base != sys.executable:
        probed = subprocess.run(
            [base, "-c", probe], capture_output=True, check=False, cwd="/", timeout=120
        )
        if probed.returncode == 0:
            return str(base)
    return sys.executable


@pytest.fixture(scope="module")
def executor_python() -> str:
    return _executor_python()


@pytest.fixture(scope="module")
def cluster(executor_python: str) -> Iterator[CampaignContext]:
    options = SparkOptions(
        master="local-cluster[2,1,1024]", show_progress=False, executor_python=executor_python
    )
    with open_context(options, RUNNER) as context:
        yield context


def test_executors_import_the_shipped_zip(cluster: CampaignContext, executor_python: str) -> None:
    assert cluster.shipped is not None
    zip_name = cluster.shipped.path.name

    def where(items: Iterable[int]) -> Iterator[dict[str, str]]:
        # a nested function: pickled by value, so it needs nothing from tests/ on the executor
        import importlib
        import os as executor_os
        import sys as worker_sys

        del items
        files = {name: str(importlib.import_module(name).__file__) for name in MODULES}
        files["pid"] = str(executor_os.getpid())
        files["python"] = worker_sys.executable
        yield files

    reports = cluster.context.parallelize(range(4), 4).mapPartitions(where).collect()
    assert len(reports) == 4
    for report in reports:
        assert report["pid"] != str(os.getpid())
        assert report["python"] == executor_python
        for module in MODULES:
            path = report[module]
            assert f"/{zip_name}/" in path, (module, path)
            assert not path.startswith(str(ROOT)), (module, path)


def test_campaign_on_separate_executors_matches_the_driver(
    cluster: CampaignContext, tmp_path: Path
) -> None:
    plan = CampaignPlan(24, first_seed=1000, base=BASE, runner=RUNNER, partitions=4)
    summary = run_campaign(cluster.context, plan, tmp_path, code_version="test")
    assert summary.runs == 24
    rows = pq.read_table(tmp_path / "runs").to_pylist()
    assert sorted(row["seed"] for row in rows) == list(range(1000, 1024))
    assert all(not row["executor"].endswith(f":{os.getpid()}") for row in rows)
    runner = load_runner(RUNNER)
    spec = TaskSpec("test", RUNNER, BASE)
    for row in rows:
        record = run_one(runner, spec, row["seed"], executor="driver")
        assert (row["verdict"], row["trace_digest"]) == (record.verdict, record.trace_digest)


def test_the_workers_write_only_in_the_private_directory(cluster: CampaignContext) -> None:
    installed_work = Path(pyspark.__file__).parent / "work"
    assert not installed_work.exists()
    private_work = runtime_directory() / "spark-home" / "work"
    assert [path.name for path in private_work.iterdir() if path.name.startswith("app-")]
    assert Path(os.environ["SPARK_HOME"]) == runtime_directory() / "spark-home"
