"""Decode a large request frame in bounded slices, so one request never holds the event loop.

Why: kio's native reader decodes a whole request in one call that holds the GIL: a ListOffsets
naming 1,000,000 partitions (12 MB) took 370 ms, during which no other client was served, even
with the call in a worker thread (the GIL) and even less in a worker process (unpickling the
decoded request in the broker took 2.6 s). Walking the frame in Python instead costs ~1 µs per
field, too slow for whole requests. So this module walks the *structure* of a large request in
Python (the entities and arrays along kio's schema, as :mod:`._wire_scan` does) and hands kio's
native readers bounded pieces: a run of array elements spanning at most :data:`SLICE_BYTES`
(decoded by kio's array reader over a copy of those bytes with their own count), or one scalar
field. Between pieces it yields, and the shell lets other clients run.

Validation is the same as the scan's: every count is checked against the bytes that remain before
anything is allocated, and a run is handed to kio only after each of its elements has been
delimited (scanned, or fixed-width), so kio never sees a count that the bytes do not back. The
result equals kio's own decoding of the same frame (a unit test compares them on requests built
from every advertised schema).

This module is a sans-IO core: :func:`decode_steps` is a generator the shell drives.
"""

from __future__ import annotations

import dataclasses
import itertools
import struct
from collections.abc import Generator
from typing import Any, Final

from kio._kio_native import (
    compact_array_reader,
    entity_reader,
    get_field_reader,
    get_reader,
    legacy_array_reader,
)

from impl.storage.record_batch import encode_unsigned_varint

from ._wire_scan import (
    _COMPACT_ARRAY,
    _ENTITY,
    _FIXED,
    _LEGACY_ARRAY,
    ScanError,
    _int,
    _Op,
    _op,
    _plan,
    _take,
    _uvarint,
)

__sans_io__ = True

#: The most bytes one native call decodes (well under a millisecond of kio's time).
SLICE_BYTES: Final = 16 * 1024
#: Elements scanned in Python between two yields.
SCAN_ELEMENTS_PER_YIELD: Final = 256

Steps = Generator[None, None, Any]

_INT32: Final = struct.Struct(">i")


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    """One dataclass field of an entity with what decoding it needs."""

    name: str
    op: _Op
    field: dataclasses.Field[Any]
    #: the element's kafka type, for an array of scalars
    kafka_type: str


_fields_of: dict[type[Any], tuple[tuple[_Field, ...], dict[int, _Field]]] = {}
_fixed_widths: dict[type[Any], int | None] = {}
_element_readers: dict[tuple[Any, str, bool, bool], Any] = {}
_field_readers: dict[tuple[type[Any], str, bool], Any] = {}


def _fields(entity_class: type[Any]) -> tuple[tuple[_Field, ...], dict[int, _Field]]:
    """``entity_class``'s ordered fields and its tagged fields by tag, each with its op."""
    cached = _fields_of.get(entity_class)
    if cached is not None:
        return cached
    plan = _plan(entity_class)
    ordered_ops = iter(plan.fields)
    ordered: list[_Field] = []
    tagged: dict[int, _Field] = {}
    for item in dataclasses.fields(entity_class):
        tag = item.metadata.get("tag")
        kafka_type = str(item.metadata.get("kafka_type", ""))
        if tag is None:
            ordered.append(_Field(item.name, next(ordered_ops), item, kafka_type))
        else:
            tagged[int(tag)] = _Field(item.name, plan.tagged[int(tag)], item, kafka_type)
    cached = _fields_of[entity_class] = (tuple(ordered), tagged)
    return cached


def _fixed_width(op: _Op) -> int | None:
    """The wire width of every value of ``op`` if it is always the same (no counts, no
    strings, no tagged fields), else None."""
    code, arg = op
    if code == _FIXED:
        return int(arg)
    if code != _ENTITY:
        return None
    entity_class, nullable = arg
    if nullable:
        return None
    if entity_class in _fixed_widths:
        return _fixed_widths[entity_class]
    plan = _plan(entity_class)
    width: int | None = None
    if not plan.flexible:
        widths = [_fixed_width(field_op) for field_op in plan.fields]
        width = None if any(w is None for w in widths) else sum(w or 0 for w in widths)
    _fixed_widths[entity_class] = width
    return width


def _array_reader(element: _Op, kafka_type: str, flexible: bool, compact: bool) -> Any:
    """kio's native reader of an array of ``element`` (an entity or a scalar)."""
    # the op alone does not name the reader: int32 and timedelta_i32, string and bytes share one
    key = (element, kafka_type, flexible, compact)
    reader = _element_readers.get(key)
    if reader is None:
        code, arg = element
        item = entity_reader(arg[0]) if code == _ENTITY else get_reader(kafka_type, flexible, False)
        reader = compact_array_reader(item) if compact else legacy_array_reader(item)
        _element_readers[key] = reader
    return reader


def _field_reader(entity_class: type[Any], item: _Field, *, tagged: bool) -> Any:
    """kio's native reader of one field of a request body entity (never the header)."""
    key = (entity_class, item.name, tagged)
    reader = _field_readers.get(key)
    if reader is None:
        reader = _field_readers[key] = get_field_reader(entity_class, item.field, False, tagged)
    return reader


def _count_prefix(count: int, compact: bool) -> bytes:
    if not compact:
        return _INT32.pack(count)
    return encode_unsigned_varint(count + 1)


