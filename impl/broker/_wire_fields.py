"""The fields of Kafka's non-flexible wire format, written and read by hand.

Shared by the requests and responses the broker writes or reads without kio
(:mod:`.fetch_response`, :mod:`.produce_response`, :mod:`.follower_fetch`,
:mod:`._hot_requests`): one string writer, and one reader whose every read checks the bytes left
before it reads or allocates anything, so a count or length past the frame's end is refused
(:class:`FieldError`), never trusted.

This module is a sans-IO core.
"""

from __future__ import annotations

import struct
from typing import Final

__sans_io__ = True

_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")


class FieldError(ValueError):
    """The bytes are not the fields expected (the caller raises its malformed-frame error)."""


def string(value: str) -> bytes:
    """``value`` as an int16-length UTF-8 string."""
    encoded = value.encode()
    if len(encoded) > 0x7FFF:
        raise ValueError(f"string of {len(encoded)} bytes: too long for the wire")
    return _INT16.pack(len(encoded)) + encoded


class Reader:
    """A cursor over one frame; every read checks the bytes left first."""

    __slots__ = ("data", "end", "position")

    def __init__(self, data: bytes | memoryview, position: int) -> None:
        self.data = data
        self.end = len(data)
        self.position = position

    def fixed(self, layout: struct.Struct) -> tuple[int, ...]:
        """The fields of ``layout``."""
        position = self.position
        if position + layout.size > self.end:
            raise FieldError("a field past the end")
        self.position = position + layout.size
        return layout.unpack_from(self.data, position)

    def int32(self) -> int:
        """One int32."""
        position = self.position
        if position + 4 > self.end:
            raise FieldError("a field past the end")
        self.position = position + 4
        value: int = _INT32.unpack_from(self.data, position)[0]
        return value

    def count(self, least_bytes: int, *, nullable: bool = False) -> int:
        """An array's length, each entry at least ``least_bytes`` long (``nullable``: a null
        array, -1, reads as no entries; else it is refused)."""
        count = self.int32()
        if count < 0:
            if count == -1 and nullable:
                return 0
            raise FieldError(f"array of {count} entries")
        if count * least_bytes > self.end - self.position:
            raise FieldError(f"{count} entries past the end")
        return count

    def string(self, nullable: bool = False) -> str | None:
        """An int16-length UTF-8 string (``nullable``: -1 reads as None; else refused)."""
        position = self.position
        if position + 2 > self.end:
            raise FieldError("a string past the end")
        length: int = _INT16.unpack_from(self.data, position)[0]
        position += 2
        if length < 0:
            if length == -1 and nullable:
                self.position = position
                return None
            raise FieldError(f"a string of {length} bytes")
        if position + length > self.end:
            raise FieldError(f"a string of {length} bytes past the end")
        self.position = position + length
        try:
            return str(self.data[position:position + length], "utf-8")
        except UnicodeDecodeError:
            raise FieldError("a string that is not UTF-8") from None

    def skip(self, size: int) -> None:
        """Past ``size`` bytes (fields read for nothing)."""
        if self.position + size > self.end:
            raise FieldError(f"{size} bytes past the end")
        self.position += size

    def name(self) -> str:
        """A string that may not be null."""
        value = self.string()
        assert value is not None
        return value

    def records(self) -> bytes | None:
        """Int32-length bytes, copied (-1: None)."""
        size = self.int32()
        if size < 0:
            if size == -1:
                return None
            raise FieldError(f"records of {size} bytes")
        position = self.position
        if position + size > self.end:
            raise FieldError(f"records of {size} bytes past the end")
        self.position = position + size
        return bytes(self.data[position:position + size])
