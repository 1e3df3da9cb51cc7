"""The Coordinator contract suite, run unchanged against the real and the simulated ZooKeeper.

Like trio's ``check_one_way_stream(maker)``: :func:`check_coordinator_contract` takes a harness
that makes clients of one ZooKeeper and can expire a client's session, and checks the port's
whole contract (``impl.controller.coordinator``). The checks compare relations ZooKeeper
guarantees (versions, cversions, zxid order, which error, which watch fires) rather than values
that differ between servers (zxids, session ids).

Waiting is always bounded (``trio.fail_after``), and the absence of an event is shown with a
sentinel: a watch armed later on another path in the same session; since a session's events
arrive in order, an event that did not arrive before the sentinel's was never sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

import trio

from impl.controller.coordinator import (
    BadArgumentsError,
    BadVersionError,
    CheckOp,
    CheckResult,
    Coordinator,
    CoordinatorClosedError,
    CoordinatorEvent,
    CreateOp,
    CreateResult,
    DeleteOp,
    DeleteResult,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    SessionEvent,
    SessionState,
    SetOp,
    SetResult,
    WatchEvent,
    WatchEventType,
    WatchKind,
)

#: Bound on every wait for an event.
EVENT_WAIT_S = 20.0


class _Harness(Protocol):
    async def connect(self) -> Coordinator: ...

    async def expire(self, coordinator: Coordinator) -> None: ...


class ContractViolationError(AssertionError):
    """The port broke its contract."""


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ContractViolationError(message)


async def _raises(error_type: type[Exception], call: Callable[[], Awaitable[object]]) -> None:
    try:
        await call()
    except error_type:
        return
    except Exception as error:
        raise ContractViolationError(f"expected {error_type.__name__}, got {error!r}") from error
    raise ContractViolationError(f"expected {error_type.__name__}, nothing raised")


async def _watch_events_until(
    coordinator: Coordinator, sentinel_path: str
) -> list[WatchEvent]:
    """Watch events up to (not including) the sentinel's event on ``sentinel_path``."""
    events: list[WatchEvent] = []
    with trio.fail_after(EVENT_WAIT_S):
        while True:
            event = await coordinator.next_event()
            if isinstance(event, SessionEvent):
                continue
            if event.path == sentinel_path:
                return events
            events.append(event)


async def _sentinel(watcher: Coordinator, writer: Coordinator, base: str, name: str) -> str:
    path = f"{base}/{name}"
    await watcher.exists(path, watch=True)
    await writer.create(path)
    return path


async def _session_events_until(
    coordinator: Coordinator, last: SessionState
) -> list[SessionState]:
    states: list[SessionState] = []
    with trio.fail_after(EVENT_WAIT_S):
        while True:
            event: CoordinatorEvent = await coordinator.next_event()
            if isinstance(event, SessionEvent):
                states.append(event.state)
                if event.state is last:
                    return states


async def check_nodes_and_versions(harness: _Harness) -> None:
    """Create/get/set/delete, versions, cversion, zxid order, the errors of each."""
    client = await harness.connect()
    try:
        base = await client.create("/contract_nodes", b"base")
        _require(base == "/contract_nodes", f"create returned {base!r}")
        data, stat = await client.get(base)
        _require(data == b"base" and stat.version == 0 and stat.cversion == 0, f"{stat}")
        _require(stat.ephemeral_owner == 0 and stat.data_length == 4, f"{stat}")
        _require(stat.czxid == stat.mzxid, "a fresh node has czxid == mzxid")
        stat_set = await client.set(base, b"v1", version=0)
        _require(stat_set.version == 1 and stat_set.mzxid > stat_set.czxid, f"{stat_set}")
        await _raises(BadVersionError, lambda: client.set(base, b"v2", version=0))
        stat_any = await client.set(base, b"v2")
        _require(stat_any.version == 2, "version -1 matches any version")
        await client.create(f"{base}/child", b"")
        parent = await client.exists(base)
        _require(parent is not None and parent.cversion == 1 and parent.num_children == 1,
                 f"{parent}")
        _require(parent is not None and parent.pzxid > stat_any.mzxid, "pzxid follows children")
        await _raises(NodeExistsError, lambda: client.create(base))
        await _raises(NoNodeError, lambda: client.create("/contract_missing/child"))
        await _raises(NoNodeError, lambda: client.get("/contract_missing"))
        await _raises(NoNodeError, lambda: client.set("/contract_missing", b""))
        await _raises(NoNodeError, lambda: client.delete("/contract_missing"))
        await _raises(NoNodeError, lambda: client.children("/contract_missing"))
        await _raises(NotEmptyError, lambda: client.delete(base))
        await _raises(BadArgumentsError, lambda: client.get("relative"))
        await _raises(BadArgumentsError, lambda: client.create("/trailing/"))
        _require(await client.exists("/contract_missing") is None, "exists of a missing node")
        await _raises(BadVersionError, lambda: client.delete(f"{base}/child", version=3))
        await client.delete(f"{base}/child", version=0)
        _require(await client.children(base) == [], "child deleted")
        after = await client.exists(base)
        _require(after is not None and after.cversion == 2, "cversion counts deletions too")
        for name in ("b", "a", "c"):
            await client.create(f"{base}/{name}")
        _require(await client.children(base) == ["a", "b", "c"], "children are sorted")
        first = await client.create(f"{base}/seq_", b"", sequential=True)
        second = await client.create(f"{base}/seq_", b"", sequential=True)
        # The suffix counts the parent's child creations (its cversion also counts deletions).
        _require(first == f"{base}/seq_{4:010d}", f"sequential suffix: {first}")
        _require(second == f"{base}/seq_{5:010d}", f"sequential suffix increases: {second}")
    finally:
        await client.close()


