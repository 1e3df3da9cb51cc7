"""The walk over a v2 batch's records that LogValidator's checks need, as one tight loop.

:func:`walk_records` is the per-record part of
:func:`impl.storage.record_batch.check_batch_records`: every record's length must be exactly its
fields, offset deltas run 0, 1, ... (rise within ``[0, lastOffsetDelta]`` in a replicated
batch), timestamps stay in int64, exactly ``recordCount`` records fill the bytes; it returns the
oldest and newest timestamps (the leader rewrites a lying ``maxTimestamp`` with them). It is the
hottest loop of the produce path and of the follower's appends (about a thousand records per MB
of 1 KiB records), so it is written for mypyc: native ``i64`` arithmetic, each varint's one-byte
case read inline, nothing allocated per record. ``make setup`` compiles it (``setup.py``,
optional: where no C compiler is available the build goes on without it) and Python then imports
the compiled module in place of this file; this file is the same code run by the interpreter
(``i64`` is a plain ``int`` there), so both behave alike, which ``tests/unit/storage`` checks by
running the two side by side. :data:`COMPILED` tells which one is loaded. Its varint readers
(:func:`read_varint`, :func:`read_varlong`) are the storage engine's only readers of record
varints: the record decoder (:mod:`impl.storage.records`) uses them too.

Semantics that matter at the edges, kept identical in both: a varint is at most 5 bytes and a
varlong (the timestamp delta) at most 10, both zig-zag; the varlong keeps every bit (a 10-byte
delta that overflows int64 once added to the base timestamp is INVALID_RECORD, not wrapped).

This module is a sans-IO core.
"""

from __future__ import annotations

from typing import Final, NoReturn

from mypy_extensions import i64

from impl.storage.errors import CorruptBatch, InvalidRecord

__sans_io__ = True

COMPILED: Final = not __file__.endswith(".py")
INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1
#: with a base timestamp and a delta both smaller than this, their sum cannot overflow int64
_SAFE: Final = 1 << 61
#: "no record seen" for the largest fast-path timestamp delta
_NO_DELTA: Final = -(1 << 62)


def read_varint(data: bytes, position: i64, end: i64) -> tuple[i64, i64]:
    """A zig-zag varint (at most 5 bytes) at ``position`` before ``end``; (value, next).

    Raises:
        CorruptBatch: it runs past ``end`` or is longer than 5 bytes.
    """
    raw: i64 = 0
    shift: i64 = 0
    for _ in range(5):
        if position >= end:
            raise CorruptBatch("record ends inside a varint")
        byte: i64 = data[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), position
        shift += 7
    raise CorruptBatch("varint longer than 5 bytes")


def read_varlong(data: bytes, position: i64, end: i64) -> tuple[int, i64]:
    """A zig-zag varlong (at most 10 bytes), every bit kept; (value, next).

    Raises:
        CorruptBatch: it runs past ``end`` or is longer than 10 bytes.
    """
    raw = 0
    shift = 0
    for _ in range(10):
        if position >= end:
            raise CorruptBatch("record ends inside a varint")
        byte = data[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), position
        shift += 7
    raise CorruptBatch("varint longer than 10 bytes")


def _field(data: bytes, position: i64, record_end: i64) -> tuple[i64, i64]:
    """A varint field of the record ending at ``record_end``: the one-byte case inline."""
    if position < record_end:
        byte: i64 = data[position]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), position + 1
    return read_varint(data, position, record_end)


