"""The cleaner keeps each idempotent producer's last batch (Kafka's ``RETAIN_EMPTY``), so the
producer's sequence state, rebuilt from the log after a change of leader, survives compaction:
its next batch is accepted in order and a retry of its last batch is recognised as one."""

from __future__ import annotations

from impl.broker.producer_state import PartitionProducerState, SequenceVerdict
from impl.storage import LogConfig, LogManager
from impl.storage import log_cleaner as lc
from impl.storage import record_batch as rb
from impl.storage import records as rec
from impl.storage.cleaner_runner import CleanerConfig, LogCleanerRunner

from ._support import DIR_A, DIR_B, TP, ManualClock, config, run

COMPACT = LogConfig(segment_bytes=1500, cleanup_policy=frozenset({"compact"}),
                    min_cleanable_dirty_ratio=0.01, delete_retention_ms=60_000)
P, Q = 7, 8


def _idempotent(key: bytes, value: bytes, producer_id: int, sequence: int) -> bytes:
    return rb.build_batch([value], keys=[key], producer_id=producer_id, producer_epoch=0,
                          base_sequence=sequence, timestamp_ms=1_000)


def test_clean_batches_keeps_the_last_batch_of_a_producer_empty() -> None:
    first = rec.encode_batch([rec.Record(0, 1_000, b"k", b"old", ())], base_offset=0,
                             producer_id=P, producer_epoch=0, base_sequence=4)
    offset_map = lc.OffsetMap(100, end_offset=0)
    later = rec.encode_batch([rec.Record(1, 1_000, b"k", b"new", ())], base_offset=1)
    for batch in (first, later):
        assert offset_map.add_batch(batch, rb.parse_header(batch, 0))
    dropped = lc.clean_batches(first, offset_map, 0, 0)
    assert dropped.data == b"", "superseded and not a producer's last batch: gone"
    kept = lc.clean_batches(first, offset_map, 0, 0, {P: 0})
    [header] = kept.headers
    assert (header.record_count, header.base_offset, header.last_offset) == (0, 0, 0)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (P, 0, 4)
    rb.check_crc(kept.data, header)
    # a follower accepts the emptied batch (replicated batches may hold fewer records)
    assert rb.validate_replica_records(kept.data, 0) == [header]
    # not the producer's last batch: dropped
    assert lc.clean_batches(first, offset_map, 0, 0, {P: 5}).data == b""


def test_a_compacted_log_keeps_the_producer_sequence_state() -> None:
    async def main() -> None:
        from conformance.disk import SimDisk

        disk = SimDisk([DIR_A, DIR_B])
        manager = LogManager.open(config(), disk=disk, clock=ManualClock())
        manager.set_log_config(TP.topic, COMPACT)
        partition = manager.create(TP, is_new=True)
        await partition.append_as_leader(_idempotent(b"k0", b"a", P, 0), 1)  # offset 0
        await partition.append_as_leader(_idempotent(b"k1", b"a", P, 1), 1)  # offset 1: last
        await partition.append_as_leader(_idempotent(b"k1", b"b", Q, 0), 1)  # supersedes it
        for index in range(60):  # roll segments so the three batches are cleanable
            await partition.append_as_leader(rec.encode_batch(
                [rec.Record(0, 1_000, b"f%d" % index, b"x" * 40, ())], base_offset=0), 1)
        partition.high_watermark = partition.log_end_offset
        assert await LogCleanerRunner(manager, CleanerConfig(threads=0)).clean_once()

        log = partition.log
        headers = [h for s in log.segments
                   for h in rb.iter_batches(log.disk.read(s.log_path, 0, s.size))]
        by_offset = {h.base_offset: h for h in headers}
        assert by_offset[0].record_count == 1, "P's first batch holds k0's latest value"
        assert by_offset[1].record_count == 0, "P's last batch kept, emptied"
        assert by_offset[1].producer_id == P
        # the sequence state a new leader rebuilds from this log (as the broker node does:
        # the sequence span is the offset span)
        state = PartitionProducerState()
        for h in headers:
            state.replay(h.producer_id, h.producer_epoch, first_sequence=h.base_sequence,
                         record_count=h.last_offset_delta + 1, first_offset=h.base_offset,
                         last_offset=h.last_offset)
        assert state.check(P, 0, 2, 1).verdict is SequenceVerdict.APPEND
        retry = state.check(P, 0, 1, 1)
        assert retry.verdict is SequenceVerdict.DUPLICATE
        assert retry.duplicate_of is not None
        assert retry.duplicate_of.first_offset == 1

    run(main)
