"""Sampling profiles of a broker process during a benchmark phase, with py-spy.

py-spy (a PyPI package, not a dependency of the project: ``pip install py-spy``) samples every
thread of a running process from outside, so the broker runs unmodified. :class:`Profile`
records raw stacks (``--format raw``) while a phase runs; :func:`summary` folds them into the
functions that were on CPU: samples whose innermost frame is an idle wait (epoll, a condition
variable, a worker thread waiting for a job) are left out, so the shares are of the time the
broker was working.
"""

from __future__ import annotations

import collections
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType

#: innermost frames that mean "waiting, not working"
IDLE_FRAMES = ("Condition.wait", "EpollSelector.select", "EpollIOManager.get_events",
               "_thread_cache.py:211", "Event.wait (threading", "Thread.join")
#: samples per second
RATE = 200
#: what py-spy prints once it has attached and samples
SAMPLING_LINE = "py-spy> Sampling process"
#: the longest wait for that line
ATTACH_TIMEOUT_SECONDS = 30.0


def py_spy() -> str | None:
    """The py-spy executable (next to this interpreter first), or None."""
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


class Profile:
    """Records ``pid`` into ``path`` between ``__enter__`` and ``__exit__``."""

    def __init__(self, pid: int, path: Path) -> None:
        self.pid = pid
        self.path = path
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Profile:
        executable = py_spy()
        if executable is None:
            raise SystemExit("--profile needs py-spy (pip install py-spy)")
        process = self._process = subprocess.Popen(
            [executable, "record", "-p", str(self.pid), "-o", str(self.path), "--format", "raw",
             "-r", str(RATE), "--nonblocking"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        # the phase starts once py-spy says it samples (it has attached), within a bound; what
        # it prints is read to its end (so that its warnings never fill the pipe)
        said: list[str] = []
        first = threading.Event()
        threading.Thread(target=self._read_output, args=(said, first), daemon=True).start()
        first.wait(ATTACH_TIMEOUT_SECONDS)
        if not (said and said[0].startswith(SAMPLING_LINE)):
            process.kill()
            process.wait()
            why = said[0] if said else f"no word within {ATTACH_TIMEOUT_SECONDS:.0f} s"
            raise SystemExit(f"py-spy could not attach to {self.pid}: {why}")
        return self

    def _read_output(self, said: list[str], first: threading.Event) -> None:
        """Collect py-spy's lines until it exits, setting ``first`` at the first (or at EOF)."""
        assert self._process is not None
        assert self._process.stdout is not None
        for line in self._process.stdout:
            said.append(line.decode(errors="replace").strip())
            first.set()
        first.set()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        assert self._process is not None
        self._process.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        try:
            self._process.wait(60)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


def _function(frame: str) -> str:
    """``name (file:line)`` → ``name (file)``."""
    name, _, where = frame.partition(" (")
    return f"{name} ({where.split(':')[0]})" if where else name


def summary(path: Path, top: int = 12) -> list[tuple[float, str]]:
    """The ``top`` functions by share of busy samples (self time), largest first."""
    own: collections.Counter[str] = collections.Counter()
    busy = 0
    if not path.exists():
        return []
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        if any(idle in frames[-1] for idle in IDLE_FRAMES):
            continue
        busy += int(count)
        own[_function(frames[-1])] += int(count)
    return [(100.0 * samples / busy, name) for name, samples in own.most_common(top)]
