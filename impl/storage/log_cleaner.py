"""The log cleaner (Kafka log compaction) as a sans-IO core: what to clean, and how.

``spec/log_cleaner.md`` is the specification; ``model/log_cleaner.py`` proves its invariants
(``COMPACTION_KEEPS_LATEST``, ``COMPACTION_OFFSETS_STABLE``). This module holds every decision:

* the per-partition cleaning state machine (:class:`CleanerState`, :class:`CleanerEvent`,
  :data:`TRANSITIONS`, :func:`step`), Kafka's ``LogCleaningState``: a partition is idle, being
  cleaned, aborted (a truncation, deletion or replica move arrived while it was being cleaned)
  or paused (counted, while such an operation runs);
* which partition to clean and which range (:func:`cleanable_range`, :func:`dirty_ratio`,
  :func:`choose`): from the cleaner point (``cleaner-offset-checkpoint``) to the first
  uncleanable offset, the smaller of the HW and the active segment's base, rounded down to a
  segment boundary — the active segment is never cleaned;
* the offset map (:class:`OffsetMap`): the latest offset of every key in the dirty range, bounded
  like Kafka's ``log.cleaner.dedupe.buffer.size``; a full map ends the range early;
* groups of segments rewritten into one (:func:`group_segments`), at most ``segment.bytes``;
* the keep rule per record (:func:`clean_batch`): a record stays if it lies beyond the map, or
  is the latest of its key; keyless records go; a tombstone stays until its delete horizon
  (KIP-534: the first cleaning that keeps it stamps ``now + delete.retention.ms`` into the batch);
  control batches are kept as they are; an idempotent producer's last batch stays, emptied if
  none of its records does (:func:`producer_last_offsets`). Offsets never change: a batch keeps
  its base offset and its offset span, only records inside it go.
* recovery of an interrupted segment replace (:func:`recovery_plan`): Kafka's ``.cleaned``,
  ``.swap`` and ``.deleted`` rules.

The shell (:mod:`impl.storage.cleaner_runner`) reads and writes files through the ``Disk`` port,
runs :func:`clean_batches` on worker threads (``log.cleaner.threads``), throttles the bytes it
reads (``log.cleaner.io.max.bytes.per.second``) and performs the replace the core plans.

This module is a sans-IO core.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from impl.storage import record_batch as rb
from impl.storage import records as rec

__sans_io__ = True

#: Kafka's per-entry cost of the dedupe map: MD5 of the key (16 bytes) plus the offset (8)
OFFSET_MAP_ENTRY_BYTES = 24


class CleanerState(enum.Enum):
    """Where a partition is in the cleaner (Kafka ``LogCleaningState``)."""

    IDLE = "idle"  #: LogCleaner.scala: not being cleaned (``None`` in the cleaner manager)
    CLEANING = "cleaning"  #: LogCleaningInProgress: a cleaner thread works on the partition
    ABORTED = "aborted"  #: LogCleaningAborted: the running cleaning must not install its result
    PAUSED = "paused"  #: LogCleaningPaused(n): truncation, deletion or a move holds it paused


class CleanerEvent(enum.Enum):
    """What happens to a partition's cleaning."""

    CLEANING_STARTED = "cleaning_started"  #: LogCleaner.scala grabFilthiestCompactedLog
    SEGMENTS_REPLACED = "segments_replaced"  #: LogCleaner.scala cleanSegments: swap done
    CLEANING_ABORTED = "cleaning_aborted"  #: LogCleanerManager abortAndPauseCleaning
    CLEANING_PAUSED = "cleaning_paused"  #: LogCleanerManager abortAndPauseCleaning (idle)
    CLEANING_RESUMED = "cleaning_resumed"  #: LogCleanerManager resumeCleaning
    CLEANING_FAILED = "cleaning_failed"  #: KIP-346: an error marks the partition uncleanable


