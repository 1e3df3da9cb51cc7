"""Produce (v3-v8) and Fetch (v4-v11) requests read by hand: the two requests of every
ordinary application, decoded without kio's generic reader.

Why by hand: at moderate rates over many partitions each request carries little (one batch of
one partition, a follower's round of fetch positions), and the generic path (the bounds scan of
:mod:`._wire_scan`, then kio's reader field by field, then the null-field check) cost more than
the rest of a small request's handling (``bench.requests``). The layouts are fixed for these
versions (all non-flexible); the bodies carry kio's field names, so the handlers read them
alike. Every count and length is checked against the bytes left before anything is read or
allocated; what kio's path refuses (a truncated frame, a count past the end, a null in a
non-nullable field, bytes after the body, a name that is not UTF-8) is refused here with
:class:`~._codec.MalformedRequestError` (``tests/unit/broker/test_hot_requests.py`` compares
the two on generated, truncated and damaged frames).

Layouts (request header v1: api_key int16 | api_version int16 | correlation_id int32 |
client_id nullable string)::

    Produce v3-v8: transactional_id nullable string | acks int16 | timeout_ms int32 |
        [name string | [index int32 | records nullable bytes]]
    Fetch v4-v11: replica_id int32 | max_wait_ms int32 | min_bytes int32 | max_bytes int32 |
        isolation_level int8 | session_id int32 (v7+) | session_epoch int32 (v7+) |
        [topic string | [partition int32 | current_leader_epoch int32 (v9+) |
        fetch_offset int64 | log_start_offset int64 (v5+) | partition_max_bytes int32]] |
        forgotten_topics_data [topic string | [int32]] (v7+) | rack_id string (v11+)

This module is a sans-IO core.
"""

from __future__ import annotations

import datetime
import struct
from dataclasses import dataclass
from typing import Final

__sans_io__ = True

PRODUCE: Final = 0
FETCH: Final = 1
PRODUCE_VERSIONS: Final = range(3, 9)
FETCH_VERSIONS: Final = range(4, 12)

_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")
_HEAD: Final = struct.Struct(">hhi")
_PRODUCE_FIXED: Final = struct.Struct(">hi")
_FETCH_FIXED: Final = struct.Struct(">iiiib")
_SESSION: Final = struct.Struct(">ii")


class HotDecodeError(ValueError):
    """The bytes are not such a request (the caller raises its malformed-request error)."""


@dataclass(slots=True)
class ProducePartition:
    """kio's ``PartitionProduceData``."""

    index: int
    records: bytes | None


@dataclass(slots=True)
class ProduceTopic:
    """kio's ``TopicProduceData``."""

    name: str
    partition_data: tuple[ProducePartition, ...]


@dataclass(slots=True)
class ProduceBody:
    """kio's ``ProduceRequest`` (v3-v8)."""

    transactional_id: str | None
    acks: int
    timeout: datetime.timedelta
    topic_data: tuple[ProduceTopic, ...]


@dataclass(slots=True)
class FetchPartition:
    """kio's ``FetchPartition`` (fields a version lacks: -1, as the handlers default them)."""

    partition: int
    current_leader_epoch: int
    fetch_offset: int
    log_start_offset: int
    partition_max_bytes: int


@dataclass(slots=True)
class FetchTopic:
    """kio's ``FetchTopic``."""

    topic: str
    partitions: tuple[FetchPartition, ...]


@dataclass(slots=True)
class ForgottenTopic:
    """kio's ``ForgottenTopic`` (v7+)."""

    topic: str
    partitions: tuple[int, ...]


@dataclass(slots=True)
class FetchBody:
    """kio's ``FetchRequest`` (v4-v11; session fields 0/-1 before v7, rack "" before v11)."""

    replica_id: int
    max_wait: datetime.timedelta
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: tuple[FetchTopic, ...]
    forgotten_topics_data: tuple[ForgottenTopic, ...]
    rack_id: str


