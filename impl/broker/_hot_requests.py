"""Produce (v3-v8) and Fetch (v4-v11) requests read by hand: the two requests of every
ordinary application, decoded without kio's generic reader.

Why by hand: at moderate rates over many partitions each request carries little (one batch of
one partition, a follower's round of fetch positions), and the generic path (the bounds scan of
:mod:`._wire_scan`, then kio's reader field by field, then the null-field check) cost more than
the rest of a small request's handling (``bench.requests``). The layouts are fixed for these
versions (all non-flexible); the bodies carry kio's field names, so the handlers read them
alike. Every count and length is checked against the bytes left before anything is read or
allocated (:class:`~._wire_fields.Reader`); what kio's path refuses (a truncated frame, a count
past the end, a null in a non-nullable field, bytes after the body, a name that is not UTF-8)
is refused here with :class:`~._wire_fields.FieldError`, which the codec raises as its
malformed-request error (``tests/unit/broker/test_hot_requests.py`` compares the two on
generated, truncated and damaged frames).

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

from ._wire_fields import FieldError, Reader

__sans_io__ = True

PRODUCE: Final = 0
FETCH: Final = 1
PRODUCE_VERSIONS: Final = range(3, 9)
FETCH_VERSIONS: Final = range(4, 12)

_INT64: Final = struct.Struct(">q")
_HEAD: Final = struct.Struct(">hhi")
_PRODUCE_FIXED: Final = struct.Struct(">hi")
_FETCH_FIXED: Final = struct.Struct(">iiiib")
_SESSION: Final = struct.Struct(">ii")


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


def handles(api_key: int, api_version: int) -> bool:
    """Whether :func:`decode` reads this request."""
    if api_key == PRODUCE:
        return api_version in PRODUCE_VERSIONS
    return api_key == FETCH and api_version in FETCH_VERSIONS


def decode(api_key: int, api_version: int, frame: bytes | memoryview
           ) -> tuple[int, str | None, ProduceBody | FetchBody]:
    """``(correlation_id, client_id, body)`` of a Produce v3-v8 or Fetch v4-v11 frame.

    Raises:
        FieldError: the bytes are not such a request.
    """
    reader = Reader(frame, 0)
    key, version, correlation_id = reader.fixed(_HEAD)
    assert (key, version) == (api_key, api_version), (key, version)
    client_id = reader.string(nullable=True)
    body = _produce(reader) if api_key == PRODUCE else _fetch(reader, api_version)
    if reader.position != reader.end:
        raise FieldError(f"{reader.end - reader.position} trailing bytes after the request")
    return correlation_id, client_id, body


def _produce(reader: Reader) -> ProduceBody:
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


def _fetch(reader: Reader, version: int) -> FetchBody:
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
