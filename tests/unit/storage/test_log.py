"""The log format: segments, sparse index, roll, read, truncate, retention, torn tails,
checkpoints, epoch cache, offsets by timestamp, placement; invalid batches leave the log alone."""

from __future__ import annotations

import pytest

from conformance.disk import SimDisk
from impl.storage import (
    CorruptBatch,
    InvalidRecord,
    LogManager,
    MessageTooLarge,
    OffsetOutOfRange,
    TopicPartition,
)
from impl.storage import compression as codecs
from impl.storage import record_batch as rb
from impl.storage import records as rec
from impl.storage.checkpoint import (
    META_PROPERTIES,
    RECOVERY_POINT_CHECKPOINT,
    format_offsets,
    parse_offsets,
    read_checkpoint,
    write_atomically,
)
from impl.storage.leader_epoch import EpochEntry, LeaderEpochCache
from impl.storage.names import DirKind, dir_name, parse_dir_name, segment_log_name

from ._support import DIR_A, DIR_B, TP, ExtremeRng, ManualClock, batch, config, log_bytes, run


def _open(disk: SimDisk, clock: ManualClock | None = None, **overrides: int) -> LogManager:
    return LogManager.open(config(**overrides), disk=disk, clock=clock or ManualClock())


def test_names_follow_kafka() -> None:
    assert segment_log_name(42) == "00000000000000000042.log"
    assert dir_name(TopicPartition("a.b-c", 3)) == "a.b-c-3"
    assert parse_dir_name("a.b-c-3.move") == (TopicPartition("a.b-c", 3), DirKind.MOVE)
    assert parse_dir_name("meta.properties") is None
    assert parse_dir_name("t-01") is None


def test_append_roll_read_and_index() -> None:
    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        manager = _open(disk)
        partition = manager.create(TP, is_new=True)
        infos = [await partition.append_as_leader(batch(i), 1) for i in range(60)]
        assert [i.base_offset for i in infos] == list(range(0, 120, 2))
        assert infos[-1].last_offset == 119
        log = partition.log
        assert len(log.segments) > 3  # rolled by size
        assert all(s.size <= 1500 for s in log.segments)
        assert any(s.index for s in log.segments)
        names = disk.list_dir(f"{DIR_A}/{dir_name(TP)}")
        assert segment_log_name(0) in names
        assert "leader-epoch-checkpoint" in names
        for offset in (0, 1, 37, 64, 119):
            (piece,) = partition.read(offset, 1 << 20)
            headers = list(rb.iter_batches(piece.read_all()))
            piece.close()
            assert headers[0].base_offset <= offset <= headers[0].last_offset
        assert partition.read(120, 100) == []
        with pytest.raises(OffsetOutOfRange):
            partition.read(121, 100)
        # max_offset (the HW for consumers) excludes batches at or past it
        (piece,) = partition.read(0, 1 << 20, max_offset=4)
        assert [h.last_offset for h in rb.iter_batches(piece.read_all())] == [1, 3]
        piece.close()
        assert partition.read(4, 1 << 20, max_offset=4) == []
        # KIP-74: the first batch whole even if larger than max_bytes
        (piece,) = partition.read(0, 1)
        assert piece.size >= len(batch(0))
        piece.close()

    run(main)


