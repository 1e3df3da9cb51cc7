"""A log dir made unreadable (``chmod 000``) is offline from the start on the real disk.

Root ignores permissions, so the storage runs as ``nobody`` (``setpriv``) with the data owned by
that user: the broker-side code then sees the real ``OSError(EACCES)`` from ``os``.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

SCRIPT = """
import json, sys, trio
from impl.storage import LogManager, StorageConfig, TopicPartition, LogDirOffline
from impl.storage.record_batch import build_batch
dirs = tuple(sys.argv[1:3])
async def main():
    manager = LogManager.open(StorageConfig(log_dirs=dirs))
    out = {"offline": sorted(manager.offline_dirs)}
    try:
        manager.create(TopicPartition("lost", 0))
        out["recreated"] = True
    except LogDirOffline:
        out["recreated"] = False
    partition = manager.get(TopicPartition("kept", 0))
    out["kept_dir"] = partition.log_dir if partition else None
    if partition:
        await partition.append_as_leader(build_batch([b"x"]), 1)
        out["kept_leo"] = partition.log_end_offset
    manager.close()
    print(json.dumps(out))
trio.run(main)
"""

FILL = """
import sys, trio
from impl.storage import LogManager, StorageConfig, TopicPartition
from impl.storage.record_batch import build_batch
dirs = tuple(sys.argv[1:3])
async def main():
    manager = LogManager.open(StorageConfig(log_dirs=dirs))
    lost = manager.create(TopicPartition("lost", 0), is_new=True)
    kept = manager.create(TopicPartition("kept", 0), is_new=True)
    assert (lost.log_dir, kept.log_dir) == dirs, (lost.log_dir, kept.log_dir)
    await kept.append_as_leader(build_batch([b"a"]), 1)
    manager.close()
trio.run(main)
"""


def _as_nobody(args: list[str], cwd: str) -> subprocess.CompletedProcess[str]:
    setpriv = shutil.which("setpriv")
    if setpriv is None or os.geteuid() != 0:
        pytest.skip("needs root and setpriv to run as an unprivileged user")
    command = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120,
                          check=False)


def test_chmod_000_dir_is_offline_at_startup_and_the_rest_is_served() -> None:
    nobody = pwd.getpwnam("nobody")
    root = Path(tempfile.mkdtemp(prefix="logproof-unreadable-"))
    try:
        root.chmod(0o755)
        dirs = [root / "a", root / "b"]
        for path in dirs:
            path.mkdir()
            os.chown(path, nobody.pw_uid, nobody.pw_gid)
        repo = str(Path(__file__).resolve().parents[3])
        filled = _as_nobody([sys.executable, "-c", FILL, *map(str, dirs)], repo)
        assert filled.returncode == 0, filled.stderr
        dirs[0].chmod(0o000)
        result = _as_nobody([sys.executable, "-c", SCRIPT, *map(str, dirs)], repo)
        assert result.returncode == 0, result.stderr
        out = json.loads(result.stdout.strip().splitlines()[-1])
        assert out == {"offline": [str(dirs[0])], "recreated": False,
                       "kept_dir": str(dirs[1]), "kept_leo": 2}
    finally:
        for path in root.iterdir():
            path.chmod(0o755)
        shutil.rmtree(root, ignore_errors=True)
