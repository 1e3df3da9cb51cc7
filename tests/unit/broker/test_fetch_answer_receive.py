"""A follower's connection to a leader receives a large fetch answer with ``SO_RCVLOWAT`` set
to the missing bytes (at most :data:`RECEIVE_LOW_WATER_BYTES`), so that it wakes a few times
per answer instead of once per piece the kernel has queued, and sets it back to 1 before the
next answer, which may be a few bytes (left at 1 MiB, that answer would never wake it)."""

from __future__ import annotations

import socket
import struct

import trio
import trio.testing

from impl.broker._low_water import RECEIVE_LOW_WATER_BYTES
from impl.broker.replica_fetcher import _Connection

LARGE = 3 * 1024 * 1024 + 123


def _low_water(connection: _Connection) -> int:
    assert isinstance(connection.stream, trio.SocketStream)
    return _socket_low_water(connection.stream)


def _socket_low_water(stream: trio.SocketStream) -> int:
    value: int = stream.socket.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT)
    return value


def test_a_large_answer_sets_the_low_water_mark_and_the_next_small_one_still_arrives() -> None:
    payload = bytes(range(256)) * (LARGE // 256) + b"x" * (LARGE % 256)

    async def main() -> None:
        half_sent = trio.Event()
        go_on = trio.Event()

        async def leader(stream: trio.SocketStream) -> None:
            for answer in (payload, b"small"):
                request = b""
                while len(request) < 4 or len(request) < 4 + struct.unpack(">i", request[:4])[0]:
                    request += await stream.receive_some(65536)
                framed = struct.pack(">i", len(answer)) + answer
                if len(answer) > RECEIVE_LOW_WATER_BYTES:
                    await stream.send_all(framed[: len(framed) // 2])
                    half_sent.set()
                    await go_on.wait()
                    await stream.send_all(framed[len(framed) // 2 :])
                else:
                    await stream.send_all(framed)

        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, leader, listeners)
            connection = _Connection("127.0.0.1", port, "test")
            request = struct.pack(">i", 3) + b"req"
            with trio.fail_after(10):
                async with trio.open_nursery() as exchange:
                    received: list[bytes] = []

                    async def ask() -> None:
                        received.append(bytes(await connection._exchange(request)))

                    exchange.start_soon(ask)
                    await half_sent.wait()
                    # the first half is queued (loopback): once every task is blocked, the
                    # exchange waits in a receive of the answer's second half
                    await trio.testing.wait_all_tasks_blocked(cushion=0.05)
                    assert _low_water(connection) == RECEIVE_LOW_WATER_BYTES
                    go_on.set()
                assert received == [payload]
                assert _low_water(connection) == 1
                assert bytes(await connection._exchange(request)) == b"small"
            await connection.close()
            nursery.cancel_scope.cancel()

    trio.run(main)
