"""What writing into the page cache costs on this machine, and priming it before a measurement.

On a VM whose balloon reports free pages back to the host (virtio_balloon free page reporting),
the first write into a page the guest has never touched, or has returned to the host, faults
the page in on the host: measured here, 2.3-2.6 s of *system* CPU per GiB written (inside the
kernel's copy into the page cache), against 0.17 s per GiB for pages freed a moment earlier.
Free pages are reported within a few seconds, so only memory freed just before is "recycled".
A broker that has run for a while writes into recycled memory (its page cache already fills
memory and the kernel reclaims the oldest pages), a freshly started benchmark mostly into new
memory. A benchmark that measures the broker's CPU therefore calls

- :func:`calibrate` once (a fresh write, then an unlink and the same write at once), so that its
  output says what a page-cache write costs on the machine, and
- :func:`prime` right before each write-heavy phase: it writes and unlinks a file as large as
  the bytes the phase will write (:func:`prime_size_bytes`: a margin added, capped by
  ``MemAvailable`` and by the dirty bytes the kernel allows before it starts writing back),
  so that the phase writes into memory the VM has just backed.

Only the calling thread's system time is counted (``RUSAGE_THREAD``): a benchmark may run
other threads, such as an embedded ZooKeeper's.
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

MIB = 1 << 20
GIB = 1 << 30
#: each os.write of a calibration or a priming (large writes: the copy, not the call, is timed)
CHUNK_BYTES = 8 * MIB
#: the calibration's write is measured in slices of this size; the costliest slice is the
#: figure for new memory (a fresh write's first pages are often memory another process has just
#: freed, so the whole write's mean mixes the two)
SLICE_BYTES = 128 * MIB
#: the margin added to a phase's bytes: its fraction, and a constant for indexes, checkpoints,
#: the processes' own allocations
MARGIN_FRACTION = 0.125
MARGIN_BYTES = 256 * MIB
#: memory a priming leaves available: at least this much, and at least this fraction of
#: MemAvailable
RESERVE_BYTES = GIB
RESERVE_FRACTION = 0.25
MEMINFO = Path("/proc/meminfo")
DIRTY_BACKGROUND_RATIO = Path("/proc/sys/vm/dirty_background_ratio")
DIRTY_BACKGROUND_BYTES = Path("/proc/sys/vm/dirty_background_bytes")


@dataclass(frozen=True)
class WriteCost:
    """System CPU seconds per GiB written into the page cache, from :func:`calibrate`.

    ``new_s_per_gib``: the costliest slice of :data:`SLICE_BYTES` of a fresh write (memory the
    VM had not backed, when the write reached any); ``recycled_s_per_gib``: the median slice of
    the same write again right after unlinking the first (the median: a slice now and then
    meets pages the balloon has just reported); ``fresh_s_per_gib`` and ``rewrite_s_per_gib``:
    the two writes' means.
    """

    written_bytes: int
    new_s_per_gib: float
    recycled_s_per_gib: float
    fresh_s_per_gib: float
    rewrite_s_per_gib: float

    def line(self) -> str:
        """One line for a benchmark's output."""
        return (f"page-cache write cost, system CPU per GiB: new memory "
                f"{self.new_s_per_gib:.2f} s, recycled {self.recycled_s_per_gib:.2f} s "
                f"(costliest and median {SLICE_BYTES // MIB} MiB of a fresh "
                f"{self.written_bytes // MIB} MiB write and of its rewrite after an unlink; "
                f"means {self.fresh_s_per_gib:.2f} and {self.rewrite_s_per_gib:.2f})")


@dataclass(frozen=True)
class Priming:
    """One :func:`prime`: bytes written (then unlinked), wall and system CPU seconds."""

    written_bytes: int
    elapsed_s: float
    system_s: float


def _thread_system_seconds() -> float:
    return resource.getrusage(resource.RUSAGE_THREAD).ru_stime


def _write(descriptor: int, size_bytes: int, chunk: bytes) -> None:
    view = memoryview(chunk)
    remaining = size_bytes
    while remaining > 0:
        remaining -= os.write(descriptor, view[:min(remaining, len(chunk))])


def _slice_costs(path: Path, size_bytes: int, chunk: bytes) -> list[tuple[int, float]]:
    """Write ``size_bytes`` into a new file at ``path`` (left in place); (bytes, system
    seconds) of each slice of :data:`SLICE_BYTES`."""
    costs = []
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        written = 0
        while written < size_bytes:
            size = min(SLICE_BYTES, size_bytes - written)
            before = _thread_system_seconds()
            _write(descriptor, size, chunk)
            costs.append((size, _thread_system_seconds() - before))
            written += size
    finally:
        os.close(descriptor)
    return costs


def seconds_per_gib(costs: list[tuple[int, float]]) -> float:
    """System seconds per GiB over ``costs``' (bytes, seconds) pairs."""
    written = sum(size for size, _ in costs)
    return sum(seconds for _, seconds in costs) / written * GIB if written else 0.0


