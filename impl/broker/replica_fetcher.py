"""Followers fetch from their leaders: the trio carrier of the broker node's follower side.

What to ask, when, and what to do with the answer is the node's
(:class:`~impl.broker.node.BrokerNode`): it owns each followed partition's leader and epoch,
the KIP-101/279 truncation exchange (``replica.truncation.policy``), the back-off after a
refusal (``replica.fetch.backoff.ms``), failed partitions (FENCED_LEADER_EPOCH, a storage
error: they wait for the next LeaderAndIsr, as Kafka's ``markPartitionFailed``), the
OFFSET_OUT_OF_RANGE reset and the follower HW ``min(leader HW, own LEO)``. Which of the
node's ``EpochCall`` and ``FetchCall`` effects one request names, and which call each answered
partition is stepped back to, is :class:`~impl.broker.fetch_rounds.FollowerRounds`' (the
simulator carries the same rounds). This module only carries them: one task per leader broker
steps the node's ``Tick``, sends the leader's next round as one OffsetForLeaderEpoch or one
Fetch request (v11, this broker's id as ``replica_id``), and steps the matched answers back as
``EpochReply`` / ``FetchReply``; a follower append the node asks for is awaited by
:class:`~impl.broker.replica_manager.ReplicaManager`.

A round lost with its connection is answered to the node as NETWORK_EXCEPTION (13) for each
of its partitions (the node backs them off); the connection is closed and opened again after
``BACKOFF_SECONDS``.

A leader's loop runs in its own cancel scope. It is cancelled — with the request it has in
flight and its connection — as soon as no partition follows that leader any more, and when a
LeaderAndIsr names the leader at another address than the one its connection goes to. A leader
that stops answering (a paused process, a host cut off) therefore never holds a follower for
``IO_TIMEOUT_SECONDS``: its partitions move to the new leader's loop at once, and a later
LeaderAndIsr naming the old leader again starts a fresh loop instead of waiting for the stuck
one.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import trio

from impl.storage import TopicPartition
from impl.storage import record_batch as rb

from . import api_versions, follower_fetch
from ._codec import (
    MalformedRequestError,
    decode_response,
    encode_request,
    load_request_schema,
)
from ._framing import FrameDecoder, FrameError
from ._kio_build import build
from ._low_water import ReceiveLowWater
from .fetch_rounds import FollowerRounds, Round
from .node import EpochCall, EpochReply, FetchCall, FetchReply, Tick
from .replication import fetcher_client_id

log = logging.getLogger(__name__)

FETCH_VERSION: Final = 11
FETCH_MAX_WAIT_MS: Final = 500
FETCH_MAX_BYTES: Final = 16 * 1024 * 1024
PARTITION_MAX_BYTES: Final = 4 * 1024 * 1024
RESPONSE_MAX_BYTES: Final = 64 * 1024 * 1024
#: An answer up to this size is assembled in one buffer allocated when its size arrives: what a
#: fetch asks for, and room for the answer's fields (a lying leader's larger announcement only
#: grows the buffer as bytes come, :mod:`._framing`)
RESPONSE_PREALLOCATE_BYTES: Final = FETCH_MAX_BYTES + 1024 * 1024
#: How long a loop with nothing to fetch waits for a change, and the back-off after a
#: connection failure.
BACKOFF_SECONDS: Final = 0.2
#: Kafka's ``replica.fetch.backoff.ms`` default.
FETCH_BACKOFF_MS_DEFAULT: Final = 1000
IO_TIMEOUT_SECONDS: Final = 30.0
#: The int32 that starts every frame with its size.
_SIZE_PREFIX_BYTES: Final = 4


@dataclass
class _LeaderLoop:
    """One leader's fetch task: its cancel scope and the address its connection goes to."""

    scope: trio.CancelScope
    endpoint: tuple[str, int] | None = None


#: Opens the connection to a leader (TLS and SASL on a secured inter-broker listener).
Connector = Callable[[str, int], Awaitable[trio.abc.Stream]]


def _decoder() -> FrameDecoder:
    return FrameDecoder(RESPONSE_MAX_BYTES, preallocate_bytes=RESPONSE_PREALLOCATE_BYTES)


