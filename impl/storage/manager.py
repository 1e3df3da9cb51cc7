"""The log manager (JBOD over several log dirs) and the broker's per-partition handle.

The storage shell around the storage cores, itself free of any event loop: it loads and
recovers dirs at startup (:mod:`move_recovery`), places new replicas, carries out the move
machine's effects (:mod:`replica_move`, through :mod:`mover`; each effect names its completion,
so :meth:`LogManager._step` is a loop), schedules the movers (:meth:`LogManager.mover_slots`,
:meth:`LogManager.mover_action`: ``num.replica.alter.log.dirs.threads`` slots and the shared
throttle), deletes ``.delete`` dirs, writes checkpoints, and turns every ``OSError`` into a dir
failure (:mod:`log_dir_failure`). A runtime drives it: :mod:`impl.storage.runtime` with trio in
the broker, the simulators with their clocks; both call the same methods.

Concurrency: one thread. Disk calls are synchronous; a mover returns to its runtime between
chunks, and the swap (final catch-up to in-memory swap) runs under the partition lock without
returning, so appends, truncations and retention never see a half-swapped partition. The lock
comes from the runtime (``lock_factory``); the default never waits (in one thread nothing holds
it across a wait).
"""

from __future__ import annotations

import base64
import dataclasses
import errno
import hashlib
import logging
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NamedTuple, Protocol, TypeVar

from impl.ports import Clock, CpuOffload, SystemClock
from impl.storage import clean_shutdown, mover, record_walk
from impl.storage import log_dir_failure as ldf
from impl.storage import record_batch as rb
from impl.storage import replica_move as rm
from impl.storage.checkpoint import (
    DIRECTORY_ID,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointSync,
    format_meta_properties,
    format_offsets,
    parse_meta_properties,
    parse_offsets,
    read_checkpoint,
    recorded_log_dir_ids,
    write_atomically,
    write_atomically_steps,
)
from impl.storage.config import StorageConfig
from impl.storage.disk import Disk, FileSlice
from impl.storage.errors import (
    AppendNotWanted,
    CorruptBatch,
    ErrorCode,
    InvalidTimestamp,
    LogDirOffline,
    OffsetOutOfRange,
)
from impl.storage.log import FlushSync, Log, StorageEnv, byte_changes, default_log_config
from impl.storage.log_config import LogConfig, TopicLogConfigs
from impl.storage.move_recovery import PartitionDirs, RecoveryDecision, classify_all
from impl.storage.names import DirKind, TopicPartition, dir_name, parse_dir_name
from impl.storage.throttle import TokenBucket
from impl.trace import NullTraceSink, TraceSink

MoveState = rm.MoveState

_LOG = logging.getLogger(__name__)
#: Produce records at least this large, or compressed, are validated in a worker thread. With
#: the record walk compiled (:mod:`impl.storage.record_walk`) a MB of records is checked in about
#: 0.2 ms, less than handing it to a thread and back costs; interpreted it takes about 4 ms.
VALIDATE_OFF_LOOP_BYTES = 8 * 1024 * 1024 if record_walk.COMPILED else 64 * 1024
#: Partitions with nothing to fsync flushed per step of :meth:`LogManager.checkpoint_steps`.
CLEAN_FLUSHES_PER_STEP = 256
#: Partitions walked between two yields of :meth:`LogManager.describe_steps` (DescribeLogDirs)
DESCRIBE_PARTITIONS_PER_STEP = 512

_T = TypeVar("_T")


class AppendInfo(NamedTuple):
    """Result of an append: offsets assigned and the append time (-1: CREATE_TIME topics)."""

    base_offset: int
    last_offset: int
    append_time_ms: int


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    """One replica in DescribeLogDirs (KIP-113 §3)."""

    tp: TopicPartition
    size_bytes: int
    log_end_offset: int
    offset_lag: int
    is_temporary: bool


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """One log dir in DescribeLogDirs; ``error_code`` is KAFKA_STORAGE_ERROR when offline."""

    path: str
    online: bool
    error_code: ErrorCode
    total_bytes: int
    usable_bytes: int
    replicas: tuple[ReplicaDescription, ...]


@dataclass(frozen=True, slots=True)
class ReplicaDirInfo:
    """DescribeReplicaLogDirs: where a replica lives and how far its move is.

    ``move_state`` lets ``reassign --verify`` tell Missing (``current_dir`` None), Active
    (COPYING/CAUGHT_UP/SWAPPING with ``future_offset_lag``), Cancelled and Completed (DONE).
    """

    tp: TopicPartition
    current_dir: str | None
    future_dir: str | None
    future_offset_lag: int
    move_state: MoveState
    offline: bool


class PartitionLock(Protocol):
    """The partition lock the move's swap holds (appends and truncations wait for it)."""

    def locked(self) -> bool: ...
    def acquire_nowait(self) -> None: ...
    def release(self) -> None: ...
    async def acquire(self) -> None: ...
    async def __aenter__(self) -> object: ...
    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> object: ...


class MoveLock:
    """The default partition lock: a flag that never waits. In one thread the swap takes and
    releases it without returning to any event loop, so nobody can find it held; finding it
    held is a bug (an assertion)."""

    def __init__(self) -> None:
        self._held = False

    def locked(self) -> bool:
        """Whether the lock is held."""
        return self._held

    def acquire_nowait(self) -> None:
        """Take the lock."""
        assert not self._held, "partition lock contention in a single-threaded runtime"
        self._held = True

    def release(self) -> None:
        """Release the lock."""
        assert self._held, "release of a free partition lock"
        self._held = False

    async def acquire(self) -> None:
        """Take the lock (never suspends)."""
        self.acquire_nowait()

    async def __aenter__(self) -> None:
        self.acquire_nowait()

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()


@dataclass(frozen=True, slots=True)
class MoverCopy:
    """A mover's next step: copy a chunk (:meth:`LogManager.copy_step_nowait`)."""


@dataclass(frozen=True, slots=True)
class MoverWait:
    """A mover's next step: the throttle admits nothing for ``wait_ns``."""

    wait_ns: int


@dataclass(frozen=True, slots=True)
class MoverSwap:
    """A mover's next step: take the partition lock, then :meth:`LogManager.swap_locked_nowait`."""


MoverAction = MoverCopy | MoverWait | MoverSwap


#: Asked holding the partition lock just before an append writes (see
#: :meth:`PartitionLog.append_as_leader`).
AppendGuard = Callable[[], bool]


def _check_guard(guard: AppendGuard | None) -> None:
    if guard is not None and not guard():
        raise AppendNotWanted("the replica changed role while the append waited")


