"""The trio TCP server: one task per connection, requests answered in order, one writer.

Each connection runs a reader (frames in, requests handled one after another, as Kafka does by
muting a channel until its response is queued, with one exception below) and a writer task that
owns the socket's send side:
``send_all`` for ordinary responses, and for Fetch the hand-written framing followed by
``os.sendfile`` of each record slice (trio has no sendfile: the loop waits with
``trio.lowlevel.wait_writable``), except slices up to ``SMALL_SLICE_BYTES``, read and sent with
the framing around them in one send. Because only the writer sends, framing and file bytes
never interleave.

Produce requests are pipelined: an acks=all Produce whose appends are done hands back a
:class:`DeferredResponse`; its answer keeps its place in the writer's queue and is finished by a
task of its own while the reader goes on. A Produce that follows is appended at once (so a
producer with several requests in flight on one connection is not held to one replication round
trip per request, which is what kept twelve partitions at 5 MB/s from being served); any other
request waits until every earlier deferred answer is finished, so what it reads (a high
watermark, an offset) is what Kafka's one-request-at-a-time connection would show it. Appends
keep the requests' order, answers too.

Client errors (a refused size prefix, an unparsable request, an unsupported API) close the
connection after the responses already queued are written; ApiVersions at an unsupported version
gets the v0-format error answer instead. A handler failure (our bug) is logged with its traceback,
counted in :attr:`Server.internal_errors`, and closes that connection only.

Graceful stop (:meth:`Server.drain`): listeners close first, then each connection stops reading,
finishes the requests it has already received, flushes its writer, and closes.

Bounds (:class:`ConnectionLimits`, Kafka's names): ``max.connections`` and
``max.connections.per.ip`` close a new connection beyond them at once; ``connections.max.idle.ms``
closes a connection that has no partial request and receives nothing for that long;
``socket.request.read.timeout.ms`` closes one whose request has started and is not complete in
that time (a slowloris client); ``queued.max.request.bytes`` is the memory every connection's
requests share, from their first received byte until their handler returns: a connection whose
next receive does not fit waits (Kafka mutes its channel) until other requests finish.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeVar

import trio

from impl.security.listener import (
    SASL_APIS,
    ConnectionGuard,
    ServerSecurity,
    Verdict,
    sasl_refused,
)
from impl.security.session import ANONYMOUS, Session, set_session

from . import api_versions
from ._codec import (
    DecodedRequest,
    MalformedRequestError,
    UnsupportedRequestError,
    api_versions_fallback,
    decode_request,
    decode_request_steps,
    peek_head,
)
from ._framing import FrameDecoder, FrameError
from ._low_water import AVAILABLE as LOW_WATER_AVAILABLE
from ._low_water import ReceiveLowWater, queued_bytes
from ._produce_shape import few_partitions

log = logging.getLogger(__name__)

_T = TypeVar("_T")

RECEIVE_BYTES: Final = 256 * 1024
#: a frame's size prefix (int32), received alone after a large frame (:mod:`._framing`)
SIZE_PREFIX_BYTES: Final = 4
#: Frames at least this large are decoded in slices (:func:`._codec.decode_request_steps`), other
#: clients served between them: kio's native reader holds the GIL for a whole request, so a
#: worker thread did not help (a 12 MB ListOffsets held it 370 ms).
DECODE_IN_SLICES_BYTES: Final = 64 * 1024
#: The most event-loop time one run of slices takes before the connection yields.
DECODE_SLICE_SECONDS: Final = 0.0005
#: Responses queued per connection before the reader waits for the writer.
OUTGOING_QUEUE_MAX: Final = 64
#: Record slices up to this size are read and sent with the response's framing (one send);
#: larger ones go out with ``os.sendfile``.
SMALL_SLICE_BYTES: Final = 16 * 1024


class RecordSlice(Protocol):
    """A byte range of a segment file (the storage engine's ``FileSlice``)."""

    @property
    def position(self) -> int:
        """Offset of the range in the file."""

    @property
    def size(self) -> int:
        """Length of the range."""

    def fileno(self) -> int:
        """A descriptor for ``os.sendfile``."""

    def read_all(self) -> bytes:
        """The range's bytes (when there is no descriptor)."""

    def close(self) -> None:
        """Release the descriptor."""


@dataclass(frozen=True, slots=True)
class PiecesResponse:
    """A response made of bytes and record slices (Fetch); slices are closed once sent.
    ``topic_bytes``: the record bytes it carries per topic (the metrics' BytesOut)."""

    pieces: Sequence[bytes | Any]
    topic_bytes: Mapping[str, int] = field(default_factory=dict)


Response = bytes | PiecesResponse


@dataclass(frozen=True, slots=True)
class DeferredResponse:
    """A Produce whose appends are done and whose answer waits for its acks (acks=all).

    The connection queues its place among the responses, runs ``finish`` in a task of its own
    and goes on reading: a Produce that follows is appended while this one waits (appends stay
    in request order, answers in request order); any other request waits until every deferred
    answer of the connection is finished, so it is handled after them, as Kafka handles it.
    """

    #: the answer (None: none is sent); may raise :class:`CloseConnectionError`
    finish: Callable[[], Awaitable[Response | None]]


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    """Who is on the other end."""

    peer: str
    listener: str
    #: this server's number for the connection, increasing: a follower's fetches carry it as
    #: the follower's incarnation (a restarted follower connects anew; Fetch v11 has no field
    #: for it), so the broker node forgets a stale LEO and ignores an older connection's fetch
    connection_id: int = 0


Handler = Callable[[DecodedRequest, ConnectionInfo],
                   Awaitable[Response | DeferredResponse | None]]
#: Answers a whole request frame of an API kio has no schema for; raises ValueError on bad bytes.
RawHandler = Callable[[bytes], Awaitable[Response | None]]


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The server's resource bounds (Kafka's config names; see the module docstring).

    Attributes:
        max_connections: ``max.connections``.
        max_connections_per_ip: ``max.connections.per.ip``.
        connections_max_idle_ms: ``connections.max.idle.ms``.
        request_read_timeout_ms: ``socket.request.read.timeout.ms`` (not a Kafka key: Kafka has
            no bound on how slowly a request may arrive).
        queued_max_request_bytes: ``queued.max.request.bytes``; -1 unbounded, as Kafka's default.
    """

    max_connections: int = 2**31 - 1
    max_connections_per_ip: int = 2**31 - 1
    connections_max_idle_ms: int = 600_000
    request_read_timeout_ms: int = 30_000
    queued_max_request_bytes: int = -1


class MemoryPool:
    """Bytes shared by every request being received or handled (``queued.max.request.bytes``).

    :meth:`acquire` waits until the bytes fit; a request is always admitted when nothing else
    holds the pool, so one frame larger than the pool still makes progress.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self._freed = trio.Event()

    async def acquire(self, count: int) -> None:
        """Reserve ``count`` bytes, waiting while they do not fit."""
        if self.capacity >= 0:
            while self.used > 0 and self.used + count > self.capacity:
                await self._freed.wait()
        self.used += count

    def release(self, count: int) -> None:
        """Give back ``count`` reserved bytes."""
        assert 0 <= count <= self.used, (count, self.used)
        self.used -= count
        if count:
            self._freed.set()
            self._freed = trio.Event()


