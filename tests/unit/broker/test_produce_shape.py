"""A large Produce frame of a few partitions is decoded on the event loop, anything else large
off it (``impl/broker/_produce_shape.py``): the shape is read from counts and lengths only."""

from __future__ import annotations

import struct
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from impl.broker._codec import encode_request, load_request_schema
from impl.broker._kio_build import build
from impl.broker._produce_shape import PARTITION_LIMIT, few_partitions
from impl.storage.record_batch import build_batch

BATCH = build_batch([bytes(1024)] * 300, timestamp_ms=1_700_000_000_000)


def _produce(partitions: list[tuple[str, int, bytes | None]], version: int = 8,
             transactional_id: str | None = None) -> bytes:
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, index, records in partitions:
        topics.setdefault(topic, []).append({"index": index, "records": records})
    body = build(load_request_schema(0, version), {
        "transactional_id": transactional_id, "acks": -1, "timeout": 30_000,
        "topic_data": [{"name": name, "partition_data": data} for name, data in topics.items()]})
    return encode_request(0, version, 7, "producer-1", body)[4:]


def test_a_producer_s_frame_is_cheap() -> None:
    assert few_partitions(_produce([("t", 0, BATCH)]))
    assert few_partitions(_produce([("t", 0, BATCH)], version=3, transactional_id="tx"))
    assert few_partitions(_produce([("a", 0, BATCH), ("a", 1, BATCH), ("b", 0, None)]))


def test_many_partitions_are_not() -> None:
    assert few_partitions(_produce([("t", i, BATCH[:100]) for i in range(PARTITION_LIMIT)]))
    assert not few_partitions(
        _produce([("t", i, BATCH[:100]) for i in range(PARTITION_LIMIT + 1)]))
    # the attack the thread hand-off exists for: a MB of empty partitions
    assert not few_partitions(_produce([("t", i, None) for i in range(131_000)]))


def test_what_does_not_parse_exactly_is_not() -> None:
    frame = _produce([("t", 0, BATCH)])
    assert not few_partitions(frame[:-1])
    assert not few_partitions(frame + b"\x00")
    assert not few_partitions(frame[:20])
    fetch = bytearray(frame)
    struct.pack_into(">h", fetch, 0, 1)  # another API's frame
    assert not few_partitions(bytes(fetch))
    version = bytearray(frame)
    struct.pack_into(">h", version, 2, 9)  # a flexible version: another layout
    assert not few_partitions(bytes(version))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(prefix=st.binary(max_size=40), data=st.binary(max_size=200))
def test_garbage_never_raises(prefix: bytes, data: bytes) -> None:
    frame = struct.pack(">hhi", 0, 8, 1) + prefix + data
    assert few_partitions(frame) in (True, False)