class PartitionLog:
    """The broker's handle on one hosted partition; stays valid across a move's swap.

    File slices returned by :meth:`read` own a duplicate descriptor: they stay readable after a
    concurrent segment deletion, truncation or move swap, and the caller must close them.
    """

    def __init__(self, manager: LogManager, log: Log) -> None:
        self._manager = manager
        self._log = log
        self.tp = log.tp
        #: the ``.move`` destination while a move runs
        self.future: Log | None = None
        #: held by appends, truncation and a mover's final catch-up and swap (KIP-113 step 4)
        self.lock: PartitionLock = manager.new_lock()
        self._offline = False
        #: DeleteRecords' log start offset (may lie inside the first segment); it belongs to
        #: the partition, not to one copy, so a move's swap keeps it
        self.log_start_offset_floor = 0

    # --- state --------------------------------------------------------------------------------

    @property
    def offline(self) -> bool:
        """The partition cannot be served (its dir failed, it was lost, or it was deleted)."""
        return self._offline

    @offline.setter
    def offline(self, offline: bool) -> None:
        self._offline = offline
        self._manager._layout_changed()  # (it leaves its dir's served live logs)

    @property
    def log(self) -> Log:
        """The live on-disk copy (replaced by a move's swap)."""
        return self._log

    @property
    def log_dir(self) -> str:
        """The log dir holding the live copy."""
        return self._log.log_dir

    @property
    def log_start_offset(self) -> int:
        """First offset still readable: the oldest segment's base, or DeleteRecords' offset."""
        return max(self._log.log_start_offset, self.log_start_offset_floor)

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: make ``offset`` the log start offset (durably), as a leader does.

        Segments wholly below it are deleted; the offset itself is kept in the dir's
        ``log-start-offset-checkpoint`` before this returns.

        Returns:
            The new log start offset (Kafka's ``low_watermark``).

        Raises:
            OffsetOutOfRange: ``offset`` is above the HW.
            LogDirOffline.
        """
        self._check_online()
        if offset > self._log.high_watermark:
            raise OffsetOutOfRange(
                f"{self.tp}: cannot delete records below {offset}, above the high watermark "
                f"{self._log.high_watermark}"
            )
        self._raise_log_start_offset(offset)
        return self.log_start_offset

    def maybe_increment_log_start_offset(self, leader_log_start_offset: int) -> None:
        """A follower follows its leader's log start offset (carried by every fetch answer)."""
        if self.offline:
            return
        self._raise_log_start_offset(min(leader_log_start_offset, self._log.high_watermark))

    def _raise_log_start_offset(self, offset: int) -> None:
        if offset <= self.log_start_offset:
            return
        self.log_start_offset_floor = offset
        with self._manager.io(self._log.log_dir):
            self._manager.write_dir_checkpoints(self._log.log_dir)
            self._log.delete_segments_below(offset)
            if self.future is not None:
                self.future.delete_segments_below(offset)

    @property
    def log_end_offset(self) -> int:
        """The next offset to be written (LEO)."""
        return self._log.log_end_offset

    @property
    def high_watermark(self) -> int:
        """The HW (checkpointed to ``replication-offset-checkpoint`` of the live log's dir)."""
        return self._log.high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        assert self._log.log_start_offset <= offset <= self._log.log_end_offset, (
            offset, self._log.log_start_offset, self._log.log_end_offset,
        )
        self._log.high_watermark = offset

    @property
    def size_in_bytes(self) -> int:
        """Bytes in the live copy's segments."""
        return self._log.size_in_bytes

    def _check_online(self) -> None:
        if self.offline:
            raise LogDirOffline(self._log.log_dir, f"{self.tp} is offline")

    # --- writes -------------------------------------------------------------------------------

    async def append_as_leader(
        self, records: bytes, leader_epoch: int,
        timestamp_window_ms: tuple[int, int] | None = None, *,
        guard: AppendGuard | None = None,
    ) -> AppendInfo:
        """Validate a produce request's records, assign offsets from the LEO, append.

        A ``CreateTime`` batch whose ``maxTimestamp`` is not its newest record's is rewritten to
        say the newest (CRC recomputed), as Kafka's LogValidator does; an honest one is appended
        as received.

        ``guard`` is asked holding the partition lock, just before the write: the broker's
        answer to "is this still the leader's append?" (validation off the loop and the lock
        can wait while a LeaderAndIsr makes the replica a follower; Kafka checks leadership
        under ``leaderIsrUpdateLock``). False: :class:`AppendNotWanted`, nothing written.

        Args:
            records: the partition's ``records`` field.
            leader_epoch: stamped on every batch.
            timestamp_window_ms: ``(oldest, newest)`` record timestamps a ``CreateTime`` topic
                accepts (``message.timestamp.difference.max.ms`` around the broker's clock), or
                ``None`` for no bound.
            guard: see above (None: always written).

        Returns:
            ``(base_offset, last_offset, append_time_ms)``; ``append_time_ms`` is -1 for a
            ``CreateTime`` topic, else the broker's time stamped on the batches
            (``message.timestamp.type=LogAppendTime``).

        Raises:
            CorruptBatch, InvalidRecord, MessageTooLarge, InvalidTimestamp: nothing appended.
            LogDirOffline: the partition's dir failed (now or earlier).
            AppendNotWanted: ``guard`` said no.
        """
        log_config = self._manager.log_config(self.tp.topic)
        if len(records) >= VALIDATE_OFF_LOOP_BYTES or rb.is_compressed(records):
            # parsing every record (inflating them first) is CPU work: off the event loop, if
            # the runtime has one (impl.storage.runtime lends trio's worker threads)
            batches = await self._manager.run_cpu_work(
                rb.validate_client_batches, records, log_config.max_message_bytes
            )
        else:
            batches = rb.validate_client_batches(records, log_config.max_message_bytes)
        await self._sync_before_roll(len(records), None)
        async with self.lock:
            _check_guard(guard)
            return self._append_as_leader_locked(records, batches, leader_epoch,
                                                 timestamp_window_ms)

    async def _sync_before_roll(self, incoming_bytes: int, last_offset: int | None) -> None:
        """Fsync the active segment through the runtime's worker threads when the append about
        to be made will roll it (:meth:`Log.roll_syncs`), before the append takes the partition
        lock (which never waits: nothing holds it across an await), as the flush pass does:
        the roll then finds the segment durable, or fsyncs inline only what other appends added
        meanwhile, and the event loop does not wait for the device; Kafka's roll leaves the old
        segment's flush to its scheduler thread. Without worker threads (the simulators) the
        roll fsyncs inline, as it always may.
        """
        log = self._log
        if not self._manager.has_offload or not log.roll_syncs(incoming_bytes, last_offset):
            return
        self._check_online()
        with self._manager.io(log.log_dir):
            sync = log.start_flush()
        try:
            await self._manager.run_cpu_work(sync.run)
        finally:
            sync.close()
        self._check_online()
        with self._manager.io(log.log_dir):
            if sync.error is not None:
                raise sync.error
            if self._log is log:
                log.finish_flush(sync)

    def append_as_leader_nowait(
        self, records: bytes, leader_epoch: int,
        timestamp_window_ms: tuple[int, int] | None = None, *,
        guard: AppendGuard | None = None,
    ) -> AppendInfo:
        """:meth:`append_as_leader` for a runtime that never waits (the simulators): validation
        inline, the lock taken without waiting (finding it held is the runtime's bug).

        Raises:
            as :meth:`append_as_leader`.
        """
        log_config = self._manager.log_config(self.tp.topic)
        batches = rb.validate_client_batches(records, log_config.max_message_bytes)
        self.lock.acquire_nowait()
        try:
            _check_guard(guard)
            return self._append_as_leader_locked(records, batches, leader_epoch,
                                                 timestamp_window_ms)
        finally:
            self.lock.release()

    def _append_as_leader_locked(self, records: bytes, batches: list[rb.ClientBatch],
                                 leader_epoch: int,
                                 timestamp_window_ms: tuple[int, int] | None) -> AppendInfo:
        log_config = self._manager.log_config(self.tp.topic)
        self._check_online()
        if timestamp_window_ms is not None and not log_config.log_append_time:
            oldest_ms, newest_ms = timestamp_window_ms
            for batch in batches:
                if batch.oldest_timestamp_ms < oldest_ms or batch.newest_timestamp_ms > newest_ms:
                    raise InvalidTimestamp(
                        f"record timestamps [{batch.oldest_timestamp_ms}, "
                        f"{batch.newest_timestamp_ms}] outside [{oldest_ms}, {newest_ms}]"
                    )
        log = self._log
        # produce v3+: exactly one batch (validated); its header is stamped in a copy of its
        # own and the rest written as it arrived
        (batch,) = batches
        assert batch.header.position == 0, batch.header
        head, rest = rb.split_batch(records)
        base = log.log_end_offset
        append_time_ms = -1
        if log_config.log_append_time:
            append_time_ms = self._manager.clock.wall_ms()
            header = rb.set_max_timestamp(head, batch.header, append_time_ms,
                                          log_append_time=True, rest=rest)
        else:
            # Kafka's LogValidator: maxTimestamp is what the records say (and the type
            # CreateTime); only a header that says otherwise is rewritten
            header = rb.set_max_timestamp(head, batch.header, batch.newest_timestamp_ms,
                                          log_append_time=False, rest=rest)
        last = rb.assign_offsets(head, [header], base, leader_epoch)
        assigned = [rb.with_offset_and_epoch(header, base, leader_epoch)]
        with self._manager.io(log.log_dir):
            if log.epochs.assign(leader_epoch, base):
                log.write_epoch_checkpoint()
            log.append((head, rest), assigned)
        return AppendInfo(base, last, append_time_ms)

    async def append_as_follower(self, records: bytes, *,
                                 guard: AppendGuard | None = None) -> AppendInfo:
        """Append batches fetched from the leader (offsets and epochs already assigned);
        ``guard`` as :meth:`append_as_leader`'s (still following the leader they came from?).

        The batches are checked first (:func:`~impl.storage.record_batch.validate_replica_records`:
        a malicious or buggy leader cannot make the LEO or an index overflow), off the event loop
        when that is much work, as the leader's validation is.

        Raises:
            CorruptBatch: bad batch or offsets below the LEO; nothing appended.
            LogDirOffline: the partition's dir failed.
            AppendNotWanted: ``guard`` said no.
        """
        if len(records) >= VALIDATE_OFF_LOOP_BYTES or rb.has_compressed_batch(records):
            headers = await self._manager.run_cpu_work(rb.validate_replica_records, records, 0)
        else:
            headers = rb.validate_replica_records(records, 0)
        if headers:
            await self._sync_before_roll(len(records), headers[-1].last_offset)
        async with self.lock:
            _check_guard(guard)
            return self._append_as_follower_locked(records, headers)

    def append_as_follower_nowait(self, records: bytes, *,
                                  guard: AppendGuard | None = None) -> AppendInfo:
        """:meth:`append_as_follower` for a runtime that never waits (the simulators).

        Raises:
            as :meth:`append_as_follower`.
        """
        headers = rb.validate_replica_records(records, 0)
        self.lock.acquire_nowait()
        try:
            _check_guard(guard)
            return self._append_as_follower_locked(records, headers)
        finally:
            self.lock.release()

    def _append_as_follower_locked(self, records: bytes,
                                   headers: list[rb.BatchHeader]) -> AppendInfo:
        self._check_online()
        log = self._log
        if not headers:
            return AppendInfo(log.log_end_offset, log.log_end_offset - 1, -1)
        # the batches' offsets rise (checked); the first must not fall below the LEO
        if headers[0].base_offset < log.log_end_offset:
            raise CorruptBatch(
                f"replicated batch base offset {headers[0].base_offset} < log end offset "
                f"{log.log_end_offset}"
            )
        with self._manager.io(log.log_dir):
            changed = False
            for header in headers:
                changed |= log.epochs.assign(header.partition_leader_epoch, header.base_offset)
            if changed:
                log.write_epoch_checkpoint()
            log.append(records, headers)
        return AppendInfo(headers[0].base_offset, headers[-1].last_offset, -1)

    def truncate_to(self, offset: int) -> None:
        """Remove records at and after ``offset`` (follower truncation); a ``.move`` follows
        (the move steps SOURCE_TRUNCATED).

        Runs synchronously, so it never interleaves with an append or a swap.
        """
        self._check_online()
        with self._manager.io(self._log.log_dir):
            truncated = self._log.truncate_to(offset)
        future = self.future
        if future is not None:
            with self._manager.io(future.log_dir):
                future.truncate_to(offset)
            if truncated:
                self._manager._step(self.tp, rm.MoveInput(
                    rm.MoveEvent.SOURCE_TRUNCATED,
                    source_leo=self._log.log_end_offset, dest_leo=future.log_end_offset,
                ))

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every record and start empty at ``offset`` (a follower whose log ends below its
        leader's log start, Kafka's ``truncateFullyAndStartAt``); a ``.move`` follows (the
        move steps SOURCE_TRUNCATED).

        Runs synchronously, so it never interleaves with an append or a swap.
        """
        self._check_online()
        with self._manager.io(self._log.log_dir):
            self._log.truncate_fully(offset)
            self._manager.write_dir_checkpoints(self._log.log_dir)
        future = self.future
        if future is not None:
            with self._manager.io(future.log_dir):
                future.truncate_fully(offset)
            self._manager._step(self.tp, rm.MoveInput(
                rm.MoveEvent.SOURCE_TRUNCATED,
                source_leo=self._log.log_end_offset, dest_leo=future.log_end_offset,
            ))

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        """Record that leader epoch ``epoch`` starts at ``start_offset`` (on becoming leader)."""
        self._check_online()
        with self._manager.io(self._log.log_dir):
            if self._log.epochs.assign(epoch, start_offset):
                self._log.write_epoch_checkpoint()

    def flush(self) -> None:
        """Fsync everything appended (the recovery point becomes the LEO)."""
        self._check_online()
        with self._manager.io(self._log.log_dir):
            self._log.flush()

    # --- reads --------------------------------------------------------------------------------

    def read(
        self, fetch_offset: int, max_bytes: int, max_offset: int | None = None
    ) -> list[FileSlice]:
        """Slices of whole batches from ``fetch_offset`` (see :meth:`Log.read`).

        Args:
            fetch_offset: first offset wanted.
            max_bytes: size limit (the first batch is returned whole even if larger, KIP-74).
            max_offset: exclusive upper bound (the HW for consumers), ``None`` for the LEO.

        Raises:
            OffsetOutOfRange, LogDirOffline.
        """
        self._check_online()
        if fetch_offset < self.log_start_offset_floor:
            raise OffsetOutOfRange(
                f"{self.tp}: offset {fetch_offset} is below the log start offset "
                f"{self.log_start_offset_floor}"
            )
        with self._manager.io(self._log.log_dir):
            return self._log.read(fetch_offset, max_bytes, max_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """KIP-279 OffsetsForLeaderEpoch: ``(largest epoch <= epoch, its end offset)``."""
        self._check_online()
        return self._log.epochs.end_offset_for_epoch(epoch, self._log.log_end_offset)

    @property
    def latest_epoch(self) -> int:
        """The newest leader epoch in the cache (-1 if none)."""
        return self._log.epochs.latest_epoch

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """The first record whose timestamp is at least ``timestamp_ms``, as ``(offset,
        timestamp)``; ``None`` if none (ListOffsets by time; which offset "latest" and
        "earliest" mean is the broker node's decision)."""
        self._check_online()
        with self._manager.io(self._log.log_dir):
            found = self._log.offset_for_timestamp(timestamp_ms)
        if found is not None and found[0] < self.log_start_offset_floor:
            return self.log_start_offset_floor, found[1]
        return found

    def max_timestamp_record(self) -> tuple[int, int] | None:
        """The first record from the log start stamped with the largest timestamp, as
        ``(offset, timestamp)``; ``None`` if no record has one (ListOffsets' MAX_TIMESTAMP;
        the broker node decides whether a client may see it)."""
        self._check_online()
        with self._manager.io(self._log.log_dir):
            return self._log.max_timestamp_record(self.log_start_offset)


DirFailureCallback = Callable[[str], None]


@dataclass(slots=True)
class _DeleteRequest:
    """A queued ``tp.delete`` removal.

    Attributes:
        guarded: removed only while ``tp`` is served from an online dir with a log end offset at
            least the copy's (a move's old source, an abandoned ``.move``, a recovery
            ``.delete`` next to a live copy); ``False`` for a topic deletion.
        log_end_offset: the doomed copy's LEO, ``None`` until known (read from disk once).
        kept_because: why the last attempt kept it (logged once per reason).
    """

    log_dir: str
    tp: TopicPartition
    guarded: bool = True
    log_end_offset: int | None = None
    kept_because: str | None = None


@dataclass(frozen=True, slots=True)
class _StartupCheckpoints:
    """One dir's offset checkpoints as read at start-up."""

    high_watermarks: dict[TopicPartition, int]
    recovery_points: dict[TopicPartition, int]
    log_start_offsets: dict[TopicPartition, int]


class LogManager:
    """All log dirs of one broker. Open with :meth:`open` (which recovers), then :meth:`run`."""

    def __init__(
        self,
        config: StorageConfig,
        disk: Disk,
        clock: Clock,
        trace: TraceSink,
        on_dir_failure: DirFailureCallback | None,
    ) -> None:
        self.config = config
        self.env = StorageEnv(disk, config, clock, TopicLogConfigs(default_log_config(config)))
        self.disk = disk
        self.clock = clock
        self.trace = trace
        self._on_dir_failure = on_dir_failure
        self._dir_states: dict[str, ldf.LogDirState] = dict.fromkeys(
            config.log_dirs, ldf.LogDirState.ONLINE
        )
        self._partitions: dict[TopicPartition, PartitionLog] = {}
        self._moves: dict[TopicPartition, rm.Move] = {}
        #: the replicas whose move is COPYING or CAUGHT_UP (kept by :meth:`_step`)
        self._copying: set[TopicPartition] = set()
        #: dirs whose checkpoints a :meth:`batched_checkpoints` block writes on leaving
        self._checkpoint_batch: set[str] | None = None
        #: each online dir's (bytes, replicas) as :meth:`_least_loaded` summed them, kept up to
        #: date by the placements made since; stale once a log's bytes changed
        #: (:attr:`_placement_bytes`), ``None`` once a replica came or went otherwise
        #: (recomputed when next needed)
        self._placement_load: dict[str, list[int]] | None = None
        #: :func:`~impl.storage.log.byte_changes` when the sums were made
        self._placement_bytes = -1
        self._preferred_dirs: dict[TopicPartition, str] = {}
        self._offline_partitions: set[TopicPartition] = set()
        self._lost: set[TopicPartition] = set()
        #: dirs a move found full (ENOSPC); the move was cancelled, the dir kept online
        self.disk_full_dirs: set[str] = set()
        self._pending_deletes: list[_DeleteRequest] = []
        self._mover_count = config.mover_count
        self._bucket = TokenBucket(
            config.intra_broker_throttled_rate, clock.monotonic_ns(), self._burst_bytes()
        )
        #: the replicas holding a mover slot (num.replica.alter.log.dirs.threads of them)
        self._movers_active: set[TopicPartition] = set()
        self._lock_factory: Callable[[], PartitionLock] = MoveLock
        #: the runtime's wake-up: called when a mover or a delete may have work
        self._work_listener: Callable[[], None] | None = None
        self._cpu_offload: CpuOffload | None = None
        self.closed = False
        #: each dir's served live logs (:meth:`_live_logs_of`), made by one walk of the hosted
        #: partitions when first needed and dropped (:meth:`_layout_changed`) whenever a
        #: partition comes or goes, goes offline, or a move's effect renames, swaps or drops one
        #: of its copies: the periodic checkpoint passes walked every hosted partition once per
        #: dir and file (four walks for two dirs' HW files each second: 66 ms of the longest
        #: step at 32,000 partitions)
        self._live_by_dir: dict[str, dict[TopicPartition, Log]] | None = None
        #: the entries last written per (dir, checkpoint): unchanged checkpoints are not
        #: rewritten (the text is a function of the entries, so equal entries are equal text)
        self._checkpoints_written: dict[tuple[str, str], dict[TopicPartition, int]] = {}
        #: each (dir, checkpoint)'s entries as read at start-up, then as last written: a lost
        #: replica's entries are carried from here (:meth:`_checkpoint_entries`)
        self._checkpoint_entries: dict[tuple[str, str], dict[TopicPartition, int]] = {}
        #: each (dir, checkpoint)'s writes started so far: a write whose fsync was handed over
        #: goes on only if no later write of the file started meanwhile
        #: (:meth:`_write_checkpoint_steps`)
        self._checkpoint_writes: dict[tuple[str, str], int] = {}
        self.recovery_decisions: list[RecoveryDecision] = []
        #: the broker epoch since which every shutdown was clean (this start follows a clean
        #: one), or -1 (:mod:`impl.storage.clean_shutdown`; the broker registers it, KIP-966)
        self.clean_since_broker_epoch = clean_shutdown.UNCLEAN

    # --- opening and recovery ---------------------------------------------------------------

    @classmethod
    def open(
        cls,
        config: StorageConfig,
        *,
        disk: Disk | None = None,
        clock: Clock | None = None,
        trace: TraceSink | None = None,
        on_dir_failure: DirFailureCallback | None = None,
        lock_factory: Callable[[], PartitionLock] | None = None,
    ) -> LogManager:
        """Open every configured dir, recover (KIP-113 §3), and load the live logs.

        A dir that cannot be read is offline from the start (KIP-112); the broker serves the
        rest. Moves found half-done are resumed when a runtime drives the movers
        (:mod:`impl.storage.runtime`).

        Args:
            lock_factory: makes each partition's lock (default :class:`MoveLock`).
        """
        if disk is None:
            from impl.storage.os_disk import OsDisk  # noqa: PLC0415 (the shell's default port)

            disk = OsDisk()
        manager = cls(
            config, disk, clock or SystemClock(),
            trace if trace is not None else NullTraceSink(),  # an empty ListTraceSink is falsy
            on_dir_failure
        )
        if lock_factory is not None:
            manager._lock_factory = lock_factory
        manager._recover()
        manager.clean_since_broker_epoch = clean_shutdown.take_markers(
            disk, [d for d in config.log_dirs if d not in manager.offline_dirs])
        return manager

    def _recover(self) -> None:
        found: dict[TopicPartition, dict[DirKind, set[str]]] = {}
        checkpoints: dict[str, _StartupCheckpoints] = {}
        self._open_dirs()
        for log_dir in self.config.log_dirs:
            if log_dir in self.offline_dirs:
                continue
            try:
                names = self.disk.list_dir(log_dir)
                checkpoints[log_dir] = _StartupCheckpoints(
                    self._read_offsets(log_dir, REPLICATION_OFFSET_CHECKPOINT),
                    self._read_offsets(log_dir, RECOVERY_POINT_CHECKPOINT),
                    self._read_offsets(log_dir, LOG_START_OFFSET_CHECKPOINT),
                )
            except (OSError, ValueError):
                self._fail_dir(log_dir, ldf.LogDirEvent.UNREADABLE_AT_STARTUP)
                continue
            read = checkpoints[log_dir]
            for name, entries in ((REPLICATION_OFFSET_CHECKPOINT, read.high_watermarks),
                                  (RECOVERY_POINT_CHECKPOINT, read.recovery_points),
                                  (LOG_START_OFFSET_CHECKPOINT, read.log_start_offsets)):
                self._checkpoint_entries[(log_dir, name)] = dict(entries)
            for name in names:
                parsed = parse_dir_name(name)
                if parsed is not None:
                    tp, kind = parsed
                    found.setdefault(tp, {}).setdefault(kind, set()).add(log_dir)
        any_bad = bool(self.offline_dirs)
        dirs = [
            PartitionDirs(
                tp,
                frozenset(kinds.get(DirKind.LIVE, ())),
                frozenset(kinds.get(DirKind.MOVE, ())),
                frozenset(kinds.get(DirKind.DELETE, ())),
            )
            for tp, kinds in found.items()
        ]
        self.recovery_decisions = classify_all(dirs, any_bad)
        for decision in self.recovery_decisions:
            self.trace.emit(decision.trace())
            self._apply_decision(decision, checkpoints)

    def _open_dirs(self) -> None:
        """Read every dir's ``meta.properties``; tell an unmounted dir from a new one.

        Each ``meta.properties`` records the dir's ``directory.id`` and the ids of all the
        broker's log dirs (KIP-858 in spirit). A configured dir without ``meta.properties`` is:

        * initialised when no dir has one (a new broker) or when every recorded id is found on a
          readable dir (a dir added to ``log.dirs``);
        * otherwise bad, UNREADABLE_AT_STARTUP: some recorded dir is missing and this may be it
          with its disk not mounted (an empty mount point). Initialising it would make it a good
          empty dir, and recovery could then promote a partial ``.move`` from another dir.

        Then every online dir's file is rewritten (atomically, new dirs first) to record the
        current set; while a dir is offline the ids it may carry stay recorded.
        """
        metas: dict[str, dict[str, str] | None] = {}
        for log_dir in self.config.log_dirs:
            try:
                metas[log_dir] = self._read_meta(log_dir)
            except (OSError, ValueError) as error:
                _LOG.warning("log dir %s unreadable at startup: %s", log_dir, error)
                self._fail_dir(log_dir, ldf.LogDirEvent.UNREADABLE_AT_STARTUP)
        recorded: set[str] = set()
        present: dict[str, str] = {}
        for log_dir, props in metas.items():
            if props is not None:
                recorded |= recorded_log_dir_ids(props)
                if props.get(DIRECTORY_ID):
                    present[log_dir] = props[DIRECTORY_ID]
        missing = recorded - set(present.values())
        fresh = [d for d, props in metas.items() if props is None]
        if fresh and missing:
            for log_dir in fresh:
                _LOG.warning(
                    "log dir %s has no %s while the broker's other log dirs record %d dir(s) "
                    "not found (%s): treated as unmounted, left untouched and offline",
                    log_dir, META_PROPERTIES, len(missing), ",".join(sorted(missing)),
                )
                self._fail_dir(log_dir, ldf.LogDirEvent.UNREADABLE_AT_STARTUP)
            fresh = []
        online = [d for d in metas if d not in self.offline_dirs]
        ids = {d: present.get(d) or self._new_directory_id(d) for d in online}
        keep = set() if not self.offline_dirs else recorded
        all_ids = set(ids.values()) | keep
        for log_dir in sorted(online, key=lambda d: d not in fresh):  # new dirs first
            try:
                if log_dir in fresh and not self.disk.exists(log_dir):
                    self.disk.mkdir(log_dir)
                text = format_meta_properties(self.config.broker_id, ids[log_dir], all_ids)
                if read_checkpoint(self.disk, log_dir, META_PROPERTIES) != text:
                    write_atomically(self.disk, log_dir, META_PROPERTIES, text)
            except OSError as error:
                _LOG.warning("log dir %s unwritable at startup: %s", log_dir, error)
                self._fail_dir(log_dir, ldf.LogDirEvent.UNREADABLE_AT_STARTUP)

    def _read_meta(self, log_dir: str) -> dict[str, str] | None:
        """The dir's parsed ``meta.properties``, ``None`` if absent (or the dir is).

        Raises:
            ValueError: it names another broker id.
        """
        if not self.disk.exists(log_dir):
            return None
        self.disk.list_dir(log_dir)  # unreadable: OSError
        text = read_checkpoint(self.disk, log_dir, META_PROPERTIES)
        if text is None:
            return None
        props = parse_meta_properties(text)
        broker_id = props.get("broker.id")
        if broker_id is not None and int(broker_id) != self.config.broker_id:
            raise ValueError(f"{log_dir}: meta.properties broker.id {broker_id}")
        return props

    def _new_directory_id(self, log_dir: str) -> str:
        """A new ``directory.id`` (22 url-safe base64 characters, as Kafka's ``Uuid``), derived
        from the broker id, the path and the clock so that simulated runs are reproducible."""
        clock = self.clock
        seed = f"{self.config.broker_id}\0{log_dir}\0{clock.wall_ms()}\0{clock.monotonic_ns()}"
        digest = hashlib.sha256(seed.encode()).digest()[:16]
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def _read_offsets(self, log_dir: str, name: str) -> dict[TopicPartition, int]:
        text = read_checkpoint(self.disk, log_dir, name)
        if text is None:
            return {}
        try:
            return parse_offsets(text)
        except ValueError:
            return {}

    def _apply_decision(
        self,
        decision: RecoveryDecision,
        checkpoints: dict[str, _StartupCheckpoints],
    ) -> None:
        tp = decision.tp
        # a lone tp.delete with every dir good is a topic deletion (nothing else leaves one)
        deleted_topic = decision.live_dir is None and not decision.offline
        for log_dir in decision.delete_dirs:
            self._pending_deletes.append(_DeleteRequest(log_dir, tp, guarded=not deleted_topic))
        for log_dir in decision.delete_move_dirs:
            with self._io_nowait(log_dir):
                self._retire(log_dir, tp, DirKind.MOVE)
        if decision.offline:
            self._offline_partitions.add(tp)
            self._lost.add(tp)
            return
        live_dir = decision.live_dir
        if live_dir is None:
            return
        if live_dir in self.offline_dirs:
            # the dir failed earlier in this recovery (another partition's load or retire hit
            # the fault): nothing is loaded from it, the replica is offline as its neighbours
            self._offline_partitions.add(tp)
            self._lost.add(tp)
            return
        try:
            if decision.promote_dir is not None:
                self.disk.rename(
                    f"{live_dir}/{dir_name(tp, DirKind.MOVE)}", f"{live_dir}/{dir_name(tp)}"
                )
                self.disk.fsync_dir(live_dir)
            read = checkpoints.get(live_dir, _StartupCheckpoints({}, {}, {}))
            log = Log.load(
                self.env, live_dir, tp, DirKind.LIVE,
                recovery_point=read.recovery_points.get(tp, 0),
                high_watermark=read.high_watermarks.get(tp, 0),
            )
        except OSError as error:
            self._fail_dir(self._dir_of(error, live_dir), ldf.LogDirEvent.IO_ERROR)
            self._offline_partitions.add(tp)
            self._lost.add(tp)
            return
        except Exception:
            # a log that cannot be recovered takes only its own partition offline, never the
            # broker (nor its dir): the others load and serve
            _LOG.exception("%s in %s cannot be recovered: the partition stays offline", tp,
                           live_dir)
            self._offline_partitions.add(tp)
            self._lost.add(tp)
            return
        partition = PartitionLog(self, log)
        floor = read.log_start_offsets.get(tp, 0)
        partition.log_start_offset_floor = min(floor, log.high_watermark)
        self._partitions[tp] = partition
        self._layout_changed()
        if decision.resume_dest_dir is not None and (
                decision.resume_dest_dir not in self.offline_dirs):
            # (a destination that failed earlier in this recovery is not resumed into: its
            # tp.move stays, untouched, for the next start to decide)
            self._step(tp, rm.MoveInput(rm.MoveEvent.REQUESTED, decision.resume_dest_dir,
                                        source_leo=log.log_end_offset))

    def _retire(
        self,
        log_dir: str,
        tp: TopicPartition,
        kind: DirKind,
        *,
        guarded: bool = True,
        log_end_offset: int | None = None,
    ) -> None:
        """Rename ``tp<kind>`` to ``tp.delete`` durably and queue its deletion (see
        :class:`_DeleteRequest` for ``guarded``)."""
        doomed = f"{log_dir}/{dir_name(tp, DirKind.DELETE)}"
        if self.disk.exists(doomed):
            self._delete_tree(doomed)
        self.disk.rename(f"{log_dir}/{dir_name(tp, kind)}", doomed)
        self.disk.fsync_dir(log_dir)
        self._pending_deletes.append(
            _DeleteRequest(log_dir, tp, guarded=guarded, log_end_offset=log_end_offset)
        )

    def _delete_tree(self, path: str) -> None:
        for name in self.disk.list_dir(path):
            self.disk.remove(f"{path}/{name}")
        self.disk.rmdir(path)

    # --- failure handling -------------------------------------------------------------------

    def _dir_of(self, error: OSError, default: str) -> str:
        filename = error.filename if isinstance(error.filename, str) else ""
        best = default
        for log_dir in self.config.log_dirs:
            inside = filename == log_dir or filename.startswith(log_dir.rstrip("/") + "/")
            if inside and (best == default or len(log_dir) > len(best)):
                best = log_dir
        return best

    def io(self, log_dir: str) -> _IoGuard:
        """Context manager: an ``OSError`` inside takes its dir offline and raises
        :class:`LogDirOffline` instead."""
        return _IoGuard(self, log_dir)

    def _io_nowait(self, log_dir: str) -> _IoSwallow:
        return _IoSwallow(self, log_dir)

    def _fail_dir(self, log_dir: str, event: ldf.LogDirEvent) -> None:
        if log_dir not in self._dir_states:
            return
        on_dir = tuple(
            str(tp) for tp, p in self._partitions.items()
            if p.log_dir == log_dir or (p.future is not None and p.future.log_dir == log_dir)
        )
        transition = ldf.step(log_dir, self._dir_states[log_dir], event, on_dir)
        self._dir_states[log_dir] = transition.state
        self.trace.emit(transition.trace)
        for effect in transition.effects:
            if isinstance(effect, ldf.OfflineReplicas):
                self._offline_replicas_on(log_dir)
            elif self._on_dir_failure is not None:
                self._on_dir_failure(effect.log_dir)

    def _offline_replicas_on(self, log_dir: str) -> None:
        for tp, partition in list(self._partitions.items()):
            move = self._moves.get(tp)
            moving = move is not None and move.state in (
                MoveState.COPYING, MoveState.CAUGHT_UP, MoveState.SWAPPING,
            )
            involved = partition.log_dir == log_dir or (
                moving and move is not None and move.dest_dir == log_dir
            )
            if moving and involved:
                self._step(tp, rm.MoveInput(rm.MoveEvent.DIR_FAILED, log_dir))
            elif partition.log_dir == log_dir:
                self._mark_offline(tp)

    def _mark_offline(self, tp: TopicPartition) -> None:
        partition = self._partitions.get(tp)
        if partition is not None:
            partition.offline = True
        self._offline_partitions.add(tp)
        self._lost.add(tp)

    # --- the move machine driver ------------------------------------------------------------

    def _step(self, tp: TopicPartition, event: rm.MoveInput) -> rm.Move:
        """Step the move machine and carry out its effects; each effect that succeeded and names
        a completion is stepped in turn (the machine knows the sequence, not this loop)."""
        for _ in self._steps(tp, event):
            pass
        return self._moves[tp]

    def _steps(self, tp: TopicPartition, event: rm.MoveInput) -> Iterator[rm.MoveEffect]:
        """:meth:`_step`, yielding each effect just before it is carried out."""
        pending: rm.MoveInput | None = event
        while pending is not None:
            event, pending = pending, None
            move = self._moves.get(tp, rm.Move(tp))
            if event.event is rm.MoveEvent.REQUESTED and tp in self._partitions:
                move = dataclasses.replace(move, source_dir=self._partitions[tp].log_dir)
            transition = rm.step(move, event)
            self._moves[tp] = transition.move
            if transition.move.state in (MoveState.COPYING, MoveState.CAUGHT_UP):
                self._copying.add(tp)
            else:
                self._copying.discard(tp)
            self.trace.emit(transition.trace)
            for effect in transition.effects:
                if self._moves[tp] is not transition.move:
                    break  # an effect failed and stepped the machine (DIR_FAILED)
                yield effect
                done = self._carry_out(tp, effect)
                if done is not None and self._moves[tp] is transition.move:
                    assert pending is None, "two completions from one transition"
                    pending = done

    def _carry_out(self, tp: TopicPartition, effect: rm.MoveEffect) -> rm.MoveInput | None:
        """Carry out one effect; return its completion (``None``: it has none, or failed)."""
        self._placement_load = None  # (a move's effect may attach, swap or drop a log)
        self._layout_changed()  # (or rename one)
        partition = self._partitions.get(tp)
        move = self._moves[tp]
        match effect:
            case rm.RecordPreferredDir(log_dir=log_dir):
                self._preferred_dirs[tp] = log_dir
            case rm.ForgetPreferredDir():
                self._preferred_dirs.pop(tp, None)
            case rm.CreateMoveDir(dest_dir=dest_dir):
                assert partition is not None
                with self._move_io(tp, dest_dir):
                    path = f"{dest_dir}/{dir_name(tp, DirKind.MOVE)}"
                    if self.disk.exists(path):  # resuming after a crash (KIP-113 §3 rule 1)
                        future = Log.load(self.env, dest_dir, tp, DirKind.MOVE)
                        mover.verify_prefix(partition.log, future)  # KAFKA-9087
                    else:
                        future = Log.create(
                            self.env, dest_dir, tp, DirKind.MOVE,
                            first_segment_base=partition.log_start_offset,
                        )
                    partition.future = future
                    self._work_available()
            case rm.AbandonMoveDir(dest_dir=dest_dir):
                assert partition is not None
                abandoned = partition.future
                partition.future = None
                swallow = self._io_nowait(dest_dir)
                with swallow:
                    if self.disk.exists(f"{dest_dir}/{dir_name(tp, DirKind.MOVE)}"):
                        self._retire(dest_dir, tp, DirKind.MOVE, log_end_offset=(
                            abandoned.log_end_offset if abandoned is not None else None
                        ))
                if swallow.failed and move.state in (MoveState.COPYING, MoveState.CAUGHT_UP):
                    # a redirect whose old tp.move could not be retired (its dir failed): the
                    # new tp.move is not created, two would be ambiguous at the next start
                    self._step(tp, rm.MoveInput(rm.MoveEvent.DIR_FAILED, dest_dir))
            case rm.CopyChunk() | rm.AcquireLock():
                self._work_available()  # the mover loop acts on COPYING / CAUGHT_UP
            case rm.CopyRemaining():
                assert partition is not None
                assert partition.future is not None
                future = partition.future
                with self._move_io(tp, future.log_dir) as guard:
                    copied = mover.copy_all(partition.log, future)
                    # under the lock nobody waits for the throttle: the bytes become debt
                    self._bucket.charge(copied, self.clock.monotonic_ns())
                    future.epochs = partition.log.epochs.copy()  # KAFKA-15608
                    future.high_watermark = partition.log.high_watermark
                if not guard.failed:
                    return rm.completion(effect, source_leo=partition.log_end_offset,
                                         dest_leo=future.log_end_offset)
            case rm.SyncDest():
                assert partition is not None
                assert partition.future is not None
                future = partition.future
                with self._move_io(tp, future.log_dir) as guard:
                    future.make_durable()
                    self.disk.fsync_dir(future.log_dir)
                    # the dest dir's checkpoints learn the HW now: a promotion keeps it
                    self._write_dir_checkpoints(future.log_dir, extra=future)
                if not guard.failed:
                    return rm.completion(effect)
            case rm.RenameSourceToDelete(source_dir=source_dir):
                assert partition is not None
                with self._move_io(tp, source_dir) as guard:
                    doomed = f"{source_dir}/{dir_name(tp, DirKind.DELETE)}"
                    if self.disk.exists(doomed):
                        self._delete_tree(doomed)
                    self.disk.rename(partition.log.path, doomed)
                    partition.log.renamed(DirKind.DELETE)
                    self.disk.fsync_dir(source_dir)
                if not guard.failed:
                    return rm.completion(effect)
            case rm.RenameMoveToLive(dest_dir=dest_dir):
                assert partition is not None
                assert partition.future is not None
                future = partition.future
                with self._move_io(tp, dest_dir) as guard:
                    self.disk.rename(future.path, f"{dest_dir}/{dir_name(tp)}")
                    future.renamed(DirKind.LIVE)
                    self.disk.fsync_dir(dest_dir)
                if not guard.failed:
                    return rm.completion(effect)
            case rm.SwapLog():
                assert partition is not None
                assert partition.future is not None
                source = partition.log
                future = partition.future
                future.high_watermark = source.high_watermark  # KAFKA-9263: on the new log
                partition._log = future
                partition.future = None
                # KAFKA-8362: per-dir checkpoints move with the partition
                for log_dir in (source.log_dir, future.log_dir):
                    with self._io_nowait(log_dir):
                        self._write_dir_checkpoints(log_dir)
            case rm.ReleaseLock():
                assert partition is not None
                partition.lock.release()
                return rm.completion(effect)
            case rm.DeleteAsync(log_dir=log_dir):
                # the old source: swapped under the lock, so as long as the live log right now
                self._pending_deletes.append(_DeleteRequest(
                    log_dir, tp,
                    log_end_offset=partition.log_end_offset if partition is not None else None,
                ))
                self._work_available()
            case rm.RestoreSource(source_dir=source_dir):
                assert partition is not None
                with self._io_nowait(source_dir):
                    self.disk.rename(partition.log.path, f"{source_dir}/{dir_name(tp)}")
                    partition.log.renamed(DirKind.LIVE)
                    self.disk.fsync_dir(source_dir)
            case rm.DropMove():
                if partition is not None:
                    partition.future = None
            case rm.MarkPartitionOffline():
                self._mark_offline(tp)
        return None

    def _move_io(self, tp: TopicPartition, default_dir: str) -> _MoveIoGuard:
        return _MoveIoGuard(self, tp, default_dir)

    def _move_failed(self, tp: TopicPartition, error: OSError, default_dir: str) -> None:
        failed = self._dir_of(error, default_dir)
        move = self._moves.get(tp)
        if (
            error.errno == errno.ENOSPC
            and move is not None
            and failed == move.dest_dir
            and move.state in (MoveState.COPYING, MoveState.CAUGHT_UP)
        ):
            # the destination is full: the copy stops and its tp.move is removed (freeing what
            # it took); the dir stays online, so nothing keeps it offline across a restart
            _LOG.warning(
                "log dir %s is full (disk full: %s): the move of %s to it is cancelled and "
                "its %s removed", failed, error.strerror, tp, dir_name(tp, DirKind.MOVE),
            )
            self.disk_full_dirs.add(failed)
            self._step(tp, rm.MoveInput(rm.MoveEvent.CANCEL_REQUESTED))
            return
        self._fail_dir(failed, ldf.LogDirEvent.IO_ERROR)
        move = self._moves.get(tp)
        if move is not None and failed in (move.source_dir, move.dest_dir) and move.state in (
            MoveState.COPYING, MoveState.CAUGHT_UP, MoveState.SWAPPING
        ):
            # the dir was already offline (reported before): the move still stops
            self._step(tp, rm.MoveInput(rm.MoveEvent.DIR_FAILED, failed))

    # --- public API ---------------------------------------------------------------------------

    def log_config(self, topic: str) -> LogConfig:
        """The effective config of ``topic`` (its override, else the broker-wide default).

        This is the one place storage reads per-topic settings: ``segment.*``, ``retention.*``,
        ``cleanup.policy``, ``min.cleanable.dirty.ratio``, ``delete.retention.ms``,
        ``max.message.bytes``. Read it each time: the broker replaces it live.
        """
        log_configs = self.env.log_configs
        assert log_configs is not None
        return log_configs.of(topic)

    def set_log_config(self, topic: str, config: LogConfig | None) -> None:
        """Set ``topic``'s effective config (None: the broker-wide default applies)."""
        log_configs = self.env.log_configs
        assert log_configs is not None
        log_configs.set(topic, config)

    def set_default_log_config(self, config: LogConfig) -> None:
        """Replace the broker-wide default config (a dynamic broker config changed)."""
        log_configs = self.env.log_configs
        assert log_configs is not None
        log_configs.set_default(config)

    @property
    def log_dirs(self) -> tuple[str, ...]:
        """The configured dirs."""
        return self.config.log_dirs

    @property
    def offline_dirs(self) -> frozenset[str]:
        """Dirs that failed (until restart)."""
        return frozenset(d for d, s in self._dir_states.items() if s is ldf.LogDirState.OFFLINE)

    @property
    def offline_replicas(self) -> frozenset[TopicPartition]:
        """Partitions this broker hosts (or hosted) that cannot be served."""
        return frozenset(self._offline_partitions)

    def set_dir_failure_callback(self, callback: DirFailureCallback | None) -> None:
        """Call ``callback(log_dir)`` once per failed dir (the broker tells the controller)."""
        self._on_dir_failure = callback

    def partitions(self) -> dict[TopicPartition, PartitionLog]:
        """Every hosted partition (offline ones included, with ``offline`` set)."""
        return dict(self._partitions)

    def get(self, tp: TopicPartition) -> PartitionLog | None:
        """The partition's handle, or ``None`` if not hosted here."""
        return self._partitions.get(tp)

    def create(self, tp: TopicPartition, is_new: bool = False) -> PartitionLog:
        """Host ``tp`` (LeaderAndIsr): the existing log, or a new empty one.

        Placement: the remembered AlterReplicaLogDirs dir if it is online, else the online dir
        with the fewest replicas (ties: fewest bytes, then config order), as Kafka's
        ``LogManager.nextLogDirs`` counts each dir's logs, future ones included.

        Args:
            is_new: the controller says the replica is new (LeaderAndIsr ``isNew``). Without it
                a replica is not created empty while it is known lost with a failed dir or while
                any dir is offline (it may be there): KAFKA-16234, KAFKA-10314.

        Raises:
            LogDirOffline: refused by the rule above, or the chosen dir failed while creating.
        """
        existing = self._partitions.get(tp)
        if existing is not None:
            existing._check_online()
            return existing
        if not is_new and (tp in self._lost or self.offline_dirs):
            raise LogDirOffline(
                next(iter(sorted(self.offline_dirs)), ""),
                f"{tp} may be on an offline log dir; not recreated without isNew",
            )
        online = [d for d in self.config.log_dirs if d not in self.offline_dirs]
        if not online:
            raise LogDirOffline("", "every log dir is offline")
        preferred = self._preferred_dirs.get(tp)
        log_dir = preferred if preferred in online else self._least_loaded(online)
        assert log_dir is not None
        with self.io(log_dir):
            log = Log.create(self.env, log_dir, tp, DirKind.LIVE)
        load = self._placement_load
        if load is not None and log_dir in load:
            load[log_dir][1] += 1  # a new log: no bytes, one more replica
        partition = PartitionLog(self, log)
        self._partitions[tp] = partition
        self._layout_changed()
        self._offline_partitions.discard(tp)
        self._forget_lost(tp)
        if self._moves.get(tp, rm.Move(tp)).state is MoveState.PENDING_PLACEMENT:
            self._step(tp, rm.MoveInput(rm.MoveEvent.REPLICA_CREATED))
        return partition

    def _forget_lost(self, tp: TopicPartition) -> None:
        """``tp`` is no longer a lost replica (created anew, or deleted): the dirs whose
        checkpoints still carry its old copies' entries are rewritten without them now, so
        that a new replica never starts from them after a crash."""
        if tp not in self._lost:
            return
        self._lost.discard(tp)
        for log_dir in self.config.log_dirs:
            if log_dir in self.offline_dirs or not any(
                    tp in self._checkpoint_entries.get((log_dir, name), {})
                    for name in (LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
                                 RECOVERY_POINT_CHECKPOINT)):
                continue
            if self._checkpoint_batch is not None:
                self._checkpoint_batch.add(log_dir)
            else:
                with self._io_nowait(log_dir):
                    self._write_dir_checkpoints(log_dir)

    def _least_loaded(self, online: list[str]) -> str:
        """The online dir with the fewest replicas (ties: fewest bytes, then config order).

        Replicas first, as Kafka (``LogManager.nextLogDirs``): until 29 Nov 2026 bytes came first,
        and since a new replica is empty, a burst of new partitions all went to the dir that held
        the fewest bytes (31,074 partition dirs in one dir against 203 in the other when the
        structured wire fuzz grew a topic to 32,767 partitions), however many replicas that dir had
        already. The load is summed over every hosted log: a lone online dir is the answer without
        the scan (a broker with one log dir given 100,000 partitions spent hours here); the sums are
        kept, and updated by each placement, while no log's bytes changed
        (:func:`~impl.storage.log.byte_changes`) and no replica came or went other than by a
        placement (a deletion, a move's future log attached, swapped or dropped,
        AlterReplicaLogDirs: each drops them), so placing n new partitions costs O(n) instead of
        O(n²) however many steps of the broker node they come in (the broker applies a LeaderAndIsr
        one partition per step)."""
        if len(online) == 1:
            return online[0]
        load = self._placement_load
        if load is None or list(load) != online or self._placement_bytes != byte_changes():
            load = {log_dir: [0, 0] for log_dir in online}
            for partition in self._partitions.values():
                for log in (partition.log, partition.future):
                    if log is not None and log.log_dir in load:
                        totals = load[log.log_dir]
                        totals[0] += log.size_in_bytes
                        totals[1] += 1
            self._placement_load = load
            self._placement_bytes = byte_changes()
        return min(online, key=lambda d: (load[d][1], load[d][0], online.index(d)))

    def delete(self, tp: TopicPartition) -> None:
        """Stop hosting ``tp`` and delete its data (StopReplica with delete, DeleteTopics).

        A move in progress is abandoned first, durably, so that a crash cannot leave a lone
        ``tp.move`` that recovery would promote.
        """
        partition = self._partitions.get(tp)
        self._placement_load = None
        move = self._moves.get(tp)
        if move is not None and move.state in (MoveState.COPYING, MoveState.CAUGHT_UP):
            self._step(tp, rm.MoveInput(rm.MoveEvent.CANCEL_REQUESTED))
        self._moves.pop(tp, None)
        self._copying.discard(tp)
        self._preferred_dirs.pop(tp, None)
        self._offline_partitions.discard(tp)
        self._forget_lost(tp)
        for request in self._pending_deletes:
            if request.tp == tp:
                request.guarded = False  # the topic is gone: every copy goes
        if partition is None:
            return
        del self._partitions[tp]
        partition.offline = True  # (and the dir's live logs are made again)
        log_dir = partition.log_dir
        if log_dir in self.offline_dirs:
            return
        with self._io_nowait(log_dir):
            self._retire(log_dir, tp, DirKind.LIVE, guarded=False)
            if self._checkpoint_batch is not None:
                self._checkpoint_batch.add(log_dir)
            else:
                self._write_dir_checkpoints(log_dir)
        self._work_available()

    def batched_checkpoints(self) -> _CheckpointBatch:
        """Within it, deleting partitions writes each dir's checkpoints once, on leaving (as
        Kafka's ``asyncDelete`` of many partitions checkpoints once per dir): a StopReplica of
        a few thousand partitions wrote three checkpoint files, two fsyncs each, per partition,
        all on the event loop. Nothing else runs before they are written (no await within).
        Placements within it sum each dir's load once (:meth:`_least_loaded`). (A plain class,
        not a generator: the broker enters one per step of its node, every fetched partition.)
        """
        return _CheckpointBatch(self)

    def _end_checkpoint_batch(self) -> None:
        """Leaving the outermost :meth:`batched_checkpoints`: each touched dir's checkpoints."""
        dirs, self._checkpoint_batch = self._checkpoint_batch, None
        for log_dir in sorted(dirs or ()):
            if log_dir not in self.offline_dirs:
                with self._io_nowait(log_dir):
                    self._write_dir_checkpoints(log_dir)

    def alter_replica_log_dir(self, tp: TopicPartition, log_dir: str) -> ErrorCode:
        """AlterReplicaLogDirs for one partition (KIP-113 §1.1). Returns the error code.

        The move core decides (:func:`impl.storage.replica_move.decide_request`); this method
        steps what it decided and answers:

        * a dir that is not exactly one of ``log.dirs``: LOG_DIR_NOT_FOUND (57);
        * an offline destination, or an offline replica: KAFKA_STORAGE_ERROR (56);
        * a request that would create a ``tp.move`` (a new move or a redirect) while *any* log
          dir is offline: KAFKA_STORAGE_ERROR (56), nothing changes (Kafka: "a future log
          cannot be created while any dir is offline"). A cancel, or the destination already
          being moved to, is still accepted: a move in progress whose two dirs are online goes
          on when a third dir fails (it creates nothing on the failed dir);
        * a replica not hosted: the dir is remembered for its creation, REPLICA_NOT_AVAILABLE (9);
        * ``"any"`` or the current dir while moving: the move is cancelled (NONE);
        * the current dir (or "any") otherwise: nothing to do (NONE);
        * another dir while moving there: nothing to do; while moving elsewhere: redirected;
        * else a move starts (NONE); the copy runs in :meth:`run`'s movers.
        """
        self._placement_load = None
        partition = self._partitions.get(tp)
        decision = rm.decide_request(
            self._moves.get(tp, rm.Move(tp)), log_dir,
            configured_dirs=self.config.log_dirs,
            offline_dirs=self.offline_dirs,
            current_dir=None if partition is None else partition.log_dir,
            partition_offline=tp in self._offline_partitions,
            source_leo=0 if partition is None else partition.log_end_offset,
        )
        offline_before = self.offline_dirs
        if decision.input is not None:
            self._step(tp, decision.input)
        if decision.error is not None:
            return decision.error
        return rm.request_answer(log_dir, offline_before, self.offline_dirs)

    def move_state(self, tp: TopicPartition) -> rm.Move:
        """The move machine's state for ``tp`` (``NONE`` if never moved)."""
        return self._moves.get(tp, rm.Move(tp))

    def replica_dir_info(self, tp: TopicPartition) -> ReplicaDirInfo:
        """DescribeReplicaLogDirs for one replica (KIP-113 AdminClient ``ReplicaDirInfo``)."""
        partition = self._partitions.get(tp)
        move = self.move_state(tp)
        if partition is None:
            return ReplicaDirInfo(tp, None, None, 0, move.state, tp in self._offline_partitions)
        future = partition.future
        lag = partition.log_end_offset - future.log_end_offset if future is not None else 0
        return ReplicaDirInfo(
            tp, partition.log_dir, future.log_dir if future is not None else None, lag,
            move.state, partition.offline,
        )

    def describe(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> list[LogDirDescription]:
        """DescribeLogDirs for every configured dir (KIP-113 §3; sizes as KIP-827), of the
        hosted replicas among ``partitions`` (``None``: all): :meth:`describe_steps` in one go."""
        steps = self.describe_steps(partitions)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                described: list[LogDirDescription] = done.value
                return described

    def describe_steps(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> Generator[None, None, list[LogDirDescription]]:
        """:meth:`describe`, yielding after every :data:`DESCRIBE_PARTITIONS_PER_STEP`
        partitions walked, so that a shell serves others between steps (describing 32,000
        partitions on two dirs took 0.34 CPU-s in one go, each dir's walk sorting every hosted
        partition again).

        The partitions are sorted once, when the walk starts; each dir in turn walks them and
        describes each as it is when the walk reaches it (a replica deleted meanwhile is
        skipped), then reads its usage; a dir that went offline during its walk is described
        offline. Asked for some partitions, the walk visits only those (a request for three of
        32,000 walked all of them). Without a yield in between, the description is the one the
        dirs' walks in turn have always made."""
        if partitions is None:
            chosen = sorted(self._partitions)
        else:
            chosen = sorted({tp for tp in partitions if tp in self._partitions})
        result: list[LogDirDescription] = []
        walked = 0
        for log_dir in self.config.log_dirs:
            if log_dir in self.offline_dirs:
                result.append(LogDirDescription(
                    log_dir, False, ErrorCode.KAFKA_STORAGE_ERROR, -1, -1, ()
                ))
                continue
            replicas: list[ReplicaDescription] = []
            for tp in chosen:
                walked += 1
                if not walked % DESCRIBE_PARTITIONS_PER_STEP:
                    yield
                    if log_dir in self.offline_dirs:
                        break
                partition = self._partitions.get(tp)
                if partition is None or partition.offline:
                    continue
                log = partition.log
                if log.log_dir == log_dir:
                    lag = max(log.high_watermark - log.log_end_offset, 0)
                    replicas.append(ReplicaDescription(
                        tp, log.size_in_bytes, log.log_end_offset, lag, False
                    ))
                future = partition.future
                if future is not None and future.log_dir == log_dir:
                    replicas.append(ReplicaDescription(
                        tp, future.size_in_bytes, future.log_end_offset,
                        log.log_end_offset - future.log_end_offset, True,
                    ))
            try:
                if log_dir in self.offline_dirs:  # failed during the walk
                    raise OSError(f"{log_dir} went offline")
                usage = self.disk.disk_usage(log_dir)
            except OSError:
                if log_dir not in self.offline_dirs:
                    self._fail_dir(log_dir, ldf.LogDirEvent.IO_ERROR)
                result.append(LogDirDescription(
                    log_dir, False, ErrorCode.KAFKA_STORAGE_ERROR, -1, -1, ()
                ))
                continue
            result.append(LogDirDescription(
                log_dir, True, ErrorCode.NONE, usage.total_bytes, usage.usable_bytes,
                tuple(replicas),
            ))
        return result

    def set_throttle_rate(self, rate_bytes_per_second: int) -> None:
        """``intra.broker.throttled.rate``, changed live (shared by all movers)."""
        self._bucket.set_rate(rate_bytes_per_second, self.clock.monotonic_ns())
        self._work_available()

    @property
    def throttle_rate(self) -> int:
        """The current ``intra.broker.throttled.rate``."""
        return self._bucket.rate_bytes_per_second

    def set_mover_count(self, count: int) -> None:
        """``num.replica.alter.log.dirs.threads``, changed live."""
        assert count >= 1
        self._mover_count = count
        self._bucket.set_burst(self._burst_bytes(), self.clock.monotonic_ns())
        self._work_available()

    def _burst_bytes(self) -> int:
        # THROTTLE_BOUND allows one chunk per mover; the last admitted chunk is one of them
        return (self._mover_count - 1) * self.config.move_chunk_bytes

    # --- checkpoints, retention, deletion -------------------------------------------------------

    def _write_dir_checkpoints(
        self, log_dir: str, extra: Log | None = None, *, rewrite_high_watermarks: bool = False
    ) -> None:
        for _ in self._write_dir_checkpoint_steps(
            log_dir, extra, rewrite_high_watermarks=rewrite_high_watermarks
        ):
            pass

    def _write_dir_checkpoint_steps(
        self, log_dir: str, extra: Log | None = None, *, rewrite_high_watermarks: bool = False
    ) -> Generator[CheckpointSync, None, None]:
        """Write ``log_dir``'s changed checkpoints, yielding each file's two fsyncs before they
        run (:meth:`_write_checkpoint_steps`); each file's text is taken from the state when
        its write starts.

        The dir's live logs are gathered once for the three files, and again only after a
        yield (the partitions may have changed meanwhile); a file's text is made only when its
        entries changed: an idle pass over 100,000 partitions compares entries and writes
        nothing."""
        live: Mapping[TopicPartition, Log] | None = None
        for name in (LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
                     RECOVERY_POINT_CHECKPOINT):
            if log_dir in self.offline_dirs:
                return
            if live is None:
                live = self._live_logs_of(log_dir, extra)
            entries = self._checkpoint_entries_of(log_dir, name, live)
            rewrite = rewrite_high_watermarks and name == REPLICATION_OFFSET_CHECKPOINT
            if rewrite or self._checkpoints_written.get((log_dir, name)) != entries:
                live = None
                yield from self._write_checkpoint_steps(log_dir, name, entries)

    def _write_checkpoint_steps(
        self, log_dir: str, name: str, entries: dict[TopicPartition, int]
    ) -> Iterator[CheckpointSync]:
        """Write ``entries`` to ``log_dir``'s checkpoint ``name`` (:func:`write_atomically_steps`:
        temp, fsync, rename, dir fsync), yielding each fsync before it runs.

        The text is fixed now, from offsets that are durable now (a recovery point moves only
        once its flush's fsyncs are done, :meth:`Log.finish_flush`), so however late the
        rename comes, the file never claims more than the disk holds. A write that a later
        write of the same file overtook while its fsync was away (the other periodic pass, or
        a write that cannot wait: DeleteRecords, a truncation, a deletion, a swap) stops there:
        before its rename it leaves the temp file, which the later write recreated, untouched,
        and after it it records nothing (the later write's entries are the newer ones). Only
        then are the entries recorded as written."""
        key = (log_dir, name)
        write = self._checkpoint_writes.get(key, 0) + 1
        self._checkpoint_writes[key] = write
        steps = write_atomically_steps(self.disk, log_dir, name, format_offsets(entries))
        try:
            for sync in steps:
                yield sync
                if self._checkpoint_writes[key] != write:
                    return  # overtaken
        finally:
            steps.close()
        self._checkpoints_written[key] = entries
        self._checkpoint_entries[key] = entries

    def _layout_changed(self) -> None:
        """A partition came or went, went offline, or a copy of one was renamed, swapped or
        dropped: the dirs' served live logs are gathered again when next needed."""
        self._live_by_dir = None

    def _live_logs_of(self, log_dir: str, extra: Log | None) -> Mapping[TopicPartition, Log]:
        """The served live logs of ``log_dir`` (and ``extra``, a ``.move`` made durable for
        its swap); read-only (shared until the next :meth:`_layout_changed`)."""
        by_dir = self._live_by_dir
        if by_dir is None:
            by_dir = {}
            live_kind = DirKind.LIVE
            for tp, partition in self._partitions.items():
                log = partition.log
                if log.kind is live_kind and not partition.offline:
                    of_dir = by_dir.get(log.log_dir)
                    if of_dir is None:
                        of_dir = by_dir[log.log_dir] = {}
                    of_dir[tp] = log
            self._live_by_dir = by_dir
        live: Mapping[TopicPartition, Log] = by_dir.get(log_dir, {})
        if extra is not None:
            live = {**live, extra.tp: extra}
        return live

    def _checkpoint_entries_of(
        self, log_dir: str, name: str, live: Mapping[TopicPartition, Log]
    ) -> dict[TopicPartition, int]:
        """What ``log_dir``'s checkpoint ``name`` records: the offsets of ``live``, its served
        live logs (:meth:`_live_logs_of`), and a lost replica's entries as this dir last
        recorded them.

        A lost replica (offline, not served: recovery left its copies untouched, or its dir
        failed under a move) is decided again at a later start, which may promote the
        ``.move`` it left here (KIP-113 §3 rule 2 once the bad dir is back): that copy's HW
        and log start offset are the ones this dir recorded when the swap made it durable, and
        dropping them would bring back the records DeleteRecords or retention removed (seeds
        167 and 557). Apache Kafka loads every future log and checkpoints each dir's logs,
        future ones included; it has no untouched replica.
        """
        entries: dict[TopicPartition, int] = {}
        if self._lost:
            recorded = self._checkpoint_entries.get((log_dir, name), {})
            entries = {tp: recorded[tp] for tp in self._lost if tp in recorded}
        if name == LOG_START_OFFSET_CHECKPOINT:
            for tp in live:
                partition = self._partitions.get(tp)
                if partition is not None and partition.log_start_offset_floor > 0:
                    entries[tp] = partition.log_start_offset_floor
            return entries
        if name == REPLICATION_OFFSET_CHECKPOINT:
            entries.update((tp, log.high_watermark) for tp, log in live.items())
            return entries
        assert name == RECOVERY_POINT_CHECKPOINT, name
        entries.update((tp, log.recovery_point) for tp, log in live.items())
        return entries

    def write_dir_checkpoints(self, log_dir: str) -> None:
        """Write ``log_dir``'s checkpoints now (those whose text changed)."""
        self._write_dir_checkpoints(log_dir)

    def checkpoint_high_watermarks(self) -> None:
        """Write every online dir's HW checkpoint, changed or not, as Kafka does each
        ``replica.high.watermark.checkpoint.interval.ms``: the write is also what finds a dir
        that failed while idle (its ``OSError`` takes the dir offline, KIP-112)."""
        for _ in self.checkpoint_high_watermark_steps():
            pass

    def checkpoint_high_watermark_steps(self) -> Iterator[CheckpointSync]:
        """:meth:`checkpoint_high_watermarks`, yielding each checkpoint fsync before it runs (a
        runtime with an event loop runs it in a worker thread and serves others meanwhile; a
        driver that does not run it gets it run inline when it resumes the pass)."""
        for log_dir in self.config.log_dirs:
            if log_dir not in self.offline_dirs:
                yield from self._io_steps(log_dir, self._write_dir_checkpoint_steps(
                    log_dir, rewrite_high_watermarks=True))

    def checkpoint(self, *, flush: bool = True) -> None:
        """Fsync live logs (if ``flush``) and write every online dir's checkpoints."""
        for _ in self.checkpoint_steps(flush=flush):
            pass

    def checkpoint_steps(
        self, *, flush: bool = True
    ) -> Iterator[FlushSync | CheckpointSync | None]:
        """:meth:`checkpoint`, yielding after every :data:`CLEAN_FLUSHES_PER_STEP` partitions
        that had nothing to fsync, for each partition with bytes to fsync its
        :class:`FlushSync` before the fsyncs, and each checkpoint file's two fsyncs (a
        :class:`CheckpointSync`, :meth:`_write_checkpoint_steps`) before they run.
        Between steps the partitions may change: each is re-checked when reached.

        A runtime with an event loop runs a yielded :class:`FlushSync` in a worker thread
        (:meth:`FlushSync.run`) and serves requests meanwhile, as Kafka flushes on its scheduler
        thread: a second of appends can take tens of milliseconds to reach the disk. A driver
        that does not run it gets it run inline when it resumes the pass. Only then does the
        partition's recovery point move (:meth:`Log.finish_flush`), so the recovery-point
        checkpoint written at the end of the pass never names an offset not yet durable.

        An idle partition's flush only moves its recovery point: yielding after each would make
        the pass over 100,000 idle partitions 100,000 turns of the event loop, every second."""
        if flush:
            clean = 0
            for tp, partition in list(self._partitions.items()):
                if self._partitions.get(tp) is not partition or partition.offline:
                    continue
                log = partition.log
                if not log.unflushed:
                    if log.recovery_point != log.log_end_offset:
                        with self._io_nowait(log.log_dir):
                            log.flush()  # nothing to fsync: the recovery point moves to the LEO
                    clean += 1
                    if clean == CLEAN_FLUSHES_PER_STEP:
                        clean = 0
                        yield None
                    continue
                clean = 0
                sync: FlushSync | None = None
                with self._io_nowait(partition.log_dir):
                    sync = log.start_flush()
                if sync is None:
                    continue
                try:
                    yield sync
                    sync.run()  # inline, if the driver did not run it
                finally:
                    sync.close()
                with self._io_nowait(partition.log_dir):
                    if sync.error is not None:
                        raise sync.error
                    if (self._partitions.get(tp) is partition and partition.log is log
                            and not partition.offline):
                        log.finish_flush(sync)
        for log_dir in self.config.log_dirs:
            if log_dir not in self.offline_dirs:
                yield from self._io_steps(log_dir, self._write_dir_checkpoint_steps(log_dir))

    def _io_steps(self, log_dir: str,
                  steps: Generator[CheckpointSync, None, None]) -> Iterator[CheckpointSync]:
        """Drive ``steps`` with each step inside :meth:`_io_nowait` (an ``OSError`` takes
        ``log_dir`` offline and ends them), passing on what they yield."""
        try:
            while True:
                step: CheckpointSync | None = None
                with self._io_nowait(log_dir):
                    try:
                        step = next(steps)
                    except StopIteration:
                        return
                if log_dir in self.offline_dirs or step is None:
                    return
                yield step
        finally:
            steps.close()

    def enforce_retention(self) -> int:
        """Apply ``log.retention.ms``/``.bytes``; a ``.move`` mirror drops the same segments."""
        deleted = 0
        for count in self.enforce_retention_steps():
            deleted += count
        return deleted

    def enforce_retention_steps(self) -> Iterator[int]:
        """:meth:`enforce_retention`, yielding after each partition the segments it deleted."""
        now_ms = self.clock.wall_ms()
        for tp, partition in list(self._partitions.items()):
            if self._partitions.get(tp) is not partition or partition.offline:
                continue
            deleted = 0
            with self._io_nowait(partition.log_dir):
                target = max(partition.log.retention_target(now_ms),
                             min(partition.log_start_offset_floor, partition.log.high_watermark))
                deleted = partition.log.delete_segments_below(target)
                if partition.future is not None:
                    partition.future.delete_segments_below(target)
            yield deleted

    def delete_pending_nowait(self, max_count: int | None = None) -> int:
        """Remove the queued ``.delete`` dirs that may go now (at most ``max_count`` of them:
        a runtime with an event loop removes one at a time and serves others in between);
        returns how many were removed.

        A guarded request (:class:`_DeleteRequest`) is removed only while the partition is served
        from an online dir whose log end offset is at least the doomed copy's: otherwise that
        copy may be the last one (model variant ``unguarded_async_delete``). A kept request stays
        queued and is retried; the reason is logged once.
        """
        done = 0
        kept: list[_DeleteRequest] = []
        while self._pending_deletes and (max_count is None or done < max_count):
            request = self._pending_deletes.pop(0)
            if request.log_dir in self.offline_dirs:
                continue
            path = f"{request.log_dir}/{dir_name(request.tp, DirKind.DELETE)}"
            blocked: str | None = None
            with self._io_nowait(request.log_dir):
                if self.disk.exists(path):
                    blocked = self._delete_blocked(request)
            if request.log_dir in self.offline_dirs:
                continue
            if blocked is not None:
                if request.kept_because != blocked:
                    _LOG.warning("keeping %s: %s", path, blocked)
                request.kept_because = blocked
                kept.append(request)
                continue
            with self._io_nowait(request.log_dir):
                if self.disk.exists(path):
                    self._delete_tree(path)
                    self.disk.fsync_dir(request.log_dir)
                done += 1
                move = self._moves.get(request.tp)
                if move is not None and move.state is MoveState.DONE:
                    self._step(request.tp, rm.MoveInput(rm.MoveEvent.DELETE_COMPLETED))
        self._pending_deletes[:0] = kept
        return done

    def _delete_blocked(self, request: _DeleteRequest) -> str | None:
        """Why a queued ``tp.delete`` must stay (``None``: it may go). May read its LEO."""
        if not request.guarded:
            return None
        partition = self._partitions.get(request.tp)
        if partition is None or partition.offline or partition.log_dir in self.offline_dirs:
            return "no online dir serves the partition; the copy may be the last one"
        if request.log_end_offset is None:
            doomed = Log.load(self.env, request.log_dir, request.tp, DirKind.DELETE)
            request.log_end_offset = doomed.log_end_offset
        if partition.log_end_offset < request.log_end_offset:
            return (
                f"the served copy on {partition.log_dir} ends at offset "
                f"{partition.log_end_offset}, before this copy's {request.log_end_offset}"
            )
        # The removal destroys a copy: the served one is looked at first, so that a disk that
        # died since its last I/O is noticed now rather than after its only peer is gone.
        probe = self._io_nowait(partition.log_dir)
        present = False
        with probe:
            present = self.disk.exists(f"{partition.log_dir}/{dir_name(request.tp)}")
        if probe.failed or not present:
            return f"the served copy's dir {partition.log_dir} failed"
        return None

    # --- what the runtime lends ----------------------------------------------------------------

    def set_cpu_offload(self, offload: CpuOffload | None) -> None:
        """How CPU-heavy work (validating big or compressed batches) leaves the event loop: the
        trio runtime lends ``trio.to_thread.run_sync``; without one it runs inline."""
        self._cpu_offload = offload

    @property
    def has_offload(self) -> bool:
        """Whether a runtime lent worker threads (:meth:`set_cpu_offload`)."""
        return self._cpu_offload is not None

    async def run_cpu_work(self, function: Callable[..., _T], *args: Any) -> _T:
        """Run ``function(*args)`` through the runtime's offload (inline without one)."""
        if self._cpu_offload is None:
            return function(*args)
        result: _T = await self._cpu_offload(function, *args)
        return result

    # --- the one mover scheduler ---------------------------------------------------------------

    def new_lock(self) -> PartitionLock:
        """A partition lock from the runtime's factory."""
        return self._lock_factory()

    def set_work_listener(self, listener: Callable[[], None] | None) -> None:
        """The runtime's wake-up, called whenever a mover or a ``.delete`` may have work."""
        self._work_listener = listener

    def _work_available(self) -> None:
        if self._work_listener is not None:
            self._work_listener()

    def moves(self) -> dict[TopicPartition, rm.Move]:
        """Every replica's move that is not NONE (a copy)."""
        return dict(self._moves)

    def mover_slots(self) -> list[TopicPartition]:
        """The replicas that hold a mover slot now, in partition order.

        ``num.replica.alter.log.dirs.threads`` slots: a replica keeps its slot from its first
        chunk until its move is no longer COPYING or CAUGHT_UP (done, cancelled, failed); a free
        slot goes to the first moving replica (in partition order) without one. Every runtime
        asks this; none keeps a scheduler of its own.
        """
        active = self._movers_active
        for tp in [tp for tp in active if self._moving(tp) is None]:
            active.discard(tp)
        if len(active) < self._mover_count:
            # only the moves copying now, not every move ever recorded (a placement remembered
            # for each of millions of partitions must not cost every wake-up a sort of them all)
            for tp in sorted(self._copying):
                if len(active) >= self._mover_count:
                    break
                if tp not in active and tp in self._partitions:
                    active.add(tp)
        return sorted(active)

    def _moving(self, tp: TopicPartition) -> rm.Move | None:
        move = self._moves.get(tp)
        if move is None or move.state not in (MoveState.COPYING, MoveState.CAUGHT_UP):
            return None
        if tp not in self._partitions:
            return None
        return move

    def mover_action(self, tp: TopicPartition, now_ns: int) -> MoverAction | None:
        """What the mover of ``tp`` does next (``None``: nothing, its slot is free).

        COPYING: copy a chunk, or wait while the shared throttle admits nothing
        (``intra.broker.throttled.rate``, THROTTLE_BOUND); CAUGHT_UP: swap under the lock.
        """
        move = self._moving(tp)
        if move is None:
            self._movers_active.discard(tp)
            return None
        if move.state is MoveState.COPYING:
            wait_ns = self._bucket.wait_ns(now_ns)
            return MoverWait(wait_ns) if wait_ns > 0 else MoverCopy()
        return MoverSwap()

    def throttle_wait_ns(self, now_ns: int) -> int:
        """How long the shared throttle admits nothing (0: a chunk may go now)."""
        return self._bucket.wait_ns(now_ns)

    def swap_locked_nowait(self, tp: TopicPartition) -> None:
        """Steps 5-9 for a CAUGHT_UP move whose partition lock the caller holds; the swap
        releases the lock."""
        for _ in self.swap_steps(tp):
            pass

    def swap_steps(self, tp: TopicPartition) -> Iterator[rm.MoveEffect]:
        """:meth:`swap_locked_nowait` one effect at a time: each effect of the swap
        (``CopyRemaining``, ``SyncDest``, ``RenameSourceToDelete``, ``RenameMoveToLive``,
        ``SwapLog``, ``ReleaseLock``, ``DeleteAsync``) is yielded just before it is carried out,
        so a driver can act between them (the simulators append inside the locked window,
        crash before an effect). Exhaust it to finish the swap."""
        yield from self._steps(tp, rm.MoveInput(rm.MoveEvent.LOCK_ACQUIRED))
        assert not self._moves[tp].lock_held, "the swap returned holding the partition lock"

    def copy_step_nowait(self, tp: TopicPartition, max_bytes: int) -> int:
        """One mover step for ``tp`` while COPYING: copy a chunk (admitting it to the throttle
        bucket) and report CHUNK_COPIED or CAUGHT_UP. Returns the bytes copied."""
        partition = self._partitions[tp]
        future = partition.future
        assert future is not None
        copied = 0

        def admit(byte_count: int) -> None:  # before the bytes move: THROTTLE_BOUND's count
            self._bucket.charge(byte_count, self.clock.monotonic_ns())

        with self._move_io(tp, future.log_dir):
            copied = mover.copy_chunk(partition.log, future, max_bytes, admit)
        move = self._moves[tp]
        if move.state is not MoveState.COPYING or partition.future is not future:
            return copied
        self._step(tp, rm.copy_completion(partition.log_end_offset, future.log_end_offset))
        return copied

    def close(self, clean_since_epoch: int | None = None) -> None:
        """Stop background tasks and write checkpoints (flushing every live log).

        Args:
            clean_since_epoch: a clean shutdown; every shutdown since the incarnation
                registered with this broker epoch was clean: once the logs and checkpoints are
                durable, every online dir gets the clean-shutdown marker naming it (a dir that
                fails on the way gets none).
        """
        self.checkpoint(flush=True)
        if clean_since_epoch is not None and clean_since_epoch >= 0:
            for log_dir in self.config.log_dirs:
                if log_dir not in self.offline_dirs:
                    with self._io_nowait(log_dir):
                        clean_shutdown.write_markers(self.disk, [log_dir], clean_since_epoch)
        self.closed = True
        self._work_available()


class _IoGuard:
    """An ``OSError`` takes its dir offline and becomes :class:`LogDirOffline`."""

    def __init__(self, manager: LogManager, log_dir: str) -> None:
        self._manager = manager
        self._log_dir = log_dir
        #: an ``OSError`` was swallowed
        self.failed = False

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, error: object, traceback: object) -> None:
        if isinstance(error, OSError):
            failed = self._manager._dir_of(error, self._log_dir)
            self._manager._fail_dir(failed, ldf.LogDirEvent.IO_ERROR)
            raise LogDirOffline(failed, f"log dir {failed} failed: {error}") from error


class _IoSwallow:
    """An ``OSError`` takes its dir offline and is swallowed (background work)."""

    def __init__(self, manager: LogManager, log_dir: str) -> None:
        self._manager = manager
        self._log_dir = log_dir
        #: an ``OSError`` was swallowed
        self.failed = False

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, error: object, traceback: object) -> bool:
        if isinstance(error, OSError):
            self.failed = True
            failed = self._manager._dir_of(error, self._log_dir)
            self._manager._fail_dir(failed, ldf.LogDirEvent.IO_ERROR)
            return True
        return False


class _MoveIoGuard:
    """An ``OSError`` during a move effect fails its dir and the move (DIR_FAILED)."""

    def __init__(self, manager: LogManager, tp: TopicPartition, default_dir: str) -> None:
        self._manager = manager
        self._tp = tp
        self._default_dir = default_dir
        self.failed = False

    def __enter__(self) -> _MoveIoGuard:
        return self

    def __exit__(self, kind: object, error: object, traceback: object) -> bool:
        if isinstance(error, OSError):
            self.failed = True
            self._manager._move_failed(self._tp, error, self._default_dir)
            return True
        return False


class _CheckpointBatch:
    """One :meth:`LogManager.batched_checkpoints` block; a nested one does nothing."""

    __slots__ = ("_manager", "_outermost")

    def __init__(self, manager: LogManager) -> None:
        self._manager = manager
        self._outermost = False

    def __enter__(self) -> None:
        manager = self._manager
        if manager._checkpoint_batch is None:  # (the manager's own block state)
            self._outermost = True
            manager._checkpoint_batch = set()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self._outermost:
            self._manager._end_checkpoint_batch()
