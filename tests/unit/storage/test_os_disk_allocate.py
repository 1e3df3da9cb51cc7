"""OsDisk allocates the blocks of a large append before writing it (``fallocate`` with
``FALLOC_FL_KEEP_SIZE``): exactly the written range, never the file's size or contents, and a
file system that cannot allocate, or one that refuses, changes nothing the log sees."""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

import pytest

from impl.storage import os_disk
from impl.storage.os_disk import FALLOC_FL_KEEP_SIZE, PREALLOCATE_MIN_BYTES, OsDisk

Call = tuple[int, int, int, int]


def _recording(result_errno: int | None, calls: list[Call]) -> object:
    """A stand-in for libc's ``fallocate`` that records its arguments; it allocates through the
    real one when ``result_errno`` is None and fails with that errno otherwise."""
    real = os_disk._FALLOCATE

    def fallocate(fd: int, mode: int, offset: int, length: int) -> int:
        calls.append((fd, mode, offset, length))
        if result_errno is None:
            assert real is not None
            return real(fd, mode, offset, length)
        ctypes.set_errno(result_errno)
        return -1

    return fallocate


def _disk_with(monkeypatch: pytest.MonkeyPatch, result_errno: int | None,
               calls: list[Call]) -> OsDisk:
    monkeypatch.setattr(os_disk, "_FALLOCATE", _recording(result_errno, calls))
    return OsDisk()


def test_a_large_append_allocates_exactly_its_range(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    if os_disk._FALLOCATE is None:
        pytest.skip("no fallocate in this C library")
    calls: list[Call] = []
    disk = _disk_with(monkeypatch, None, calls)
    path = str(tmp_path / "00000000000000000000.log")
    try:
        disk.create(path)
        small = bytearray(b"s" * 100)
        large = bytearray(os.urandom(PREALLOCATE_MIN_BYTES + 1000))
        assert disk.append(path, small) == 0
        assert calls == []  # small appends write directly
        assert disk.append(path, large) == 100
        assert [(mode, offset, length) for _, mode, offset, length in calls] == [
            (FALLOC_FL_KEEP_SIZE, 100, len(large))]
        assert disk.append(path, large) == 100 + len(large)
        assert len(calls) == 2
    finally:
        disk.close()
    assert Path(path).read_bytes() == bytes(small) + bytes(large) * 2
    size = os.stat(path).st_size
    assert size == 100 + 2 * len(large)
    # no block beyond the end: the allocation was the written range and nothing more
    assert os.stat(path).st_blocks * 512 <= -(-size // 4096) * 4096


@pytest.mark.parametrize("refusal", [errno.ENOSPC, errno.EIO])
def test_a_refused_allocation_leaves_the_write_to_decide(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path, refusal: int) -> None:
    calls: list[Call] = []
    disk = _disk_with(monkeypatch, refusal, calls)
    path = str(tmp_path / "f")
    data = bytearray(os.urandom(PREALLOCATE_MIN_BYTES))
    try:
        disk.create(path)
        assert disk.append(path, data) == 0
        assert disk.append(path, data) == len(data)
        assert len(calls) == 2  # a refusal is not "unsupported": the next append asks again
    finally:
        disk.close()
    assert Path(path).read_bytes() == bytes(data) * 2


@pytest.mark.parametrize("unsupported", [errno.EOPNOTSUPP, errno.ENOSYS])
def test_a_file_system_without_fallocate_stops_asking(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path, unsupported: int) -> None:
    calls: list[Call] = []
    disk = _disk_with(monkeypatch, unsupported, calls)
    path = str(tmp_path / "f")
    data = bytearray(os.urandom(PREALLOCATE_MIN_BYTES))
    try:
        disk.create(path)
        for index in range(3):
            assert disk.append(path, data) == index * len(data)
        assert len(calls) == 1
    finally:
        disk.close()
    assert Path(path).read_bytes() == bytes(data) * 3
