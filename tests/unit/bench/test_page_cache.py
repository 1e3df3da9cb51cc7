"""The page-cache calibration and priming helpers of the benchmarks (``bench._page_cache``):
how large a priming is (the phase's bytes plus a margin, capped by MemAvailable less a
reserve), the parsing of ``/proc/meminfo``, and that calibration and priming leave no file."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import _page_cache
from bench._broker import CpuTimes
from bench._page_cache import (
    GIB,
    MIB,
    calibrate,
    mem_available_bytes,
    meminfo_bytes,
    prime,
    prime_size_bytes,
    seconds_per_gib,
    writeback_room_bytes,
)

MEMINFO = """MemTotal:       24684092 kB
MemFree:        20562544 kB
MemAvailable:   23636708 kB
Buffers:           54372 kB
"""


def test_mem_available_is_read_in_bytes() -> None:
    assert mem_available_bytes(MEMINFO) == 23636708 * 1024


def test_meminfo_without_mem_available_is_refused() -> None:
    with pytest.raises(ValueError, match="MemAvailable"):
        mem_available_bytes("MemTotal:       24684092 kB\n")


def test_priming_is_the_phase_plus_its_margin_when_memory_allows() -> None:
    # an eighth more and 256 MiB: 1.5 GB of replicated writes primes 1.6875 GB + 256 MiB
    assert prime_size_bytes(1_536_000_000, 20 * GIB) == 1_728_000_000 + 256 * MIB


def test_priming_leaves_a_quarter_of_memory_available() -> None:
    assert prime_size_bytes(10 * GIB, 8 * GIB) == 6 * GIB


def test_priming_leaves_at_least_a_gib_available() -> None:
    assert prime_size_bytes(10 * GIB, 3 * GIB) == 2 * GIB
    assert prime_size_bytes(10 * GIB, GIB // 2) == 0


def test_a_phase_writing_nothing_primes_nothing() -> None:
    assert prime_size_bytes(0, 20 * GIB) == 0


def test_seconds_per_gib_weighs_slices_by_their_bytes() -> None:
    assert seconds_per_gib([(GIB // 2, 1.0), (GIB // 2, 0.5)]) == pytest.approx(1.5)
    assert seconds_per_gib([(GIB // 4, 0.5)]) == pytest.approx(2.0)
    assert seconds_per_gib([]) == 0.0


def test_calibration_measures_both_writes_and_removes_its_file(tmp_path: Path) -> None:
    cost = calibrate(tmp_path, 4 * MIB)
    assert cost.written_bytes == 4 * MIB
    assert cost.new_s_per_gib >= 0
    assert cost.recycled_s_per_gib >= 0
    assert "new memory" in cost.line()
    assert list(tmp_path.iterdir()) == []


def test_priming_writes_its_size_and_removes_its_file(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_page_cache, "MARGIN_BYTES", 0)
    priming = prime(tmp_path, 8 * MIB)
    assert priming.written_bytes == 9 * MIB
    assert priming.system_s >= 0
    assert list(tmp_path.iterdir()) == []


def test_cpu_times_add_and_subtract_per_kind() -> None:
    total = CpuTimes(1.0, 0.25) + CpuTimes(0.5, 0.5)
    assert total == CpuTimes(1.5, 0.75)
    assert (total - CpuTimes(0.5, 0.25)).total_s == pytest.approx(1.5)


def test_priming_stays_below_the_kernels_background_writeback() -> None:
    room = writeback_room_bytes(20 * GIB, 512 * MIB, 10, 0)
    assert room == 2 * GIB - 512 * MIB - 256 * MIB
    assert prime_size_bytes(3 * GIB, 20 * GIB, room) == room
    assert prime_size_bytes(100 * MIB, 20 * GIB, room) == int(100 * MIB * 1.125) + 256 * MIB
    assert writeback_room_bytes(20 * GIB, 0, 10, GIB) == GIB - 256 * MIB
    assert writeback_room_bytes(GIB, GIB, 10, 0) == 0


def test_meminfo_fields_are_read_in_bytes() -> None:
    text = "MemAvailable:   2048 kB\nDirty:    1024 kB\n"
    assert meminfo_bytes(text, "Dirty") == 1024 * 1024
    assert meminfo_bytes(text, "Writeback") == 0