class _Connection:
    def __init__(self, host: str, port: int, client_id: str,
                 connect: Connector = trio.open_tcp_stream) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.connect = connect
        self.stream: trio.abc.Stream | None = None
        self.decoder = _decoder()
        self.correlation = itertools.count(1)
        #: the socket's ``SO_RCVLOWAT`` while a large answer arrives (:mod:`._low_water`)
        self.low_water: ReceiveLowWater | None = None

    async def close(self) -> None:
        if self.stream is not None:
            stream, self.stream = self.stream, None
            with trio.CancelScope(shield=True):
                await stream.aclose()

    def _next_correlation_id(self) -> int:
        return next(self.correlation) & 0x7FFFFFFF

    async def call(self, api_key: int, version: int, data: dict[str, Any],
                   client_id: str | None = None) -> Any:
        """One request built by kio from ``data``; its decoded answer."""
        correlation_id = self._next_correlation_id()
        request_class: type[Any] = load_request_schema(api_key, version)
        frame = encode_request(api_key, version, correlation_id,
                               self.client_id if client_id is None else client_id,
                               build(request_class, data))
        received_id, response = decode_response(api_key, version, await self._exchange(frame))
        if received_id != correlation_id:
            raise MalformedRequestError("response to another request")
        return response

    async def fetch(self, topics: list[tuple[str, list[follower_fetch.FetchPosition]]], *,
                    replica_id: int, client_id: str) -> follower_fetch.FetchAnswer:
        """One follower Fetch (v11, written and read by hand: :mod:`.follower_fetch`)."""
        correlation_id = self._next_correlation_id()
        frame = follower_fetch.encode_request(
            correlation_id, client_id, replica_id=replica_id, max_wait_ms=FETCH_MAX_WAIT_MS,
            min_bytes=1, max_bytes=FETCH_MAX_BYTES, topics=topics)
        answer = follower_fetch.decode_response(await self._exchange(frame))
        if answer.correlation_id != correlation_id:
            raise MalformedRequestError("response to another request")
        return answer

    async def _exchange(self, frame: bytes) -> bytes | memoryview:
        """Sends one framed request; the answer's frame (connecting first when needed)."""
        if self.stream is None:
            self.stream = await self.connect(self.host, self.port)
            self.decoder = _decoder()
            self.low_water = (ReceiveLowWater(self.stream.socket)
                              if isinstance(self.stream, trio.SocketStream) else None)
        with trio.fail_after(IO_TIMEOUT_SECONDS):
            await self.stream.send_all(frame)
            while True:
                payload = self.decoder.next_frame()
                if payload is not None:
                    if self.low_water is not None:
                        self.low_water.frame_done()
                    return payload
                direct = (self.decoder.direct_buffer()
                          if isinstance(self.stream, trio.SocketStream) else None)
                if direct is not None:
                    assert isinstance(self.stream, trio.SocketStream)
                    assert self.low_water is not None
                    self.low_water.before_receive(len(direct))
                    count = await self.stream.socket.recv_into(direct)
                    if count == 0:
                        raise trio.BrokenResourceError("leader closed the connection")
                    self.decoder.direct_filled(count)
                    continue
                # Up to the size prefix first: a large answer's records then go straight
                # into its frame's buffer (above), not through two copies.
                missing = self.decoder.missing_bytes
                want = (_SIZE_PREFIX_BYTES - self.decoder.buffered_bytes if missing is None
                        else min(missing, 1 << 20))
                data_in = await self.stream.receive_some(max(want, 1))
                if not data_in:
                    raise trio.BrokenResourceError("leader closed the connection")
                self.decoder.feed(data_in if isinstance(data_in, bytes) else bytes(data_in))


