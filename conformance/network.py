"""A simulated network between numbered nodes, with a deterministic delivery scheduler.

Fault model (what :class:`SimNetwork` injects, each decided by its own seeded stream):

* **Loss**: a message is dropped with probability ``loss_probability``.
* **Delay**: each copy is delivered after a uniform delay in ``[delay_min_ns, delay_max_ns]``.
* **Reordering**: follows from independent delays; ``reorder_probability`` adds an extra delay of
  up to ``delay_max_ns`` so that a later message overtakes an earlier one between the same pair.
* **Duplication**: with probability ``duplicate_probability`` a second copy is scheduled, with its
  own delay.
* **Partitions**: :meth:`SimNetwork.partition` cuts the links between groups of nodes; messages
  sent across a cut are dropped, and so are those already in flight when they would arrive.

It never corrupts a message (Kafka runs over TCP and checks batch CRCs) and never invents one.
Why recovery is still possible: loss is probabilistic with ``loss_probability < 1``, so a protocol
that retries gets through; :meth:`SimNetwork.heal` ends every partition and the simulator's fault
schedule always heals before a run's final checks; duplicates and reordering are exactly what the
replication protocol's epochs and offsets are there to tolerate.

Delivery order is total and deterministic: by delivery time, then by the order messages were
scheduled. This module is a sans-IO core.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

from conformance.clock import SimClock
from conformance.rng import SimRng

__sans_io__ = True

NodeId = int
#: what a message carries (any object: the network never looks inside; a named alias, as
#: mypyc resolves a compiled dataclass's field annotations by name in this module)
Payload = object


@dataclass(frozen=True, slots=True)
class NetworkFaults:
    """The fault mix of one run (chosen from the seed by the simulator)."""

    loss_probability: float = 0.0
    duplicate_probability: float = 0.0
    reorder_probability: float = 0.0
    delay_min_ns: int = 100_000
    delay_max_ns: int = 2_000_000

    def __post_init__(self) -> None:
        assert 0.0 <= self.loss_probability < 1.0, "total loss leaves nothing to recover"
        assert 0.0 <= self.duplicate_probability <= 1.0
        assert 0.0 <= self.reorder_probability <= 1.0
        assert 0 <= self.delay_min_ns <= self.delay_max_ns


@dataclass(frozen=True, slots=True)
class Delivery:
    """One message as it arrives."""

    source: NodeId
    target: NodeId
    payload: Payload
    sent_ns: int
    delivered_ns: int
    sequence: int


#: A queued message: (delivered_ns, sequence, source, target, payload, sent_ns).
QueuedMessage = tuple[int, int, NodeId, NodeId, Payload, int]


@dataclass(frozen=True, slots=True)
class NetworkStatistics:
    """Counters of one network's life."""

    sent: int
    delivered: int
    lost: int
    duplicated: int
    dropped_by_partition: int
    in_flight: int


