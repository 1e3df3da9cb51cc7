"""Produce requests are pipelined on a connection (``impl/broker/server.py``): a Produce whose
answer waits for its acks (a :class:`DeferredResponse`) does not hold back the next Produce, the
answers still leave in request order, any other request is handled only after every earlier
deferred answer is finished, a failed deferred answer closes the connection after the answers
before it, and a graceful stop waits for deferred answers."""

from __future__ import annotations

import datetime
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import trio
import trio.testing

from impl.broker import api_versions
from impl.broker._codec import DecodedRequest, encode_request, load_request_schema
from impl.broker._kio_build import build
from impl.broker.server import ConnectionInfo, DeferredResponse, Response, Server


def _produce(correlation_id: int) -> bytes:
    body: dict[str, object] = {"transactional_id": None, "acks": -1,
                               "timeout": datetime.timedelta(seconds=30),
                               "topic_data": []}
    return encode_request(api_versions.PRODUCE, 3, correlation_id, "c",
                          build(load_request_schema(api_versions.PRODUCE, 3), body))


def _api_versions(correlation_id: int) -> bytes:
    return encode_request(api_versions.API_VERSIONS, 0, correlation_id, "c",
                          build(load_request_schema(api_versions.API_VERSIONS, 0), {}))


def _answer(correlation_id: int) -> bytes:
    return struct.pack(">ii", 4, correlation_id)


@dataclass
class _Handler:
    """Answers ApiVersions at once and defers every Produce until the test releases it (or
    answers it at once when listed in ``immediate``; fails it when listed in ``failing``)."""

    handled: list[int] = field(default_factory=list)
    releases: dict[int, trio.Event] = field(default_factory=dict)
    immediate: set[int] = field(default_factory=set)
    failing: set[int] = field(default_factory=set)

    async def __call__(self, request: DecodedRequest, info: ConnectionInfo
                       ) -> Response | DeferredResponse | None:
        correlation_id = request.head.correlation_id
        self.handled.append(correlation_id)
        if request.api_key != api_versions.PRODUCE or correlation_id in self.immediate:
            return _answer(correlation_id)
        release = self.releases[correlation_id] = trio.Event()

        async def finish() -> Response:
            await release.wait()
            if correlation_id in self.failing:
                raise RuntimeError("planted failure of a deferred answer")
            return _answer(correlation_id)

        return DeferredResponse(finish)


@dataclass
class _Client:
    stream: trio.SocketStream
    answers: list[int] = field(default_factory=list)
    closed: bool = False

    async def read(self) -> None:
        data = b""
        while True:
            try:
                chunk = await self.stream.receive_some(1 << 16)
            except trio.ClosedResourceError:  # the test is over: it closed the stream
                return
            if not chunk:
                self.closed = True
                return
            data += chunk
            while len(data) >= 8:
                (correlation_id,) = struct.unpack_from(">i", data, 4)
                self.answers.append(correlation_id)
                data = data[8:]


@asynccontextmanager
async def _connected(handler: _Handler) -> AsyncIterator[tuple[Server, _Client]]:
    server = Server(handler, 1 << 20)
    async with trio.open_nursery() as nursery:
        (port,) = await nursery.start(server.serve, [("127.0.0.1", 0)])
        client = _Client(await trio.open_tcp_stream("127.0.0.1", port))
        nursery.start_soon(client.read)
        try:
            yield server, client
        finally:
            with trio.CancelScope(shield=True):
                await client.stream.aclose()
            nursery.cancel_scope.cancel()


async def _settled() -> None:
    """Every task blocked: the server has done all it can with what it was sent."""
    await trio.testing.wait_all_tasks_blocked(cushion=0.01)


def _run(test: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        with trio.fail_after(10):
            await test()

    trio.run(bounded)


def test_a_produce_is_handled_while_an_earlier_answer_waits_and_answers_keep_their_order(
) -> None:
    handler = _Handler()

    async def main() -> None:
        async with _connected(handler) as (_, client):
            await client.stream.send_all(_produce(1) + _produce(2) + _produce(3))
            await _settled()
            assert handler.handled == [1, 2, 3]
            assert client.answers == []
            handler.releases[3].set()
            handler.releases[2].set()
            await _settled()
            assert client.answers == []  # the first answer is not finished: nothing leaves
            handler.releases[1].set()
            await _settled()
            assert client.answers == [1, 2, 3]

    _run(main)


def test_any_other_request_waits_for_the_deferred_answers_before_it() -> None:
    handler = _Handler()

    async def main() -> None:
        async with _connected(handler) as (_, client):
            await client.stream.send_all(_produce(1) + _api_versions(2) + _produce(3))
            await _settled()
            assert handler.handled == [1]  # ApiVersions waits: Kafka would answer 1 first
            handler.releases[1].set()
            await _settled()
            assert handler.handled == [1, 2, 3]
            assert client.answers == [1, 2]
            handler.releases[3].set()
            await _settled()
            assert client.answers == [1, 2, 3]

    _run(main)


def test_a_failed_deferred_answer_closes_the_connection_after_the_answers_before_it() -> None:
    handler = _Handler(immediate={1}, failing={2})

    async def main() -> None:
        async with _connected(handler) as (server, client):
            await client.stream.send_all(_produce(1) + _produce(2) + _produce(3))
            await _settled()
            assert handler.handled == [1, 2, 3]
            handler.releases[3].set()
            handler.releases[2].set()
            await _settled()
            assert client.answers == [1]
            assert client.closed
            assert server.internal_errors == 1

    _run(main)


def test_a_graceful_stop_waits_for_deferred_answers() -> None:
    handler = _Handler()

    async def main() -> None:
        async with _connected(handler) as (server, client):
            await client.stream.send_all(_produce(1))
            await _settled()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(server.drain, 5.0)
                await _settled()
                assert client.answers == []
                assert not client.closed
                handler.releases[1].set()
            await _settled()
            assert client.answers == [1]
            assert client.closed

    _run(main)
