"""The trio pump of the broker node: requests, timers and disk completions in, effects out.

Every replication decision of this broker is taken by :class:`~impl.broker.node.BrokerNode`
(produce and acks, both sides of fetch, HW, ISR changes, truncation, controller requests and
their fencing, idempotent-producer state). :class:`ReplicaManager` turns the request handlers'
calls, the follower fetch loops' answers and the periodic ISR scan into node inputs, and carries
out the node's effects:

* ``Append``: awaited on the storage engine (``PartitionLog.append_as_leader`` /
  ``append_as_follower``, which wait for the partition lock), its completion stepped as
  ``Appended``;
* ``Reply``: wakes the produce waiting for that answer;
* ``Send``: a follower request, handed to :class:`~impl.broker.replica_fetcher.ReplicaFetcher`;
* ``WriteIsr``: handed to the broker's ZooKeeper writer, whose result comes back through
  :meth:`ReplicaManager.isr_written`;
* ``RoleChanged``, ``HighWatermarkMoved``, ``LogChanged``: start or stop fetch loops, wake
  the delayed fetches :mod:`impl.broker.purgatory` says they wake.

Storage is reached only through the storage engine's facade (``LogManager`` / ``PartitionLog``):
this module never touches files.
"""

from __future__ import annotations

import functools
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, cast

import trio

from impl.controller.requests import (
    ControllerRequest,
    ControllerResponse,
    LeaderAndIsrRequest,
    StopReplicaRequest,
)
from impl.storage import LogManager, PartitionLog, TopicPartition
from impl.storage.errors import StorageError
from impl.trace import TraceSink

from . import group_coordinator as gc
from . import replication
from .node import (
    Append,
    Appended,
    BrokerNode,
    DeleteRecords,
    DeleteRecordsReply,
    DirsFailed,
    Effect,
    EpochCall,
    EpochReply,
    FetchCall,
    FetchReply,
    GroupCall,
    GroupTick,
    IsrScan,
    IsrWritten,
    LeaderAndIsr,
    ListOffsetsCall,
    ListOffsetsReply,
    NodeConfig,
    OtherControllerRequest,
    Produce,
    ProduceReply,
    Reply,
    ReportDirFailure,
    RoleChanged,
    Send,
    StopReplica,
    Tick,
    WriteIsr,
    append_error,
)
from .node_store import LogManagerStore
from .producer_state import PartitionProducerState
from .purgatory import Change, Purgatory, appended, changes_of
from .replication import ReplicaState, TruncationPolicy

log = logging.getLogger(__name__)

NONE: Final = 0
#: Bytes per read when the producer state is rebuilt from the log.
REPLAY_READ_BYTES: Final = 1 << 20
#: The ``client`` of the requests this process makes of its own node.
LOCAL: Final = -2


@dataclass(frozen=True, slots=True)
class ProduceResult:
    """One partition's produce outcome."""

    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


class _TrioStore(LogManagerStore):
    """The node's storage port in the trio broker: fetched records stay file slices (sent with
    ``os.sendfile``)."""

    def read_records(self, tp: TopicPartition, offset: int, max_bytes: int,
                     max_offset: int | None) -> object:
        """File slices of whole batches (the caller closes them)."""
        partition = self.manager.get(tp)
        assert partition is not None
        return tuple(partition.read(offset, max_bytes, max_offset))


class _Waiter:
    """A produce or a DeleteRecords waiting for its answer."""

    __slots__ = ("done", "reply")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.reply: Any = None