class SimNetwork:
    """Messages between nodes with loss, delay, duplication, reordering and partitions.

    Args:
        clock: the run's virtual clock (read, never advanced, by the network).
        rng: the network's own stream (``rng.stream("network")``).
        faults: the fault mix.
        in_flight_max: bound on queued messages; exceeding it is a simulator bug.
    """

    def __init__(
        self,
        clock: SimClock,
        rng: SimRng,
        faults: NetworkFaults | None = None,
        in_flight_max: int = 1_000_000,
    ) -> None:
        self._clock = clock
        self._rng = rng
        self.faults = faults or NetworkFaults()
        self._in_flight_max = in_flight_max
        self._queue: list[QueuedMessage] = []
        self._sequence = 0
        self._group_of: dict[NodeId, int] = {}
        self._sent = 0
        self._delivered = 0
        self._lost = 0
        self._duplicated = 0
        self._dropped_by_partition = 0

    # --- partitions --------------------------------------------------------------------------

    def partition(self, groups: Iterable[Iterable[NodeId]]) -> None:
        """Cut every link between different groups; nodes in no group stay connected to all.

        Args:
            groups: disjoint sets of nodes; within a group nodes still talk.

        Raises:
            ValueError: a node appears in two groups.
        """
        group_of: dict[NodeId, int] = {}
        for index, group in enumerate(groups):
            for node in group:
                if node in group_of:
                    raise ValueError(f"node {node} is in two partition groups")
                group_of[node] = index
        self._group_of = group_of

    def heal(self) -> None:
        """End every partition."""
        self._group_of = {}

    def connected(self, source: NodeId, target: NodeId) -> bool:
        """Whether a message from ``source`` to ``target`` can currently arrive."""
        source_group = self._group_of.get(source)
        target_group = self._group_of.get(target)
        return source_group is None or target_group is None or source_group == target_group

    # --- sending and delivering --------------------------------------------------------------

    def send(self, source: NodeId, target: NodeId, payload: object) -> None:
        """Send ``payload``; it arrives zero, one or two times, later, as the fault mix decides."""
        self._sent += 1
        group_of = self._group_of
        if group_of:
            source_group = group_of.get(source)
            target_group = group_of.get(target)
            if not (source_group is None or target_group is None
                    or source_group == target_group):
                self._dropped_by_partition += 1
                return
        rng = self._rng
        faults = self.faults
        loss = faults.loss_probability
        if loss > 0.0 and rng.chance(loss):
            self._lost += 1
            return
        self._schedule(source, target, payload)
        duplicate = faults.duplicate_probability
        if duplicate > 0.0 and rng.chance(duplicate):
            self._duplicated += 1
            self._schedule(source, target, payload)

    def _schedule(self, source: NodeId, target: NodeId, payload: object) -> None:
        faults = self.faults
        rng = self._rng
        delay_ns = faults.delay_min_ns + rng.randrange(
            faults.delay_max_ns - faults.delay_min_ns + 1
        )
        reorder = faults.reorder_probability
        if reorder > 0.0 and rng.chance(reorder):
            delay_ns += rng.randrange(faults.delay_max_ns + 1)
        now_ns = self._clock.monotonic_ns()
        self._sequence += 1
        # (delivered_ns, sequence, ...): the first two are unique, so the heap never compares
        # the rest; the Delivery itself is built only when it arrives.
        heapq.heappush(self._queue, (now_ns + delay_ns, self._sequence, source, target, payload,
                                     now_ns))
        if len(self._queue) > self._in_flight_max:
            raise OverflowError(f"more than {self._in_flight_max} messages in flight")

    def in_transit(self) -> list[tuple[NodeId, NodeId, object]]:
        """The messages queued and not yet delivered, ``(source, target, payload)``, in
        delivery order."""
        return [(entry[2], entry[3], entry[4]) for entry in sorted(self._queue)]

    def next_delivery_ns(self) -> int | None:
        """When the next queued message is due, or None when nothing is in flight."""
        return self._queue[0][0] if self._queue else None

    def deliver_nowait(self) -> list[Delivery]:
        """Every message due at the current time, in delivery order (partitions re-checked).

        Returns:
            The deliveries; messages whose link is cut when they arrive are dropped instead.
        """
        return [Delivery(source, target, payload, sent_ns, delivered_ns, sequence)
                for delivered_ns, sequence, source, target, payload, sent_ns in self._due()]

    def deliver_due(self) -> list[QueuedMessage]:
        """As :meth:`deliver_nowait`, without building a :class:`Delivery` per message: the
        messages as queued, ``(delivered_ns, sequence, source, target, payload, sent_ns)``."""
        return self._due()

    def _due(self) -> list[QueuedMessage]:
        queue = self._queue
        if not queue:
            return []
        now_ns = self._clock.monotonic_ns()
        if queue[0][0] > now_ns:
            return []
        due: list[QueuedMessage] = []
        group_of = self._group_of
        pop = heapq.heappop
        while queue and queue[0][0] <= now_ns:
            entry = pop(queue)
            if group_of and not self.connected(entry[2], entry[3]):
                self._dropped_by_partition += 1
                continue
            self._delivered += 1
            due.append(entry)
        return due

    def drop_to(self, node: NodeId) -> int:
        """Discard every in-flight message to ``node`` (it crashed); return how many."""
        kept = [entry for entry in self._queue if entry[3] != node]
        dropped = len(self._queue) - len(kept)
        heapq.heapify(kept)
        self._queue = kept
        return dropped

    def statistics(self) -> NetworkStatistics:
        """The counters so far."""
        return NetworkStatistics(
            sent=self._sent,
            delivered=self._delivered,
            lost=self._lost,
            duplicated=self._duplicated,
            dropped_by_partition=self._dropped_by_partition,
            in_flight=len(self._queue),
        )
