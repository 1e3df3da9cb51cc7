"""The log cleaner: the core's keep rules, ranges and state machine, and the runner against a
simulated disk (latest value per key, offsets unchanged, tombstones until their horizon, the
active segment untouched, races with truncation and moves, recovery of an interrupted replace)."""

from __future__ import annotations

import itertools
import random

import pytest
import trio

from conformance.cleaner_abstraction import CleanerAbstraction
from conformance.disk import SimDisk
from conformance.trace_check import TraceChecker
from impl.storage import LogConfig, LogManager
from impl.storage import log_cleaner as lc
from impl.storage import record_batch as rb
from impl.storage import records as rec
from impl.storage.checkpoint import parse_offsets, read_checkpoint
from impl.storage.cleaner_runner import CLEANER_OFFSET_CHECKPOINT, CleanerConfig, LogCleanerRunner
from impl.storage.names import DirKind, TopicPartition, dir_name
from impl.storage.runtime import swap_when_caught_up
from impl.trace import ListTraceSink, TraceEvent

from ._support import DIR_A, DIR_B, TP, ManualClock, config, drive_move, run

COMPACT = LogConfig(segment_bytes=1500, cleanup_policy=frozenset({"compact"}),
                    min_cleanable_dirty_ratio=0.01, delete_retention_ms=60_000)


def _keyed(pairs: list[tuple[bytes | None, bytes | None]], timestamp_ms: int = 1_000) -> bytes:
    records = [rec.Record(i, timestamp_ms, k, v, ()) for i, (k, v) in enumerate(pairs)]
    return rec.encode_batch(records, base_offset=0)


def _contents(partition_log: object) -> list[tuple[int, bytes | None, bytes | None]]:
    from impl.storage import PartitionLog

    assert isinstance(partition_log, PartitionLog)
    log = partition_log.log
    out: list[tuple[int, bytes | None, bytes | None]] = []
    for segment in log.segments:
        data = log.disk.read(segment.log_path, 0, segment.size)
        for header in rb.iter_batches(data):
            raw = data[header.position : header.position + header.size_in_bytes]
            out.extend((r.offset, r.key, r.value) for r in rec.iter_records(raw))
    return out


def _open(disk: SimDisk, clock: ManualClock) -> LogManager:
    manager = LogManager.open(config(), disk=disk, clock=clock)
    manager.set_log_config(TP.topic, COMPACT)
    return manager


# --- the core ------------------------------------------------------------------------------


def test_state_machine_counts_pauses_and_refuses_unknown_events() -> None:
    state = lc.step(lc.Cleaning(), lc.CleanerEvent.CLEANING_STARTED)
    assert state.state is lc.CleanerState.CLEANING
    state = lc.step(state, lc.CleanerEvent.CLEANING_ABORTED)
    state = lc.step(state, lc.CleanerEvent.CLEANING_PAUSED)
    state = lc.step(state, lc.CleanerEvent.CLEANING_PAUSED)
    assert state == lc.Cleaning(lc.CleanerState.PAUSED, 2)
    state = lc.step(state, lc.CleanerEvent.CLEANING_RESUMED)
    assert state.state is lc.CleanerState.PAUSED
    assert lc.step(state, lc.CleanerEvent.CLEANING_RESUMED) == lc.Cleaning()
    with pytest.raises(lc.CleanerError):
        lc.step(lc.Cleaning(), lc.CleanerEvent.SEGMENTS_REPLACED)


def test_cleanable_range_stops_at_the_active_segment_and_the_hw() -> None:
    segments = [lc.SegmentInfo(0, 10, 100), lc.SegmentInfo(10, 20, 100),
                lc.SegmentInfo(20, 30, 100), lc.SegmentInfo(30, 35, 50)]
    whole = lc.cleanable_range(segments, 0, high_watermark=35)
    assert (whole.first_dirty, whole.first_uncleanable) == (0, 30)  # never the active one
    assert whole.dirty_bytes == 300
    assert lc.cleanable_range(segments, 0, high_watermark=15).first_uncleanable == 10
    again = lc.cleanable_range(segments, 20, high_watermark=35)
    assert (again.clean_bytes, again.dirty_bytes) == (200, 100)
    assert lc.cleanable_range(segments, 99, high_watermark=35).first_dirty == 0  # KAFKA-6266
    low = lc.Candidate("a", again, 0.5)
    high = lc.Candidate("b", whole, 0.5)
    assert lc.choose([low, high]) is high
    assert lc.choose([low]) is None  # 1/3 is below the ratio


