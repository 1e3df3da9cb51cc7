"""Fixtures: a running in-process broker with two log dirs, on a fresh ZooKeeper chroot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ._harness import RunningBroker


@pytest.fixture
def broker(zk_chroot: str, tmp_path: Path) -> Iterator[RunningBroker]:
    """One broker (id 1, dirs ``d0`` and ``d1``), stopped gracefully after the test."""
    running = RunningBroker(zk_chroot, tmp_path).start()
    try:
        yield running
    finally:
        running.stop()
