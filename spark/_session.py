"""Start (or join) the Spark context a campaign runs on, confined to loopback and temp dirs.

Theory of operation: a campaign needs only a ``SparkContext`` (results come back to the driver and
are written there with pyarrow; no SQL, so no warehouse and no metastore). When this process has no
Spark JVM yet, :func:`open_context` launches one with:

- a private ``SPARK_HOME``: a per-process directory under the system temp dir whose ``bin``,
  ``jars``, ``python`` and ``sbin`` link to the pip-installed pyspark, and whose own ``work``
  directory receives what a ``local-cluster`` worker writes (executor logs, fetched files), which a
  pip install would otherwise put inside the installed package. A ``SPARK_HOME`` already set (a
  real Spark distribution) is respected;
- the local dirs (``SPARK_LOCAL_DIRS``), the warehouse dir, ``java.io.tmpdir`` and derby's home
  in that directory, and a log4j2 configuration that keeps Spark's log to warnings;
- for local masters (``local[…]``, ``local-cluster[…]``): the driver, the block manager and the
  standalone master and workers bound to 127.0.0.1 (``SPARK_LOCAL_IP`` and the driver host
  settings), the web UI off, and Python workers running this very interpreter
  (``sys.executable``, handed over as ``PYSPARK_PYTHON`` while the context starts: pyspark reads
  the workers' interpreter from the environment, not from ``spark.pyspark.python``);
- the project's packages shipped as a zip (:mod:`spark._ship`) with ``SparkContext.addPyFile``.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from spark._errors import CampaignUsageError
from spark._plan import is_local_master, validate_master
from spark._ship import ShippedZip, build_zip, packages_to_ship, running_from_zip

_LOOPBACK = "127.0.0.1"

#: stands for the master ``spark-submit`` was given (read from the context once it runs).
SPARK_SUBMIT_MASTER = "(from spark-submit)"
_runtime_directory: Path | None = None
_shipped_digests: dict[int, set[str]] = {}


@dataclass(frozen=True, slots=True)
class SparkOptions:
    """How to reach Spark (nothing here can change a verdict).

    Attributes:
        master: the master URL; ``None`` takes the one ``spark-submit`` was given, else
            ``local[*]``.
        app_name: the application's name in the cluster manager.
        executor_python: the interpreter executors run; ``None`` means this interpreter for
            local masters and the cluster's default (``PYSPARK_PYTHON``) otherwise.
        ship: ship the project's packages as a zip (off only when executors have logproof).
        show_progress: Spark's console progress bar on stderr.
        extra_conf: further ``spark.*`` settings, applied last.
    """

    master: str | None = None
    app_name: str = "logproof-fuzz"
    executor_python: str | None = None
    ship: bool = True
    show_progress: bool = True
    extra_conf: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


#: Spark's log4j2 settings: warnings and worse on stderr, without the start-up banner lines of
#: Spark's default profile and the harmless "no native Hadoop library" warning.
_LOG4J2_PROPERTIES = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
"""


def runtime_directory() -> Path:
    """This process's private directory for everything Spark writes; removed at exit."""
    global _runtime_directory
    if _runtime_directory is None:
        path = Path(tempfile.mkdtemp(prefix="logproof-spark-"))
        atexit.register(shutil.rmtree, path, True)
        for name in ("local", "warehouse", "tmp", "derby", "zips"):
            (path / name).mkdir()
        (path / "log4j2.properties").write_text(_LOG4J2_PROPERTIES)
        _runtime_directory = path
    return _runtime_directory


def _private_spark_home(runtime: Path) -> Path | None:
    """A private ``SPARK_HOME`` linked to the pip-installed pyspark (``None`` if not pip)."""
    import pyspark  # noqa: PLC0415 (importing pyspark costs half a second: only when used)

    installed = Path(pyspark.__file__).parent
    if not (installed / "jars").is_dir() or not (installed / "bin").is_dir():
        return None
    home = runtime / "spark-home"
    home.mkdir(exist_ok=True)
    (home / "work").mkdir(exist_ok=True)
    for name in ("bin", "jars", "python", "sbin", "conf"):
        target = installed / name
        link = home / name
        if target.exists() and not link.exists():
            link.symlink_to(target)
    return home


def effective_master(options: SparkOptions) -> str:
    """The master a context opened with ``options`` uses (validated).

    Raises:
        CampaignUsageError: the URL is malformed.
    """
    if options.master is not None:
        return validate_master(options.master)
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # under spark-submit: the master it was given
        return SPARK_SUBMIT_MASTER
    return "local[*]"


def spark_conf_entries(options: SparkOptions, master: str) -> dict[str, str]:
    """The Spark settings :func:`open_context` applies for ``master``."""
    runtime = runtime_directory()
    java_options = (
        f"-Djava.io.tmpdir={runtime / 'tmp'} -Dderby.system.home={runtime / 'derby'} "
        f"-Dlog4j2.configurationFile=file:{runtime / 'log4j2.properties'}"
    )
    entries = {
        "spark.app.name": options.app_name,
        "spark.sql.warehouse.dir": str(runtime / "warehouse"),
        "spark.sql.catalogImplementation": "in-memory",
        "spark.driver.extraJavaOptions": java_options,
        "spark.ui.showConsoleProgress": "true" if options.show_progress else "false",
    }
    if master != SPARK_SUBMIT_MASTER:
        entries["spark.master"] = master
    if is_local_master(master):
        entries.update(
            {
                "spark.driver.host": _LOOPBACK,
                "spark.driver.bindAddress": _LOOPBACK,
                "spark.ui.enabled": "false",
                "spark.executor.extraJavaOptions": java_options,
                "spark.pyspark.python": options.executor_python or sys.executable,
            }
        )
    elif options.executor_python is not None:
        entries["spark.pyspark.python"] = options.executor_python
    entries.update(options.extra_conf)
    return entries


