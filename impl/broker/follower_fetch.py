"""A follower's Fetch v11 request and its response, written and read by hand.

Why by hand: a follower sends one Fetch per round of replication, and at moderate rates over
many partitions a round carries a record batch or two, so what the request costs, not what its
bytes cost, limits the cluster (``bench.requests``). kio builds the request from a dict through
its generic entity writer and reads the answer through the generic reader (after the bounds
scan of :mod:`._wire_scan`); both spent more than the rest of the follower's round. The leader
side already writes Fetch responses by hand (:mod:`.fetch_response`); this is the other end.

Request (header v1, non-flexible)::

    size int32 | api_key int16 = 1 | api_version int16 = 11 | correlation_id int32 |
    client_id string | replica_id int32 | max_wait_ms int32 | min_bytes int32 |
    max_bytes int32 | isolation_level int8 | session_id int32 | session_epoch int32 |
    [topic string | [partition int32 | current_leader_epoch int32 | fetch_offset int64 |
    log_start_offset int64 | partition_max_bytes int32]] | forgotten_topics_data [] |
    rack_id string

Response (header v0)::

    correlation_id int32 | throttle_time_ms int32 | error_code int16 | session_id int32 |
    [topic string | [partition_index int32 | error_code int16 | high_watermark int64 |
    last_stable_offset int64 | log_start_offset int64 |
    aborted_transactions nullable [producer_id int64 | first_offset int64] |
    preferred_read_replica int32 | records nullable bytes]]

Everything the response says is checked against the frame's length before it is read: a
malformed answer raises :class:`~._codec.MalformedRequestError`, as kio's reader does, and
the same frames decode to the same values (``tests/unit/broker/test_follower_fetch.py``
compares the two).

This module is a sans-IO core.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final, NamedTuple

from ._codec import MalformedRequestError
from ._framing import frame
from ._wire_fields import FieldError, Reader, string

__sans_io__ = True

API_KEY: Final = 1
VERSION: Final = 11

_HEADER = struct.Struct(">hhi")
_BODY = struct.Struct(">iiiibii")
_PARTITION = struct.Struct(">iiqqi")
_RESPONSE_HEAD = struct.Struct(">iihi")
_PARTITION_HEAD = struct.Struct(">ihqqq")
_INT32 = struct.Struct(">i")
#: the least bytes a topic, a partition and an aborted transaction of the response take
_TOPIC_LEAST_BYTES: Final = 2 + 4
_PARTITION_LEAST_BYTES: Final = _PARTITION_HEAD.size + 4 + 4 + 4
_ABORTED_BYTES: Final = 16


class FetchPosition(NamedTuple):
    """One partition of the request."""

    partition: int
    current_leader_epoch: int
    fetch_offset: int
    log_start_offset: int
    partition_max_bytes: int


class FetchedPartition(NamedTuple):
    """One partition of the response (records: the partition's record bytes, possibly empty;
    aborted transactions are read past: this broker has no transactions)."""

    partition: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes


class FetchAnswer(NamedTuple):
    """A decoded response."""

    correlation_id: int
    throttle_time_ms: int
    error_code: int
    session_id: int
    topics: list[tuple[str, list[FetchedPartition]]]


def encode_request(correlation_id: int, client_id: str, *, replica_id: int, max_wait_ms: int,
                   min_bytes: int, max_bytes: int,
                   topics: Sequence[tuple[str, Sequence[FetchPosition]]]) -> bytes:
    """The framed request (isolation level 0, no fetch session, no forgotten topics, rack "")."""
    parts = [_HEADER.pack(API_KEY, VERSION, correlation_id), string(client_id),
             _BODY.pack(replica_id, max_wait_ms, min_bytes, max_bytes, 0, 0, -1),
             _INT32.pack(len(topics))]
    pack = _PARTITION.pack
    for topic, positions in topics:
        parts.append(string(topic))
        parts.append(_INT32.pack(len(positions)))
        parts.extend(pack(*position) for position in positions)
    parts.append(b"\x00\x00\x00\x00\x00\x00")  # forgotten_topics_data [], rack_id ""
    return frame(b"".join(parts))


def decode_response(frame_bytes: bytes | memoryview) -> FetchAnswer:
    """A response frame (without its size prefix).

    Raises:
        MalformedRequestError: the bytes are not a Fetch v11 response: a length or count past
            the frame's end, a negative count or size other than null, bytes left over.
    """
    try:
        return _decode_response(Reader(frame_bytes, 0))
    except FieldError as error:
        raise MalformedRequestError(
            f"cannot decode response to api key {API_KEY}: {error}") from None


def _decode_response(reader: Reader) -> FetchAnswer:
    correlation_id, throttle_ms, error_code, session_id = reader.fixed(_RESPONSE_HEAD)
    topics: list[tuple[str, list[FetchedPartition]]] = []
    for _ in range(reader.count(_TOPIC_LEAST_BYTES)):
        name = reader.name()
        partitions: list[FetchedPartition] = []
        for _ in range(reader.count(_PARTITION_LEAST_BYTES)):
            index, code, high_watermark, stable, start = reader.fixed(_PARTITION_HEAD)
            # aborted transactions (none here: no transactions) are read past
            reader.skip(_ABORTED_BYTES * reader.count(_ABORTED_BYTES, nullable=True))
            reader.skip(4)  # preferred_read_replica
            records = reader.records() or b""
            partitions.append(FetchedPartition(index, code, high_watermark, stable, start,
                                               records))
        topics.append((name, partitions))
    if reader.position != reader.end:
        raise FieldError(f"{reader.end - reader.position} bytes after the response")
    return FetchAnswer(correlation_id, throttle_ms, error_code, session_id, topics)
