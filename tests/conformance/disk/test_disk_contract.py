"""The Disk contract suite against the real OsDisk (in a temp dir) and the simulated SimDisk."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from conformance import SimDisk
from conformance.disk_contract import (
    DISK_CONTRACT_CHECKS,
    SIM_DISK_FAULT_CHECKS,
    DiskFactory,
    SimDiskFactory,
    check_refused_writes_leave_reads,
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


def _read_only_os(disk: Disk, path: str) -> int:
    """A dir and its files made read-only by permission (the real disk's refused writes)."""
    for name in os.listdir(path):
        os.chmod(os.path.join(path, name), 0o444)
    os.chmod(path, 0o555)
    return errno.EACCES


def _read_only_sim(disk: Disk, path: str) -> int:
    """The simulated file system remounted read-only under ``path``'s log dir."""
    assert isinstance(disk, SimDisk)
    disk.fail_dir(path.rsplit("/", 1)[0], reads=False)
    return errno.EROFS


_AS_NOBODY = """
import errno, os, sys, tempfile
from impl.storage.os_disk import OsDisk
from conformance.disk_contract import check_refused_writes_leave_reads
base = tempfile.mkdtemp()
def make():
    root = tempfile.mkdtemp(dir=base)
    dirs = [os.path.join(root, "data-a"), os.path.join(root, "data-b")]
    for d in dirs:
        os.mkdir(d)
    return OsDisk(), dirs
def refuse(disk, path):
    for name in os.listdir(path):
        os.chmod(os.path.join(path, name), 0o444)
    os.chmod(path, 0o555)
    return errno.EACCES
check_refused_writes_leave_reads(make, refuse)
"""


def test_refused_writes_leave_reads_on_os_disk(os_factory: DiskFactory, tmp_path: Path) -> None:
    """Against the real disk, writes refused by permission. Permissions do not bind root: as
    root the check runs in a child process with an unprivileged uid (``setpriv``)."""
    if os.geteuid() != 0:
        try:
            check_refused_writes_leave_reads(os_factory, _read_only_os)
        finally:
            for root, dirs, _ in os.walk(tmp_path):
                for name in dirs:
                    os.chmod(os.path.join(root, name), 0o755)
        return
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: permissions refuse nothing")
    source = str(Path(__file__).resolve().parents[3])
    done = subprocess.run(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
         _AS_NOBODY],
        cwd="/", env={**os.environ, "PYTHONPATH": source}, capture_output=True, text=True,
        timeout=120, check=False,
    )
    if "Permission denied" in done.stderr and "No module named" in done.stderr:
        pytest.skip("the unprivileged uid cannot read the source tree")
    assert done.returncode == 0, done.stderr


def test_refused_writes_leave_reads_on_sim_disk() -> None:
    check_refused_writes_leave_reads(_sim_factory, _read_only_sim)