def calibrate(directory: Path, size_bytes: int = GIB) -> WriteCost:
    """Measure the page-cache write cost with a file in ``directory`` (removed afterwards):
    ``size_bytes`` written to a new file, then, once it is unlinked, the same again at once.
    Takes about (2.5 + 0.2) s per GiB where memory is new, and leaves ``size_bytes`` of
    recycled memory behind."""
    chunk = b"\xa5" * CHUNK_BYTES
    path = directory / "page-cache-calibration"
    try:
        fresh = _slice_costs(path, size_bytes, chunk)
        path.unlink()
        recycled = _slice_costs(path, size_bytes, chunk)
    finally:
        path.unlink(missing_ok=True)
    return WriteCost(written_bytes=size_bytes,
                     new_s_per_gib=max(seconds_per_gib([cost]) for cost in fresh),
                     recycled_s_per_gib=statistics.median(
                         seconds_per_gib([cost]) for cost in recycled),
                     fresh_s_per_gib=seconds_per_gib(fresh),
                     rewrite_s_per_gib=seconds_per_gib(recycled))


def mem_available_bytes(meminfo: str) -> int:
    """``MemAvailable`` of a ``/proc/meminfo`` text, in bytes.

    Raises:
        ValueError: the text has no ``MemAvailable`` line.
    """
    found = _meminfo_field(meminfo, "MemAvailable")
    if found is None:
        raise ValueError("no MemAvailable in /proc/meminfo")
    return found


def meminfo_bytes(meminfo: str, name: str) -> int:
    """The ``name`` line of a ``/proc/meminfo`` text, in bytes (0 when absent)."""
    found = _meminfo_field(meminfo, name)
    return 0 if found is None else found


def _meminfo_field(meminfo: str, name: str) -> int | None:
    for line in meminfo.splitlines():
        field, _, value = line.partition(":")
        if field == name:
            fields = value.split()
            return int(fields[0]) * (1024 if fields[1:] == ["kB"] else 1)
    return None


def writeback_room_bytes(available_bytes: int, dirty_bytes: int, background_ratio: int,
                         background_bytes: int) -> int:
    """Dirty bytes that can still be written before the kernel's background writeback starts
    (``vm.dirty_background_bytes`` when set, else ``vm.dirty_background_ratio`` percent of
    ``available_bytes``, an approximation of the kernel's dirtyable memory), less
    :data:`MARGIN_BYTES`, never negative."""
    threshold = background_bytes or available_bytes * background_ratio // 100
    return max(0, threshold - dirty_bytes - MARGIN_BYTES)


def prime_size_bytes(phase_bytes: int, available_bytes: int,
                     writeback_room: int | None = None) -> int:
    """How much to prime before a phase that writes ``phase_bytes`` into the page cache: the
    phase's bytes plus :data:`MARGIN_FRACTION` and :data:`MARGIN_BYTES`, at most
    ``available_bytes`` less a reserve (the larger of :data:`RESERVE_BYTES` and
    :data:`RESERVE_FRACTION` of it) and at most ``writeback_room`` (a priming file the kernel
    starts writing back costs disk work that overlaps the phases: the latency phase's p99 went
    from 18 ms to 56-248 ms with 3.7 GB primings before the RF 3 phases), never negative."""
    wanted = int(phase_bytes * (1 + MARGIN_FRACTION)) + MARGIN_BYTES if phase_bytes > 0 else 0
    reserve = max(RESERVE_BYTES, int(available_bytes * RESERVE_FRACTION))
    cap = available_bytes - reserve
    if writeback_room is not None:
        cap = min(cap, writeback_room)
    return max(0, min(wanted, cap))


def prime(directory: Path, phase_bytes: int) -> Priming:
    """Write, then unlink, a file in ``directory`` of :func:`prime_size_bytes` for a phase
    writing ``phase_bytes``, so that the phase's page-cache writes land on memory the VM has
    just backed, as a long-running broker's do. Run it immediately before the phase, and
    outside the phase's CPU measurement."""
    meminfo = MEMINFO.read_text()
    available = mem_available_bytes(meminfo)
    room = writeback_room_bytes(
        available, meminfo_bytes(meminfo, "Dirty") + meminfo_bytes(meminfo, "Writeback"),
        int(DIRTY_BACKGROUND_RATIO.read_text()), int(DIRTY_BACKGROUND_BYTES.read_text()))
    size = prime_size_bytes(phase_bytes, available, room)
    path = directory / "page-cache-priming"
    start = time.perf_counter()
    before = _thread_system_seconds()
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        _write(descriptor, size, b"\x5a" * CHUNK_BYTES)
    finally:
        os.close(descriptor)
        path.unlink()
    return Priming(written_bytes=size, elapsed_s=time.perf_counter() - start,
                   system_s=_thread_system_seconds() - before)
