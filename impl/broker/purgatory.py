"""Kafka's fetch purgatory as a sans-IO core: which waiting fetches a change wakes, and when a
delayed fetch is answered.

A Fetch that finds fewer than ``min_bytes`` to send (a follower asks for 1) waits, up to its
``max_wait_ms``, for a change to one of its partitions, and is then asked again (Kafka's
DelayedFetch in the fetch purgatory, watched by its partitions). The trio broker
(:class:`~impl.broker.replica_manager.ReplicaManager`, the Fetch handler) and the cluster
simulator (:mod:`conformance._cluster_nodes`) park their delayed fetches here, so the rules
below are decided once, for both (spec/replication.md, "Delayed fetches"):

* **What a change is.** A node step's effects (:func:`changes_of`): a role change
  (:class:`~impl.broker.node.RoleChanged`) may change anything, so it wakes every watcher; a
  follower's log or HW moving (:class:`~impl.broker.node.LogChanged`) changes those partitions'
  records; a leader's HW moving (:class:`~impl.broker.node.HighWatermarkMoved`) changes only
  what a consumer may read. A completed append changes its partition's records
  (:func:`appended`); a DeleteRecords, an UpdateMetadata or the broker stopping changes
  everything (:data:`EVERYTHING`).
* **Whom a change wakes** (:meth:`Purgatory.woken`): a watcher that named partitions, when the
  change names one of them or everything; a watcher that named none, on every change. A
  ``records_only`` watcher (a follower's fetch, whose answer ends at the leader's LEO, not its
  HW) is not woken by a change of HWs alone. Woken watchers leave the purgatory; a fetch still
  short of its bytes watches again.
* **When a delayed fetch is answered** (:func:`fetch_answered`): it has ``min_bytes``, or one
  of its partitions answered an error, or its deadline passed, or the broker is stopping.
* **What a Fetch's partitions take of its byte budget** (:class:`FetchBudget`): the partitions
  are read in the order the request names them, each within its own limit and what is left of
  the request's (:func:`partition_limit`); the tally of bytes and errors is what
  :func:`fetch_answered` judges. The trio Fetch handler and the simulator's leader answering a
  follower's round both build their answers with it.

The watchers are whatever the shell waits with (a trio event holder, a simulator's parked
request); they are kept in the order they started watching, and :meth:`Purgatory.woken` returns
them in that order, so a simulated run wakes its fetches deterministically.

This module is a sans-IO core.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Final, Generic, NamedTuple, TypeVar

from impl.broker.node import HighWatermarkMoved, LogChanged, RoleChanged
from impl.storage.names import TopicPartition

__sans_io__ = True

W = TypeVar("W", bound=Hashable)


class Change(NamedTuple):
    """What changed: ``partitions``' logs (or HWs), or everything (``None``); ``records``:
    records may have come or gone (False: only high watermarks moved)."""

    partitions: tuple[TopicPartition, ...] | None
    records: bool = True


#: a change to anything (a role change, DeleteRecords, UpdateMetadata, the broker stopping)
EVERYTHING: Final = Change(None, True)


def appended(tp: TopicPartition) -> Change:
    """An append to ``tp`` completed (a leader's or a follower's)."""
    return Change((tp,), True)


def changes_of(effects: Iterable[object]) -> list[Change]:
    """The changes a node step's effects announce, in the order they wake watchers: a role
    change alone stands for everything; otherwise the logs that changed, then the HWs that
    moved."""
    logs: list[TopicPartition] = []
    high_watermarks: list[TopicPartition] = []
    for effect in effects:
        kind = type(effect)
        if kind is RoleChanged:
            return [EVERYTHING]
        if kind is LogChanged:
            assert isinstance(effect, LogChanged)
            logs.append(effect.tp)
        elif kind is HighWatermarkMoved:
            assert isinstance(effect, HighWatermarkMoved)
            high_watermarks.append(effect.tp)
    changes: list[Change] = []
    if logs:
        changes.append(Change(tuple(logs), True))
    if high_watermarks:
        changes.append(Change(tuple(high_watermarks), False))
    return changes


def fetch_answered(*, total_bytes: int, min_bytes: int, errors: bool, now: float,
                   deadline: float, stopping: bool) -> bool:
    """Whether a fetch that found ``total_bytes`` is answered now rather than delayed (Kafka's
    ``DelayedFetch.tryComplete`` and its expiry): it has ``min_bytes``, a partition answered an
    error, ``deadline`` passed (``now`` and ``deadline`` on one clock) or the broker is
    stopping."""
    return total_bytes >= min_bytes or errors or now >= deadline or stopping


def partition_limit(partition_max_bytes: int, budget_bytes: int, have_data: bool) -> int:
    """What one partition of a Fetch may return (the node's ``FetchCall.max_bytes``): its own
    limit within what is left of the request's ``budget_bytes``; once the budget is spent, -1
    (read nothing) if an earlier partition returned data, else 0 (the first batch whole,
    however large: Kafka never answers a fetch with nothing for want of room)."""
    limit = min(partition_max_bytes, budget_bytes)
    if limit > 0:
        return limit
    return -1 if have_data else 0


class FetchBudget:
    """One Fetch request's answer as its partitions are read, in the order the request names
    them (Kafka's ``fetch.max.bytes`` over each partition's ``max.partition.fetch.bytes``):
    :meth:`limit` before a partition is read, :meth:`took` with what it returned, and
    :meth:`answered` once all are read."""

    __slots__ = ("errors", "max_bytes", "total_bytes")

    def __init__(self, max_bytes: int) -> None:
        #: the request's byte budget
        self.max_bytes = max_bytes
        #: the record bytes the partitions read so far returned
        self.total_bytes = 0
        #: whether one of them answered an error
        self.errors = False

    def limit(self, partition_max_bytes: int) -> int:
        """What the next partition may return (:func:`partition_limit`)."""
        total = self.total_bytes
        return partition_limit(partition_max_bytes, self.max_bytes - total, total > 0)

    def took(self, records_bytes: int, error: bool) -> None:
        """A partition returned ``records_bytes`` of records, or answered an error."""
        self.total_bytes += records_bytes
        if error:
            self.errors = True

    def answered(self, *, min_bytes: int, now: float, deadline: float, stopping: bool) -> bool:
        """Whether the request is answered now rather than delayed (:func:`fetch_answered`)."""
        return fetch_answered(total_bytes=self.total_bytes, min_bytes=min_bytes,
                              errors=self.errors, now=now, deadline=deadline, stopping=stopping)


class Purgatory(Generic[W]):
    """Watchers waiting for a change, by partition (see the module docstring)."""

    def __init__(self) -> None:
        #: every watcher, in the order it started watching: (when, its partitions or None,
        #: records_only)
        self._watching: dict[W, tuple[int, tuple[TopicPartition, ...] | None, bool]] = {}
        self._started = 0
        #: the watchers that named each partition
        self._by_partition: dict[TopicPartition, dict[W, None]] = {}
        #: the watchers that named none (woken by every change)
        self._everywhere: dict[W, None] = {}

    def __len__(self) -> int:
        return len(self._watching)

    def watching_partitions(self) -> int:
        """Watchers that named partitions (the delayed fetches)."""
        return len(self._watching) - len(self._everywhere)

    def watch(self, watcher: W, partitions: Iterable[TopicPartition] | None, *,
              records_only: bool) -> None:
        """``watcher`` waits for a change to ``partitions`` (None: to anything)."""
        assert watcher not in self._watching, watcher
        named = None if partitions is None else tuple(partitions)
        self._started += 1
        self._watching[watcher] = (self._started, named, records_only)
        if named is None:
            self._everywhere[watcher] = None
            return
        by_partition = self._by_partition
        for tp in named:
            watchers = by_partition.get(tp)
            if watchers is None:
                watchers = by_partition[tp] = {}
            watchers[watcher] = None

    def forget(self, watcher: W) -> None:
        """``watcher`` no longer waits (nothing if it was woken or forgotten already)."""
        entry = self._watching.pop(watcher, None)
        if entry is None:
            return
        named = entry[1]
        if named is None:
            del self._everywhere[watcher]
            return
        by_partition = self._by_partition
        for tp in named:
            watchers = by_partition.get(tp)
            if watchers is not None:
                watchers.pop(watcher, None)
                if not watchers:
                    del by_partition[tp]

    def woken(self, change: Change) -> list[W]:
        """The watchers ``change`` wakes, in the order they started watching; they leave the
        purgatory."""
        watching = self._watching
        if not watching:
            return []
        if change.partitions is None:
            candidates: Iterable[W] = list(watching)
        else:
            found: dict[W, None] = dict(self._everywhere)
            by_partition = self._by_partition
            for tp in change.partitions:
                watchers = by_partition.get(tp)
                if watchers is not None:
                    found.update(watchers)
            if not found:
                return []
            candidates = (sorted(found, key=lambda watcher: watching[watcher][0])
                          if len(found) > 1 else found)
        woken = [watcher for watcher in candidates
                 if change.records or not watching[watcher][2]]
        for watcher in woken:
            self.forget(watcher)
        return woken