class AppendedProduce:
    """A Produce's partitions appended, their answers not necessarily known yet
    (:meth:`ReplicaManager.append_partitions`)."""

    __slots__ = ("_deadline", "_manager", "_waiters")

    def __init__(self, manager: ReplicaManager, waiters: list[tuple[int, _Waiter]],
                 deadline: float) -> None:
        self._manager = manager
        self._waiters = waiters
        self._deadline = deadline

    def answered(self) -> bool:
        """Whether every partition has its answer (acks 0 and 1, refusals, a full ISR of one)."""
        return all(waiter.reply is not None for _, waiter in self._waiters)

    async def results(self) -> list[ProduceResult]:
        """Each partition's result in request order, once all are answered (past the request's
        timeout the node answers the rest with REQUEST_TIMED_OUT)."""
        try:
            await self._manager._wait_replies([waiter for _, waiter in self._waiters],
                                              self._deadline)
        finally:
            self._manager._forget(self._waiters)
        results: list[ProduceResult] = []
        for _, waiter in self._waiters:
            reply = waiter.reply
            assert isinstance(reply, ProduceReply)
            results.append(ProduceResult(reply.error, reply.base_offset, reply.log_append_time_ms,
                                         reply.log_start_offset, reply.error_message))
        return results


class _Watch:
    """A task waiting in :meth:`ReplicaManager.wait_changed` (a delayed fetch, or a request
    waiting for metadata); the purgatory decides when it wakes."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = trio.Event()


class _GroupWaiter:
    """A group request waiting for its answer."""

    __slots__ = ("body", "done")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.body: Mapping[str, Any] | None = None


class ReplicaManager:
    """The replicas of this broker: the node and its pump.

    Args:
        broker_id: this broker.
        logs: the storage engine's log manager.
        min_insync_replicas: ``min.insync.replicas``.
        message_max_bytes: ``message.max.bytes`` (checked by the storage engine).
        timestamp_difference_max_ms: ``message.timestamp.difference.max.ms``.
        trace: where the node's events go.
        replica_lag_time_max_ms: ``replica.lag.time.max.ms``.
        fetch_backoff_ms: ``replica.fetch.backoff.ms``.
        truncation_policy: ``replica.truncation.policy``.
        fetch_max_bytes: a follower fetch's per-partition limit.
        request_retry_ms: a follower request unanswered this long is sent again.
    """

    def __init__(
        self,
        broker_id: int,
        logs: LogManager,
        *,
        min_insync_replicas: int,
        message_max_bytes: int,
        timestamp_difference_max_ms: int = 2**63 - 1,
        trace: TraceSink | None = None,
        replica_lag_time_max_ms: int = 30_000,
        fetch_backoff_ms: int = 1_000,
        truncation_policy: TruncationPolicy = TruncationPolicy.LEADER_EPOCH,
        fetch_max_bytes: int = 4 * 1024 * 1024,
        request_retry_ms: int = 30_000,
    ) -> None:
        self.broker_id = broker_id
        self.logs = logs
        self.message_max_bytes = message_max_bytes
        self.node = BrokerNode(
            NodeConfig(
                broker_id,
                min_insync_replicas=min_insync_replicas,
                replica_lag_time_max_ms=replica_lag_time_max_ms,
                fetch_backoff_ms=fetch_backoff_ms,
                request_retry_ms=request_retry_ms,
                fetch_max_bytes=fetch_max_bytes,
                truncation_policy=truncation_policy,
                timestamp_difference_max_ms=timestamp_difference_max_ms,
            ),
            _TrioStore(logs),
            trace=trace,
            clock_ms=lambda: int(trio.current_time() * 1000),
            wall_ms=lambda: int(time.time() * 1000),
        )
        #: the tasks waiting for a change (delayed fetches, by their partitions)
        self.purgatory: Purgatory[_Watch] = Purgatory()
        #: while set (in synchronous code only, never across an await), :meth:`notify` only
        #: collects what it was told (``_held``, ``_held_all``): the code that set it releases
        #: them at once when it is done (:meth:`_release`)
        self._quiet = False
        self._held: dict[TopicPartition, bool] = {}
        self._held_all: bool | None = None
        self._stepping = False
        self._deferred: list[object] = []
        self._waiters: dict[int, _Waiter] = {}
        self._group_waiters: dict[int, _GroupWaiter] = {}
        #: starts a task (set by the group pump): the group coordinator's appends to
        #: ``__consumer_offsets`` (a leader's) are carried out in their own task, whichever step
        #: emitted them; a follower's are its fetcher's, like any partition's
        self.spawn: Callable[[Callable[[], Awaitable[None]]], None] | None = None
        self._request_ids = itertools.count(1)
        self.on_state_change: Callable[[], None] | None = None
        #: follower fetch loops (set by the broker): carries the node's ``Send`` effects
        self.fetcher: Any = None
        #: writes a new ISR through ZooKeeper (set by the broker); reports to
        #: :meth:`isr_written`
        self.isr_updater: Callable[[WriteIsr], None] | None = None
        #: tells the controller a log dir failed (set by the broker)
        self.dir_failure_reporter: Callable[[], None] | None = None
        #: the broker is stopping: delayed fetches answer with what they have at once
        self.stopping = False

    # --- the node's state ------------------------------------------------------------------

    @property
    def states(self) -> dict[TopicPartition, ReplicaState]:
        """The node's replica states."""
        return self.node.states

    @property
    def trace(self) -> TraceSink:
        """Where the node's (and this broker's other cores') events go."""
        return self.node.trace

    @property
    def fence(self) -> replication.ControllerFence:
        """The node's controller fence."""
        return self.node.fence

    @property
    def min_insync_replicas(self) -> int:
        """``min.insync.replicas``."""
        return self.node.config.min_insync_replicas

    @property
    def min_insync_of(self) -> Callable[[str], int]:
        """A topic's ``min.insync.replicas``."""
        return self.node.min_insync_of

    @min_insync_of.setter
    def min_insync_of(self, lookup: Callable[[str], int]) -> None:
        self.node.min_insync_of = lookup

    @property
    def replica_lag_time_max_ms(self) -> int:
        """``replica.lag.time.max.ms``."""
        return self.node.config.replica_lag_time_max_ms

    @replica_lag_time_max_ms.setter
    def replica_lag_time_max_ms(self, value: int) -> None:
        self.node.config = replace(self.node.config, replica_lag_time_max_ms=value)

    @property
    def timestamp_difference_max_ms(self) -> int:
        """``message.timestamp.difference.max.ms``."""
        return self.node.config.timestamp_difference_max_ms

    @timestamp_difference_max_ms.setter
    def timestamp_difference_max_ms(self, value: int) -> None:
        self.node.config = replace(self.node.config, timestamp_difference_max_ms=value)

    @property
    def wall_ms(self) -> Callable[[], int]:
        """The wall clock timestamps are checked against."""
        return self.node.wall_ms

    @wall_ms.setter
    def wall_ms(self, clock: Callable[[], int]) -> None:
        self.node.wall_ms = clock

    def leader_log(self, tp: TopicPartition) -> tuple[int, PartitionLog | None]:
        """(error code, live log) for a partition this broker must lead."""
        code, found = self.node.leader_log(tp)
        return code, cast("PartitionLog | None", found)

    def producer_state(self, tp: TopicPartition) -> PartitionProducerState:
        """The idempotence state of ``tp`` (rebuilt from the log on first use)."""
        return self.node.producer_state(tp)

    # --- waiting ---------------------------------------------------------------------------

    def notify(self, *, records: bool = True,
               partitions: Iterable[TopicPartition] | None = None) -> None:
        """Wake the tasks waiting for a log or HW change; ``records=False``: only a high
        watermark moved, which wakes only the waiters that asked for HW moves too;
        ``partitions``: what changed is those partitions' logs (or HWs) alone, which wakes the
        delayed fetches of those partitions and every waiter that named none (default: anything
        may have changed, every waiter wakes). :meth:`wake` with the same
        :class:`~impl.broker.purgatory.Change`."""
        self.wake(Change(None if partitions is None else tuple(partitions), records))

    def wake(self, change: Change) -> None:
        """Wake the waiters ``change`` wakes (:meth:`Purgatory.woken
        <impl.broker.purgatory.Purgatory.woken>`), or hold it while ``_quiet`` is set."""
        if self._quiet:
            if change.partitions is None:
                self._held_all = change.records or bool(self._held_all)
            else:
                held = self._held
                for tp in change.partitions:
                    held[tp] = change.records or held.get(tp, False)
            return
        for watch in self.purgatory.woken(change):
            watch.event.set()

    def _release(self) -> None:
        """The notifications held while ``_quiet`` was set, now (``_quiet`` is clear)."""
        held_all, self._held_all = self._held_all, None
        held, self._held = self._held, {}
        if held_all is not None:
            self.notify(records=held_all)
        for tp, records in held.items():
            self.notify(records=records, partitions=(tp,))

    async def wait_changed(self, deadline: float, *, records_only: bool = False,
                           partitions: Iterable[TopicPartition] | None = None) -> None:
        """Wait until the next :meth:`notify` or ``deadline`` (``trio.current_time`` scale);
        ``records_only``: not woken by a notify of a lone HW move (a follower's delayed fetch,
        whose records end at the leader's LEO: as Kafka's DelayedFetch, it completes on new
        records, not on the HW the other followers move); ``partitions``: woken only by a
        notify of one of them or of everything (Kafka's purgatory watches a delayed fetch by
        its partitions: an append to another partition does not re-evaluate it)."""
        watch = _Watch()
        self.purgatory.watch(watch, partitions, records_only=records_only)
        try:
            with trio.move_on_at(deadline):
                await watch.event.wait()
        finally:
            self.purgatory.forget(watch)

    def waiting_fetches(self) -> int:
        """Delayed fetches waiting on named partitions now (each is forgotten when it wakes)."""
        return self.purgatory.watching_partitions()

    # --- the pump --------------------------------------------------------------------------

    def step(self, event: object) -> list[Effect]:
        """Step the node and carry out every effect that needs no waiting; returns the
        appends (for :meth:`carry_out`) and the replies to requests stepped here.

        An input arriving while a step runs (a dir failure the storage engine reports from
        inside a read) is stepped right after it."""
        if self._stepping:
            self._deferred.append(event)
            return []
        pending: list[Effect] = []
        self._stepping = True
        try:
            # a StopReplica deleting many logs writes each dir's checkpoints once per step
            with self.logs.batched_checkpoints():
                self._carry_out_now(self.node.step(event), pending)
        finally:
            self._stepping = False
        while self._deferred:
            pending.extend(self.step(self._deferred.pop(0)))
        return pending

    def _carry_out_now(self, effects: list[Effect], pending: list[Effect]) -> None:
        for effect in effects:
            kind = type(effect)
            e: Any = effect
            if kind is Reply:
                message = e.message
                if type(message) is gc.Respond:
                    group_waiter = self._group_waiters.get(message.request_id)
                    if group_waiter is not None:
                        group_waiter.body = message.body
                        group_waiter.done.set()
                    continue
                waiter = (self._waiters.get(message.request_id)
                          if type(message) is ProduceReply
                          or type(message) is DeleteRecordsReply else None)
                if waiter is not None:
                    waiter.reply = message
                    waiter.done.set()
                else:
                    pending.append(effect)
            elif kind is Append:
                # The group coordinator's own writes (the node marks them) may come out of any
                # step, whose caller may not carry appends: each runs in a task of its own.
                # Every other append is its step's caller's: a follower's is its fetcher's,
                # carried before it fetches again (spawned, it ran after the fetcher's next
                # fetch, which reported the old end offset: each acks=all commit on a replicated
                # __consumer_offsets then waited for that parked fetch's 500 ms).
                if self.spawn is not None and e.coordinator:
                    self.spawn(functools.partial(self._carry_out_alone, e))
                else:
                    pending.append(effect)
            elif kind is Send:
                if self.fetcher is not None:
                    self.fetcher.send(e.target, e.message)
            elif kind is WriteIsr:
                if self.isr_updater is not None:
                    self.isr_updater(e)
                else:
                    self._carry_out_now(self.node.step(IsrWritten(e.tp, e.isr, None)), pending)
            elif kind is RoleChanged:
                if self.fetcher is not None:
                    state = e.state
                    if state is not None and state.role is replication.ReplicaRole.FOLLOWER:
                        self.fetcher.follow(e.tp, state.leader, state.leader_epoch)
                    else:
                        self.fetcher.unfollow(e.tp)
            elif kind is ReportDirFailure and self.dir_failure_reporter is not None:
                self.dir_failure_reporter()
        # (LogChanged, HighWatermarkMoved and RoleChanged wake the waiters the purgatory says)
        for change in changes_of(effects):
            self.wake(change)

    async def carry_out(self, effects: list[Effect], *, wake: bool = True) -> list[Effect]:
        """Carry out appends (each completion stepped at once); returns the other replies.
        ``wake=False``: the waiters are not woken here; what would have woken them is held and
        the caller owes :meth:`_release`."""
        replies: list[Effect] = []
        queue = list(effects)
        while queue:
            effect = queue.pop(0)
            if type(effect) is not Append:
                replies.append(effect)
                continue
            assert isinstance(effect, Append)
            done = await self._append(effect)
            if wake:
                more = self.step(done)
                self.wake(appended(effect.tp))
            else:
                self._quiet = True
                try:
                    more = self.step(done)
                    self.wake(appended(effect.tp))  # held until the caller's release
                finally:
                    self._quiet = False
            queue[:0] = more
        return replies

    async def _carry_out_alone(self, effect: Append) -> None:
        replies = await self.carry_out([effect])
        del replies  # (answers to this process's own requests went to their waiters)

    async def _append(self, effect: Append) -> Appended:
        tp = effect.tp
        partition = self.logs.get(tp)
        try:
            if partition is None:
                return Appended(tp, effect.token, replication.KAFKA_STORAGE_ERROR,
                                error_message=f"{tp} is not hosted here")
            # (the node decides, asked holding the partition lock, whether the append is still
            # wanted: a LeaderAndIsr may change the role while it waits)
            def guard() -> bool:
                return self.node.append_wanted(effect)

            if effect.leader_epoch is None:
                info = await partition.append_as_follower(effect.records, guard=guard)
            else:
                info = await partition.append_as_leader(effect.records, effect.leader_epoch,
                                                        effect.timestamp_window_ms, guard=guard)
        except (StorageError, OSError) as error:
            if isinstance(error, OSError):
                log.warning("append to %s failed: %s", tp, error)
            code, message = append_error(error)
            return Appended(tp, effect.token, code, error_message=message)
        return Appended(tp, effect.token, NONE, info[0], info[1], info[2])

    # --- produce ---------------------------------------------------------------------------

    async def produce(
        self, tp: TopicPartition, records: bytes | None, acks: int, timeout_ms: int
    ) -> ProduceResult:
        """:meth:`produce_partitions` of one partition."""
        (result,) = await self.produce_partitions([(tp, records)], acks, timeout_ms)
        return result

    async def produce_partitions(
        self, items: Sequence[tuple[TopicPartition, bytes | None]], acks: int, timeout_ms: int
    ) -> list[ProduceResult]:
        """:meth:`append_partitions`, then its results.

        Returns:
            Each partition's result, in the order of ``items`` (error codes per Kafka: 3, 6, 19,
            20, 21, 56, 2, 10, 87, 45, 47, 7).
        """
        pending = await self.append_partitions(items, acks, timeout_ms)
        return await pending.results()

    async def append_partitions(
        self, items: Sequence[tuple[TopicPartition, bytes | None]], acks: int, timeout_ms: int
    ) -> AppendedProduce:
        """Append each partition's batch as leader, in order, honouring idempotence; the answers
        are then awaited together (:meth:`AppendedProduce.results`), as Kafka's
        ``appendRecords`` appends a request's partitions and then parks one ``DelayedProduce``
        for all of them (waiting partition by partition cost a request of n partitions n
        replication rounds). ``timeout_ms`` counts from now.
        """
        deadline = trio.current_time() + max(timeout_ms, 0) / 1000.0
        waiters: list[tuple[int, _Waiter]] = []
        try:
            try:
                for tp, records in items:
                    request_id = next(self._request_ids)
                    waiter = self._waiters[request_id] = _Waiter()
                    waiters.append((request_id, waiter))
                    self._quiet = True
                    try:
                        appends = self.step(Produce(
                            LOCAL, request_id, tp, records if records is not None else b"",
                            acks, timeout_ms))
                    finally:
                        self._quiet = False
                    await self.carry_out(appends, wake=False)
            finally:
                # one wake-up once every partition is appended: a follower's delayed fetch
                # then carries all of them (as Kafka completes delayed requests after the
                # request's appends), not the first alone
                self._release()
        except BaseException:
            self._forget(waiters)
            raise
        return AppendedProduce(self, waiters, deadline)

    def _forget(self, waiters: Sequence[tuple[int, _Waiter]]) -> None:
        for request_id, _ in waiters:
            self._waiters.pop(request_id, None)

    async def _wait_replies(self, waiters: list[_Waiter], deadline: float) -> None:
        """Wait until every waiter has its reply; past ``deadline`` (trio's clock) a periodic
        tick lets the node time the rest out (it answers them on a tick past their
        deadlines)."""
        for waiter in waiters:
            while waiter.reply is None:
                with trio.move_on_at(deadline + 0.001):
                    await waiter.done.wait()
                if waiter.reply is None:
                    await self.check_isr_all()
                    deadline = trio.current_time()

    # --- DeleteRecords ---------------------------------------------------------------------

    async def delete_records(self, offsets: Mapping[TopicPartition, int], timeout_ms: int
                             ) -> dict[TopicPartition, DeleteRecordsReply]:
        """DeleteRecords: step each partition's request (the node moves the leader's log start
        offset and decides when the followers have followed), then wait for every answer; the
        node times them out on a tick past ``timeout_ms``."""
        waiters: dict[TopicPartition, tuple[int, _Waiter]] = {}
        try:
            for tp, offset in offsets.items():
                request_id = next(self._request_ids)
                waiter = self._waiters[request_id] = _Waiter()
                waiters[tp] = (request_id, waiter)
                self.step(DeleteRecords(LOCAL, request_id, tp, offset, timeout_ms))
            self.notify()  # a delayed fetch may answer at once with the new log start offset
            await self._wait_replies([waiter for _, waiter in waiters.values()],
                                     trio.current_time() + max(timeout_ms, 0) / 1000.0)
        finally:
            for request_id, _ in waiters.values():
                self._waiters.pop(request_id, None)
        answers: dict[TopicPartition, DeleteRecordsReply] = {}
        for tp, (_, waiter) in waiters.items():
            assert isinstance(waiter.reply, DeleteRecordsReply)
            answers[tp] = waiter.reply
        return answers

    # --- the group coordinator -------------------------------------------------------------

    def host_groups(self, coordinator: gc.GroupCoordinator, commit_timeout_ms: int) -> None:
        """The node hosts ``coordinator`` (:mod:`impl.broker.node_groups`)."""
        self.node.host_groups(coordinator, commit_timeout_ms)

    async def group_call(self, request: gc.Request) -> Mapping[str, Any]:
        """Step a group request into the node and wait for its answer."""
        waiter = self._group_waiters[request.request_id] = _GroupWaiter()
        try:
            await self.carry_out(self.step(GroupCall(LOCAL, request)))
            await waiter.done.wait()
        finally:
            del self._group_waiters[request.request_id]
        assert waiter.body is not None
        return waiter.body

    async def group_tick(self) -> None:
        """Time passed for the group coordinator."""
        await self.carry_out(self.step(GroupTick()))

    # --- the leader side of fetch ----------------------------------------------------------

    def fetch_partition(self, tp: TopicPartition, replica_id: int, fetch_offset: int,
                        leader_epoch: int, max_bytes: int, *, log_start_offset: int = -1,
                        incarnation: int = -1, broker_epoch: int = -1,
                        asked_again: bool = False) -> FetchReply:
        """One partition of a Fetch (a follower's when ``replica_id >= 0``, with its log start
        offset, from ``incarnation``: its connection); ``max_bytes`` below 0 reads nothing (the
        response is full); ``asked_again``: a delayed fetch woken, its follower's position
        already recorded."""
        replies = self.step(FetchCall(0, replica_id, incarnation, tp, fetch_offset,
                                      leader_epoch, max_bytes, LOCAL, log_start_offset,
                                      broker_epoch, asked_again))
        for effect in replies:
            if type(effect) is Reply and type(effect.message) is FetchReply:
                found: FetchReply = effect.message
                return found
        raise AssertionError(f"no fetch answer for {tp}")

    def list_offsets(self, tp: TopicPartition, timestamp: int, current_leader_epoch: int,
                     replica_id: int = -1) -> ListOffsetsReply:
        """ListOffsets for one partition (a follower's when ``replica_id >= 0``)."""
        for effect in self.step(ListOffsetsCall(0, replica_id, tp, timestamp,
                                                current_leader_epoch, LOCAL)):
            if type(effect) is Reply and type(effect.message) is ListOffsetsReply:
                found: ListOffsetsReply = effect.message
                return found
        raise AssertionError(f"no ListOffsets answer for {tp}")

    def offset_for_leader_epoch(self, tp: TopicPartition, current_leader_epoch: int,
                                epoch: int) -> EpochReply:
        """OffsetForLeaderEpoch for one partition (KIP-279)."""
        for effect in self.step(EpochCall(0, -1, tp, current_leader_epoch, epoch)):
            if type(effect) is Reply and type(effect.message) is EpochReply:
                found: EpochReply = effect.message
                return found
        raise AssertionError(f"no OffsetForLeaderEpoch answer for {tp}")

    def record_follower_fetch(self, tp: TopicPartition, replica_id: int, fetch_offset: int,
                              current_leader_epoch: int = -1) -> None:
        """A follower fetched from ``fetch_offset`` (reads nothing; see
        :meth:`fetch_partition`)."""
        self.fetch_partition(tp, replica_id, fetch_offset, current_leader_epoch, -1)

    # --- ISR -------------------------------------------------------------------------------

    def isr_written(self, tp: TopicPartition, isr: tuple[int, ...],
                    partition_epoch: int | None) -> None:
        """The ISR write the node asked for landed (``partition_epoch``: the new zkVersion)
        or failed (None)."""
        self.step(IsrWritten(tp, isr, partition_epoch))

    def isr_changed(self, tp: TopicPartition, isr: tuple[int, ...], partition_epoch: int) -> None:
        """The leader's ISR write succeeded."""
        self.isr_written(tp, isr, partition_epoch)

    async def check_isr_all(self) -> None:
        """The periodic scan: followers that stopped fetching, produce and DeleteRecords
        timeouts; a scan of more partitions than the node visits in one step goes on in
        :class:`IsrScan` steps, other tasks running between them."""
        self.step(Tick(periodic=True))
        while self.node.isr_scan_pending:
            await trio.lowlevel.checkpoint()
            self.step(IsrScan())

    # --- controller requests ---------------------------------------------------------------

    def _controller(self, event: object) -> ControllerResponse:
        response: ControllerResponse | None = None
        for effect in self.step(event):
            if type(effect) is Reply:
                message: Any = effect.message
                response = message[1]
        assert response is not None
        if self.on_state_change is not None:
            self.on_state_change()
        return response

    def leader_and_isr(self, request: LeaderAndIsrRequest) -> ControllerResponse:
        """Apply a LeaderAndIsr request (the node decides; fetch loops follow)."""
        return self._controller(LeaderAndIsr(LOCAL, 0, request))

    def stop_replica(self, request: StopReplicaRequest) -> ControllerResponse:
        """Apply a StopReplica request."""
        return self._controller(StopReplica(LOCAL, 0, request))

    def other_controller_request(self, request: ControllerRequest) -> ControllerResponse:
        """Fence UpdateMetadata (or another controller request); the metadata cache is the
        caller's."""
        response: ControllerResponse | None = None
        for effect in self.step(OtherControllerRequest(LOCAL, 0, request)):
            if type(effect) is Reply:
                message: Any = effect.message
                response = message[1]
        assert response is not None
        return response

    def mark_dir_offline(self, partitions: Iterable[TopicPartition] = ()) -> None:
        """A log dir failed: its replicas go OFFLINE (KIP-112) and stop serving."""
        del partitions  # (the node reads the offline replicas from the storage engine)
        self.step(DirsFailed())


__all__ = [
    "ProduceResult",
    "ReplicaManager",
    "replication",
]