def test_keep_rules_latest_keyless_and_tombstone_horizon() -> None:
    pairs = [(b"a", b"1"), (b"b", b"1"), (None, b"x"), (b"a", b"2"), (b"c", None), (b"b", b"2")]
    batch = _keyed(pairs)
    offset_map, complete = lc.build_offset_map([(batch, rb.parse_header(batch))], 100, 0)
    assert complete
    assert offset_map.end_offset == 6
    cleaned = lc.clean_batches(batch, offset_map, now_ms=5_000, delete_retention_ms=1_000)
    (header,) = cleaned.headers
    assert (header.base_offset, header.last_offset) == (0, 5)  # offsets never change
    kept = list(rec.iter_records(cleaned.data))
    assert [(r.offset, r.key, r.value) for r in kept] == [
        (3, b"a", b"2"), (4, b"c", None), (5, b"b", b"2"),
    ]
    assert rec.delete_horizon_ms(header) == 6_000  # the tombstone's horizon is stamped
    before = lc.clean_batches(cleaned.data, offset_map, now_ms=5_999, delete_retention_ms=1_000)
    assert [r.key for r in rec.iter_records(before.data)] == [b"a", b"c", b"b"]
    after = lc.clean_batches(cleaned.data, offset_map, now_ms=6_000, delete_retention_ms=1_000)
    assert [r.key for r in rec.iter_records(after.data)] == [b"a", b"b"]


def test_a_full_offset_map_ends_the_range_and_keeps_what_lies_beyond() -> None:
    first = _keyed([(b"a", b"1"), (b"b", b"1")])
    second = rec.encode_batch([rec.Record(2, 0, b"c", b"1", ()), rec.Record(3, 0, b"a", b"2", ())],
                              base_offset=2)
    batches = [(first, rb.parse_header(first)), (second, rb.parse_header(second))]
    offset_map, complete = lc.build_offset_map(batches, capacity=2, start_offset=0)
    assert not complete
    assert offset_map.end_offset == 2
    cleaned = lc.clean_batches(second, offset_map, 0, 0)
    assert cleaned.data == second  # beyond the map: kept whole, same bytes


def test_recovery_plan_follows_kafka() -> None:
    names = ["00000000000000000000.log.swap", "00000000000000000000.log.deleted",
             "00000000000000000010.log", "00000000000000000010.index",
             "00000000000000000020.log", "00000000000000000030.log.cleaned"]
    plan = lc.recovery_plan(names, {0: 17})
    assert set(plan.remove) == {"00000000000000000000.log.deleted",
                                "00000000000000000030.log.cleaned"}
    assert plan.replaced == (10,)
    assert plan.complete == (("00000000000000000000.log.swap", "00000000000000000000.log"),)


# --- the runner ------------------------------------------------------------------------------


async def _fill(partition: object, rng: random.Random, count: int, keys: int,
                latest: dict[bytes, bytes | None]) -> None:
    from impl.storage import PartitionLog

    assert isinstance(partition, PartitionLog)
    for _ in range(count):
        key = b"k%d" % rng.randrange(keys)
        value = None if rng.random() < 0.05 else b"v%d" % rng.randrange(1 << 30)
        await partition.append_as_leader(_keyed([(key, value)]), 1)
        latest[key] = value
    partition.high_watermark = partition.log_end_offset


def _latest_in(contents: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes, bytes | None]:
    found: dict[bytes, bytes | None] = {}
    for _, key, value in contents:
        assert key is not None
        found[key] = value
    return found


