"""RecordBatch v2 validation: each rejection names its Kafka error code and leaves input alone."""

from __future__ import annotations

import dataclasses
import struct
import warnings

import pytest

from impl.storage import record_batch as rb
from impl.storage.errors import CorruptBatch, ErrorCode, InvalidRecord, MessageTooLarge


def _batch(n: int = 3, base_offset: int = 0) -> bytes:
    return rb.build_batch([b"v%d" % i for i in range(n)], base_offset=base_offset)


def test_built_batch_is_valid_and_crc_covers_bytes_21_on() -> None:
    batch = _batch()
    (header,) = rb.validate_client_records(batch, 1 << 20)
    assert header.record_count == 3
    assert header.last_offset_delta == 2
    assert header.crc == rb.crc32c(batch[21:])


def test_bad_crc_is_corrupt_message() -> None:
    batch = bytearray(_batch())
    batch[-1] ^= 0xFF
    with pytest.raises(CorruptBatch, match="CRC") as info:
        rb.validate_client_records(batch, 1 << 20)
    assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE
    assert int(info.value.error_code) == 2


def test_truncated_batch_is_corrupt_message() -> None:
    batch = _batch()
    for cut in (1, 20, rb.HEADER_SIZE - 1, rb.HEADER_SIZE, len(batch) - 1):
        with pytest.raises(CorruptBatch):
            rb.validate_client_records(batch[:cut], 1 << 20)


def test_unknown_magic_is_corrupt_and_v0_v1_are_invalid_record() -> None:
    cases: list[tuple[int, type[Exception]]] = [
        (3, CorruptBatch), (-1, CorruptBatch), (0, InvalidRecord), (1, InvalidRecord)
    ]
    for magic, error in cases:
        batch = bytearray(_batch())
        batch[rb.MAGIC_OFFSET] = magic & 0xFF
        with pytest.raises(error):
            rb.validate_client_records(batch, 1 << 20)


def test_oversized_batch_is_message_too_large_before_crc() -> None:
    batch = bytearray(_batch(50))
    batch[-1] ^= 1  # Kafka checks the size before the CRC
    with pytest.raises(MessageTooLarge) as info:
        rb.validate_client_records(batch, len(batch) - 1)
    assert info.value.error_code == 10
    rb.validate_client_records(_batch(50), len(batch))


def test_nonzero_client_base_offset_is_invalid_record() -> None:
    with pytest.raises(InvalidRecord) as info:
        rb.validate_client_records(_batch(base_offset=7), 1 << 20)
    assert info.value.error_code == 87


def test_inconsistent_record_count_is_invalid_record() -> None:
    batch = bytearray(_batch())
    # recordCount is inside the CRC: fix the CRC so that only the count is wrong.
    struct.pack_into(">i", batch, 57, 5)
    struct.pack_into(">I", batch, rb.CRC_OFFSET, rb.crc32c(batch[21:]))
    with pytest.raises(InvalidRecord, match="record count"):
        rb.validate_client_records(batch, 1 << 20)


def test_two_batches_in_a_produce_request_are_invalid() -> None:
    with pytest.raises(InvalidRecord, match="exactly one"):
        rb.validate_client_records(_batch() + _batch(), 1 << 20)
    assert len(rb.validate_client_records(_batch() + _batch(), 1 << 20, single_batch=False)) == 2


def test_empty_records_are_invalid() -> None:
    with pytest.raises(InvalidRecord):
        rb.validate_client_records(b"", 1 << 20)


def test_assign_offsets_in_place_keeps_crc_valid() -> None:
    records = bytearray(_batch(2) + _batch(3))
    headers = rb.validate_client_records(records, 1 << 20, single_batch=False)
    last = rb.assign_offsets(records, headers, 100, leader_epoch=7)
    assert last == 104
    got = list(rb.iter_batches(records))
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in got] == [
        (100, 101, 7),
        (102, 104, 7),
    ]


@pytest.mark.parametrize("stray_position", [rb.CRC_OFFSET, rb.ATTRIBUTES_OFFSET,
                                            rb.ATTRIBUTES_OFFSET + 4])
def test_assign_offsets_refuses_a_write_that_strays_into_the_header(
    monkeypatch: pytest.MonkeyPatch, stray_position: int
) -> None:
    """The re-read after stamping replaces a second CRC pass: an epoch written over the CRC, the
    attributes or the last offset delta (a wrong field position) is caught before the batch
    reaches the log."""
    records = bytearray(_batch(2))
    headers = rb.validate_client_records(records, 1 << 20)
    monkeypatch.setattr(rb, "PARTITION_LEADER_EPOCH_OFFSET", stray_position)
    with pytest.raises(AssertionError):
        rb.assign_offsets(records, headers, 100, leader_epoch=7)


def test_valid_prefix_stops_at_torn_tail_and_at_corruption() -> None:
    a, b = _batch(2, base_offset=0), _batch(2, base_offset=2)
    whole = a + b
    assert rb.valid_prefix(whole, 0).valid_bytes == len(whole)
    torn = rb.valid_prefix(whole[:-3], 0)
    assert torn.valid_bytes == len(a)
    assert torn.error is not None
    corrupt = bytearray(whole)
    corrupt[len(a) + 30] ^= 1
    assert rb.valid_prefix(corrupt, 0).valid_bytes == len(a)
    # offsets going backwards end the valid prefix too
    assert rb.valid_prefix(a + a, 0).valid_bytes == len(a)


def test_replica_records_must_not_go_backwards() -> None:
    batch = _batch(2, base_offset=10)
    assert rb.validate_replica_records(batch, 10)[0].last_offset == 11
    with pytest.raises(CorruptBatch):
        rb.validate_replica_records(batch, 11)


def test_kafka_python_parses_built_batches() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.record.default_records import DefaultRecordBatch

    batch = DefaultRecordBatch(bytearray(rb.build_batch([b"x", None], keys=[b"k", b"k2"])))
    assert batch.validate_crc()
    assert [(r.offset, r.key, r.value) for r in batch] == [(0, b"k", b"x"), (1, b"k2", None)]


def test_with_offset_and_epoch_is_replace_of_those_two_fields() -> None:
    # every field distinct, so a field passed in the wrong place shows
    values = {field.name: 1000 + index for index, field in
              enumerate(dataclasses.fields(rb.BatchHeader))}
    header = rb.BatchHeader(**values)
    assert rb.with_offset_and_epoch(header, 7, 9) == dataclasses.replace(
        header, base_offset=7, partition_leader_epoch=9)
