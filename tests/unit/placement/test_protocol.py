"""CreateReplicaPlacement: round trips, kio reading its header, the handler, the client."""

from __future__ import annotations

import io
import socket
import struct
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.api_versions.v0.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from impl.controller.placement import (
    CREATE_REPLICA_PLACEMENT_API_KEY,
    CREATE_REPLICA_PLACEMENT_MAX_VERSION,
    CREATE_REPLICA_PLACEMENT_MIN_VERSION,
    INVALID_REPLICATION_FACTOR,
    ClusterView,
    CreateReplicaPlacementRequest,
    CreateReplicaPlacementResponse,
    MultiLevelRackPlacer,
    PartitionPlacement,
    PlacementWireError,
    answer_create_replica_placement,
    decode_create_replica_placement_request,
    decode_create_replica_placement_response,
    encode_create_replica_placement_request,
    encode_create_replica_placement_response,
    handle_create_replica_placement,
    parse_request_payload,
    parse_response_payload,
    placement_spread_holds,
    request_frame,
    response_frame,
)
from impl.controller.placement.client import (
    PlacementClientError,
    exchange,
    parse_bootstrap_server,
)
from impl.ports import SeededRng

VIEW = ClusterView.of({1: "/DC1/R1", 2: "/DC1/R2", 3: "/DC2/R1", 4: "/DC2/R2", 5: "/DC3/R1"})

int32s = st.integers(-(2**31), 2**31 - 1)
requests = st.builds(
    CreateReplicaPlacementRequest,
    partition_count=int32s,
    replication_factor=st.integers(-(2**15), 2**15 - 1),
    force_simple_placement=st.booleans(),
    broker_ids=st.lists(int32s, max_size=8).map(tuple),
    timeout_ms=int32s,
    start_partition_id=int32s,
)
responses = st.builds(
    CreateReplicaPlacementResponse,
    placements=st.lists(
        st.builds(PartitionPlacement, int32s, st.lists(int32s, max_size=5).map(tuple)),
        max_size=6,
    ).map(tuple),
    error_code=st.integers(-(2**15), 2**15 - 1),
    error_message=st.none() | st.text(max_size=40),
    throttle_time_ms=int32s,
)


def test_api_key_is_outside_kafkas_assigned_range() -> None:
    assert CREATE_REPLICA_PLACEMENT_API_KEY not in api_key_map
    assert max(api_key_map) < CREATE_REPLICA_PLACEMENT_API_KEY
    assert CREATE_REPLICA_PLACEMENT_API_KEY < 2**15
    assert api_key_map[68] == "consumer_group_heartbeat"
    assert CREATE_REPLICA_PLACEMENT_MIN_VERSION == CREATE_REPLICA_PLACEMENT_MAX_VERSION == 0


@settings(max_examples=200, derandomize=True, deadline=None)
@given(request=requests)
def test_request_round_trips(request: CreateReplicaPlacementRequest) -> None:
    body = encode_create_replica_placement_request(request)
    assert decode_create_replica_placement_request(body) == request


@settings(max_examples=200, derandomize=True, deadline=None)
@given(response=responses)
def test_response_round_trips(response: CreateReplicaPlacementResponse) -> None:
    body = encode_create_replica_placement_response(response)
    assert decode_create_replica_placement_response(body) == response
    correlation_id, decoded = parse_response_payload(response_frame(7, response)[4:])
    assert (correlation_id, decoded) == (7, response)


def test_request_bytes_follow_kafkas_flexible_conventions() -> None:
    request = CreateReplicaPlacementRequest(
        partition_count=3, replication_factor=2, broker_ids=(1, 2), timeout_ms=500
    )
    body = encode_create_replica_placement_request(request)
    expected = (
        struct.pack(">ih", 3, 2)
        + b"\x00"  # ForceSimplePlacement
        + b"\x03"  # compact array: length + 1
        + struct.pack(">ii", 1, 2)
        + struct.pack(">i", 500)
        + b"\x00"  # no tagged fields
    )
    assert body == expected
    tagged = encode_create_replica_placement_request(
        CreateReplicaPlacementRequest(partition_count=1, replication_factor=1, start_partition_id=9)
    )
    assert tagged.endswith(b"\x01\x00\x04" + struct.pack(">i", 9))


def test_kio_reads_the_request_header() -> None:
    request = CreateReplicaPlacementRequest(partition_count=4, replication_factor=3)
    frame = request_frame(request, correlation_id=41, client_id="tool")
    (size,) = struct.unpack(">i", frame[:4])
    assert size == len(frame) - 4
    header, offset = entity_reader(RequestHeaderV2)(frame[4:], 0)
    assert header.request_api_key == CREATE_REPLICA_PLACEMENT_API_KEY
    assert header.request_api_version == 0
    assert header.correlation_id == 41
    assert header.client_id == "tool"
    assert decode_create_replica_placement_request(frame[4 + offset :]) == request
    # The fields common to every header version read the same with the v1 reader too.
    v1, _ = entity_reader(RequestHeaderV1)(frame[4:], 0)
    assert (v1.request_api_key, v1.correlation_id) == (CREATE_REPLICA_PLACEMENT_API_KEY, 41)


