"""A large request's body is received whole over a real socket (``impl/broker/server.py``,
``_Connection._receive_body``): after a large frame the server takes the next size prefix alone,
then the body in one receive once the kernel holds it all (``SO_RCVLOWAT``), and puts the
low-water mark back before it waits for anything else, so that a small request after a large
one is answered as soon as it arrives. Whatever the sender's pieces, every request arrives
intact and in order."""

from __future__ import annotations

import datetime
import random
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest
import trio
import trio.testing

from impl.broker import api_versions
from impl.broker._codec import DecodedRequest, encode_request, load_request_schema
from impl.broker._framing import WHOLE_BODY_MAX_BYTES, FrameDecoder
from impl.broker._kio_build import build
from impl.broker._low_water import RECEIVE_LOW_WATER_BYTES, ReceiveLowWater
from impl.broker.server import ConnectionInfo, Response, Server

#: a request body this large is received whole (at least 64 KiB, at most 1 MiB)
LARGE_RECORDS = 200_000


def _produce(correlation_id: int, records: bytes) -> bytes:
    """A Produce v3 of one partition carrying ``records`` (the handler never validates them)."""
    body: dict[str, object] = {
        "transactional_id": None, "acks": 1, "timeout": datetime.timedelta(seconds=30),
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}],
    }
    return encode_request(api_versions.PRODUCE, 3, correlation_id, "c",
                          build(load_request_schema(api_versions.PRODUCE, 3), body))


def _api_versions(correlation_id: int) -> bytes:
    return encode_request(api_versions.API_VERSIONS, 0, correlation_id, "c",
                          build(load_request_schema(api_versions.API_VERSIONS, 0), {}))


@dataclass
class _Handler:
    """Answers every request at once; keeps each Produce's records."""

    handled: list[int] = field(default_factory=list)
    records: dict[int, bytes] = field(default_factory=dict)

    async def __call__(self, request: DecodedRequest, info: ConnectionInfo) -> Response:
        correlation_id = request.head.correlation_id
        self.handled.append(correlation_id)
        if request.api_key == api_versions.PRODUCE:
            (topic,) = request.body.topic_data
            (partition,) = topic.partition_data
            self.records[correlation_id] = bytes(partition.records or b"")
        return struct.pack(">ii", 4, correlation_id)


@dataclass
class _Client:
    stream: trio.SocketStream
    answers: list[int] = field(default_factory=list)
    #: set once this many answers have arrived
    expected: int = 0
    all_answered: trio.Event = field(default_factory=trio.Event)

    async def read(self) -> None:
        data = b""
        while True:
            try:
                chunk = await self.stream.receive_some(1 << 16)
            except trio.ClosedResourceError:
                return
            if not chunk:
                return
            data += chunk
            while len(data) >= 8:
                self.answers.append(struct.unpack_from(">i", data, 4)[0])
                data = data[8:]
                if len(self.answers) == self.expected:
                    self.all_answered.set()


@asynccontextmanager
async def _connected(handler: _Handler) -> AsyncIterator[_Client]:
    server = Server(handler, 1 << 24)
    async with trio.open_nursery() as nursery:
        (port,) = await nursery.start(server.serve, [("127.0.0.1", 0)])
        client = _Client(await trio.open_tcp_stream("127.0.0.1", port))
        nursery.start_soon(client.read)
        try:
            yield client
        finally:
            with trio.CancelScope(shield=True):
                await client.stream.aclose()
            nursery.cancel_scope.cancel()


async def _settled() -> None:
    await trio.testing.wait_all_tasks_blocked(cushion=0.02)


