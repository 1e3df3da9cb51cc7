"""Shared fixtures: a real ZooKeeper (Debian's package) started once per session.

Tests that need ZooKeeper take ``zookeeper`` (the server) or ``zk_chroot`` (a connect string with
a fresh chroot, so tests never see each other's nodes).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from impl.controller import EmbeddedZooKeeper

_chroot_counter = itertools.count()


@pytest.fixture(scope="session")
def zookeeper() -> Iterator[EmbeddedZooKeeper]:
    """One real ZooKeeper server for the whole test session."""
    with EmbeddedZooKeeper() as server:
        yield server


@pytest.fixture
def zk_chroot(zookeeper: EmbeddedZooKeeper, request: pytest.FixtureRequest) -> str:
    """A connect string with a fresh chroot unique to this test (created here)."""
    name = request.node.name.replace("[", "_").replace("]", "_").replace("/", "_")
    chroot = f"/t{next(_chroot_counter)}_{name}"
    client = KazooClient(hosts=zookeeper.connect_string, timeout=10.0)
    client.start(timeout=10.0)
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
        client.close()
    return f"{zookeeper.connect_string}{chroot}"
