"""The log cleaner's shell: carries the core's decisions out on the trio runtime and the disk.

Every decision is in :mod:`impl.storage.log_cleaner` (what to clean, the keep rules, the state
machine, recovery); this shell only:

* reads each dir's ``cleaner-offset-checkpoint`` at start and writes it after each cleaning
  (the cleaner point of each partition, in the dir that holds it now, so a KIP-113 move carries
  it);
* lists the compacted logs (``cleanup.policy`` from :meth:`LogManager.log_config`) with their
  segments and HW for :func:`log_cleaner.choose`;
* reads segments through the ``Disk`` port on the trio thread (storage I/O is synchronous
  here), charging a token bucket (``log.cleaner.io.max.bytes.per.second``), and hands the bytes
  to worker threads (``log.cleaner.threads``) that run the pure core (decode, build the offset
  map, filter, re-encode), so produce and fetch are not stalled by the CPU work;
* writes the cleaned group as ``<base>.log.cleaned`` and installs it with
  :meth:`Log.replace_segments`, but only if the guard still holds at that instant (no await
  between check and replace): the partition has no move in progress and the same live
  :class:`Log` object, and every segment the offset map or the group was built from is still
  there, unchanged (a truncation or a move's swap meanwhile aborts the cleaning: known-bad
  variant ``swap_races_cleaner_replace`` of ``model/log_cleaner.py``);
* emits a ``log_cleaner`` trace event at each transition.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import trio

from impl.storage import log_cleaner as lc
from impl.storage import record_batch as rb
from impl.storage.checkpoint import format_offsets, parse_offsets, read_checkpoint, write_atomically
from impl.storage.errors import CorruptBatch, LogDirOffline, StorageError
from impl.storage.log import Log, Segment
from impl.storage.manager import LogManager, PartitionLog
from impl.storage.names import TopicPartition
from impl.storage.replica_move import MoveState
from impl.storage.throttle import TokenBucket
from impl.trace import TraceEvent

_LOG = logging.getLogger(__name__)
T = TypeVar("T")

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
MACHINE = "log_cleaner"
_MOVE_IDLE = (MoveState.NONE, MoveState.DONE, MoveState.CANCELLED, MoveState.FAILED)


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The cleaner's broker settings (Kafka's names).

    Attributes:
        enable: ``log.cleaner.enable``.
        threads: ``log.cleaner.threads``: partitions cleaned at once, each on a worker thread
            (0: the CPU work runs inline on the event loop, for deterministic simulations).
        io_max_bytes_per_second: ``log.cleaner.io.max.bytes.per.second``: bytes read and
            written by all cleaners together.
        dedupe_buffer_bytes: ``log.cleaner.dedupe.buffer.size``: offset-map memory, shared by
            the threads (24 bytes per key).
        backoff_ms: ``log.cleaner.backoff.ms``: pause when nothing is dirty enough.
        clean_active_segment: a known-bad plant (never set in production; the storage
            simulator's ``clean_active_segment`` variant): the cleanable range reaches the log
            end, into the active segment (COMPACTION_OFFSETS_STABLE's guard).
    """

    enable: bool = True
    threads: int = 1
    io_max_bytes_per_second: int = (1 << 63) - 1
    dedupe_buffer_bytes: int = 128 << 20
    backoff_ms: int = 15_000
    clean_active_segment: bool = False

    @property
    def map_capacity(self) -> int:
        """Keys one cleaning's offset map may hold."""
        threads = max(1, self.threads)
        return max(1, self.dedupe_buffer_bytes // threads // lc.OFFSET_MAP_ENTRY_BYTES)


@dataclass
class CleaningStats:
    """What the cleaner did (for logs, tests and the benchmark)."""

    cleanings: int = 0
    aborted: int = 0
    bytes_read: int = 0
    #: bytes of the segments replaced by cleaned ones (the log cleaned)
    bytes_cleaned: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    cpu_seconds: float = 0.0


@dataclass
class _Snapshot:
    """What a cleaning was built from, to re-check before its replace."""

    log: Log
    sources: list[tuple[Segment, int]] = field(default_factory=list)

    def still_valid(self, partition: PartitionLog | None) -> bool:
        if partition is None or partition.offline or partition.log is not self.log:
            return False
        if partition.future is not None:
            return False
        present = {id(s) for s in self.log.sealed_segments()}
        return all(id(s) in present and s.size == size for s, size in self.sources)


class LogCleanerRunner:
    """Cleans the compacted logs of one :class:`LogManager`."""

    def __init__(
        self,
        manager: LogManager,
        config: CleanerConfig | None = None,
        *,
        cpu_clock: Callable[[], float] | None = None,
        pacer: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        self.manager = manager
        #: what a cleaning awaits before each read and write of ``n`` bytes (default: the
        #: throttle, on trio); the storage simulator passes one that hands control back to it,
        #: so appends, truncations, moves and crashes interleave with a cleaning step by step
        self._pacer = pacer
        self.config = config or CleanerConfig()
        self.stats = CleaningStats()
        self.cleanings: dict[TopicPartition, lc.Cleaning] = {}
        self.points: dict[TopicPartition, int] = {}
        #: the map end of a running cleaning once it installed a group: the groups are replaced
        #: one by one and the point moves at the end, so in between the records below this
        #: offset are the cleaned ones (the model's replace is one step)
        self.installing: dict[TopicPartition, int] = {}
        #: the range of each cleaning under way (the simulator bounds what a crash in the
        #: middle of its replace may leave cleaned)
        self.ranges: dict[TopicPartition, lc.CleanableRange] = {}
        #: partitions whose cleaning failed (KIP-346): left alone until the broker restarts
        self.uncleanable: set[TopicPartition] = set()
        self._bucket = TokenBucket(self.config.io_max_bytes_per_second,
                                   manager.clock.monotonic_ns())
        self._limiter = trio.CapacityLimiter(max(1, self.config.threads))
        self._cpu_clock = cpu_clock
        self._wakeup = trio.Event()
        self._closed = False
        self._load_points()

    # --- cleaner points ----------------------------------------------------------------------

    def _load_points(self) -> None:
        for log_dir in self.manager.config.log_dirs:
            if log_dir in self.manager.offline_dirs:
                continue
            try:
                text = read_checkpoint(self.manager.disk, log_dir, CLEANER_OFFSET_CHECKPOINT)
                if text is not None:
                    self.points.update(parse_offsets(text))
            except (OSError, ValueError) as error:
                _LOG.warning("%s/%s unreadable (%s): cleaning from the log start",
                             log_dir, CLEANER_OFFSET_CHECKPOINT, error)

    def write_points(self) -> None:
        """Write every online dir's ``cleaner-offset-checkpoint`` from the partitions it holds."""
        by_dir: dict[str, dict[TopicPartition, int]] = {
            d: {} for d in self.manager.config.log_dirs if d not in self.manager.offline_dirs
        }
        for tp, partition in self.manager.partitions().items():
            point = self.points.get(tp)
            if point is not None and partition.log_dir in by_dir and not partition.offline:
                by_dir[partition.log_dir][tp] = point
        for log_dir, points in by_dir.items():
            try:
                with self.manager.io(log_dir):
                    write_atomically(self.manager.disk, log_dir, CLEANER_OFFSET_CHECKPOINT,
                                     format_offsets(points))
            except LogDirOffline:
                continue

    # --- the state machine -------------------------------------------------------------------

    def _step(self, tp: TopicPartition, event: lc.CleanerEvent, **fields: object) -> lc.Cleaning:
        before = self.cleanings.get(tp, lc.Cleaning())
        after = lc.step(before, event)
        self.cleanings[tp] = after
        self.manager.trace.emit(TraceEvent.of(
            MACHINE, event.name, str(tp), before.state.name, after.state.name, **fields,
        ))
        return after

    def pause(self, tp: TopicPartition) -> None:
        """Abort a running cleaning of ``tp`` and keep the cleaner away until :meth:`resume`
        (Kafka's ``abortAndPauseCleaning``, for truncation, deletion or a move)."""
        state = self.cleanings.get(tp, lc.Cleaning()).state
        if state is lc.CleanerState.CLEANING:
            self._step(tp, lc.CleanerEvent.CLEANING_ABORTED)
        self._step(tp, lc.CleanerEvent.CLEANING_PAUSED)

    def resume(self, tp: TopicPartition) -> None:
        """Undo one :meth:`pause`."""
        if self.cleanings.get(tp, lc.Cleaning()).state is lc.CleanerState.PAUSED:
            self._step(tp, lc.CleanerEvent.CLEANING_RESUMED)
            self._wakeup.set()

    # --- choosing ----------------------------------------------------------------------------

    def _movable(self, tp: TopicPartition, partition: PartitionLog) -> bool:
        return partition.future is None and self.manager.move_state(tp).state in _MOVE_IDLE

    def candidates(self) -> list[lc.Candidate]:
        """Every compacted, idle, online log with its cleanable range, in partition order.

        A log that is not compacted is passed over first, with one attribute read: every
        cleaner pass (each ``log.cleaner.backoff.ms``) sorted every hosted partition and asked
        each its move state, 0.3-0.5 s of the event loop on a broker with 32,000 partitions."""
        found: list[tuple[TopicPartition, lc.Candidate]] = []
        for tp, partition in self.manager.partitions().items():
            if partition.offline or tp in self.uncleanable:
                continue
            log = partition.log
            log_config = log.log_config
            if not log_config.compact or not self._movable(tp, partition):
                continue
            if self.cleanings.get(tp, lc.Cleaning()).state is not lc.CleanerState.IDLE:
                continue
            infos = [lc.SegmentInfo(s.base_offset, s.next_offset, s.size) for s in log.segments]
            cleanable = lc.cleanable_range(infos, self.points.get(tp, 0), log.high_watermark)
            if self.config.clean_active_segment:  # the plant: the range reaches the log end
                cleanable = lc.CleanableRange(
                    cleanable.first_dirty, log.log_end_offset, cleanable.clean_bytes,
                    cleanable.dirty_bytes + log.active.size)
            found.append((tp, lc.Candidate(tp, cleanable, log_config.min_cleanable_dirty_ratio)))
        return [candidate for _, candidate in sorted(found, key=lambda pair: pair[0])]

    # --- cleaning ----------------------------------------------------------------------------

    async def _charge(self, byte_count: int) -> None:
        if self._pacer is not None:
            await self._pacer(byte_count)
            return
        # a yield between segments, throttled or not: appends and fetches run in between
        await trio.lowlevel.checkpoint()
        while not self._closed:
            wait_ns = self._bucket.wait_ns(self.manager.clock.monotonic_ns())
            if wait_ns <= 0:
                break
            await trio.sleep(wait_ns / 1e9)
        self._bucket.admit(byte_count, self.manager.clock.monotonic_ns())

    async def _in_thread(self, function: Callable[[], T]) -> T:
        if self.config.threads == 0:
            return function()
        return await trio.to_thread.run_sync(function, limiter=self._limiter)

    async def clean_once(self) -> bool:
        """Clean the filthiest log, if any is dirty enough; returns whether one was cleaned."""
        candidate = lc.choose(self.candidates())
        if candidate is None:
            return False
        tp = candidate.key
        assert isinstance(tp, TopicPartition)
        await self.clean(tp, candidate.cleanable)
        return True

    async def clean(self, tp: TopicPartition, cleanable: lc.CleanableRange) -> bool:
        """Clean ``tp`` over ``cleanable``; returns whether the result was installed."""
        partition = self.manager.get(tp)
        if partition is None:
            return False
        self._step(tp, lc.CleanerEvent.CLEANING_STARTED, first_dirty=cleanable.first_dirty,
                   first_uncleanable=cleanable.first_uncleanable,
                   active_base=partition.log.active.base_offset)
        self.ranges[tp] = cleanable
        try:
            installed = await self._clean(tp, partition, cleanable)
        except (CorruptBatch, StorageError, OSError) as error:
            _LOG.warning("cleaning %s failed, marked uncleanable (KIP-346): %s", tp, error)
            self.uncleanable.add(tp)
            if self.cleanings[tp].state is lc.CleanerState.CLEANING:
                self._step(tp, lc.CleanerEvent.CLEANING_FAILED)
            elif self.cleanings[tp].state is lc.CleanerState.ABORTED:
                self._step(tp, lc.CleanerEvent.CLEANING_PAUSED)
            return False
        finally:
            self.ranges.pop(tp, None)
        if not installed:
            self.stats.aborted += 1
        return installed

    async def _clean(
        self, tp: TopicPartition, partition: PartitionLog, cleanable: lc.CleanableRange
    ) -> bool:
        log = partition.log
        log_config = log.log_config
        snapshot = _Snapshot(log)
        segments = log.segments if self.config.clean_active_segment else log.sealed_segments()
        sealed = [s for s in segments if s.base_offset < cleanable.first_uncleanable]
        # 1. the offset map over the dirty segments, and each producer's last batch over the
        # whole log (its headers)
        offset_map = lc.OffsetMap(self.config.map_capacity, end_offset=cleanable.first_dirty)
        last_offsets: dict[int, int] = {}
        mapping = True
        dirty = {id(s) for s in sealed if s.next_offset > cleanable.first_dirty}
        for segment in list(log.segments):
            if id(segment) in dirty:
                data = await self._read(partition, log, segment, snapshot)
            else:  # read for its headers only: not a source of the replace
                data = await self._read_unchecked(partition, log, segment, snapshot)
            if data is None:
                return self._abort(tp)
            lc.producer_last_offsets(rb.iter_batches(data), last_offsets)
            if mapping and id(segment) in dirty:
                mapping = await self._in_thread(
                    functools.partial(_add_segment, offset_map, data))
        end_offset = offset_map.end_offset
        if end_offset <= cleanable.first_dirty:
            return self._abort(tp)
        # 2. each group of segments below the map's end, rewritten and swapped in
        now_ms = self.manager.clock.wall_ms()
        infos = [lc.SegmentInfo(s.base_offset, s.next_offset, s.size) for s in sealed]
        by_base = {s.base_offset: s for s in sealed}
        for group in lc.group_segments(infos, end_offset, log_config.segment_bytes):
            old = [by_base[info.base_offset] for info in group]
            group_sizes = [segment.size for segment in old]
            parts: list[lc.CleanedBatches] = []
            for segment in old:
                data = await self._read(partition, log, segment, snapshot)
                if data is None:
                    return self._abort(tp)
                parts.append(await self._in_thread(functools.partial(
                    lc.clean_batches, data, offset_map, now_ms, log_config.delete_retention_ms,
                    last_offsets,
                )))
            joined, headers = _join(parts)
            await self._charge(len(joined))
            if not self._guard(tp, partition, snapshot):
                return self._abort(tp)
            with self.manager.io(log.log_dir):
                cleaned_path = log.write_cleaned(old[0].base_offset, joined)
            # no await from the guard to the replace: appends, truncation and a move's swap
            # run on this thread too, so they cannot interleave
            if not self._guard(tp, partition, snapshot):
                with self.manager.io(log.log_dir):
                    log.discard_cleaned(cleaned_path)
                return self._abort(tp)
            with self.manager.io(log.log_dir):
                new = log.replace_segments(old, cleaned_path, headers)
            self.installing[tp] = end_offset
            snapshot.sources = [(s, size) for s, size in snapshot.sources if s not in old]
            snapshot.sources.append((new, new.size))
            self.stats.bytes_written += len(joined)
            self.stats.bytes_cleaned += sum(group_sizes)
            for part in parts:
                self.stats.records_read += part.records_read
                self.stats.records_kept += part.records_kept
        self.points[tp] = end_offset
        self.installing.pop(tp, None)
        self.stats.cleanings += 1
        self._step(tp, lc.CleanerEvent.SEGMENTS_REPLACED, cleaner_point=end_offset,
                   first_dirty=cleanable.first_dirty,
                   first_uncleanable=cleanable.first_uncleanable)
        self.write_points()
        return True

    def _guard(self, tp: TopicPartition, partition: PartitionLog, snapshot: _Snapshot) -> bool:
        if self.cleanings.get(tp, lc.Cleaning()).state is not lc.CleanerState.CLEANING:
            return False
        return snapshot.still_valid(self.manager.get(tp)) and self._movable(tp, partition)

    def cleaned_below(self, tp: TopicPartition) -> int:
        """The offset below which ``tp``'s records are cleaned: the cleaner point, or the map
        end of a running cleaning that already installed a group."""
        return max(self.points.get(tp, 0), self.installing.get(tp, 0))

    def _abort(self, tp: TopicPartition) -> bool:
        installed_end = self.installing.pop(tp, None)
        if installed_end is not None:
            # groups already replaced were cleaned with a map reaching its end: the point moves
            # there as after a whole cleaning (the groups not replaced are only less compacted;
            # every record at or past the map end is untouched)
            self.points[tp] = max(self.points.get(tp, 0), installed_end)
            self.write_points()
        state = self.cleanings.get(tp, lc.Cleaning()).state
        if state is lc.CleanerState.CLEANING:
            self._step(tp, lc.CleanerEvent.CLEANING_ABORTED)
            state = lc.CleanerState.ABORTED
        if state is lc.CleanerState.ABORTED:
            self._step(tp, lc.CleanerEvent.CLEANING_PAUSED)
            self._step(tp, lc.CleanerEvent.CLEANING_RESUMED)
        return False

    async def _read(
        self, partition: PartitionLog, log: Log, segment: Segment, snapshot: _Snapshot
    ) -> bytes | None:
        if not snapshot.still_valid(self.manager.get(partition.tp)):
            return None
        await self._charge(segment.size)
        if not snapshot.still_valid(self.manager.get(partition.tp)):
            return None
        with self.manager.io(log.log_dir):
            data = log.segment_bytes(segment)
        snapshot.sources.append((segment, len(data)))
        self.stats.bytes_read += len(data)
        return data

    async def _read_unchecked(
        self, partition: PartitionLog, log: Log, segment: Segment, snapshot: _Snapshot
    ) -> bytes | None:
        """A segment's bytes (throttled) that the replace does not depend on: the producers'
        last batches are read from the whole log, the active segment included."""
        await self._charge(segment.size)
        if not snapshot.still_valid(self.manager.get(partition.tp)):
            return None
        with self.manager.io(log.log_dir):
            data = log.segment_bytes(segment)
        self.stats.bytes_read += len(data)
        return data

    # --- the trio task -----------------------------------------------------------------------

    async def run(self) -> None:
        """Clean whenever a log is dirty enough; sleep ``log.cleaner.backoff.ms`` otherwise."""
        if not self.config.enable:
            return
        while not self._closed:
            cleaned = await self.clean_once()
            if not cleaned:
                self._wakeup = trio.Event()
                with trio.move_on_after(self.config.backoff_ms / 1000):
                    await self._wakeup.wait()

    def wake(self) -> None:
        """Look for dirty logs now (a config change, a test)."""
        self._wakeup.set()

    def close(self) -> None:
        """Stop after the current step."""
        self._closed = True
        self._wakeup.set()


def _add_segment(offset_map: lc.OffsetMap, data: bytes) -> bool:
    for header in rb.iter_batches(data):
        batch = bytes(data[header.position : header.position + header.size_in_bytes])
        if not offset_map.add_batch(batch, rb.parse_header(batch, 0)):
            return False
    return True


def _join(parts: list[lc.CleanedBatches]) -> tuple[bytes, tuple[rb.BatchHeader, ...]]:
    out = bytearray()
    headers: list[rb.BatchHeader] = []
    for part in parts:
        shift = len(out)
        out += part.data
        headers.extend(dataclasses.replace(h, position=h.position + shift) for h in part.headers)
    return bytes(out), tuple(headers)
