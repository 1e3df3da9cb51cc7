"""OsDisk writes an append's pieces with ``pwritev`` and goes on after a short write, however the
pieces were cut by it (the kernel may write fewer bytes than asked; a regular file rarely does)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from impl.storage.os_disk import OsDisk


@pytest.mark.parametrize("most", [1, 5, 61, 62, 4096, 1 << 30])
def test_a_short_pwritev_is_resumed_where_it_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, most: int
) -> None:
    real = os.pwritev
    calls: list[int] = []

    def short(fd: int, buffers: Sequence[memoryview], offset: int) -> int:
        """Writes at most ``most`` bytes of what it is given."""
        left, cut = most, []
        for buffer in buffers:
            if left == 0:
                break
            cut.append(buffer[:left])
            left -= len(cut[-1])
        calls.append(sum(len(piece) for piece in cut))
        return real(fd, cut, offset)

    monkeypatch.setattr(os, "pwritev", short)
    disk = OsDisk()
    path = str(tmp_path / "00000000000000000000.log")
    disk.create(path)
    assert disk.append(path, b"0123") == 0
    body = bytes(range(256)) * 40
    pieces: list[bytes | bytearray | memoryview] = [
        bytearray(b"H" * 61), b"", memoryview(body)[61:], b"!"]
    calls.clear()
    assert disk.append_pieces(path, pieces) == 4
    expected = b"0123" + b"H" * 61 + body[61:] + b"!"
    assert disk.read(path, 0, 1 << 20) == expected
    assert disk.size(path) == len(expected)
    written = len(expected) - 4
    assert sum(calls) == written
    assert len(calls) == -(-written // most)
    disk.close()