@pytest.mark.parametrize("index_interval_bytes", [120, 1 << 20])
def test_a_read_ends_on_a_whole_batch_near_an_index_entry(index_interval_bytes: int) -> None:
    """A read cut by ``max_bytes`` ends after the last whole batch below the limit when that
    batch lies within a few headers of the offset index entry below the limit; else (many small
    batches past the last entry) where the limit falls, as Kafka's does. Either way the first
    batch is whole and the bytes are the log's."""
    async def main() -> None:
        manager = _open(SimDisk([DIR_A, DIR_B]), segment_bytes=1 << 20,
                        index_interval_bytes=index_interval_bytes)
        partition = manager.create(TP, is_new=True)
        for i in range(30):
            await partition.append_as_leader(batch(i), 1)
        whole = log_bytes(manager.disk, DIR_A)
        ends = [h.position + h.size_in_bytes for h in rb.iter_batches(whole)]
        for max_bytes in range(1, len(whole) + 40, 7):
            (piece,) = partition.read(0, max_bytes)
            raw = piece.read_all()
            piece.close()
            assert raw == whole[:len(raw)]
            below = max([end for end in ends if end <= max_bytes] or [ends[0]])
            if max_bytes >= len(whole):
                assert len(raw) == len(whole)
            elif index_interval_bytes == 120 or max_bytes <= ends[8]:
                # an entry every batch or two; or the first batch's end and 8 more headers
                assert len(raw) == below, (max_bytes, len(raw), below)
            else:
                assert len(raw) == max(max_bytes, ends[0]), (max_bytes, len(raw))

    run(main)


def test_roll_by_time() -> None:
    async def main() -> None:
        clock = ManualClock()
        manager = _open(SimDisk([DIR_A, DIR_B]), clock, roll_ms=1000)
        partition = manager.create(TP, is_new=True)
        await partition.append_as_leader(batch(0), 1)
        await partition.append_as_leader(batch(1), 1)
        assert len(partition.log.segments) == 1
        clock.advance_ms(1000)
        await partition.append_as_leader(batch(2), 1)
        assert [s.base_offset for s in partition.log.segments] == [0, 4]

    run(main)


@pytest.mark.parametrize(
    ("mangle", "error"),
    [
        (lambda b: b[:-1] + bytes([b[-1] ^ 1]), CorruptBatch),
        (lambda b: b[:-5], CorruptBatch),
        (lambda b: b[:16] + b"\x07" + b[17:], CorruptBatch),
        (lambda b: b[:16] + b"\x01" + b[17:], InvalidRecord),
        (lambda b: b + rb.build_batch([b"x" * 3000]), MessageTooLarge),
        (lambda b: rb.build_batch([b"x"], base_offset=9), InvalidRecord),
    ],
    ids=["bad-crc", "truncated", "unknown-magic", "magic-1", "oversized", "base-offset"],
)
def test_invalid_batches_are_rejected_and_leave_the_log_untouched(
    mangle: object, error: type[Exception]
) -> None:
    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        manager = _open(disk, message_max_bytes=2000)
        partition = manager.create(TP, is_new=True)
        await partition.append_as_leader(batch(0), 1)
        before = (log_bytes(disk, DIR_A), partition.log_end_offset)
        bad = mangle(batch(1))  # type: ignore[operator]
        with pytest.raises(error) as info:
            await partition.append_as_leader(bad, 1)
        assert info.value.error_code in (2, 10, 87)  # type: ignore[attr-defined]
        assert str(info.value)
        assert (log_bytes(disk, DIR_A), partition.log_end_offset) == before
        with pytest.raises(CorruptBatch):
            await partition.append_as_follower(bad if error is CorruptBatch else b"\0" * 70)
        assert (log_bytes(disk, DIR_A), partition.log_end_offset) == before

    run(main)


def test_follower_append_keeps_offsets_and_learns_epochs() -> None:
    async def main() -> None:
        manager = _open(SimDisk([DIR_A, DIR_B]))
        partition = manager.create(TP, is_new=True)
        records = rb.build_batch([b"a", b"b"], base_offset=0, partition_leader_epoch=3)
        records += rb.build_batch([b"c"], base_offset=2, partition_leader_epoch=5)
        info = await partition.append_as_follower(records)
        assert (info.base_offset, info.last_offset) == (0, 2)
        assert partition.end_offset_for_epoch(3) == (3, 2)
        assert partition.end_offset_for_epoch(4) == (3, 2)
        assert partition.end_offset_for_epoch(5) == (5, 3)
        assert partition.end_offset_for_epoch(2) == (2, 0)  # older than every entry (Kafka)
        assert partition.end_offset_for_epoch(-1) == (-1, -1)
        with pytest.raises(CorruptBatch):
            await partition.append_as_follower(rb.build_batch([b"x"], base_offset=1))

    run(main)


