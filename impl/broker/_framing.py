"""Kafka framing: a stream of ``int32 size`` + ``size`` bytes frames, with a size limit.

Why sans-IO: the trio connection feeds whatever ``receive_some`` returned and takes out whole
frames; the fuzz test feeds the same bytes all at once and byte by byte and checks that both give
the same frames and the same error (STYLE.md item 12).

A negative size or a size above ``socket.request.max.bytes`` is a client error Kafka answers by
closing the connection (``InvalidReceiveException``); :class:`FrameError` carries that decision.

Nothing is allocated for the size a peer announces: a frame grows with the bytes actually
received (a large one in a buffer the caller receives into directly, which at most doubles when
it is full), so twenty connections announcing 100 MB frames and sending 1 MiB each cost about
20-40 MiB, not 2 GB. Each received byte is copied once, by the kernel into that buffer; a
buffer grown by Python's default steps (an eighth at a time) copied a 1 MB frame about eight
times over. A side that reads answers to its own requests (a follower's fetches) may allocate
up to what it asked for at once (``preallocate_bytes``): a 4 MB fetch answer assembled from a
1 MiB buffer doubling was zero-filled 7 MB and copied 3 MB over (9 % of a follower's busy time).

A frame of at most :data:`WHOLE_BODY_MAX_BYTES` may even arrive as one ``bytes`` that nobody
copies: when its size prefix alone has been received (:meth:`FrameDecoder.whole_body_size`), the
caller may receive the body in one piece and hand it over (:meth:`FrameDecoder.feed_body`). A
buffer allocated for it is zero-filled and its bytes copied out again by the request decoder (a
produce's records become ``bytes``); on a broker taking 1 MB produce requests, the zero-fill and
the copies of a first receive that ran past the size prefix were 7-8 % of its CPU. After a large
frame, :attr:`FrameDecoder.prefix_first` asks for the next size prefix alone, so that the next
large frame starts at a receive.
"""

from __future__ import annotations

import struct
from typing import Final

__sans_io__ = True

_SIZE: Final = struct.Struct(">i")
#: Frames at least this large are assembled in their own buffer, received into directly.
LARGE_FRAME_BYTES: Final = 64 * 1024
#: A large frame's first buffer (at most), and the most one receive may fill.
DIRECT_CHUNK_BYTES: Final = 1 << 20
#: The largest frame body :meth:`FrameDecoder.whole_body_size` offers to receive in one piece:
#: what a large frame's first buffer may take at once (no more memory for an announced size).
WHOLE_BODY_MAX_BYTES: Final = DIRECT_CHUNK_BYTES


class FrameError(Exception):
    """The peer sent a size prefix the broker refuses; the connection must be closed."""


