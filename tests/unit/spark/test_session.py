"""The Spark settings a campaign starts with: loopback and temp dirs for local masters, the
cluster's own settings otherwise, spark-submit's master under spark-submit (no JVM started)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest

from spark import SparkOptions
from spark._session import (
    SPARK_SUBMIT_MASTER,
    effective_master,
    runtime_directory,
    spark_conf_entries,
)


@pytest.mark.parametrize("master", ["local[2]", "local-cluster[2,1,1024]"])
def test_local_masters_stay_on_loopback_and_in_temp_dirs(master: str) -> None:
    entries = spark_conf_entries(SparkOptions(master=master), master)
    runtime = runtime_directory()
    assert runtime.is_relative_to(Path(tempfile.gettempdir()))
    assert entries["spark.master"] == master
    assert entries["spark.driver.host"] == "127.0.0.1"
    assert entries["spark.driver.bindAddress"] == "127.0.0.1"
    assert entries["spark.ui.enabled"] == "false"
    assert entries["spark.pyspark.python"] == sys.executable
    assert entries["spark.sql.warehouse.dir"] == str(runtime / "warehouse")
    assert entries["spark.sql.catalogImplementation"] == "in-memory"
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        assert f"-Djava.io.tmpdir={runtime / 'tmp'}" in entries[key]
        assert f"-Dderby.system.home={runtime / 'derby'}" in entries[key]


def test_cluster_masters_keep_the_cluster_settings() -> None:
    master = "spark://head:7077"
    entries = spark_conf_entries(SparkOptions(master=master), master)
    assert entries["spark.master"] == master
    assert "spark.driver.host" not in entries
    assert "spark.ui.enabled" not in entries
    assert "spark.pyspark.python" not in entries
    options = SparkOptions(master=master, executor_python="/opt/py/bin/python3")
    assert spark_conf_entries(options, master)["spark.pyspark.python"] == "/opt/py/bin/python3"


def test_extra_conf_comes_last() -> None:
    options = SparkOptions(master="local[2]", extra_conf={"spark.ui.enabled": "true", "a.b": "c"})
    entries = spark_conf_entries(options, "local[2]")
    assert entries["spark.ui.enabled"] == "true"
    assert entries["a.b"] == "c"


def test_default_master(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    assert effective_master(SparkOptions()) == "local[*]"
    assert effective_master(SparkOptions(master="local[3]")) == "local[3]"


def test_under_spark_submit_the_master_is_spark_submits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "40000")
    master = effective_master(SparkOptions())
    assert master == SPARK_SUBMIT_MASTER
    assert "spark.master" not in spark_conf_entries(SparkOptions(), master)
