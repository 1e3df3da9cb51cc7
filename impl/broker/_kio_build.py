"""Build kio entities of any version from plain values.

Why: each kio API version is its own set of frozen dataclasses. Handlers describe a response once,
as nested mappings with the union of the fields of every version they answer; :func:`build` keeps
the fields the target class has, converts error codes to ``ErrorCode`` and milliseconds to
``timedelta``, and recurses into nested entities. One handler then serves every version.

This module is a sans-IO core.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from collections.abc import Generator, Mapping
from typing import Any, Final

from kio.schema.errors import ErrorCode

__sans_io__ = True

_SCALAR: Final = 0
_ERROR: Final = 1
_TIMEDELTA: Final = 2
_NESTED: Final = 3
_NESTED_TUPLE: Final = 4
_TUPLE: Final = 5

_specs: dict[type[Any], dict[str, tuple[int, type[Any] | None]]] = {}


def _nested_entity(annotation: Any) -> tuple[bool, type[Any] | None]:
    """(is a tuple, entity class or None) for a field annotation."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            if arg is not type(None):
                return _nested_entity(arg)
    if origin is tuple:
        args = typing.get_args(annotation)
        inner = args[0] if args else None
        if isinstance(inner, type) and dataclasses.is_dataclass(inner):
            return True, inner
        return True, None
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return False, annotation
    return False, None


def _spec(cls: type[Any]) -> dict[str, tuple[int, type[Any] | None]]:
    cached = _specs.get(cls)
    if cached is not None:
        return cached
    spec: dict[str, tuple[int, type[Any] | None]] = {}
    for item in dataclasses.fields(cls):
        kafka_type = item.metadata.get("kafka_type")
        if kafka_type == "error_code":
            spec[item.name] = (_ERROR, None)
        elif kafka_type in {"timedelta_i32", "timedelta_i64"}:
            spec[item.name] = (_TIMEDELTA, None)
        else:
            is_tuple, entity = _nested_entity(item.type)
            if entity is not None:
                spec[item.name] = (_NESTED_TUPLE if is_tuple else _NESTED, entity)
            elif is_tuple:
                spec[item.name] = (_TUPLE, None)
            else:
                spec[item.name] = (_SCALAR, None)
    _specs[cls] = spec
    return spec


def nested_entity_class(cls: type[Any], name: str) -> type[Any]:
    """The entity class of ``cls``'s field ``name`` (an entity or a tuple of entities)."""
    entity = _spec(cls)[name][1]
    assert entity is not None, (cls, name)
    return entity


def build(cls: type[Any], data: Mapping[str, Any]) -> Any:
    """An instance of kio entity ``cls`` from ``data``, ignoring keys ``cls`` does not have.

    Args:
        cls: a kio request, response or nested entity class.
        data: field values; nested entities as mappings (or ready instances), lists as any
            sequence, error codes as ints, durations as milliseconds.

    Returns:
        The frozen kio entity.

    Raises:
        TypeError: a required field of ``cls`` is missing from ``data`` (a handler bug).
    """
    spec = _spec(cls)
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        entry = spec.get(name)
        if entry is None:
            continue
        kind, entity = entry
        if kind == _ERROR:
            kwargs[name] = value if isinstance(value, ErrorCode) else ErrorCode(value)
        elif kind == _TIMEDELTA:
            kwargs[name] = (
                value
                if isinstance(value, datetime.timedelta)
                else datetime.timedelta(milliseconds=value)
            )
        elif kind == _NESTED_TUPLE and value is not None:
            assert entity is not None
            kwargs[name] = tuple(
                build(entity, item) if isinstance(item, Mapping) else item for item in value
            )
        elif kind == _NESTED and isinstance(value, Mapping):
            assert entity is not None
            kwargs[name] = build(entity, value)
        elif kind == _TUPLE and value is not None:
            kwargs[name] = tuple(value)
        else:
            kwargs[name] = value
    return cls(**kwargs)


def has_field(cls: type[Any], name: str) -> bool:
    """Whether kio entity ``cls`` has a field ``name`` (i.e. this version carries it)."""
    return name in _spec(cls)


_nullability: dict[type[Any], list[tuple[str, bool, int, type[Any] | None]]] = {}


def _is_nullable(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return type(None) in typing.get_args(annotation)
    return False


def _nullability_spec(cls: type[Any]) -> list[tuple[str, bool, int, type[Any] | None]]:
    cached = _nullability.get(cls)
    if cached is None:
        spec = _spec(cls)
        cached = [
            (item.name, _is_nullable(item.type), spec[item.name][0], spec[item.name][1])
            for item in dataclasses.fields(cls)
        ]
        _nullability[cls] = cached
    return cached


#: Elements :func:`null_field_steps` checks between two yields.
NULL_CHECK_ELEMENTS_PER_YIELD: Final = 512


def null_field_steps(entity: Any) -> Generator[None, None, str | None]:
    """:func:`null_field` as a generator that yields every
    :data:`NULL_CHECK_ELEMENTS_PER_YIELD` array elements (a request of a million entries)."""
    counter = [0]
    return (yield from _null_field_steps(entity, counter))


def _null_field_steps(entity: Any, counter: list[int]) -> Generator[None, None, str | None]:
    for name, nullable, kind, nested in _nullability_spec(type(entity)):
        value = getattr(entity, name)
        if value is None:
            if not nullable:
                return name
            continue
        if kind == _NESTED_TUPLE and nested is not None:
            for item in value:
                counter[0] += 1
                if counter[0] >= NULL_CHECK_ELEMENTS_PER_YIELD:
                    counter[0] = 0
                    yield
                inner = yield from _null_field_steps(item, counter)
                if inner is not None:
                    return f"{name}.{inner}"
        elif kind == _NESTED and nested is not None:
            inner = yield from _null_field_steps(value, counter)
            if inner is not None:
                return f"{name}.{inner}"
    return None


def null_field(entity: Any) -> str | None:
    """The dotted name of a non-nullable field holding None, or None if there is none.

    Why: kio's native reader decodes a length of -1 as None even where the schema does not
    allow null (a non-nullable array or string); Kafka rejects such a request while parsing.
    """
    for name, nullable, kind, nested in _nullability_spec(type(entity)):
        value = getattr(entity, name)
        if value is None:
            if not nullable:
                return name
            continue
        if kind == _NESTED_TUPLE and nested is not None:
            for item in value:
                inner = null_field(item)
                if inner is not None:
                    return f"{name}.{inner}"
        elif kind == _NESTED and nested is not None:
            inner = null_field(value)
            if inner is not None:
                return f"{name}.{inner}"
    return None
