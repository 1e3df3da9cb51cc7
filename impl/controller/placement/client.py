"""A small blocking client for CreateReplicaPlacement, for ``logproof placement``.

This is a shell (it opens sockets), kept apart from the sans-IO codec in ``_protocol``. It
asks the broker's ApiVersions (v0, which every broker answers) first, so a broker without
CreateReplicaPlacement gives a clear error instead of a dropped connection, then sends the
request and waits for the response with the same correlation id. Every read is bounded by the
socket timeout and by the size limit of a response frame.
"""

from __future__ import annotations

import io
import socket
import struct
from collections.abc import Callable, Mapping, Sequence

from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.api_versions.v0.response import ApiVersionsResponse
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from impl import api_keys

from ._protocol import (
    CREATE_REPLICA_PLACEMENT_API_KEY,
    CREATE_REPLICA_PLACEMENT_MAX_VERSION,
    CREATE_REPLICA_PLACEMENT_MIN_VERSION,
    CreateReplicaPlacementRequest,
    CreateReplicaPlacementResponse,
    PlacementWireError,
    parse_response_payload,
    request_frame,
)
from ._types import TopicPartition

#: Kafka's ApiVersions api key.
API_VERSIONS_API_KEY = api_keys.API_VERSIONS
#: The largest response frame the client accepts.
RESPONSE_FRAME_MAX_BYTES = 64 * 1024 * 1024
CLIENT_ID = "logproof-placement"
_SIZE = struct.Struct(">i")


class PlacementClientError(Exception):
    """The broker cannot be reached, does not support the API, or answered malformed bytes."""


#: Opens a connected socket to ``(host, port)`` with a timeout: plain TCP by default; the
#: command line passes one that speaks TLS and SASL (``--command-config``), and raises
#: :class:`PlacementClientError` when they are refused.
Connector = Callable[[str, int, float], socket.socket]


def plain_connection(host: str, port: int, timeout_seconds: float) -> socket.socket:
    """A plain TCP connection (PLAINTEXT listeners)."""
    return socket.create_connection((host, port), timeout=timeout_seconds)


def parse_bootstrap_server(bootstrap_server: str) -> tuple[str, int]:
    """``HOST:PORT`` (the first of a comma-separated list) → ``(host, port)``.

    Args:
        bootstrap_server: ``host:port[,host:port…]``; IPv6 hosts in brackets.

    Returns:
        The host and port of the first server.

    Raises:
        PlacementClientError: not of the form host:port with a port in 1..65535.
    """
    first = bootstrap_server.split(",", maxsplit=1)[0].strip()
    host, separator, port_text = first.rpartition(":")
    host = host.strip("[]")
    if not separator or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise PlacementClientError(f"bootstrap server {bootstrap_server!r} is not HOST:PORT")
    return host, int(port_text)