def test_kio_writes_a_response_header_we_read() -> None:
    buffer = io.BytesIO()
    entity_writer(ResponseHeaderV1)(buffer, ResponseHeaderV1(correlation_id=i32(5)))
    response = CreateReplicaPlacementResponse(placements=(PartitionPlacement(0, (1, 2)),))
    payload = buffer.getvalue() + encode_create_replica_placement_response(response)
    assert parse_response_payload(payload) == (5, response)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "truncated"),
        (struct.pack(">ih", 1, 1) + b"\x02", "neither 0 nor 1"),
        (struct.pack(">ih", 1, 1) + b"\x00\x00", "NodeId is null"),
        (struct.pack(">ih", 1, 1) + b"\x00\x01" + struct.pack(">i", 1) + b"\x00\xff", "after"),
        (struct.pack(">ih", 1, 1) + b"\x00\x01" + struct.pack(">i", 1) + b"\x01\x00\x02\x00\x00",
         "not an int32"),
    ],
)
def test_malformed_requests_are_rejected(body: bytes, message: str) -> None:
    with pytest.raises(PlacementWireError, match=message):
        decode_create_replica_placement_request(body)


def test_unsupported_version_is_rejected() -> None:
    body = encode_create_replica_placement_request(
        CreateReplicaPlacementRequest(partition_count=1, replication_factor=1)
    )
    with pytest.raises(PlacementWireError, match="version 1 is not supported"):
        decode_create_replica_placement_request(body, api_version=1)


def test_handler_places_and_reports_errors() -> None:
    placer = MultiLevelRackPlacer(SeededRng(3))
    ok = handle_create_replica_placement(
        CreateReplicaPlacementRequest(partition_count=5, replication_factor=3),
        VIEW,
        placer,
        SeededRng(3),
    )
    assert ok.error_code == 0
    assert [p.partition_id for p in ok.placements] == [0, 1, 2, 3, 4]
    assert placement_spread_holds(ok.assignment(), VIEW)
    refused = handle_create_replica_placement(
        CreateReplicaPlacementRequest(partition_count=1, replication_factor=9),
        VIEW,
        placer,
        SeededRng(3),
    )
    assert refused.error_code == INVALID_REPLICATION_FACTOR
    assert refused.placements == ()
    assert refused.error_message is not None
    assert "replication factor 9" in refused.error_message
    subset = handle_create_replica_placement(
        CreateReplicaPlacementRequest(
            partition_count=2, replication_factor=2, broker_ids=(1, 3), start_partition_id=4
        ),
        VIEW,
        placer,
        SeededRng(3),
    )
    assert [p.partition_id for p in subset.placements] == [4, 5]
    assert {b for p in subset.placements for b in p.replicas} == {1, 3}


def serve_once(sock: socket.socket, advertise: bool, requests: int = 1) -> None:
    """A minimal broker: ApiVersions v0, then ``requests`` CreateReplicaPlacement requests."""

    def read_frame() -> bytes:
        data = b""
        while len(data) < 4:
            data += sock.recv(4 - len(data))
        (size,) = struct.unpack(">i", data)
        body = b""
        while len(body) < size:
            body += sock.recv(size - len(body))
        return body

    payload = read_frame()
    header, offset = entity_reader(RequestHeaderV1)(payload, 0)
    entity_reader(ApiVersionsRequest)(payload, offset)
    keys = [ApiVersion(api_key=i16(18), min_version=i16(0), max_version=i16(0))]
    if advertise:
        keys.append(
            ApiVersion(
                api_key=i16(CREATE_REPLICA_PLACEMENT_API_KEY),
                min_version=i16(CREATE_REPLICA_PLACEMENT_MIN_VERSION),
                max_version=i16(CREATE_REPLICA_PLACEMENT_MAX_VERSION),
            )
        )
    buffer = io.BytesIO()
    entity_writer(ResponseHeaderV0)(buffer, ResponseHeaderV0(correlation_id=header.correlation_id))
    entity_writer(ApiVersionsResponse)(
        buffer, ApiVersionsResponse(error_code=ErrorCode.none, api_keys=tuple(keys))
    )
    sock.sendall(struct.pack(">i", len(buffer.getvalue())) + buffer.getvalue())
    if not advertise:
        sock.close()
        return
    for _ in range(requests):
        payload = read_frame()
        sock.sendall(
            answer_create_replica_placement(
                payload, VIEW, MultiLevelRackPlacer(SeededRng(1)), SeededRng(1)
            )
        )
    sock.close()


