"""The controller tests run against the simulated and the real ZooKeeper alike."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["simulated", pytest.param("zookeeper", marks=pytest.mark.integration)])
def backend(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    """``(backend name, connect string or None)``."""
    if request.param == "zookeeper":
        return "zookeeper", str(request.getfixturevalue("zk_chroot"))
    return "simulated", None
