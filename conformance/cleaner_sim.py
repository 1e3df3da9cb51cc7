"""The log cleaner inside the storage simulator: a driver for the real cleaner and the checks.

Theory of operation
-------------------
The storage simulator (:mod:`conformance.move_sim`) gives some of a broker's partitions
``cleanup.policy=compact`` (its ``compacted`` setting) and runs the real
:class:`impl.storage.cleaner_runner.LogCleanerRunner` on them, as the trio broker does, with one
difference of shell: the runner's pacer (what a cleaning awaits before each segment it reads or
writes) hands control back to the simulator. A cleaning is a coroutine the simulator advances
one pace at a time, on a stream of the seed, so appends, HW moves, truncations above the HW,
KIP-113 moves (copy chunks, the swap), crashes and disk faults land between any two of its
reads, between its reads and its replace, or in the middle of the replace (a simulated crash on
the n-th disk mutation). Nothing here decides what the cleaner does: the runner and the
``log_cleaner`` core do.

The runner's ``log_cleaner`` trace events go to the run's trace checker, which replays them in
``model/log_cleaner.py`` (:class:`conformance.cleaner_abstraction.CleanerAbstraction`). After
every step the end-to-end checks of :func:`check_compacted` read the partition back whole and
compare it with what was acknowledged (offset -> key, value):

* ``COMPACTION_OFFSETS_STABLE``: every readable record is the one acknowledged at its offset, and
  every acknowledged record at or past the cleaner point (the dirty part, the active segment) is
  readable;
* ``COMPACTION_KEEPS_LATEST``: for every key, its acknowledged record with the highest offset
  below the cleaner point is readable (the workload writes no tombstones).

This module is a sans-IO core: it imports no I/O module itself.
"""

from __future__ import annotations

from collections.abc import Coroutine, Generator, Mapping, Sequence
from typing import Any

from impl.storage import record_batch as rb
from impl.storage import records as rec
from impl.storage.cleaner_runner import CleanerConfig, LogCleanerRunner
from impl.storage.manager import LogManager, PartitionLog
from impl.storage.names import TopicPartition

__sans_io__ = True

#: Keys of the compacted partitions' records (few, so cleaning removes most records).
KEYS = 5
#: Paces one cleaning may take before the simulator stops advancing it (a bound, never hit by
#: a cleaning that makes progress: one pace per segment read or group written).
PACES_MAX = 100_000


class _Pace:
    """What the pacer awaits: one yield to whoever drives the cleaning coroutine."""

    def __await__(self) -> Generator[_Pace, None, None]:
        yield self


async def _pace(byte_count: int) -> None:
    del byte_count  # the simulator's cleaner is not throttled: the interleavings are the point
    await _Pace()


class CleanerDriver:
    """One broker's cleaner, advanced by the simulator one pace at a time.

    Args:
        manager: the broker's storage engine (a new driver after each restart).
        plant_active_segment: the known-bad plant: the cleaning range reaches the active
            segment.
    """

    def __init__(self, manager: LogManager, *, plant_active_segment: bool = False) -> None:
        self.runner = LogCleanerRunner(
            manager,
            CleanerConfig(threads=0, backoff_ms=0, clean_active_segment=plant_active_segment),
            pacer=_pace,
        )
        self._task: Coroutine[Any, Any, bool] | None = None
        self._range_ends: dict[TopicPartition, int] = {}
        self.cleanings_started = 0

    @property
    def busy(self) -> bool:
        """A cleaning is under way."""
        return self._task is not None

    def step(self) -> None:
        """Advance the cleaning under way by one pace, or start the next one (the filthiest
        log dirty enough, if any)."""
        if self._task is None:
            self._task = self.runner.clean_once()
            self.cleanings_started += 1
        self._note_ranges()
        try:
            self._task.send(None)
        except StopIteration:
            self._task = None
        except BaseException:
            self._task = None
            raise
        self._note_ranges()

    def _note_ranges(self) -> None:
        # every range a cleaning of this incarnation took: one that failed in the middle of its
        # replace (an I/O error) leaves a complete .swap that the next start-up installs, and a
        # crash unwinds the cleaning under way before the simulator restarts the broker
        for tp, cleanable in self.runner.ranges.items():
            self._range_ends[tp] = max(self._range_ends.get(tp, 0), cleanable.first_uncleanable)

    def finish(self) -> None:
        """Run the cleaning under way, then clean until nothing is dirty enough (end of run)."""
        for _ in range(PACES_MAX):
            self.step()
            if self._task is None and not self._dirty():
                return
        raise AssertionError("the cleaner never settled")

    def _dirty(self) -> bool:
        from impl.storage import log_cleaner as lc  # noqa: PLC0415

        return lc.choose(self.runner.candidates()) is not None

    def abandon(self) -> None:
        """The process died: the cleaning under way is gone with it."""
        if self._task is not None:
            self._task.close()
            self._task = None

    def cleaned_below(self, tp: TopicPartition) -> int:
        """The offset below which the runner says ``tp`` is cleaned."""
        return self.runner.cleaned_below(tp)

    def cleaned_bound(self, tp: TopicPartition) -> int:
        """An offset below which ``tp`` may be cleaned whatever a crash now leaves: the point,
        or the end of the range of any cleaning this incarnation started (a crash, or an I/O
        error, in the middle of its replace may leave it to recovery to complete, before the
        point is written)."""
        return max(self.runner.cleaned_below(tp), self._range_ends.get(tp, 0))