def test_runner_keeps_latest_per_key_offsets_and_the_active_segment() -> None:
    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        clock = ManualClock()
        manager = _open(disk, clock)
        partition = manager.create(TP, is_new=True)
        latest: dict[bytes, bytes | None] = {}
        await _fill(partition, random.Random(7), 400, 20, latest)
        before = _contents(partition)
        active_before = partition.log.active
        leo = partition.log_end_offset
        runner = LogCleanerRunner(manager, CleanerConfig(threads=2))
        assert await runner.clean_once()
        after = _contents(partition)
        assert partition.log_end_offset == leo
        assert partition.log.active is active_before
        assert len(after) < len(before) / 4
        assert _latest_in(after) == latest  # COMPACTION_KEEPS_LATEST (tombstones kept)
        positions = {offset: (key, value) for offset, key, value in before}
        assert all(positions[o] == (k, v) for o, k, v in after)  # COMPACTION_OFFSETS_STABLE
        point = parse_offsets(read_checkpoint(disk, DIR_A, CLEANER_OFFSET_CHECKPOINT) or "")
        assert point[TP] == active_before.base_offset
        for offset in (0, after[0][0], after[-1][0]):  # reads from any offset still work
            pieces = partition.read(offset, 1 << 20)
            assert pieces
            for piece in pieces:
                piece.close()
        # reopen: the cleaned segments load, the checkpoint gives the same point
        partition.flush()
        manager.checkpoint()
        reopened = _open(disk, clock)
        assert _contents(reopened.get(TP)) == after
        assert LogCleanerRunner(reopened).points[TP] == active_before.base_offset

    run(main)


def test_tombstones_go_after_delete_retention() -> None:
    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        clock = ManualClock()
        manager = _open(disk, clock)
        partition = manager.create(TP, is_new=True)
        for round_ in range(40):
            await partition.append_as_leader(_keyed([(b"gone", b"v%d" % round_)]), 1)
        await partition.append_as_leader(_keyed([(b"gone", None)]), 1)
        for round_ in range(40):
            await partition.append_as_leader(_keyed([(b"other-%d" % round_, b"x" * 30)]), 1)
        partition.high_watermark = partition.log_end_offset
        runner = LogCleanerRunner(manager)
        assert await runner.clean_once()
        assert (b"gone", None) in [(k, v) for _, k, v in _contents(partition)]
        for round_ in range(60):  # more dirt, so that the next cleaning happens
            await partition.append_as_leader(_keyed([(b"other-%d" % (round_ % 5), b"y")]), 1)
        partition.high_watermark = partition.log_end_offset
        assert await runner.clean_once()
        assert (b"gone", None) in [(k, v) for _, k, v in _contents(partition)]  # not yet
        clock.advance_ms(COMPACT.delete_retention_ms)
        runner.points.pop(TP)  # clean the whole log again
        assert await runner.clean_once()
        assert b"gone" not in {k for _, k, _ in _contents(partition)}

    run(main)


@pytest.mark.timeout(120)
def test_truncation_during_cleaning_aborts_the_replace() -> None:
    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        clock = ManualClock()
        manager = _open(disk, clock)
        partition = manager.create(TP, is_new=True)
        latest: dict[bytes, bytes | None] = {}
        await _fill(partition, random.Random(3), 300, 10, latest)
        before = _contents(partition)
        # throttled: after its first segment the cleaner waits for the bucket (the manual clock
        # stands still) while the partition is truncated under it
        runner = LogCleanerRunner(manager, CleanerConfig(io_max_bytes_per_second=1000))
        candidate = lc.choose(runner.candidates())
        assert candidate is not None
        results: list[bool] = []

        async def clean() -> None:
            results.append(await runner.clean(TP, candidate.cleanable))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(clean)
            for _ in range(1000):
                if runner.stats.bytes_read:
                    break
                await trio.sleep(0)
            assert runner.cleanings[TP].state is lc.CleanerState.CLEANING
            partition.truncate_to(partition.log.segments[1].base_offset + 1)
            for _ in range(10_000):  # let the throttled cleaner go on, bounded
                if results:
                    break
                clock.advance_ms(1_000)
                await trio.sleep(0)
        assert results == [False]
        assert runner.stats.aborted == 1
        assert runner.cleanings[TP].state is lc.CleanerState.IDLE
        survivors = _contents(partition)
        assert survivors == [c for c in before if c[0] < len(survivors)]
        assert not [n for n in disk.list_dir(f"{DIR_A}/{dir_name(TP)}") if "cleaned" in n]

    run(main)


