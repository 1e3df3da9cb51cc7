"""Followers fetch from their leaders (design V3 §"replica", KIP-101/279 truncation).

One task per leader broker fetches, for every partition this broker follows there, from the
follower's LEO (Fetch v11 with this broker's id as ``replica_id``), appends what it gets with
``append_as_follower`` and sets the follower's HW to ``min(leader HW, own LEO)``. Before the first
fetch of a partition (and after every new leader epoch) it truncates as
``replica.truncation.policy`` says (:func:`~.replication.follower_truncation_offset` decides):
with ``LEADER_EPOCH`` (the default) it asks the leader for the end offset of its own latest epoch
(OffsetForLeaderEpoch); while the leader answers an older epoch the follower does not hold
(KAFKA-6361), it asks again for its own epoch below that one (KIP-279), then truncates once to
where the two logs stop agreeing (one TRUNCATE event; ``rounds`` says how many answers it took).
With ``HIGH_WATERMARK`` (the design V3 text, kept to show the loss KIP-101 describes) it
truncates to its own HW without asking.

A partition whose Fetch or OffsetForLeaderEpoch is answered with an error stays followed, as in
Kafka's ``AbstractFetcherThread`` (partitions with errors are delayed, not removed):

* NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION,
  REPLICA_NOT_AVAILABLE and any other code are retried after ``replica.fetch.backoff.ms``
  (Kafka's default 1000 ms). The usual cause is a LeaderAndIsr that reached this follower
  before the leader's own (the controller sends them on independent channels): the leader
  refuses until it hears of its leadership, and then the retry succeeds without another
  LeaderAndIsr. The delay is per partition (trio's clock): the other partitions fetched from
  the same leader go on being fetched. OFFSET_OUT_OF_RANGE is retried too (Kafka instead moves
  the fetch offset to the leader's log; this fetcher does not).
* FENCED_LEADER_EPOCH (this follower's epoch is older than the leader's) and a storage error
  while appending mark the partition failed, as Kafka's ``markPartitionFailed`` does: it stays
  in :meth:`ReplicaFetcher.followed` but is neither asked nor fetched until a LeaderAndIsr (a
  newer state, from the controller) calls :meth:`ReplicaFetcher.follow` again. An answer to a
  request sent under an epoch the partition no longer has is dropped, so only a refusal of the
  current epoch fails it.

Connection failures close the connection and retry every partition after ``BACKOFF_SECONDS``.

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

from impl.storage import PartitionLog, StorageError, TopicPartition
from impl.storage import record_batch as rb
from impl.trace import NullTraceSink, TraceEvent, TraceSink

from . import api_versions
from ._codec import (
    MalformedRequestError,
    decode_response,
    encode_request,
    load_request_schema,
)
from ._framing import FrameDecoder, FrameError
from ._kio_build import build
from .config_store import ReplicationQuotas
from .replication import (
    MAX_TRUNCATION_ROUNDS,
    ReplicaRole,
    ReplicationEvent,
    TruncationPolicy,
    TruncationStep,
    follower_truncation_offset,
)

log = logging.getLogger(__name__)

FETCH_VERSION: Final = 11
FETCH_MAX_WAIT_MS: Final = 500
FETCH_MAX_BYTES: Final = 16 * 1024 * 1024
PARTITION_MAX_BYTES: Final = 4 * 1024 * 1024
RESPONSE_MAX_BYTES: Final = 64 * 1024 * 1024
#: How long a loop with nothing to fetch waits for a change, and the back-off after a
#: connection failure.
BACKOFF_SECONDS: Final = 0.2
#: Kafka's ``replica.fetch.backoff.ms`` default.
FETCH_BACKOFF_MS_DEFAULT: Final = 1000
#: The refusal a follower does not retry (Kafka's ``markPartitionFailed``).
FENCED_LEADER_EPOCH: Final = 74
IO_TIMEOUT_SECONDS: Final = 30.0


@dataclass
class _Followed:
    leader_id: int
    leader_epoch: int
    truncated: bool = False
    #: trio time before which the partition is neither asked nor fetched (an error's back-off)
    retry_at: float = 0.0
    #: FENCED_LEADER_EPOCH or a storage error: wait for the next LeaderAndIsr (Kafka's
    #: failed partitions)
    failed: bool = False

    def ready(self, now: float) -> bool:
        """Whether the partition may be asked or fetched at ``now``."""
        return not self.failed and self.retry_at <= now


@dataclass
class _Rounds:
    """One partition's OffsetForLeaderEpoch exchange (KIP-279): where it would truncate so far,
    the epoch to ask next (None: done or no answer), the first answer's end offset."""

    offset: int
    ask_epoch: int | None
    first_end: int | None = None
    rounds: int = 0


