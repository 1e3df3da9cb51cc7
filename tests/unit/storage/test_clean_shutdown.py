"""The clean-shutdown marker (spec/controller.md "Unclean shutdowns", KIP-966) on the simulated
disk: a clean close names the incarnation, the next start reads it and removes it durably, and
every crash leaves none."""

from __future__ import annotations

import pytest

from conformance.disk import SimDisk
from impl.storage import LogManager
from impl.storage.clean_shutdown import CLEAN_SHUTDOWN_FILE, UNCLEAN, decode, encode

from ._support import DIR_A, DIR_B, ExtremeRng, config


def _open(disk: SimDisk) -> LogManager:
    return LogManager.open(config(DIR_A, DIR_B), disk=disk)


@pytest.mark.parametrize("keep", [True, False])
def test_a_clean_close_names_the_incarnation_and_survives_a_crash(keep: bool) -> None:
    disk = SimDisk([DIR_A, DIR_B])
    first = _open(disk)
    assert first.clean_since_broker_epoch == UNCLEAN, "a new broker has no previous incarnation"
    first.close(clean_since_epoch=42)
    disk.crash(ExtremeRng(keep))  # type: ignore[arg-type]
    second = _open(disk)
    assert second.clean_since_broker_epoch == 42


@pytest.mark.parametrize("keep", [True, False])
def test_the_marker_is_taken_at_startup_so_a_crash_after_it_is_unclean(keep: bool) -> None:
    disk = SimDisk([DIR_A, DIR_B])
    _open(disk).close(clean_since_epoch=42)
    assert _open(disk).clean_since_broker_epoch == 42
    disk.crash(ExtremeRng(keep))  # type: ignore[arg-type]
    assert not disk.exists(f"{DIR_A}/{CLEAN_SHUTDOWN_FILE}")
    assert _open(disk).clean_since_broker_epoch == UNCLEAN


def test_a_close_without_an_epoch_writes_no_marker() -> None:
    disk = SimDisk([DIR_A, DIR_B])
    _open(disk).close()
    assert _open(disk).clean_since_broker_epoch == UNCLEAN


def test_a_dir_without_the_marker_or_with_another_incarnation_makes_it_unclean() -> None:
    disk = SimDisk([DIR_A, DIR_B])
    _open(disk).close(clean_since_epoch=42)
    disk.remove(f"{DIR_B}/{CLEAN_SHUTDOWN_FILE}")
    assert _open(disk).clean_since_broker_epoch == UNCLEAN
    _open(disk).close(clean_since_epoch=42)
    disk.remove(f"{DIR_B}/{CLEAN_SHUTDOWN_FILE}")
    disk.create(f"{DIR_B}/{CLEAN_SHUTDOWN_FILE}")
    disk.append(f"{DIR_B}/{CLEAN_SHUTDOWN_FILE}", encode(41).encode())
    assert _open(disk).clean_since_broker_epoch == UNCLEAN


def test_a_dir_failed_at_shutdown_gets_no_marker() -> None:
    disk = SimDisk([DIR_A, DIR_B])
    manager = _open(disk)
    disk.fail_dir(DIR_B)
    manager.close(clean_since_epoch=42)
    disk.repair_dir(DIR_B)
    assert _open(disk).clean_since_broker_epoch == UNCLEAN


@pytest.mark.parametrize("text", ["", "{", "[]", '{"version":1,"broker_epoch":3}',
                                  '{"version":0,"broker_epoch":-4}',
                                  '{"version":0,"broker_epoch":true}'])
def test_a_malformed_marker_is_unclean(text: str) -> None:
    assert decode(text) == UNCLEAN


def test_the_marker_text_round_trips() -> None:
    assert decode(encode(7)) == 7
