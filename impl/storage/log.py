"""One on-disk copy of a partition: a dir of segments in one log dir, driven through ``Disk``.

A :class:`Log` is synchronous and has no lock: the trio-facing :class:`PartitionLog` (in
:mod:`impl.storage.partition`) serialises writers with the partition lock. Every ``OSError``
escapes unchanged (its ``filename`` names the dir) for the log manager to take the dir offline.

Segments: ``<20-digit base offset>.log`` holds v2 batches exactly as appended; ``.index`` is a
sparse list of 8-byte entries (``int32`` offset relative to the segment's base, ``int32`` byte
position of the batch starting at that offset), one per ``log.index.interval.bytes``. Unlike
Kafka's index, whose entries name the last offset of the appended records, each entry here names
the first offset of the batch at the position, so a position in the index is always a batch
boundary (movers copy up to such boundaries).

``.timeindex`` is Kafka's sparse time index: 12-byte entries (``int64`` timestamp, ``int32``
relative offset), written next to offset-index entries. Here an entry ``(ts, offset)`` states
that every record of the segment below ``offset`` (a batch start) is stamped at most ``ts``, so
ListOffsets by timestamp starts its scan at the last entry below the target instead of at the
segment's start. The in-memory list is only ever a subset of the true bounds (empty is valid):
segments copied by a mover or read from a bad file fall back to scanning from the start, and
recovery rebuilds it with the offset index.
"""

from __future__ import annotations

import dataclasses
import logging
import struct
from dataclasses import dataclass, field
from typing import Final

from impl.ports import Clock
from impl.storage import log_cleaner as lc
from impl.storage import record_batch as rb
from impl.storage import records as rec
from impl.storage.checkpoint import LEADER_EPOCH_CHECKPOINT, read_checkpoint, write_atomically
from impl.storage.config import StorageConfig
from impl.storage.disk import Disk, FileSlice, SyncHandle
from impl.storage.errors import CorruptBatch, OffsetOutOfRange
from impl.storage.leader_epoch import LeaderEpochCache
from impl.storage.log_config import LogConfig, TopicLogConfigs
from impl.storage.names import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIMEINDEX_SUFFIX,
    DirKind,
    TopicPartition,
    dir_name,
    parse_segment_name,
    segment_index_name,
    segment_log_name,
    segment_timeindex_name,
)

_LOG = logging.getLogger(__name__)
#: How many times the bytes of any log of the process changed (an append, a truncation, a
#: deletion of segments, a cleaner's swap, a mover's copy, a log loaded): while it stays the
#: same, the storage manager's per-dir byte sums for placing new partitions stay true
#: (:meth:`~impl.storage.manager.LogManager._least_loaded`). A new, empty segment changes no
#: bytes.
_BYTE_CHANGES: Final = [0]


def byte_changes() -> int:
    """The count of :data:`_BYTE_CHANGES`."""
    return _BYTE_CHANGES[0]


def bytes_changed() -> None:
    """The bytes of some log changed (see :data:`_BYTE_CHANGES`)."""
    _BYTE_CHANGES[0] += 1
_INDEX_ENTRY = struct.Struct(">ii")
#: Index entries hold int32 offsets relative to the segment base and int32 positions: a segment
#: rolls before either would overflow (Kafka's ``LogSegment.canConvertToRelativeOffset``).
MAX_RELATIVE = (1 << 31) - 1
_PEEK = struct.Struct(">qi")  # baseOffset, batchLength
_SCAN_BLOCK_BYTES = 1 << 20
_HEADER_TAIL = struct.Struct(">i")  # lastOffsetDelta at byte 23
_MAX_TS = struct.Struct(">q")  # maxTimestamp at byte 35
_TIME_ENTRY = struct.Struct(">qi")  # timestamp, offset relative to the segment base
#: a batch's bytes in pieces, written one after the other (:meth:`Log.append`)
Pieces = tuple[bytes | bytearray | memoryview, ...]
#: batch headers a read looks at, from the index entry below its byte limit, to end on a whole
#: batch (past them it ends where the limit cuts, as Kafka always does)
_BOUNDARY_PEEKS = 8


@dataclass
class Segment:
    """In-memory state of one segment (the files are the truth; this is derived on load)."""

    base_offset: int
    log_path: str
    index_path: str
    size: int = 0
    next_offset: int = 0
    #: ``(absolute offset, position)`` of batch starts, sparse, rising
    index: list[tuple[int, int]] = field(default_factory=list)
    bytes_since_index_entry: int = 0
    created_ms: int = 0
    #: newest record timestamp; ``None`` until computed (lazily after a load)
    max_timestamp: int | None = None
    #: bytes of the segment known to be fsynced
    durable_size: int = 0
    #: ``(timestamp bound, batch start offset)``: records below the offset are stamped at most
    #: the bound; both rise (see the module docstring)
    time_index: list[tuple[int, int]] = field(default_factory=list)

    @property
    def timeindex_path(self) -> str:
        """The ``.timeindex`` file next to the segment's ``.log``."""
        return self.log_path[: -len(LOG_SUFFIX)] + TIMEINDEX_SUFFIX

    def time_lookup(self, timestamp_ms: int) -> int:
        """The batch start offset after the last time-index entry stamped below
        ``timestamp_ms``: every record before it is older than ``timestamp_ms``."""
        low, high = 0, len(self.time_index)
        while low < high:
            mid = (low + high) // 2
            if self.time_index[mid][0] < timestamp_ms:
                low = mid + 1
            else:
                high = mid
        return self.time_index[low - 1][1] if low else self.base_offset

    def time_entry_due(self) -> tuple[int, int] | None:
        """The entry to add at the next batch start, if the bound rose since the last one."""
        bound = -1 if self.max_timestamp is None else self.max_timestamp
        if self.time_index and self.time_index[-1][0] >= bound:
            return None
        return bound, self.next_offset

    def lookup(self, offset: int) -> tuple[int, int]:
        """The last index entry at or before ``offset`` (or the segment start)."""
        low, high = 0, len(self.index)
        while low < high:
            mid = (low + high) // 2
            if self.index[mid][0] <= offset:
                low = mid + 1
            else:
                high = mid
        if low == 0:
            return self.base_offset, 0
        return self.index[low - 1]