@dataclass
class _LeaderLoop:
    """One leader's fetch task: its cancel scope and the address its connection goes to."""

    scope: trio.CancelScope
    endpoint: tuple[str, int] | None = None


#: Opens the connection to a leader (TLS and SASL on a secured inter-broker listener).
Connector = Callable[[str, int], Awaitable[trio.abc.Stream]]


class _Connection:
    def __init__(self, host: str, port: int, client_id: str,
                 connect: Connector = trio.open_tcp_stream) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.connect = connect
        self.stream: trio.abc.Stream | None = None
        self.decoder = FrameDecoder(RESPONSE_MAX_BYTES)
        self.correlation = itertools.count(1)

    async def close(self) -> None:
        if self.stream is not None:
            stream, self.stream = self.stream, None
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def call(self, api_key: int, version: int, data: dict[str, Any]) -> Any:
        if self.stream is None:
            self.stream = await self.connect(self.host, self.port)
            self.decoder = FrameDecoder(RESPONSE_MAX_BYTES)
        correlation_id = next(self.correlation) & 0x7FFFFFFF
        request_class: type[Any] = load_request_schema(api_key, version)
        frame = encode_request(api_key, version, correlation_id, self.client_id,
                               build(request_class, data))
        with trio.fail_after(IO_TIMEOUT_SECONDS):
            await self.stream.send_all(frame)
            while True:
                payload = self.decoder.next_frame()
                if payload is not None:
                    break
                direct = (self.decoder.direct_buffer()
                          if isinstance(self.stream, trio.SocketStream) else None)
                if direct is not None:
                    assert isinstance(self.stream, trio.SocketStream)
                    count = await self.stream.socket.recv_into(direct)
                    if count == 0:
                        raise trio.BrokenResourceError("leader closed the connection")
                    self.decoder.direct_filled(count)
                    continue
                data_in = await self.stream.receive_some(1 << 20)
                if not data_in:
                    raise trio.BrokenResourceError("leader closed the connection")
                self.decoder.feed(data_in if isinstance(data_in, bytes) else bytes(data_in))
        received_id, response = decode_response(api_key, version, payload)
        if received_id != correlation_id:
            raise MalformedRequestError("response to another request")
        return response


