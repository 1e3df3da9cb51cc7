"""Fetch v4 to v11 responses written by hand, with record bytes left to the caller (zero-copy).

Why by hand: the records of each partition go on the socket with ``os.sendfile`` straight from
segment files, so the response is a list of *pieces* — ``bytes`` for framing and fields, and
opaque record slices whose sizes are known — and the size prefix is computed before anything is
sent (``reference/wire-protocol.md`` §4 (b)).

Layout (non-flexible, response header v0)::

    size int32 | correlation_id int32 | throttle_time_ms int32 (v1+) |
    error_code int16, session_id int32 (v7+) | [topic string | [partition int32 | error int16 |
    high_watermark int64 | last_stable_offset int64 (v4+) | log_start_offset int64 (v5+) |
    aborted_transactions array (v4+, empty) | preferred_read_replica int32 (v11+) |
    records bytes (int32 size + bytes)]]

This module is a sans-IO core.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from ._wire_fields import string

__sans_io__ = True

VERSION_MIN: Final = 4
VERSION_MAX: Final = 11


class SizedPiece(Protocol):
    """A record slice whose bytes the shell sends (``os.sendfile`` or a read)."""

    @property
    def size(self) -> int:
        """Bytes in the slice."""


@dataclass(frozen=True, slots=True)
class FetchPartitionReply:
    """One partition of a Fetch response."""

    partition: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    record_slices: Sequence[SizedPiece] = field(default_factory=tuple)

    @property
    def records_size(self) -> int:
        """Total record bytes in this partition's reply."""
        return sum(piece.size for piece in self.record_slices)


Piece = bytes | SizedPiece


def encode_fetch_response(
    version: int,
    correlation_id: int,
    topics: Sequence[tuple[str, Sequence[FetchPartitionReply]]],
    *,
    error_code: int = 0,
    session_id: int = 0,
    throttle_time_ms: int = 0,
) -> list[Piece]:
    """The pieces of a framed Fetch response, the size prefix first.

    Args:
        version: 4..11.
        correlation_id: from the request header.
        topics: per topic, its partition replies, in the order to send.
        error_code: the top-level error (v7+).
        session_id: the fetch session (v7+; 0 = no session).
        throttle_time_ms: quota throttle.

    Returns:
        ``bytes`` pieces and record slices, in order; the first four bytes are the total size of
        everything after them.
    """
    assert VERSION_MIN <= version <= VERSION_MAX, version
    pieces: list[Piece] = []
    current = bytearray(struct.pack(">ii", correlation_id, throttle_time_ms))
    if version >= 7:
        current += struct.pack(">hi", error_code, session_id)
    current += struct.pack(">i", len(topics))
    for name, partitions in topics:
        current += string(name)
        current += struct.pack(">i", len(partitions))
        for reply in partitions:
            current += struct.pack(
                ">ihqq",
                reply.partition,
                reply.error_code,
                reply.high_watermark,
                reply.last_stable_offset,
            )
            if version >= 5:
                current += struct.pack(">q", reply.log_start_offset)
            current += struct.pack(">i", 0)  # aborted transactions: none (no transactions)
            if version >= 11:
                current += struct.pack(">i", -1)  # preferred read replica: none
            current += struct.pack(">i", reply.records_size)
            if reply.record_slices:
                pieces.append(bytes(current))
                current = bytearray()
                pieces.extend(reply.record_slices)
    if current:
        pieces.append(bytes(current))
    total = sum(len(piece) if isinstance(piece, bytes) else piece.size for piece in pieces)
    return [struct.pack(">i", total), *pieces]
