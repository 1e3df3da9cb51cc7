"""The records of ``__consumer_offsets``, in Kafka's ``GroupMetadataManager`` formats.

Why Kafka's formats: an operator can read the partition with Kafka's own tools, and a partition
written by one logproof version loads in the next. Every key and value starts with an int16
version. Offset commits use key v1 (group, topic, partition) and value v3 (offset, leader epoch,
metadata, commit timestamp), or value v1 when an explicit expire timestamp was asked for (v2-v4
OffsetCommit ``retention_time``). Group metadata uses key v2 (group) and value v3. A null value is
a tombstone. Decoding accepts every value version Kafka ever wrote (offset v0-v3, group v0-v3);
a key of an unknown version is skipped (KAFKA-14869), and a value that does not parse raises
:class:`GroupRecordError` so the loader can report the offset.

This module is a sans-IO core.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from impl.storage import record_batch as rb
from impl.storage.errors import CorruptBatch

__sans_io__ = True

OFFSET_KEY_VERSION: Final = 1
GROUP_KEY_VERSION: Final = 2
OFFSET_VALUE_VERSION: Final = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY: Final = 1
GROUP_VALUE_VERSION: Final = 3

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")


class GroupRecordError(ValueError):
    """A key or value of ``__consumer_offsets`` that does not parse."""


@dataclass(frozen=True, slots=True)
class OffsetKey:
    """The key of a committed offset."""

    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    """The key of a group's metadata."""

    group_id: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    """A committed offset (``expire_timestamp_ms`` -1: expiry by the retention rules)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int = -1


@dataclass(frozen=True, slots=True)
class MemberValue:
    """One member in a group record."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes

    def __init__(  # noqa: PLR0917 (the generated constructor's signature)
        self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
        rebalance_timeout_ms: int, session_timeout_ms: int, subscription: bytes,
        assignment: bytes
    ) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "member_id", member_id)
        object.__setattr__(self, "group_instance_id", group_instance_id)
        object.__setattr__(self, "client_id", client_id)
        object.__setattr__(self, "client_host", client_host)
        object.__setattr__(self, "rebalance_timeout_ms", rebalance_timeout_ms)
        object.__setattr__(self, "session_timeout_ms", session_timeout_ms)
        object.__setattr__(self, "subscription", subscription)
        object.__setattr__(self, "assignment", assignment)


@dataclass(frozen=True, slots=True)
class GroupValue:
    """A group's metadata as of its last persisted generation."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberValue, ...]


# --- writing ---------------------------------------------------------------------------------


def _string(value: str) -> bytes:
    raw = value.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def _nullable_string(value: str | None) -> bytes:
    return _I16.pack(-1) if value is None else _string(value)


def _bytes(value: bytes) -> bytes:
    return _I32.pack(len(value)) + value


def encode_offset_key(key: OffsetKey) -> bytes:
    """Offset key v1."""
    return (_I16.pack(OFFSET_KEY_VERSION) + _string(key.group_id) + _string(key.topic)
            + _I32.pack(key.partition))


def encode_group_key(key: GroupKey) -> bytes:
    """Group key v2."""
    return _I16.pack(GROUP_KEY_VERSION) + _string(key.group_id)


def encode_offset_value(value: OffsetValue) -> bytes:
    """Offset value v3, or v1 when the commit carries an explicit expire timestamp."""
    if value.expire_timestamp_ms >= 0:
        return (_I16.pack(OFFSET_VALUE_VERSION_WITH_EXPIRY) + _I64.pack(value.offset)
                + _string(value.metadata) + _I64.pack(value.commit_timestamp_ms)
                + _I64.pack(value.expire_timestamp_ms))
    return (_I16.pack(OFFSET_VALUE_VERSION) + _I64.pack(value.offset)
            + _I32.pack(value.leader_epoch) + _string(value.metadata)
            + _I64.pack(value.commit_timestamp_ms))


def encode_group_value(value: GroupValue) -> bytes:
    """Group value v3."""
    parts = [
        _I16.pack(GROUP_VALUE_VERSION), _string(value.protocol_type), _I32.pack(value.generation),
        _nullable_string(value.protocol), _nullable_string(value.leader),
        _I64.pack(value.current_state_timestamp_ms), _I32.pack(len(value.members)),
    ]
    for member in value.members:
        parts += [
            _string(member.member_id), _nullable_string(member.group_instance_id),
            _string(member.client_id), _string(member.client_host),
            _I32.pack(member.rebalance_timeout_ms), _I32.pack(member.session_timeout_ms),
            _bytes(member.subscription), _bytes(member.assignment),
        ]
    return b"".join(parts)


# --- reading ---------------------------------------------------------------------------------


class _Reader:
    """Bounds-checked reads from one key or value."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def _take(self, size: int) -> bytes:
        end = self.position + size
        if size < 0 or end > len(self.data):
            raise GroupRecordError(f"truncated at byte {self.position} of {len(self.data)}")
        chunk = self.data[self.position:end]
        self.position = end
        return chunk

    def i16(self) -> int:
        value: int = _I16.unpack(self._take(2))[0]
        return value

    def i32(self) -> int:
        value: int = _I32.unpack(self._take(4))[0]
        return value

    def i64(self) -> int:
        value: int = _I64.unpack(self._take(8))[0]
        return value

    def nullable_string(self) -> str | None:
        size = self.i16()
        if size == -1:
            return None
        try:
            return self._take(size).decode("utf-8")
        except UnicodeDecodeError as error:
            raise GroupRecordError(f"a string is not UTF-8: {error}") from None

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise GroupRecordError("a null string where one is required")
        return value

    def bytes_(self) -> bytes:
        size = self.i32()
        return b"" if size == -1 else self._take(size)