class ReplicaFetcher:
    """Runs the follower fetch loops of one broker.

    Args:
        broker_id: this broker (``replica_id`` in Fetch).
        get_log: the storage engine's partition lookup.
        endpoint_of: broker id → (host, port) or None.
        on_progress: called after appends and HW moves (wakes waiters).
        trace: where TRUNCATE events go.
        policy: ``replica.truncation.policy``.
        fetch_backoff_ms: ``replica.fetch.backoff.ms``: how long a partition answered with a
            retriable error waits before it is asked or fetched again.
        connect: opens a connection to a leader (default: plain TCP; the broker passes its
            inter-broker listener's TLS and SASL client, :func:`impl.security.client.open_stream`).
    """

    def __init__(
        self,
        broker_id: int,
        get_log: Callable[[TopicPartition], PartitionLog | None],
        endpoint_of: Callable[[int], tuple[str, int] | None],
        on_progress: Callable[[], None],
        trace: TraceSink | None = None,
        *,
        policy: TruncationPolicy = TruncationPolicy.LEADER_EPOCH,
        fetch_backoff_ms: int = FETCH_BACKOFF_MS_DEFAULT,
        connect: Connector = trio.open_tcp_stream,
    ) -> None:
        self.broker_id = broker_id
        self.connect = connect
        self.policy = policy
        self.fetch_backoff_seconds = fetch_backoff_ms / 1000
        self._trace: TraceSink = trace if trace is not None else NullTraceSink()
        self._get_log = get_log
        self._endpoint_of = endpoint_of
        self._on_progress = on_progress
        self._followed: dict[TopicPartition, _Followed] = {}
        #: leader → the partitions followed there (the same objects as in ``_followed``)
        self._by_leader: dict[int, dict[TopicPartition, _Followed]] = {}
        self._loops: dict[int, _LeaderLoop] = {}
        self._nursery: trio.Nursery | None = None
        self._changed = trio.Event()
        #: KIP-73 follower throttle (None: never throttle); the broker sets it
        self.quotas: ReplicationQuotas | None = None
        #: the leader's HW in its last answer: a replica below it is catching up (not in sync)
        self._leader_high_watermark: dict[TopicPartition, int] = {}

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the fetch tasks until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def follow(self, tp: TopicPartition, leader_id: int, leader_epoch: int) -> None:
        """Fetch ``tp`` from ``leader_id`` (a LeaderAndIsr made this broker its follower)."""
        previous = self._followed.get(tp)
        if previous is not None and previous.leader_id != leader_id:
            self._forget(tp)
        followed = _Followed(leader_id, leader_epoch)
        self._followed[tp] = followed
        self._by_leader.setdefault(leader_id, {})[tp] = followed
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

    def followed(self) -> dict[TopicPartition, int]:
        """Partition → leader, for every followed partition."""
        return {tp: item.leader_id for tp, item in self._followed.items()}

    def fetching_from(self) -> set[int]:
        """The leaders a fetch loop runs for."""
        return set(self._loops)

    def _forget(self, tp: TopicPartition) -> None:
        """Drop ``tp``; cancel its leader's loop when no partition is left there."""
        self._leader_high_watermark.pop(tp, None)
        leader_id = self._drop(tp)
        if leader_id is not None and leader_id not in self._by_leader:
            self._stop(leader_id)

    def _drop(self, tp: TopicPartition) -> int | None:
        """Stop following ``tp``; returns its leader, if followed."""
        previous = self._followed.pop(tp, None)
        if previous is None:
            return None
        partitions = self._by_leader.get(previous.leader_id)
        if partitions is not None:
            partitions.pop(tp, None)
            if not partitions:
                del self._by_leader[previous.leader_id]
        return previous.leader_id

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

    def _partitions_of(self, leader_id: int) -> dict[TopicPartition, _Followed]:
        return dict(self._by_leader.get(leader_id, {}))

    def _delay(self, tp: TopicPartition, followed: _Followed, what: str, code: int) -> None:
        """An error answer for ``tp``: retry after the back-off, or wait for a LeaderAndIsr
        when this follower's epoch is fenced."""
        if code == FENCED_LEADER_EPOCH:
            log.info("%s of %s from broker %d: error %d (epoch %d fenced); waiting for "
                     "LeaderAndIsr", what, tp, followed.leader_id, code, followed.leader_epoch)
            followed.failed = True
            return
        log.info("%s of %s from broker %d: error %d; retrying in %.3f s", what, tp,
                 followed.leader_id, code, self.fetch_backoff_seconds)
        followed.retry_at = trio.current_time() + self.fetch_backoff_seconds

    async def _idle(self, partitions: dict[TopicPartition, _Followed]) -> None:
        """Nothing to send: wait for a change, the end of a back-off, or ``BACKOFF_SECONDS``."""
        now = trio.current_time()
        deadline = now + BACKOFF_SECONDS
        for item in partitions.values():
            if not item.failed and item.retry_at > now:
                deadline = min(deadline, item.retry_at)
        with trio.move_on_at(deadline):
            await self._changed.wait()

    async def _fetch_loop(self, leader_id: int, loop: _LeaderLoop) -> None:
        connection: _Connection | None = None
        try:
            with loop.scope:
                while True:
                    partitions = self._partitions_of(leader_id)
                    if not partitions:
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
                    try:
                        await self._truncate(connection, partitions)
                        await self._fetch_once(connection, partitions)
                    except (OSError, trio.BrokenResourceError, trio.ClosedResourceError,
                            trio.TooSlowError, FrameError, MalformedRequestError) as error:
                        log.info("fetch from broker %d failed: %s", leader_id, error)
                        await connection.close()
                        await trio.sleep(BACKOFF_SECONDS)
            if loop.scope.cancelled_caught:
                log.info("fetch loop for broker %d cancelled: no partition follows it there "
                         "or it moved", leader_id)
        finally:
            if self._loops.get(leader_id) is loop:
                del self._loops[leader_id]
            if connection is not None:
                await connection.close()

    async def _truncate(self, connection: _Connection,
                        partitions: dict[TopicPartition, _Followed]) -> None:
        now = trio.current_time()
        pending = {tp: item for tp, item in partitions.items()
                   if not item.truncated and item.ready(now)}
        if not pending:
            return
        if not self.policy.asks_leader:
            for tp, item in pending.items():
                partition_log = self._get_log(tp)
                if partition_log is not None:
                    self._truncate_one(tp, item, partition_log, follower_truncation_offset(
                        self.policy, log_end_offset=partition_log.log_end_offset,
                        log_start_offset=partition_log.log_start_offset,
                        high_watermark=partition_log.high_watermark,
                    ))
            return
        # KIP-279: ask, step, and ask again for an older epoch while the leader answers one the
        # follower lacks. The log is truncated once, at the end (an interrupted exchange starts
        # over with nothing lost).
        rounds: dict[TopicPartition, _Rounds] = {}
        for tp in pending:
            partition_log = self._get_log(tp)
            if partition_log is not None:
                rounds[tp] = _Rounds(partition_log.log_end_offset, partition_log.latest_epoch)
        for _ in range(MAX_TRUNCATION_ROUNDS):
            asking = {tp: ex for tp, ex in rounds.items() if ex.ask_epoch is not None}
            if not asking:
                return
            requests: dict[str, list[dict[str, Any]]] = {}
            for tp, exchange in asking.items():
                requests.setdefault(tp.topic, []).append({
                    "partition": tp.partition,
                    "current_leader_epoch": pending[tp].leader_epoch,
                    "leader_epoch": exchange.ask_epoch,
                })
            response = await connection.call(
                api_versions.OFFSET_FOR_LEADER_EPOCH,
                api_versions.OFFSET_FOR_LEADER_EPOCH_VERSION,
                {"replica_id": self.broker_id,
                 "topics": [{"topic": t, "partitions": p} for t, p in requests.items()]},
            )
            for tp in asking:
                rounds[tp].ask_epoch = None  # unless its answer asks again
            for topic in response.topics:
                for result in topic.partitions:
                    tp = TopicPartition(topic.topic, int(result.partition))
                    asked = asking.get(tp)
                    followed = self._followed.get(tp)
                    partition_log = self._get_log(tp)
                    if (asked is None or followed is None or partition_log is None
                            or followed is not pending.get(tp)):
                        continue  # not asked, or re-assigned while the request was in flight
                    if int(result.error_code) != 0:
                        self._delay(tp, followed, "OffsetForLeaderEpoch",
                                    int(result.error_code))
                        continue
                    end_offset, epoch = int(result.end_offset), int(result.leader_epoch)
                    if asked.first_end is None:
                        asked.first_end = end_offset
                    step = follower_truncation_offset(
                        self.policy, log_end_offset=min(asked.offset,
                                                        partition_log.log_end_offset),
                        log_start_offset=partition_log.log_start_offset,
                        high_watermark=partition_log.high_watermark,
                        leader_epoch_end_offset=end_offset, leader_epoch=epoch,
                        epochs=[(e.epoch, e.start_offset)
                                for e in partition_log.log.epochs.entries],
                    )
                    asked.offset, asked.rounds = step.offset, asked.rounds + 1
                    if step.done:
                        self._truncate_one(tp, followed, partition_log, step,
                                           leader_epoch_end=asked.first_end,
                                           rounds=asked.rounds)
                    else:
                        asked.ask_epoch = step.ask_epoch
        for tp, exchange in rounds.items():
            followed, partition_log = self._followed.get(tp), self._get_log(tp)
            if (exchange.ask_epoch is not None and followed is pending[tp]
                    and partition_log is not None):
                log.warning("%s: no common epoch with the leader after %d rounds", tp,
                            exchange.rounds)
                self._truncate_one(tp, followed, partition_log, TruncationStep(exchange.offset),
                                   leader_epoch_end=exchange.first_end, rounds=exchange.rounds)

    def _truncate_one(self, tp: TopicPartition, followed: _Followed, partition_log: PartitionLog,
                      step: TruncationStep, *, leader_epoch_end: int | None = None,
                      rounds: int = 1) -> None:
        before = partition_log.log_end_offset
        high_watermark = partition_log.high_watermark
        target = step.offset
        if target < before:
            partition_log.truncate_to(target)
            log.info("%s truncated to %d (%s)", tp, target, self.policy.value)
            fields: dict[str, Any] = {"policy": self.policy.value, "log_end_offset": before,
                                      "truncated_to": target}
            if leader_epoch_end is not None:
                fields["leader_epoch_end"] = leader_epoch_end
                fields["rounds"] = rounds
            else:
                fields["high_watermark"] = high_watermark
            self._trace.emit(TraceEvent.of(
                "replication", ReplicationEvent.TRUNCATE.value, f"{tp}@{self.broker_id}",
                ReplicaRole.FOLLOWER.value, ReplicaRole.FOLLOWER.value, **fields,
            ))
        partition_log.high_watermark = min(
            partition_log.high_watermark, partition_log.log_end_offset
        )
        followed.truncated = True

    def _follower_throttled(self, tp: TopicPartition, log_end_offset: int) -> bool:
        """KIP-73: hold back a throttled replica that is catching up while the follower's
        ``follower.replication.throttled.rate`` is used up (an in-sync one is never held)."""
        quotas = self.quotas
        if quotas is None or not quotas.follower_throttled(tp.topic, tp.partition):
            return False
        catching_up = log_end_offset < self._leader_high_watermark.get(tp, 0)
        return catching_up and quotas.follower_exceeded()

    async def _fetch_once(self, connection: _Connection,
                          partitions: dict[TopicPartition, _Followed]) -> None:
        topics: dict[str, list[dict[str, Any]]] = {}
        now = trio.current_time()
        for tp, item in partitions.items():
            partition_log = self._get_log(tp)
            if partition_log is None or not item.truncated or not item.ready(now):
                continue
            if self._follower_throttled(tp, partition_log.log_end_offset):
                continue
            topics.setdefault(tp.topic, []).append({
                "partition": tp.partition,
                "current_leader_epoch": item.leader_epoch,
                "fetch_offset": partition_log.log_end_offset,
                "log_start_offset": partition_log.log_start_offset,
                "partition_max_bytes": PARTITION_MAX_BYTES,
            })
        if not topics:
            await self._idle(partitions)
            return
        response = await connection.call(api_versions.FETCH, FETCH_VERSION, {
            "replica_id": self.broker_id, "max_wait": FETCH_MAX_WAIT_MS, "min_bytes": 1,
            "max_bytes": FETCH_MAX_BYTES, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": p} for t, p in topics.items()],
            "forgotten_topics_data": [], "rack_id": "",
        })
        # A cancelled loop stops here only after the answer is applied: appends are not
        # abandoned half way.
        with trio.CancelScope(shield=True):
            progressed = False
            for topic in response.responses:
                for result in topic.partitions:
                    tp = TopicPartition(topic.topic, int(result.partition_index))
                    followed = self._followed.get(tp)
                    if followed is None or followed is not partitions.get(tp):
                        continue  # re-assigned while the fetch was in flight
                    partition_log = self._get_log(tp)
                    if partition_log is None:
                        continue
                    code = int(result.error_code)
                    if code != 0:
                        self._delay(tp, followed, "Fetch", code)
                        continue
                    records = rb.whole_batches(result.records or b"")
                    self._leader_high_watermark[tp] = int(result.high_watermark)
                    try:
                        if records:
                            await partition_log.append_as_follower(records)
                            progressed = True
                            if self.quotas is not None and self.quotas.follower_throttled(
                                tp.topic, tp.partition
                            ):
                                self.quotas.record_follower(len(records))
                        high_watermark = min(int(result.high_watermark),
                                             partition_log.log_end_offset)
                        if high_watermark > partition_log.high_watermark:
                            partition_log.high_watermark = high_watermark
                            progressed = True
                        # DeleteRecords reaches followers through the leader's log start
                        # offset in every answer (Kafka's maybeIncrementLogStartOffset)
                        partition_log.maybe_increment_log_start_offset(
                            int(getattr(result, "log_start_offset", -1)))
                    except StorageError as error:
                        log.warning("follower append to %s failed: %s; waiting for "
                                    "LeaderAndIsr", tp, error)
                        followed.failed = True
            if progressed:
                self._on_progress()