class CloseConnectionError(Exception):
    """Raised by a handler to close the connection without answering (Kafka does this when a
    Produce with acks=0 fails, the only way such a client learns of the failure)."""


class ShortSliceError(Exception):
    """A record slice yielded fewer bytes than announced (its file was truncated)."""


async def sendfile_all(sock: trio.socket.SocketType, fd: int, offset: int, count: int) -> None:
    """Send ``count`` bytes of file ``fd`` from ``offset`` on a non-blocking trio socket.

    Raises:
        ShortSliceError: the file ended early.
        OSError: the socket failed.
    """
    while count > 0:
        try:
            sent = os.sendfile(sock.fileno(), fd, offset, count)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        if sent == 0:
            raise ShortSliceError(f"file ended with {count} bytes left to send")
        offset += sent
        count -= sent
        await trio.lowlevel.checkpoint()


class _Deferred:
    """A :class:`DeferredResponse`'s place among its connection's answers: ``response`` once
    ``done`` (None: nothing to send; ``_CLOSE``: its handler failed)."""

    __slots__ = ("done", "response")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.response: Response | object | None = None


_Outgoing = Response | _Deferred


async def _queue(send_channel: trio.MemorySendChannel[_Outgoing], response: _Outgoing) -> None:
    """Hands ``response`` to the connection's writer: at once while its queue has room (the
    reader's next receive yields to the writer anyway), else waiting for room."""
    try:
        send_channel.send_nowait(response)
    except trio.WouldBlock:
        await send_channel.send(response)


