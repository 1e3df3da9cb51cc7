"""CreateReplicaPlacement (KIP-879 "Protocol"): hand-written codec and the pure handler.

kio has no schema for this API, so the codec is written here in Kafka's binary conventions,
**flexible** as the KIP asks (``"flexibleVersions": "0+"``): compact arrays and strings
(unsigned-varint length + 1), a tagged-field section after the body and after each struct,
request header v2 and response header v1.

Api key: the KIP asked for 68, which Apache Kafka has since given to ConsumerGroupHeartbeat
(KIP-848); Kafka assigns keys densely from 0 upward (87 is the highest kio 0.6.2 knows), so the
project takes :data:`CREATE_REPLICA_PLACEMENT_API_KEY` = 10879 ("KIP-879" in a range Kafka will
not reach), still a valid int16 that every client's ApiVersions parser reads.

Version 0, request (the KIP's fields, in order)::

    NumPartitions int32, ReplicationFactor int16, ForceSimplePlacement bool,
    NodeId compact [int32] (empty: every broker), TimeoutMs int32,
    tagged fields { 0: StartPartitionId int32 (default 0) }

Version 0, response (the KIP's ReplicaPlacement, preceded by the project's additions: Kafka's
usual throttle time and an error code and message, without which a broker could not say why
it refused)::

    ThrottleTimeMs int32, ErrorCode int16, ErrorMessage compact nullable string,
    ReplicaPlacement compact [ PartitionId int32, Replicas compact [int32], tagged fields ],
    tagged fields
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from impl import api_keys
from impl.ports import Rng

from ._driver import place_replicas
from ._errors import PlacementError
from ._types import ClusterView, PlacementSpec, ReplicaPlacer

__sans_io__ = True

#: The project's api key for CreateReplicaPlacement (the KIP's 68 is ConsumerGroupHeartbeat).
CREATE_REPLICA_PLACEMENT_API_KEY = api_keys.CREATE_REPLICA_PLACEMENT
#: The versions a broker advertises in ApiVersions.
CREATE_REPLICA_PLACEMENT_MIN_VERSION = 0
CREATE_REPLICA_PLACEMENT_MAX_VERSION = 0
#: Flexible from version 0: request header v2, response header v1.
CREATE_REPLICA_PLACEMENT_REQUEST_HEADER_VERSION = 2
CREATE_REPLICA_PLACEMENT_RESPONSE_HEADER_VERSION = 1
#: The KIP's default ``timeoutMs``.
TIMEOUT_MS_DEFAULT = 60_000
#: Kafka's NONE and INVALID_REQUEST error codes.
ERROR_NONE = 0
INVALID_REQUEST = 42

_TAG_START_PARTITION_ID = 0
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
#: A bound on arrays read from the wire, so a hostile length cannot allocate without limit.
_ARRAY_LENGTH_MAX = 1 << 20


class PlacementWireError(ValueError):
    """Bytes that are not a valid CreateReplicaPlacement message (the sender's fault)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateReplicaPlacementRequest:
    """The request (KIP-879 ``CreateReplicaPlacementRequest``).

    Attributes:
        partition_count: ``NumPartitions``.
        replication_factor: ``ReplicationFactor`` (int16).
        force_simple_placement: ``ForceSimplePlacement``.
        broker_ids: ``NodeId``; empty means every usable broker.
        timeout_ms: ``timeoutMs``; placement is computed at once, so it never elapses.
        start_partition_id: tagged field 0, the first partition's id (default 0).
    """

    partition_count: int
    replication_factor: int
    force_simple_placement: bool = False
    broker_ids: tuple[int, ...] = ()
    timeout_ms: int = TIMEOUT_MS_DEFAULT
    start_partition_id: int = 0

    def placement_spec(self) -> PlacementSpec:
        """The placement this request asks for."""
        return PlacementSpec(
            partition_count=self.partition_count,
            replication_factor=self.replication_factor,
            start_partition_id=self.start_partition_id,
            force_simple_placement=self.force_simple_placement,
        )


@dataclass(frozen=True, slots=True)
class PartitionPlacement:
    """One ``ReplicaPlacement`` entry: a partition and its replicas, leader first."""

    partition_id: int
    replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateReplicaPlacementResponse:
    """The response (KIP-879 ``CreateReplicaPlacementResponse`` plus an error).

    Attributes:
        placements: ``ReplicaPlacement``, in partition order; empty on error.
        error_code: ``ErrorCode``, 0 on success.
        error_message: ``ErrorMessage``, the one-line reason on error.
        throttle_time_ms: ``ThrottleTimeMs``.
    """

    placements: tuple[PartitionPlacement, ...] = ()
    error_code: int = ERROR_NONE
    error_message: str | None = None
    throttle_time_ms: int = 0

    def assignment(self) -> list[list[int]]:
        """The placements as KIP-879's list of replica lists."""
        return [list(placement.replicas) for placement in self.placements]


def handle_create_replica_placement(
    request: CreateReplicaPlacementRequest,
    cluster_view: ClusterView,
    placer: ReplicaPlacer,
    rng: Rng,
) -> CreateReplicaPlacementResponse:
    """Answer a CreateReplicaPlacement request from the broker's view of the cluster.

    Args:
        request: the decoded request.
        cluster_view: the usable brokers with their racks (the broker's metadata).
        placer: the configured ``broker.replica.placer``.
        rng: the randomness of the rack-unaware fallback.

    Returns:
        The placement, or an error code and message when it cannot be placed.
    """
    try:
        assignment = place_replicas(
            placer,
            request.placement_spec(),
            cluster_view,
            list(request.broker_ids) if request.broker_ids else None,
            rng=rng,
        )
    except PlacementError as error:
        return CreateReplicaPlacementResponse(error_code=error.error_code, error_message=str(error))
    return CreateReplicaPlacementResponse(
        placements=tuple(
            PartitionPlacement(request.start_partition_id + index, tuple(replicas))
            for index, replicas in enumerate(assignment)
        )
    )


# --- writing -----------------------------------------------------------------------------


def _unsigned_varint(value: int) -> bytes:
    assert value >= 0
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _int16(value: int) -> bytes:
    return _INT16.pack(value)


def _int32(value: int) -> bytes:
    return _INT32.pack(value)


def _compact_int32_array(values: Sequence[int]) -> bytes:
    return _unsigned_varint(len(values) + 1) + b"".join(_int32(v) for v in values)


def _compact_nullable_string(value: str | None) -> bytes:
    if value is None:
        return _unsigned_varint(0)
    encoded = value.encode("utf-8")
    return _unsigned_varint(len(encoded) + 1) + encoded


def _check_range(name: str, value: int, bits: int) -> None:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not low <= value <= high:
        raise PlacementWireError(f"{name}={value} does not fit in an int{bits}")


def encode_create_replica_placement_request(request: CreateReplicaPlacementRequest) -> bytes:
    """The request body (after the header), version 0.

    Args:
        request: the request.

    Returns:
        The encoded body.

    Raises:
        PlacementWireError: a value does not fit its wire type.
    """
    _check_range("NumPartitions", request.partition_count, 32)
    _check_range("ReplicationFactor", request.replication_factor, 16)
    _check_range("timeoutMs", request.timeout_ms, 32)
    _check_range("StartPartitionId", request.start_partition_id, 32)
    for broker_id in request.broker_ids:
        _check_range("NodeId", broker_id, 32)
    tagged = b""
    tag_count = 0
    if request.start_partition_id != 0:
        tag_count = 1
        tagged = (
            _unsigned_varint(_TAG_START_PARTITION_ID)
            + _unsigned_varint(4)
            + _int32(request.start_partition_id)
        )
    return b"".join(
        [
            _int32(request.partition_count),
            _int16(request.replication_factor),
            b"\x01" if request.force_simple_placement else b"\x00",
            _compact_int32_array(request.broker_ids),
            _int32(request.timeout_ms),
            _unsigned_varint(tag_count),
            tagged,
        ]
    )


def encode_create_replica_placement_response(response: CreateReplicaPlacementResponse) -> bytes:
    """The response body (after the header), version 0.

    Args:
        response: the response.

    Returns:
        The encoded body.
    """
    parts = [
        _int32(response.throttle_time_ms),
        _int16(response.error_code),
        _compact_nullable_string(response.error_message),
        _unsigned_varint(len(response.placements) + 1),
    ]
    for placement in response.placements:
        parts.append(_int32(placement.partition_id))
        parts.append(_compact_int32_array(placement.replicas))
        parts.append(_unsigned_varint(0))
    parts.append(_unsigned_varint(0))
    return b"".join(parts)


def encode_request_header(correlation_id: int, client_id: str | None) -> bytes:
    """Request header v2 for CreateReplicaPlacement v0 (client id is a *nullable string*,
    not compact, as in every Kafka request header, then an empty tagged-field section).

    Args:
        correlation_id: echoed by the response.
        client_id: the client's id, or ``None``.

    Returns:
        The encoded header.
    """
    if client_id is None:
        client = _int16(-1)
    else:
        encoded = client_id.encode("utf-8")
        client = _int16(len(encoded)) + encoded
    return b"".join(
        [
            _int16(CREATE_REPLICA_PLACEMENT_API_KEY),
            _int16(CREATE_REPLICA_PLACEMENT_MAX_VERSION),
            _int32(correlation_id),
            client,
            _unsigned_varint(0),
        ]
    )


def request_frame(
    request: CreateReplicaPlacementRequest, correlation_id: int, client_id: str | None
) -> bytes:
    """The whole request as sent on a connection: int32 size, header v2, body.

    Args:
        request: the request.
        correlation_id: the correlation id.
        client_id: the client id.

    Returns:
        The size-prefixed frame.
    """
    payload = encode_request_header(correlation_id, client_id) + (
        encode_create_replica_placement_request(request)
    )
    return _int32(len(payload)) + payload


def response_frame(correlation_id: int, response: CreateReplicaPlacementResponse) -> bytes:
    """The whole response as sent on a connection: int32 size, header v1, body.

    Args:
        correlation_id: the request's correlation id.
        response: the response.

    Returns:
        The size-prefixed frame.
    """
    payload = (
        _int32(correlation_id)
        + _unsigned_varint(0)
        + encode_create_replica_placement_response(response)
    )
    return _int32(len(payload)) + payload


# --- reading -----------------------------------------------------------------------------


class _Reader:
    """Reads Kafka primitives from a buffer, every read bounds-checked."""

    def __init__(self, data: bytes, what: str) -> None:
        self._data = data
        self._offset = 0
        self._what = what

    def take(self, count: int) -> bytes:
        end = self._offset + count
        if count < 0 or end > len(self._data):
            raise PlacementWireError(f"{self._what} truncated at byte {self._offset}")
        chunk = self._data[self._offset : end]
        self._offset = end
        return chunk

    def int16(self) -> int:
        value: int = _INT16.unpack(self.take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _INT32.unpack(self.take(4))[0]
        return value

    def boolean(self) -> bool:
        byte = self.take(1)[0]
        if byte not in (0, 1):
            raise PlacementWireError(f"{self._what}: boolean byte {byte} is neither 0 nor 1")
        return byte == 1

    def unsigned_varint(self) -> int:
        value = 0
        for shift in range(0, 35, 7):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
        raise PlacementWireError(f"{self._what}: unsigned varint longer than 5 bytes")

    def compact_length(self, name: str, nullable: bool = False) -> int | None:
        encoded = self.unsigned_varint()
        if encoded == 0:
            if nullable:
                return None
            raise PlacementWireError(f"{self._what}: {name} is null")
        if encoded - 1 > _ARRAY_LENGTH_MAX:
            raise PlacementWireError(f"{self._what}: {name} length {encoded - 1} too large")
        return encoded - 1

    def compact_int32_array(self, name: str) -> tuple[int, ...]:
        length = self.compact_length(name)
        assert length is not None
        return tuple(self.int32() for _ in range(length))

    def compact_nullable_string(self, name: str) -> str | None:
        length = self.compact_length(name, nullable=True)
        if length is None:
            return None
        try:
            return self.take(length).decode("utf-8")
        except UnicodeDecodeError as error:
            raise PlacementWireError(f"{self._what}: {name} is not UTF-8") from error

    def tagged_fields(self) -> dict[int, bytes]:
        fields: dict[int, bytes] = {}
        previous = -1
        for _ in range(self.unsigned_varint()):
            tag = self.unsigned_varint()
            if tag <= previous:
                raise PlacementWireError(f"{self._what}: tagged fields out of order")
            previous = tag
            fields[tag] = self.take(self.unsigned_varint())
        return fields

    def end(self) -> None:
        if self._offset != len(self._data):
            raise PlacementWireError(
                f"{self._what}: {len(self._data) - self._offset} bytes after the end"
            )

    @property
    def offset(self) -> int:
        return self._offset


def _check_version(api_version: int) -> None:
    if not (
        CREATE_REPLICA_PLACEMENT_MIN_VERSION
        <= api_version
        <= CREATE_REPLICA_PLACEMENT_MAX_VERSION
    ):
        raise PlacementWireError(f"CreateReplicaPlacement version {api_version} is not supported")


def decode_create_replica_placement_request(
    body: bytes, api_version: int = 0
) -> CreateReplicaPlacementRequest:
    """Decode a request body (the bytes after the request header).

    Args:
        body: the body.
        api_version: the header's api version.

    Returns:
        The request.

    Raises:
        PlacementWireError: an unsupported version, truncated or trailing bytes, a bad
            boolean, a null array, or a malformed tagged field.
    """
    _check_version(api_version)
    reader = _Reader(body, "CreateReplicaPlacement request")
    partition_count = reader.int32()
    replication_factor = reader.int16()
    force_simple_placement = reader.boolean()
    broker_ids = reader.compact_int32_array("NodeId")
    timeout_ms = reader.int32()
    tagged = reader.tagged_fields()
    reader.end()
    start_partition_id = 0
    raw_start = tagged.get(_TAG_START_PARTITION_ID)
    if raw_start is not None:
        if len(raw_start) != 4:
            raise PlacementWireError(
                "CreateReplicaPlacement request: StartPartitionId is not an int32"
            )
        start_partition_id = _INT32.unpack(raw_start)[0]
    return CreateReplicaPlacementRequest(
        partition_count=partition_count,
        replication_factor=replication_factor,
        force_simple_placement=force_simple_placement,
        broker_ids=broker_ids,
        timeout_ms=timeout_ms,
        start_partition_id=start_partition_id,
    )


def decode_create_replica_placement_response(
    body: bytes, api_version: int = 0
) -> CreateReplicaPlacementResponse:
    """Decode a response body (the bytes after the response header).

    Args:
        body: the body.
        api_version: the version the request was sent with.

    Returns:
        The response.

    Raises:
        PlacementWireError: an unsupported version or malformed bytes.
    """
    _check_version(api_version)
    reader = _Reader(body, "CreateReplicaPlacement response")
    throttle_time_ms = reader.int32()
    error_code = reader.int16()
    error_message = reader.compact_nullable_string("ErrorMessage")
    count = reader.compact_length("ReplicaPlacement")
    assert count is not None
    placements = []
    for _ in range(count):
        partition_id = reader.int32()
        replicas = reader.compact_int32_array("Replicas")
        reader.tagged_fields()
        placements.append(PartitionPlacement(partition_id, replicas))
    reader.tagged_fields()
    reader.end()
    return CreateReplicaPlacementResponse(
        placements=tuple(placements),
        error_code=error_code,
        error_message=error_message,
        throttle_time_ms=throttle_time_ms,
    )


def parse_response_payload(payload: bytes) -> tuple[int, CreateReplicaPlacementResponse]:
    """Split a response payload (a frame without its size) into correlation id and response.

    Args:
        payload: response header v1 followed by the body.

    Returns:
        The correlation id and the decoded response.

    Raises:
        PlacementWireError: malformed bytes.
    """
    reader = _Reader(payload, "CreateReplicaPlacement response header")
    correlation_id = reader.int32()
    reader.tagged_fields()
    return correlation_id, decode_create_replica_placement_response(payload[reader.offset :])


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """A CreateReplicaPlacement request header (v2)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def parse_request_payload(payload: bytes) -> tuple[RequestHeader, CreateReplicaPlacementRequest]:
    """Split a request payload (a frame without its size) into header v2 and request.

    Args:
        payload: request header v2 followed by the body.

    Returns:
        The header and the decoded request.

    Raises:
        PlacementWireError: another api key, an unsupported version, or malformed bytes.
    """
    reader = _Reader(payload, "CreateReplicaPlacement request header")
    api_key = reader.int16()
    api_version = reader.int16()
    correlation_id = reader.int32()
    length = reader.int16()
    client_id: str | None = None
    if length >= 0:
        try:
            client_id = reader.take(length).decode("utf-8")
        except UnicodeDecodeError as error:
            raise PlacementWireError("CreateReplicaPlacement request: bad client id") from error
    elif length != -1:
        raise PlacementWireError(f"CreateReplicaPlacement request: client id length {length}")
    reader.tagged_fields()
    if api_key != CREATE_REPLICA_PLACEMENT_API_KEY:
        raise PlacementWireError(f"api key {api_key} is not CreateReplicaPlacement")
    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    return header, decode_create_replica_placement_request(payload[reader.offset :], api_version)


def answer_create_replica_placement(
    payload: bytes, cluster_view: ClusterView, placer: ReplicaPlacer, rng: Rng
) -> bytes:
    """The whole exchange as one pure function: request payload in, response frame out.

    Args:
        payload: the request frame without its size prefix (header v2 and body).
        cluster_view: the broker's usable brokers with racks and current assignments.
        placer: the configured ``broker.replica.placer``.
        rng: the randomness of the rack-unaware fallback.

    Returns:
        The size-prefixed response frame (header v1 and body), an error response when the
        placement is refused.

    Raises:
        PlacementWireError: the request bytes are malformed (the broker closes the connection,
            as Kafka does for a request it cannot parse).
    """
    header, request = parse_request_payload(payload)
    response = handle_create_replica_placement(request, cluster_view, placer, rng)
    return response_frame(header.correlation_id, response)