def test_no_cleaning_while_a_move_runs() -> None:
    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        clock = ManualClock()
        manager = _open(disk, clock)
        partition = manager.create(TP, is_new=True)
        await _fill(partition, random.Random(5), 200, 10, {})
        manager.alter_replica_log_dir(TP, DIR_B)
        runner = LogCleanerRunner(manager)
        assert partition.future is not None
        assert runner.candidates() == []
        assert not await runner.clean_once()

    run(main)


@pytest.mark.parametrize("crash_after", ["cleaned", "swap", "deleted"])
def test_interrupted_replace_is_recovered(crash_after: str) -> None:
    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        clock = ManualClock()
        manager = _open(disk, clock)
        partition = manager.create(TP, is_new=True)
        latest: dict[bytes, bytes | None] = {}
        await _fill(partition, random.Random(11), 200, 10, latest)
        partition.flush()
        manager.checkpoint()
        before = _contents(partition)
        log = partition.log
        old = log.sealed_segments()[:2]
        data = b"".join(log.segment_bytes(s) for s in old)
        slices = [bytes(data[h.position:h.position + h.size_in_bytes])
                  for h in rb.iter_batches(data)]
        offset_map, _ = lc.build_offset_map(
            ((piece, rb.parse_header(piece)) for piece in slices), 1000, 0)
        cleaned = lc.clean_batches(data, offset_map, 0, 0)
        path = log.write_cleaned(old[0].base_offset, cleaned.data)
        if crash_after != "cleaned":
            swap = path.replace(".cleaned", ".swap")
            disk.rename(path, swap)
            if crash_after == "deleted":
                for segment in old:
                    disk.rename(segment.log_path, segment.log_path + ".deleted")
        reopened = _open(disk, clock).get(TP)
        assert reopened is not None
        names = disk.list_dir(f"{DIR_A}/{dir_name(TP, DirKind.LIVE)}")
        assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))]
        after = _contents(reopened)
        if crash_after == "cleaned":
            assert after == before
        else:
            cut = old[-1].next_offset
            assert [c for c in after if c[0] >= cut] == [c for c in before if c[0] >= cut]
            assert len(after) < len(before)
        assert _latest_in(after) == latest

    run(main)


def test_a_cleaned_log_moves_to_another_dir() -> None:
    """Cleaned segments may end in a gap (their last batches dropped): the mover starts the next
    segment at its own base, past the copied LEO (it asserted they were equal)."""

    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        clock = ManualClock()
        manager = _open(disk, clock)
        partition = manager.create(TP, is_new=True)
        latest: dict[bytes, bytes | None] = {}
        await _fill(partition, random.Random(13), 300, 5, latest)
        assert await LogCleanerRunner(manager).clean_once()
        cleaned = partition.log.sealed_segments()
        assert any(s.next_offset < n.base_offset for s, n in itertools.pairwise(cleaned))
        before = _contents(partition)
        assert manager.alter_replica_log_dir(TP, DIR_B) == 0
        await drive_move(manager, TP)
        assert partition.log_dir == DIR_B
        assert _contents(partition) == before
        assert _latest_in(before) == latest

    run(main)


RACE_SEEDS = range(12)
RACE_STEPS = 150
RETENTION_MS = COMPACT.delete_retention_ms