async def _decode_in_slices(frame: bytes | memoryview) -> DecodedRequest:
    """Drive :func:`decode_request_steps`, yielding to other tasks every
    :data:`DECODE_SLICE_SECONDS` of decoding."""
    steps = decode_request_steps(frame)
    deadline = trio.current_time() + DECODE_SLICE_SECONDS
    while True:
        try:
            next(steps)
        except StopIteration as done:
            request: DecodedRequest = done.value
            return request
        if trio.current_time() >= deadline:
            await trio.lowlevel.checkpoint()
            deadline = trio.current_time() + DECODE_SLICE_SECONDS


def _pipelined(frame: bytes | memoryview) -> bool:
    """Whether ``frame`` is a Produce (handled while earlier Produce answers wait)."""
    return len(frame) >= 8 and peek_head(frame).api_key == api_versions.PRODUCE


def _close_slices(pieces: Sequence[bytes | Any]) -> None:
    for piece in pieces:
        if not isinstance(piece, bytes):
            piece.close()


class _Connection:
    def __init__(self, server: Server, stream: trio.SocketStream, info: ConnectionInfo,
                 guard: ConnectionGuard | None = None) -> None:
        self.server = server
        self.stream: trio.abc.Stream = stream
        #: the plain socket stream, for zero-copy sends and direct receives (None under TLS)
        self.socket_stream: trio.SocketStream | None = stream
        self.info = info
        self.read_scope: trio.CancelScope | None = None
        #: bytes of :attr:`Server.pool` this connection holds (received, not yet handled)
        self.reserved = 0
        self.guard = guard
        #: deferred answers not yet known to be finished, oldest first (at most the writer's
        #: queue and the one it waits on)
        self.deferred: list[_Deferred] = []
        self.nursery: trio.Nursery | None = None
        #: the socket's ``SO_RCVLOWAT`` while a large body arrives (:meth:`_receive_body`)
        self.low_water: ReceiveLowWater | None = None

    async def run(self) -> None:
        if self.guard is not None and self.guard.uses_tls:
            assert self.socket_stream is not None
            wrapped = await self.guard.wrap(self.socket_stream)
            if wrapped is None:
                with trio.CancelScope(shield=True):
                    await self.socket_stream.aclose()
                return
            self.stream, self.socket_stream = wrapped, None
            set_session(self.guard.session)
        send_channel, receive_channel = trio.open_memory_channel[_Outgoing](OUTGOING_QUEUE_MAX)
        try:
            async with trio.open_nursery() as nursery:
                self.nursery = nursery
                nursery.start_soon(self._writer, receive_channel)
                async with send_channel:
                    await self._reader(send_channel)
        finally:
            with trio.CancelScope(shield=True):
                await self.stream.aclose()

    async def _reader(self, send_channel: trio.MemorySendChannel[_Outgoing]) -> None:
        try:
            await self._read_loop(send_channel)
        finally:
            self.server.pool.release(self.reserved)
            self.reserved = 0

    async def _read_loop(self, send_channel: trio.MemorySendChannel[_Outgoing]) -> None:
        limits = self.server.limits
        decoder = FrameDecoder(self.server.max_request_bytes)
        frame_deadline = math.inf
        while True:
            if self.guard is not None:
                # before SASL authentication, sasl.server.max.receive.size bounds a frame from
                # its size prefix on: nothing is read or allocated for a larger one
                receive_limit = self.guard.receive_limit()
                if receive_limit is not None:
                    decoder.limit(min(receive_limit, self.server.max_request_bytes),
                                  "sasl.server.max.receive.size")
                else:
                    decoder.limit(self.server.max_request_bytes, "socket.request.max.bytes")
            try:
                frame = decoder.next_frame()
            except FrameError as error:
                log.info("closing %s: %s", self.info.peer, error)
                return
            if frame is None:
                if self.server.draining:
                    return
                if not decoder.frame_started:
                    frame_deadline = math.inf
                    deadline = trio.current_time() + limits.connections_max_idle_ms / 1000
                    why = "connections.max.idle.ms"
                else:
                    if frame_deadline == math.inf:
                        frame_deadline = (
                            trio.current_time() + limits.request_read_timeout_ms / 1000
                        )
                    deadline = frame_deadline
                    why = "socket.request.read.timeout.ms"
                plain = self.socket_stream is not None
                # a large frame's body in one piece when only its size prefix has arrived, else
                # into the frame's own buffer, else whatever comes (after a large frame: the
                # next size prefix alone, so that a large frame's body starts a receive)
                whole = decoder.whole_body_size() if plain and LOW_WATER_AVAILABLE else None
                direct = decoder.direct_buffer() if plain and whole is None else None
                if whole is not None:
                    want = whole
                elif direct is not None:
                    want = len(direct)
                elif plain and decoder.prefix_first:
                    want = SIZE_PREFIX_BYTES
                else:
                    want = RECEIVE_BYTES
                    missing = decoder.missing_bytes
                    if missing is not None and missing > 0:
                        want = min(want, missing)
                received = 0
                data: bytes | bytearray = b""
                with trio.CancelScope(deadline=deadline) as scope:
                    self.read_scope = scope
                    await self.server.pool.acquire(want)
                    self.reserved += want
                    try:
                        if whole is not None:
                            data = await self._receive_body(whole)
                        elif direct is not None:
                            assert self.socket_stream is not None
                            received = await self.socket_stream.socket.recv_into(direct)
                        else:
                            data = await self.stream.receive_some(want)
                    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                        return
                self.read_scope = None
                if scope.cancelled_caught and not self.server.draining:
                    log.info("closing %s: nothing received within %s", self.info.peer, why)
                    self.server.timed_out += 1
                    return
                if scope.cancelled_caught or (direct is None and not data) or (
                    direct is not None and received == 0
                ):
                    return
                got = received if direct is not None else len(data)
                self.server.pool.release(want - got)
                self.reserved -= want - got
                if direct is not None:
                    decoder.direct_filled(received)
                elif whole is not None:
                    assert isinstance(data, bytes)
                    decoder.feed_body(data)
                else:
                    decoder.feed(data if isinstance(data, bytes) else bytes(data))
                continue
            frame_deadline = math.inf
            size = len(frame) + 4
            if self.deferred and not _pipelined(frame):
                await self._settle()
            response = await self._handle_frame(frame)
            del frame
            held = min(size, self.reserved - decoder.buffered_bytes)
            self.server.pool.release(held)
            self.reserved -= held
            if response is _CLOSE:
                return
            if isinstance(response, Verdict):
                if response.response is not None:
                    await _queue(send_channel, response.response)
                if response.close:
                    return
                continue
            if isinstance(response, DeferredResponse):
                self.deferred = [slot for slot in self.deferred if not slot.done.is_set()]
                slot = _Deferred()
                self.deferred.append(slot)
                assert self.nursery is not None
                self.nursery.start_soon(self._finish, slot, response)
                await _queue(send_channel, slot)
                continue
            if response is not None:
                assert isinstance(response, bytes | PiecesResponse)
                await _queue(send_channel, response)

    async def _receive_body(self, size: int) -> bytes:
        """A large frame's body of ``size`` bytes, received in one piece once the kernel holds
        it all (``SO_RCVLOWAT``: the connection is woken once, and the body becomes one
        ``bytes`` nobody copies again), or what had arrived when the kernel woke it earlier (a
        full receive window, the peer closing: the frame is then assembled as any other).

        The low-water mark is back to one byte before anything else waits on the socket: a
        small request must wake the connection as soon as it arrives.
        """
        assert self.socket_stream is not None
        sock = self.socket_stream.socket
        if queued_bytes(sock) < size:  # (a busy producer's next body is usually there)
            if self.low_water is None:
                self.low_water = ReceiveLowWater(sock)
            self.low_water.before_receive(size)
            try:
                await trio.lowlevel.wait_readable(sock)
            finally:
                with contextlib.suppress(OSError):  # (closed meanwhile: the receive says so)
                    self.low_water.frame_done()
        return await sock.recv(size)

    async def _settle(self) -> None:
        """Wait until every deferred answer of this connection is finished (the next request
        is not a Produce: it is handled after them, as if each had been answered at once)."""
        for slot in self.deferred:
            await slot.done.wait()
        self.deferred.clear()

    async def _finish(self, slot: _Deferred, deferred: DeferredResponse) -> None:
        try:
            slot.response = await self._answered(deferred.finish(), None)
        finally:
            slot.done.set()

    async def _answered(self, answer: Awaitable[_T], request: DecodedRequest | None
                        ) -> _T | object:
        """``answer`` awaited; a :class:`CloseConnectionError` or a failure of the handler (our
        bug: logged with its traceback and counted) becomes ``_CLOSE``."""
        try:
            return await answer
        except CloseConnectionError as error:
            log.info("closing %s: %s", self.info.peer, error)
            return _CLOSE
        except Exception:
            self.server.internal_errors += 1
            if request is None:
                log.exception("the deferred answer to %s failed", self.info.peer)
            else:
                log.exception("handler failed for api key %d v%d from %s", request.api_key,
                              request.api_version, self.info.peer)
            return _CLOSE

    def _refresh_session(self) -> None:
        """After a SASL step: the handlers see the authenticated principal from now on."""
        if self.guard is not None and self.guard.authenticated:
            set_session(self.guard.session)

    async def _handle_frame(
        self, frame: bytes | memoryview
    ) -> Response | DeferredResponse | object | None:
        guard = self.guard
        if guard is not None and not guard.authenticated and guard.raw_token_expected():
            verdict = await guard.raw_token(bytes(frame))
            self._refresh_session()
            return verdict
        if len(frame) >= 8:
            if guard is not None and not guard.admits(peek_head(frame).api_key):
                log.info("closing %s: api key %d before SASL authentication", self.info.peer,
                         peek_head(frame).api_key)
                return _CLOSE
            raw_handler = self.server.raw_handlers.get(peek_head(frame).api_key)
            if raw_handler is not None:
                try:
                    return await raw_handler(bytes(frame))
                except ValueError as error:
                    log.info("closing %s: %s", self.info.peer, error)
                    return _CLOSE
        # a Produce of a few partitions is mostly record bytes, one copy each: decoded whole
        sliced = len(frame) >= DECODE_IN_SLICES_BYTES and not few_partitions(frame)
        if sliced:
            self.server.large_requests_in_flight += 1
            try:
                return await self._handle_request(frame, guard, sliced=True)
            finally:
                self.server.large_requests_in_flight -= 1
        return await self._handle_request(frame, guard, sliced=False)

    async def _handle_request(
        self, frame: bytes | memoryview, guard: ConnectionGuard | None, *, sliced: bool
    ) -> Response | DeferredResponse | object | None:
        try:
            if sliced:
                request = await _decode_in_slices(frame)
            else:
                request = decode_request(frame)
        except UnsupportedRequestError as error:
            head = peek_head(frame)
            if head.api_key == api_versions.API_VERSIONS:
                return api_versions_fallback(head)
            log.info("closing %s: unsupported request %s", self.info.peer, error)
            return _CLOSE
        except MalformedRequestError as error:
            log.info("closing %s: %s", self.info.peer, error)
            return _CLOSE
        if guard is not None and guard.intercepts(request.api_key):
            verdict = await guard.answer(request)
            self._refresh_session()
            return verdict
        if guard is None and request.api_key in SASL_APIS:
            return sasl_refused(request)  # no SASL here: Kafka's ILLEGAL_SASL_STATE, closed
        return await self._answered(self.server.handler(request, self.info), request)

    async def _writer(self, receive_channel: trio.MemoryReceiveChannel[_Outgoing]) -> None:
        failed = False
        async with receive_channel:
            while True:
                # (a response already queued is taken without a trip through the scheduler:
                # the send that follows yields anyway)
                try:
                    response = receive_channel.receive_nowait()
                except trio.WouldBlock:
                    try:
                        response = await receive_channel.receive()
                    except trio.EndOfChannel:
                        return
                except trio.EndOfChannel:
                    return
                if isinstance(response, _Deferred):
                    await response.done.wait()
                    answer = response.response
                    if answer is None:
                        continue
                    if answer is _CLOSE:
                        # its handler failed after the request's appends: close once the
                        # answers before it are written, as a failed handler's connection is
                        if not failed:
                            failed = True
                            with trio.CancelScope(shield=True):
                                await self.stream.aclose()
                        continue
                    assert isinstance(answer, bytes | PiecesResponse)
                    response = answer
                if failed:
                    if isinstance(response, PiecesResponse):
                        _close_slices(response.pieces)
                    continue
                try:
                    await self._write(response)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as error:
                    log.info("write to %s failed: %s", self.info.peer, error)
                    failed = True
                except ShortSliceError as error:
                    log.warning("closing %s: %s", self.info.peer, error)
                    failed = True
                if failed:
                    with trio.CancelScope(shield=True):
                        await self.stream.aclose()

    async def _write(self, response: Response) -> None:
        if isinstance(response, bytes):
            await self.stream.send_all(response)
            return
        try:
            pending = bytearray()
            for piece in response.pieces:
                if isinstance(piece, bytes):
                    pending += piece
                    continue
                if piece.size <= SMALL_SLICE_BYTES:
                    # a small slice (a batch or two of a partition fetched at a moderate rate)
                    # goes out with the framing around it: one send, not a send and a sendfile
                    data = piece.read_all()
                    if len(data) != piece.size:
                        raise ShortSliceError(f"slice read {len(data)} of {piece.size} bytes")
                    pending += data
                    continue
                if pending:
                    await self.stream.send_all(bytes(pending))
                    pending.clear()
                await self._send_slice(piece)
            if pending:
                await self.stream.send_all(bytes(pending))
        finally:
            _close_slices(response.pieces)

    async def _send_slice(self, piece: RecordSlice) -> None:
        if piece.size == 0:
            return
        try:
            if self.socket_stream is None:
                raise NotImplementedError("sendfile cannot encrypt: TLS reads the slice")
            fd = piece.fileno()
        except (OSError, ValueError, NotImplementedError):
            data = piece.read_all()
            if len(data) != piece.size:
                raise ShortSliceError(f"slice read {len(data)} of {piece.size} bytes") from None
            await self.stream.send_all(data)
            return
        assert self.socket_stream is not None
        await sendfile_all(self.socket_stream.socket, fd, piece.position, piece.size)


