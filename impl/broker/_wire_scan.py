"""Bounds check of a request frame before kio decodes it: no count or length exceeds the bytes left.

Why: kio's native reader allocates an array for the count a frame announces before it reads a
single element, so a 23-byte request announcing 2^32 elements makes it ask for tens of GB and the
process aborts (an allocation failure is not an exception). Kafka's generated readers refuse any
collection whose announced size exceeds the bytes that remain ("Tried to allocate a collection of
size N, but there are only M bytes remaining"); :func:`scan` applies the same rule by walking the
frame along the same schema kio will use, without allocating anything per element, and returns
the number of bytes the entity spans. Only a frame that passes is handed to kio.

The walk mirrors kio 0.6's wire format: legacy (non-flexible) arrays carry an int32 count and
-1 for null, strings an int16 length, bytes an int32 length; flexible ones carry
``uvarint(n + 1)`` with 0 for null; nullable nested entities in flexible versions carry an int8
marker; flexible entities end with a tagged-field section (``uvarint`` count, then ``uvarint`` tag,
``uvarint`` size and that many bytes, each known tag scanned inside its own window). The request
header's ``client_id`` is a legacy nullable string in every header version.

This module is a sans-IO core.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Final

__sans_io__ = True


class ScanError(Exception):
    """The frame announces more than it holds, or is cut short: it is not a request."""


# Op codes of a compiled field plan.
_FIXED: Final = 0  # arg: width in bytes
_LEGACY_STRING: Final = 1  # int16 length, -1 null
_LEGACY_BYTES: Final = 2  # int32 length, -1 null
_COMPACT_BYTES: Final = 3  # uvarint length + 1, 0 null
_ENTITY: Final = 4  # arg: (plan, nullable marker?)
_LEGACY_ARRAY: Final = 5  # arg: element op
_COMPACT_ARRAY: Final = 6  # arg: element op

_WIDTHS: Final = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}

_Op = tuple[int, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """An entity's fields in wire order, and its tagged fields by tag (flexible only)."""

    fields: tuple[_Op, ...]
    flexible: bool
    tagged: dict[int, _Op]


