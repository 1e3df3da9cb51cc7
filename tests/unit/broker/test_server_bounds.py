"""Frames are assembled from the bytes received, never allocated at their announced size, and the
request memory pool (``queued.max.request.bytes``) makes a receive wait until it fits."""

from __future__ import annotations

import struct
import tracemalloc

import trio
import trio.testing

from impl.broker._framing import FrameDecoder
from impl.broker.server import MemoryPool

ANNOUNCED = 100 * 1024 * 1024


def _receive_directly(decoder: FrameDecoder, stream: bytes, index: int,
                      most: int) -> list[memoryview]:
    """Feed ``stream[index:]`` into the decoder's direct buffers, at most ``most`` bytes a
    receive, as a socket's ``recv_into`` would; the buffers it was given, in order."""
    given: list[memoryview] = []
    while (direct := decoder.direct_buffer()) is not None:
        given.append(direct)
        count = min(len(direct), most, len(stream) - index)
        direct[:count] = stream[index : index + count]
        decoder.direct_filled(count)
        index += count
    return given


def test_a_partial_frame_costs_what_was_received_not_what_was_announced() -> None:
    """Issue 15, defect 5: 20 connections announcing 100 MB and sending 1 MiB took 2 GB."""
    decoder = FrameDecoder(ANNOUNCED)
    tracemalloc.start()
    try:
        decoder.feed(struct.pack(">i", ANNOUNCED) + b"x" * 4096)
        assert decoder.next_frame() is None
        sent = 4096
        while sent < (1 << 20):
            direct = decoder.direct_buffer()
            assert direct is not None
            count = min(len(direct), 65536, (1 << 20) - sent)
            direct[:count] = b"y" * count
            decoder.direct_filled(count)
            sent += count
            assert decoder.next_frame() is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert decoder.buffered_bytes == 1 << 20
    assert peak < 8 * 1024 * 1024, peak
    assert decoder.missing_bytes == ANNOUNCED - (1 << 20)


def test_a_large_frame_still_arrives_whole() -> None:
    payload = bytes(range(256)) * 12_000
    decoder = FrameDecoder(ANNOUNCED)
    stream = struct.pack(">i", len(payload)) + payload
    decoder.feed(stream[:100])
    assert decoder.next_frame() is None
    _receive_directly(decoder, stream, 100, 70_000)
    frame = decoder.next_frame()
    assert isinstance(frame, memoryview)
    assert bytes(frame) == payload


def test_memory_pool_waits_until_the_bytes_fit() -> None:
    order: list[str] = []

    async def main() -> None:
        pool = MemoryPool(1000)
        await pool.acquire(800)

        async def second() -> None:
            await pool.acquire(400)
            order.append("second admitted")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(second)
            await trio.testing.wait_all_tasks_blocked()
            order.append("first releases")
            pool.release(800)
        assert pool.used == 400
        pool.release(400)
        await pool.acquire(5000)  # larger than the pool: admitted when the pool is empty
        assert pool.used == 5000

    trio.run(main)
    assert order == ["first releases", "second admitted"]


def test_a_large_frame_is_received_in_place_in_few_buffers() -> None:
    """Each received byte is copied once (by the receive, into the frame's own buffer): the
    frame handed over is the buffer the last receive wrote into, and an 8 MiB frame received
    64 KiB at a time needs at most four buffers (1, 2, 4, 8 MiB). Grown an eighth at a time
    (Python's own steps, or a copy per receive), a 1 MB frame was copied about eight times."""
    payload = bytes(range(256)) * (8 * 4096)
    decoder = FrameDecoder(ANNOUNCED)
    stream = struct.pack(">i", len(payload)) + payload
    decoder.feed(stream[:4096])
    assert decoder.next_frame() is None
    given = _receive_directly(decoder, stream, 4096, 65536)
    buffers: list[int] = []
    for direct in given:
        if not buffers or buffers[-1] != id(direct.obj):
            buffers.append(id(direct.obj))
    last = given[-1] if given else None
    frame = decoder.next_frame()
    assert isinstance(frame, memoryview)
    assert last is not None
    assert bytes(frame) == payload
    assert frame.obj is last.obj
    assert len(buffers) <= 4, len(buffers)


def test_an_answer_up_to_what_was_asked_for_is_received_into_one_buffer() -> None:
    """A follower's 4 MB fetch answer: one buffer of the frame's size, allocated when the size
    arrives, filled by receives as large as the kernel gives (not 1 MiB, 2 MiB, 4 MiB with the
    bytes copied at each step); a larger announcement still grows with the bytes received."""
    payload = bytes(range(256)) * (16 * 1024)
    decoder = FrameDecoder(ANNOUNCED, preallocate_bytes=8 << 20)
    stream = struct.pack(">i", len(payload)) + payload
    decoder.feed(stream[:4])
    assert decoder.next_frame() is None
    given = _receive_directly(decoder, stream, 4, 3 << 20)
    buffers = {id(direct.obj) for direct in given}
    sizes = [len(direct) for direct in given]
    frame = decoder.next_frame()
    assert isinstance(frame, memoryview)
    assert bytes(frame) == payload
    assert len(buffers) == 1
    assert sizes == [len(payload), len(payload) - (3 << 20)]

    lying = FrameDecoder(ANNOUNCED, preallocate_bytes=8 << 20)
    lying.feed(struct.pack(">i", ANNOUNCED))
    assert lying.next_frame() is None
    direct = lying.direct_buffer()
    assert direct is not None
    assert len(direct.obj) == 8 << 20  # type: ignore[arg-type]