@dataclass(frozen=True, slots=True)
class BatchPosition:
    """Where a batch sits: its byte position, base and next offsets, size, max timestamp."""

    position: int
    base_offset: int
    next_offset: int
    size: int
    max_timestamp: int

    def __init__(self, position: int, base_offset: int, next_offset: int, size: int,
                 max_timestamp: int) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "position", position)
        object.__setattr__(self, "base_offset", base_offset)
        object.__setattr__(self, "next_offset", next_offset)
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "max_timestamp", max_timestamp)


@dataclass(frozen=True, slots=True)
class StorageEnv:
    """What every log shares: the disk port, the settings and the clock."""

    disk: Disk
    config: StorageConfig
    clock: Clock
    #: per-topic effective configs (``segment.*``, ``retention.*``, ``cleanup.policy`` ...)
    log_configs: TopicLogConfigs | None = None


def default_log_config(config: StorageConfig) -> LogConfig:
    """The broker-wide :class:`LogConfig` the storage settings describe."""
    return LogConfig(
        segment_bytes=config.segment_bytes,
        segment_ms=config.roll_ms,
        retention_ms=config.retention_ms,
        retention_bytes=config.retention_bytes,
        max_message_bytes=config.message_max_bytes,
    )


class FlushSync:
    """A flush taken apart (:meth:`Log.start_flush`): the fsyncs of the segments that had
    unsynced bytes, which :meth:`run` may do in a worker thread while the log takes appends,
    and what :meth:`Log.finish_flush` may then claim: each segment durable up to the size it
    had when the flush started, and the recovery point at the LEO it had then.

    The claim is dropped if the log was truncated meanwhile (:attr:`Log.truncations` moved):
    the bytes below those sizes may since have been rewritten; the next flush covers them.
    """

    __slots__ = ("_handles", "done", "error", "log_end_offset", "sizes", "tp", "truncations")

    def __init__(self, tp: TopicPartition, handles: list[SyncHandle],
                 sizes: list[tuple[Segment, int]], log_end_offset: int,
                 truncations: int) -> None:
        #: the partition whose segments these are
        self.tp = tp
        self._handles = handles
        self.sizes = sizes
        self.log_end_offset = log_end_offset
        self.truncations = truncations
        #: :meth:`run` has been called
        self.done = False
        #: the first ``OSError`` an fsync raised
        self.error: OSError | None = None

    def run(self) -> None:
        """Fsync every file (from any one thread; once); an ``OSError`` is kept in :attr:`error`
        for the caller's thread to act on."""
        if self.done:
            return
        self.done = True
        try:
            for handle in self._handles:
                handle.sync()
        except OSError as error:
            self.error = error

    def close(self) -> None:
        """Release the handles (on the thread that opened them); idempotent."""
        for handle in self._handles:
            handle.close()


