"""The first deterministic simulator slice: replica moves, crash recovery and dir failure.

Theory of operation
-------------------
Each simulated broker is the storage engine's real :class:`impl.storage.manager.LogManager`
(the same object the trio broker builds) over a :class:`conformance.disk.SimDisk` with
``log_dirs`` dirs, a :class:`conformance.clock.SimClock` and a trace sink. The simulator is a
second shell around the same cores: where the trio runtime awaits (the mover loop, the partition
lock), the simulator decides, from the seed, what runs next.

One seed decides everything, through named streams of :class:`conformance.rng.SimRng`:

* ``workload`` draws one operation per step — append a batch, flush, checkpoint, request a move
  (AlterReplicaLogDirs; a request while moving is a redirect, ``"any"`` a cancel), a mover step,
  a throttle change, a read, the background deletion of ``.delete`` dirs, an attempt to recreate
  a lost replica — independently of the system's state, so that removing a fault does not change
  the operations (the shrinker relies on it);
* ``faults`` plans the fault schedule up front (:func:`plan_faults`): crashes at a step boundary,
  in the middle of an operation (before its n-th disk mutation) or just before a given effect of
  a swap, a crash right after an unflushed append (a torn tail), a failed dir (EIO), a dir
  unreadable at the next start; from a stream of its own (``disk-faults``), the partial disk
  faults: a dir whose writes alone or reads alone fail, one failing file, a full disk, and a
  crash that tears an unflushed write in the middle of a segment;
* ``broker-<b>/…`` streams decide the crash's losses and the interleavings.

Concurrency: a producer may arrive at any effect point of a move in the locked window
(``CAUGHT_UP``/``SWAPPING``). With the partition lock held it waits (the append is simply not
taken there); in the ``unlocked_swap`` variant the lock does not exclude it — Apache Kafka's
KAFKA-5165-style race the lock exists to prevent.

After every step the end-to-end checks run (``MOVE_SINGLE_LIVE``, ``DIR_FAILURE_ISOLATION``,
served logs are ``tp`` dirs); every ``verify_interval`` steps, after every restart and at the end
every online partition is read back whole (``MOVE_NO_LOSS``: every acknowledged batch that was
durable is there; ``READ_CONSISTENT``: batches contiguous, no duplicate, no reordering, CRCs and
contents as acknowledged). Every trace event also goes to the online trace checker.

``impl.storage.manager`` has no event loop: the simulator opens it with :class:`SimLock` as each
partition's lock and drives the same synchronous entry points a runtime does
(``append_as_leader_nowait``, ``copy_step_nowait``, ``swap_locked_nowait``, and the mover
scheduler's ``mover_slots``/``mover_action``).

This module is a sans-IO core: it imports no I/O module itself.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from conformance.cleaner_sim import CleanerDriver, check_compacted, keyed_batch, read_records
from conformance.clock import SimClock
from conformance.disk import SimDisk, SimulatedCrash
from conformance.recovery_check import StartupView, compare, model_decision
from conformance.rng import SimRng
from conformance.trace_check import Abstraction, TraceChecker, TraceVerdict
from impl.storage import record_batch as rb
from impl.storage import replica_move as rm
from impl.storage.checkpoint import CheckpointSync
from impl.storage.config import UNLIMITED_RATE, StorageConfig
from impl.storage.errors import CorruptBatch, StorageError
from impl.storage.log import FlushSync
from impl.storage.log_config import LogConfig
from impl.storage.manager import LogManager, MoverSwap, MoverWait, PartitionLog
from impl.storage.names import DirKind, TopicPartition, dir_name, parse_dir_name
from impl.trace import TraceEvent

__sans_io__ = True


#: The implementation variants the simulator can run (see :class:`SimConfig.variant`).
VARIANTS: dict[str, str] = {
    "shipped": "the implementation as it ships",
    "unlocked_swap": (
        "final catch-up and swap not excluded by the partition lock: a produce request can "
        "append to the source after the final catch-up (the bug KIP-113 step 4 prevents)"
    ),
    "swap_before_durable": (
        "the swap renames before tp.move is durable: the destination's data and dir fsyncs "
        "of the swap do not happen (Apache Kafka's order)"
    ),
    "clean_active_segment": (
        "the log cleaner's range reaches into the active segment (needs --compacted): "
        "COMPACTION_OFFSETS_STABLE's guard, refused by model/log_cleaner.py"
    ),
}

#: Fault kinds, in the order the planner weighs them.
FAULT_KINDS = (
    "crash",
    "crash_mid_operation",
    "crash_in_swap",
    "torn_tail",
    "dir_failure",
    "unreadable_at_startup",
    "dir_repaired",
    # the partial disk faults (planned from their own stream: see plan_faults)
    "dir_read_only",
    "dir_read_errors",
    "file_failure",
    "disk_full",
    "torn_middle",
    # the composite faults: a disk failure at the moment a decision depends on it (planned
    # from their own stream too)
    "redirect_off_failing",
    "file_failure_at_restart",
    "fail_after_swap",
)

#: The composite faults (see :meth:`BrokerWorld.inject`).
_COMPOSITE_FAULTS = ("redirect_off_failing", "file_failure_at_restart", "fail_after_swap")

#: The partial faults that take a dir out (they count against the ``log_dirs - 1`` budget).
_PARTIAL_DIR_FAULTS = ("dir_read_only", "dir_read_errors", "file_failure", "disk_full")

#: The move effects a ``crash_in_swap`` fault may strike just before (its ``target`` indexes it).
SWAP_EFFECTS = (
    "CopyRemaining",
    "SyncDest",
    "RenameSourceToDelete",
    "RenameMoveToLive",
    "SwapLog",
    "ReleaseLock",
    "DeleteAsync",
)

_MOVING = (rm.MoveState.COPYING, rm.MoveState.CAUGHT_UP)
_LOCKED_WINDOW = (rm.MoveState.CAUGHT_UP, rm.MoveState.SWAPPING)
_THROTTLE_RATES = (UNLIMITED_RATE, 1 << 20, 64 << 10, 8 << 10)
#: The topic of the compacted partitions (``SimConfig.compacted``).
COMPACTED_TOPIC = "c"


@dataclass(frozen=True, slots=True)
class SimConfig:
    """What one simulated run looks like (everything else comes from the seed).

    Attributes:
        brokers: simulated brokers (independent in this slice: no replication between them).
        log_dirs: log dirs per broker.
        partitions: partitions per broker.
        steps: workload operations.
        fault_probability: chance that a step carries a fault.
        variant: one of :data:`VARIANTS`.
        verify_interval: read every partition back whole every this many steps.
        segment_bytes: ``log.segment.bytes`` (small, so that moves cross segments).
        chunk_bytes: a mover's chunk.
        trace_check: replay the trace in the models as it is emitted.
        compacted: how many of the partitions (the last ones, topic ``c``) are
            ``cleanup.policy=compact``, with keyed records and the log cleaner racing the rest
            of the workload (:mod:`conformance.cleaner_sim`); 0 leaves every run as before.
    """

    brokers: int = 1
    log_dirs: int = 3
    partitions: int = 3
    steps: int = 200
    fault_probability: float = 0.03
    variant: str = "shipped"
    verify_interval: int = 20
    segment_bytes: int = 2048
    chunk_bytes: int = 700
    trace_check: bool = True
    compacted: int = 0

    def __post_init__(self) -> None:
        assert self.brokers >= 1
        assert self.log_dirs >= 2, "a move needs two dirs"
        assert self.partitions >= 1
        assert self.steps >= 0
        assert 0.0 <= self.fault_probability <= 1.0
        assert self.variant in VARIANTS, f"unknown variant {self.variant!r}"
        assert self.verify_interval >= 1
        assert 0 <= self.compacted <= self.partitions
        assert self.variant != "clean_active_segment" or self.compacted > 0, (
            "the clean_active_segment variant needs compacted partitions")


@dataclass(frozen=True, slots=True, order=True)
class Fault:
    """One planned fault.

    Attributes:
        step: the step it strikes at (before that step's operation).
        kind: one of :data:`FAULT_KINDS`.
        broker: the broker it strikes.
        target: the dir index (``dir_failure``, ``unreadable_at_startup``, ``dir_read_only``,
            ``dir_read_errors``), the disk mutation count (``crash_mid_operation``), the index
            in :data:`SWAP_EFFECTS` (``crash_in_swap``); for ``file_failure`` and ``disk_full``
            the dir index plus 16 times the file's rank in the dir's sorted file list / the free
            bytes left; unused by the other kinds.
    """

    step: int
    kind: str
    broker: int = 0
    target: int = 0

    def apply(self, world: BrokerWorld) -> None:
        """Inject this fault into ``world``."""
        world.inject(self)

    def spec(self) -> str:
        """``step:kind:broker:target``, the form ``--faults`` takes."""
        return f"{self.step}:{self.kind}:{self.broker}:{self.target}"

    @staticmethod
    def parse(spec: str) -> Fault:
        """The inverse of :meth:`spec`.

        Raises:
            ValueError: not a fault spec.
        """
        parts = spec.strip().split(":")
        if len(parts) != 4 or parts[1] not in FAULT_KINDS:
            raise ValueError(f"not a fault spec (step:kind:broker:target): {spec!r}")
        step, kind, broker, target = parts
        return Fault(int(step), kind, int(broker), int(target))


def format_faults(faults: Sequence[Fault]) -> str:
    """Faults as a comma-separated list of specs ("" for none)."""
    return ",".join(fault.spec() for fault in faults)


def parse_faults(text: str) -> tuple[Fault, ...]:
    """The inverse of :func:`format_faults`.

    Raises:
        ValueError: a spec is malformed.
    """
    return tuple(sorted(Fault.parse(spec) for spec in text.split(",") if spec.strip()))


def plan_faults(seed: int, config: SimConfig, root: SimRng | None = None) -> tuple[Fault, ...]:
    """The fault schedule of a run: drawn from the seed's ``faults`` stream alone.

    At most ``log_dirs - 1`` distinct dirs of a broker ever fail, so something always remains.

    Args:
        seed: the run's seed.
        config: the run's shape.
        root: the streams to draw from (``SimRng(seed)``: the cluster simulator's storage
            broker passes a stream of its own).

    Returns:
        The faults, ordered by step.
    """
    if root is None:
        root = SimRng(seed)
    rng = root.stream("faults")
    faults: list[Fault] = []
    failed: dict[int, set[int]] = {}
    for step in range(1, config.steps):
        if not rng.chance(config.fault_probability):
            continue
        broker = rng.randrange(config.brokers)
        roll = rng.randrange(100)
        if roll < 20:
            faults.append(Fault(step, "crash", broker))
        elif roll < 40:
            faults.append(Fault(step, "crash_mid_operation", broker, rng.randint(1, 40)))
        elif roll < 65:
            faults.append(Fault(step, "crash_in_swap", broker, rng.randrange(len(SWAP_EFFECTS))))
        elif roll < 80:
            faults.append(Fault(step, "torn_tail", broker))
        else:
            kind = "dir_failure" if roll < 92 else "unreadable_at_startup"
            target = rng.randrange(config.log_dirs)
            dirs = failed.setdefault(broker, set())
            if target not in dirs and len(dirs) >= config.log_dirs - 1:
                continue
            dirs.add(target)
            faults.append(Fault(step, kind, broker, target))
    # Repairs come from their own stream, so that they leave the other faults unchanged.
    repairs = root.stream("repairs")
    for step in range(1, config.steps):
        if repairs.chance(config.fault_probability / 4):
            faults.append(Fault(step, "dir_repaired", repairs.randrange(config.brokers)))
    # The partial disk faults too (reads or writes alone failing, one file failing, a full
    # disk, a crash that tears an unflushed write in the middle of a segment).
    partial = root.stream("disk-faults")
    for step in range(1, config.steps):
        if not partial.chance(config.fault_probability / 2):
            continue
        broker = partial.randrange(config.brokers)
        roll = partial.randrange(100)
        target = partial.randrange(config.log_dirs)
        if roll < 30:
            faults.append(Fault(step, "torn_middle", broker, partial.randrange(1 << 16)))
            continue
        kind = _PARTIAL_DIR_FAULTS[roll % len(_PARTIAL_DIR_FAULTS)]
        dirs = failed.setdefault(broker, set())
        if target not in dirs and len(dirs) >= config.log_dirs - 1:
            continue
        dirs.add(target)
        extra = partial.randrange(1 << 12) if kind in ("file_failure", "disk_full") else 0
        faults.append(Fault(step, kind, broker, target + 16 * extra))
    # The composite faults: a disk fails just when a decision depends on it (a redirect off a
    # failing destination, a failing segment read during startup recovery, the served copy's
    # dir failing while the swap's tp.delete waits for removal).
    composite = root.stream("composite-faults")
    for step in range(1, config.steps):
        if composite.chance(config.fault_probability / 3):
            faults.append(Fault(step, composite.choice(_COMPOSITE_FAULTS),
                                composite.randrange(config.brokers),
                                composite.randrange(1 << 16)))
    return tuple(sorted(faults))


@dataclass(frozen=True, slots=True)
class Violation:
    """What an end-to-end check (or the trace checker) found."""

    invariant: str
    kind: str
    message: str
    step: int


@dataclass(frozen=True, slots=True)
class SimOutcome:
    """Everything one simulated run produced.

    Attributes:
        seed: the seed.
        config: the run's shape.
        faults: the fault schedule that ran.
        violation: the first violation, or ``None``.
        steps: steps run (fewer than configured when a violation stopped the run).
        events: trace events emitted.
        trace: the trace (kept only when asked for).
        trace_digest: SHA-256 of the trace's JSON lines.
        trace_verdict: the trace checker's verdict.
        restarts: crashes survived.
        recoveries_checked: startup decisions compared with the model's classification.
        acknowledged_batches: appends that returned.
        moves_done: moves that reached ``DONE``.
    """

    seed: int
    config: SimConfig
    faults: tuple[Fault, ...]
    violation: Violation | None
    steps: int
    events: int
    trace: tuple[TraceEvent, ...]
    trace_digest: str
    trace_verdict: TraceVerdict
    restarts: int
    recoveries_checked: int
    acknowledged_batches: int
    moves_done: int


class SimLock:
    """The partition lock of the simulator (the trio lock's interface, never suspending).

    Args:
        excludes: ``False`` reproduces a swap not protected by the lock (variant
            ``unlocked_swap``): acquiring always succeeds.
    """

    def __init__(self, excludes: bool = True) -> None:
        self.excludes = excludes
        self._held = False

    def locked(self) -> bool:
        """Whether the lock is held."""
        return self._held

    def acquire_nowait(self) -> None:
        """Take the lock; in the simulator nobody ever waits, so contention is a bug."""
        assert not (self.excludes and self._held), "simulated lock contention"
        self._held = True

    def release(self) -> None:
        """Release the lock."""
        assert self._held or not self.excludes, "release of a free lock"
        self._held = False

    async def acquire(self) -> None:
        """Take the lock (never suspends)."""
        self.acquire_nowait()

    async def __aenter__(self) -> None:
        self.acquire_nowait()

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()


class _BrokerSink:
    """Tags every event's subject with the broker (``t-0@1``) and forwards it."""

    def __init__(self, broker: int, emit: Callable[[TraceEvent], None]) -> None:
        self._suffix = f"@{broker}"
        self._emit = emit

    def emit(self, event: TraceEvent) -> None:
        self._emit(TraceEvent(
            event.machine, event.event, event.subject + self._suffix, event.state_before,
            event.state_after, event.fields,
        ))


class ViolationFound(Exception):  # noqa: N818 (a verdict, not an error of the simulator)
    """Raised by a check to stop the run."""

    def __init__(self, invariant: str, message: str) -> None:
        super().__init__(f"{invariant}: {message}")
        self.invariant = invariant
        self.message = message


@dataclass
class _PartitionBook:
    """What the simulator knows a partition must hold."""

    #: acknowledged batches: (base offset, next offset, CRC-32C), in offset order
    batches: list[tuple[int, int, int]] = field(default_factory=list)
    #: batches below this offset were made durable (flush, checkpoint, a swap)
    durable_offset: int = 0
    #: the batch being appended when a crash struck: (record count, CRC-32C)
    in_flight: tuple[int, int] | None = None
    #: the partition may not be served (its dir failed, or recovery said so)
    offline: bool = False
    #: the log start offset DeleteRecords or retention moved to (batches below are gone)
    start_offset: int = 0

    @property
    def end_offset(self) -> int:
        return self.batches[-1][1] if self.batches else self.start_offset


#: The end of a flush pass (:meth:`BrokerWorld.flush_pass_step`).
_PASS_DONE = object()


class BrokerWorld:
    """One simulated broker: a real LogManager over a simulated disk, and what it must hold.

    Args:
        broker: the broker id.
        config: the run's shape.
        clock: the run's clock.
        rng: this broker's stream.
        emit: where trace events go.
    """

    def __init__(
        self,
        broker: int,
        config: SimConfig,
        clock: SimClock,
        rng: SimRng,
        emit: Callable[[TraceEvent], None],
    ) -> None:
        self.broker = broker
        self.config = config
        self.clock = clock
        self.rng = rng
        self._crash_rng = rng.stream("crash")
        self._interleave_rng = rng.stream("interleave")
        self._extra_rng = rng.stream("extra")
        self.sink = _BrokerSink(broker, emit)
        self.log_dirs = tuple(
            f"/sim/broker-{broker}/data-{index}" for index in range(config.log_dirs)
        )
        self.disk = SimDisk(self.log_dirs)
        self.storage_config = StorageConfig(
            log_dirs=self.log_dirs,
            broker_id=broker,
            segment_bytes=config.segment_bytes,
            index_interval_bytes=256,
            move_chunk_bytes=config.chunk_bytes,
        )
        plain = config.partitions - config.compacted
        self.tps = tuple(TopicPartition("t", index) for index in range(plain)) + tuple(
            TopicPartition(COMPACTED_TOPIC, index) for index in range(config.compacted))
        self.books = {tp: _PartitionBook() for tp in self.tps}
        #: compacted partitions: offset -> (key, value) of every acknowledged record
        self.records: dict[TopicPartition, dict[int, tuple[bytes, bytes]]] = {
            tp: {} for tp in self.tps if tp.topic == COMPACTED_TOPIC}
        self._cleaner_rng = rng.stream("cleaner")
        self.cleaner: CleanerDriver | None = None
        #: compacted partitions: what the cleaner may have cleaned below, across restarts (the
        #: cleaner point read back after a crash may lag the segments it had replaced)
        self.clean_bounds: dict[TopicPartition, int] = {}
        #: compacted partitions: the highest HW reached (a truncation stays above it, as a
        #: follower's never goes below its leader's HW)
        self.committed: dict[TopicPartition, int] = {}
        #: compacted partitions: records that may be on disk without being acknowledged, per
        #: offset: above a truncation (a crash may bring them back: the deletion of a segment
        #: file is durable only with its dir), or of a refused append
        self.unconfirmed: dict[TopicPartition, dict[int, set[tuple[bytes, bytes]]]] = {}
        self.restarts = 0
        self.recoveries_checked = 0
        self.recoveries_unchecked = 0
        self.acknowledged_batches = 0
        self.moves_done = 0
        self._sequence = 0
        self._swap_crash: str | None = None
        self._unreadable_next_start: set[int] = set()
        self._scramble_next_crash = False
        self._live: dict[TopicPartition, list[str]] = {}
        self._live_version = -1
        #: a flush pass in progress (:meth:`flush_pass_step`) and its handed-over fsyncs: the
        #: sync, the replica it was taken on and the acknowledged end then; or a checkpoint
        #: file's handed-over fsync
        self._flush_pass: Iterator[FlushSync | CheckpointSync | None] | None = None
        self._flush_pending: tuple[
            FlushSync, PartitionLog, int, tuple[tuple[int, int, int], ...]] | None = None
        self._checkpoint_pending: CheckpointSync | None = None
        self.manager = self._open()
        for tp in self.tps:
            self.manager.create(tp, is_new=True)
        self.manager.checkpoint()

    # --- life cycle --------------------------------------------------------------------------

    def _open(self) -> LogManager:
        manager = LogManager.open(
            self.storage_config, disk=self.disk, clock=self.clock, trace=self.sink,
            lock_factory=self._new_lock,
        )
        if self.config.compacted:
            manager.set_log_config(COMPACTED_TOPIC, LogConfig(
                segment_bytes=self.config.segment_bytes,
                cleanup_policy=frozenset({"compact"}), min_cleanable_dirty_ratio=0.01))
            self.cleaner = CleanerDriver(
                manager, plant_active_segment=self.config.variant == "clean_active_segment")
        return manager

    def _new_lock(self) -> SimLock:
        """Each partition's lock (variant ``unlocked_swap``: one that excludes nothing)."""
        return SimLock(self.config.variant != "unlocked_swap")

    def _lock(self, partition: PartitionLog) -> SimLock:
        lock: object = partition.lock
        assert isinstance(lock, SimLock)
        return lock

    def crash_and_restart(self) -> None:
        """The process dies: memory is lost, the disk keeps what the contract says; restart."""
        for tp in self.tps:
            move = self.manager.move_state(tp)
            if move.state is not rm.MoveState.NONE:
                self.sink.emit(rm.step(move, rm.MoveInput(rm.MoveEvent.CRASHED)).trace)
        if self.cleaner is not None:
            for tp in self.records:
                self.clean_bounds[tp] = max(self.clean_bounds.get(tp, 0),
                                            self.cleaner.cleaned_bound(tp))
            self.cleaner.abandon()
        self.disk.arm_crash(None)
        self.disk.set_fsync_effective(True)
        self._swap_crash = None
        self._flush_pass = None  # the process and its pass die; the fsyncs' handles with it
        self._flush_pending = None
        self._checkpoint_pending = None
        self.disk.crash(self._crash_rng, scramble=self._scramble_next_crash)
        self._scramble_next_crash = False
        for index in sorted(self._unreadable_next_start):
            self.disk.make_unreadable(self.log_dirs[index])
        self._unreadable_next_start.clear()
        self.restarts += 1
        views = self._startup_views()
        self.manager = self._open()
        self._check_recovery_decisions(views)
        self._reconcile_after_restart()

    def _startup_views(self) -> dict[TopicPartition, StartupView]:
        kinds: dict[TopicPartition, dict[str, set[str]]] = {}
        for log_dir in self.log_dirs:
            for name in self.disk.entries_unchecked(log_dir):
                parsed = _parse_dir_name(name)
                if parsed is not None:
                    tp, kind = parsed
                    kinds.setdefault(tp, {}).setdefault(log_dir, set()).add(kind.name)
        bad = frozenset(self.disk.failed_dirs())
        if self.disk.faulty_dirs() != sorted(bad):
            # A partial fault: whether a dir is bad at startup is what the engine finds when it
            # touches it (a read-only dir loads, then fails at recovery's first write), not an
            # input the model's classification can be given: counted unchecked; the end-to-end
            # checks still run.
            return {}
        return {
            tp: StartupView({d: frozenset(k) for d, k in per_dir.items()}, bad)
            for tp, per_dir in kinds.items()
        }

    def _check_recovery_decisions(self, views: dict[TopicPartition, StartupView]) -> None:
        """Each startup decision must be the model's classification of the same dirs."""
        for decision in self.manager.recovery_decisions:
            view = views.get(decision.tp)
            if view is None:
                continue
            expected = model_decision(view, self.log_dirs)
            if expected is None:
                self.recoveries_unchecked += 1
                continue
            actual = {
                "rule": decision.rules[0].name if decision.rules else "",
                "online": not decision.offline and decision.live_dir is not None,
                "live_dir": None if decision.offline else decision.live_dir,
                "resume_dir": decision.resume_dest_dir,
                "promote_dir": decision.promote_dir,
                "delete_dirs": tuple(decision.delete_dirs),
            }
            difference = compare(actual, expected)
            if difference is not None:
                raise ViolationFound(
                    "MOVE_RECOVERY_TOTAL",
                    f"broker {self.broker}: recovery of {decision.tp} differs from the model "
                    f"({difference}); dirs {dict(view.kinds)}, bad {sorted(view.bad_dirs)}",
                )
            self.recoveries_checked += 1

    def _reconcile_after_restart(self) -> None:
        offline_dirs = self.manager.offline_dirs
        for tp in self.tps:
            book = self.books[tp]
            partition = self.manager.get(tp)
            if partition is None or partition.offline:
                if not offline_dirs and not book.offline:
                    raise ViolationFound(
                        "MOVE_RECOVERY_TOTAL",
                        f"broker {self.broker}: {tp} has no live log after recovery and no dir "
                        f"is bad ({self._dirs_of(tp)})",
                    )
                book.offline = True
                continue
            if tp in self.records:
                self._reconcile_compacted(tp, partition)
                continue
            found = self._read_whole(tp, partition)
            if found is None:
                book.offline = True
                continue
            durable = [batch for batch in book.batches if batch[1] <= book.durable_offset]
            if found[: len(durable)] != durable:
                raise ViolationFound(
                    "MOVE_NO_LOSS",
                    f"broker {self.broker}: {tp} lost durable acknowledged batches in a crash: "
                    f"durable up to offset {book.durable_offset}, recovered "
                    f"{_describe(found)} vs acknowledged {_describe(book.batches)}",
                )
            allowed = list(book.batches)
            if book.in_flight is not None:
                count, crc = book.in_flight
                allowed.append((book.end_offset, book.end_offset + count, crc))
            if found != allowed[: len(found)]:
                raise ViolationFound(
                    "READ_CONSISTENT",
                    f"broker {self.broker}: {tp} recovered batches that were never appended: "
                    f"{_describe(found)} vs {_describe(allowed)}",
                )
            book.batches = found
            book.durable_offset = book.end_offset
            book.in_flight = None
            book.offline = False

    # --- effects and interleavings -----------------------------------------------------------

    def _on_effect(self, tp: TopicPartition, effect: rm.MoveEffect) -> None:
        name = type(effect).__name__
        if self._swap_crash == name:
            self._swap_crash = None
            raise SimulatedCrash(f"before {name} of {tp}")
        if self.config.variant == "swap_before_durable":
            if isinstance(effect, rm.SyncDest):
                self.disk.set_fsync_effective(False)
            elif isinstance(effect, rm.RenameSourceToDelete):
                self.disk.set_fsync_effective(True)
        self._maybe_interleave(tp)

    def _maybe_interleave(self, tp: TopicPartition) -> None:
        """A producer may append while a move is caught up or swapping (the lock decides)."""
        state = self.manager.move_state(tp).state
        if state in _LOCKED_WINDOW and self._interleave_rng.chance(0.5):
            partition = self.manager.get(tp)
            if partition is not None and not (
                self._lock(partition).excludes and self._lock(partition).locked()
            ):
                self.append(tp, self._interleave_rng.randint(1, 3))

    # --- operations --------------------------------------------------------------------------

    def append(self, tp: TopicPartition, record_count: int) -> None:
        """Produce one batch of ``record_count`` unique records (acks once it returns)."""
        partition = self.manager.get(tp)
        if partition is None or partition.offline:
            return
        pairs: list[tuple[bytes, bytes]] = []
        if tp in self.records:
            batch, pairs = keyed_batch(self._sequence + 1, self.broker, tp, record_count,
                                       self.clock.wall_ms())
            self._sequence += record_count
        else:
            values = []
            for _ in range(record_count):
                self._sequence += 1
                values.append(f"b{self.broker}/{tp}/{self._sequence}".encode())
            batch = rb.build_batch(values, timestamp_ms=self.clock.wall_ms())
        crc = rb.parse_header(batch).crc
        book = self.books[tp]
        book.in_flight = (record_count, crc)
        try:
            info = partition.append_as_leader_nowait(batch, leader_epoch=0)
        except StorageError:
            book.in_flight = None
            if tp in self.records:  # refused, yet its bytes may have reached the disk
                self._unconfirm(tp, {book.end_offset + index: pair
                                     for index, pair in enumerate(pairs)})
            return
        book.in_flight = None
        if info.base_offset != book.end_offset:
            raise ViolationFound(
                "MOVE_NO_LOSS" if info.base_offset < book.end_offset else "READ_CONSISTENT",
                f"broker {self.broker}: {tp} append got base offset {info.base_offset}, "
                f"acknowledged log ends at {book.end_offset}",
            )
        book.batches.append((info.base_offset, info.last_offset + 1, crc))
        self.acknowledged_batches += 1
        if tp in self.records:
            for index, pair in enumerate(pairs):
                self.records[tp][info.base_offset + index] = pair

    def extra_operation(self) -> None:
        """Now and then (a stream of its own, so the workload's draws stay as they were): a
        DeleteRecords, retention by size, or a change of ``num.replica.alter.log.dirs.threads``."""
        rng = self._extra_rng
        if not rng.chance(0.08):
            return
        roll = rng.randrange(3)
        tp = self.tps[rng.randrange(len(self.tps))]
        draw = rng.randrange(1 << 16)
        if roll < 2 and (self.disk.faulty_dirs() or self.disk.crash_armed
                         or self.manager.offline_dirs or tp.topic == COMPACTED_TOPIC):
            # (a log start offset moved half way by a failing disk: whether it was recorded
            # is not knowable from outside; the books could not say what must survive)
            return
        if roll == 0:
            self.delete_records(tp, draw)
        elif roll == 1:
            self.retention(tp, 1 + draw % 4)
        else:
            self.manager.set_mover_count(1 + draw % 3)

    def delete_records(self, tp: TopicPartition, draw: int) -> None:
        """DeleteRecords up to a durable acknowledged batch's boundary (the HW of this
        single-replica leader is set there); the records below are gone from the books."""
        partition = self.manager.get(tp)
        book = self.books[tp]
        if partition is None or partition.offline or not book.batches:
            return
        durable = [batch for batch in book.batches if batch[1] <= book.durable_offset]
        if not durable:
            return
        offset = durable[draw % len(durable)][0]
        try:
            # (below what is durable: a crash never takes the log below its log start)
            partition.high_watermark = max(partition.log_start_offset, durable[-1][1])
            start = partition.delete_records(offset)
        except (StorageError, OSError):
            return
        if start < offset:
            raise ViolationFound("MOVE_NO_LOSS", (
                f"broker {self.broker}: {tp} DeleteRecords to {offset} answered the log start "
                f"offset {start}"))
        self._forget_below(tp, start)

    def retention(self, tp: TopicPartition, segments: int) -> None:
        """``retention.bytes`` of about ``segments`` segments, applied, then lifted."""
        partition = self.manager.get(tp)
        if partition is None or partition.offline:
            return
        config = self.manager.log_config(tp.topic)
        self.manager.set_log_config(tp.topic, dataclasses.replace(
            config, retention_bytes=segments * self.config.segment_bytes))
        book = self.books[tp]
        try:
            partition.high_watermark = max(partition.log_start_offset,
                                           min(book.durable_offset, partition.log_end_offset))
            self.manager.enforce_retention()
        except (StorageError, OSError):
            pass
        finally:
            self.manager.set_log_config(tp.topic, None)
        for each in self.tps:
            found = self.manager.get(each)
            if found is not None and not found.offline:
                self._forget_below(each, found.log_start_offset)

    def _forget_below(self, tp: TopicPartition, start: int) -> None:
        """The books drop the batches wholly below the log start offset ``start``."""
        book = self.books[tp]
        book.start_offset = max(book.start_offset, start)
        book.batches = [batch for batch in book.batches if batch[1] > start]

    def flush(self, tp: TopicPartition) -> None:
        """Fsync one partition; its acknowledged batches become durable."""
        partition = self.manager.get(tp)
        if partition is None or partition.offline:
            return
        try:
            partition.flush()
        except StorageError:
            return
        self.books[tp].durable_offset = self.books[tp].end_offset

    def flush_pass_step(self) -> None:
        """The periodic flush as the trio runtime runs it: each partition's fsyncs are handed
        over (a ``FlushSync``) and done in a worker thread while the broker goes on, so here
        they run at this operation's next turn, with appends, moves, reads, dir failures and
        crashes in between; the pass then resumes (the partition's recovery point moves) and
        runs to the next handover or its end. The checkpoint files' fsyncs are handed over
        too (a ``CheckpointSync``: the temp file's before the rename, the dir's after it) and
        run at the next turn as well, so crashes, dir failures and the checkpoint writes that
        cannot wait (a swap, a deletion, a truncation, the ``checkpoint`` operation) strike
        while a checkpoint write is half done.

        What the fsyncs made durable is known here from the disk's contract alone: every
        byte the partition held when its segments' handles were taken, so ``durable_offset``
        rises to the end then, while the same replica is still served and still holds the same
        acknowledged batches (a crash, a recreated replica, a failed dir, or a truncation
        since, whose later appends may go to a new segment file the handles never saw, leaves
        it where it was: fuzz seed 3153)."""
        pending = self._flush_pending
        if self._flush_pass is None:
            self._flush_pass = self.manager.checkpoint_steps()
        elif pending is not None:
            pending[0].run()  # the worker thread's fsyncs
        elif self._checkpoint_pending is not None:
            self._checkpoint_pending.run()  # the worker thread's fsync
        self._checkpoint_pending = None
        passing = self._flush_pass
        while True:
            step = next(passing, _PASS_DONE)
            if pending is not None:
                sync, replica, end, held = pending
                book = self.books[sync.tp]
                if (self.manager.get(sync.tp) is replica and not replica.offline
                        and sync.error is None and tuple(book.batches[:len(held)]) == held):
                    book.durable_offset = max(book.durable_offset, min(end, book.end_offset))
                pending = None
            if isinstance(step, FlushSync):
                served = self.manager.get(step.tp)
                if served is None:
                    continue
                book = self.books[step.tp]
                self._flush_pending = (step, served, book.end_offset, tuple(book.batches))
                return
            if isinstance(step, CheckpointSync):
                self._checkpoint_pending = step
                return
            if step is _PASS_DONE:
                self._flush_pass = None
                self._flush_pending = None
                self._checkpoint_pending = None
                return

    def checkpoint(self) -> None:
        """The periodic flush and checkpoint of every dir."""
        self.manager.checkpoint()
        for tp in self.tps:
            partition = self.manager.get(tp)
            if partition is not None and not partition.offline:
                self.books[tp].durable_offset = self.books[tp].end_offset

    def request_move(self, tp: TopicPartition, dir_index: int | None) -> None:
        """AlterReplicaLogDirs (``None``: ``"any"``, which cancels a move)."""
        target = "any" if dir_index is None else self.log_dirs[dir_index]
        self.manager.alter_replica_log_dir(tp, target)

    def mover_step(self, pick: int) -> None:
        """What one mover of the manager's slots does next (the manager's scheduler, as the
        trio runtime asks it)."""
        slots = self.manager.mover_slots()
        if not slots:
            return
        tp = slots[pick % len(slots)]
        partition = self.manager.get(tp)
        action = self.manager.mover_action(tp, self.clock.monotonic_ns())
        if partition is None or action is None:
            return
        state = self.manager.move_state(tp).state
        if not isinstance(action, MoverSwap):
            if isinstance(action, MoverWait):
                # The runtime's mover sleeps until the shared bucket admits a chunk.
                self.clock.advance_ns(action.wait_ns)
            self.manager.copy_step_nowait(tp, self.config.chunk_bytes)
            # (CAUGHT_UP: the mover is about to take the lock)
            self._maybe_interleave(tp)
        else:
            lock = self._lock(partition)
            lock.acquire_nowait()
            if self.manager.move_state(tp).state is not rm.MoveState.CAUGHT_UP:
                lock.release()
                return
            # KIP-113 steps 5-9 under the lock, as the runtime's swap_when_caught_up does, one
            # effect at a time: crashes and producers strike between them.
            for effect in self.manager.swap_steps(tp):
                self._on_effect(tp, effect)
            if lock.locked() and lock.excludes:
                raise AssertionError(f"{tp}: the swap returned holding the partition lock")
        if self.manager.move_state(tp).state is rm.MoveState.DONE and state is not (
            rm.MoveState.DONE
        ):
            self.moves_done += 1
            self.books[tp].durable_offset = self.books[tp].end_offset

    def set_throttle(self, choice: int) -> None:
        """Change ``intra.broker.throttled.rate`` live."""
        self.manager.set_throttle_rate(_THROTTLE_RATES[choice % len(_THROTTLE_RATES)])

    def delete_pending(self) -> None:
        """The background removal of ``.delete`` dirs. MOVE_NO_LOSS: a partition with durable
        acknowledged records that had a copy on a readable disk still has one after it (the
        removal may not take the last one while the served copy's disk is failed)."""
        before = {tp: self._copies_on_good_dirs(tp) for tp in self.tps}
        self.manager.delete_pending_nowait()
        for tp, held in before.items():
            if held and self.books[tp].durable_offset > 0 and not self._copies_on_good_dirs(tp):
                raise ViolationFound("MOVE_NO_LOSS", (
                    f"broker {self.broker}: {tp}'s last copy on a readable disk ({held[0]}) was "
                    f"removed; the served copy's dir is failed ({self._dirs_of(tp)})"))

    def _copies_on_good_dirs(self, tp: TopicPartition) -> list[str]:
        """``tp``'s copies (live, ``.move``, ``.delete``) on dirs whose reads work."""
        unreadable = set(self.disk.unreadable_dirs())
        found = []
        for log_dir in self.log_dirs:
            if log_dir in unreadable:
                continue
            for kind in DirKind:
                if self.disk.exists(f"{log_dir}/{dir_name(tp, kind)}"):
                    found.append(f"{log_dir}/{dir_name(tp, kind)}")
        return found

    def recreate(self, tp: TopicPartition) -> None:
        """LeaderAndIsr without ``isNew`` for a replica this broker lost: never recreated empty."""
        book = self.books[tp]
        partition = self.manager.get(tp)
        if partition is not None and not partition.offline:
            return
        try:
            created = self.manager.create(tp, is_new=False)
        except StorageError:
            return
        if created.log_end_offset < book.end_offset:
            raise ViolationFound(
                "DIR_FAILURE_ISOLATION",
                f"broker {self.broker}: lost replica {tp} recreated with LEO "
                f"{created.log_end_offset} on {created.log_dir}; acknowledged up to "
                f"{book.end_offset}",
            )

    def read(self, tp: TopicPartition, offset_draw: int, max_bytes: int) -> None:
        """A consumer's fetch from a random offset: contiguous batches as acknowledged."""
        partition = self.manager.get(tp)
        book = self.books[tp]
        if partition is None or partition.offline or not book.batches:
            return
        offset = offset_draw % (book.end_offset + 1)
        if tp in self.records:
            self._check_compacted(tp, partition)
            return
        try:
            slices = partition.read(offset, max_bytes)
            found = _batches_of(slices)
        except (StorageError, OSError):
            return
        if offset < book.end_offset and not found:
            raise ViolationFound(
                "READ_CONSISTENT", f"broker {self.broker}: {tp} read at {offset} returned nothing"
            )
        expected = [batch for batch in book.batches if batch[1] > offset][: len(found)]
        if found != expected:
            raise ViolationFound(
                "READ_CONSISTENT" if len(found) == len(expected) else "MOVE_NO_LOSS",
                f"broker {self.broker}: {tp} read at {offset}: {_describe(found)}, acknowledged "
                f"{_describe(expected)}",
            )

    def settle(self, steps_max: int = 10_000) -> None:
        """Finish every move (unthrottled) and the pending deletions (end of the run); then
        commit, seal and clean the compacted partitions."""
        self.manager.set_throttle_rate(UNLIMITED_RATE)
        for step in range(steps_max):
            if not any(self.manager.move_state(tp).state in _MOVING for tp in self.tps):
                break
            self.mover_step(step)
        self.delete_pending()
        if self.cleaner is not None:
            for tp in self.records:
                partition = self.manager.get(tp)
                if partition is not None and not partition.offline:
                    partition.high_watermark = partition.log_end_offset
                    try:
                        with self.manager.io(partition.log_dir):
                            partition.log.roll()
                    except StorageError:
                        continue  # its dir failed: the partition is offline now
            self.cleaner.finish()

    # --- the log cleaner (compacted partitions) ---------------------------------------------

    def cleaner_draw(self) -> int:
        """The next draw of the ``cleaner`` stream (taken before the step runs: a crash inside
        it does not change the stream)."""
        return self._cleaner_rng.randrange(1 << 30)

    def compaction_step(self, draw: int) -> None:
        """One step of what races the cleaner, drawn from the ``cleaner`` stream: the cleaning
        under way advances, a follower fetch moves a compacted partition's HW to its LEO, or the
        partition is truncated above its HW (a follower's KIP-101 truncation)."""
        assert self.cleaner is not None
        roll = draw % 100
        tp = sorted(self.records)[(draw // 100) % len(self.records)]
        partition = self.manager.get(tp)
        if roll < 60:
            self.cleaner.step()
        elif partition is None or partition.offline:
            return
        elif roll < 85:
            partition.high_watermark = partition.log_end_offset
            self.committed[tp] = max(self.committed.get(tp, 0), partition.log_end_offset)
        elif roll < 95:
            floor = max(partition.high_watermark, self.committed.get(tp, 0))
            if partition.log_end_offset <= floor:
                return
            cut = floor + (draw // 10_000) % (partition.log_end_offset - floor)
            # the book follows the truncation before it runs; until a flush makes it durable, a
            # crash may bring the records above the cut back (the file's durable length), as a
            # crash inside it may leave them
            before, batches = self.records[tp], list(self.books[tp].batches)
            self._forget_above(tp, cut)
            self._unconfirm(tp, {o: r for o, r in before.items() if o not in self.records[tp]})
            try:
                partition.truncate_to(cut)
            except StorageError:
                return  # its dir failed: the records above the cut may still be on disk
            # done: the log keeps whole batches, so the book follows its end
            end = partition.log_end_offset
            kept = [batch for batch in batches if batch[1] <= end]
            if (kept[-1][1] if kept else 0) < end:  # a span the book only knows as a whole
                kept.append((kept[-1][1] if kept else 0, end, 0))
            self.books[tp].batches = kept
            self.records[tp] = {o: r for o, r in before.items() if o < end}

    def _unconfirm(self, tp: TopicPartition, records: dict[int, tuple[bytes, bytes]]) -> None:
        unconfirmed = self.unconfirmed.setdefault(tp, {})
        for offset, record in records.items():
            unconfirmed.setdefault(offset, set()).add(record)

    def _forget_above(self, tp: TopicPartition, end: int) -> None:
        book = self.books[tp]
        book.batches = [batch for batch in book.batches if batch[1] <= end]
        book.durable_offset = min(book.durable_offset, book.end_offset)
        self.records[tp] = {o: r for o, r in self.records[tp].items() if o < book.end_offset}

    def _check_compacted(self, tp: TopicPartition, partition: PartitionLog) -> None:
        assert self.cleaner is not None
        try:
            found = read_records(partition)
        except CorruptBatch as error:
            raise _served_corrupt(self.broker, tp, error) from error
        except StorageError:
            if partition.offline:
                return
            raise
        if found is None:
            return
        verdict = check_compacted(found, self.records[tp], self._clean_point(tp))
        if verdict is not None:
            raise ViolationFound(verdict[0], f"broker {self.broker}: {tp}: {verdict[1]}")

    def _clean_point(self, tp: TopicPartition) -> int:
        assert self.cleaner is not None
        return max(self.clean_bounds.get(tp, 0), self.cleaner.cleaned_below(tp))

    def _reconcile_compacted(self, tp: TopicPartition, partition: PartitionLog) -> None:
        """After a restart: what came back is a prefix of what was acknowledged (the durable
        part at least), cleaned or not; the book follows it."""
        assert self.cleaner is not None
        book = self.books[tp]
        try:
            found = read_records(partition)
        except CorruptBatch as error:  # recovery must have cut a torn batch off
            raise _served_corrupt(self.broker, tp, error) from error
        except StorageError:
            found = None
        if found is None:
            book.offline = True
            return
        end = partition.log_end_offset
        acknowledged = dict(self.records[tp])
        for offset, candidates in self.unconfirmed.get(tp, {}).items():
            key, value = found.get(offset, (None, None))
            if key is not None and value is not None and (key, value) in candidates:
                acknowledged[offset] = (key, value)  # a truncated or refused record came back
        if book.in_flight is not None:
            end_before = book.end_offset
            count, _ = book.in_flight
            for index in range(count):  # a torn last append may have come back whole
                offset = end_before + index
                key, value = found.get(offset, (None, None))
                if key is not None and value is not None:
                    acknowledged[offset] = (key, value)
        if end < book.durable_offset:
            raise ViolationFound(
                "MOVE_NO_LOSS",
                f"broker {self.broker}: {tp} recovered up to {end}, durable up to "
                f"{book.durable_offset}")
        verdict = check_compacted(found, {o: r for o, r in acknowledged.items() if o < end},
                                  self._clean_point(tp))
        if verdict is not None:
            raise ViolationFound(verdict[0], f"broker {self.broker}: {tp} after a restart: "
                                 f"{verdict[1]}")
        kept = [batch for batch in book.batches if batch[1] <= end]
        if (kept[-1][1] if kept else 0) < end:
            # records that came back past the book (a torn append whole, or an interrupted
            # truncation's): one span in the book, so it ends where the log does (a compacted
            # partition's CRCs are not compared)
            kept.append((kept[-1][1] if kept else 0, end, 0))
        book.batches = kept
        self.records[tp] = {o: r for o, r in acknowledged.items() if o < end}
        self.committed[tp] = min(self.committed.get(tp, 0), end)
        book.durable_offset = book.end_offset
        book.in_flight = None
        book.offline = False

    # --- checks ------------------------------------------------------------------------------

    def check_structure(self) -> None:
        """MOVE_SINGLE_LIVE and DIR_FAILURE_ISOLATION on the current state."""
        if self._live_version != self.disk.namespace_version:
            live: dict[TopicPartition, list[str]] = {}
            for log_dir in self.log_dirs:
                for name in self.disk.entries_unchecked(log_dir):
                    parsed = _parse_dir_name(name)
                    if parsed is not None and parsed[1] is DirKind.LIVE:
                        live.setdefault(parsed[0], []).append(log_dir)
            self._live = live
            self._live_version = self.disk.namespace_version
        live = self._live
        offline_dirs = self.manager.offline_dirs
        for tp in self.tps:
            dirs = live.get(tp, [])
            if len(dirs) > 1:
                raise ViolationFound(
                    "MOVE_SINGLE_LIVE", f"broker {self.broker}: {tp} is live on {dirs}"
                )
            partition = self.manager.get(tp)
            offline = partition is None or partition.offline
            if offline and not offline_dirs:
                raise ViolationFound(
                    "DIR_FAILURE_ISOLATION",
                    f"broker {self.broker}: {tp} is offline but every log dir is online",
                )
            if partition is None or offline:
                self.books[tp].offline = True
                continue
            if partition.log_dir in offline_dirs:
                raise ViolationFound(
                    "DIR_FAILURE_ISOLATION",
                    f"broker {self.broker}: {tp} is served online from the offline dir "
                    f"{partition.log_dir}",
                )
            if partition.log.kind is not DirKind.LIVE or partition.log_dir not in dirs:
                raise ViolationFound(
                    "MOVE_SINGLE_LIVE",
                    f"broker {self.broker}: {tp} is served from {partition.log.path}, live dirs "
                    f"{dirs}",
                )

    def check_records(self) -> None:
        """MOVE_NO_LOSS and READ_CONSISTENT: every online partition read back whole; then
        what DescribeLogDirs and DescribeReplicaLogDirs report (:meth:`check_described`)."""
        self.check_described()
        for tp in self.tps:
            partition = self.manager.get(tp)
            if partition is None or partition.offline:
                continue
            book = self.books[tp]
            if tp in self.records:
                self._check_compacted(tp, partition)
                continue
            found = self._read_whole(tp, partition)
            if found is None or found == book.batches:
                continue
            missing = [batch for batch in book.batches if batch not in found]
            raise ViolationFound(
                "MOVE_NO_LOSS" if missing else "READ_CONSISTENT",
                f"broker {self.broker}: {tp} on {partition.log_dir} holds {_describe(found)}, "
                f"acknowledged {_describe(book.batches)}",
            )

    def check_described(self) -> None:
        """MOVE_SINGLE_LIVE and DIR_FAILURE_ISOLATION as DescribeLogDirs (KIP-113) reports
        them: an offline dir is reported offline with no replica; every online partition once
        as the current replica, in the dir it is served from, at its LEO; a running move's
        ``.move`` as the future replica in its destination; DescribeReplicaLogDirs agrees."""
        try:
            described = self.manager.describe()
        except (StorageError, OSError):
            return
        current: dict[TopicPartition, list[tuple[str, int]]] = {}
        future: dict[TopicPartition, str] = {}
        for entry in described:
            if not entry.online:
                if entry.replicas or entry.path not in self.manager.offline_dirs:
                    raise ViolationFound("DIR_FAILURE_ISOLATION", (
                        f"broker {self.broker}: DescribeLogDirs reports {entry.path} offline "
                        f"with {len(entry.replicas)} replicas"))
                continue
            for replica in entry.replicas:
                if replica.is_temporary:
                    future[replica.tp] = entry.path
                else:
                    current.setdefault(replica.tp, []).append((entry.path, replica.log_end_offset))
        for tp in self.tps:
            partition = self.manager.get(tp)
            info = self.manager.replica_dir_info(tp)
            if partition is None or partition.offline:
                if tp in current:
                    raise ViolationFound("DIR_FAILURE_ISOLATION", (
                        f"broker {self.broker}: DescribeLogDirs reports offline {tp} on "
                        f"{current[tp]}"))
                continue
            if partition.log_dir in self.manager.offline_dirs:
                continue  # (check_structure's verdict)
            expected = [(partition.log_dir, partition.log_end_offset)]
            if current.get(tp) != expected or info.current_dir != partition.log_dir:
                raise ViolationFound("MOVE_SINGLE_LIVE", (
                    f"broker {self.broker}: {tp} is served from {expected}; DescribeLogDirs "
                    f"says {current.get(tp)}, DescribeReplicaLogDirs {info.current_dir}"))
            dest = partition.future.log_dir if partition.future is not None else None
            if future.get(tp) != (dest if dest not in self.manager.offline_dirs else None) or (
                    info.future_dir != dest):
                raise ViolationFound("MOVE_SINGLE_LIVE", (
                    f"broker {self.broker}: {tp}'s .move is on {dest}; DescribeLogDirs says "
                    f"{future.get(tp)}, DescribeReplicaLogDirs {info.future_dir}"))

    def _read_whole(
        self, tp: TopicPartition, partition: PartitionLog
    ) -> list[tuple[int, int, int]] | None:
        """Every batch of the partition, or ``None`` if reading found its dir failed."""
        found: list[tuple[int, int, int]] = []
        offset = partition.log_start_offset
        for _ in range(100_000):
            if offset >= partition.log_end_offset:
                break
            try:
                slices = partition.read(offset, 1 << 20)
                batches = _batches_of(slices)
            except OSError:
                return None
            except StorageError:
                if partition.offline:
                    return None
                raise
            if not batches:
                raise ViolationFound(
                    "READ_CONSISTENT",
                    f"broker {self.broker}: {tp} read at {offset} below the LEO "
                    f"{partition.log_end_offset} returned nothing",
                )
            found.extend(batches)
            offset = batches[-1][1]
        return found

    def _dirs_of(self, tp: TopicPartition) -> str:
        names = []
        for log_dir in self.log_dirs:
            for kind in DirKind:
                if dir_name(tp, kind) in self.disk.entries_unchecked(log_dir):
                    names.append(f"{log_dir}/{dir_name(tp, kind)}")
        return ", ".join(names) or "nothing on disk"

    # --- faults ------------------------------------------------------------------------------

    def inject(self, fault: Fault) -> None:
        """Apply one planned fault (crashes restart the broker at once)."""
        if fault.kind == "crash":
            self.crash_and_restart()
        elif fault.kind == "crash_mid_operation":
            self.disk.arm_crash(fault.target)
        elif fault.kind == "crash_in_swap":
            self._swap_crash = SWAP_EFFECTS[fault.target % len(SWAP_EFFECTS)]
        elif fault.kind == "torn_tail":
            tp = self.tps[fault.target % len(self.tps)]
            self.append(tp, 3)
            self.crash_and_restart()
        elif fault.kind == "dir_failure":
            self.disk.fail_dir(self.log_dirs[fault.target % len(self.log_dirs)])
        elif fault.kind == "dir_repaired":
            # The operator reseats the disk and restarts the broker: its data must come back.
            for log_dir in self.disk.faulty_dirs():
                self.disk.repair_dir(log_dir)
            self.crash_and_restart()
        elif fault.kind == "unreadable_at_startup":
            self._unreadable_next_start.add(fault.target % len(self.log_dirs))
            self.crash_and_restart()
        elif fault.kind == "redirect_off_failing":
            self._redirect_off_failing(fault.target)
        elif fault.kind == "file_failure_at_restart":
            self._file_failure_at_restart(fault.target)
        elif fault.kind == "fail_after_swap":
            self._fail_after_swap(fault.target)
        else:
            self._inject_partial(fault)

    # --- composite faults --------------------------------------------------------------------

    def _good_dirs(self) -> list[str]:
        """The dirs with no fault, online in the manager."""
        faulty = {*self.disk.faulty_dirs(), *self.manager.offline_dirs}
        return [d for d in self.log_dirs if d not in faulty]

    def _moving(self, tp: TopicPartition, good: list[str], pick: int) -> rm.Move | None:
        """``tp``'s move between good dirs, started towards one if none runs."""
        partition = self.manager.get(tp)
        if partition is None or partition.offline or partition.log_dir not in good:
            return None
        move = self.manager.move_state(tp)
        if move.state not in _MOVING:
            others = [d for d in good if d != partition.log_dir]
            self.manager.alter_replica_log_dir(tp, others[pick % len(others)])
            move = self.manager.move_state(tp)
        return move if move.state in _MOVING and move.dest_dir in good else None

    def _redirect_off_failing(self, target: int) -> None:
        """A move's destination disk fails unnoticed and AlterReplicaLogDirs redirects the move
        to a third dir before any other I/O there (the old tp.move cannot be retired); the
        operator then reseats the disk and restarts the broker (seed 954)."""
        good = self._good_dirs()
        if len(good) < 3:
            return
        tp = self.tps[target % len(self.tps)]
        move = self._moving(tp, good, target >> 4)
        if move is None or move.dest_dir is None or move.source_dir is None:
            return
        third = [d for d in good if d not in (move.source_dir, move.dest_dir)]
        self.disk.fail_dir(move.dest_dir)
        self.manager.alter_replica_log_dir(tp, third[0])
        self._finish_move(tp)
        self.disk.repair_dir(move.dest_dir)
        self.crash_and_restart()

    def _finish_move(self, tp: TopicPartition) -> None:
        """The movers run ``tp``'s move (unthrottled) until it is no longer copying."""
        self.manager.set_throttle_rate(UNLIMITED_RATE)
        for step in range(200):
            if self.manager.move_state(tp).state not in _MOVING:
                break
            self.mover_step(step)

    def _file_failure_at_restart(self, target: int) -> None:
        """The broker restarts with a bad sector in the first segment of a partition sharing
        its dir with others: recovery reads it and takes the dir offline while the dir's other
        partitions are still to be recovered (seed 170)."""
        by_dir: dict[str, list[TopicPartition]] = {}
        for tp in self.tps:
            partition = self.manager.get(tp)
            if partition is not None and not partition.offline:
                by_dir.setdefault(partition.log_dir, []).append(tp)
        good = self._good_dirs()
        shared = sorted(d for d, tps in by_dir.items() if len(tps) > 1 and d in good)
        if not shared:
            return
        log_dir = shared[target % len(shared)]
        first = min(by_dir[log_dir])
        segments = sorted(f"{log_dir}/{dir_name(first)}/{name}"
                          for name in self.disk.entries_unchecked(f"{log_dir}/{dir_name(first)}")
                          if name.endswith(".log"))
        if not segments:
            return
        self.disk.fail_file(segments[0])
        self.crash_and_restart()
        self.check_structure()
        # (the bad sector is remapped, the broker restarted)
        self.disk.repair_dir(log_dir)
        self.crash_and_restart()

    def _fail_after_swap(self, target: int) -> None:
        """A move swaps, then the served copy's disk fails before the queued tp.delete is
        removed: the removal must keep it (it is the only copy on a working disk)."""
        good = self._good_dirs()
        if len(good) < 2:
            return
        tp = self.tps[target % len(self.tps)]
        move = self._moving(tp, good, target >> 4)
        if move is None:
            return
        self._finish_move(tp)
        partition = self.manager.get(tp)
        if self.manager.move_state(tp).state is not rm.MoveState.DONE or partition is None:
            return
        served = partition.log_dir
        self.disk.fail_dir(served)
        self.read(tp, 0, 1 << 20)  # a consumer's read finds the disk failed
        self.delete_pending()
        # (a transient failure: the disk is reseated, the broker restarted)
        self.disk.repair_dir(served)
        self.crash_and_restart()

    def _inject_partial(self, fault: Fault) -> None:
        log_dir = self.log_dirs[(fault.target % 16) % len(self.log_dirs)]
        extra = fault.target // 16
        if fault.kind == "dir_read_only":
            self.disk.fail_dir(log_dir, reads=False)
        elif fault.kind == "dir_read_errors":
            self.disk.fail_dir(log_dir, writes=False)
        elif fault.kind == "file_failure":
            files = self._files_under(log_dir)
            if files:
                self.disk.fail_file(files[extra % len(files)])
        elif fault.kind == "disk_full":
            self.disk.fill_dir(log_dir, free_bytes=extra)
        else:  # torn_middle: unflushed appends, then a crash that tears one in the middle
            tp = self.tps[fault.target % len(self.tps)]
            for _ in range(3):
                self.append(tp, 2)
            self._scramble_next_crash = True
            self.crash_and_restart()

    def _files_under(self, log_dir: str) -> list[str]:
        """Every file under ``log_dir`` (partition dirs one level down), sorted."""
        found: list[str] = []
        for name in self.disk.entries_unchecked(log_dir):
            path = f"{log_dir}/{name}"
            children = self.disk.entries_unchecked(path)
            if children:
                found.extend(f"{path}/{child}" for child in children)
            elif _parse_dir_name(name) is None:
                found.append(path)
        return found


@functools.lru_cache(maxsize=4096)
def _parse_dir_name(name: str) -> tuple[TopicPartition, DirKind] | None:
    return parse_dir_name(name)


def _batches_of(slices: Sequence[Any]) -> list[tuple[int, int, int]]:
    """(base, next, CRC) of every whole batch; a fetch may end inside its last batch (Kafka's
    consumers drop that partial batch), never anywhere else."""
    found: list[tuple[int, int, int]] = []
    for index, file_slice in enumerate(slices):
        try:
            data = file_slice.read_all()
        finally:
            file_slice.close()
        position = 0
        while position < len(data):
            if len(data) - position < rb.HEADER_SIZE:
                header = None
            else:
                header = None
                length = int.from_bytes(data[position + 8 : position + 12], "big", signed=True)
                if position + length + rb.LOG_OVERHEAD <= len(data):
                    header = rb.parse_header(data, position)
            if header is None:
                if index != len(slices) - 1:
                    raise ViolationFound(
                        "READ_CONSISTENT", f"a partial batch in the middle of a fetch ({index})"
                    )
                break
            try:
                rb.check_crc(data, header)
            except StorageError as error:
                raise ViolationFound("READ_CONSISTENT", f"a fetch returned {error}") from error
            found.append((header.base_offset, header.next_offset, header.crc))
            position += header.size_in_bytes
    return found


def _served_corrupt(broker: int, tp: TopicPartition, error: CorruptBatch) -> ViolationFound:
    """READ_CONSISTENT: a read of a compacted partition returned a corrupt batch (as
    :func:`_batches_of` finds for the others)."""
    return ViolationFound("READ_CONSISTENT", f"broker {broker}: {tp}: a read returned {error}")


def _describe(batches: Sequence[tuple[int, int, int]]) -> str:
    if not batches:
        return "no batch"
    shown = ", ".join(f"[{base},{end})#{crc:08x}" for base, end, crc in batches[-4:])
    prefix = f"{len(batches)} batches, last: " if len(batches) > 4 else ""
    return prefix + shown


#: Builds the abstractions the trace checker uses (see :mod:`conformance.move_abstraction`).
AbstractionFactory = Callable[[SimConfig], Sequence[Abstraction]]


def replay_command(seed: int, config: SimConfig, faults: Sequence[Fault] | None = None) -> str:
    """The command that reproduces a run (the broker count and non-default settings)."""
    default = SimConfig()
    # --brokers always: the command line's default is the cluster simulator.
    parts = [f"logproof conformance replay --seed {seed} --brokers {config.brokers}"]
    if config.log_dirs != default.log_dirs:
        parts.append(f"--log-dirs {config.log_dirs}")
    if config.partitions != default.partitions:
        parts.append(f"--partitions {config.partitions}")
    if config.steps != default.steps:
        parts.append(f"--steps {config.steps}")
    if config.fault_probability != default.fault_probability:
        parts.append(f"--fault-probability {config.fault_probability}")
    if config.variant != default.variant:
        parts.append(f"--variant {config.variant}")
    if config.segment_bytes != default.segment_bytes:
        parts.append(f"--segment-bytes {config.segment_bytes}")
    if config.chunk_bytes != default.chunk_bytes:
        parts.append(f"--chunk-bytes {config.chunk_bytes}")
    if config.compacted != default.compacted:
        parts.append(f"--compacted {config.compacted}")
    if faults is not None:
        parts.append(f"--faults '{format_faults(faults)}'")
    return " ".join(parts)


def simulate(
    seed: int,
    config: SimConfig,
    faults: Sequence[Fault] | None = None,
    *,
    abstractions: AbstractionFactory | None = None,
    keep_trace: bool = False,
) -> SimOutcome:
    """Run one seed.

    Args:
        seed: decides the workload, the fault schedule (unless given) and every interleaving.
        config: the run's shape.
        faults: a fault schedule to use instead of the seed's (the shrinker passes subsets).
        abstractions: builds the trace checker's abstractions (none: events counted only).
        keep_trace: keep the events in the outcome (a digest is always computed).

    Returns:
        The outcome; ``violation`` is ``None`` when every check passed.
    """
    schedule = tuple(sorted(faults)) if faults is not None else plan_faults(seed, config)
    command = replay_command(seed, config, faults)
    checker = TraceChecker(
        abstractions(config) if abstractions is not None and config.trace_check else (),
        command,
    )
    digest = hashlib.sha256()
    kept: list[TraceEvent] = []
    counter = [0]

    def emit(event: TraceEvent) -> None:
        counter[0] += 1
        digest.update(event.to_json().encode())
        digest.update(b"\n")
        if keep_trace:
            kept.append(event)
        checker.feed(event)

    root = SimRng(seed)
    clock = SimClock()
    workload = root.stream("workload")
    worlds: list[BrokerWorld] = []
    violation: Violation | None = None
    step = 0
    by_step: dict[int, list[Fault]] = {}
    for fault in schedule:
        by_step.setdefault(fault.step, []).append(fault)
    try:
        for broker in range(config.brokers):
            worlds.append(BrokerWorld(broker, config, clock, root.stream(f"broker-{broker}"), emit))
        for step in range(config.steps):
            clock.advance_ns(workload.randrange(2_000_000))
            for fault in by_step.get(step, ()):
                _guarded(worlds[fault.broker % len(worlds)], fault.apply)
            world = worlds[workload.randrange(len(worlds))]
            operation = _draw_operation(workload, config)
            _guarded(world, operation)
            if config.compacted:
                for each in worlds:
                    _guarded(each, functools.partial(BrokerWorld.compaction_step,
                                                     draw=each.cleaner_draw()))
            _guarded(world, BrokerWorld.extra_operation)
            for each in worlds:
                each.check_structure()
                if step % config.verify_interval == 0:
                    each.check_records()
            if checker.violation is not None:
                break
        else:
            step = config.steps
            for world in worlds:
                _guarded(world, lambda w: w.settle())
                world.check_structure()
                world.check_records()
    except ViolationFound as found:
        violation = Violation(found.invariant, "end_to_end", found.message, step)
    except (AssertionError, rm.InvalidMoveTransition, StorageError, KeyError, ValueError) as error:
        violation = Violation(
            "IMPLEMENTATION_ERROR", "exception", f"{type(error).__name__}: {error}", step
        )
    if violation is None and checker.violation is not None:
        trace_violation = checker.violation
        violation = Violation(
            trace_violation.invariant or trace_violation.kind.upper(),
            "trace",
            trace_violation.describe(),
            step,
        )
    return SimOutcome(
        seed=seed,
        config=config,
        faults=schedule,
        violation=violation,
        steps=step,
        events=counter[0],
        trace=tuple(kept),
        trace_digest=digest.hexdigest(),
        trace_verdict=checker.verdict(),
        restarts=sum(world.restarts for world in worlds),
        recoveries_checked=sum(world.recoveries_checked for world in worlds),
        acknowledged_batches=sum(world.acknowledged_batches for world in worlds),
        moves_done=sum(world.moves_done for world in worlds),
    )


def _guarded(world: BrokerWorld, action: Callable[[BrokerWorld], None]) -> None:
    """Run ``action``; a simulated crash inside it restarts the broker."""
    try:
        action(world)
    except SimulatedCrash:
        world.crash_and_restart()


def _draw_operation(rng: SimRng, config: SimConfig) -> Callable[[BrokerWorld], None]:
    """One workload operation, drawn without looking at the system's state."""
    roll = rng.randrange(100)
    partition = rng.randrange(config.partitions)

    def tp_of(world: BrokerWorld) -> TopicPartition:
        return world.tps[partition % len(world.tps)]

    if roll < 30:
        count = rng.randint(1, 6)
        return lambda world: world.append(tp_of(world), count)
    if roll < 36:
        return lambda world: world.flush(tp_of(world))
    if roll < 38:
        return lambda world: world.checkpoint()
    if roll < 40:
        return lambda world: world.flush_pass_step()
    if roll < 50:
        target = rng.randrange(config.log_dirs)
        return lambda world: world.request_move(tp_of(world), target)
    if roll < 52:
        return lambda world: world.request_move(tp_of(world), None)
    if roll < 82:
        pick = rng.randrange(1 << 16)
        return lambda world: world.mover_step(pick)
    if roll < 84:
        choice = rng.randrange(len(_THROTTLE_RATES))
        return lambda world: world.set_throttle(choice)
    if roll < 94:
        offset_draw = rng.randrange(1 << 16)
        max_bytes = rng.choice((1, 300, 4096, 1 << 20))
        return lambda world: world.read(tp_of(world), offset_draw, max_bytes)
    if roll < 98:
        return lambda world: world.delete_pending()
    return lambda world: world.recreate(tp_of(world))
