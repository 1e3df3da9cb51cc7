"""Produce v3 to v8 responses written by hand.

Why by hand: every Produce is answered, and at moderate rates over many partitions a Produce
carries one small batch, so what building its answer through kio's generic entity writer costs
(a dict per partition, the entity built from it, each field written through its own call) was a
visible share of the request (``bench.requests``). The layout is small and fixed for these
versions; the encoding is byte for byte kio's (``tests/unit/broker/test_produce_response.py``).

Layout (non-flexible, response header v0)::

    size int32 | correlation_id int32 |
    [name string | [index int32 | error_code int16 | base_offset int64 |
    log_append_time_ms int64 | log_start_offset int64 (v5+) |
    record_errors [] (v8+) | error_message nullable string (v8+)]] | throttle_time_ms int32

This module is a sans-IO core.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final, NamedTuple

from ._framing import frame
from ._wire_fields import string

__sans_io__ = True

VERSION_MIN: Final = 3
VERSION_MAX: Final = 8

_INT32: Final = struct.Struct(">i")
_HEAD: Final = struct.Struct(">ihqq")
_HEAD_V5: Final = struct.Struct(">ihqqq")
_NO_MESSAGE: Final = b"\x00\x00\x00\x00\xff\xff"  # record_errors [] and a null error_message


class PartitionResult(NamedTuple):
    """One partition's answer (-1: no offset, no append time, no log start)."""

    partition: int
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


def encode_produce_response(version: int, correlation_id: int,
                            topics: Sequence[tuple[str, Sequence[PartitionResult]]],
                            throttle_time_ms: int = 0) -> bytes:
    """The framed response (size prefix first)."""
    assert VERSION_MIN <= version <= VERSION_MAX, version
    parts = [_INT32.pack(correlation_id), _INT32.pack(len(topics))]
    with_start = version >= 5
    with_errors = version >= 8
    for name, partitions in topics:
        parts.append(string(name))
        parts.append(_INT32.pack(len(partitions)))
        for result in partitions:
            if with_start:
                parts.append(_HEAD_V5.pack(result.partition, result.error_code, result.base_offset,
                                           result.log_append_time_ms, result.log_start_offset))
            else:
                parts.append(_HEAD.pack(result.partition, result.error_code, result.base_offset,
                                        result.log_append_time_ms))
            if with_errors:
                if result.error_message is None:
                    parts.append(_NO_MESSAGE)
                else:
                    parts.append(b"\x00\x00\x00\x00" + string(result.error_message))
    parts.append(_INT32.pack(throttle_time_ms))
    return frame(b"".join(parts))