def walk_records(data: bytes, start: i64, end: i64, *, record_count: i64, base_timestamp: int,
                 last_offset_delta: i64, replicated: bool) -> tuple[int, int]:
    """Check the uncompressed records in ``data[start:end]``; return their oldest and newest
    timestamps (``(INT64_MAX, INT64_MIN)`` for no record).

    Offset deltas run 0, 1, ... (a client batch) or rise within ``[0, last_offset_delta]``
    (``replicated``: a cleaned batch keeps its offset span with fewer records).

    Raises:
        CorruptBatch: a record that does not parse (a length outside the batch, a varint too
            long or cut short, a field running past its record, bytes left inside a record);
            when ``replicated``, also what the next line lists.
        InvalidRecord: fewer records than ``record_count`` or bytes after them, an offset
            delta out of sequence, a timestamp overflowing int64.
    """
    position: i64 = start
    oldest = INT64_MAX
    newest = INT64_MIN
    safe_base = -_SAFE < base_timestamp < _SAFE
    oldest_delta: i64 = -_NO_DELTA
    newest_delta: i64 = _NO_DELTA
    previous_delta: i64 = -1
    index: i64 = 0
    while index < record_count:
        if position >= end:
            _disagree(replicated, f"batch claims {record_count} records but holds {index}")
        byte: i64 = data[position]
        if byte < 0x80:
            length: i64 = (byte >> 1) ^ -(byte & 1)
            position += 1
        else:
            length, position = read_varint(data, position, end)
        record_end = position + length
        if length < 6 or record_end > end:  # 6: the smallest record (every field empty)
            raise CorruptBatch(f"record {index}: length {length} outside the batch")
        position += 1  # record attributes (unused in v2)
        byte = data[position]
        delta: i64 = 0
        wide = 0
        fast = byte < 0x80 and safe_base
        if fast:
            delta = (byte >> 1) ^ -(byte & 1)
            position += 1
        else:
            wide, position = read_varlong(data, position, record_end)
        # each varint's one-byte case inline (a call per field costs more than the field)
        byte = data[position] if position < record_end else 0x80
        if byte < 0x80:
            offset_delta: i64 = (byte >> 1) ^ -(byte & 1)
            position += 1
        else:
            offset_delta, position = read_varint(data, position, record_end)
        if replicated:
            if not previous_delta < offset_delta <= last_offset_delta:
                raise CorruptBatch(
                    f"record {index} has offset delta {offset_delta} after {previous_delta} "
                    f"(last offset delta {last_offset_delta})"
                )
            previous_delta = offset_delta
        elif offset_delta != index:
            raise InvalidRecord(f"record {index} has offset delta {offset_delta}")
        if fast:
            if delta > newest_delta:  # noqa: PLR1730 (a branch: no call per record)
                newest_delta = delta
            if delta < oldest_delta:  # noqa: PLR1730
                oldest_delta = delta
        else:
            timestamp = base_timestamp + wide
            if not INT64_MIN <= timestamp <= INT64_MAX:
                _disagree(replicated, f"record {index}: timestamp overflows")
            oldest = min(oldest, timestamp)
            newest = max(newest, timestamp)
        byte = data[position] if position < record_end else 0x80
        if byte < 0x80:
            size: i64 = (byte >> 1) ^ -(byte & 1)
            position += 1
        else:
            size, position = read_varint(data, position, record_end)
        if size < -1:
            raise CorruptBatch(f"record key length {size}")
        if size > record_end - position:
            raise CorruptBatch(f"record key of {size} bytes runs past its record")
        if size > 0:
            position += size
        byte = data[position] if position < record_end else 0x80
        if byte < 0x80:
            size = (byte >> 1) ^ -(byte & 1)
            position += 1
        else:
            size, position = read_varint(data, position, record_end)
        if size < -1:
            raise CorruptBatch(f"record value length {size}")
        if size > record_end - position:
            raise CorruptBatch(f"record value of {size} bytes runs past its record")
        if size > 0:
            position += size
        header_count, position = _field(data, position, record_end)
        if header_count < 0 or header_count > record_end - position:
            raise CorruptBatch(f"record {index}: {header_count} headers")
        for _ in range(header_count):
            key_length, position = _field(data, position, record_end)
            if key_length < 0 or key_length > record_end - position:
                raise CorruptBatch(f"record {index}: header key length {key_length}")
            size, position = _field(data, position + key_length, record_end)
            if size < -1:
                raise CorruptBatch(f"record header value length {size}")
            if size > record_end - position:
                raise CorruptBatch(f"record header value of {size} bytes runs past its record")
            if size > 0:
                position += size
        if position != record_end:
            raise CorruptBatch(f"record {index}: {record_end - position} bytes past its fields")
        index += 1
    if position != end:
        _disagree(replicated,
                  f"{end - position} bytes after the {record_count} records the batch declares")
    if newest_delta != _NO_DELTA:
        newest = max(newest, base_timestamp + newest_delta)
        oldest = min(oldest, base_timestamp + oldest_delta)
    return oldest, newest


def _disagree(replicated: bool, message: str) -> NoReturn:
    """A count, offset or timestamp that disagrees with the header: InvalidRecord from a
    client, CorruptBatch from a leader (its batches were validated once already)."""
    if replicated:
        raise CorruptBatch(message)
    raise InvalidRecord(message)
