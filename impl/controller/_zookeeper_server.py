"""An embedded ZooKeeper: the real server from Debian's ``zookeeper`` package as a child process.

Theory of operation: we write a standalone ``zoo.cfg`` into the data dir, start
``org.apache.zookeeper.server.quorum.QuorumPeerMain`` with the package's jar (its manifest carries
the class path of its dependencies) on a loopback port, and wait until the four-letter word
``srvr`` reports a serving mode (bounded; ``ruok`` says ``imok`` before
the server takes requests). Stopping sends SIGTERM and, after a bound, SIGKILL. The
child asks the kernel to kill it if we die first (``PR_SET_PDEATHSIG``), so a crashed test run
leaves no server behind.

This is what ``logproof cluster up`` runs when no ``--zookeeper`` is given, and what the pytest
fixture runs: never a mock.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

ZOOKEEPER_JAR_PATH = Path("/usr/share/java/zookeeper.jar")
ZOOKEEPER_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
_PR_SET_PDEATHSIG = 1


class ZooKeeperUnavailableError(RuntimeError):
    """Java or the ZooKeeper package is missing, or the server did not come up."""


def find_free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def four_letter_word(host: str, port: int, word: str, timeout_s: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command and return the whole answer ('' if refused)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as connection:
            connection.sendall(word.encode("ascii"))
            chunks: list[bytes] = []
            while chunk := connection.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks).decode("utf-8", "replace")
    except OSError:
        return ""


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class EmbeddedZooKeeper:
    """A real standalone ZooKeeper server on loopback, owned by this process.

    Args:
        port: client port; a free one is chosen when ``None``.
        data_dir: where snapshots, logs and the config go; a temporary dir (removed on stop)
            when ``None``.
        tick_ms: ZooKeeper's ``tickTime``; sessions may be as short as two ticks, which lets
            tests expire sessions quickly.
        start_timeout_s: how long :meth:`start` waits for the server to serve.
        heap_mb: the server JVM's maximum heap; the default suits tests, while hundreds of
            thousands of znodes (a benchmark's 100,000 partitions) need more, or the collector's
            pauses outlast the sessions.

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        port: int | None = None,
        data_dir: Path | None = None,
        tick_ms: int = 200,
        start_timeout_s: float = 60.0,
        heap_mb: int = 256,
    ) -> None:
        self.host = "127.0.0.1"
        self.port = port if port is not None else find_free_loopback_port()
        self._owns_data_dir = data_dir is None
        if data_dir is None:
            data_dir = Path(tempfile.mkdtemp(prefix="logproof-zk-"))
        self.data_dir = data_dir
        self.tick_ms = tick_ms
        self.start_timeout_s = start_timeout_s
        self.heap_mb = heap_mb
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        """``host:port`` for kazoo and ``zookeeper.connect``."""
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        """The server's combined stdout and stderr."""
        return self.data_dir / "zookeeper.out"

    def _write_config(self) -> Path:
        snapshot_dir = self.data_dir / "data"
        snapshot_dir.mkdir(parents=True, exist_ok=True)
        config_path = self.data_dir / "zoo.cfg"
        config_path.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_ms}",
                    f"dataDir={snapshot_dir}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    "maxClientCnxns=0",
                    f"minSessionTimeout={2 * self.tick_ms}",
                    "maxSessionTimeout=60000",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,stat,mntr,cons",
                    "autopurge.purgeInterval=0",
                    "",
                ]
            )
        )
        return config_path

    def start(self) -> EmbeddedZooKeeper:
        """Start the server and wait until it answers.

        Raises:
            ZooKeeperUnavailableError: java or the package is missing, the process exited, or it did
                not answer within ``start_timeout_s``.
        """
        if self._process is not None:
            raise RuntimeError("this ZooKeeper is already started")
        java = shutil.which("java")
        if java is None:
            raise ZooKeeperUnavailableError(
                "java not found: install Debian's default-jre-headless "
                "(apt-get install default-jre-headless)"
            )
        if not ZOOKEEPER_JAR_PATH.is_file():
            raise ZooKeeperUnavailableError(
                f"{ZOOKEEPER_JAR_PATH} not found: install Debian's zookeeper package "
                "(apt-get install zookeeper)"
            )
        config_path = self._write_config()
        command = [
            java,
            "-Xms32m",
            f"-Xmx{self.heap_mb}m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-Dzookeeper.admin.enableServer=false",
            "-cp",
            str(ZOOKEEPER_JAR_PATH),
            ZOOKEEPER_MAIN_CLASS,
            str(config_path),
        ]
        with self.log_path.open("wb") as log_file:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # Only a prctl between fork and exec: no lock a thread could hold is taken.
                preexec_fn=_die_with_parent,  # noqa: PLW1509
            )
        self.wait_ready()
        return self

    def wait_ready(self) -> None:
        """Wait (bounded by ``start_timeout_s``) until the server serves requests."""
        assert self._process is not None
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-2000:]
                self._process = None
                raise ZooKeeperUnavailableError(
                    f"ZooKeeper exited during start-up (see {self.log_path}): {tail.strip()}"
                )
            if "Mode: " in four_letter_word(self.host, self.port, "srvr", timeout_s=1.0):
                return
            time.sleep(0.05)  # polling interval of a bounded wait for the condition above
        self.stop()
        raise ZooKeeperUnavailableError(
            f"ZooKeeper did not answer on {self.connect_string} within {self.start_timeout_s} s"
        )

    def is_running(self) -> bool:
        """True while the child process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        """The server's process id while running."""
        return None if self._process is None else self._process.pid

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout_s``; removes a temporary data dir."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=timeout_s)
        if self._owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedZooKeeper:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
