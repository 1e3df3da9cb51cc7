"""The controller across connection loss and session expiry (simulated ZooKeeper faults)."""

from __future__ import annotations

from collections.abc import Sequence

import trio
import trio.testing

from impl.controller import (
    Coordinator,
    CoordinatorEvent,
    NodeStat,
    Op,
    OpResult,
    create_topic,
    read_partition_state,
)
from impl.controller.coordinator import WatchEvent, WatchEventType, WatchKind
from impl.controller.znodes import BROKER_IDS_PATH

from ._support import WAIT_S, cluster


def test_reconnect_resynchronises_and_expiry_hands_over() -> None:
    async def scenario() -> None:
        async with cluster("simulated") as c:
            server = c.server
            assert server is not None
            for broker_id in (0, 1, 2):
                await c.add_broker(broker_id)
            first = await c.start_controller(100)
            with trio.fail_after(WAIT_S):
                await first.wait_active()
            second = await c.start_controller(101)
            admin = c.sessions[0]
            await create_topic(admin, "f", assignment={0: [1, 0, 2], 1: [0, 1, 2]})
            await c.transport.wait_for(lambda: c.transport.latest_state(2, ("f", 1)) is not None)

            # The controller's link drops; broker 1 dies meanwhile; the link comes back within
            # the session timeout: the controller checks it still holds /controller and the
            # epoch, re-reads everything and elects f-0's new leader.
            controller_session = c.sessions[100].session_id
            server.disconnect(controller_session)
            await c.sessions[1].close()
            assert server.reconnect(controller_session)
            await c.transport.wait_for(
                lambda: (s := c.transport.latest_state(0, ("f", 0))) is not None and s.leader == 0
            )
            trace = c.traces[100]
            assert [e.fields["epoch"] for e in trace.named("CONTROLLER_ELECTED")] == [1, 1]
            assert first.is_active
            assert not second.is_active

            # Now the link stays down past the timeout: the session expires, the other
            # candidate wins epoch 2, and the old controller resigns once it hears of it.
            server.disconnect(controller_session)
            server.advance_ms(10_000)
            with trio.fail_after(WAIT_S):
                await second.wait_active()
            assert second.epoch == 2
            assert not server.reconnect(controller_session)
            await trace.wait_for(lambda: bool(trace.named("SESSION_EXPIRED")))
            assert not c.services[100].is_active
            state = await read_partition_state(admin, "f", 0)
            assert state is not None
            assert state.leader == 0
            assert state.controller_epoch == 1

    trio.run(scenario)


class _LateNotice:
    """A client of the simulated ZooKeeper whose events reach the controller service only as the
    test releases them: after an expiry the client re-creates a session at once (kazoo's
    behaviour) while the service has not heard of it, the zombie window of a slow pump."""

    def __init__(self, inner: Coordinator) -> None:
        self.inner = inner
        self.holding = False
        self.held: list[CoordinatorEvent] = []
        self._send, self._events = trio.open_memory_channel[CoordinatorEvent](1_000)

    async def forward(self) -> None:
        """Take the client's events as they come (its session switches then); pass them on
        unless held."""
        while True:
            event = await self.inner.next_event()
            if self.holding:
                self.held.append(event)
            else:
                self._send.send_nowait(event)

    def inject(self, event: CoordinatorEvent) -> None:
        """A notification as a watch armed on the new session would deliver it."""
        self._send.send_nowait(event)

    def release(self) -> None:
        self.holding = False
        for event in self.held:
            self._send.send_nowait(event)
        self.held.clear()

    @property
    def session_id(self) -> int:
        return self.inner.session_id

    async def next_event(self) -> CoordinatorEvent:
        return await self._events.receive()

    def next_event_nowait(self) -> CoordinatorEvent | None:
        try:
            return self._events.receive_nowait()
        except trio.WouldBlock:
            return None

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     sequential: bool = False) -> str:
        return await self.inner.create(path, data, ephemeral=ephemeral, sequential=sequential)

    async def get(self, path: str, *, watch: bool = False) -> tuple[bytes, NodeStat]:
        return await self.inner.get(path, watch=watch)

    async def set(self, path: str, data: bytes, *, version: int = -1) -> NodeStat:
        return await self.inner.set(path, data, version=version)

    async def delete(self, path: str, *, version: int = -1) -> None:
        await self.inner.delete(path, version=version)

    async def exists(self, path: str, *, watch: bool = False) -> NodeStat | None:
        return await self.inner.exists(path, watch=watch)

    async def children(self, path: str, *, watch: bool = False) -> list[str]:
        return await self.inner.children(path, watch=watch)

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        return await self.inner.multi(ops)

    async def close(self) -> None:
        await self.inner.close()


def test_a_zombie_resigns_on_a_read_its_client_ran_under_a_new_session() -> None:
    """The trio pump stamps each read with its client's session: a controller whose session
    expired, with the notice not yet through, reads a restarted broker's registration under the
    client's new session and must not send that broker its cached states (fuzz seed 10226)."""

    async def scenario() -> None:
        async with cluster("simulated") as c:
            server = c.server
            assert server is not None
            for broker_id in (0, 1, 2):
                await c.add_broker(broker_id)
            client = _LateNotice(await c.connect())
            c.nursery.start_soon(client.forward)
            zombie = await c.start_controller(100, session=client)
            with trio.fail_after(WAIT_S):
                await zombie.wait_active()
            await create_topic(c.sessions[0], "z", assignment={0: [1, 0, 2]})
            await c.transport.wait_for(
                lambda: c.transport.latest_state(1, ("z", 0)) is not None)
            with trio.fail_after(WAIT_S):
                await zombie.wait_idle()
            old_session = client.session_id

            client.holding = True
            server.expire_session(old_session)
            server.reconnect(old_session)  # the client hears EXPIRED, opens a new session
            await c.sessions[1].close()  # broker 1 restarts: a new broker epoch
            await c.add_broker(1)
            to_broker_1 = len(c.transport.requests_to(1))
            await trio.testing.wait_all_tasks_blocked()
            assert client.session_id != old_session
            assert client.held, "the expiry notice is held"
            client.inject(WatchEvent(WatchEventType.CHILD, BROKER_IDS_PATH, WatchKind.CHILD))
            with trio.fail_after(WAIT_S):
                await zombie.wait_inactive()
            assert c.transport.requests_to(1)[to_broker_1:] == [], (
                "the zombie sent the restarted broker its cached states")
            trace = c.traces[100]
            assert trace.events[-1].event == "SESSION_EXPIRED"

            client.release()  # EXPIRED, then the new session's CONNECTED
            with trio.fail_after(WAIT_S):
                await zombie.wait_active()
            assert zombie.epoch == 2

    trio.run(scenario)