#: ``(state, event) -> state``; a pair not listed is a protocol error (:class:`CleanerError`).
TRANSITIONS: Mapping[tuple[CleanerState, CleanerEvent], CleanerState] = {
    (CleanerState.IDLE, CleanerEvent.CLEANING_STARTED): CleanerState.CLEANING,
    (CleanerState.CLEANING, CleanerEvent.SEGMENTS_REPLACED): CleanerState.IDLE,
    (CleanerState.CLEANING, CleanerEvent.CLEANING_FAILED): CleanerState.IDLE,
    (CleanerState.CLEANING, CleanerEvent.CLEANING_ABORTED): CleanerState.ABORTED,
    (CleanerState.ABORTED, CleanerEvent.CLEANING_ABORTED): CleanerState.ABORTED,
    (CleanerState.ABORTED, CleanerEvent.CLEANING_PAUSED): CleanerState.PAUSED,
    (CleanerState.ABORTED, CleanerEvent.CLEANING_FAILED): CleanerState.PAUSED,
    (CleanerState.IDLE, CleanerEvent.CLEANING_PAUSED): CleanerState.PAUSED,
    (CleanerState.PAUSED, CleanerEvent.CLEANING_PAUSED): CleanerState.PAUSED,
    (CleanerState.PAUSED, CleanerEvent.CLEANING_RESUMED): CleanerState.IDLE,
}


class CleanerError(Exception):
    """An event that the cleaning state machine does not accept in its state."""


@dataclass(frozen=True, slots=True)
class Cleaning:
    """One partition's cleaning state: the machine's state and the pause count."""

    state: CleanerState = CleanerState.IDLE
    pauses: int = 0


def step(cleaning: Cleaning, event: CleanerEvent) -> Cleaning:
    """The partition's cleaning state after ``event``.

    Pauses are counted (KAFKA-7441): a pause while paused adds one, a resume removes one and
    the partition is idle again only at zero.

    Raises:
        CleanerError: the event is not allowed in the state.
    """
    if cleaning.state is CleanerState.PAUSED and event is CleanerEvent.CLEANING_RESUMED:
        if cleaning.pauses > 1:
            return Cleaning(CleanerState.PAUSED, cleaning.pauses - 1)
        return Cleaning(CleanerState.IDLE, 0)
    target = TRANSITIONS.get((cleaning.state, event))
    if target is None:
        raise CleanerError(f"{event.name} is not allowed while {cleaning.state.name}")
    if event is CleanerEvent.CLEANING_PAUSED:
        return Cleaning(target, cleaning.pauses + 1)
    if event is CleanerEvent.CLEANING_FAILED and target is CleanerState.PAUSED:
        return Cleaning(target, max(cleaning.pauses, 1))
    return Cleaning(target, cleaning.pauses)


# --- choosing what to clean ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """What the core needs to know of one segment."""

    base_offset: int
    next_offset: int
    size: int


@dataclass(frozen=True, slots=True)
class CleanableRange:
    """The dirty range of one log: ``[first_dirty, first_uncleanable)`` and its bytes."""

    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    dirty_bytes: int

    @property
    def ratio(self) -> float:
        """:func:`dirty_ratio` of the range."""
        return dirty_ratio(self.clean_bytes, self.dirty_bytes)


def dirty_ratio(clean_bytes: int, dirty_bytes: int) -> float:
    """Dirty bytes over all cleanable bytes (Kafka's ``cleanableRatio``; 0 for an empty log)."""
    total = clean_bytes + dirty_bytes
    return dirty_bytes / total if total > 0 else 0.0


