"""The records inside a RecordBatch v2: decode them (decompressing first) and build batches back.

The log keeps batches as raw bytes; two readers need what is inside them: ListOffsets by
timestamp (the first *record* at or after a timestamp, not the first batch) and the log cleaner
(each record's key, to keep only the latest value per key). Layout of one record (all integers
zig-zag varints, ``reference/wire-protocol.md`` §4)::

    length | attributes int8 | timestampDelta | offsetDelta | keyLength | key | valueLength |
    value | headerCount | (headerKeyLength headerKey headerValueLength headerValue)*

Compressed batches are inflated and re-compressed by :mod:`impl.storage.compression`, the one
owner of the codecs, with the same bound as produce validation: a batch that inflates past
:data:`~impl.storage.compression.MAX_UNCOMPRESSED_BATCH_BYTES` is a :class:`CorruptBatch`.

This module is a sans-IO core.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from impl.storage import compression as codecs
from impl.storage import record_batch as rb
from impl.storage.errors import CorruptBatch
from impl.storage.record_walk import read_varint, read_varlong

__sans_io__ = True

#: bytes 21..61 of a header: attributes .. recordCount (the part covered by the CRC)
_CRC_HEADER = struct.Struct(">hiqqqhii")
_DELETE_HORIZON_FLAG = 0x40


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a batch, with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[bytes, bytes | None], ...]
    attributes: int = 0

    def __init__(  # noqa: PLR0917 (the generated constructor's signature)
        self, offset: int, timestamp: int, key: bytes | None, value: bytes | None,
        headers: tuple[tuple[bytes, bytes | None], ...], attributes: int = 0
    ) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "offset", offset)
        object.__setattr__(self, "timestamp", timestamp)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "headers", headers)
        object.__setattr__(self, "attributes", attributes)


def _read_bytes(buffer: bytes, position: int, end: int) -> tuple[bytes | None, int]:
    length, position = read_varint(buffer, position, end)
    if length < -1:
        raise CorruptBatch(f"record field length {length}")
    if length == -1:
        return None, position
    if length > end - position:
        raise CorruptBatch(f"record field of {length} bytes runs past its record")
    return buffer[position : position + length], position + length


def iter_records(batch: bytes, header: rb.BatchHeader | None = None) -> Iterator[Record]:
    """Every record of one whole batch (``batch`` starts at its first byte).

    Timestamps follow the batch's type: with LOG_APPEND_TIME every record carries the batch's
    max timestamp, as Kafka's ``DefaultRecord`` does.

    Raises:
        CorruptBatch: malformed records, a count that disagrees with the header, or
            compressed records that do not inflate within the bound (see
            :func:`impl.storage.compression.decompress`).
    """
    header = header or rb.parse_header(batch, 0)
    start = header.position + rb.HEADER_SIZE
    end = header.position + header.size_in_bytes
    body = codecs.decompress(header.compression, bytes(batch[start:end]))
    position = 0
    for _ in range(header.record_count):
        length, position = read_varint(body, position, len(body))
        record_end = position + length
        if length < 1 or record_end > len(body):
            raise CorruptBatch(f"batch {header.base_offset}: record of {length} bytes past the end")
        attributes = body[position]
        timestamp_delta, cursor = read_varlong(body, position + 1, record_end)
        offset_delta, cursor = read_varint(body, cursor, record_end)
        key, cursor = _read_bytes(body, cursor, record_end)
        value, cursor = _read_bytes(body, cursor, record_end)
        count, cursor = read_varint(body, cursor, record_end)
        if count < 0 or count > record_end - cursor:
            raise CorruptBatch(f"batch {header.base_offset}: record with {count} headers")
        headers: list[tuple[bytes, bytes | None]] = []
        for _ in range(count):
            header_key, cursor = _read_bytes(body, cursor, record_end)
            header_value, cursor = _read_bytes(body, cursor, record_end)
            headers.append((header_key or b"", header_value))
        if cursor != record_end:
            raise CorruptBatch(f"batch {header.base_offset}: record length disagrees with fields")
        timestamp = (
            header.max_timestamp
            if header.is_log_append_time
            else header.base_timestamp + timestamp_delta
        )
        yield Record(
            header.base_offset + offset_delta, timestamp, key, value, tuple(headers), attributes
        )
        position = record_end
    if position != len(body):
        raise CorruptBatch(
            f"batch {header.base_offset}: bytes left after {header.record_count} records"
        )


def first_record_at_or_after(batch: bytes, timestamp_ms: int) -> tuple[int, int] | None:
    """``(offset, timestamp)`` of the first record of ``batch`` stamped at or after
    ``timestamp_ms`` (Kafka's ``LogSegment.findOffsetByTimestamp``), or ``None``."""
    for record in iter_records(batch):
        if record.timestamp >= timestamp_ms:
            return record.offset, record.timestamp
    return None


def _encode_bytes(data: bytes | None) -> bytes:
    return rb.encode_varint(-1) if data is None else rb.encode_varint(len(data)) + data


def encode_record(record: Record, base_offset: int, base_timestamp: int) -> bytes:
    """One record's bytes, its deltas taken against the batch's base offset and timestamp."""
    body = bytearray([record.attributes & 0xFF])
    body += rb.encode_varint(record.timestamp - base_timestamp)
    body += rb.encode_varint(record.offset - base_offset)
    body += _encode_bytes(record.key)
    body += _encode_bytes(record.value)
    body += rb.encode_varint(len(record.headers))
    for key, value in record.headers:
        body += _encode_bytes(key) + _encode_bytes(value)
    return rb.encode_varint(len(body)) + bytes(body)


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int,
    last_offset_delta: int | None = None,
    codec: int = codecs.CODEC_NONE,
    attributes: int = 0,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """A v2 batch of ``records`` (absolute offsets and timestamps), CRC filled in.

    ``attributes`` gives the bits above the codec (timestamp type, transactional, control,
    delete horizon); the base timestamp defaults to the records' smallest and the max timestamp
    to their largest.
    """
    assert records or None not in (base_timestamp, max_timestamp, last_offset_delta), (
        "an empty batch needs its timestamps and offset span")
    if base_timestamp is None:
        base_timestamp = min(record.timestamp for record in records)
    if max_timestamp is None:
        max_timestamp = max(record.timestamp for record in records)
    if last_offset_delta is None:
        last_offset_delta = records[-1].offset - base_offset
    encoded = b"".join(encode_record(r, base_offset, base_timestamp) for r in records)
    body = bytearray(
        _CRC_HEADER.pack(
            (attributes & ~0x07) | codec,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
    )
    body += codecs.compress(codec, encoded)
    crc = rb.crc32c(body)
    prefix = struct.pack(
        ">qiibI",
        base_offset,
        len(body) + rb.ATTRIBUTES_OFFSET - rb.LOG_OVERHEAD,
        partition_leader_epoch,
        rb.MAGIC_V2,
        crc,
    )
    return prefix + bytes(body)


def rebuild_batch(
    header: rb.BatchHeader,
    records: Sequence[Record],
    *,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """A batch keeping ``header``'s base offset, last offset delta, producer fields, leader
    epoch, codec, timestamp type and max timestamp, holding only ``records`` (Kafka's
    ``MemoryRecords.filterTo``): offsets never change, so a cleaned batch keeps its offset span.

    With ``delete_horizon_ms`` the base timestamp becomes the delete horizon and attribute bit 6
    is set (KIP-534), so a later cleaning knows when the batch's tombstones may go.
    """
    if not records:
        return empty_batch(header)
    attributes = header.attributes
    base_timestamp: int | None = None
    if delete_horizon_ms is not None:
        attributes |= _DELETE_HORIZON_FLAG
        base_timestamp = delete_horizon_ms
    elif attributes & _DELETE_HORIZON_FLAG:
        base_timestamp = header.base_timestamp
    return encode_batch(
        records,
        base_offset=header.base_offset,
        last_offset_delta=header.last_offset_delta,
        codec=header.compression,
        attributes=attributes,
        base_timestamp=base_timestamp,
        max_timestamp=header.max_timestamp,
        partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
    )


def empty_batch(header: rb.BatchHeader) -> bytes:
    """``header``'s batch with no records left (Kafka's ``writeEmptyHeader``): the same base
    offset, offset span, producer id, epoch and base sequence, so an idempotent producer's last
    sequence survives compaction; uncompressed, both timestamps the batch's max timestamp."""
    return encode_batch(
        (),
        base_offset=header.base_offset,
        last_offset_delta=header.last_offset_delta,
        codec=codecs.CODEC_NONE,
        attributes=header.attributes & ~(_DELETE_HORIZON_FLAG | 0x07),
        base_timestamp=header.max_timestamp,
        max_timestamp=header.max_timestamp,
        partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
    )


def delete_horizon_ms(header: rb.BatchHeader) -> int | None:
    """The KIP-534 delete horizon stamped in a batch by an earlier cleaning, if any."""
    return header.base_timestamp if header.attributes & _DELETE_HORIZON_FLAG else None
