"""A Fetch response's record slices reach the client byte for byte: a small slice read and sent
with the framing around it, a large one with ``os.sendfile``; a slice whose file shrank below it
closes the connection instead of sending a short response."""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path
from typing import Any

import pytest
import trio

from impl.broker._codec import DecodedRequest, encode_request, load_request_schema
from impl.broker._kio_build import build
from impl.broker.server import SMALL_SLICE_BYTES, ConnectionInfo, PiecesResponse, Server
from impl.storage.os_disk import OsFileSlice

SMALL = SMALL_SLICE_BYTES // 4
LARGE = SMALL_SLICE_BYTES * 3


def _request() -> bytes:
    return encode_request(18, 0, 1, "t", build(load_request_schema(18, 0), {}))


def _serve_once(pieces: Any, client: Any) -> Any:
    """Serves one connection whose every request is answered with ``pieces()``; runs
    ``client(port)`` in a thread and returns what it returned."""

    async def handler(request: DecodedRequest, info: ConnectionInfo) -> PiecesResponse:
        return PiecesResponse(pieces())

    async def main() -> Any:
        server = Server(handler, 1 << 20)
        async with trio.open_nursery() as nursery:
            (port,) = await nursery.start(server.serve, [("127.0.0.1", 0)])
            result = await trio.to_thread.run_sync(client, port)
            await server.drain(5)
            nursery.cancel_scope.cancel()
        return result

    return trio.run(main)


def _exchange(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_request())
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(1 << 20)
            if not chunk:
                return data
            data += chunk
        return data


@pytest.fixture
def segment(tmp_path: Path) -> Path:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(range(256)) * ((SMALL + LARGE) // 256 + 1))
    return path


def _slice(path: Path, position: int, size: int) -> OsFileSlice:
    return OsFileSlice(os.open(path, os.O_RDONLY), position, size)


def test_small_and_large_slices_arrive_byte_for_byte(segment: Path) -> None:
    content = segment.read_bytes()

    def pieces() -> list[Any]:
        body = b"head" + b"\x00" * 4 + b"mid" + b"tail"
        size = len(body) + SMALL + LARGE
        return [struct.pack(">i", size), b"head", b"\x00" * 4, _slice(segment, 3, SMALL),
                b"mid", _slice(segment, 100, LARGE), b"tail"]

    data = _serve_once(pieces, _exchange)
    expected = (b"head" + b"\x00" * 4 + content[3:3 + SMALL] + b"mid"
                + content[100:100 + LARGE] + b"tail")
    assert data == struct.pack(">i", len(expected)) + expected


def test_a_small_slice_past_the_end_of_its_file_closes_the_connection(segment: Path) -> None:
    size = segment.stat().st_size

    def pieces() -> list[Any]:
        return [struct.pack(">i", 4 + SMALL), b"head", _slice(segment, size - SMALL // 2, SMALL)]

    # closed before a byte of the response: never one shorter than it announced
    assert _serve_once(pieces, _exchange) == b""
