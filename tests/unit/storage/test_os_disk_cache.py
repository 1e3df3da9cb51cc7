"""OsDisk's cache of open descriptors: bounded whichever call opened them, and a directory that
goes (renamed, removed) takes the descriptors of every file below it, at any depth."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from impl.storage.os_disk import OsDisk


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_created_files_stay_within_the_bound(tmp_path: Path) -> None:
    disk = OsDisk(open_files_max=8)
    try:
        before = _open_descriptors()
        for index in range(50):
            disk.create(str(tmp_path / f"f-{index}"))
        assert _open_descriptors() - before <= 8
        for index in range(50):  # every file is still reachable (reopened on a miss)
            disk.append(str(tmp_path / f"f-{index}"), bytearray(b"x"))
        assert _open_descriptors() - before <= 8
        assert all((tmp_path / f"f-{index}").read_bytes() == b"x" for index in range(50))
    finally:
        disk.close()


@pytest.mark.parametrize("suffix", ["", "/"])
def test_a_renamed_directory_takes_the_descriptors_below_it(tmp_path: Path, suffix: str) -> None:
    disk = OsDisk()
    try:
        base = tmp_path / "t-0"
        (base / "sub").mkdir(parents=True)
        (tmp_path / "t-00").mkdir()
        for path in (base / "a", base / "sub" / "b", tmp_path / "t-00" / "c"):
            disk.create(str(path))
            disk.append(str(path), bytearray(b"1"))
        disk.rename(str(base) + suffix, str(tmp_path / "t-0.deleted"))
        for path in (base / "a", base / "sub" / "b"):  # no stale descriptor writes on
            with pytest.raises(FileNotFoundError):
                disk.append(str(path), bytearray(b"2"))
        disk.append(str(tmp_path / "t-00" / "c"), bytearray(b"2"))  # a sibling keeps its own
        assert (tmp_path / "t-0.deleted" / "sub" / "b").read_bytes() == b"1"
        assert (tmp_path / "t-00" / "c").read_bytes() == b"12"
    finally:
        disk.close()


def test_a_removed_file_and_its_directory(tmp_path: Path) -> None:
    disk = OsDisk()
    try:
        directory = tmp_path / "t-1"
        directory.mkdir()
        path = str(directory / "a")
        disk.create(path)
        disk.remove(path)
        disk.rmdir(str(directory))
        with pytest.raises(FileNotFoundError):
            disk.append(path, bytearray(b"x"))
        directory.mkdir()
        disk.create(path)
        disk.append(path, bytearray(b"y"))
        assert (directory / "a").read_bytes() == b"y"
    finally:
        disk.close()


def test_a_sync_handle_outlives_the_cached_descriptor(tmp_path: Path) -> None:
    """The flush's fsync runs in a worker thread while the cache closes and reuses descriptors:
    the handle holds its own (a ``dup``), so it still syncs the file it was opened on."""
    disk = OsDisk(open_files_max=1)
    try:
        disk.create(str(tmp_path / "a"))
        disk.append(str(tmp_path / "a"), bytearray(b"a"))
        handle = disk.open_sync(str(tmp_path / "a"))
        for index in range(3):  # evicts and closes the cached descriptor of "a"
            disk.create(str(tmp_path / f"b-{index}"))
        errors: list[BaseException] = []

        def sync() -> None:
            try:
                handle.sync()
            except BaseException as error:
                errors.append(error)

        worker = threading.Thread(target=sync)
        worker.start()
        worker.join(10)
        assert not worker.is_alive()
        assert errors == []
        handle.close()
        handle.close()
    finally:
        disk.close()