_CLOSE: Final = object()


class Server:
    """Listens on the configured listeners and serves connections until drained.

    Args:
        handler: answers one decoded request (None: no response, e.g. Produce with acks=0).
        max_request_bytes: ``socket.request.max.bytes``.
        raw_handlers: api key → handler of whole frames, for APIs kio has no schema for.
        limits: connection counts, timeouts and the shared request memory.
        security: the listeners' TLS and SASL settings (None: every listener PLAINTEXT).
    """

    def __init__(
        self,
        handler: Handler,
        max_request_bytes: int,
        raw_handlers: dict[int, RawHandler] | None = None,
        limits: ConnectionLimits | None = None,
        security: ServerSecurity | None = None,
    ) -> None:
        self.handler = handler
        self.security = security
        self.raw_handlers: dict[int, RawHandler] = dict(raw_handlers or {})
        self.max_request_bytes = max_request_bytes
        self.limits = limits or ConnectionLimits()
        self.pool = MemoryPool(self.limits.queued_max_request_bytes)
        #: connections closed by a limit: too many (total or per IP), idle or too slow
        self.refused = 0
        self.timed_out = 0
        self._per_ip: dict[str, int] = {}
        self.draining = False
        #: requests decoded in slices (large, not a few-partition Produce) being handled now
        self.large_requests_in_flight = 0
        self.internal_errors = 0
        self.ports: list[int] = []
        self._listeners: list[tuple[str, trio.SocketListener]] = []
        self._connections: set[_Connection] = set()
        self._connection_ids = 0
        self._connection_nursery: trio.Nursery | None = None
        self._idle = trio.Event()
        self._idle.set()

    @property
    def connection_count(self) -> int:
        """Open connections."""
        return len(self._connections)

    async def serve(
        self,
        listeners: Sequence[tuple[str, int]],
        *,
        names: Sequence[str] | None = None,
        task_status: trio.TaskStatus[list[int]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Bind every (host, port), report the bound ports, and serve until :meth:`drain`.

        Args:
            listeners: (host, port) of each listener.
            names: each listener's name (default PLAINTEXT), which selects its security.

        Raises:
            OSError: a listener cannot bind (e.g. ``EADDRINUSE``).
        """
        for index, (host, port) in enumerate(listeners):
            name = names[index] if names is not None else "PLAINTEXT"
            bound = await trio.open_tcp_listeners(port, host=host, backlog=128)
            self._listeners.extend((name, listener) for listener in bound)
            if bound:
                self.ports.append(bound[0].socket.getsockname()[1])
        async with trio.open_nursery() as nursery:
            self._connection_nursery = nursery
            for name, listener in self._listeners:
                nursery.start_soon(self._accept_loop, listener, name)
            task_status.started(list(self.ports))

    async def _accept_loop(self, listener: trio.SocketListener, name: str) -> None:
        async with listener:
            while not self.draining:
                try:
                    stream = await listener.accept()
                except (trio.ClosedResourceError, trio.BrokenResourceError):
                    return
                except OSError as error:
                    if error.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                        log.warning("accept failed: %s", error)
                        await trio.sleep(0.1)
                        continue
                    raise
                assert self._connection_nursery is not None
                self._connection_nursery.start_soon(self._run_connection, stream, name)

    async def _run_connection(self, stream: trio.SocketStream, name: str = "PLAINTEXT") -> None:
        try:
            peer = stream.socket.getpeername()
            self._connection_ids += 1
            info = ConnectionInfo(f"{peer[0]}:{peer[1]}", name, self._connection_ids)
        except OSError:
            await stream.aclose()
            return
        ip = str(peer[0])
        if (
            len(self._connections) >= self.limits.max_connections
            or self._per_ip.get(ip, 0) >= self.limits.max_connections_per_ip
        ):
            self.refused += 1
            log.info("closing %s: max.connections or max.connections.per.ip reached", info.peer)
            await stream.aclose()
            return
        self._per_ip[ip] = self._per_ip.get(ip, 0) + 1
        guard = None
        if self.security is not None:
            guard = self.security.guard(name, str(peer[0]))
        set_session(guard.session if guard is not None else Session(ANONYMOUS, str(peer[0]),
                                                                    name))
        connection = _Connection(self, stream, info, guard)
        self._connections.add(connection)
        self._idle = trio.Event() if self._idle.is_set() else self._idle
        try:
            try:
                await connection.run()
            except* (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the peer went away
        except Exception:  # our bug: logged and counted; the other connections keep going
            self.internal_errors += 1
            log.exception("connection from %s failed", info.peer)
        finally:
            self._connections.discard(connection)
            self._per_ip[ip] -= 1
            if not self._per_ip[ip]:
                del self._per_ip[ip]
            if not self._connections:
                self._idle.set()

    async def drain(self, timeout_seconds: float = 30.0) -> None:
        """Stop accepting, let every connection finish what it received, wait (bounded).

        Args:
            timeout_seconds: after this, remaining connections are cancelled.
        """
        self.draining = True
        for _, listener in self._listeners:
            await listener.aclose()
        for connection in list(self._connections):
            if connection.read_scope is not None:
                connection.read_scope.cancel()
        with trio.move_on_after(timeout_seconds if timeout_seconds > 0 else math.inf):
            await self._idle.wait()
        if self._connection_nursery is not None:
            self._connection_nursery.cancel_scope.cancel()