def _run(test: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        with trio.fail_after(20):
            await test()

    trio.run(bounded)


@pytest.fixture
def bodies(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Each body handed to :meth:`FrameDecoder.feed_body`: ``(its length, the frame's)``."""
    seen: list[tuple[int, int]] = []
    original = FrameDecoder.feed_body

    def spy(decoder: FrameDecoder, body: bytes) -> None:
        seen.append((len(body), decoder.whole_body_size() or -1))
        original(decoder, body)

    monkeypatch.setattr(FrameDecoder, "feed_body", spy)
    return seen


@pytest.fixture
def marks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Each change the server asks of a socket's low-water mark: ``("wait", missing bytes)``
    before it waits for a body, ``("done", 1)`` when the body is there, each with the mark's
    value after the call."""
    seen: list[tuple[str, int]] = []
    wait, done = ReceiveLowWater.before_receive, ReceiveLowWater.frame_done

    def before_receive(low_water: ReceiveLowWater, missing: int) -> None:
        wait(low_water, missing)
        seen.append(("wait", low_water.value))

    def frame_done(low_water: ReceiveLowWater) -> None:
        done(low_water)
        seen.append(("done", low_water.value))

    monkeypatch.setattr(ReceiveLowWater, "before_receive", before_receive)
    monkeypatch.setattr(ReceiveLowWater, "frame_done", frame_done)
    return seen


def test_a_body_received_whole_is_waited_for_whole() -> None:
    """The low-water mark asked for covers every body offered whole (a lower one would wake
    the connection before the body is all there, and the frame would be assembled in pieces)."""
    assert WHOLE_BODY_MAX_BYTES <= RECEIVE_LOW_WATER_BYTES


def test_a_body_that_arrives_late_is_received_whole_and_a_small_request_follows_at_once(
    bodies: list[tuple[int, int]], marks: list[tuple[str, int]],
) -> None:
    handler = _Handler()
    first = bytes(range(256)) * (LARGE_RECORDS // 256)
    second = bytes(reversed(first))
    late = _produce(2, second)

    async def main() -> None:
        async with _connected(handler) as client:
            await client.stream.send_all(_produce(1, first))
            await _settled()
            assert client.answers == [1]
            # the next size prefix and half the body: the server waits for the whole body
            await client.stream.send_all(late[: len(late) // 2])
            await _settled()
            assert handler.handled == [1]
            # (the server waits with the mark at the body's size: woken once, not per piece;
            # a loaded kernel may wake it early all the same, and it then puts the mark back)
            assert marks[-1:] in ([("wait", len(late) - 4)], [("done", 1)]), marks
            assert ("wait", len(late) - 4) in marks, marks
            await client.stream.send_all(late[len(late) // 2 :])
            await _settled()
            assert client.answers == [1, 2]
            assert handler.records[2] == second
            # one receive offered the whole body; what it got is the kernel's choice: Linux
            # wakes a reader early, below SO_RCVLOWAT, when the receive window or memory runs
            # short (seen once under a loaded CI run: 99,985 of 199,974 bytes), and the frame is
            # then assembled as before
            assert marks[-1:] == [("done", 1)], marks
            assert [size for _, size in bodies] == [len(late) - 4]
            assert len(late) // 2 - 4 <= bodies[0][0] <= bodies[0][1], bodies
            # a small request after a large one wakes the server at once (the low-water mark
            # is back to one byte; left at the large body's size, this waits to the bound)
            await client.stream.send_all(_api_versions(3))
            await _settled()
            assert client.answers == [1, 2, 3]

    _run(main)


def test_requests_of_any_size_in_any_pieces_arrive_intact_and_in_order(
    bodies: list[tuple[int, int]],
) -> None:
    """Small and large requests (the large beyond what is received whole, too) sent in random
    pieces, some after a pause: every one handled once, in order, with its own bytes."""
    rng = random.Random(20261129)
    handler = _Handler()
    requests: list[bytes] = []
    expected: dict[int, bytes] = {}
    for correlation_id in range(1, 25):
        kind = rng.choice(("small", "large", "large", "huge"))
        if kind == "small":
            requests.append(_api_versions(correlation_id))
            continue
        size = LARGE_RECORDS if kind == "large" else 1_200_000
        records = rng.randbytes(rng.randrange(size // 2, size))
        expected[correlation_id] = records
        requests.append(_produce(correlation_id, records))
    stream = b"".join(requests)

    async def main() -> None:
        async with _connected(handler) as client:
            client.expected = len(requests)
            position = 0
            while position < len(stream):
                piece = rng.choice((3, 4, 5, 1000, 70_000, 300_000, 2_000_000))
                await client.stream.send_all(stream[position : position + piece])
                position += piece
                if rng.random() < 0.3:
                    await _settled()
            await client.all_answered.wait()
            assert client.answers == list(range(1, 25))

    _run(main)
    assert handler.handled == list(range(1, 25))
    assert {cid: handler.records[cid] for cid in expected} == expected
    assert any(length == size for length, size in bodies)  # some received whole