@pytest.mark.parametrize("advertise", [True, False])
def test_client_talks_to_a_broker(advertise: bool) -> None:
    client_end, server_end = socket.socketpair()
    client_end.settimeout(10)
    server = threading.Thread(target=serve_once, args=(server_end, advertise))
    server.start()
    try:
        request = CreateReplicaPlacementRequest(partition_count=3, replication_factor=3)
        if advertise:
            response = exchange(client_end, request)
            assert response.error_code == 0
            assert len(response.placements) == 3
            assert placement_spread_holds(response.assignment(), VIEW)
        else:
            with pytest.raises(PlacementClientError, match="does not support"):
                exchange(client_end, request)
    finally:
        client_end.close()
        server.join(timeout=10)
    assert not server.is_alive()


@pytest.mark.parametrize("text", ["localhost", "host:", ":9092", "h:0", "h:70000", "h:x"])
def test_bad_bootstrap_servers(text: str) -> None:
    with pytest.raises(PlacementClientError, match="not HOST:PORT"):
        parse_bootstrap_server(text)


def test_bootstrap_server_forms() -> None:
    assert parse_bootstrap_server("localhost:9092") == ("localhost", 9092)
    assert parse_bootstrap_server("[::1]:9093,other:1") == ("::1", 9093)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(data=st.binary(max_size=64))
def test_decoders_reject_garbage_with_one_error_type(data: bytes) -> None:
    # Invariant: any byte string either decodes and re-encodes to itself, or raises
    # PlacementWireError; nothing else escapes the decoders.
    for decode, encode in (
        (decode_create_replica_placement_request, encode_create_replica_placement_request),
        (decode_create_replica_placement_response, encode_create_replica_placement_response),
    ):
        try:
            decoded = decode(data)
        except PlacementWireError:
            continue
        again = decode(encode(decoded))  # type: ignore[arg-type]
        assert again == decoded


@settings(max_examples=100, derandomize=True, deadline=None)
@given(request=requests, cut=st.integers(0, 200))
def test_truncated_requests_are_rejected(request: CreateReplicaPlacementRequest, cut: int) -> None:
    body = encode_create_replica_placement_request(request)
    if cut < len(body):
        with pytest.raises(PlacementWireError):
            decode_create_replica_placement_request(body[:cut])


def test_answer_is_a_pure_frame_to_frame_function() -> None:
    request = CreateReplicaPlacementRequest(partition_count=2, replication_factor=2)
    payload = request_frame(request, correlation_id=9, client_id=None)[4:]
    header, decoded = parse_request_payload(payload)
    assert (header.correlation_id, header.client_id, decoded) == (9, None, request)
    placer = MultiLevelRackPlacer(SeededRng(4))
    frame = answer_create_replica_placement(payload, VIEW, placer, SeededRng(4))
    (size,) = struct.unpack(">i", frame[:4])
    assert size == len(frame) - 4
    correlation_id, response = parse_response_payload(frame[4:])
    assert correlation_id == 9
    expected = handle_create_replica_placement(
        request, VIEW, MultiLevelRackPlacer(SeededRng(4)), SeededRng(4)
    )
    assert response == expected
    # kio's v1 response header reader reads our header too.
    header_v1, _ = entity_reader(ResponseHeaderV1)(frame[4:], 0)
    assert header_v1.correlation_id == 9


def test_answer_rejects_another_api_key() -> None:
    payload = struct.pack(">hhih", 3, 0, 1, -1) + b"\x00"
    with pytest.raises(PlacementWireError, match="api key 3 is not CreateReplicaPlacement"):
        answer_create_replica_placement(payload, VIEW, MultiLevelRackPlacer(SeededRng(0)),
                                        SeededRng(0))


def test_exchange_many_on_one_connection() -> None:
    from impl.controller.placement.client import exchange_many

    client_end, server_end = socket.socketpair()
    client_end.settimeout(10)
    server = threading.Thread(target=serve_once, args=(server_end, True, 3))
    server.start()
    try:
        responses = exchange_many(
            client_end,
            [
                CreateReplicaPlacementRequest(partition_count=2, replication_factor=3),
                CreateReplicaPlacementRequest(partition_count=1, replication_factor=9),
                CreateReplicaPlacementRequest(
                    partition_count=1, replication_factor=1, start_partition_id=5
                ),
            ],
        )
    finally:
        client_end.close()
        server.join(timeout=10)
    assert [len(r.placements) for r in responses] == [2, 0, 1]
    assert responses[1].error_code == INVALID_REPLICATION_FACTOR
    assert responses[2].placements[0].partition_id == 5
