"""The Disk contract suite against the real OsDisk (in a temp dir) and the simulated SimDisk."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from conformance import SimDisk
from conformance.disk_contract import (
    DISK_CONTRACT_CHECKS,
    SIM_DISK_FAULT_CHECKS,
    DiskFactory,
    SimDiskFactory,
    operation_outcomes,
)
from impl.storage.disk import Disk
from impl.storage.os_disk import OsDisk


def _sim_factory() -> tuple[SimDisk, Sequence[str]]:
    log_dirs = ["/sim/data-a", "/sim/data-b"]
    return SimDisk(log_dirs), log_dirs


@pytest.fixture
def os_factory(tmp_path: Path) -> Iterator[DiskFactory]:
    disks: list[OsDisk] = []
    counter = iter(range(1_000_000))

    def make() -> tuple[Disk, Sequence[str]]:
        base = tmp_path / f"disk-{next(counter)}"
        log_dirs = [base / "data-a", base / "data-b"]
        for log_dir in log_dirs:
            log_dir.mkdir(parents=True)
        disk = OsDisk()
        disks.append(disk)
        return disk, [str(log_dir) for log_dir in log_dirs]

    yield make
    for disk in disks:
        disk.close()


@pytest.mark.parametrize("check", DISK_CONTRACT_CHECKS, ids=lambda check: check.__name__)
def test_contract_on_os_disk(check: Callable[[DiskFactory], None], os_factory: DiskFactory) -> None:
    check(os_factory)


@pytest.mark.parametrize("check", DISK_CONTRACT_CHECKS, ids=lambda check: check.__name__)
def test_contract_on_sim_disk(check: Callable[[DiskFactory], None]) -> None:
    check(_sim_factory)


@pytest.mark.parametrize("check", SIM_DISK_FAULT_CHECKS, ids=lambda check: check.__name__)
def test_sim_disk_faults(check: Callable[[SimDiskFactory], None]) -> None:
    check(_sim_factory)


@pytest.mark.parametrize("seed", range(12))
def test_same_operations_same_outcomes(seed: int, os_factory: DiskFactory) -> None:
    real, real_dirs = os_factory()
    simulated, simulated_dirs = _sim_factory()
    expected = operation_outcomes(real, real_dirs, seed, steps=300)
    actual = operation_outcomes(simulated, simulated_dirs, seed, steps=300)
    assert sum(":ok:" in outcome for outcome in expected) > 30, "the sequence must do something"
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        assert got == want, f"seed {seed} operation {index}: OsDisk {want}, SimDisk {got}"


def test_sim_disk_satisfies_the_port() -> None:
    disk: Disk = SimDisk(["/a"])
    disk.mkdir("/a/t-0")
    assert disk.list_dir("/a") == ["t-0"]
    with pytest.raises(ValueError, match="across directories"):
        disk.rename("/a/t-0", "/a/t-0/x")