@dataclass(frozen=True, slots=True)
class CampaignContext:
    """A running Spark context and what was shipped to it.

    Attributes:
        context: the ``pyspark.SparkContext``.
        master: its master URL.
        shipped: the zip shipped to executors, ``None`` when nothing was shipped.
    """

    context: Any
    master: str
    shipped: ShippedZip | None


def ship_project(context: Any, runner: str) -> ShippedZip | None:
    """Build the project zip (plus the runner's package) and add it to ``context``.

    Args:
        context: a running ``SparkContext``.
        runner: the runner module's dotted name.

    Returns:
        The shipped archive, or ``None`` when this driver already runs from a distributed zip.
    """
    if running_from_zip() is not None:
        return None
    runtime = runtime_directory()
    staging = runtime / "zips" / "staging.zip"
    built = build_zip(staging, packages_to_ship(runner))
    final = runtime / "zips" / f"logproof-{built.sha256[:16]}.zip"
    staging.replace(final)
    shipped = ShippedZip(final, built.sha256, built.members)
    digests = _shipped_digests.setdefault(id(context), set())
    if shipped.sha256 not in digests:
        context.addPyFile(str(final))
        digests.add(shipped.sha256)
    return shipped


@contextmanager
def open_context(options: SparkOptions, runner: str) -> Iterator[CampaignContext]:
    """Start a Spark context for a campaign and stop it afterwards, or join the one this
    process already runs (a notebook's, a test module's), which is then left running.

    Args:
        options: how to reach Spark; settings other than the master do not apply to a joined
            context.
        runner: the runner module (its package is shipped too when it is not the project's).

    Yields:
        The running context.

    Raises:
        CampaignUsageError: the master URL is malformed, differs from the master of the context
            already running, or Spark cannot start.
    """
    from pyspark import SparkConf, SparkContext  # noqa: PLC0415 (as above)

    master = effective_master(options)
    active = SparkContext._active_spark_context
    if active is not None:
        if options.master is not None and options.master != active.master:
            raise CampaignUsageError(
                f"this process already runs a SparkContext on {active.master}, not {master}"
            )
        shipped = ship_project(active, runner) if options.ship else None
        yield CampaignContext(active, str(active.master), shipped)
        return
    runtime = runtime_directory()
    if SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        if "SPARK_HOME" not in os.environ:
            home = _private_spark_home(runtime)
            if home is not None:
                os.environ["SPARK_HOME"] = str(home)
        if is_local_master(master):
            os.environ["SPARK_LOCAL_IP"] = _LOOPBACK
            # the environment variable rather than spark.local.dir, which Spark warns about
            os.environ["SPARK_LOCAL_DIRS"] = str(runtime / "local")
    conf = SparkConf()
    entries = spark_conf_entries(options, master)
    for key, value in entries.items():
        conf.set(key, value)
    # A context made from a running interpreter takes its workers' interpreter from the
    # environment, not from spark.pyspark.python (only spark-submit turns that into the variable).
    previous_python = os.environ.get("PYSPARK_PYTHON")
    if "spark.pyspark.python" in entries:
        os.environ["PYSPARK_PYTHON"] = entries["spark.pyspark.python"]
    try:
        context = SparkContext(conf=conf)
    except Exception as error:
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CampaignUsageError(f"Spark did not start on {master}: {message}") from error
    finally:
        if previous_python is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = previous_python
    try:
        context.setLogLevel("WARN")
        shipped = ship_project(context, runner) if options.ship else None
        yield CampaignContext(context, str(context.master), shipped)
    finally:
        _shipped_digests.pop(id(context), None)
        context.stop()


def code_version(root: Path | None = None) -> str:
    """The commit the driver's source comes from, ``+dirty`` when the tree differs from it.

    Args:
        root: a directory inside the checkout (default: this package's parent).

    Returns:
        ``<sha>``, ``<sha>+dirty``, ``zip-<sha256 prefix>`` when this package runs from a zip
        (as under ``spark-submit --py-files``), or ``unknown``.
    """
    archive = running_from_zip() if root is None else None
    if archive is not None:
        return f"zip-{hashlib.sha256(archive.read_bytes()).hexdigest()[:16]}"
    directory = root or Path(__file__).resolve().parent.parent
    git = shutil.which("git")
    if git is None or not (directory / ".git").exists():
        return "unknown"
    try:
        sha = subprocess.run(
            [git, "-C", str(directory), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
        status = subprocess.run(
            [
                git,
                "-C",
                str(directory),
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                "impl",
                "model",
                "conformance",
                "spark",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{sha}+dirty" if status else sha
