"""Shared fixtures: a real ZooKeeper (Debian's package) started once per session.

Tests that need ZooKeeper take ``zookeeper`` (the server) or ``zk_chroot`` (a connect string with
a fresh chroot, so tests never see each other's nodes).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``-n`` and the default ``--dist load`` (as ``make test`` runs): every module that
    uses the ``integration`` marker on one worker, one after the other; the other modules spread
    over all workers.

    Integration tests start real ZooKeeper servers, brokers and clients whose timeouts assume the
    machine is not already running another test's cluster; the unit, model and conformance tests
    run inside their worker process.
    """
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class IntegrationModulesInTurn(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "integration" if _uses_real_processes(config.rootpath, module) else module

    return IntegrationModulesInTurn(config, log)


@functools.cache
def _uses_real_processes(root: Path, module: str) -> bool:
    """Whether a test module runs real processes: it is under ``tests/integration`` or marks
    tests ``integration`` (contract suites and the placement tool against a real broker)."""
    under = Path(module).parts[:2]
    return under == ("tests", "integration") or "mark.integration" in (root / module).read_text()