@pytest.mark.parametrize("seed", RACE_SEEDS)
def test_invariants_hold_while_the_cleaner_races_appends_truncation_and_moves(seed: int) -> None:
    """Seeded interleavings (replay: ``pytest -k 'races and [SEED]'``): a throttled cleaner runs
    as its own task, so a cleaning spans many awaits, while appends (tombstones included),
    truncations (never below the HW, as KIP-101's: the cleaner stays below the HW), HW moves,
    clock ticks and KIP-113 moves step by step go on. After every step the concrete log
    satisfies the model's named invariants against a reference of what was appended:

    * COMPACTION_OFFSETS_STABLE: every readable offset holds the record appended there; every
      record at or past the cleaner point is readable (the active segment's records among them:
      a truncation may make a cleaned segment the active one, whose removed records stay gone);
    * COMPACTION_KEEPS_LATEST: for every key, its record with the highest offset below the cleaner
      point is readable, unless it is a tombstone at least ``delete.retention.ms`` old (a removed
      tombstone's horizon lies at least that far after its append).
    """

    async def main() -> None:
        rng = random.Random(seed)
        trio_scheduler = getattr(trio._core._run, "_r", None)  # trio's batch-order coin
        if trio_scheduler is not None:
            trio_scheduler.seed(seed)
        disk = SimDisk([DIR_A, DIR_B])
        clock = ManualClock()
        trace = ListTraceSink()
        manager = LogManager.open(config(segment_bytes=600), disk=disk, clock=clock, trace=trace)
        manager.set_log_config(TP.topic, LogConfig(
            segment_bytes=600, cleanup_policy=frozenset({"compact"}),
            min_cleanable_dirty_ratio=0.01, delete_retention_ms=RETENTION_MS,
        ))
        partition = manager.create(TP, is_new=True)
        runner = LogCleanerRunner(manager, CleanerConfig(threads=0, backoff_ms=0))
        reference: dict[int, tuple[bytes, bytes | None, int]] = {}

        def check(step: int) -> None:
            point = runner.cleaned_below(TP)
            contents = _contents(partition)
            readable = {offset: (key, value) for offset, key, value in contents}
            where = f"seed {seed} step {step}"
            for offset, (key, value) in readable.items():  # OFFSETS_STABLE: never rewritten
                assert reference[offset][:2] == (key, value), where
            for offset in reference:  # the dirty part (and so the active segment) untouched
                if offset >= point:
                    assert offset in readable, (where, "dirty record gone", offset, point)
            latest: dict[bytes, int] = {}
            for offset in sorted(reference):
                if offset < point:
                    latest[reference[offset][0]] = offset
            for key, offset in latest.items():  # KEEPS_LATEST
                _, value, appended_ms = reference[offset]
                if offset not in readable:
                    assert value is None, (where, "latest record of", key, "gone", offset)
                    assert clock.wall_ms() >= appended_ms + RETENTION_MS, (where, "tombstone")

        async def cleaner() -> None:
            while True:
                if not await runner.clean_once():
                    await trio.sleep(0)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(cleaner)
            for step in range(RACE_STEPS):
                choice = rng.random()
                move = manager.move_state(TP).state.name
                if choice < 0.55:
                    key = b"k%d" % rng.randrange(6)
                    value = None if rng.random() < 0.15 else b"v%d" % step
                    info = await partition.append_as_leader(_keyed([(key, value)]), 1)
                    reference[info.base_offset] = (key, value, clock.wall_ms())
                    if rng.random() < 0.5:  # the follower fetched: the HW follows
                        partition.high_watermark = partition.log_end_offset
                elif choice < 0.65:
                    partition.high_watermark = partition.log_end_offset
                elif choice < 0.72 and partition.log_end_offset > partition.high_watermark:
                    floor = partition.high_watermark  # KIP-101: never below the HW
                    cut = rng.randrange(floor, partition.log_end_offset)
                    partition.truncate_to(cut)
                    reference = {o: r for o, r in reference.items()
                                 if o < partition.log_end_offset}
                elif choice < 0.8:
                    clock.advance_ms(rng.choice((100, 2_000, RETENTION_MS)))
                elif choice < 0.83 and move in ("NONE", "DONE", "CANCELLED", "FAILED"):
                    other = DIR_B if partition.log_dir == DIR_A else DIR_A
                    manager.alter_replica_log_dir(TP, other)
                elif move == "COPYING":
                    manager.copy_step_nowait(TP, 300)
                elif move == "CAUGHT_UP":
                    await swap_when_caught_up(manager, TP)
                    manager.delete_pending_nowait()
                for _ in range(rng.randrange(1, 6)):  # let the cleaner go on
                    await trio.lowlevel.checkpoint()
                check(step)
            nursery.cancel_scope.cancel()
        # a last, quiet round: the move (if any) finishes, everything is committed and sealed
        await drive_move(manager, TP)
        await partition.append_as_leader(_keyed([(b"k0", b"last")]), 1)
        reference[partition.log_end_offset - 1] = (b"k0", b"last", clock.wall_ms())
        partition.high_watermark = partition.log_end_offset
        partition.log.roll()
        assert await runner.clean_once()
        check(RACE_STEPS)
        assert runner.stats.cleanings > 0, runner.stats
        # the cleaner's trace replays in the model (conformance/cleaner_abstraction.py)
        checker = TraceChecker([CleanerAbstraction()], f"pytest -k 'races and [{seed}]'")
        for event in trace.events:
            checker.feed(event)
        assert checker.violation is None, checker.violation.describe()
        assert any(e.machine == "log_cleaner" and e.event == "SEGMENTS_REPLACED"
                   for e in trace.events)

    run(main)


