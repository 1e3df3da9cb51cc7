"""The Coordinator contract, run unchanged against the simulated and the real ZooKeeper."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from conformance._coordinator_contract import CONTRACT_CHECKS, ContractViolationError
from conformance.coordinator import (
    KazooHarness,
    SimulatedHarness,
    SimulatedZooKeeper,
    check_coordinator_contract,
)


@pytest.mark.parametrize("check", CONTRACT_CHECKS, ids=lambda check: check.__name__)
def test_simulated_coordinator_keeps_the_contract(check: object) -> None:
    assert callable(check)
    trio.run(check, SimulatedHarness())


@pytest.mark.integration
@pytest.mark.parametrize("check", CONTRACT_CHECKS, ids=lambda check: check.__name__)
def test_kazoo_coordinator_keeps_the_contract(zk_chroot: str, check: object) -> None:
    assert callable(check)
    trio.run(check, KazooHarness(zk_chroot))


def test_whole_suite_on_one_simulated_server() -> None:
    trio.run(check_coordinator_contract, SimulatedHarness(SimulatedZooKeeper()))


class _LeakyZooKeeper(SimulatedZooKeeper):
    """A drifted fake: expiry forgets to delete the session's ephemeral nodes."""

    def _end_session(self, session: Any) -> None:
        session.expired = True
        session.data_watches.clear()
        session.child_watches.clear()


def test_contract_catches_a_fake_that_drifts() -> None:
    from conformance._coordinator_contract import check_session_expiry

    with pytest.raises(ContractViolationError, match="ephemeral deletion on expiry"):
        trio.run(check_session_expiry, SimulatedHarness(_LeakyZooKeeper()))
