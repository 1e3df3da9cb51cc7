"""Records inside a v2 batch: decode (every codec), re-encode keeping offsets, and find the
first record at or after a timestamp."""

from __future__ import annotations

import pytest

from impl.storage import compression as codecs
from impl.storage import record_batch as rb
from impl.storage import records as rec
from impl.storage.errors import CorruptBatch

CODECS = [
    codecs.CODEC_NONE,
    codecs.CODEC_GZIP,
    codecs.CODEC_SNAPPY,
    codecs.CODEC_LZ4,
    codecs.CODEC_ZSTD,
]


def _records(count: int, base_offset: int = 0) -> list[rec.Record]:
    return [
        rec.Record(
            base_offset + i,
            1_000 + 10 * i,
            b"key-%d" % (i % 3) if i % 4 else None,
            None if i == 5 else b"value-%d" % i,
            ((b"h", b"x"),) if i == 2 else (),
        )
        for i in range(count)
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_records_round_trip_through_every_codec(codec: int) -> None:
    if codec not in (codecs.CODEC_NONE, codecs.CODEC_GZIP):
        pytest.importorskip("cramjam", reason="cramjam (pyproject) not installed in this env")
    records = _records(10, base_offset=40)
    raw = rec.encode_batch(records, base_offset=40, codec=codec)
    (header,) = rb.iter_batches(raw)  # CRC checked
    assert header.compression == codec
    assert header.record_count == 10
    assert header.last_offset == 49
    assert list(rec.iter_records(raw)) == records


def test_first_record_at_or_after_is_a_record_not_the_batch() -> None:
    raw = rec.encode_batch(_records(10), base_offset=0, codec=codecs.CODEC_GZIP)
    assert rec.first_record_at_or_after(raw, 1_050) == (5, 1_050)
    assert rec.first_record_at_or_after(raw, 1_051) == (6, 1_060)
    assert rec.first_record_at_or_after(raw, 0) == (0, 1_000)
    assert rec.first_record_at_or_after(raw, 1_091) is None


def test_rebuilt_batch_keeps_offsets_span_and_producer_fields() -> None:
    records = _records(10, base_offset=100)
    raw = rec.encode_batch(
        records, base_offset=100, codec=codecs.CODEC_GZIP, producer_id=7, producer_epoch=2,
        base_sequence=30, partition_leader_epoch=4,
    )
    header = rb.parse_header(raw)
    kept = [records[3], records[9]]
    cleaned = rec.rebuild_batch(header, kept, delete_horizon_ms=99_999)
    (new,) = rb.iter_batches(cleaned)
    assert (new.base_offset, new.last_offset, new.record_count) == (100, 109, 2)
    assert (new.producer_id, new.producer_epoch, new.base_sequence) == (7, 2, 30)
    assert new.partition_leader_epoch == 4
    assert new.max_timestamp == header.max_timestamp
    assert rec.delete_horizon_ms(new) == 99_999
    assert rec.delete_horizon_ms(header) is None
    assert list(rec.iter_records(cleaned)) == kept  # timestamps survive the new base timestamp
    again = rec.rebuild_batch(new, kept[1:])
    assert rec.delete_horizon_ms(rb.parse_header(again)) == 99_999
    assert list(rec.iter_records(again)) == kept[1:]


def test_build_batch_records_decode() -> None:
    raw = rb.build_batch([b"a", b"b"], keys=[b"k", None], base_offset=3, timestamp_ms=77)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in rec.iter_records(raw)] == [
        (3, 77, b"k", b"a"),
        (4, 77, None, b"b"),
    ]


def test_malformed_records_are_corrupt_batches() -> None:
    raw = bytearray(rec.encode_batch(_records(3), base_offset=0))
    raw[rb.HEADER_SIZE] = 0x7F  # first record claims 63 bytes more than there are
    with pytest.raises(CorruptBatch):
        list(rec.iter_records(bytes(raw)))
    garbage = rec.encode_batch(_records(3), base_offset=0, codec=codecs.CODEC_GZIP)
    broken = garbage[: rb.HEADER_SIZE] + b"\x00" * (len(garbage) - rb.HEADER_SIZE)
    with pytest.raises(CorruptBatch):
        list(rec.iter_records(broken))


@pytest.mark.parametrize("codec", [codecs.CODEC_GZIP, codecs.CODEC_LZ4, codecs.CODEC_ZSTD])
def test_a_batch_inflating_past_the_bound_is_corrupt_on_the_read_path(codec: int) -> None:
    """The cleaner and the time index read records with the same bound as produce validation."""
    raw = rec.encode_batch(_records(1), base_offset=0, codec=codec)
    bomb_body = codecs.compress(codec, b"\x00" * (codecs.MAX_UNCOMPRESSED_BATCH_BYTES + 1))
    bomb = bytearray(raw[: rb.HEADER_SIZE] + bomb_body)  # the header, the records replaced
    bomb[8:12] = (len(bomb) - rb.LOG_OVERHEAD).to_bytes(4, "big")  # batchLength
    with pytest.raises(CorruptBatch, match="inflate"):
        list(rec.iter_records(bytes(bomb)))