class _Walk:
    """One frame's walk: the buffer and the work done since the last yield."""

    def __init__(self, buffer: bytes | memoryview) -> None:
        # a memoryview: slicing it for a native reader copies nothing
        self.buffer = memoryview(buffer)
        self.scanned = 0

    def entity(
        self, entity_class: type[Any], position: int, end: int
    ) -> Generator[None, None, tuple[Any, int]]:
        """Decode one entity at ``position``; returns (entity, position after it)."""
        ordered, tagged = _fields(entity_class)
        values: dict[str, Any] = {}
        for item in ordered:
            value, position = yield from self.field(entity_class, item, position, end)
            values[item.name] = value
        if _plan(entity_class).flexible:
            count, position = _uvarint(self.buffer, position, end)
            if count > end - position:
                raise ScanError(f"{count} tagged fields announced, only {end - position} remain")
            for _ in range(count):
                tag, position = _uvarint(self.buffer, position, end)
                size, position = _uvarint(self.buffer, position, end)
                window_end = _take(position, size, end, "tagged field")
                known = tagged.get(tag)
                if known is not None:
                    _op(self.buffer, position, window_end, known.op)  # bounds first
                    reader = _field_reader(entity_class, known, tagged=True)
                    value, used = reader(self.buffer[:window_end], position)
                    if used != size:
                        raise ScanError(f"tagged field {tag}: {used} of {size} bytes read")
                    values[known.name] = value
                position = window_end
        yield
        return entity_class(**values), position

    def field(
        self, entity_class: type[Any], item: _Field, position: int, end: int
    ) -> Generator[None, None, tuple[Any, int]]:
        code, arg = item.op
        if code in (_LEGACY_ARRAY, _COMPACT_ARRAY):
            return (yield from self.array(item, position, end))
        if code == _ENTITY:
            nested_class, nullable = arg
            if nullable:
                marker = _int(self.buffer, position, 1, end)
                position += 1
                if marker == -1:
                    return None, position
                if marker != 1:
                    raise ScanError(f"nullable struct marker {marker}")
            return (yield from self.entity(nested_class, position, end))
        field_end = _op(self.buffer, position, end, item.op)  # bounds first
        reader = _field_reader(entity_class, item, tagged=False)
        value, used = reader(self.buffer[:field_end], position)
        if position + used != field_end:
            raise ScanError(f"field {item.name}: decoded {used} bytes, expected "
                            f"{field_end - position}")
        return value, field_end

    def small_element_end(self, position: int, end: int, element: _Op) -> int | None:
        """Where the element at ``position`` ends, or None if it is an entity spanning more
        than :data:`SLICE_BYTES` (found by scanning at most that many bytes: scanning a huge
        element whole would itself hold the loop). A scalar is always scanned whole (a string
        is one length)."""
        if element[0] != _ENTITY:
            return _op(self.buffer, position, end, element)
        window_end = min(end, position + SLICE_BYTES)
        try:
            return _op(self.buffer, position, window_end, element)
        except ScanError:
            if window_end == end:
                raise  # the frame itself ends inside the element
            return None

    def array(
        self, item: _Field, position: int, end: int
    ) -> Generator[None, None, tuple[Any, int]]:
        code, element = item.op
        compact = code == _COMPACT_ARRAY
        if compact:
            announced, position = _uvarint(self.buffer, position, end)
            count = announced - 1
        else:
            count = _int(self.buffer, position, 4, end)
            position += 4
            if count < -1:
                raise ScanError(f"array length {count}")
        if count == -1:
            return None, position
        if count > end - position:
            raise ScanError(f"array of {count} elements announced, only {end - position} remain")
        flexible = compact
        reader = _array_reader(element, item.kafka_type, flexible, compact)
        width = _fixed_width(element)
        pieces: list[tuple[Any, ...]] = []
        index = 0
        while index < count:
            run_start = position
            if width is not None:
                run_count = min(count - index, max(1, SLICE_BYTES // max(width, 1)))
                position = _take(position, run_count * width, end, "array")
            else:
                element_end = self.small_element_end(position, end, element)
                if element_end is None:
                    # one element too big for a single native call: field by field
                    big, position = yield from self.entity(element[1][0], position, end)
                    pieces.append((big,))
                    index += 1
                    continue
                position, run_count = element_end, 1
                while index + run_count < count:
                    next_end = self.small_element_end(position, end, element)
                    self.scanned += 1
                    if self.scanned >= SCAN_ELEMENTS_PER_YIELD:
                        self.scanned = 0
                        yield
                    if next_end is None or next_end - run_start > SLICE_BYTES:
                        break  # that element starts the next run
                    element_end = next_end
                    position, run_count = element_end, run_count + 1
            data = _count_prefix(run_count, compact) + bytes(self.buffer[run_start:position])
            run, used = reader(data, 0)
            if used != len(data):
                raise ScanError(f"array run: decoded {used} of {len(data)} bytes")
            pieces.append(run)
            index += run_count
            yield
        return tuple(itertools.chain.from_iterable(pieces)), position


def decode_entity_steps(
    entity_class: type[Any], buffer: bytes | memoryview, offset: int
) -> Generator[None, None, tuple[Any, int]]:
    """Decode ``entity_class`` at ``offset`` in bounded slices; yields between them.

    Returns:
        ``(entity, offset just past it)`` (as kio's reader, which returns the size instead).

    Raises:
        ScanError: a count or length larger than the bytes that remain, or bytes kio refuses.
    """
    walk = _Walk(buffer)
    return (yield from walk.entity(entity_class, offset, len(buffer)))


def run_to_completion(steps: Generator[None, None, Any]) -> Any:
    """Drive a step generator without yielding (tests, and small frames)."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
