"""Shared set-up for the benchmarks that measure a real broker process: start one from a
``server.properties`` and wait until it is serving, and read how much CPU it has used.

The broker prints one line on stdout once its listeners are bound; until then the benchmark
waits (at most :data:`START_SECONDS`), and a broker that exits or stays silent ends the
benchmark with one line naming its log, not a traceback.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

START_SECONDS = 60.0


def start_broker(root: Path, properties: str, *,
                 source: Path | None = None) -> subprocess.Popen[bytes]:
    """A broker configured by ``properties`` (written to ``root/server.properties``), its
    stderr in ``root/broker.log``, returned once it reports that it is serving; ``source``: run
    the broker from that checkout instead (to compare two versions within one run).

    Raises:
        SystemExit: the broker exited, or did not report within :data:`START_SECONDS`.
    """
    config = root / "server.properties"
    config.write_text(properties)
    log = (root / "broker.log").open("wb")
    environment = None
    if source is not None:
        environment = {**os.environ, "PYTHONPATH": str(source.resolve())}
    process = subprocess.Popen(
        [sys.executable, "-m", "impl.cli", "broker", "--config", str(config),
         "--log-level", "WARNING"],
        stdout=subprocess.PIPE, stderr=log, env=environment,
        cwd=None if source is None else source,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + START_SECONDS
    line = b""
    while b"\n" not in line:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise SystemExit(f"broker did not start (see {root / 'broker.log'})")
        ready, _, _ = select.select([process.stdout], [], [], remaining)
        if ready:
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                raise SystemExit(f"broker exited at start-up (see {root / 'broker.log'})")
            line += chunk
    return process


@dataclass(frozen=True)
class CpuTimes:
    """User and system CPU seconds, of one process or summed over several."""

    user_s: float
    system_s: float

    @property
    def total_s(self) -> float:
        """User + system seconds."""
        return self.user_s + self.system_s

    def __add__(self, other: CpuTimes) -> CpuTimes:
        return CpuTimes(self.user_s + other.user_s, self.system_s + other.system_s)

    def __sub__(self, other: CpuTimes) -> CpuTimes:
        return CpuTimes(self.user_s - other.user_s, self.system_s - other.system_s)


def cpu_times(pid: int) -> CpuTimes:
    """User and system CPU seconds process ``pid`` has used (``utime`` and ``stime`` of
    ``/proc/<pid>/stat``, in clock ticks of 10 ms)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks_per_second = os.sysconf("SC_CLK_TCK")
    return CpuTimes(int(fields[11]) / ticks_per_second, int(fields[12]) / ticks_per_second)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process ``pid`` has used (``/proc/<pid>/stat``)."""
    return cpu_times(pid).total_s