_plans: dict[type[Any], _Plan] = {}


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """(the annotation without ``| None``, whether it was optional)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        assert len(args) == 1, annotation
        return args[0], True
    return annotation, False


def _scalar_op(kafka_type: str, flexible: bool) -> _Op:
    width = _WIDTHS.get(kafka_type)
    if width is not None:
        return (_FIXED, width)
    if kafka_type in ("string", "bytes", "records"):
        if flexible:
            return (_COMPACT_BYTES, None)
        return (_LEGACY_STRING, None) if kafka_type == "string" else (_LEGACY_BYTES, None)
    raise AssertionError(f"kafka type {kafka_type!r} unknown to the scanner")


def _field_op(
    name: str, annotation: Any, kafka_type: str, *, flexible: bool, is_tag: bool, header: bool
) -> _Op:
    if header and name == "client_id":
        return (_LEGACY_STRING, None)
    annotation, optional = _unwrap(annotation)
    if is_tag:
        optional = False
    if typing.get_origin(annotation) is tuple:
        inner = typing.get_args(annotation)[0]
        if isinstance(inner, type) and dataclasses.is_dataclass(inner):
            element: _Op = (_ENTITY, (inner, False))
        else:
            element = _scalar_op(kafka_type, flexible)
        return (_COMPACT_ARRAY if flexible else _LEGACY_ARRAY, element)
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return (_ENTITY, (annotation, optional))
    return _scalar_op(kafka_type, flexible)


def _plan(entity_class: type[Any]) -> _Plan:
    plan = _plans.get(entity_class)
    if plan is not None:
        return plan
    flexible = bool(entity_class.__flexible__)
    header = entity_class.__name__ == "RequestHeader"
    hints = typing.get_type_hints(entity_class)
    ordered: list[_Op] = []
    tagged: dict[int, _Op] = {}
    for item in dataclasses.fields(entity_class):
        tag = item.metadata.get("tag")
        kafka_type = str(item.metadata.get("kafka_type", ""))
        op = _field_op(
            item.name, hints[item.name], kafka_type,
            flexible=flexible, is_tag=tag is not None, header=header,
        )
        if tag is None:
            ordered.append(op)
        else:
            tagged[int(tag)] = op
    plan = _plans[entity_class] = _Plan(tuple(ordered), flexible, tagged)
    return plan


def _uvarint(buffer: bytes | memoryview, position: int, end: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if position >= end:
            raise ScanError("frame ends inside a varint")
        byte = buffer[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
        if shift > 28:
            raise ScanError("varint longer than 5 bytes")


def _int(buffer: bytes | memoryview, position: int, width: int, end: int) -> int:
    if position + width > end:
        raise ScanError("frame ends inside a length")
    return int.from_bytes(buffer[position : position + width], "big", signed=True)


def _take(position: int, length: int, end: int, what: str) -> int:
    if length > end - position:
        raise ScanError(f"{what} of {length} bytes, only {end - position} remain")
    return position + length


def _array(
    buffer: bytes | memoryview, position: int, end: int, count: int, element: _Op
) -> int:
    remaining = end - position
    if count > remaining:
        raise ScanError(
            f"array of {count} elements announced, only {remaining} bytes remain"
        )
    if element[0] == _FIXED:
        return _take(position, count * element[1], end, "array")
    for _ in range(count):
        position = _op(buffer, position, end, element)
    return position


def _op(buffer: bytes | memoryview, position: int, end: int, op: _Op) -> int:
    code, arg = op
    if code == _FIXED:
        return _take(position, arg, end, "field")
    if code == _COMPACT_BYTES:
        length, position = _uvarint(buffer, position, end)
        return position if length == 0 else _take(position, length - 1, end, "string")
    if code == _LEGACY_STRING:
        length = _int(buffer, position, 2, end)
        position += 2
        if length < -1:
            raise ScanError(f"string length {length}")
        return position if length == -1 else _take(position, length, end, "string")
    if code == _LEGACY_BYTES:
        length = _int(buffer, position, 4, end)
        position += 4
        if length < -1:
            raise ScanError(f"bytes length {length}")
        return position if length == -1 else _take(position, length, end, "bytes")
    if code == _ENTITY:
        entity_class, nullable = arg
        if nullable:
            marker = _int(buffer, position, 1, end)
            position += 1
            if marker == -1:
                return position
            if marker != 1:
                raise ScanError(f"nullable struct marker {marker}")
        return _entity(buffer, position, end, _plan(entity_class))
    if code == _COMPACT_ARRAY:
        count, position = _uvarint(buffer, position, end)
        return position if count == 0 else _array(buffer, position, end, count - 1, arg)
    assert code == _LEGACY_ARRAY
    count = _int(buffer, position, 4, end)
    position += 4
    if count < -1:
        raise ScanError(f"array length {count}")
    return position if count == -1 else _array(buffer, position, end, count, arg)


def _entity(buffer: bytes | memoryview, position: int, end: int, plan: _Plan) -> int:
    for op in plan.fields:
        position = _op(buffer, position, end, op)
    if not plan.flexible:
        return position
    count, position = _uvarint(buffer, position, end)
    if count > end - position:
        raise ScanError(f"{count} tagged fields announced, only {end - position} bytes remain")
    for _ in range(count):
        tag, position = _uvarint(buffer, position, end)
        size, position = _uvarint(buffer, position, end)
        window_end = _take(position, size, end, "tagged field")
        tagged = plan.tagged.get(tag)
        if tagged is not None:
            _op(buffer, position, window_end, tagged)
        position = window_end
    return position


def scan(entity_class: type[Any], buffer: bytes | memoryview, offset: int) -> int:
    """Check ``buffer[offset:]`` against ``entity_class``'s wire format; return where it ends.

    Args:
        entity_class: a kio request, response or header class.
        buffer: the frame body.
        offset: where the entity starts.

    Returns:
        The offset just past the entity.

    Raises:
        ScanError: a count or length larger than the bytes that remain, a negative length other
            than -1, an over-long varint, or the frame ending inside a field.
    """
    return _entity(buffer, offset, len(buffer), _plan(entity_class))