def _receive_exactly(sock: socket.socket, count: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < count:
        chunk = sock.recv(count - len(chunks))
        if not chunk:
            raise PlacementClientError("the broker closed the connection")
        chunks += chunk
    return bytes(chunks)


def _receive_frame(sock: socket.socket) -> bytes:
    (size,) = _SIZE.unpack(_receive_exactly(sock, _SIZE.size))
    if not 0 <= size <= RESPONSE_FRAME_MAX_BYTES:
        raise PlacementClientError(f"the broker sent a frame of {size} bytes")
    return _receive_exactly(sock, size)


def _api_versions_frame(correlation_id: int) -> bytes:
    buffer = io.BytesIO()
    entity_writer(RequestHeaderV1)(
        buffer,
        RequestHeaderV1(
            request_api_key=i16(API_VERSIONS_API_KEY),
            request_api_version=i16(0),
            correlation_id=i32(correlation_id),
            client_id=CLIENT_ID,
        ),
    )
    entity_writer(ApiVersionsRequest)(buffer, ApiVersionsRequest())
    payload = buffer.getvalue()
    return _SIZE.pack(len(payload)) + payload


def check_supported(sock: socket.socket, correlation_id: int = 1) -> None:
    """Ask ApiVersions v0 and check the broker supports CreateReplicaPlacement v0.

    Args:
        sock: a connected socket.
        correlation_id: the ApiVersions request's correlation id.

    Raises:
        PlacementClientError: the broker does not advertise the API or answers malformed bytes.
    """
    sock.sendall(_api_versions_frame(correlation_id))
    payload = _receive_frame(sock)
    try:
        header, offset = entity_reader(ResponseHeaderV0)(payload, 0)
        response, _ = entity_reader(ApiVersionsResponse)(payload, offset)
    except Exception as error:  # kio raises several types for malformed bytes
        raise PlacementClientError(f"malformed ApiVersions response: {error}") from error
    if header.correlation_id != correlation_id:
        raise PlacementClientError("ApiVersions response with the wrong correlation id")
    if response.error_code != 0:
        raise PlacementClientError(f"ApiVersions failed with error code {response.error_code}")
    for api in response.api_keys:
        if api.api_key == CREATE_REPLICA_PLACEMENT_API_KEY:
            if not (
                api.min_version
                <= CREATE_REPLICA_PLACEMENT_MAX_VERSION
                <= api.max_version
            ):
                raise PlacementClientError(
                    f"the broker supports CreateReplicaPlacement versions "
                    f"{api.min_version}..{api.max_version}, this client "
                    f"{CREATE_REPLICA_PLACEMENT_MIN_VERSION}..{CREATE_REPLICA_PLACEMENT_MAX_VERSION}"
                )
            return
    raise PlacementClientError(
        f"the broker does not support CreateReplicaPlacement (api key "
        f"{CREATE_REPLICA_PLACEMENT_API_KEY})"
    )


def exchange(
    sock: socket.socket, request: CreateReplicaPlacementRequest, correlation_id: int = 2
) -> CreateReplicaPlacementResponse:
    """Check support, send ``request`` and read its response on a connected socket.

    Args:
        sock: a connected socket (with a timeout set).
        request: the request.
        correlation_id: the request's correlation id.

    Returns:
        The broker's response (which may carry an error code).

    Raises:
        PlacementClientError: unsupported, closed, timed out or malformed.
    """
    return exchange_many(sock, [request], correlation_id)[0]


def exchange_many(
    sock: socket.socket,
    requests: Sequence[CreateReplicaPlacementRequest],
    first_correlation_id: int = 2,
) -> list[CreateReplicaPlacementResponse]:
    """Check support once, then send each request and read its response, in order.

    Args:
        sock: a connected socket (with a timeout set).
        requests: the requests.
        first_correlation_id: the first request's correlation id (ApiVersions uses the one
            before); each next request uses the next id.

    Returns:
        The broker's responses, one per request (each may carry an error code).

    Raises:
        PlacementClientError: unsupported, closed, timed out or malformed.
    """
    responses: list[CreateReplicaPlacementResponse] = []
    try:
        check_supported(sock, first_correlation_id - 1)
        for offset, request in enumerate(requests):
            correlation_id = first_correlation_id + offset
            sock.sendall(request_frame(request, correlation_id, CLIENT_ID))
            answered_id, response = parse_response_payload(_receive_frame(sock))
            if answered_id != correlation_id:
                raise PlacementClientError(
                    f"response correlation id {answered_id}, expected {correlation_id}"
                )
            responses.append(response)
    except PlacementWireError as error:
        raise PlacementClientError(str(error)) from error
    except TimeoutError as error:
        raise PlacementClientError("the broker did not answer in time") from error
    return responses


def request_replica_placement(
    bootstrap_server: str, request: CreateReplicaPlacementRequest, timeout_seconds: float = 30.0,
    *, connect: Connector = plain_connection,
) -> CreateReplicaPlacementResponse:
    """Ask a running broker for a replica placement.

    Args:
        bootstrap_server: ``host:port`` of a broker.
        request: the request.
        timeout_seconds: the connect and read timeout.
        connect: opens the connection (TLS and SASL from ``--command-config``).

    Returns:
        The broker's response (which may carry an error code).

    Raises:
        PlacementClientError: the broker cannot be reached, does not support the API, or
            answered malformed bytes.
    """
    host, port = parse_bootstrap_server(bootstrap_server)
    try:
        with connect(host, port, timeout_seconds) as sock:
            return exchange(sock, request)
    except OSError as error:
        raise PlacementClientError(f"cannot reach {host}:{port}: {error}") from error


def request_reassignment_proposal(
    bootstrap_server: str,
    current_assignment: Mapping[TopicPartition, Sequence[int]],
    *,
    broker_ids: Sequence[int] = (),
    force_simple_placement: bool = False,
    timeout_seconds: float = 30.0,
    connect: Connector = plain_connection,
) -> dict[TopicPartition, list[int]]:
    """A new assignment for the given partitions, suggested by the cluster's placer.

    KIP-879 *Admin API*: the reassignment command asks the brokers (their configured
    ``broker.replica.placer`` and their racks) instead of computing locally. One request per
    topic, topics in name order, with the topic's partition count and the replication factor
    of its lowest partition; the i-th lowest partition gets the i-th placement.

    Args:
        bootstrap_server: ``host:port`` of a broker.
        current_assignment: the partitions to move, with their current replicas.
        broker_ids: the brokers to move to (``--broker-list``); empty for all.
        force_simple_placement: Kafka's rack-unaware assignment (``--disable-rack-aware``).
        timeout_seconds: the connect and read timeout.
        connect: opens the connection (TLS and SASL from ``--command-config``).

    Returns:
        The proposed replicas of every given partition, leader first.

    Raises:
        PlacementClientError: the broker cannot be reached or refuses a topic (the message
            names the topic and the broker's reason).
    """
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in current_assignment:
        by_topic.setdefault(tp.topic, []).append(tp)
    topics = sorted(by_topic)
    requests = []
    for topic in topics:
        partitions = sorted(by_topic[topic])
        requests.append(
            CreateReplicaPlacementRequest(
                partition_count=len(partitions),
                replication_factor=len(current_assignment[partitions[0]]),
                force_simple_placement=force_simple_placement,
                broker_ids=tuple(broker_ids),
                timeout_ms=int(timeout_seconds * 1000),
            )
        )
    host, port = parse_bootstrap_server(bootstrap_server)
    try:
        with connect(host, port, timeout_seconds) as sock:
            responses = exchange_many(sock, requests)
    except OSError as error:
        raise PlacementClientError(f"cannot reach {host}:{port}: {error}") from error
    proposal: dict[TopicPartition, list[int]] = {}
    for topic, response in zip(topics, responses, strict=True):
        if response.error_code != 0:
            raise PlacementClientError(
                f"the cluster refused topic {topic}: {response.error_message or 'no message'} "
                f"(error code {response.error_code})"
            )
        partitions = sorted(by_topic[topic])
        if len(response.placements) != len(partitions):
            raise PlacementClientError(
                f"the cluster placed {len(response.placements)} partitions of topic {topic}, "
                f"asked for {len(partitions)}"
            )
        for tp, placement in zip(partitions, response.placements, strict=True):
            proposal[tp] = list(placement.replicas)
    return proposal