def test_truncate_to_within_and_across_segments() -> None:
    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        manager = _open(disk)
        partition = manager.create(TP, is_new=True)
        for i in range(60):
            await partition.append_as_leader(batch(i), 1 + i // 20)
        partition.high_watermark = 100
        partition.truncate_to(51)  # mid-batch: the whole batch [50, 51] goes
        assert partition.log_end_offset == 50
        assert partition.high_watermark == 50
        assert partition.end_offset_for_epoch(3) == (2, 50)  # epoch 3 began at 80: gone
        partition.truncate_to(30)
        assert partition.log_end_offset == 30
        assert partition.end_offset_for_epoch(9) == (1, 30)
        assert partition.log.segments[-1].size == disk.size(partition.log.segments[-1].log_path)
        info = await partition.append_as_leader(batch(99), 7)
        assert info.base_offset == 30
        reopened = _open(disk).get(TP)
        assert reopened is not None
        assert reopened.log_end_offset == 32

    run(main)


def test_retention_by_size_and_time_only_below_hw() -> None:
    async def main() -> None:
        clock = ManualClock()
        disk = SimDisk([DIR_A, DIR_B])
        manager = _open(disk, clock, retention_bytes=3000, retention_ms=-1)
        partition = manager.create(TP, is_new=True)
        for i in range(60):
            await partition.append_as_leader(batch(i), 1)
        assert manager.enforce_retention() == 0  # HW 0: nothing is eligible
        partition.high_watermark = partition.log_end_offset
        assert manager.enforce_retention() > 0
        assert partition.log.size_in_bytes - partition.log.segments[0].size < 3000
        assert partition.log_start_offset > 0
        with pytest.raises(OffsetOutOfRange):
            partition.read(0, 100)

        by_time = _open(SimDisk([DIR_A, DIR_B]), clock, retention_ms=10_000)
        other = by_time.create(TP, is_new=True)
        for _ in range(30):
            await other.append_as_leader(rb.build_batch([b"v"], timestamp_ms=clock.wall), 1)
        other.high_watermark = other.log_end_offset
        assert by_time.enforce_retention() == 0
        clock.advance_ms(20_000)
        count = len(other.log.segments)
        assert count > 1
        assert by_time.enforce_retention() == count - 1
        assert len(other.log.segments) == 1  # the active segment is never deleted

    run(main)


def test_offset_for_timestamp() -> None:
    async def main() -> None:
        manager = _open(SimDisk([DIR_A, DIR_B]))
        partition = manager.create(TP, is_new=True)
        for i in range(40):
            await partition.append_as_leader(batch(i), 1)  # timestamps 1000 + i
        assert partition.offset_for_timestamp(1000) == (0, 1000)
        assert partition.offset_for_timestamp(1017) == (34, 1017)
        assert partition.offset_for_timestamp(5000) is None
        assert partition.log_end_offset == 80

    run(main)


def _stamped_batch(first: int, count: int, codec: int = 0) -> bytes:
    """``count`` records stamped ``first``, ``first + 1``, ... in one batch."""
    records = [rec.Record(i, first + i, b"k", b"v%d" % i, ()) for i in range(count)]
    return rec.encode_batch(records, base_offset=0, codec=codec)


def test_offset_for_timestamp_finds_the_record_inside_a_batch() -> None:
    """Ten records in one batch, asked for the sixth one's timestamp: offset 5, as Kafka."""

    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        manager = _open(disk)
        partition = manager.create(TP, is_new=True)
        await partition.append_as_leader(_stamped_batch(10_000, 10), 1)
        assert partition.offset_for_timestamp(10_005) == (5, 10_005)
        assert partition.offset_for_timestamp(10_000) == (0, 10_000)
        assert partition.offset_for_timestamp(10_010) is None
        for round_ in range(1, 60):  # many batches: segments roll, the time index fills
            codec = codecs.CODEC_GZIP if round_ % 2 else codecs.CODEC_NONE
            await partition.append_as_leader(_stamped_batch(10_000 + 10 * round_, 10, codec), 1)
        log = partition.log
        assert len(log.segments) > 3
        assert any(segment.time_index for segment in log.segments)
        for target in (10_000, 10_123, 10_377, 10_589, 10_599):
            assert partition.offset_for_timestamp(target) == (target - 10_000, target)
        assert partition.offset_for_timestamp(10_600) is None
        names = disk.list_dir(f"{DIR_A}/{dir_name(TP)}")
        assert "00000000000000000000.timeindex" in names
        partition.flush()
        manager.checkpoint()
        reopened = _open(disk).get(TP)
        assert reopened is not None
        assert [s.time_index for s in reopened.log.segments[:-1]] == [
            s.time_index for s in log.segments[:-1]
        ]
        for target in (10_001, 10_377, 10_599):
            assert reopened.offset_for_timestamp(target) == (target - 10_000, target)
        reopened.truncate_to(300)
        assert all(o < 300 for s in reopened.log.segments for _, o in s.time_index)
        assert reopened.offset_for_timestamp(10_299) == (299, 10_299)
        assert reopened.offset_for_timestamp(10_300) is None

    run(main)


def test_time_index_skips_batches_older_than_the_target() -> None:
    """The scan starts at the time index's entry: batches before it are never read."""

    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        manager = _open(disk, segment_bytes=1 << 20)
        partition = manager.create(TP, is_new=True)
        for round_ in range(100):
            await partition.append_as_leader(_stamped_batch(10 * round_, 10), 1)
        (segment,) = partition.log.segments
        assert len(segment.time_index) > 10
        start = segment.time_lookup(905)
        assert 0 < start <= 900
        assert all(bound < 905 for bound, offset in segment.time_index if offset <= start)
        assert partition.offset_for_timestamp(905) == (905, 905)

    run(main)


def test_torn_tail_is_cut_at_the_last_valid_batch_on_recovery() -> None:
    disk = SimDisk([DIR_A, DIR_B])

    async def fill() -> None:
        manager = _open(disk)
        partition = manager.create(TP, is_new=True)
        for i in range(10):
            await partition.append_as_leader(batch(i), 1)
        partition.flush()
        manager.checkpoint()
        for i in range(10, 13):
            await partition.append_as_leader(batch(i), 1)

    run(fill)
    durable = log_bytes(disk, DIR_A)
    active = sorted(n for n in disk.list_dir(f"{DIR_A}/{dir_name(TP)}") if n.endswith(".log"))[-1]
    path = f"{DIR_A}/{dir_name(TP)}/{active}"
    disk.truncate(path, disk.size(path) - 7)  # a tear in the middle of the last batch
    disk.fsync(path)
    manager = _open(disk)
    partition = manager.get(TP)
    assert partition is not None
    assert partition.log_end_offset == 24  # batches 0..11, the torn 12th cut
    assert log_bytes(disk, DIR_A) == durable[: len(durable) - len(batch(12))]


def test_corrupt_batch_in_the_middle_cuts_the_rest_on_recovery() -> None:
    disk = SimDisk([DIR_A, DIR_B])

    async def fill() -> None:
        manager = _open(disk, segment_bytes=1 << 20)
        partition = manager.create(TP, is_new=True)
        for i in range(10):
            await partition.append_as_leader(batch(i), 1)
        partition.flush()

    run(fill)
    path = f"{DIR_A}/{dir_name(TP)}/{segment_log_name(0)}"
    position = 4 * len(batch(0)) + 40
    disk.pwrite(path, position, b"\xff")
    disk.fsync(path)
    partition = _open(disk, segment_bytes=1 << 20).get(TP)
    assert partition is not None
    assert partition.log_end_offset == 8


def test_a_stale_later_segment_does_not_make_unflushed_batches_trusted() -> None:
    """Fuzz seed 14102: a truncation deleted the segment at 16 (an unlink, not yet durable) and
    segment 0 took offsets 16.. again, unflushed; a crash brought the deleted file back and tore
    a batch in the middle of segment 0's unflushed bytes. The file at 16 made segment 0 look
    wholly below the recovery point (16): its tail was loaded without a CRC check and the torn
    batch was served. Recovery must check every batch from the recovery point on."""
    disk = SimDisk([DIR_A, DIR_B])
    path = f"{DIR_A}/{dir_name(TP)}"
    stale: list[bytes] = []

    async def fill() -> None:
        manager = _open(disk, segment_bytes=1 << 20)
        partition = manager.create(TP, is_new=True)
        for i in range(8):
            await partition.append_as_leader(batch(i), 1)
        partition.log.roll()  # segment 16, its dir entry durable
        await partition.append_as_leader(batch(8), 1)
        partition.flush()
        later = f"{path}/{segment_log_name(16)}"
        stale.append(disk.read(later, 0, disk.size(later)))
        partition.truncate_to(15)  # segment 16 deleted; segment 0 cut at 14
        for i in (9, 10):  # offsets 14..17 in segment 0, flushed: the recovery point is 18
            await partition.append_as_leader(batch(i), 1)
        manager.checkpoint()
        for i in (11, 12):  # offsets 18..21 in segment 0, unflushed
            await partition.append_as_leader(batch(i), 1)

    run(fill)
    assert disk.list_dir(path).count(segment_log_name(16)) == 0
    # What a crash may leave: the unlink undone, the unflushed bytes kept, one torn in the
    # middle of the last batch's records (its header intact).
    disk.create(f"{path}/{segment_log_name(16)}")
    disk.append(f"{path}/{segment_log_name(16)}", stale[0])
    disk.fsync(f"{path}/{segment_log_name(16)}")
    disk.fsync_dir(path)
    first = f"{path}/{segment_log_name(0)}"
    size = disk.size(first)
    disk.pwrite(first, size - len(batch(12)) + rb.HEADER_SIZE + 2, b"\xff\xff\xff")
    disk.fsync(first)
    partition = _open(disk, segment_bytes=1 << 20).get(TP)
    assert partition is not None
    assert partition.log_end_offset == 20  # the torn batch [20, 21] cut
    assert segment_log_name(16) not in disk.list_dir(path)  # the stale file overlapped: gone
    recovered = log_bytes(disk, DIR_A)
    assert [h.base_offset for h in rb.iter_batches(recovered)] == list(range(0, 20, 2))


def test_a_truncation_to_a_later_segments_base_keeps_the_offsets_below_it() -> None:
    """Fuzz seed 18812: a truncation to 12 deleted the empty segment at 16 (an unlink, not yet
    durable) and cut segment 0 to 12, fsynced; a crash undid the unlink, so the log came back
    with segment 0 ending at 12 and the empty segment 16 after it (LEO 16, offsets 12..15 a
    gap). A truncation to 16 (the HW) then deleted the segment based at 16 as well and left the
    LEO at 12, below the HW: the next append took offsets 12.. again. As Kafka, only segments
    based above the target go; the one based at it is emptied."""
    disk = SimDisk([DIR_A, DIR_B])
    path = f"{DIR_A}/{dir_name(TP)}"

    async def fill() -> None:
        manager = _open(disk, segment_bytes=1 << 20)
        partition = manager.create(TP, is_new=True)
        for i in range(8):
            await partition.append_as_leader(batch(i), 1)
        partition.log.roll()  # segment 16, empty, its dir entry durable
        partition.flush()
        partition.truncate_to(12)  # segment 16 deleted; segment 0 cut at 12, fsynced
        assert partition.log_end_offset == 12

    run(fill)
    # What a crash may leave: the unlink of the empty segment 16 undone.
    disk.create(f"{path}/{segment_log_name(16)}")
    disk.fsync_dir(path)

    async def after() -> None:
        partition = _open(disk, segment_bytes=1 << 20).get(TP)
        assert partition is not None
        assert partition.log_end_offset == 16
        info = await partition.append_as_leader(batch(20), 2)
        assert info.base_offset == 16
        partition.high_watermark = 16
        partition.truncate_to(16)  # a follower's truncation to the HW
        assert partition.log_end_offset == 16
        assert partition.high_watermark == 16
        again = await partition.append_as_leader(batch(21), 2)
        assert again.base_offset == 16

    run(after)


def test_crash_loses_only_unflushed_appends() -> None:
    disk = SimDisk([DIR_A, DIR_B])

    async def fill() -> None:
        manager = _open(disk)
        partition = manager.create(TP, is_new=True)
        for i in range(30):
            await partition.append_as_leader(batch(i), 1)
        manager.checkpoint()
        durable.append(log_bytes(disk, DIR_A))
        for i in range(30, 35):
            await partition.append_as_leader(batch(i), 1)

    durable: list[bytes] = []
    run(fill)
    disk.crash(ExtremeRng(keep=False))  # type: ignore[arg-type]
    partition = _open(disk).get(TP)
    assert partition is not None
    assert 60 <= partition.log_end_offset < 70  # a roll fsyncs the segment it closes
    recovered = log_bytes(disk, DIR_A)
    assert recovered.startswith(durable[0])
    list(rb.iter_batches(recovered))  # whole, valid batches only


def test_recovery_persists_the_epoch_entries_it_drops() -> None:
    """An epoch led from the LEO without writing (its entry at the LEO) is dropped when the log
    is loaded; the checkpoint must say so (Kafka's ``truncateFromEnd`` flushes), or the entry
    comes back at a later load once records of the older epoch were fetched past its start and
    cuts that epoch short (seed 2081: a follower truncated records both logs held)."""
    disk = SimDisk([DIR_A, DIR_B])

    async def lead_then_follow() -> None:
        partition = _open(disk).create(TP, is_new=True)
        for i in range(2):
            await partition.append_as_leader(batch(i), 1)
        partition.assign_epoch(2, partition.log_end_offset)  # led epoch 2 from 4, wrote nothing
        partition.flush()

    async def follow_on() -> None:
        partition = _open(disk).get(TP)
        assert partition is not None
        assert partition.log.epochs.entries == (EpochEntry(1, 0),)
        await partition.append_as_follower(rb.build_batch([b"e", b"f"], base_offset=4,
                                                          partition_leader_epoch=1))
        partition.flush()

    run(lead_then_follow)
    run(follow_on)
    reopened = _open(disk).get(TP)
    assert reopened is not None
    assert reopened.log_end_offset == 6
    assert reopened.log.epochs.entries == (EpochEntry(1, 0),)
    assert reopened.end_offset_for_epoch(1) == (1, 6)


def test_checkpoints_are_atomic_and_kafka_formatted() -> None:
    disk = SimDisk([DIR_A])
    offsets = {TopicPartition("t", 1): 5, TopicPartition("a b", 0): 7}
    text = format_offsets(offsets)
    assert text.splitlines()[:2] == ["0", "2"]
    assert parse_offsets(text) == offsets
    write_atomically(disk, DIR_A, RECOVERY_POINT_CHECKPOINT, text)
    write_atomically(disk, DIR_A, RECOVERY_POINT_CHECKPOINT, format_offsets({}))
    disk.crash(ExtremeRng(keep=False))  # type: ignore[arg-type]
    assert read_checkpoint(disk, DIR_A, RECOVERY_POINT_CHECKPOINT) == format_offsets({})
    with pytest.raises(ValueError, match="entries"):
        parse_offsets("0\n3\nt 0 1\n")


def test_meta_properties_per_dir_and_foreign_broker_id_is_offline() -> None:
    disk = SimDisk([DIR_A, DIR_B])
    _open(disk)
    text = read_checkpoint(disk, DIR_A, META_PROPERTIES)
    assert text is not None
    assert text.startswith("version=0\nbroker.id=0\ndirectory.id=")
    write_atomically(disk, DIR_B, META_PROPERTIES, "version=0\nbroker.id=7\n")
    assert _open(disk).offline_dirs == {DIR_B}


def test_placement_fewest_bytes_then_preferred_dir() -> None:
    async def main() -> None:
        manager = _open(SimDisk([DIR_A, DIR_B]))
        first = manager.create(TopicPartition("t", 0), is_new=True)
        assert first.log_dir == DIR_A
        await first.append_as_leader(batch(0), 1)
        assert manager.create(TopicPartition("t", 1), is_new=True).log_dir == DIR_B
        assert manager.create(TopicPartition("t", 2), is_new=True).log_dir == DIR_B
        assert manager.alter_replica_log_dir(TopicPartition("t", 3), DIR_A) == 9
        assert manager.create(TopicPartition("t", 3), is_new=True).log_dir == DIR_A

    run(main)


def test_delete_renames_then_removes() -> None:
    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        manager = _open(disk)
        partition = manager.create(TP, is_new=True)
        await partition.append_as_leader(batch(0), 1)
        manager.delete(TP)
        assert manager.get(TP) is None
        assert dir_name(TP) not in disk.list_dir(DIR_A)
        manager.delete_pending_nowait()
        assert not any(n.startswith("topic") for n in disk.list_dir(DIR_A))

    run(main)


def test_leader_epoch_cache_rules() -> None:
    cache = LeaderEpochCache()
    assert cache.assign(1, 0)
    assert not cache.assign(1, 5)
    assert not cache.assign(0, 9)
    assert cache.assign(3, 10)
    assert cache.end_offset_for_epoch(2, 20) == (1, 10)
    assert cache.end_offset_for_epoch(3, 20) == (3, 20)
    assert cache.assign(4, 7)  # a new leader truncated below epoch 3's start
    assert cache.entries == (EpochEntry(1, 0), EpochEntry(4, 7))
    assert cache.truncate_from_start(5)
    assert cache.entries == (EpochEntry(1, 5), EpochEntry(4, 7))
    assert LeaderEpochCache.from_text(cache.to_text()).entries == cache.entries


def test_an_append_whose_guard_says_no_writes_nothing() -> None:
    """The guard is asked holding the partition lock, just before the write (the broker node's
    "still the leader's append?"): no, and nothing is written, leader or follower."""
    from impl.storage.errors import AppendNotWanted

    async def main() -> None:
        manager = _open(SimDisk([DIR_A, DIR_B]))
        partition = manager.create(TP, is_new=True)
        await partition.append_as_leader(batch(0), 1, guard=lambda: True)
        with pytest.raises(AppendNotWanted):
            await partition.append_as_leader(batch(1), 1, guard=lambda: False)
        with pytest.raises(AppendNotWanted):
            partition.append_as_leader_nowait(batch(1), 1, guard=lambda: False)
        follower = manager.create(TopicPartition("f", 0), is_new=True)
        pieces = partition.read(0, 1 << 20)
        records = b"".join(piece.read_all() for piece in pieces)
        for piece in pieces:
            piece.close()
        with pytest.raises(AppendNotWanted):
            await follower.append_as_follower(records, guard=lambda: False)
        assert (partition.log_end_offset, follower.log_end_offset) == (2, 0)
        assert not partition.lock.locked()

    run(main)
