"""ControllerService: the trio shell around the controller core.

Theory of operation. Every broker runs one service. It is a candidate until it wins the election:
one ``multi`` creates the ephemeral ``/controller`` and sets ``/controller_epoch`` to epoch + 1
conditional on the version it read, so of two candidates exactly one succeeds and the epoch's
znode version identifies the winner's term (KAFKA-6082). The winner reads ZooKeeper (arming the
watches it needs), hands the snapshot to the core (:class:`impl.controller.controller.Controller`)
and then loops: one inbox receives coordinator events (pumped from ``next_event``) and broker
responses (from one sender task per broker, so a slow broker never stalls the controller); a
watch event turns into the re-read it calls for; the core's effects are carried out — writes and
re-reads concurrently (kazoo pipelines them), requests queued to the per-broker senders — and
their results fed back until the core is idle. On resignation (fenced write, expired session,
``/controller`` lost) the service becomes a candidate again; a connection loss is followed, on
reconnect, by a check that this broker still holds ``/controller`` and the same epoch version,
then a full resynchronisation (watches were dropped with the connection).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import trio

from impl.ports import Clock, SystemClock
from impl.trace import NullTraceSink, TraceSink

from .admin import ensure_cluster_paths, ensure_path
from .controller import (
    TP,
    BrokersRead,
    ClusterSnapshot,
    Controller,
    ControllerConfig,
    ControllerEffect,
    ControllerInput,
    ControllerMoved,
    DeleteTopicsRead,
    Elected,
    EmitTrace,
    IsrChangesRead,
    LogDirEventsRead,
    PartitionStatesRead,
    PreferredElectionRead,
    ReadPartitionStates,
    ReassignmentRead,
    Resign,
    ResponseReceived,
    SendRequest,
    SessionExpired,
    TopicConfigsRead,
    TopicsRead,
    WriteCompleted,
    ZkWrite,
)
from .coordinator import (
    ConnectionLossError,
    Coordinator,
    CoordinatorClosedError,
    CoordinatorError,
    CoordinatorEvent,
    CreateOp,
    NodeExistsError,
    NoNodeError,
    SessionEvent,
    SessionExpiredError,
    SessionState,
    SetOp,
    SetResult,
    WatchEvent,
    WatchEventType,
    multi_succeeded,
)
from .requests import ControllerRequest, ControllerResponse
from .znodes import (
    BROKER_IDS_PATH,
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    DELETE_TOPICS_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    PREFERRED_REPLICA_ELECTION_PATH,
    REASSIGN_PARTITIONS_PATH,
    TOPICS_PATH,
    BrokerRegistration,
    LeaderIsr,
    ReassignmentTarget,
    TopicAssignment,
    ZnodeFormatError,
    broker_path,
    decode_broker,
    decode_controller_epoch,
    decode_isr_change,
    decode_log_dir_event,
    decode_partition_state,
    decode_preferred_election,
    decode_reassignment,
    decode_topic,
    encode_controller,
    encode_controller_epoch,
    partition_state_path,
    topic_path,
)

_logger = logging.getLogger(__name__)

#: Kafka's config change notices and topic configs (read for unclean.leader.election.enable)
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_TOPICS_PATH = "/config/topics"
UNCLEAN_KEY = "unclean.leader.election.enable"

T = TypeVar("T")

#: ``send(broker_id, request) -> response``, supplied by the broker's transport.
SendFunction = Callable[[int, ControllerRequest], Awaitable[ControllerResponse]]

#: Bounds: queued inputs, queued requests per broker, concurrent ZooKeeper reads, election tries.
INBOX_MAX = 100_000
SENDER_QUEUE_MAX = 10_000
READS_IN_FLIGHT_MAX = 512
ELECTION_ATTEMPTS_MAX = 16


@dataclass(frozen=True, slots=True)
class _Response:
    term: int
    broker_id: int
    request: ControllerRequest
    response: ControllerResponse | None


class _ClosedError(Exception):
    """The coordinator was closed: the service ends."""


async def _gather(calls: Sequence[Callable[[], Awaitable[T]]], limit: int) -> list[T]:
    """Run ``calls`` concurrently (at most ``limit`` at once); the first CoordinatorError of
    any of them is raised as itself (not in an exception group) after the others are cancelled."""
    results: list[T | None] = [None] * len(calls)
    failures: list[CoordinatorError] = []
    limiter = trio.CapacityLimiter(limit)

    async with trio.open_nursery() as nursery:

        async def run(index: int) -> None:
            async with limiter:
                try:
                    results[index] = await calls[index]()
                except CoordinatorError as error:
                    failures.append(error)
                    nursery.cancel_scope.cancel()

        for index in range(len(calls)):
            nursery.start_soon(run, index)
    if failures:
        raise failures[0]
    return results  # type: ignore[return-value]


class ControllerService:
    """Runs the controller election and, when elected, the controller (see the module doc).

    Args:
        unclean_leader_election: ``unclean.leader.election.enable``.
        partitions_per_write_max: partitions per ZooKeeper ``multi``.
        request_timeout_s: how long one controller-to-broker request may take.
        trace_sink: where the core's trace events go.
        clock: the time written into ``/controller``.
    """

    def __init__(
        self,
        *,
        unclean_leader_election: bool = False,
        partitions_per_write_max: int = 500,
        request_timeout_s: float = 30.0,
        trace_sink: TraceSink | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._unclean = unclean_leader_election
        self._partitions_per_write_max = partitions_per_write_max
        self._request_timeout_s = request_timeout_s
        self._trace_sink: TraceSink = trace_sink if trace_sink is not None else NullTraceSink()
        self._clock: Clock = clock if clock is not None else SystemClock()
        self.core: Controller | None = None
        self._term = 0
        self._active_changed = trio.Event()
        self._idle_changed = trio.Event()
        self._ensured_paths: set[str] = set()
        self._idle = False

    # --- status ------------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        """True while this broker is the controller."""
        return self.core is not None and self.core.active

    @property
    def epoch(self) -> int:
        """The controller epoch this broker last won (0 if never)."""
        return 0 if self.core is None else self.core.epoch

    def _notify(self) -> None:
        self._active_changed.set()
        self._active_changed = trio.Event()

    async def wait_active(self) -> None:
        """Wait until this broker is the controller."""
        while not self.is_active:
            await self._active_changed.wait()

    async def wait_inactive(self) -> None:
        """Wait until this broker is not the controller."""
        while self.is_active:
            await self._active_changed.wait()

    async def wait_idle(self) -> None:
        """Wait until the controller has no write or read outstanding and its requests are out."""
        while self.core is None or self.core.writes_outstanding or not self._idle:
            await self._active_changed.wait()

    # --- main loop ---------------------------------------------------------------------------

    async def run(
        self,
        coordinator: Coordinator,
        broker_id: int,
        send: SendFunction,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run for election and act as controller when elected, until the coordinator closes.

        Args:
            coordinator: this broker's ZooKeeper session.
            broker_id: this broker's id.
            send: delivers a request to a broker and returns its response (may raise; a failed
                delivery is reported to the core as no response).
        """
        self.core = Controller(ControllerConfig(broker_id, self._unclean,
                                                self._partitions_per_write_max))
        self._coordinator = coordinator
        self._broker_id = broker_id
        self._send = send
        self._idle = False
        inbox_send, self._inbox = trio.open_memory_channel[CoordinatorEvent | _Response](
            INBOX_MAX
        )
        self._inbox_send = inbox_send
        self._senders: dict[int, trio.MemorySendChannel[tuple[int, ControllerRequest]]] = {}
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._pump)
                task_status.started()
                with contextlib.suppress(_ClosedError, CoordinatorClosedError):
                    await self._candidate_loop()
                nursery.cancel_scope.cancel()
        finally:
            if self.core is not None and self.core.active:
                self.core.active = False
            self._notify()

    async def _pump(self) -> None:
        while True:
            event = await self._coordinator.next_event()
            await self._inbox_send.send(event)
            if isinstance(event, SessionEvent) and event.state is SessionState.CLOSED:
                return

    async def _candidate_loop(self) -> None:
        while True:
            won: tuple[int, int] | None = None
            try:
                won = await self._try_elect()
            except (ConnectionLossError, SessionExpiredError):
                won = None
            if won is not None:
                await self._act(*won)
                continue
            while True:
                item = await self._inbox.receive()
                if isinstance(item, SessionEvent):
                    if item.state is SessionState.CLOSED:
                        raise _ClosedError
                    if item.state is SessionState.CONNECTED:
                        break
                elif isinstance(item, WatchEvent) and item.path == CONTROLLER_PATH and (
                    item.type is WatchEventType.DELETED
                ):
                    break

    async def _try_elect(self) -> tuple[int, int] | None:
        coordinator = self._coordinator
        await ensure_cluster_paths(coordinator)
        with contextlib.suppress(NodeExistsError):
            await coordinator.create(CONTROLLER_EPOCH_PATH, encode_controller_epoch(0))
        for _attempt in range(ELECTION_ATTEMPTS_MAX):
            stat = await coordinator.exists(CONTROLLER_PATH, watch=True)
            if stat is not None:
                if stat.ephemeral_owner == coordinator.session_id:
                    data, epoch_stat = await coordinator.get(CONTROLLER_EPOCH_PATH)
                    return decode_controller_epoch(data), epoch_stat.version
                return None
            data, epoch_stat = await coordinator.get(CONTROLLER_EPOCH_PATH)
            epoch = decode_controller_epoch(data) + 1
            results = await coordinator.multi([
                CreateOp(CONTROLLER_PATH, encode_controller(self._broker_id,
                                                            self._clock.wall_ms()),
                         ephemeral=True),
                SetOp(CONTROLLER_EPOCH_PATH, encode_controller_epoch(epoch), epoch_stat.version),
            ])
            if multi_succeeded(results):
                set_result = results[1]
                assert isinstance(set_result, SetResult)
                return epoch, set_result.stat.version
        return None

    async def _act(self, epoch: int, epoch_zk_version: int) -> None:
        assert self.core is not None
        self._term += 1
        try:
            snapshot = await self._read_snapshot()
        except (ConnectionLossError, SessionExpiredError):
            return
        suspended = False
        try:
            await self._run_core(Elected(epoch, epoch_zk_version, snapshot))
            # a preferred election requested while no controller was active
            await self._run_core(PreferredElectionRead(await self._read_preferred_election()))
            await self._run_core(await self._read_topic_configs())
        except (ConnectionLossError, SessionExpiredError):
            suspended = True  # the session event that follows decides
        self._notify()
        while self.core.active:
            item = await self._inbox.receive()
            try:
                if isinstance(item, _Response):
                    if item.term == self._term:
                        await self._run_core(ResponseReceived(item.broker_id, item.request,
                                                              item.response))
                elif isinstance(item, SessionEvent):
                    if item.state is SessionState.CLOSED:
                        raise _ClosedError
                    if item.state is SessionState.EXPIRED:
                        await self._run_core(SessionExpired())
                    elif item.state is SessionState.SUSPENDED:
                        suspended = True
                    elif suspended:
                        suspended = False
                        await self._revalidate(epoch_zk_version)
                elif not suspended:
                    await self._on_watch(item)
            except (ConnectionLossError, SessionExpiredError):
                suspended = True  # the session event that follows decides
        self._notify()

    async def _revalidate(self, epoch_zk_version: int) -> None:
        assert self.core is not None
        coordinator = self._coordinator
        stat = await coordinator.exists(CONTROLLER_PATH, watch=True)
        _data, epoch_stat = await coordinator.get(CONTROLLER_EPOCH_PATH)
        if (stat is None or stat.ephemeral_owner != coordinator.session_id
                or epoch_stat.version != epoch_zk_version):
            await self._run_core(ControllerMoved())
            return
        self._term += 1
        snapshot = await self._read_snapshot()
        await self._run_core(Elected(self.core.epoch, epoch_zk_version, snapshot))

    # --- effects -----------------------------------------------------------------------------

    async def _run_core(self, event: ControllerInput) -> None:
        assert self.core is not None
        self._idle = False
        queue: list[ControllerEffect] = self.core.handle(event)
        while queue:
            batch, queue = queue, []
            writes: list[ZkWrite] = []
            reads: list[ReadPartitionStates] = []
            for effect in batch:
                if isinstance(effect, EmitTrace):
                    self._trace_sink.emit(effect.event)
                elif isinstance(effect, SendRequest):
                    self._queue_send(effect)
                elif isinstance(effect, ZkWrite):
                    writes.append(effect)
                elif isinstance(effect, ReadPartitionStates):
                    reads.append(effect)
                elif isinstance(effect, Resign):
                    _logger.info("controller %d resigns: %s", self._broker_id, effect.reason.name)
            # Each completion goes to the core as soon as it arrives, so the core's work on one
            # multi's result overlaps ZooKeeper's work on the others; new effects wait for the
            # next round.
            calls: list[Callable[[], Awaitable[None]]] = [
                functools.partial(self._do_write, write, queue) for write in writes
            ]
            calls += [functools.partial(self._do_read, read, queue) for read in reads]
            await _gather(calls, len(calls) or 1)
        self._idle = True
        self._notify()

    async def _ensure_paths(self, paths: Iterable[str]) -> None:
        missing = sorted({p for p in paths if p not in self._ensured_paths},
                         key=lambda p: (p.count("/"), p))
        by_depth: dict[int, list[str]] = {}
        for path in missing:
            by_depth.setdefault(path.count("/"), []).append(path)

        def creator(path: str) -> Callable[[], Awaitable[None]]:
            async def create() -> None:
                with contextlib.suppress(NodeExistsError):
                    await self._coordinator.create(path)
            return create

        for depth in sorted(by_depth):
            await _gather([creator(p) for p in by_depth[depth]], READS_IN_FLIGHT_MAX)
        self._ensured_paths.update(missing)

    async def _do_write(self, write: ZkWrite, queue: list[ControllerEffect]) -> None:
        assert self.core is not None
        try:
            if write.ensure_paths:
                await self._ensure_paths(write.ensure_paths)
            results = await self._coordinator.multi(write.ops)
        except (ConnectionLossError, SessionExpiredError):
            queue.extend(self.core.handle(WriteCompleted(write.write_id, None)))
            return
        queue.extend(self.core.handle(WriteCompleted(write.write_id, results)))

    async def _do_read(self, read: ReadPartitionStates, queue: list[ControllerEffect]) -> None:
        assert self.core is not None
        states = await self._read_states(read.partitions)
        queue.extend(self.core.handle(PartitionStatesRead(states)))

    def _queue_send(self, effect: SendRequest) -> None:
        channel = self._senders.get(effect.broker_id)
        if channel is None:
            send_channel, receive_channel = trio.open_memory_channel[
                tuple[int, ControllerRequest]
            ](SENDER_QUEUE_MAX)
            self._senders[effect.broker_id] = channel = send_channel
            self._nursery.start_soon(self._sender, effect.broker_id, receive_channel)
        try:
            channel.send_nowait((self._term, effect.request))
        except trio.WouldBlock:
            # The broker has not taken SENDER_QUEUE_MAX requests: it is hung. Report this one
            # as undelivered (the controller retries on the broker's next registration change).
            _logger.warning("broker %d is not taking requests; dropping one", effect.broker_id)
            self._inbox_send.send_nowait(_Response(self._term, effect.broker_id, effect.request,
                                                   None))

    async def _sender(self, broker_id: int,
                      requests: trio.MemoryReceiveChannel[tuple[int, ControllerRequest]]) -> None:
        async for term, request in requests:
            response: ControllerResponse | None = None
            with trio.move_on_after(self._request_timeout_s):
                try:
                    response = await self._send(broker_id, request)
                except Exception as error:  # the transport's failure: report no response
                    _logger.warning("request to broker %d failed: %r", broker_id, error)
            await self._inbox_send.send(_Response(term, broker_id, request, response))

    # --- reads -------------------------------------------------------------------------------

    async def _on_watch(self, event: WatchEvent) -> None:
        path = event.path
        if path == CONTROLLER_PATH:
            stat = await self._coordinator.exists(CONTROLLER_PATH, watch=True)
            if stat is None or stat.ephemeral_owner != self._coordinator.session_id:
                await self._run_core(ControllerMoved())
        elif path == BROKER_IDS_PATH:
            await self._run_core(BrokersRead(await self._read_brokers()))
        elif path == TOPICS_PATH:
            await self._run_core(await self._read_topics_change())
        elif path.startswith(TOPICS_PATH + "/") and path.count("/") == 3:
            await self._run_core(await self._read_topic_change(path.rsplit("/", 1)[1]))
        elif path == DELETE_TOPICS_PATH:
            topics = await self._coordinator.children(DELETE_TOPICS_PATH, watch=True)
            await self._run_core(DeleteTopicsRead(tuple(topics)))
        elif path == REASSIGN_PARTITIONS_PATH:
            await self._run_core(ReassignmentRead(await self._read_reassignment()))
        elif path == CONFIG_CHANGES_PATH:
            await self._run_core(await self._read_topic_configs())
        elif path == PREFERRED_REPLICA_ELECTION_PATH:
            await self._run_core(PreferredElectionRead(await self._read_preferred_election()))
        elif path == ISR_CHANGE_NOTIFICATION_PATH:
            await self._run_core(await self._read_isr_changes())
        elif path == LOG_DIR_EVENT_NOTIFICATION_PATH:
            await self._run_core(LogDirEventsRead(await self._read_log_dir_events()))

    async def _read_snapshot(self) -> ClusterSnapshot:
        coordinator = self._coordinator
        await ensure_cluster_paths(coordinator)
        await coordinator.exists(CONTROLLER_PATH, watch=True)
        brokers = await self._read_brokers()
        names = await coordinator.children(TOPICS_PATH, watch=True)
        topics = await self._read_topic_assignments(names)
        states = await self._read_states(
            [(t, p) for t, a in sorted(topics.items()) for p in sorted(a.partitions)]
        )
        return ClusterSnapshot(
            brokers=brokers,
            topics=topics,
            partition_states={tp: s for tp, s in states.items() if s is not None},
            topics_to_delete=tuple(await coordinator.children(DELETE_TOPICS_PATH, watch=True)),
            reassignment=await self._read_reassignment(),
            log_dir_events=await self._read_log_dir_events(),
            isr_change_notifications=tuple(
                await coordinator.children(ISR_CHANGE_NOTIFICATION_PATH, watch=True)
            ),
        )

    async def _read_brokers(self) -> dict[int, BrokerRegistration]:
        coordinator = self._coordinator
        names = [n for n in await coordinator.children(BROKER_IDS_PATH, watch=True)
                 if n.isdigit()]

        def reader(broker_id: int) -> Callable[[], Awaitable[BrokerRegistration | None]]:
            async def read() -> BrokerRegistration | None:
                try:
                    data, stat = await coordinator.get(broker_path(broker_id))
                    return decode_broker(broker_id, data, stat.czxid)
                except NoNodeError:
                    return None
                except ZnodeFormatError as error:
                    _logger.error("ignoring broker %d: %s", broker_id, error)
                    return None
            return read

        found = await _gather([reader(int(n)) for n in names], READS_IN_FLIGHT_MAX)
        return {b.broker_id: b for b in found if b is not None}

    async def _read_topic_assignments(self, names: Iterable[str]) -> dict[str, TopicAssignment]:
        coordinator = self._coordinator

        def reader(topic: str) -> Callable[[], Awaitable[TopicAssignment | None]]:
            async def read() -> TopicAssignment | None:
                try:
                    data, _stat = await coordinator.get(topic_path(topic), watch=True)
                    return decode_topic(topic, data)
                except NoNodeError:
                    return None
                except ZnodeFormatError as error:
                    _logger.error("ignoring topic %r: %s", topic, error)
                    return None
            return read

        names = sorted(names)
        found = await _gather([reader(t) for t in names], READS_IN_FLIGHT_MAX)
        return {t: a for t, a in zip(names, found, strict=True) if a is not None}

    async def _read_states(self, tps: Sequence[TP]) -> dict[TP, LeaderIsr | None]:
        coordinator = self._coordinator

        def reader(tp: TP) -> Callable[[], Awaitable[LeaderIsr | None]]:
            async def read() -> LeaderIsr | None:
                try:
                    data, stat = await coordinator.get(partition_state_path(*tp))
                except NoNodeError:
                    return None
                return decode_partition_state(tp[0], tp[1], data, stat.version, stat.mzxid)
            return read

        found = await _gather([reader(tp) for tp in tps], READS_IN_FLIGHT_MAX)
        return dict(zip(tps, found, strict=True))

    async def _read_topics_change(self) -> TopicsRead:
        assert self.core is not None
        names = set(await self._coordinator.children(TOPICS_PATH, watch=True))
        new = sorted(names - set(self.core.topics))
        assignments = await self._read_topic_assignments(new)
        states = await self._read_states(
            [(t, p) for t, a in sorted(assignments.items()) for p in sorted(a.partitions)]
        )
        return TopicsRead(frozenset(names), assignments,
                          {tp: s for tp, s in states.items() if s is not None})

    async def _read_topic_change(self, topic: str) -> TopicsRead:
        assert self.core is not None
        assignments = await self._read_topic_assignments([topic])
        if topic not in assignments:
            return await self._read_topics_change()
        known = self.core.topics.get(topic)
        added = sorted(set(assignments[topic].partitions) - set(
            () if known is None else known.partitions))
        states = await self._read_states([(topic, p) for p in added])
        return TopicsRead(frozenset(self.core.topics) | {topic}, assignments,
                          {tp: s for tp, s in states.items() if s is not None})

    async def _read_topic_configs(self) -> TopicConfigsRead:
        """Every topic's ``unclean.leader.election.enable`` override, arming the watch on
        ``/config/changes`` (a notice re-reads them all: the controller needs one key)."""
        from impl.broker import configs  # noqa: PLC0415 (the config core's decoder)

        coordinator = self._coordinator
        await ensure_path(coordinator, CONFIG_CHANGES_PATH)
        await coordinator.children(CONFIG_CHANGES_PATH, watch=True)
        unclean: dict[str, bool] = {}
        try:
            names = await coordinator.children(CONFIG_TOPICS_PATH)
        except NoNodeError:
            names = []
        for name in names:
            try:
                data, _stat = await coordinator.get(f"{CONFIG_TOPICS_PATH}/{name}")
                value = configs.decode_entity(data).get(UNCLEAN_KEY)
            except (NoNodeError, configs.InvalidConfigError):
                continue
            if value is not None and value.strip().lower() in ("true", "false"):
                unclean[name] = value.strip().lower() == "true"
        return TopicConfigsRead(unclean)

    async def _read_preferred_election(self) -> tuple[tuple[str, int], ...]:
        """``/admin/preferred_replica_election`` (arming its watch); empty when absent."""
        coordinator = self._coordinator
        if await coordinator.exists(PREFERRED_REPLICA_ELECTION_PATH, watch=True) is None:
            return ()
        try:
            data, _stat = await coordinator.get(PREFERRED_REPLICA_ELECTION_PATH)
            return decode_preferred_election(data)
        except NoNodeError:
            return ()
        except ZnodeFormatError as error:
            _logger.error("ignoring %s: %s", PREFERRED_REPLICA_ELECTION_PATH, error)
            with contextlib.suppress(NoNodeError):
                await coordinator.delete(PREFERRED_REPLICA_ELECTION_PATH)
            return ()

    async def _read_reassignment(self) -> tuple[ReassignmentTarget, ...]:
        coordinator = self._coordinator
        if await coordinator.exists(REASSIGN_PARTITIONS_PATH, watch=True) is None:
            return ()
        try:
            data, _stat = await coordinator.get(REASSIGN_PARTITIONS_PATH)
        except NoNodeError:
            return ()
        try:
            return decode_reassignment(data)
        except ZnodeFormatError as error:
            _logger.error("ignoring %s: %s", REASSIGN_PARTITIONS_PATH, error)
            return ()

    async def _read_isr_changes(self) -> IsrChangesRead:
        coordinator = self._coordinator
        names = await coordinator.children(ISR_CHANGE_NOTIFICATION_PATH, watch=True)
        tps: set[TP] = set()
        for name in names:
            try:
                data, _stat = await coordinator.get(f"{ISR_CHANGE_NOTIFICATION_PATH}/{name}")
                tps.update(decode_isr_change(data))
            except NoNodeError:
                continue
            except ZnodeFormatError as error:
                _logger.error("ignoring ISR change %s: %s", name, error)
        states = await self._read_states(sorted(tps))
        return IsrChangesRead(tuple(names), {tp: s for tp, s in states.items() if s is not None})

    async def _read_log_dir_events(self) -> dict[str, int]:
        coordinator = self._coordinator
        names = await coordinator.children(LOG_DIR_EVENT_NOTIFICATION_PATH, watch=True)
        events: dict[str, int] = {}
        for name in names:
            try:
                data, _stat = await coordinator.get(f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{name}")
                events[name] = decode_log_dir_event(data)
            except NoNodeError:
                continue
            except ZnodeFormatError as error:
                _logger.error("ignoring log dir event %s: %s", name, error)
        return events


__all__ = ["ControllerService", "SendFunction"]