class Log:
    """A partition's segments in one dir (``topic-partition`` or ``topic-partition.move``)."""

    def __init__(self, env: StorageEnv, log_dir: str, tp: TopicPartition, kind: DirKind) -> None:
        self.env = env
        self.disk = env.disk
        self.config = env.config
        self.clock = env.clock
        self.log_dir = log_dir
        self.tp = tp
        self.kind = kind
        self.segments: list[Segment] = []
        self.epochs = LeaderEpochCache()
        self.high_watermark = 0
        self.recovery_point = 0
        #: truncations so far (a flush started before one claims nothing, :class:`FlushSync`)
        self.truncations = 0

    # --- paths and sizes ------------------------------------------------------------------

    @property
    def path(self) -> str:
        """The partition dir."""
        return f"{self.log_dir}/{dir_name(self.tp, self.kind)}"

    @property
    def log_config(self) -> LogConfig:
        """This topic's effective config, read afresh so a change applies at once."""
        configs = self.env.log_configs
        if configs is None:
            return default_log_config(self.config)
        return configs.of(self.tp.topic)

    @property
    def log_start_offset(self) -> int:
        """Base offset of the oldest segment."""
        return self.segments[0].base_offset if self.segments else 0

    @property
    def log_end_offset(self) -> int:
        """The next offset to be written (LEO)."""
        return self.segments[-1].next_offset if self.segments else 0

    @property
    def size_in_bytes(self) -> int:
        """Bytes in all segments."""
        return sum(segment.size for segment in self.segments)

    @property
    def active(self) -> Segment:
        """The segment appends go to."""
        return self.segments[-1]

    # --- creation and loading -------------------------------------------------------------

    @classmethod
    def create(
        cls,
        env: StorageEnv,
        log_dir: str,
        tp: TopicPartition,
        kind: DirKind,
        *,
        first_segment_base: int | None = 0,
    ) -> Log:
        """Make the dir (durably) and, unless ``first_segment_base`` is None, an empty segment."""
        disk = env.disk
        log = cls(env, log_dir, tp, kind)
        disk.mkdir(log.path)
        if first_segment_base is not None:
            log._new_segment(first_segment_base)
            disk.fsync_dir(log.path)
        disk.fsync_dir(log_dir)
        return log

    @classmethod
    def load(
        cls,
        env: StorageEnv,
        log_dir: str,
        tp: TopicPartition,
        kind: DirKind,
        *,
        recovery_point: int = 0,
        high_watermark: int = 0,
    ) -> Log:
        """Open an existing dir, recovering segments from the recovery point on.

        Segments wholly below ``recovery_point`` were fsynced: their index is trusted if it is
        consistent (a segment is wholly below when the following one starts at or below the
        point and its own batches end there too). From the segment holding the recovery point
        on, every batch is re-read and CRC-checked; the first bad or torn batch is cut off with
        everything after it, and later segments are deleted (DESIGN.md "Storage format").
        """
        disk = env.disk
        log = cls(env, log_dir, tp, kind)
        names = disk.list_dir(log.path)
        if any(name.endswith(lc.CLEANER_FILE_SUFFIXES) for name in names):
            log._recover_cleaner_files(names)
            names = disk.list_dir(log.path)
        bases = sorted(
            parsed[0]
            for name in names
            if (parsed := parse_segment_name(name)) is not None and parsed[1] == LOG_SUFFIX
        )
        for name in names:
            parsed = parse_segment_name(name)
            if (
                parsed is not None
                and parsed[1] in (INDEX_SUFFIX, TIMEINDEX_SUFFIX)
                and parsed[0] not in bases
            ):
                disk.remove(f"{log.path}/{name}")
        recovering = False
        for position, base in enumerate(bases):
            following = bases[position + 1] if position + 1 < len(bases) else None
            trusted = (
                not recovering and following is not None and following <= recovery_point
            )
            expected = log.segments[-1].next_offset if log.segments else None
            segment = log._load_segment(base, trusted=trusted, expected_offset=expected)
            if segment is not None and trusted and segment.next_offset > recovery_point:
                # Not wholly below the recovery point after all: the following segment's file
                # is one whose unlink a crash undid (a truncation deleted it and this segment
                # took the offsets past its base, unflushed). Its batches from the recovery
                # point on are checked like any other's; the stale file overlaps and goes.
                trusted = False
                segment = log._load_segment(base, trusted=False, expected_offset=expected)
            if segment is None:  # base offset overlaps the previous segment: corrupt
                log._delete_segment_files(base)
                for later in bases[position + 1 :]:
                    log._delete_segment_files(later)
                break
            log.segments.append(segment)
            if not trusted:
                recovering = True
            file_size = disk.size(segment.log_path)
            if segment.size < file_size:
                # torn or corrupt tail: cut here and drop every later segment
                _LOG.warning(
                    "%s: recovery cut segment %s at byte %d (offset %d): %d bytes removed, "
                    "%d later segment(s) deleted",
                    log.path, segment_log_name(base), segment.size, segment.next_offset,
                    file_size - segment.size, len(bases) - position - 1,
                )
                disk.truncate(segment.log_path, segment.size)
                disk.fsync(segment.log_path)
                for later in bases[position + 1 :]:
                    log._delete_segment_files(later)
                break
        if not log.segments:
            log._new_segment(0)
        text = read_checkpoint(disk, log.path, LEADER_EPOCH_CHECKPOINT)
        if text is not None:
            try:
                log.epochs = LeaderEpochCache.from_text(text)
            except (ValueError, AssertionError):
                log.epochs = LeaderEpochCache()
        if log.epochs.truncate_from_end(log.log_end_offset):
            # persisted, as Kafka's LeaderEpochFileCache.truncateFromEnd flushes: an entry of
            # records recovery cut (or of an epoch led from the LEO without writing) must not
            # come back at the next load once the log has grown past its start again
            log.write_epoch_checkpoint()
        log.recovery_point = min(recovery_point, log.log_end_offset)
        log.high_watermark = max(log.log_start_offset, min(high_watermark, log.log_end_offset))
        for segment in log.segments:
            segment.durable_size = segment.size
        bytes_changed()  # (a loaded log's bytes are new to the placement sums: once per load)
        return log

    def _recover_cleaner_files(self, names: list[str]) -> None:
        """Finish or undo a segment replace the cleaner was making (``lc.recovery_plan``)."""
        swaps: dict[int, int] = {}
        for name in names:
            if name.endswith(".log" + lc.SWAP_SUFFIX):
                path = f"{self.path}/{name}"
                data = self.disk.read(path, 0, self.disk.size(path))
                prefix = rb.valid_prefix(data)
                base = int(name[:20])
                swaps[base] = prefix.headers[-1].next_offset if prefix.headers else base
        plan = lc.recovery_plan(names, swaps)
        for name in plan.remove:
            self.disk.remove(f"{self.path}/{name}")
        for base in plan.replaced:
            self._delete_segment_files(base)
        for swap, final in plan.complete:
            base = int(final[:20])
            for stale in (segment_index_name(base), segment_timeindex_name(base)):
                if self.disk.exists(f"{self.path}/{stale}"):
                    self.disk.remove(f"{self.path}/{stale}")
            self.disk.rename(f"{self.path}/{swap}", f"{self.path}/{final}")
        self.disk.fsync_dir(self.path)

    def _load_segment(
        self, base: int, *, trusted: bool, expected_offset: int | None
    ) -> Segment | None:
        log_path = f"{self.path}/{segment_log_name(base)}"
        index_path = f"{self.path}/{segment_index_name(base)}"
        if expected_offset is not None and base < expected_offset:
            return None
        segment = Segment(base, log_path, index_path, created_ms=self.clock.wall_ms())
        segment.next_offset = base
        size = self.disk.size(log_path)
        if trusted:
            index = self._read_index(segment, size)
            if index is not None:
                segment.index = index
                start_offset, start = index[-1] if index else (base, 0)
                segment.next_offset = start_offset
                segment.size = start
                self._scan(segment, start, size, check_crc=False, build_index=False)
                if segment.size == size:
                    segment.max_timestamp = None  # only the tail was scanned: compute lazily
                    segment.time_index = self._read_time_index(segment)
                    return segment
        segment.index = []
        segment.time_index = []
        segment.max_timestamp = None
        segment.size = 0
        segment.next_offset = base
        self._scan(segment, 0, size, check_crc=not trusted, build_index=True)
        self._rewrite_index(segment)
        return segment

    def _read_time_index(self, segment: Segment) -> list[tuple[int, int]]:
        """The ``.timeindex`` entries if they are consistent with the segment, else none."""
        if not self.disk.exists(segment.timeindex_path):
            return []
        raw = self.disk.read(segment.timeindex_path, 0, self.disk.size(segment.timeindex_path))
        raw = raw[: len(raw) - len(raw) % _TIME_ENTRY.size]
        entries: list[tuple[int, int]] = []
        starts = {offset for offset, _ in segment.index}
        for timestamp, relative in _TIME_ENTRY.iter_unpack(raw):
            offset = segment.base_offset + relative
            if offset not in starts or (
                entries and (timestamp <= entries[-1][0] or offset <= entries[-1][1])
            ):
                return []
            entries.append((timestamp, offset))
        return entries

    def _read_index(self, segment: Segment, log_size: int) -> list[tuple[int, int]] | None:
        if not self.disk.exists(segment.index_path):
            return None
        raw = self.disk.read(segment.index_path, 0, self.disk.size(segment.index_path))
        raw = raw[: len(raw) - len(raw) % _INDEX_ENTRY.size]
        entries: list[tuple[int, int]] = []
        last_offset, last_position = segment.base_offset - 1, -1
        for relative, position in _INDEX_ENTRY.iter_unpack(raw):
            offset = segment.base_offset + relative
            if offset <= last_offset or position <= last_position or position >= log_size:
                return None
            entries.append((offset, position))
            last_offset, last_position = offset, position
        return entries

    def _scan(
        self, segment: Segment, start: int, end: int, *, check_crc: bool, build_index: bool
    ) -> None:
        """Walk batches from ``start``, advancing ``segment``; stop at the first bad or torn one."""
        buffer = b""
        buffer_start = start
        position = start
        while position < end:
            relative = position - buffer_start
            if len(buffer) - relative < _PEEK.size:
                buffer = self.disk.read(segment.log_path, position, _SCAN_BLOCK_BYTES)
                buffer_start, relative = position, 0
                if len(buffer) < _PEEK.size:
                    return
            batch_length = _PEEK.unpack_from(buffer, relative)[1]
            whole = batch_length + rb.LOG_OVERHEAD
            if batch_length < rb.HEADER_SIZE - rb.LOG_OVERHEAD or position + whole > end:
                return
            if len(buffer) - relative < whole:
                buffer = self.disk.read(
                    segment.log_path, position, max(_SCAN_BLOCK_BYTES, whole)
                )
                buffer_start, relative = position, 0
                if len(buffer) < whole:
                    return
            if not self._accept(segment, buffer, relative, position, check_crc, build_index):
                return
            position += whole

    def _accept(  # noqa: PLR0917 (hot loop helper)
        self,
        segment: Segment,
        buffer: bytes,
        offset_in_buffer: int,
        file_position: int,
        check_crc: bool,
        build_index: bool,
    ) -> bool:
        try:
            header = rb.parse_header(buffer, offset_in_buffer)
            if check_crc:
                rb.check_crc(buffer, header)
        except CorruptBatch:
            return False
        if header.base_offset < segment.next_offset or header.last_offset_delta < 0:
            return False
        if file_position != segment.size:
            return False
        if (
            header.last_offset - segment.base_offset > MAX_RELATIVE
            or file_position + header.size_in_bytes > MAX_RELATIVE
        ):
            return False  # unindexable: written before segments rolled ahead of an overflow
        if build_index and segment.bytes_since_index_entry >= self.config.index_interval_bytes:
            segment.index.append((header.base_offset, file_position))
            segment.bytes_since_index_entry = 0
            due = segment.time_entry_due()
            if due is not None:
                segment.time_index.append((due[0], header.base_offset))
        segment.size = file_position + header.size_in_bytes
        segment.next_offset = header.next_offset
        segment.bytes_since_index_entry += header.size_in_bytes
        segment.max_timestamp = max(segment.max_timestamp or -1, header.max_timestamp)
        return True

    def _rewrite_index(self, segment: Segment) -> None:
        self.disk.create(segment.index_path)
        if segment.index:
            self.disk.append(
                segment.index_path,
                b"".join(
                    _INDEX_ENTRY.pack(offset - segment.base_offset, position)
                    for offset, position in segment.index
                ),
            )
        self.disk.create(segment.timeindex_path)
        if segment.time_index:
            self.disk.append(
                segment.timeindex_path,
                b"".join(
                    _TIME_ENTRY.pack(timestamp, offset - segment.base_offset)
                    for timestamp, offset in segment.time_index
                ),
            )

    def _new_segment(self, base_offset: int) -> Segment:
        segment = Segment(
            base_offset,
            f"{self.path}/{segment_log_name(base_offset)}",
            f"{self.path}/{segment_index_name(base_offset)}",
            next_offset=base_offset,
            created_ms=self.clock.wall_ms(),
            max_timestamp=-1,
        )
        self.disk.create(segment.log_path)
        self.disk.create(segment.index_path)
        self.disk.create(segment.timeindex_path)
        self.segments.append(segment)
        return segment

    def _delete_segment_files(self, base_offset: int) -> None:
        for name in (
            segment_log_name(base_offset),
            segment_index_name(base_offset),
            segment_timeindex_name(base_offset),
        ):
            path = f"{self.path}/{name}"
            if self.disk.exists(path):
                self.disk.remove(path)

    # --- appends ----------------------------------------------------------------------------

    def maybe_roll(
        self, incoming_bytes: int, last_offset: int | None = None, first_offset: int | None = None
    ) -> None:
        """Roll to a new segment if the active one is full or old (and non-empty), or if
        ``last_offset`` (the incoming batches' last) would not fit an index entry's int32 offset
        relative to the segment base: then the new segment starts at ``first_offset`` (the
        incoming first offset, which a follower's batches may put past the LEO), as Kafka rolls
        at the appended batch's offset."""
        active = self.active
        overflow = last_offset is not None and last_offset - active.base_offset > MAX_RELATIVE
        if overflow:
            base = self.log_end_offset if first_offset is None else first_offset
            if active.size == 0:
                # an empty active segment is replaced by one at the batch's offset
                self.segments.pop()
                self._delete_segment_files(active.base_offset)
                self._new_segment(base)
                self.disk.fsync_dir(self.path)
            else:
                self.roll(base)
            return
        if self._full_or_old(incoming_bytes):
            self.roll()

    def _full_or_old(self, incoming_bytes: int) -> bool:
        """Whether the active segment, non-empty, is too full for ``incoming_bytes`` more or
        older than ``segment.ms``."""
        active = self.active
        if active.size == 0:
            return False
        log_config = self.log_config
        too_big = active.size + incoming_bytes > min(log_config.segment_bytes, MAX_RELATIVE)
        too_old = self.clock.wall_ms() - active.created_ms >= log_config.segment_ms
        return too_big or too_old

    def roll_syncs(self, incoming_bytes: int, last_offset: int | None = None) -> bool:
        """Whether an append of ``incoming_bytes`` ending at ``last_offset`` would roll a segment
        that has unsynced bytes (:meth:`roll` fsyncs them first), so that a runtime with worker
        threads can fsync it off its event loop beforehand (:meth:`start_flush`). Only a hint:
        a roll it did not foresee still fsyncs inline."""
        active = self.active
        if active.durable_size == active.size:
            return False
        if last_offset is not None and last_offset - active.base_offset > MAX_RELATIVE:
            return True
        return self._full_or_old(incoming_bytes)

    def roll(self, base_offset: int | None = None) -> Segment:
        """Start a new segment at the LEO (or at ``base_offset``, at or past it); the old one is
        fsynced first (it will never change), its log file unless it is durable already (a
        runtime with worker threads fsyncs it there before the append that rolls,
        :meth:`roll_syncs`), its index always (small, and clean after such a sync).
        Before the new segment takes a byte: a crash must not keep later bytes and lose the
        old segment's tail without a torn batch to show it, a gap recovery could not see."""
        base = self.log_end_offset if base_offset is None else base_offset
        assert base >= self.log_end_offset, (base, self.log_end_offset)
        old = self.active
        if old.durable_size != old.size:
            self.disk.fsync(old.log_path)
            old.durable_size = old.size
        # always: a truncation rewrites the index without a sync (the active segment's index is
        # rebuilt at recovery, a closed one below the recovery point is trusted)
        self.disk.fsync(old.index_path)
        segment = self._new_segment(base)
        self.disk.fsync_dir(self.path)
        self.recovery_point = max(self.recovery_point, old.next_offset)
        return segment

    def append(self, records: bytes | bytearray | Pieces, headers: list[rb.BatchHeader]) -> None:
        """Append whole, validated batches whose offsets are already assigned (``records``: their
        bytes, or pieces of them written one after the other, as the leader's stamped header
        and the rest of its batch).

        Everything that can be refused is decided before a byte is written; if writing the index
        fails after the batches were written, the segment file is cut back to its previous size,
        so a failed append leaves the log byte-identical (or the error takes the dir offline).
        """
        assert headers, "append of no batch"
        assert headers[0].base_offset >= self.log_end_offset, (headers[0], self.log_end_offset)
        # A follower's batches may span more offsets than one segment's int32 relative offsets
        # hold (offset gaps left by compaction, or a leader's lie): each run that fits is
        # appended on its own, rolling at its first offset.
        split = next((index for index, header in enumerate(headers)
                      if header.last_offset - headers[0].base_offset > MAX_RELATIVE), None)
        if split:
            assert not isinstance(records, tuple), "pieces hold one batch"
            cut = headers[split].position
            self.append(records[:cut], headers[:split])
            rest = [dataclasses.replace(header, position=header.position - cut)
                    for header in headers[split:]]
            self.append(records[cut:], rest)
            return
        size = (sum(len(piece) for piece in records) if isinstance(records, tuple)
                else len(records))
        self.maybe_roll(size, headers[-1].last_offset, headers[0].base_offset)
        segment = self.active
        start = segment.size
        assert headers[-1].last_offset - segment.base_offset <= MAX_RELATIVE, (headers[-1], segment)
        assert start + size <= MAX_RELATIVE or start == 0, (start, size)
        new_entries: list[tuple[int, int]] = []
        time_entries: list[tuple[int, int]] = []
        since_entry = segment.bytes_since_index_entry
        max_timestamp = segment.max_timestamp
        for header in headers:
            if since_entry >= self.config.index_interval_bytes:
                new_entries.append((header.base_offset, start + header.position))
                since_entry = 0
                if max_timestamp is not None:
                    last = time_entries[-1][0] if time_entries else (
                        segment.time_index[-1][0] if segment.time_index else -1
                    )
                    if max_timestamp > last:
                        time_entries.append((max_timestamp, header.base_offset))
            since_entry += header.size_in_bytes
            if max_timestamp is not None:
                max_timestamp = max(max_timestamp, header.max_timestamp)
        index_bytes = b"".join(
            _INDEX_ENTRY.pack(o - segment.base_offset, p) for o, p in new_entries
        )
        time_bytes = b"".join(
            _TIME_ENTRY.pack(t, o - segment.base_offset) for t, o in time_entries
        )
        position = (self.disk.append_pieces(segment.log_path, records)
                    if isinstance(records, tuple) else self.disk.append(segment.log_path, records))
        try:
            if position != start:
                raise AssertionError(
                    f"{segment.log_path}: appended at byte {position}, expected {start}"
                )
            if index_bytes:
                self.disk.append(segment.index_path, index_bytes)
            if time_bytes:
                self.disk.append(segment.timeindex_path, time_bytes)
        except BaseException:
            self.disk.truncate(segment.log_path, start)
            if index_bytes:
                self.disk.truncate(segment.index_path, len(segment.index) * _INDEX_ENTRY.size)
            if time_bytes:
                self.disk.truncate(
                    segment.timeindex_path, len(segment.time_index) * _TIME_ENTRY.size
                )
            raise
        segment.index.extend(new_entries)
        segment.time_index.extend(time_entries)
        segment.bytes_since_index_entry = since_entry
        segment.max_timestamp = max_timestamp
        bytes_changed()
        segment.size += size
        segment.next_offset = headers[-1].next_offset

    # --- reads ------------------------------------------------------------------------------

    def _segment_for(self, offset: int) -> int:
        low, high = 0, len(self.segments)
        while low < high:
            mid = (low + high) // 2
            if self.segments[mid].base_offset <= offset:
                low = mid + 1
            else:
                high = mid
        return max(low - 1, 0)

    def _peek(self, segment: Segment, position: int) -> BatchPosition:
        raw = self.disk.read(segment.log_path, position, rb.HEADER_SIZE)
        if len(raw) < rb.HEADER_SIZE:
            raise CorruptBatch(f"{segment.log_path}: short header at {position}")
        base_offset, batch_length = _PEEK.unpack_from(raw, 0)
        last_delta = _HEADER_TAIL.unpack_from(raw, 23)[0]
        max_timestamp = _MAX_TS.unpack_from(raw, rb.MAX_TIMESTAMP_OFFSET)[0]
        return BatchPosition(
            position,
            base_offset,
            base_offset + last_delta + 1,
            batch_length + rb.LOG_OVERHEAD,
            max_timestamp,
        )

    def position_of(self, segment: Segment, offset: int) -> BatchPosition | None:
        """The first batch in ``segment`` whose last offset is at least ``offset``."""
        _, position = segment.lookup(offset)
        while position < segment.size:
            batch = self._peek(segment, position)
            if batch.next_offset > offset:
                return batch
            position += batch.size
        return None

    def read(self, fetch_offset: int, max_bytes: int, max_offset: int | None) -> list[FileSlice]:
        """Slices from the batch holding ``fetch_offset``, up to ``max_bytes`` (at least one
        whole batch, KIP-74), stopping before batches at or past ``max_offset``.

        The slice ends on a batch boundary when one is found within a few headers of the
        offset index entry below the byte limit (:meth:`_boundary_below`); Kafka ends it where
        the limit falls, and a reader drops the cut batch's bytes (both are valid answers: the
        protocol lets the last batch be partial).

        Raises:
            OffsetOutOfRange: ``fetch_offset`` below the log start offset or past the LEO.
        """
        if fetch_offset < self.log_start_offset or fetch_offset > self.log_end_offset:
            raise OffsetOutOfRange(
                f"{self.tp}: offset {fetch_offset} outside "
                f"[{self.log_start_offset}, {self.log_end_offset}]"
            )
        limit = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        if fetch_offset >= limit:
            return []
        index = self._segment_for(fetch_offset)
        while index < len(self.segments):
            segment = self.segments[index]
            start = self.position_of(segment, fetch_offset)
            if start is not None:
                break
            index += 1
        else:
            return []
        if start.base_offset >= limit:
            return []
        end = segment.size
        if limit < segment.next_offset:
            # the batch holding ``limit`` is excluded, as Kafka's read(maxOffset) does
            stop = self.position_of(segment, limit)
            end = segment.size if stop is None else stop.position
            if end <= start.position:
                return []
        size = min(end - start.position, max(max_bytes, start.size))
        if size <= 0:
            return []
        if start.size < size < end - start.position:
            size = self._boundary_below(segment, start, start.position + size) - start.position
        return [self.disk.open_slice(segment.log_path, start.position, size)]

    def _boundary_below(self, segment: Segment, first: BatchPosition, limit: int) -> int:
        """The end of the last whole batch at or below byte ``limit`` of ``segment`` (after
        ``first``, which ends below it), or ``limit`` itself when more than
        :data:`_BOUNDARY_PEEKS` headers lie between the index entry below it and it.

        A follower fetching 4 MB behind a producer of 1 MB batches was sent a cut batch in 96 %
        of its fetches, about 4.6 % of the bytes, which it received, copied out of the answer
        and dropped, and copied the whole batches again to drop them.
        """
        position = first.position + first.size
        index = segment.index
        low, high = 0, len(index)
        while low < high:  # the last entry (a batch start) at or below ``limit``
            mid = (low + high) // 2
            if index[mid][1] <= limit:
                low = mid + 1
            else:
                high = mid
        if low and index[low - 1][1] > position:
            position = index[low - 1][1]
        for _ in range(_BOUNDARY_PEEKS):
            size = self._peek(segment, position).size
            if position + size > limit:
                return position
            position += size
        return limit

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """The first record stamped at or after ``timestamp_ms``: ``(offset, its timestamp)``.

        Segments whose newest record is older are skipped; inside a segment the time index
        gives the batch to start from, headers skip batches that are wholly older, and the
        first batch that is not has its records decoded (Kafka's
        ``LogSegment.findOffsetByTimestamp``). A batch may hold no such record even though its
        max timestamp qualifies (a cleaned batch keeps its max): the scan then goes on.
        """
        for segment in self.segments:
            if self._segment_max_timestamp(segment) < timestamp_ms:
                continue
            _, position = segment.lookup(segment.time_lookup(timestamp_ms))
            while position < segment.size:
                batch = self._peek(segment, position)
                if batch.max_timestamp >= timestamp_ms:
                    raw = self.disk.read(segment.log_path, position, batch.size)
                    found = rec.first_record_at_or_after(raw, timestamp_ms)
                    if found is not None:
                        return found
                position += batch.size
        return None

    def max_timestamp_record(self, start_offset: int) -> tuple[int, int] | None:
        """The first record at or after ``start_offset`` stamped with the largest timestamp
        from there on: ``(offset, timestamp)``, ``None`` if no record there has one
        (ListOffsets' MAX_TIMESTAMP, KIP-734: Kafka's segment ``offsetOfMaxTimestampSoFar``,
        the record's own offset since KAFKA-16310).

        Segments wholly at or after ``start_offset`` answer from their max timestamp (kept
        with the segment); the one holding ``start_offset`` from the headers of its batches
        from there (the records of a batch holding it, whose header may name a record below
        it); then the first batch reaching the largest has its records decoded. A batch
        whose records no longer reach its max timestamp (a cleaned batch keeps its max) is
        answered with its last offset, as Kafka did before KAFKA-16310.
        """
        best, where = -1, None
        for segment in self.segments:
            if segment.next_offset <= start_offset:
                continue
            if segment.base_offset >= start_offset:
                newest = self._segment_max_timestamp(segment)
            else:
                newest = -1
                position = segment.lookup(start_offset)[1]
                while position < segment.size:
                    batch = self._peek(segment, position)
                    if batch.base_offset >= start_offset:
                        newest = max(newest, batch.max_timestamp)
                    elif batch.next_offset > start_offset:  # (its max may be a deleted record)
                        raw = self.disk.read(segment.log_path, position, batch.size)
                        newest = max([newest, *(record.timestamp
                                                for record in rec.iter_records(raw)
                                                if record.offset >= start_offset)])
                    position += batch.size
            if newest > best:
                best, where = newest, segment
        if where is None:
            return None
        # (from the time index's entry below the largest, as offset_for_timestamp)
        position = where.lookup(max(start_offset, where.time_lookup(best)))[1]
        while position < where.size:
            batch = self._peek(where, position)
            if batch.next_offset > start_offset and batch.max_timestamp >= best:
                raw = self.disk.read(where.log_path, position, batch.size)
                for record in rec.iter_records(raw):
                    if record.offset >= start_offset and record.timestamp >= best:
                        return record.offset, record.timestamp
                if batch.base_offset >= start_offset:
                    return batch.next_offset - 1, batch.max_timestamp
            position += batch.size
        return None

    def _segment_max_timestamp(self, segment: Segment) -> int:
        if segment.max_timestamp is None:
            newest = -1
            position = 0
            while position < segment.size:
                batch = self._peek(segment, position)
                newest = max(newest, batch.max_timestamp)
                position += batch.size
            segment.max_timestamp = newest
        return segment.max_timestamp

    # --- truncation, retention, flush -------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch whose last offset is at least ``offset``; returns whether any was.

        The LEO becomes ``offset`` or the base of the batch holding it (a batch is never split).
        Only segments whose base offset is above ``offset`` are deleted (Kafka's
        ``baseOffset > targetOffset``): a segment based at ``offset`` is emptied, so the LEO
        stays ``offset`` even when the segment before it ends lower (a gap in the offsets,
        such as a crash leaves when it undoes a truncation's unlink of a later segment).
        """
        if offset >= self.log_end_offset:
            return False
        if offset <= self.log_start_offset:
            self.truncate_fully(self.log_start_offset if offset < self.log_start_offset else offset)
            return True
        bytes_changed()
        while len(self.segments) > 1 and self.segments[-1].base_offset > offset:
            dropped = self.segments.pop()
            self._delete_segment_files(dropped.base_offset)
        segment = self.active
        cut = self.position_of(segment, offset)
        if cut is not None:
            segment.size = cut.position
            segment.next_offset = cut.base_offset
            segment.index = [e for e in segment.index if e[1] < cut.position]
            segment.time_index = [e for e in segment.time_index if e[1] < cut.base_offset]
            self.disk.truncate(segment.log_path, cut.position)
            self._rewrite_index(segment)
            segment.bytes_since_index_entry = self.config.index_interval_bytes
            segment.durable_size = min(segment.durable_size, segment.size)
            segment.max_timestamp = None
        self.disk.fsync(segment.log_path)
        segment.durable_size = segment.size
        self._after_truncation()
        return True

    def truncate_fully(self, start_offset: int) -> None:
        """Drop every segment and start empty at ``start_offset``."""
        bytes_changed()
        for segment in self.segments:
            self._delete_segment_files(segment.base_offset)
        self.segments = []
        self._new_segment(start_offset)
        self.disk.fsync_dir(self.path)
        self._after_truncation()

    def _after_truncation(self) -> None:
        self.truncations += 1
        leo = self.log_end_offset
        if self.epochs.truncate_from_end(leo):
            self.write_epoch_checkpoint()
        self.high_watermark = max(self.log_start_offset, min(self.high_watermark, leo))
        self.recovery_point = min(self.recovery_point, leo)

    def delete_segments_below(self, offset: int) -> int:
        """Delete whole segments that end at or below ``offset`` (never the active one)."""
        deleted = 0
        while len(self.segments) > 1 and self.segments[0].next_offset <= offset:
            bytes_changed()
            segment = self.segments.pop(0)
            self._delete_segment_files(segment.base_offset)
            deleted += 1
        if deleted and self.epochs.truncate_from_start(self.log_start_offset):
            self.write_epoch_checkpoint()
        return deleted

    def retention_target(self, now_ms: int) -> int:
        """The log start offset retention would move to (``log.retention.*``); only segments
        wholly below the HW are eligible, the active segment never."""
        target = self.log_start_offset
        total = self.size_in_bytes
        log_config = self.log_config
        if not log_config.delete:
            return target
        for segment in self.segments[:-1]:
            if segment.next_offset > self.high_watermark:
                break
            expired = (
                log_config.retention_ms >= 0
                and self._segment_max_timestamp(segment) < now_ms - log_config.retention_ms
            )
            oversize = (
                log_config.retention_bytes >= 0
                and total - segment.size >= log_config.retention_bytes
            )
            if not (expired or oversize):
                break
            total -= segment.size
            target = segment.next_offset
        return target

    @property
    def unflushed(self) -> bool:
        """Whether :meth:`flush` has bytes to fsync."""
        return any(segment.durable_size != segment.size for segment in self.segments)

    def flush(self) -> None:
        """Fsync everything written; the recovery point becomes the LEO."""
        for segment in self.segments:
            if segment.durable_size != segment.size:
                self.disk.fsync(segment.log_path)
                self.disk.fsync(segment.index_path)
                segment.durable_size = segment.size
        self.recovery_point = self.log_end_offset

    def start_flush(self) -> FlushSync:
        """:meth:`flush` taken apart for a caller that fsyncs elsewhere (a worker thread): the
        sync handles of every segment with unsynced bytes, opened here; run the result's
        :meth:`FlushSync.run`, then :meth:`finish_flush`, then close it."""
        pending = [segment for segment in self.segments if segment.durable_size != segment.size]
        handles: list[SyncHandle] = []
        try:
            for segment in pending:
                handles.append(self.disk.open_sync(segment.log_path))
                handles.append(self.disk.open_sync(segment.index_path))
        except BaseException:
            for handle in handles:
                handle.close()
            raise
        return FlushSync(self.tp, handles, [(segment, segment.size) for segment in pending],
                         self.log_end_offset, self.truncations)

    def finish_flush(self, sync: FlushSync) -> None:
        """Claim what ``sync`` made durable (it ran without error): nothing if the log was
        truncated since it started, else each segment up to its size then and the recovery
        point up to the LEO then (appends since stay unsynced)."""
        assert sync.done
        assert sync.error is None
        if sync.truncations != self.truncations:
            return
        for segment, size in sync.sizes:
            segment.durable_size = max(segment.durable_size, size)
        self.recovery_point = max(self.recovery_point, sync.log_end_offset)

    def renamed(self, kind: DirKind) -> None:
        """The dir was renamed to ``kind``'s name: follow it (segment paths change)."""
        self.kind = kind
        for segment in self.segments:
            segment.log_path = f"{self.path}/{segment_log_name(segment.base_offset)}"
            segment.index_path = f"{self.path}/{segment_index_name(segment.base_offset)}"

    def segment_with_base(self, base_offset: int) -> Segment | None:
        """The segment starting at ``base_offset``, if any."""
        if not self.segments:
            return None
        segment = self.segments[self._segment_for(base_offset)]
        return segment if segment.base_offset == base_offset else None

    def start_segment(self, base_offset: int) -> Segment:
        """Close the active segment (fsync) and start one at ``base_offset``: the LEO, or past it
        when the source segment being mirrored ends in a gap (the log cleaner dropped its last
        batches: offsets are never reused, so the next segment's base stays where it was)."""
        assert base_offset >= self.log_end_offset, (base_offset, self.log_end_offset)
        old = self.active
        self.disk.fsync(old.log_path)
        self.disk.fsync(old.index_path)
        old.durable_size = old.size
        segment = self._new_segment(base_offset)
        self.disk.fsync_dir(self.path)
        return segment

    def append_index_entries(self, segment: Segment, entries: list[tuple[int, int]]) -> None:
        """Add sparse index entries (copied from a source segment by a mover)."""
        if entries:
            segment.index.extend(entries)
            self.disk.append(
                segment.index_path,
                b"".join(_INDEX_ENTRY.pack(o - segment.base_offset, p) for o, p in entries),
            )

    # --- the log cleaner's segment replace ----------------------------------------------------

    def sealed_segments(self) -> list[Segment]:
        """Every segment but the active one (the only ones the cleaner may replace)."""
        return self.segments[:-1]

    def segment_bytes(self, segment: Segment) -> bytes:
        """The whole of a sealed segment's file."""
        return self.disk.read(segment.log_path, 0, segment.size)

    def write_cleaned(self, base_offset: int, data: bytes) -> str:
        """Write and fsync ``<base>.log.cleaned`` (step 1 of the replace); returns its path."""
        path = f"{self.path}/{segment_log_name(base_offset)}{lc.CLEANED_SUFFIX}"
        self.disk.create(path)
        if data:
            self.disk.append(path, data)
        self.disk.fsync(path)
        return path

    def discard_cleaned(self, path: str) -> None:
        """Remove a ``.cleaned`` file whose replace was aborted."""
        if self.disk.exists(path):
            self.disk.remove(path)

    def replace_segments(
        self, old: list[Segment], cleaned_path: str, headers: tuple[rb.BatchHeader, ...]
    ) -> Segment:
        """Install a cleaned segment in place of the consecutive sealed segments ``old``.

        Kafka's order, each step recoverable on start-up (:func:`lc.recovery_plan`): the
        durable ``.cleaned`` file is renamed ``.swap`` (from here it is the truth), the old
        segments' files are renamed ``.deleted``, the swap gets the final name, the dir is
        fsynced, and the ``.deleted`` files are removed. Offsets do not change: the new segment
        has the first old segment's base. Readers holding a slice of an old file keep reading it.
        """
        first = self.segments.index(old[0])
        assert self.segments[first : first + len(old)] == old, "the group is not consecutive"
        assert first + len(old) < len(self.segments), "COMPACTION_OFFSETS_STABLE: active segment"
        base = old[0].base_offset
        final = f"{self.path}/{segment_log_name(base)}"
        swap = final + lc.SWAP_SUFFIX
        self.disk.rename(cleaned_path, swap)
        self.disk.fsync_dir(self.path)
        deleted: list[str] = []
        for segment in old:
            for path in (segment.log_path, segment.index_path, segment.timeindex_path):
                if self.disk.exists(path):
                    self.disk.rename(path, path + lc.DELETED_SUFFIX)
                    deleted.append(path + lc.DELETED_SUFFIX)
        self.disk.rename(swap, final)
        self.disk.fsync_dir(self.path)
        segment = Segment(
            base,
            final,
            f"{self.path}/{segment_index_name(base)}",
            created_ms=old[-1].created_ms,
            max_timestamp=-1,
        )
        segment.next_offset = base
        for header in headers:
            if segment.bytes_since_index_entry >= self.config.index_interval_bytes:
                segment.index.append((header.base_offset, header.position))
                segment.bytes_since_index_entry = 0
                due = segment.time_entry_due()
                if due is not None:
                    segment.time_index.append((due[0], header.base_offset))
            segment.bytes_since_index_entry += header.size_in_bytes
            segment.max_timestamp = max(segment.max_timestamp or -1, header.max_timestamp)
            segment.next_offset = header.next_offset
            segment.size = header.position + header.size_in_bytes
        segment.durable_size = segment.size
        self._rewrite_index(segment)
        self.disk.fsync(segment.index_path)
        self.disk.fsync(segment.timeindex_path)
        bytes_changed()
        self.segments[first : first + len(old)] = [segment]
        for path in deleted:
            self.disk.remove(path)
        return segment

    def write_epoch_checkpoint(self) -> None:
        """Persist the leader-epoch cache atomically."""
        write_atomically(self.disk, self.path, LEADER_EPOCH_CHECKPOINT, self.epochs.to_text())

    def make_durable(self) -> None:
        """Fsync data, index, epoch checkpoint and the dir itself (before a swap's renames)."""
        self.flush()
        self.write_epoch_checkpoint()
        self.disk.fsync_dir(self.path)
