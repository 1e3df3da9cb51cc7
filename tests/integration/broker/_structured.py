"""Seeded, structure-aware request generation for the wire fuzzer (test support only).

Requests are built from kio's schemas (every field of every advertised API version gets a value
of its Kafka type: edge integers, nulls where nullable, empty and over-long strings, arrays of
0 to 3 elements), Produce records are record batches that may lie (record count, offset deltas,
max timestamp, compression codec, CRC-valid garbage, producer ids, epochs and sequences), and the
encoded frame is then mutated: lengths and counts overwritten with huge or negative values,
invalid UTF-8 in strings, truncation, trailing bytes, a lying size prefix.
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import struct
import types
import typing
import uuid
from typing import Any, Final

from kio.schema.errors import ErrorCode

from impl.broker import api_versions
from impl.broker._codec import load_request_schema
from impl.storage import record_batch as rb

TARGET_TOPIC: Final = "fz"
_INT_RANGES: Final = {
    "int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint16": 16,
}
_HUGE_COUNTS: Final = (
    b"\xff\xff\xff\xff\x0f", b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x80\x00\x00\x00",
    b"\xfe\xff\xff\xff\x07", b"\x00\x00\x00\x00", b"\xff\xff",
)


def advertised_versions() -> list[tuple[int, int]]:
    """Every (api key, version) the broker advertises and kio has a schema for."""
    return [
        (key, version)
        for key, (low, high) in sorted(api_versions.ADVERTISED.items())
        if key not in api_versions.RAW_APIS
        for version in range(low, high + 1)
    ]


def _int(rng: random.Random, kafka_type: str) -> int:
    bits = _INT_RANGES[kafka_type]
    if kafka_type.startswith("uint"):
        low, high = 0, (1 << bits) - 1
    else:
        low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return rng.choice([0, 1, -1 if low < 0 else 0, low, high, rng.randint(low, high),
                       rng.randint(0, 10)])


def _string(rng: random.Random) -> str:
    return rng.choice([TARGET_TOPIC, TARGET_TOPIC, "", "x" * 250, "../etc", "a.b", "fz-new",
                       "".join(rng.choice("abc._-") for _ in range(rng.randint(1, 12)))])


def _batch(rng: random.Random, marker: bytes) -> bytes:
    """A record batch for the target topic, honest or lying."""
    values = [marker + b"-%d" % index for index in range(rng.randint(1, 4))]
    codec = rng.choice([0, 0, 0, 1, 2, 3, 4])
    producer = rng.random() < 0.3
    batch = rb.build_batch(
        values, timestamp_ms=rng.choice([0, 1_700_000_000_000, -1, 2**62]),
        compression=codec,
        producer_id=rng.choice([0, 7, 2**62]) if producer else -1,
        producer_epoch=rng.choice([0, 1, 32767]) if producer else -1,
        base_sequence=rng.choice([0, 5, 2**31 - 1, -1]) if producer else -1,
    )
    lie = rng.random()
    if lie < 0.5:
        return batch
    names = ("attributes", "last_offset_delta", "base_timestamp", "max_timestamp",
             "producer_id", "producer_epoch", "base_sequence", "record_count")
    header = rb.parse_header(batch)
    fields = {name: getattr(header, name) for name in names}
    records = batch[rb.HEADER_SIZE:]
    if lie < 0.6:
        fields["record_count"] = fields["last_offset_delta"] = 2**31 - 1
        fields["last_offset_delta"] -= 1
    elif lie < 0.7:
        fields["max_timestamp"] = rng.choice([2**63 - 1, -(2**63)])
    elif lie < 0.8:
        fields["attributes"] = rng.randint(0, 7)
        records = rng.randbytes(rng.randint(0, 64))  # compressed garbage
    elif lie < 0.9:
        fields["record_count"] = rng.choice([0, -1, 5, 2**31 - 1])
    else:
        records = records[: rng.randint(0, len(records))]
    body = bytearray(struct.pack(">hiqqqhii", *(fields[name] for name in names))) + records
    crc = rb.crc32c(body)
    return struct.pack(">qiibI", 0, len(body) + 9, -1, 2, crc) + bytes(body)


def _value(rng: random.Random, hint: Any, item: dataclasses.Field[Any], depth: int,
           marker: bytes) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = next(arg for arg in typing.get_args(hint) if arg is not type(None))
        if rng.random() < 0.15:
            return None
        return _value(rng, inner, item, depth, marker)
    if origin is tuple:
        inner = typing.get_args(hint)[0]
        count = rng.choice([0, 1, 1, 2, 3]) if depth < 4 else 0
        return tuple(_value(rng, inner, item, depth + 1, marker) for _ in range(count))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return random_entity(rng, hint, depth + 1, marker)
    kafka_type = str(item.metadata.get("kafka_type", ""))
    if kafka_type in _INT_RANGES:
        return _int(rng, kafka_type)
    if kafka_type == "bool":
        return rng.random() < 0.5
    if kafka_type == "float64":
        return rng.random()
    if kafka_type == "string":
        return _string(rng)
    if kafka_type == "records":
        return _batch(rng, marker)
    if kafka_type == "bytes":
        return rng.randbytes(rng.randint(0, 16))
    if kafka_type == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if kafka_type == "error_code":
        return ErrorCode(0)
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=rng.choice([0, 1, 100, 5000]))
    if kafka_type == "datetime_i64":
        return datetime.datetime.fromtimestamp(rng.randint(0, 2_000_000_000), tz=datetime.UTC)
    raise AssertionError(f"no generator for {kafka_type!r}")


def random_entity(rng: random.Random, cls: type[Any], depth: int = 0,
                  marker: bytes = b"m") -> Any:
    """A kio entity of ``cls`` with seeded random field values."""
    hints = typing.get_type_hints(cls)
    values = {item.name: _value(rng, hints[item.name], item, depth, marker)
              for item in dataclasses.fields(cls)}
    return cls(**values)


def encode(api_key: int, version: int, correlation: int, body: Any) -> bytes:
    """The framed request (header v1/v2 as the version needs)."""
    from impl.broker._codec import encode_request

    return encode_request(api_key, version, correlation, "fuzz", body)


def request(rng: random.Random, api_key: int, version: int, correlation: int,
            marker: bytes) -> bytes:
    """A valid frame of (api key, version) with random contents."""
    cls = load_request_schema(api_key, version)
    body = random_entity(rng, cls, 0, marker)
    if api_key == api_versions.DELETE_TOPICS:
        # the fuzzer's topics stay (a deleted target would leave nothing to fuzz)
        names = tuple(f"absent-{index}" for index in range(len(body.topic_names)))
        body = dataclasses.replace(body, topic_names=names)
    if api_key == api_versions.PRODUCE:
        body = dataclasses.replace(body, acks=rng.choice([-1, 1]))
        if rng.random() < 0.7:  # aimed at the target topic, as a producer would
            topic_class = typing.get_args(typing.get_type_hints(cls)["topic_data"])[0]
            partition_class = typing.get_args(
                typing.get_type_hints(topic_class)["partition_data"]
            )[0]
            partition = partition_class(index=rng.randint(0, 1), records=_batch(rng, marker))
            body = dataclasses.replace(
                body, topic_data=(topic_class(name=TARGET_TOPIC, partition_data=(partition,)),),
                transactional_id=None,
            )
    return encode(api_key, version, correlation, body)


def mutate(rng: random.Random, frame: bytes) -> bytes:
    """``frame`` (size prefix included) mutated, or unchanged about a third of the time."""
    choice = rng.random()
    if choice < 0.4 or len(frame) <= 12:
        return frame
    body = bytearray(frame[4:])
    if choice < 0.6:  # a length or count overwritten
        lie = rng.choice(_HUGE_COUNTS)
        position = rng.randrange(8, max(9, len(body) - len(lie)))
        body[position : position + len(lie)] = lie
    elif choice < 0.7:  # invalid UTF-8 where a string may be
        position = rng.randrange(8, len(body))
        body[position : position + 2] = b"\xff\xfe"
    elif choice < 0.8:
        del body[rng.randrange(8, len(body)) :]
    elif choice < 0.87:
        body += rng.randbytes(rng.randint(1, 16))
    elif choice < 0.99:
        for _ in range(rng.randint(1, 4)):
            body[rng.randrange(8, len(body))] = rng.randrange(256)
    else:  # a size prefix that lies (more than is sent)
        return struct.pack(">i", len(body) + rng.randint(1, 1 << 20)) + bytes(body)
    return struct.pack(">i", len(body)) + bytes(body)
