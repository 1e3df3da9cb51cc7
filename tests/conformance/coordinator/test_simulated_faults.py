"""The simulated ZooKeeper's injected faults: connection loss, timeout expiry, determinism."""

from __future__ import annotations

import pytest
import trio

from conformance.coordinator import SimulatedCoordinator, SimulatedZooKeeper
from impl.controller import (
    ConnectionLossError,
    CoordinatorEvent,
    SessionEvent,
    SessionState,
    WatchEvent,
    WatchEventType,
    WatchKind,
)


def _drain(coordinator: SimulatedCoordinator) -> list[CoordinatorEvent]:
    events: list[CoordinatorEvent] = []
    while (event := coordinator.next_event_nowait()) is not None:
        events.append(event)
    return events


def test_connection_loss_within_the_timeout_keeps_the_session() -> None:
    async def scenario() -> None:
        server = SimulatedZooKeeper()
        client = server.connect(1_000)
        other = server.connect(1_000)
        await client.create("/e", b"", ephemeral=True)
        await client.exists("/w", watch=True)
        session = client.session_id
        server.disconnect(session)
        with pytest.raises(ConnectionLossError):
            await client.get("/e")
        server.advance_ms(999)
        assert server.reconnect(session)
        await other.create("/w")
        events = _drain(client)
        assert events == [
            SessionEvent(SessionState.CONNECTED),
            SessionEvent(SessionState.SUSPENDED),
            SessionEvent(SessionState.CONNECTED),
        ], "the watch died with the link"
        assert client.session_id == session
        assert await other.exists("/e") is not None

    trio.run(scenario)


def test_connection_loss_past_the_timeout_expires_the_session() -> None:
    async def scenario() -> None:
        server = SimulatedZooKeeper()
        client = server.connect(1_000)
        other = server.connect(1_000)
        await client.create("/e", b"", ephemeral=True)
        await other.exists("/e", watch=True)
        session = client.session_id
        server.disconnect(session)
        server.advance_ms(1_000)
        assert _drain(other)[-1] == WatchEvent(WatchEventType.DELETED, "/e", WatchKind.DATA)
        assert not server.reconnect(session)
        states = [e.state for e in _drain(client) if isinstance(e, SessionEvent)]
        assert states == [SessionState.CONNECTED, SessionState.SUSPENDED, SessionState.EXPIRED,
                          SessionState.CONNECTED]
        assert client.session_id != session
        await client.create("/e", b"", ephemeral=True)

    trio.run(scenario)


def test_runs_are_deterministic() -> None:
    async def run() -> list[object]:
        server = SimulatedZooKeeper()
        first, second = server.connect(), server.connect()
        seen: list[object] = []
        await first.create("/a")
        await second.children("/a", watch=True)
        for index in range(5):
            seen.append(await first.create("/a/s", str(index).encode(), sequential=True))
        seen.append(await second.exists("/a"))
        seen.extend(_drain(second))
        server.expire_session(first.session_id)
        seen.append(server.paths())
        return seen

    assert trio.run(run) == trio.run(run)