async def check_multi(harness: _Harness) -> None:
    """``multi`` is atomic; a failed one reports the failing op and rolls back the others."""
    client = await harness.connect()
    try:
        await client.create("/contract_multi", b"0")
        results = await client.multi(
            [
                CheckOp("/contract_multi", 0),
                CreateOp("/contract_multi/a", b"a"),
                CreateOp("/contract_multi/s_", b"", sequential=True),
                SetOp("/contract_multi", b"1", 0),
                DeleteOp("/contract_multi/a", 0),
            ]
        )
        _require(isinstance(results[0], CheckResult), f"{results}")
        _require(results[1] == CreateResult("/contract_multi/a"), f"{results}")
        _require(results[2] == CreateResult(f"/contract_multi/s_{1:010d}"), f"{results}")
        _require(isinstance(results[3], SetResult) and results[3].stat.version == 1, f"{results}")
        _require(isinstance(results[4], DeleteResult), f"{results}")
        stat_before = await client.exists("/contract_multi")
        failed = await client.multi(
            [
                CreateOp("/contract_multi/b", b"b"),
                CheckOp("/contract_multi", 0),
                SetOp("/contract_multi", b"2", -1),
            ]
        )
        _require(isinstance(failed[0], RolledBackError), f"{failed}")
        _require(isinstance(failed[1], BadVersionError), f"{failed}")
        _require(isinstance(failed[2], RolledBackError), f"{failed}")
        _require(await client.exists("/contract_multi/b") is None, "failed multi applied an op")
        stat_after = await client.exists("/contract_multi")
        _require(stat_before == stat_after, "failed multi changed a node")
        missing = await client.multi([SetOp("/contract_multi/none", b"", -1)])
        _require(len(missing) == 1 and isinstance(missing[0], NoNodeError), f"{missing}")
        exists = await client.multi([CreateOp("/contract_multi"), CheckOp("/contract_multi", 1)])
        _require(isinstance(exists[0], NodeExistsError), f"{exists}")
        _require(isinstance(exists[1], RolledBackError), f"{exists}")
        await _raises(BadArgumentsError, lambda: client.multi([]))
    finally:
        await client.close()


async def check_watches(harness: _Harness) -> None:
    """One-shot data and child watches, fired by another session's writes."""
    watcher = await harness.connect()
    writer = await harness.connect()
    try:
        base = "/contract_watch"
        await writer.create(base)
        await writer.create(f"{base}/n", b"0")
        await writer.create(f"{base}/sentinels")
        # A data watch set twice (get and exists) fires once; it is one-shot.
        await watcher.get(f"{base}/n", watch=True)
        await watcher.exists(f"{base}/n", watch=True)
        await writer.set(f"{base}/n", b"1")
        await writer.set(f"{base}/n", b"2")
        events = await _watch_events_until(
            watcher, await _sentinel(watcher, writer, f"{base}/sentinels", "s1")
        )
        _require(
            events == [WatchEvent(WatchEventType.CHANGED, f"{base}/n", WatchKind.DATA)],
            f"data watch: {events}",
        )
        # exists() on a missing node arms a watch that fires CREATED.
        await watcher.exists(f"{base}/m", watch=True)
        await writer.create(f"{base}/m")
        # A child watch fires on a child's creation, not on a child's data change.
        await watcher.children(base, watch=True)
        await writer.set(f"{base}/n", b"3")
        await writer.create(f"{base}/o")
        events = await _watch_events_until(
            watcher, await _sentinel(watcher, writer, f"{base}/sentinels", "s2")
        )
        _require(
            events
            == [
                WatchEvent(WatchEventType.CREATED, f"{base}/m", WatchKind.DATA),
                WatchEvent(WatchEventType.CHILD, base, WatchKind.CHILD),
            ],
            f"exists/child watches: {events}",
        )
        # Deleting a node fires its data watch and its child watch (DELETED each).
        await watcher.get(f"{base}/m", watch=True)
        await watcher.children(f"{base}/m", watch=True)
        await watcher.children(base, watch=True)
        await writer.delete(f"{base}/m")
        events = await _watch_events_until(
            watcher, await _sentinel(watcher, writer, f"{base}/sentinels", "s3")
        )
        _require(
            sorted(events, key=repr)
            == sorted(
                [
                    WatchEvent(WatchEventType.DELETED, f"{base}/m", WatchKind.DATA),
                    WatchEvent(WatchEventType.DELETED, f"{base}/m", WatchKind.CHILD),
                    WatchEvent(WatchEventType.CHILD, base, WatchKind.CHILD),
                ],
                key=repr,
            ),
            f"delete watches: {events}",
        )
        # A failed multi fires nothing; a get on a missing node arms nothing.
        await watcher.get(f"{base}/n", watch=True)
        await _raises(NoNodeError, lambda: watcher.get(f"{base}/gone", watch=True))
        await writer.multi([SetOp(f"{base}/n", b"x"), CheckOp(f"{base}/n", 99)])
        await writer.create(f"{base}/gone")
        events = await _watch_events_until(
            watcher, await _sentinel(watcher, writer, f"{base}/sentinels", "s4")
        )
        _require(events == [], f"failed multi or missing get fired: {events}")
    finally:
        await watcher.close()
        await writer.close()


