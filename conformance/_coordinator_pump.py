"""The cluster simulator's controller pump: one broker's controller node over the simulated
ZooKeeper and network.

Each simulated broker runs the :class:`~impl.controller.node.ControllerNode` the trio process
runs. This pump carries it: ZooKeeper reads and writes at once against the in-memory server (as
:class:`~conformance._coordinator_driver.ControllerDriver` does), the session's watch
notifications and session changes delivered 1-3 simulated ms after ZooKeeper queued them (in
order), and requests over the simulated network on a channel per broker: in order, exactly once
(sequence numbers, as TCP gives), retransmitted every ``RETRY_MS`` and reported undelivered after
``ATTEMPTS_MAX`` transmissions (the node decides whether to send again). It decides nothing about
the protocol; it checks CONTROLLER_FENCED on every write that lands.

Each read and write is reported with the session it ran under (the pump's session on the
server, as the trio pump reports its client's).

Fault model (what it injects besides the network's and the server's), both around the active
controller's session expiry, whose notice (EXPIRED, then the new session's CONNECTED) reaches
the node ``delay_ms`` late while the client re-creates a session at once and re-arms on it every
watch the node had armed (as Kafka's ZooKeeperClient re-registers its handlers) except the one
on ``/controller``:

- :meth:`SimController.expire`, the late notice: until the notice the node still believes in its
  old epoch (KAFKA-6082's zombie window; it does not hear of its successor either) and every
  input reaches it: notifications of the new session, brokers' responses. What it does runs on
  the new session, and the first read or write it completes tells it that its term's session is
  gone: it resigns without acting on what it read (fuzz seed 10226's zombie read a broker's new
  registration there and sent it stale states).
- :meth:`SimController.stall_next_write`, a write in flight across the expiry (KAFKA-6082's
  zombie write): the controller's next fenced write stalls as it is sent (a pause, a slow link)
  and the session expires meanwhile; the write, with every read or write the node carries after
  it, reaches ZooKeeper on the new session at the worst moment: once another broker has won the
  next term and read the cluster, before it has written anything (its zkVersions all current),
  or ``delay_ms`` later if nobody won by then. The ``/controller_epoch`` version check must fence
  it (CONTROLLER_FENCED is checked on every write that lands); the node learns its outcome, then
  that its term's session is gone.

Recovery: the notice comes at the end of the window at the latest, and the node runs for
election again on the new session.

And around a connection loss without expiry (:meth:`SimController.lose_connection`): the
broker's ZooKeeper client (one per broker in Kafka, so its registration's session and its
controller's) loses its connection for ``down_ms``, well within the session timeout; the
server drops every watch of both sessions and fails every request with ConnectionLoss; the node
hears SUSPENDED, then CONNECTED on the same session. The loss lands at once, or while the node
has a ZooKeeper operation outstanding: its next read (lost: the node learns nothing) or its
next election ``multi`` or fenced write (applied by ZooKeeper, its reply lost: the node must
find out by reading). It may flap: drop again with the node's first read once back.
Recovery: the session survived, so the node revalidates its term
(``/controller`` still its session's, ``/controller_epoch`` still at its version) and re-reads
everything, or runs for election again.

This module is a sans-IO core.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, NamedTuple

from impl.controller.controller import WriteCompleted, ZkWrite
from impl.controller.coordinator import (
    CheckOp,
    CoordinatorEvent,
    CreateOp,
    NoNodeError,
    SessionEvent,
    SessionState,
    WatchKind,
)
from impl.controller.node import (
    ChildrenOp,
    LogWarning,
    NodeEffect,
    NodeInput,
    ReadResult,
    RequestCompleted,
    SendToBroker,
    SessionChanged,
    ZkRead,
)
from impl.controller.requests import ControllerRequest, ControllerResponse
from impl.controller.znodes import CONTROLLER_EPOCH_PATH, CONTROLLER_PATH, decode_controller_epoch
from impl.trace import TraceEvent

from ._coordinator_driver import ControllerDriver

if TYPE_CHECKING:
    from ._cluster_nodes import SimBroker
    from .cluster_sim import ClusterWorld

__sans_io__ = True

#: Milliseconds after which an unanswered request is transmitted again.
RETRY_MS: Final = 4
#: Transmissions of one request before it is reported undelivered.
ATTEMPTS_MAX: Final = 40
#: The session timeout of a controller's session.
SESSION_TIMEOUT_MS: Final = 6_000


class ControllerCall(NamedTuple):
    """A controller request on channel ``channel`` with sequence number ``seq``."""

    channel: int
    seq: int
    request: ControllerRequest


class ControllerReply(NamedTuple):
    """The answer to one :class:`ControllerCall`."""

    channel: int
    seq: int
    response: ControllerResponse


@dataclass
class _Channel:
    """One connection to a broker: at most one request in flight (the node sends one at a
    time per broker)."""

    channel: int
    seq: int = 0
    request_id: int = -1  # -1: nothing in flight
    request: ControllerRequest | None = None
    due_ms: int = 0  # next transmission
    attempts: int = 0


class SimController(ControllerDriver):
    """A controller candidate on one simulated broker (see the module docstring)."""

    def __init__(self, world: ClusterWorld, broker: SimBroker) -> None:
        super().__init__(world.zk, broker.id,
                         unclean_leader_election=world.config.unclean_leader_election,
                         fence_writes=world.config.variant != "no_epoch_check",
                         session_timeout_ms=SESSION_TIMEOUT_MS)
        self.world = world
        self.broker = broker
        self._clock = world.clock
        #: notifications popped from the session, each with the ms it is delivered at
        self._due: collections.deque[tuple[int, CoordinatorEvent]] = collections.deque()
        self.expiry_notice_ms: int | None = None
        #: armed by :meth:`stall_next_write`: the stall of the next fenced write, in ms
        self._stall_ms: int | None = None
        #: reads and writes held in flight until ``_held_until_ms``, in the order carried
        self._held: list[ZkRead | ZkWrite] = []
        self._held_until_ms: int | None = None
        #: the session whose expiry the pending notice reports
        self._expired_session_id = 0
        self.stopped = False
        self._channels: dict[int, _Channel] = {}
        self.writes_landed = 0
        #: the watches the node's reads armed and that have not fired: path -> child watch?
        self._armed: dict[tuple[str, bool], None] = {}
        #: armed by :meth:`lose_connection`: (down ms, "read" or "write") of a loss that lands
        #: with the node's next such operation in flight
        self._loss_armed: tuple[int, str] | None = None
        #: the sessions whose connection is down and the ms it comes back at
        self._disconnected: tuple[int, ...] = ()
        self._reconnect_at_ms: int | None = None
        self._down_ms = 0
        #: the connection drops again with the first read once it is back
        self._flaps = False

    @property
    def expiring(self) -> bool:
        """An expiry of this controller's session is armed, or its notice is on its way."""
        return self.expiry_notice_ms is not None or self._stall_ms is not None

    def in_flight(self) -> list[tuple[int, ControllerRequest]]:
        """The request in flight on each channel, with the broker it is sent to (it may still
        arrive, however late: a channel retransmits it until answered or given up)."""
        return [(broker_id, channel.request) for broker_id, channel in sorted(
            self._channels.items()) if channel.request is not None]

    def stop(self) -> None:
        """The broker died: this candidate is gone."""
        self.stopped = True
        self._channels.clear()
        self._held.clear()
        self._stall_ms = None
        self._loss_armed = None
        self._flaps = False
        self._disconnected, self._reconnect_at_ms = (), None
        if self.server.session_alive(self.session_id):
            self.server.expire_session(self.session_id)

    def expire(self, notice_delay_ms: int) -> None:
        """The controller's session expires; the client re-creates one at once but the node
        learns of the expiry (and of the new session) only after ``notice_delay_ms``
        (KAFKA-6082's zombie window)."""
        server = self.server
        if self.expiry_notice_ms is None:
            self._expired_session_id = self.session_id
        server.expire_session(self.session_id)
        self.session_id = server.open_session(SESSION_TIMEOUT_MS)
        connected = server.pop_event(self.session_id)
        assert connected == SessionEvent(SessionState.CONNECTED), connected
        # The client is connected again, on a new session; the node hears of it (and that the
        # old one expired) only with the notice.
        for path, child in list(self._armed):
            if path == CONTROLLER_PATH:
                continue
            try:
                if child:
                    server.children(self.session_id, path, True)
                else:
                    server.exists(self.session_id, path, True)
            except NoNodeError:
                del self._armed[(path, child)]
        self.expiry_notice_ms = self.broker.now_ms() + notice_delay_ms

    def stall_next_write(self, delay_ms: int) -> None:
        """The controller's next fenced write stalls in flight and its session expires as it is
        sent; the write runs ``delay_ms`` later on the new session, then the node hears of the
        expiry (KAFKA-6082's zombie write). Disarmed if the node stops being the controller
        first."""
        self._stall_ms = delay_ms

    @property
    def connection_lost(self) -> bool:
        """A connection loss is armed, or the connection is down."""
        return self._loss_armed is not None or self._reconnect_at_ms is not None

    def lose_connection(self, down_ms: int, at: str = "now", *, flaps: bool = False) -> None:
        """The broker's ZooKeeper connection drops for ``down_ms`` (the sessions survive):
        ``at`` ``"now"``, or with the node's next ``"read"`` (lost) or next election ``multi``
        or fenced ``"write"`` (applied, its reply lost) in flight. ``flaps``: once back, it
        drops again with the node's first read (a revalidation's, an election's), as long."""
        assert at in ("now", "read", "write"), at
        self._flaps = flaps
        if at == "now":
            self._disconnect(down_ms)
        else:
            self._loss_armed = down_ms, at

    def _disconnect(self, down_ms: int) -> None:
        self.world.connection_losses += 1
        server = self.server
        sessions = tuple(s for s in (self.session_id, self.broker.session)
                         if server.session_alive(s))
        for session in sessions:
            server.disconnect(session)
        self._armed.clear()  # (the server dropped them; the node re-reads after CONNECTED)
        self._disconnected = sessions
        self._down_ms = down_ms
        self._reconnect_at_ms = self.broker.now_ms() + max(1, down_ms)

    def _reconnect(self) -> None:
        server = self.server
        for session in self._disconnected:
            if server.session_alive(session):
                server.reconnect(session)
        self._disconnected, self._reconnect_at_ms = (), None
        if self._flaps:
            self._flaps = False
            self._loss_armed = self._down_ms, "read"

    # --- the pump ----------------------------------------------------------------------------

    def tick(self) -> None:
        """Deliver due notifications; transmit due requests."""
        if self.stopped:
            return
        now_ms = self._clock.monotonic_ns() // 1_000_000
        if self._reconnect_at_ms is not None and now_ms >= self._reconnect_at_ms:
            self._reconnect()
        if self._stall_ms is not None and not self.node.active:
            self._stall_ms = None  # resigned before it wrote
        if self._held_until_ms is not None and now_ms >= self._held_until_ms:
            self._release_held()
        if self.expiry_notice_ms is not None and now_ms >= self.expiry_notice_ms:
            self.expiry_notice_ms = None
            self.step(SessionChanged(SessionState.EXPIRED, self._expired_session_id))
            self.step(SessionChanged(SessionState.CONNECTED, self.session_id,
                                     self._clock.wall_ms()))
        self._collect_due(now_ms)
        due = self._due
        while due and due[0][0] <= now_ms:
            _at, event = due.popleft()
            if isinstance(event, SessionEvent):
                self.step(SessionChanged(event.state, self.session_id, self._clock.wall_ms()))
            else:
                self._armed.pop((event.path, event.kind is WatchKind.CHILD), None)
                self.step(event)
        for broker_id in sorted(self._channels):
            channel = self._channels[broker_id]
            if channel.request is not None and channel.due_ms <= now_ms:
                if channel.attempts >= ATTEMPTS_MAX:
                    request_id = channel.request_id
                    channel.request, channel.request_id = None, -1
                    self.step(RequestCompleted(request_id, None))
                else:
                    self._transmit(broker_id, channel, now_ms)

    def _collect_due(self, now_ms: int) -> None:
        server, session_id, rng = self.server, self.session_id, self.world.watch_rng
        last = self._due[-1][0] if self._due else 0
        while (event := server.pop_event(session_id)) is not None:
            last = max(last, now_ms + 1 + rng.randrange(3))
            self._due.append((last, event))

    def step(self, event: NodeInput) -> None:
        """Step the node; count its elections."""
        was_active = self.node.active
        super().step(event)
        if self.node.active and not was_active:
            self.world.controller_elected(self)

    def _release_held(self) -> None:
        """The stalled reads and writes reach ZooKeeper (on the client's session now)."""
        held, self._held, self._held_until_ms = self._held, [], None
        for effect in held:
            completion = super()._carry(effect)
            if completion is not None:
                self.step(completion)

    def _carry(self, effect: NodeEffect) -> NodeInput | None:
        if isinstance(effect, LogWarning):
            self.world.zookeeper_warnings += 1  # (the trio service logs it)
            return None
        if isinstance(effect, ZkRead | ZkWrite):
            if self._held_until_ms is not None:
                self._held.append(effect)
                return None
            if self._stall_ms is not None and _fenced(effect):
                delay_ms, self._stall_ms = self._stall_ms, None
                self.expire(delay_ms)
                self._held_until_ms = self.expiry_notice_ms
                self._held.append(effect)
                return None
            armed = self._loss_armed
            if armed is not None and self._reconnect_at_ms is None:
                if armed[1] == "read" and isinstance(effect, ZkRead):
                    self._loss_armed = None
                    self._disconnect(armed[0])  # (the read fails: the node learns nothing)
                elif armed[1] == "write" and isinstance(effect, ZkWrite) and (
                        _fenced(effect) or _election(effect)):
                    self._loss_armed = None
                    super()._carry(effect)  # applied by ZooKeeper ...
                    self._disconnect(armed[0])
                    # ... and its reply lost with the connection
                    return WriteCompleted(effect.write_id, None, self.session_id)
        return super()._carry(effect)

    def _read(self, effect: ZkRead) -> tuple[ReadResult, ...] | None:
        for op in effect.ops:
            if op.watch:
                self._armed[(op.path, isinstance(op, ChildrenOp))] = None
        return super()._read(effect)

    # --- requests over the network -----------------------------------------------------------

    def _send(self, effect: SendToBroker) -> NodeInput | None:
        channel = self._channels.get(effect.broker_id)
        if channel is None or (channel.request is not None
                               and channel.request_id != effect.request_id):
            # A new request while another is unanswered: the node dropped that one (a new
            # term), so the pump opens a new connection for this one.
            channel = self._channels[effect.broker_id] = _Channel(next(self.world.channel_ids))
        if channel.request_id != effect.request_id:
            channel.seq += 1
        channel.request_id, channel.request = effect.request_id, effect.request
        channel.attempts = 0
        now_ms = self.broker.now_ms()
        if effect.backoff_ms:
            channel.due_ms = now_ms + effect.backoff_ms
        else:
            self._transmit(effect.broker_id, channel, now_ms)
        return None

    def _transmit(self, broker_id: int, channel: _Channel, now_ms: int) -> None:
        assert channel.request is not None
        channel.due_ms = now_ms + RETRY_MS
        channel.attempts += 1
        self.world.network.send(self.broker.id, broker_id,
                                ControllerCall(channel.channel, channel.seq, channel.request))

    def on_reply(self, reply: ControllerReply) -> None:
        """A broker answered the request in flight on one channel."""
        if self.stopped:
            return
        for channel in self._channels.values():
            if channel.channel == reply.channel:
                if reply.seq != channel.seq or channel.request is None:
                    return
                request_id = channel.request_id
                channel.request, channel.request_id = None, -1
                self.step(RequestCompleted(request_id, reply.response))
                return

    # --- checks -------------------------------------------------------------------------------

    def _emit(self, event: TraceEvent) -> None:
        self.world.emit(event)
        if event.event == "CONTROLLER_ELECTED":
            # A stalled write of a deposed controller arrives at the worst moment: the new
            # controller has won its term and read the cluster, and has written nothing yet
            # (KAFKA-6082: only the /controller_epoch check stops it).
            for broker in self.world.brokers:
                other = broker.controller
                if other is not None and other is not self and other._held:
                    other._release_held()

    def _write_landed(self, effect: ZkWrite) -> None:
        """CONTROLLER_FENCED: a write of the controller (guarded by the epoch check) lands
        only under the current epoch."""
        if not _fenced(effect):
            return  # the election's own writes
        self.writes_landed += 1
        try:
            data, _stat = self.server.get(self.world.admin, CONTROLLER_EPOCH_PATH, False)
        except NoNodeError:
            data = b"0"
        current = decode_controller_epoch(data)
        if self.node.epoch != current:
            self.world.violation(
                "CONTROLLER_FENCED",
                f"controller on broker {self.broker.id} (epoch {self.node.epoch}) wrote to "
                f"ZooKeeper while the controller epoch is {current}",
            )


def _election(effect: ZkWrite) -> bool:
    """The election's ``multi`` (creates ``/controller``)."""
    return any(isinstance(op, CreateOp) and op.path == CONTROLLER_PATH for op in effect.ops)


def _fenced(effect: ZkRead | ZkWrite) -> bool:
    """A write of the controller's core (guarded by the ``/controller_epoch`` check)."""
    return (isinstance(effect, ZkWrite) and bool(effect.ops)
            and isinstance(effect.ops[0], CheckOp))


__all__ = ["ATTEMPTS_MAX", "RETRY_MS", "ControllerCall", "ControllerReply", "SimController"]
