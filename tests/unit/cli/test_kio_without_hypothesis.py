"""A command's process never loads hypothesis (``impl.cli._kio_without_hypothesis``): kio
imports it only to register test strategies, which cost every command and broker 0.2 s, 15 MiB
and, the first time, the Unicode table hypothesis builds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

#: runs ``logproof topics describe`` against a closed port (its wire layer imports kio, then the
#: connection is refused) and reports what the process imported
_PROBE = """
import atexit, runpy, sys
def report():
    import kio.static._phantom as phantom
    print("hypothesis" in sys.modules, phantom.hypothesis is None, flush=True)
atexit.register(report)
sys.argv = ["logproof", "topics", "describe", "--bootstrap-server", "127.0.0.1:1"]
runpy.run_module("impl.cli", run_name="__main__")
"""


def _python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter in the repository."""
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)


def test_a_command_imports_kio_without_hypothesis() -> None:
    done = _python(_PROBE)
    assert done.returncode != 0  # (nothing listens there: one line, a non-zero exit)
    assert "cannot connect" in done.stderr
    assert done.stdout.split() == ["False", "True"], done.stdout + done.stderr


def test_hypothesis_stays_importable_after_kio() -> None:
    probe = ("import sys\n"
             "from impl.cli import _kio_without_hypothesis\n"
             "_kio_without_hypothesis()\n"
             "import kio.static.primitive\n"
             "assert 'hypothesis' not in sys.modules\n"
             "import hypothesis.strategies\n"
             "print('importable')\n")
    done = _python(probe)
    assert done.stdout.strip() == "importable", done.stderr


def test_a_process_that_loaded_hypothesis_keeps_it() -> None:
    probe = ("import sys, hypothesis\n"
             "from impl.cli import _kio_without_hypothesis\n"
             "_kio_without_hypothesis()\n"
             "import kio.static._phantom as phantom\n"
             "print(phantom.hypothesis is not None)\n")
    done = _python(probe)
    assert done.stdout.strip() == "True", done.stderr
