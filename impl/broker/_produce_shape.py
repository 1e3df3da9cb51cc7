"""Whether a large Produce frame is cheap to decode: a few partitions, the rest record bytes.

The server decodes a frame of at least ``DECODE_OFF_LOOP_BYTES`` in a worker thread, because a
frame's decoding costs per entry (a 1 MB Produce frame of 131,000 empty partitions takes over a
second) and the event loop must not stall on it. A Produce frame from a real producer is the
opposite: one or a few partitions whose ``records`` fields hold nearly every byte, and each
``records`` field decodes as one copy (tens of microseconds for a MB), less than the thread
hand-off itself costs. :func:`few_partitions` reads only the frame's counts and lengths (no
allocation, at most ``limit`` partitions visited) and says whether the frame is such a request,
so the server decodes it on the loop; any other shape, or bytes that do not parse, answer False
and go the usual way (where the full bounds check refuses what is malformed).

Layout read here (Produce v3-v8, request header v1, every field big-endian)::

    api_key int16 | api_version int16 | correlation_id int32 | client_id int16-length string
    transactional_id int16-length string | acks int16 | timeout_ms int32
    topics: int32 count, each: name int16-length string,
        partitions: int32 count, each: index int32 | records int32-length bytes

This module is a sans-IO core.
"""

from __future__ import annotations

import struct
from typing import Final

__sans_io__ = True

PRODUCE: Final = 0
#: the Produce versions laid out as above (non-flexible)
VERSIONS: Final = range(3, 9)
#: at most this many partitions make a frame cheap to decode on the event loop
PARTITION_LIMIT: Final = 64

_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")


def _string_end(frame: bytes | memoryview, position: int) -> int:
    """Where an int16-length nullable string starting at ``position`` ends (-1: malformed)."""
    if position + 2 > len(frame):
        return -1
    (length,) = _INT16.unpack_from(frame, position)
    if length < -1:
        return -1
    end = position + 2 + max(length, 0)
    return end if end <= len(frame) else -1


def few_partitions(frame: bytes | memoryview, limit: int = PARTITION_LIMIT) -> bool:
    """Whether ``frame`` (without its size prefix) is a Produce v3-v8 request of at most
    ``limit`` partitions in all, whose fields end exactly at the frame's end."""
    size = len(frame)
    if size < 8:
        return False
    api_key, api_version = struct.unpack_from(">hh", frame, 0)
    if api_key != PRODUCE or api_version not in VERSIONS:
        return False
    position = _string_end(frame, 8)  # client_id
    if position < 0:
        return False
    position = _string_end(frame, position)  # transactional_id
    if position < 0 or position + 10 > size:
        return False
    position += 6  # acks, timeout
    (topics,) = _INT32.unpack_from(frame, position)
    position += 4
    if not 0 <= topics <= limit:
        return False
    visited = 0
    for _ in range(topics):
        position = _string_end(frame, position)
        if position < 0 or position + 4 > size:
            return False
        (partitions,) = _INT32.unpack_from(frame, position)
        position += 4
        visited += partitions
        if partitions < 0 or visited > limit:
            return False
        for _ in range(partitions):
            if position + 8 > size:
                return False
            (length,) = _INT32.unpack_from(frame, position + 4)
            if length < -1:
                return False
            position += 8 + max(length, 0)
            if position > size:
                return False
    return position == size