class ReplicaFetcher:
    """Runs the follower fetch loops of one broker.

    Args:
        broker_id: this broker (``replica_id`` in Fetch).
        replicas: the node's pump (``step`` / ``carry_out`` / ``node.followed``).
        endpoint_of: broker id → (host, port) or None.
        connect: opens a connection to a leader (default: plain TCP; the broker passes its
            inter-broker listener's TLS and SASL client, :func:`impl.security.client.open_stream`).
    """

    def __init__(
        self,
        broker_id: int,
        replicas: Any,
        endpoint_of: Callable[[int], tuple[str, int] | None],
        *,
        connect: Connector = trio.open_tcp_stream,
    ) -> None:
        self.broker_id = broker_id
        self.connect = connect
        self._replicas = replicas
        self._endpoint_of = endpoint_of
        #: leader → the partitions followed there (loop management only; the node owns
        #: their state)
        self._by_leader: dict[int, set[TopicPartition]] = {}
        self._leader_of: dict[TopicPartition, int] = {}
        #: the node's calls waiting per leader and the round in flight to each (what a
        #: request names and how its answers are matched: :mod:`.fetch_rounds`)
        self._rounds = FollowerRounds(int(IO_TIMEOUT_SECONDS * 1000))
        self._loops: dict[int, _LeaderLoop] = {}
        self._nursery: trio.Nursery | None = None
        self._changed = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the fetch tasks until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def follow(self, tp: TopicPartition, leader_id: int, leader_epoch: int) -> None:
        """The node follows ``tp`` at ``leader_id``: make sure a loop fetches from there."""
        del leader_epoch
        previous = self._leader_of.get(tp)
        if previous is not None and previous != leader_id:
            self._forget(tp)
        self._leader_of[tp] = leader_id
        self._by_leader.setdefault(leader_id, set()).add(tp)
        loop = self._loops.get(leader_id)
        endpoint = self._endpoint_of(leader_id)
        if loop is not None and None not in (loop.endpoint, endpoint) and (
            loop.endpoint != endpoint
        ):
            # The leader is now named at another address: whatever the old connection is
            # waiting for will not come from there.
            self._stop(leader_id)
            loop = None
        self._wake()
        if loop is None:
            self._start(leader_id)

    def unfollow(self, tp: TopicPartition) -> None:
        """Stop fetching ``tp`` (it became leader, stopped, or went offline)."""
        self._forget(tp)
        self._wake()

    def send(self, leader_id: int, message: Any) -> None:
        """Queue one of the node's requests for ``leader_id``'s loop."""
        self._rounds.add(leader_id, message)
        self._wake()

    def followed(self) -> dict[TopicPartition, int]:
        """Partition → leader, for every followed partition."""
        return dict(self._leader_of)

    def fetching_from(self) -> set[int]:
        """The leaders a fetch loop runs for."""
        return set(self._loops)

    def _forget(self, tp: TopicPartition) -> None:
        """Drop ``tp``; cancel its leader's loop when no partition is left there."""
        leader_id = self._leader_of.pop(tp, None)
        if leader_id is None:
            return
        partitions = self._by_leader.get(leader_id)
        if partitions is not None:
            partitions.discard(tp)
            if not partitions:
                del self._by_leader[leader_id]
                self._rounds.forget(leader_id)
                self._stop(leader_id)

    def _start(self, leader_id: int) -> None:
        if self._nursery is None:
            return
        loop = _LeaderLoop(trio.CancelScope())
        self._loops[leader_id] = loop
        self._nursery.start_soon(self._fetch_loop, leader_id, loop)

    def _stop(self, leader_id: int) -> None:
        loop = self._loops.pop(leader_id, None)
        if loop is not None:
            loop.scope.cancel()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def _idle(self, leader_id: int) -> None:
        """Nothing to send: wait for a change, the end of a back-off, or ``BACKOFF_SECONDS``."""
        now_ms = int(trio.current_time() * 1000)
        deadline_ms = now_ms + int(BACKOFF_SECONDS * 1000)
        node = self._replicas.node
        for tp in self._by_leader.get(leader_id, ()):
            followed = node.followed.get(tp)
            if followed is not None and not followed.failed and followed.retry_ms > now_ms:
                deadline_ms = min(deadline_ms, followed.retry_ms)
        with trio.move_on_at(deadline_ms / 1000 + 0.001):
            await self._changed.wait()

    def _lost(self, leader_id: int, what: str, error: BaseException) -> None:
        """The connection failed with a round in flight: the node hears each call refused."""
        log.info("%s to broker %d failed: %s", what, leader_id, error)
        for reply in self._rounds.lost(leader_id):
            self._replicas.step(reply)

    async def _fetch_loop(self, leader_id: int, loop: _LeaderLoop) -> None:
        connection: _Connection | None = None
        try:
            with loop.scope:
                while True:
                    if not self._by_leader.get(leader_id):
                        return
                    endpoint = self._endpoint_of(leader_id)
                    if endpoint is None:
                        with trio.move_on_after(BACKOFF_SECONDS):
                            await self._changed.wait()
                        continue
                    if connection is None or (connection.host, connection.port) != endpoint:
                        if connection is not None:
                            await connection.close()
                        connection = _Connection(endpoint[0], endpoint[1],
                                                 f"replica-fetcher-{self.broker_id}",
                                                 self.connect)
                    loop.endpoint = endpoint
                    self._replicas.step(Tick(periodic=False))
                    now_ms = int(trio.current_time() * 1000)
                    sent = self._rounds.next_round(leader_id, now_ms)
                    if sent is None:
                        await self._idle(leader_id)
                        continue
                    try:
                        if sent.asks:
                            await self._ask(connection, leader_id, sent)
                        else:
                            await self._fetch_once(connection, sent)
                    except (OSError, trio.BrokenResourceError, trio.ClosedResourceError,
                            trio.TooSlowError, FrameError, MalformedRequestError) as error:
                        self._lost(leader_id, "fetch", error)
                        await connection.close()
                        await trio.sleep(BACKOFF_SECONDS)
            if loop.scope.cancelled_caught:
                log.info("fetch loop for broker %d cancelled: no partition follows it there "
                         "or it moved", leader_id)
        finally:
            if self._loops.get(leader_id) is loop:
                del self._loops[leader_id]
                # (a round cancelled with its request gets no answer: the node asks again
                # after its retry interval; a new loop for this leader sends what waits)
                self._rounds.abandon(leader_id)
            if connection is not None:
                await connection.close()

    def _refusal(self, leader_id: int, what: str, tp: TopicPartition, code: int) -> None:
        if code != 0:
            log.info("%s of %s from broker %d: error %d", what, tp, leader_id, code)

    async def _ask(self, connection: _Connection, leader_id: int, sent: Round) -> None:
        """One OffsetForLeaderEpoch for a round of the node's ``EpochCall``s (KIP-279)."""
        requests: dict[str, list[dict[str, Any]]] = {}
        for call in sent.calls:
            assert isinstance(call, EpochCall)
            requests.setdefault(call.tp.topic, []).append({
                "partition": call.tp.partition,
                "current_leader_epoch": call.current_leader_epoch,
                "leader_epoch": call.epoch,
            })
        response = await connection.call(
            api_versions.OFFSET_FOR_LEADER_EPOCH,
            api_versions.OFFSET_FOR_LEADER_EPOCH_VERSION,
            {"replica_id": self.broker_id,
             "topics": [{"topic": t, "partitions": p} for t, p in requests.items()]},
        )
        answers: list[Any] = []
        for topic in response.topics:
            for result in topic.partitions:
                tp = TopicPartition(topic.topic, int(result.partition))
                code = int(result.error_code)
                self._refusal(leader_id, "OffsetForLeaderEpoch", tp, code)
                answers.append(EpochReply(-1, tp, code, int(result.end_offset),
                                          int(result.leader_epoch)))
        for reply in self._rounds.answered(sent, answers):
            self._replicas.step(reply)

    async def _fetch_once(self, connection: _Connection, sent: Round) -> None:
        """One Fetch for a round of the node's ``FetchCall``s; each partition's answer is
        stepped (and its append carried out) in the order the leader gave them."""
        topics: dict[str, list[follower_fetch.FetchPosition]] = {}
        broker_epoch = -1
        for call in sent.calls:
            assert isinstance(call, FetchCall)
            broker_epoch = call.broker_epoch
            topics.setdefault(call.tp.topic, []).append(follower_fetch.FetchPosition(
                call.tp.partition, call.leader_epoch, call.offset, call.log_start_offset,
                call.max_bytes))
        response = await connection.fetch(
            list(topics.items()), replica_id=self.broker_id,
            client_id=fetcher_client_id(self.broker_id, broker_epoch))
        # A cancelled loop stops here only after the answer is applied: appends are not
        # abandoned half way.
        with trio.CancelScope(shield=True):
            answers: list[Any] = []
            for topic, partitions in response.topics:
                for result in partitions:
                    tp = TopicPartition(topic, result.partition)
                    code = result.error_code
                    self._refusal(self._leader_of.get(tp, -1), "Fetch", tp, code)
                    answers.append(FetchReply(-1, tp, code, rb.whole_batches(result.records),
                                              result.high_watermark, -1,
                                              result.log_start_offset))
            for reply in self._rounds.answered(sent, answers):
                await self._replicas.carry_out(self._replicas.step(reply))
