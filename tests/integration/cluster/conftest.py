"""Fixtures shared by the cluster tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient


@pytest.fixture
def zk(zk_chroot: str) -> Iterator[KazooClient]:
    """A kazoo client on the test's ZooKeeper chroot, to read what the cluster wrote."""
    client = KazooClient(hosts=zk_chroot, timeout=10.0)
    client.start(timeout=10.0)
    try:
        yield client
    finally:
        client.stop()
        client.close()
