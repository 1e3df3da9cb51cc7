"""The inter-broker client: controller requests to brokers over Kafka's wire protocol.

The controller's trio service calls :meth:`InterBrokerClient.send` with a request dataclass; the
client keeps one connection per broker, sends the request as LeaderAndIsr v4, StopReplica v3 or
UpdateMetadata v6 (:mod:`impl.broker.controller_wire`), and returns the broker's answer as a
``ControllerResponse``. Requests to one broker go one at a time, in order, as Kafka's
``ControllerChannelManager`` sends them. A broken connection is reopened once per request; a
broker that cannot be reached raises :class:`BrokerUnreachableError` and the controller decides.
A request naming more than :data:`ENCODE_OFF_LOOP_PARTITIONS` partitions is built and encoded in
a worker thread, so that the event loop goes on serving clients meanwhile.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Final

import trio

from impl.controller.requests import ControllerRequest, ControllerResponse, StopReplicaRequest

from . import controller_wire
from ._codec import MalformedRequestError, decode_response, encode_request
from ._framing import FrameDecoder, FrameError

log = logging.getLogger(__name__)

RESPONSE_MAX_BYTES: Final = 64 * 1024 * 1024
REQUEST_TIMEOUT_SECONDS: Final = 30.0
CONNECT_TIMEOUT_SECONDS: Final = 5.0
#: A request naming more partitions is built and encoded off the event loop: a LeaderAndIsr or
#: UpdateMetadata of 20,000 partitions took 0.7 s of it on a 2-core machine, and the structured
#: wire fuzz's probe client, asking ApiVersions every 50 ms, waited that long after a
#: CreatePartitions of 32,767.
ENCODE_OFF_LOOP_PARTITIONS: Final = 2_000


def partitions_named(request: ControllerRequest) -> int:
    """How many partitions ``request`` names."""
    if isinstance(request, StopReplicaRequest):
        return len(request.partitions)
    return len(request.partition_states)  # (LeaderAndIsr, UpdateMetadata)


def encode(request: ControllerRequest, correlation_id: int, client_id: str) -> bytes:
    """``request``'s frame on the wire (with its size prefix)."""
    api_key, version = controller_wire.api_of(request)
    body = controller_wire.request_to_wire(request)
    return encode_request(api_key, version, correlation_id, client_id, body)


#: Opens a connection to a broker (TLS and SASL on a secured inter-broker listener).
Connector = Callable[[str, int], Awaitable[trio.abc.Stream]]


class BrokerUnreachableError(Exception):
    """The broker could not be reached or answered garbage (the peer's fault)."""


class _BrokerConnection:
    def __init__(self, host: str, port: int, connect: Connector) -> None:
        self.host = host
        self.port = port
        self.connect = connect
        self.stream: trio.abc.Stream | None = None
        self.decoder = FrameDecoder(RESPONSE_MAX_BYTES)
        self.lock = trio.Lock()

    async def close(self) -> None:
        if self.stream is not None:
            stream, self.stream = self.stream, None
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def roundtrip(self, frame: bytes, correlation_id: int) -> bytes | memoryview:
        if self.stream is None:
            with trio.fail_after(CONNECT_TIMEOUT_SECONDS):
                self.stream = await self.connect(self.host, self.port)
            self.decoder = FrameDecoder(RESPONSE_MAX_BYTES)
        stream = self.stream
        with trio.fail_after(REQUEST_TIMEOUT_SECONDS):
            await stream.send_all(frame)
            while True:
                payload = self.decoder.next_frame()
                if payload is not None:
                    break
                data = await stream.receive_some(65536)
                if not data:
                    raise trio.BrokenResourceError("connection closed by the broker")
                self.decoder.feed(data if isinstance(data, bytes) else bytes(data))
        if len(payload) < 4 or int.from_bytes(payload[:4], "big", signed=True) != correlation_id:
            raise MalformedRequestError("response with an unexpected correlation id")
        return payload


class InterBrokerClient:
    """Sends controller requests to brokers.

    Args:
        client_id: the request header's client id (e.g. ``controller-1``).
        endpoint_of: broker id → (host, port), or None if unknown.
        connect: opens a connection (default plain TCP; the broker passes its inter-broker
            listener's TLS and SASL client).
    """

    def __init__(
        self, client_id: str, endpoint_of: Callable[[int], tuple[str, int] | None],
        connect: Connector = trio.open_tcp_stream,
    ) -> None:
        self._client_id = client_id
        self._connect = connect
        self._endpoint_of = endpoint_of
        self._connections: dict[int, _BrokerConnection] = {}
        self._correlation = itertools.count(1)

    async def send(self, broker_id: int, request: ControllerRequest) -> ControllerResponse:
        """Send one request and return the broker's answer.

        Raises:
            BrokerUnreachableError: unknown endpoint, connection failure twice, timeout, or a
                malformed answer.
        """
        api_key, version = controller_wire.api_of(request)
        large = partitions_named(request) > ENCODE_OFF_LOOP_PARTITIONS
        for attempt in range(2):
            connection = await self._connection(broker_id)
            correlation_id = next(self._correlation) & 0x7FFFFFFF
            if large:
                frame = await trio.to_thread.run_sync(encode, request, correlation_id,
                                                      self._client_id)
            else:
                frame = encode(request, correlation_id, self._client_id)
            async with connection.lock:
                try:
                    payload = await connection.roundtrip(frame, correlation_id)
                except (OSError, trio.BrokenResourceError, trio.ClosedResourceError,
                        trio.TooSlowError, FrameError, MalformedRequestError) as error:
                    await connection.close()
                    self._connections.pop(broker_id, None)
                    if attempt == 1:
                        raise BrokerUnreachableError(
                            f"broker {broker_id} at {connection.host}:{connection.port}: {error}"
                        ) from error
                    continue
            try:
                _, response = decode_response(api_key, version, payload)
            except MalformedRequestError as error:
                raise BrokerUnreachableError(f"broker {broker_id}: {error}") from error
            return controller_wire.response_from_wire(api_key, response)
        raise AssertionError("unreachable: the loop returns or raises")

    async def _connection(self, broker_id: int) -> _BrokerConnection:
        endpoint = self._endpoint_of(broker_id)
        if endpoint is None:
            raise BrokerUnreachableError(f"no endpoint known for broker {broker_id}")
        connection = self._connections.get(broker_id)
        if connection is not None and (connection.host, connection.port) != endpoint:
            await connection.close()
            connection = None
        if connection is None:
            connection = _BrokerConnection(endpoint[0], endpoint[1], self._connect)
            self._connections[broker_id] = connection
        return connection

    async def aclose(self) -> None:
        """Close every connection."""
        for connection in list(self._connections.values()):
            await connection.close()
        self._connections.clear()