def decode_key(data: bytes) -> OffsetKey | GroupKey | None:
    """The key of a record; None for a key version this broker does not know (skipped)."""
    reader = _Reader(data)
    version = reader.i16()
    if version in (0, 1):
        return OffsetKey(reader.string(), reader.string(), reader.i32())
    if version == GROUP_KEY_VERSION:
        return GroupKey(reader.string())
    return None


def decode_offset_value(data: bytes) -> OffsetValue:
    """An offset value of any version Kafka wrote (v0-v3)."""
    reader = _Reader(data)
    version = reader.i16()
    if version == 0:
        return OffsetValue(reader.i64(), -1, reader.string(), reader.i64())
    if version == 1:
        return OffsetValue(reader.i64(), -1, reader.string(), reader.i64(), reader.i64())
    if version == 2:
        return OffsetValue(reader.i64(), -1, reader.string(), reader.i64())
    if version == 3:
        return OffsetValue(reader.i64(), reader.i32(), reader.string(), reader.i64())
    raise GroupRecordError(f"offset value version {version} is unknown")


def decode_group_value(data: bytes) -> GroupValue:
    """A group value of any version Kafka wrote (v0-v3)."""
    reader = _Reader(data)
    version = reader.i16()
    if not 0 <= version <= 3:
        raise GroupRecordError(f"group value version {version} is unknown")
    protocol_type = reader.string()
    generation = reader.i32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    state_timestamp_ms = reader.i64() if version >= 2 else -1
    count = reader.i32()
    if count < 0 or count > len(data):
        raise GroupRecordError(f"{count} members in a {len(data)}-byte value")
    members = []
    for _ in range(count):
        member_id = reader.string()
        instance_id = reader.nullable_string() if version >= 3 else None
        client_id = reader.string()
        client_host = reader.string()
        rebalance_timeout_ms = reader.i32() if version >= 1 else -1
        session_timeout_ms = reader.i32()
        if version == 0:
            rebalance_timeout_ms = session_timeout_ms
        members.append(MemberValue(member_id, instance_id, client_id, client_host,
                                   rebalance_timeout_ms, session_timeout_ms, reader.bytes_(),
                                   reader.bytes_()))
    return GroupValue(protocol_type, generation, protocol, leader, state_timestamp_ms,
                      tuple(members))


# --- batches -----------------------------------------------------------------------------------


def build_records(records: tuple[tuple[bytes, bytes | None], ...], timestamp_ms: int) -> bytes:
    """One uncompressed v2 batch holding ``records`` (key, value or None for a tombstone)."""
    return rb.build_batch([value for _, value in records], keys=[key for key, _ in records],
                          timestamp_ms=timestamp_ms)


def _varint(data: bytes, position: int) -> tuple[int, int]:
    shift = 0
    raw = 0
    while True:
        if position >= len(data) or shift > 63:
            raise GroupRecordError("a varint runs past its record")
        byte = data[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
    return (raw >> 1) ^ -(raw & 1), position


def iter_records(batch: bytes) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record of one uncompressed v2 batch.

    Raises:
        GroupRecordError: the batch is compressed, a control batch, or does not parse.
    """
    try:
        header = rb.parse_header(batch, 0)
    except CorruptBatch as error:
        raise GroupRecordError(str(error)) from None
    if header.compression:
        raise GroupRecordError("a compressed batch in __consumer_offsets")
    if header.is_control:
        return
    position = rb.HEADER_SIZE
    data = bytes(batch[:header.size_in_bytes])
    for _ in range(header.record_count):
        length, position = _varint(data, position)
        end = position + length
        if length < 0 or end > len(data):
            raise GroupRecordError("a record runs past its batch")
        position += 1  # attributes
        _, position = _varint(data, position)  # timestamp delta
        offset_delta, position = _varint(data, position)
        key_length, position = _varint(data, position)
        key = None if key_length < 0 else data[position:position + key_length]
        position += max(key_length, 0)
        value_length, position = _varint(data, position)
        value = None if value_length < 0 else data[position:position + value_length]
        position = end
        yield header.base_offset + offset_delta, key, value


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    raw = text.encode("utf-16-be")
    value = 0
    for index in range(0, len(raw), 2):
        value = (31 * value + ((raw[index] << 8) | raw[index + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def partition_for(group_id: str, partition_count: int) -> int:
    """The offsets partition of a group: Kafka's ``Utils.abs(groupId.hashCode) % N``."""
    value = java_string_hash(group_id)
    value = 0 if value == -(1 << 31) else abs(value)
    return value % partition_count