async def check_ephemerals_and_close(harness: _Harness) -> None:
    """Ephemeral nodes belong to their session and vanish when it closes."""
    owner = await harness.connect()
    observer = await harness.connect()
    closed = False
    try:
        await observer.create("/contract_eph")
        await owner.create("/contract_eph/e", b"mine", ephemeral=True)
        stat = await observer.exists("/contract_eph/e", watch=True)
        _require(stat is not None and stat.ephemeral_owner == owner.session_id,
                 f"ephemeral owner {stat}")
        await _raises(NoChildrenForEphemeralsError, lambda: owner.create("/contract_eph/e/c"))
        await _raises(NoChildrenForEphemeralsError, lambda: observer.create("/contract_eph/e/c"))
        await owner.close()
        closed = True
        states = await _session_events_until(owner, SessionState.CLOSED)
        _require(states[-1] is SessionState.CLOSED, f"close: {states}")
        await _raises(CoordinatorClosedError, lambda: owner.get("/contract_eph"))
        sentinel = await _sentinel(observer, observer, "/contract_eph", "s")
        events = await _watch_events_until(observer, sentinel)
        _require(
            events == [WatchEvent(WatchEventType.DELETED, "/contract_eph/e", WatchKind.DATA)],
            f"ephemeral deletion on close: {events}",
        )
        _require(await observer.exists("/contract_eph/e") is None, "ephemeral survived close")
        await owner.close()  # idempotent
    finally:
        if not closed:
            await owner.close()
        await observer.close()


async def check_session_expiry(harness: _Harness) -> None:
    """Expiry: EXPIRED then CONNECTED with a new session; ephemerals gone; watches fire."""
    victim = await harness.connect()
    observer = await harness.connect()
    try:
        await observer.create("/contract_exp")
        await victim.create("/contract_exp/e", b"", ephemeral=True)
        await victim.exists("/contract_exp/other", watch=True)
        await observer.exists("/contract_exp/e", watch=True)
        old_session = victim.session_id
        await harness.expire(victim)
        states = await _session_events_until(victim, SessionState.EXPIRED)
        _require(set(states) <= {SessionState.CONNECTED, SessionState.SUSPENDED,
                                 SessionState.EXPIRED}, f"expiry: {states}")
        states = await _session_events_until(victim, SessionState.CONNECTED)
        _require(states == [SessionState.CONNECTED], f"after expiry: {states}")
        _require(victim.session_id not in (0, old_session), "a new session after expiry")
        sentinel = await _sentinel(observer, observer, "/contract_exp", "s")
        events = await _watch_events_until(observer, sentinel)
        _require(
            events == [WatchEvent(WatchEventType.DELETED, "/contract_exp/e", WatchKind.DATA)],
            f"ephemeral deletion on expiry: {events}",
        )
        # The new session works; the expired session's watches are gone.
        await victim.create("/contract_exp/e", b"", ephemeral=True)
        stat = await observer.exists("/contract_exp/e")
        _require(stat is not None and stat.ephemeral_owner == victim.session_id, f"{stat}")
        await observer.create("/contract_exp/other")
        sentinel = await _sentinel(victim, observer, "/contract_exp", "s2")
        events = await _watch_events_until(victim, sentinel)
        _require(events == [], f"a watch survived expiry: {events}")
    finally:
        await victim.close()
        await observer.close()


CONTRACT_CHECKS = (
    check_nodes_and_versions,
    check_multi,
    check_watches,
    check_ephemerals_and_close,
    check_session_expiry,
)


async def check_coordinator_contract(harness: _Harness) -> None:
    """Run every contract check against clients from ``harness``.

    Each check uses its own top-level paths, so one fresh ZooKeeper (or chroot) suffices.

    Raises:
        ContractViolationError: the first broken promise, with what was seen.
    """
    for check in CONTRACT_CHECKS:
        await check(harness)