def keyed_batch(
    sequence: int, broker: int, tp: TopicPartition, record_count: int, timestamp_ms: int
) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """A batch of ``record_count`` keyed records (keys drawn from :data:`KEYS` by sequence,
    values unique), and its records' (key, value) in order."""
    pairs = []
    for index in range(record_count):
        number = sequence + index
        pairs.append((b"k%d" % (number % KEYS), f"b{broker}/{tp}/{number}".encode()))
    batch = rb.build_batch([v for _, v in pairs], keys=[k for k, _ in pairs],
                           timestamp_ms=timestamp_ms)
    return batch, pairs


def read_records(
    partition: PartitionLog,
) -> dict[int, tuple[bytes | None, bytes | None]] | None:
    """Every readable record of the partition (offset -> key, value), or ``None`` when a read
    failed (its dir failed). Raises what reading raises otherwise.

    Raises:
        CorruptBatch: a read returned a whole batch whose CRC-32C does not cover its bytes, or
            whose records do not parse (what a consumer checking CRCs refuses).
    """
    found: dict[int, tuple[bytes | None, bytes | None]] = {}
    offset = partition.log_start_offset
    for _ in range(100_000):
        if offset >= partition.log_end_offset:
            break
        try:
            slices = partition.read(offset, 1 << 20)
        except OSError:
            return None
        batches = _whole_batches(slices)
        if not batches:
            return found  # the rest is a gap the cleaner left at the end of a segment
        for data, header in batches:
            rb.check_crc(data, header)
            for record in rec.iter_records(data, header):
                found[record.offset] = (record.key, record.value)
        offset = batches[-1][1].next_offset
    return found


def _whole_batches(slices: Sequence[Any]) -> list[tuple[bytes, rb.BatchHeader]]:
    out: list[tuple[bytes, rb.BatchHeader]] = []
    for file_slice in slices:
        try:
            data = file_slice.read_all()
        finally:
            file_slice.close()
        position = 0
        while len(data) - position >= rb.HEADER_SIZE:
            length = int.from_bytes(data[position + 8 : position + 12], "big", signed=True)
            if position + length + rb.LOG_OVERHEAD > len(data):
                break
            header = rb.parse_header(data, position)
            raw = bytes(data[position : position + header.size_in_bytes])
            out.append((raw, rb.parse_header(raw, 0)))
            position += header.size_in_bytes
    return out


def check_compacted(
    found: Mapping[int, tuple[bytes | None, bytes | None]],
    acknowledged: Mapping[int, tuple[bytes, bytes]],
    point: int,
) -> tuple[str, str] | None:
    """The model's invariants on a compacted partition read back whole: ``(invariant,
    message)`` of the first violated one, or ``None``.

    Args:
        found: what :func:`read_records` read.
        acknowledged: offset -> (key, value) of every acknowledged record still in the log.
        point: the cleaner point (records below it may have been cleaned).
    """
    for offset, record in sorted(found.items()):
        if acknowledged.get(offset) != record:
            return ("COMPACTION_OFFSETS_STABLE",
                    f"offset {offset} holds {record!r}, acknowledged "
                    f"{acknowledged.get(offset)!r}")
    latest: dict[bytes, int] = {}
    for offset in sorted(acknowledged):
        if offset >= point:
            if offset not in found:
                return ("COMPACTION_OFFSETS_STABLE",
                        f"offset {offset} at or past the cleaner point {point} is gone")
        else:
            latest[acknowledged[offset][0]] = offset
    for key, offset in sorted(latest.items()):
        if offset not in found:
            return ("COMPACTION_KEEPS_LATEST",
                    f"the latest record of {key!r} below the cleaner point {point} (offset "
                    f"{offset}) is gone")
    return None