class FrameDecoder:
    """Incremental decoder: :meth:`feed` bytes, then :meth:`next_frame` until it returns None.

    Args:
        max_frame_bytes: the largest frame body accepted (``socket.request.max.bytes``).
        preallocate_bytes: a large frame up to this size gets its whole buffer when its size
            prefix arrives, and one receive may fill that much (default: a chunk,
            :data:`DIRECT_CHUNK_BYTES`; larger only where the peer answers what was asked).
    """

    def __init__(self, max_frame_bytes: int, *,
                 preallocate_bytes: int = DIRECT_CHUNK_BYTES) -> None:
        assert max_frame_bytes > 0
        assert preallocate_bytes >= DIRECT_CHUNK_BYTES
        self._max_frame_bytes = max_frame_bytes
        self._chunk = preallocate_bytes
        #: the setting a refused size is named after in :class:`FrameError`
        self._limit_key = "socket.request.max.bytes"
        self._buffer = bytearray()
        self._failed: FrameError | None = None
        #: a large frame being assembled in place (its first ``_large_filled`` bytes received;
        #: it doubles, up to the frame's size, when full), and the frame's size
        self._large: bytearray | None = None
        self._large_size = 0
        self._large_filled = 0
        #: a whole frame body handed over by :meth:`feed_body`, the next frame
        self._whole: bytes | None = None
        #: whether the last frame returned was large (the next one likely is too)
        self._last_large = False

    def limit(self, max_frame_bytes: int, key: str) -> None:
        """Refuse frames above ``max_frame_bytes`` from the next size prefix read on (a SASL
        listener lowers the limit to ``sasl.server.max.receive.size`` until the client has
        authenticated); a frame whose size was already accepted is not checked again.

        Args:
            max_frame_bytes: the largest frame body accepted.
            key: the setting named in the error.
        """
        assert max_frame_bytes > 0
        self._max_frame_bytes = max_frame_bytes
        self._limit_key = key

    @property
    def buffered_bytes(self) -> int:
        """Bytes received and not yet returned as a frame."""
        whole = 0 if self._whole is None else len(self._whole)
        return len(self._buffer) + self._large_filled + whole

    @property
    def frame_started(self) -> bool:
        """Whether part of a frame (even of its size prefix) has been received."""
        return self.buffered_bytes > 0

    @property
    def missing_bytes(self) -> int | None:
        """Bytes still needed to complete the frame being received (None: size not yet known)."""
        if self._whole is not None:
            return 0
        if self._large is not None:
            return self._large_size - self._large_filled
        if len(self._buffer) < _SIZE.size:
            return None
        size: int = _SIZE.unpack_from(self._buffer, 0)[0]
        return max(0, _SIZE.size + size - len(self._buffer))

    def feed(self, data: bytes) -> None:
        """Append received bytes."""
        if self._large is not None:
            take = min(len(data), self._large_size - self._large_filled)
            filled = self._large_filled
            large = self._room(take)
            large[filled : filled + take] = data[:take]
            self._large_filled = filled + take
            data = data[take:]
        self._buffer += data

    @property
    def prefix_first(self) -> bool:
        """Whether the next receive should take the next frame's size prefix alone: the last
        frame was large (so, likely, is the next, whose body can then be received whole) and
        nothing of the next has arrived."""
        return self._last_large and self.buffered_bytes == 0

    def whole_body_size(self) -> int | None:
        """The size of the frame whose size prefix, and nothing after it, has been received,
        when it is large and at most :data:`WHOLE_BODY_MAX_BYTES`: the caller may then receive
        the body in one piece and pass it to :meth:`feed_body`. None otherwise."""
        size = self._announced_large()
        return size if size is not None and size <= WHOLE_BODY_MAX_BYTES else None

    def feed_body(self, body: bytes) -> None:
        """Bytes received right after the size prefix :meth:`whole_body_size` named: the whole
        body (the next frame is then ``body`` itself, not copied) or its first part (kept as
        :meth:`feed` keeps received bytes)."""
        size = self.whole_body_size()
        assert size is not None
        assert len(body) <= size, (size, len(body))
        if len(body) < size:
            self.feed(body)
            return
        self._whole = body
        del self._buffer[:]

    def _room(self, count: int) -> bytearray:
        """The large frame's buffer, with room for ``count`` (at most a chunk) more bytes: when
        full, a new buffer of twice the bytes received or a chunk more, whichever is larger, at
        most the frame's size (one allocation for a frame up to a chunk larger than its first
        receive; the caller may still hold a view of the old buffer, which therefore is never
        resized)."""
        large = self._large
        assert large is not None
        filled = self._large_filled
        if filled + count > len(large):
            grown = bytearray(min(self._large_size, max(2 * filled, filled + self._chunk)))
            grown[:filled] = memoryview(large)[:filled]
            large = self._large = grown
        return large

    def direct_buffer(self) -> memoryview | None:
        """Room for the next part of a large frame (at most a chunk), in the
        frame's own buffer, for the caller to ``recv_into`` (then :meth:`direct_filled`), or
        None when received bytes should go through :meth:`feed`."""
        if self._large is None:
            size = self._announced_large()
            if size is None:
                return None
            self._start_large(size)
        assert self._large is not None
        if self._large_filled == self._large_size:
            return None
        filled = self._large_filled
        large = self._room(1)
        want = min(len(large) - filled, self._chunk)
        return memoryview(large)[filled : filled + want]

    def direct_filled(self, count: int) -> None:
        """``count`` bytes were written into :meth:`direct_buffer`."""
        assert self._large is not None
        assert 0 <= count <= min(len(self._large), self._large_size) - self._large_filled
        self._large_filled += count

    def next_frame(self) -> bytes | memoryview | None:
        """The next complete frame body, read-only (``bytes``: the body given to
        :meth:`feed_body`, or a copy out of the buffer; for a large frame assembled from several
        receives a read-only ``memoryview`` of the buffer it was assembled in, handed over
        without a copy), or None if more bytes are needed.

        Raises:
            FrameError: the size prefix is negative or larger than the limit (sticky: every
                later call raises it again).
        """
        if self._failed is not None:
            raise self._failed
        if self._whole is not None:
            whole, self._whole = self._whole, None
            self._last_large = True
            return whole
        if self._large is not None:
            if self._large_filled < self._large_size:
                return None
            assert len(self._large) == self._large_size
            large = memoryview(self._large).toreadonly()
            self._large = None  # ownership passes to the caller: never written again
            self._large_filled = 0
            self._large_size = 0
            self._last_large = True
            return large
        if len(self._buffer) < _SIZE.size:
            return None
        (size,) = _SIZE.unpack_from(self._buffer, 0)
        if size < 0 or size > self._max_frame_bytes:
            self._failed = FrameError(
                f"frame size {size} outside 0..{self._max_frame_bytes} ({self._limit_key})"
            )
            raise self._failed
        end = _SIZE.size + size
        if len(self._buffer) < end:
            # a large frame's buffer is allocated once some of its body has arrived (or the
            # caller asks for it, :meth:`direct_buffer`): its body may yet come whole
            if size >= LARGE_FRAME_BYTES and len(self._buffer) > _SIZE.size:
                self._start_large(size)
            return None
        frame = bytes(self._buffer[_SIZE.size : end])
        del self._buffer[:end]
        self._last_large = size >= LARGE_FRAME_BYTES
        return frame

    def _announced_large(self) -> int | None:
        """The size of a large frame whose size prefix alone has been received, else None."""
        if self._large is not None or self._whole is not None or len(self._buffer) != _SIZE.size:
            return None
        size: int = _SIZE.unpack_from(self._buffer, 0)[0]
        return size if LARGE_FRAME_BYTES <= size <= self._max_frame_bytes else None

    def _start_large(self, size: int) -> None:
        """Move what has arrived of a large frame of ``size`` bytes into a buffer of its own,
        which grows as bytes arrive, never to ``size`` at once."""
        rest = memoryview(self._buffer)[_SIZE.size :]
        self._large = bytearray(min(size, max(len(rest) + DIRECT_CHUNK_BYTES, self._chunk)))
        self._large[: len(rest)] = rest
        self._large_size = size
        self._large_filled = len(rest)
        rest.release()
        del self._buffer[:]


def frame(payload: bytes) -> bytes:
    """``payload`` with its int32 size prefix."""
    return _SIZE.pack(len(payload)) + payload
