"""The record-batch codecs: compress a batch's records section and inflate it, bounded.

One owner for every path that touches compressed records: produce validation
(:func:`impl.storage.record_batch.check_batch_records`), the readers that decode records from
the log (ListOffsets by timestamp and the log cleaner, :mod:`impl.storage.records`) and the
writers that build batches (the cleaner's rebuilt batches, tests and benchmarks).

Codec ids are the batch attributes' bits 0-2 (``reference/wire-protocol.md`` §4): 0 none,
1 gzip (the standard library's ``zlib``, gzip framing as Kafka's ``GZIPOutputStream`` writes
it), 2 snappy (the Java client's xerial framing, or one raw block as librdkafka may send), 3 lz4
(frame format), 4 zstd; snappy, lz4 and zstd through ``cramjam``. 5-7 are not codecs.

Every inflate is bounded: the output never grows past ``limit`` bytes (by default
:data:`MAX_UNCOMPRESSED_BATCH_BYTES`), so a small batch that would inflate to gigabytes (a
decompression bomb) is a :class:`~impl.storage.errors.CorruptBatch`, whichever path reads it.

This module is a sans-IO core.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

import cramjam

from impl.storage.errors import CorruptBatch

__sans_io__ = True

CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_ZSTD = 4
#: A compressed batch may inflate to at most this many bytes (a decompression bomb is refused
#: before more memory than this is spent on it).
MAX_UNCOMPRESSED_BATCH_BYTES = 64 * 1024 * 1024
#: xerial's framing of snappy (the Java client's SnappyOutputStream): magic, version, compat
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16
#: the Java client's SnappyOutputStream block size
_XERIAL_BLOCK = 32 * 1024
_BLOCK_LENGTH = struct.Struct(">i")


class UnsupportedCompression(CorruptBatch):
    """A batch whose codec id (5-7) names no codec."""


def decompress(codec: int, data: bytes, limit: int = MAX_UNCOMPRESSED_BATCH_BYTES) -> bytes:
    """The records section ``data`` of a batch compressed with ``codec``, inflated.

    Raises:
        UnsupportedCompression: ``codec`` is not a codec id.
        CorruptBatch: bytes the codec cannot inflate, or that inflate past ``limit`` bytes.
    """
    if codec == CODEC_NONE:
        return data
    try:
        if codec == CODEC_GZIP:
            return _gzip(data, limit)
        if codec == CODEC_SNAPPY:
            return _snappy(data, limit)
        if codec == CODEC_LZ4:
            return _inflate_into(cramjam.lz4.decompress_into, data, limit)
        if codec == CODEC_ZSTD:
            return _inflate_into(cramjam.zstd.decompress_into, data, limit)
    except cramjam.DecompressionError as error:
        raise CorruptBatch(f"compressed records (codec {codec}): {error}") from None
    raise UnsupportedCompression(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes) -> bytes:
    """``data`` compressed with ``codec``, framed as Kafka's Java client frames it.

    Raises:
        UnsupportedCompression: ``codec`` is not a codec id.
    """
    if codec == CODEC_NONE:
        return data
    if codec == CODEC_GZIP:
        compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return compressor.compress(data) + compressor.flush()
    if codec == CODEC_SNAPPY:
        # magic, version 1, compatible version 1, then length-prefixed raw blocks of 32 KiB
        out = bytearray(_XERIAL_MAGIC + struct.pack(">ii", 1, 1))
        for start in range(0, max(len(data), 1), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
            out += _BLOCK_LENGTH.pack(len(block)) + block
        return bytes(out)
    if codec == CODEC_LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == CODEC_ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise UnsupportedCompression(f"unknown compression codec {codec}")


def _inflate_into(decompress_into: Callable[[bytes, bytearray], int], data: bytes,
                  limit: int) -> bytes:
    """Decompress with a bounded output buffer, growing it (doubling) up to ``limit``."""
    size = min(limit, max(64 * 1024, 4 * len(data)))
    while True:
        out = bytearray(size)
        try:
            written = int(decompress_into(data, out))
        except cramjam.DecompressionError as error:
            if size >= limit:
                raise CorruptBatch(
                    f"compressed records do not inflate within {limit} bytes: {error}"
                ) from None
            size = min(limit, size * 2)
            continue
        return bytes(out[:written])


def _gzip(data: bytes, limit: int) -> bytes:
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error as error:
        raise CorruptBatch(f"gzip records: {error}") from None
    if len(out) > limit:
        raise CorruptBatch(f"gzip records inflate past {limit} bytes")
    if not inflater.eof:
        raise CorruptBatch("gzip records cut short")
    return out


def _snappy(data: bytes, limit: int) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        claimed, _ = _read_unsigned(data)
        if claimed > limit:
            raise CorruptBatch(f"snappy block inflates to {claimed} bytes, over {limit}")
        return _inflate_into(cramjam.snappy.decompress_raw_into, data, max(claimed, 1))
    out = bytearray()
    position = _XERIAL_HEADER
    while position < len(data):
        if position + 4 > len(data):
            raise CorruptBatch("xerial snappy block length cut short")
        (size,) = _BLOCK_LENGTH.unpack_from(data, position)
        position += 4
        if size < 0 or size > len(data) - position:
            raise CorruptBatch(f"xerial snappy block of {size} bytes runs past the batch")
        block = data[position : position + size]
        claimed, _ = _read_unsigned(block)
        if len(out) + claimed > limit:
            raise CorruptBatch(f"snappy records inflate past {limit} bytes")
        out += _inflate_into(cramjam.snappy.decompress_raw_into, block, max(claimed, 1))
        position += size
    return bytes(out)


def _read_unsigned(data: bytes) -> tuple[int, int]:
    """Snappy's length preamble (an unsigned little-endian varint) and its size."""
    value = 0
    for index in range(min(len(data), 10)):
        value |= (data[index] & 0x7F) << (7 * index)
        if not data[index] & 0x80:
            return value, index + 1
    raise CorruptBatch("snappy length preamble is not a varint")