def test_trace_check_refuses_a_cleaning_of_the_active_segment_and_a_wrong_point() -> None:
    """The abstraction can fail: events a broken cleaner would emit are refused."""
    def started(first_uncleanable: int, active_base: int) -> TraceEvent:
        return TraceEvent.of("log_cleaner", "CLEANING_STARTED", "t-0", "IDLE", "CLEANING",
                             first_dirty=0, first_uncleanable=first_uncleanable,
                             active_base=active_base)

    good = TraceChecker([CleanerAbstraction()])
    assert good.feed(started(10, 10)) is None
    assert good.feed(TraceEvent.of("log_cleaner", "SEGMENTS_REPLACED", "t-0", "CLEANING",
                                   "IDLE", cleaner_point=10, first_dirty=0,
                                   first_uncleanable=10)) is None
    active = TraceChecker([CleanerAbstraction()])
    violation = active.feed(started(12, 10))
    assert violation is not None
    assert "active segment" in violation.describe()
    wrong_point = TraceChecker([CleanerAbstraction()])
    assert wrong_point.feed(started(10, 10)) is None
    violation = wrong_point.feed(TraceEvent.of(
        "log_cleaner", "SEGMENTS_REPLACED", "t-0", "CLEANING", "IDLE", cleaner_point=14,
        first_dirty=0, first_uncleanable=10))
    assert violation is not None
    assert violation.kind == "invariant"  # the point past the active segment's base
    assert violation.invariant == "CLEANER_SHAPE"
    skipped = TraceChecker([CleanerAbstraction()])
    violation = skipped.feed(TraceEvent.of("log_cleaner", "SEGMENTS_REPLACED", "t-0", "IDLE",
                                           "IDLE", cleaner_point=5, first_dirty=0,
                                           first_uncleanable=10))
    assert violation is not None  # a replace without a cleaning is not enabled


def test_a_cleaner_pass_passes_over_logs_that_are_not_compacted_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Only compacted logs are asked their move state (a pass asked every hosted partition,
    0.3-0.5 s of the event loop with 32,000), and the candidates stay in partition order."""
    async def main() -> None:
        manager = _open(SimDisk([DIR_A, DIR_B]), ManualClock())
        for index in range(300):
            manager.create(TopicPartition("plain", index), is_new=True)
        manager.set_log_config("other", COMPACT)
        compacted = [TopicPartition("other", 1), TP, TopicPartition("other", 0)]
        for tp in compacted:
            partition = manager.create(tp, is_new=True)
            await _fill(partition, random.Random(tp.partition), 60, 10, {})
        asked: list[TopicPartition] = []
        move_state = manager.move_state

        def counted(tp: TopicPartition) -> object:
            asked.append(tp)
            return move_state(tp)

        monkeypatch.setattr(manager, "move_state", counted)
        runner = LogCleanerRunner(manager)
        assert [c.key for c in runner.candidates()] == sorted(compacted)
        assert sorted(asked) == sorted(compacted)

    run(main)