def cleanable_range(
    segments: Sequence[SegmentInfo],
    cleaner_point: int,
    high_watermark: int,
) -> CleanableRange:
    """The cleanable range of a log whose last segment is the active one.

    The first dirty offset is the cleaner point, reset to the log start when it lies outside
    ``[log start, LEO]`` (KAFKA-6266). The first uncleanable offset is the base of the first
    segment that is the active one or reaches past the HW (KAFKA-13194: a consumer must never
    see a record that cleaning could still remove below it).
    """
    assert segments, "a log has at least its active segment"
    log_start = segments[0].base_offset
    log_end = segments[-1].next_offset
    first_dirty = cleaner_point if log_start <= cleaner_point <= log_end else log_start
    first_uncleanable = segments[-1].base_offset
    for segment in segments[:-1]:
        if segment.next_offset > high_watermark:
            first_uncleanable = segment.base_offset
            break
    first_dirty = min(first_dirty, first_uncleanable)
    clean_bytes = sum(s.size for s in segments[:-1] if s.next_offset <= first_dirty)
    dirty_bytes = sum(
        s.size
        for s in segments[:-1]
        if s.next_offset > first_dirty and s.base_offset < first_uncleanable
    )
    return CleanableRange(first_dirty, first_uncleanable, clean_bytes, dirty_bytes)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A compacted log that may be cleaned, with its range."""

    key: object
    cleanable: CleanableRange
    min_cleanable_dirty_ratio: float


def choose(candidates: Iterable[Candidate]) -> Candidate | None:
    """The filthiest log whose ratio exceeds its ``min.cleanable.dirty.ratio`` (Kafka's
    ``grabFilthiestCompactedLog``), or ``None``."""
    best: Candidate | None = None
    for candidate in candidates:
        cleanable = candidate.cleanable
        if cleanable.dirty_bytes == 0:
            continue
        if cleanable.ratio < candidate.min_cleanable_dirty_ratio:
            continue
        if best is None or cleanable.ratio > best.cleanable.ratio:
            best = candidate
    return best


# --- the offset map ---------------------------------------------------------------------------


@dataclass
class OffsetMap:
    """Key -> latest offset over the dirty range (Kafka's ``SkimpyOffsetMap``).

    Keys are stored by MD5 digest, as Kafka does, so memory is bounded by the entry count
    (``log.cleaner.dedupe.buffer.size`` / 24 per thread) whatever the key sizes.
    """

    capacity: int
    latest: dict[bytes, int] = field(default_factory=dict)
    #: one past the last offset the map covers (records at or past it are always kept)
    end_offset: int = 0

    @staticmethod
    def digest(key: bytes) -> bytes:
        """The map's key for a record key."""
        return hashlib.md5(key, usedforsecurity=False).digest()

    @property
    def full(self) -> bool:
        """No room for another key."""
        return len(self.latest) >= self.capacity

    def add_batch(self, batch: bytes, header: rb.BatchHeader) -> bool:
        """Record every keyed record of ``batch``; False (nothing added) if a new key would not
        fit, so the map ends before this batch."""
        if header.is_control:
            self.end_offset = max(self.end_offset, header.next_offset)
            return True
        records = list(rec.iter_records(batch, header))
        digests = [self.digest(r.key) for r in records if r.key is not None]
        new = {d for d in digests if d not in self.latest}
        if len(self.latest) + len(new) > self.capacity:
            return False
        for record in records:
            if record.key is not None:
                self.latest[self.digest(record.key)] = record.offset
        self.end_offset = max(self.end_offset, header.next_offset)
        return True

    def keeps(self, record: rec.Record) -> bool:
        """Whether ``record`` stays: it lies beyond the map's range, or no later record of its
        key is in the map (Kafka's ``shouldRetainRecord``: a key the map does not hold was not
        rewritten in the dirty range, so its clean record is still its latest)."""
        if record.offset >= self.end_offset:
            return True
        if record.key is None:
            return False
        found = self.latest.get(self.digest(record.key))
        return found is None or record.offset >= found


def build_offset_map(
    batches: Iterable[tuple[bytes, rb.BatchHeader]], capacity: int, start_offset: int
) -> tuple[OffsetMap, bool]:
    """The offset map over ``batches`` (the dirty range, in order).

    Returns:
        The map and whether it covers every batch (False: it filled up and ends early).
    """
    offset_map = OffsetMap(capacity, end_offset=start_offset)
    for batch, header in batches:
        if not offset_map.add_batch(batch, header):
            return offset_map, False
    return offset_map, True


# --- groups and the keep rule ---------------------------------------------------------------


def group_segments(
    segments: Sequence[SegmentInfo], end_offset: int, max_group_bytes: int
) -> list[list[SegmentInfo]]:
    """Consecutive segments below ``end_offset`` (never the active one: the caller passes the
    sealed segments only) grouped so each group's bytes fit in one segment (``segment.bytes``)
    and its offsets in a 32-bit relative index (KAFKA-12889)."""
    groups: list[list[SegmentInfo]] = []
    current: list[SegmentInfo] = []
    size = 0
    for segment in segments:
        if segment.base_offset >= end_offset:
            break
        fits = (
            current
            and size + segment.size <= max_group_bytes
            and segment.next_offset - current[0].base_offset <= 0x7FFFFFFF
        )
        if current and not fits:
            groups.append(current)
            current, size = [], 0
        current.append(segment)
        size += segment.size
    if current:
        groups.append(current)
    return groups


@dataclass(frozen=True, slots=True)
class CleanedBatches:
    """The result of cleaning a run of batches."""

    data: bytes
    #: headers of the batches in ``data`` (positions relative to ``data``)
    headers: tuple[rb.BatchHeader, ...]
    records_read: int
    records_kept: int
    bytes_read: int


def producer_last_offsets(
    headers: Iterable[rb.BatchHeader], into: dict[int, int] | None = None
) -> dict[int, int]:
    """Producer id -> the last offset of its last data batch in the log (Kafka's
    ``lastRecordsOfActiveProducers``): the batches the cleaner keeps, emptied if need be."""
    last = {} if into is None else into
    for header in headers:
        if header.producer_id >= 0 and not header.is_control and (
                header.last_offset > last.get(header.producer_id, -1)):
            last[header.producer_id] = header.last_offset
    return last


def clean_batch(  # noqa: PLR0917 (clean_batches' per-batch step, same arguments)
    batch: bytes,
    header: rb.BatchHeader,
    offset_map: OffsetMap,
    now_ms: int,
    delete_retention_ms: int,
    last_offsets: Mapping[int, int] | None = None,
) -> tuple[bytes | None, int, int]:
    """One batch after cleaning: ``(bytes or None if nothing is left, records read, kept)``.

    Keep rules (Kafka ``LogCleaner.shouldRetainRecord``): a record beyond the map's range
    stays; a keyless record goes; a keyed record stays only if it is its key's latest; a
    tombstone (null value) that is the latest stays until the batch's delete horizon has
    passed (KIP-534). A batch keeping every record and needing no horizon stamp is returned
    unchanged (same bytes, same CRC). The last batch of an idempotent producer (``last_offsets``,
    :func:`producer_last_offsets`) is never dropped: emptied of its records it stays as a header
    (Kafka's ``RETAIN_EMPTY``), so the producer's last sequence and epoch survive compaction
    and its next batch is not refused as out of order after a change of leader.
    """
    if header.is_control:
        return batch, 0, 0
    records = list(rec.iter_records(batch, header))
    horizon = rec.delete_horizon_ms(header)
    kept: list[rec.Record] = []
    for record in records:
        if not offset_map.keeps(record):
            continue
        expired = horizon is not None and now_ms >= horizon
        if record.value is None and record.offset < offset_map.end_offset and expired:
            continue
        kept.append(record)
    if not kept:
        if header.producer_id >= 0 and last_offsets is not None and (
                last_offsets.get(header.producer_id) == header.last_offset):
            return rec.empty_batch(header), len(records), 0
        return None, len(records), 0
    has_tombstone = any(
        r.value is None and r.offset < offset_map.end_offset for r in kept
    )
    stamp = now_ms + delete_retention_ms if has_tombstone and horizon is None else None
    if len(kept) == len(records) and stamp is None:
        return batch, len(records), len(kept)
    return rec.rebuild_batch(header, kept, delete_horizon_ms=stamp), len(records), len(kept)


def clean_batches(
    data: bytes,
    offset_map: OffsetMap,
    now_ms: int,
    delete_retention_ms: int,
    last_offsets: Mapping[int, int] | None = None,
) -> CleanedBatches:
    """Clean every whole batch of ``data`` (a segment's bytes, CRC-checked here), keeping each
    producer's last batch (``last_offsets``, see :func:`clean_batch`).

    Raises:
        CorruptBatch: a batch or its records are malformed.
    """
    out = bytearray()
    headers: list[rb.BatchHeader] = []
    read = kept = 0
    for header in rb.iter_batches(data):
        raw = bytes(data[header.position : header.position + header.size_in_bytes])
        cleaned, records_read, records_kept = clean_batch(
            raw, dataclasses.replace(header, position=0), offset_map, now_ms,
            delete_retention_ms, last_offsets,
        )
        read += records_read
        kept += records_kept
        if cleaned is None:
            continue
        headers.append(dataclasses.replace(rb.parse_header(cleaned, 0), position=len(out)))
        out += cleaned
    return CleanedBatches(bytes(out), tuple(headers), read, kept, len(data))


# --- recovery of an interrupted replace -----------------------------------------------------

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"


@dataclass(frozen=True, slots=True)
class RecoveryPlan:
    """What start-up does with the cleaner's leftovers in one partition dir."""

    #: file names to delete (``.deleted``, ``.cleaned``, stale indexes)
    remove: tuple[str, ...]
    #: ``(swap log file, final log file)`` renames to complete, after ``replaced`` are gone
    complete: tuple[tuple[str, str], ...]
    #: bases of segments a completed swap replaces (their files are removed first)
    replaced: tuple[int, ...]


def recovery_plan(
    names: Sequence[str], swap_next_offsets: Mapping[int, int]
) -> RecoveryPlan:
    """Kafka's ``LogLoader`` rules for the cleaner's files.

    * ``*.deleted``: delete (the replace that renamed them had installed its swap).
    * ``*.cleaned``: delete (the replace had not started: the old segments are intact).
    * ``<base>.log.swap``: the cleaned segment was complete and durable. Every segment whose base
      lies in ``[base, swap next offset)`` is one it replaces: delete them, then rename the swap
      to ``<base>.log``. Index files of those bases are deleted too: recovery rebuilds them.

    Args:
        names: the partition dir's file names.
        swap_next_offsets: for each ``.log.swap`` base, the next offset of its last batch.
    """
    remove: list[str] = []
    complete: list[tuple[str, str]] = []
    replaced: set[int] = set()
    log_bases: list[int] = []
    for name in names:
        stem, _, suffix = name.partition(".")
        if not (len(stem) == 20 and stem.isdigit()):
            continue
        if suffix.endswith((DELETED_SUFFIX.lstrip("."), CLEANED_SUFFIX.lstrip("."))):
            remove.append(name)
        elif suffix == "log":
            log_bases.append(int(stem))
        elif suffix.endswith(SWAP_SUFFIX.lstrip(".")) and suffix != "log.swap":
            remove.append(name)  # an index swap: rebuilt from the log
    for base, next_offset in sorted(swap_next_offsets.items()):
        swap = f"{base:020d}.log{SWAP_SUFFIX}"
        if swap not in names:
            continue
        for old in log_bases:
            if base <= old < max(next_offset, base + 1):
                replaced.add(old)
        complete.append((swap, f"{base:020d}.log"))
    return RecoveryPlan(tuple(remove), tuple(complete), tuple(sorted(replaced)))


#: suffixes of the cleaner's files that start-up must look at
CLEANER_FILE_SUFFIXES = (CLEANED_SUFFIX, SWAP_SUFFIX, DELETED_SUFFIX)