class _Reader:
    """A cursor over one frame; every read checks the bytes left first."""

    __slots__ = ("data", "end", "position")

    def __init__(self, data: bytes | memoryview, position: int) -> None:
        self.data = data
        self.end = len(data)
        self.position = position

    def fixed(self, layout: struct.Struct) -> tuple[int, ...]:
        position = self.position
        if position + layout.size > self.end:
            raise HotDecodeError("a field past the end")
        self.position = position + layout.size
        return layout.unpack_from(self.data, position)

    def int32(self) -> int:
        position = self.position
        if position + 4 > self.end:
            raise HotDecodeError("a field past the end")
        self.position = position + 4
        value: int = _INT32.unpack_from(self.data, position)[0]
        return value

    def count(self, least_bytes: int) -> int:
        """An array's length: not null, each entry at least ``least_bytes`` long."""
        count = self.int32()
        if count < 0:
            raise HotDecodeError(f"array of {count} entries")
        if count * least_bytes > self.end - self.position:
            raise HotDecodeError(f"{count} entries past the end")
        return count

    def string(self, nullable: bool = False) -> str | None:
        position = self.position
        if position + 2 > self.end:
            raise HotDecodeError("a string past the end")
        length: int = _INT16.unpack_from(self.data, position)[0]
        position += 2
        if length < 0:
            if length == -1 and nullable:
                self.position = position
                return None
            raise HotDecodeError(f"a string of {length} bytes")
        if position + length > self.end:
            raise HotDecodeError(f"a string of {length} bytes past the end")
        self.position = position + length
        try:
            return str(self.data[position:position + length], "utf-8")
        except UnicodeDecodeError:
            raise HotDecodeError("a string that is not UTF-8") from None

    def name(self) -> str:
        value = self.string()
        assert value is not None
        return value

    def records(self) -> bytes | None:
        size = self.int32()
        if size < 0:
            if size == -1:
                return None
            raise HotDecodeError(f"records of {size} bytes")
        position = self.position
        if position + size > self.end:
            raise HotDecodeError(f"records of {size} bytes past the end")
        self.position = position + size
        return bytes(self.data[position:position + size])


def handles(api_key: int, api_version: int) -> bool:
    """Whether :func:`decode` reads this request."""
    if api_key == PRODUCE:
        return api_version in PRODUCE_VERSIONS
    return api_key == FETCH and api_version in FETCH_VERSIONS


def decode(api_key: int, api_version: int, frame: bytes | memoryview
           ) -> tuple[int, str | None, ProduceBody | FetchBody]:
    """``(correlation_id, client_id, body)`` of a Produce v3-v8 or Fetch v4-v11 frame.

    Raises:
        HotDecodeError: the bytes are not such a request.
    """
    reader = _Reader(frame, 0)
    key, version, correlation_id = reader.fixed(_HEAD)
    assert (key, version) == (api_key, api_version), (key, version)
    client_id = reader.string(nullable=True)
    body = _produce(reader) if api_key == PRODUCE else _fetch(reader, api_version)
    if reader.position != reader.end:
        raise HotDecodeError(f"{reader.end - reader.position} trailing bytes after the request")
    return correlation_id, client_id, body


def _produce(reader: _Reader) -> ProduceBody:
    transactional_id = reader.string(nullable=True)
    acks, timeout_ms = reader.fixed(_PRODUCE_FIXED)
    topics: list[ProduceTopic] = []
    for _ in range(reader.count(6)):
        name = reader.name()
        partitions = []
        for _ in range(reader.count(8)):
            index = reader.int32()
            partitions.append(ProducePartition(index, reader.records()))
        topics.append(ProduceTopic(name, tuple(partitions)))
    return ProduceBody(transactional_id, acks, datetime.timedelta(milliseconds=timeout_ms),
                       tuple(topics))


def _fetch(reader: _Reader, version: int) -> FetchBody:
    replica_id, max_wait_ms, min_bytes, max_bytes, isolation = reader.fixed(_FETCH_FIXED)
    session_id, session_epoch = reader.fixed(_SESSION) if version >= 7 else (0, -1)
    with_epoch = version >= 9
    with_start = version >= 5
    partition_bytes = 16 + 4 * with_epoch + 8 * with_start
    topics: list[FetchTopic] = []
    for _ in range(reader.count(6)):
        topic = reader.name()
        partitions = []
        for _ in range(reader.count(partition_bytes)):
            partition = reader.int32()
            epoch = reader.int32() if with_epoch else -1
            (offset,) = reader.fixed(_INT64)
            start = reader.fixed(_INT64)[0] if with_start else -1
            partitions.append(FetchPartition(partition, epoch, offset, start, reader.int32()))
        topics.append(FetchTopic(topic, tuple(partitions)))
    forgotten: list[ForgottenTopic] = []
    if version >= 7:
        for _ in range(reader.count(6)):
            topic = reader.name()
            indexes = tuple(reader.int32() for _ in range(reader.count(4)))
            forgotten.append(ForgottenTopic(topic, indexes))
    rack_id = reader.name() if version >= 11 else ""
    return FetchBody(replica_id, datetime.timedelta(milliseconds=max_wait_ms), min_bytes,
                     max_bytes, isolation, session_id, session_epoch, tuple(topics),
                     tuple(forgotten), rack_id)
