"""Consumer groups in the cluster simulator: members speaking the classic protocol to the
group coordinators the simulated brokers host, and the end-to-end checks of what they were told.

Each simulated broker's node hosts the real :class:`~impl.broker.group_coordinator.
GroupCoordinator` (:mod:`impl.broker.node_groups`): it loads and unloads the
``__consumer_offsets`` partitions its node leads and writes through the node's acks=all produce
path. :class:`GroupMember` is a consumer of the eager classic protocol as the real clients speak
it: it finds its coordinator (the leader of the group's offsets partition in the metadata, as
FindCoordinator answers) and keeps it until told NOT_COORDINATOR or a request times out; it
joins (the KIP-394 round trip for a member id), the leader assigns the topic's partitions
round-robin in SyncGroup, it fetches its committed offsets, heartbeats, commits, revokes what it
owns before it rejoins, leaves, crashes (a restart is a new process; a static member comes back
with its ``group.instance.id``, KIP-345) and pauses past its session timeout (it is evicted and
keeps what it owns until it learns so, as a paused consumer does). One request is in flight per
member besides its asynchronous auto-commit, and a commit waits for the auto-commit's answer (a
connection delivers once and in order, as TCP does: the broker drops a duplicated request). An
auto-commit not yet sent when a new assignment arrives is dropped (it would carry the current
positions and generation).

End-to-end checks, under the model's names:

* ``GROUP_ASSIGNMENT_EXCLUSIVE``: members that hold the same generation own disjoint partitions;
* ``OFFSETS_DURABLE``: an OffsetFetch answers, for every partition, at least the last commit
  acknowledged before it was sent (across coordinator failover, leader changes and crashes), and
  after the run the loaded coordinator holds it; an answer of a leader deposed by a later epoch
  in ZooKeeper whose LeaderAndIsr has not reached it (a session expiry) is not held to it: it
  still owns the partition in its own view and answers from its cache, as Kafka's does;
* ``GROUP_COMMIT_FENCED`` is checked on the coordinator's trace (the generations at
  acceptance); the members give it stale commits to refuse: a member told REBALANCE_IN_PROGRESS
  rejoins at once and its auto-commit of the partitions it revoked, prepared with the old
  generation, goes out a few milliseconds later on the same connection (Kafka's asynchronous
  auto-commit racing the rebalance), so it may arrive after the next generation is stable.

This module is a sans-IO core.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, Final

from impl.broker import group_coordinator as gc
from impl.broker import group_records
from impl.broker.node import GroupCall
from impl.storage.names import TopicPartition

from .rng import SimRng

if TYPE_CHECKING:
    from .cluster_sim import ClusterWorld

__sans_io__ = True

#: ``offsets.topic.num.partitions`` in the simulator.
OFFSETS_PARTITIONS: Final = 2
#: Node ids of the group members: ``GROUP_NODE_BASE + index``.
GROUP_NODE_BASE: Final = 1100
#: Members per group (the first of each group is a static member).
MEMBERS_PER_GROUP: Final = 3
#: ``session.timeout.ms``, ``rebalance.timeout.ms`` and the heartbeat interval (simulated).
SESSION_MS: Final = 40
REBALANCE_MS: Final = 60
HEARTBEAT_MS: Final = 8
#: A request unanswered this long is given up (the coordinator is looked up again).
REQUEST_TIMEOUT_MS: Final = 30
#: Back-off after a coordinator error.
BACKOFF_MS: Final = 3
#: ``group.initial.rebalance.delay.ms`` (simulated).
INITIAL_REBALANCE_DELAY_MS: Final = 2
#: A load reads at most this much per tick (small: a load spans ticks, requests meet it).
LOAD_CHUNK_BYTES: Final = 600
#: ``offsets.commit.timeout.ms`` (simulated).
COMMIT_TIMEOUT_MS: Final = 30

_COORDINATOR_ERRORS: Final = frozenset({gc.NOT_COORDINATOR, gc.COORDINATOR_NOT_AVAILABLE,
                                        gc.COORDINATOR_LOAD_IN_PROGRESS})
#: errors that end the member's generation
_GENERATION_OVER: Final = frozenset({gc.ILLEGAL_GENERATION, gc.UNKNOWN_MEMBER_ID,
                                     gc.FENCED_INSTANCE_ID, gc.REBALANCE_IN_PROGRESS})


def _group_names() -> tuple[str, ...]:
    """One group per offsets partition (the first name, in order, that maps there)."""
    chosen: dict[int, str] = {}
    index = 0
    while len(chosen) < OFFSETS_PARTITIONS:
        name = f"group-{index}"
        chosen.setdefault(group_records.partition_for(name, OFFSETS_PARTITIONS), name)
        index += 1
    return tuple(chosen[p] for p in sorted(chosen))


#: The simulated groups, one per offsets partition.
GROUPS: Final = _group_names()


def coordinator_config() -> gc.CoordinatorConfig:
    """The coordinators' settings in the simulator (milliseconds scaled like the rest)."""
    return gc.CoordinatorConfig(
        offsets_partitions=OFFSETS_PARTITIONS, min_session_timeout_ms=1,
        max_session_timeout_ms=1_000, initial_rebalance_delay_ms=INITIAL_REBALANCE_DELAY_MS,
        load_buffer_bytes=LOAD_CHUNK_BYTES)


def subscription(topic: str) -> bytes:
    """A ``consumer`` protocol subscription (version 0) to ``topic``."""
    raw = topic.encode()
    return struct.pack(">hih", 0, 1, len(raw)) + raw + struct.pack(">i", -1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    """A ``consumer`` protocol assignment (version 0) of ``partitions`` of ``topic``."""
    raw = topic.encode()
    body = struct.pack(">hih", 0, 1, len(raw)) + raw + struct.pack(">i", len(partitions))
    return body + b"".join(struct.pack(">i", p) for p in partitions) + struct.pack(">i", -1)


def owned_of(data: bytes) -> frozenset[int]:
    """The partitions of an assignment (empty for an empty one)."""
    if len(data) < 8:
        return frozenset()
    size = struct.unpack_from(">h", data, 6)[0]
    position = 8 + size
    count = struct.unpack_from(">i", data, position)[0]
    return frozenset(struct.unpack_from(">i", data, position + 4 + 4 * i)[0]
                     for i in range(count))


class GroupMember:
    """One consumer of a group (eager classic protocol, one request in flight)."""

    def __init__(self, world: ClusterWorld, node: int, group: str, index: int) -> None:
        self.world = world
        self.node = node
        self.group = group
        self.instance_id = f"{group}-static" if index == 0 else None
        self.client_id = f"{group}-c{index}"
        self.offsets_tp = TopicPartition(gc.OFFSETS_TOPIC,
                                         group_records.partition_for(group, OFFSETS_PARTITIONS))
        #: ``rejoin``, ``joining``, ``syncing``, ``stable``, ``paused`` or ``down``
        self.state = "rejoin"
        self.member_id = ""
        self.generation = -1
        self.owned: frozenset[int] = frozenset()
        self.coordinator = -1
        #: (request id, kind, sent ms, timeout ms, detail)
        self.flight: tuple[int, str, int, int, Any] | None = None
        self.wake_ms = 0
        self.next_heartbeat_ms = 0
        self.fetch_needed = False
        #: the asynchronous auto-commit: (due ms, generation, partition -> offset), then in
        #: flight as (request id, sent ms, generation, partition -> offset)
        self.auto_commit: tuple[int, int, dict[int, int]] | None = None
        self.auto_flight: tuple[int, int, int, dict[int, int]] | None = None
        self.restarts = 0

    # --- requests ------------------------------------------------------------------------

    def _send(self, kind: str, request: Any, timeout_ms: int, detail: Any = None) -> bool:
        """Send to the coordinator (looked up when unknown); False when there is none."""
        world = self.world
        if self.coordinator < 0:
            self.coordinator = world.leader_of(self.offsets_tp)
            if self.coordinator < 0:
                return False
        now = world.now_ms()
        self.flight = (request.request_id, kind, now, timeout_ms, detail)
        world.network.send(self.node, self.coordinator, GroupCall(self.node, request))
        return True

    def _join(self) -> None:
        self.owned = frozenset()  # eager: revoke everything before rejoining
        sent = self._send("join", gc.JoinGroup(
            self.world.next_request_id(), self.group, self.member_id, self.instance_id,
            self.client_id, "/sim", SESSION_MS, REBALANCE_MS, "consumer",
            (("range", subscription(self.world.topic)),), True), REBALANCE_MS + REQUEST_TIMEOUT_MS)
        self.state = "joining" if sent else "rejoin"

    def commit(self) -> None:
        """Commit a new offset for every owned partition (when nothing is in flight)."""
        if self.state != "stable" or self.flight is not None or not self.owned or (
                self.auto_flight is not None):
            return  # (one connection: a commit goes out after the auto-commit's answer)
        world = self.world
        entries = []
        values = {}
        for partition in sorted(self.owned):
            value = world.next_commit_value(self.group, partition)
            values[partition] = value
            entries.append(gc.CommitEntry(world.topic, partition, value, -1, None))
        self._send("commit", gc.OffsetCommit(
            world.next_request_id(), self.group, self.generation, self.member_id,
            self.instance_id, -1, tuple(entries)), REQUEST_TIMEOUT_MS,
            (self.generation, values))

    def fetch(self) -> None:
        """Fetch the committed offsets of the topic's partitions."""
        if self.state not in ("stable", "paused") or self.flight is not None:
            self.fetch_needed = True
            return
        world = self.world
        wanted = tuple((world.topic, p) for p in range(world.config.partitions))
        floors = {p: world.group_acked.get((self.group, p), -1) for p in range(
            world.config.partitions)}
        self.fetch_needed = not self._send(
            "fetch", gc.OffsetFetch(world.next_request_id(), self.group, wanted),
            REQUEST_TIMEOUT_MS, floors)

    def leave(self) -> None:
        """LeaveGroup, then the process stops for a while."""
        if self.state != "stable" or self.flight is not None:
            return
        self.owned = frozenset()
        self._send("leave", gc.LeaveGroup(self.world.next_request_id(), self.group,
                                          ((self.member_id, self.instance_id),)),
                   REQUEST_TIMEOUT_MS)

    def crash(self, down_ms: int) -> None:
        """The process dies; a new one starts ``down_ms`` later (a dynamic member with no member
        id, a static one with its instance id)."""
        self.state = "down"
        self.flight = None
        self.auto_commit = self.auto_flight = None
        self.owned = frozenset()
        self.member_id = ""
        self.generation = -1
        self.coordinator = -1
        self.wake_ms = self.world.now_ms() + down_ms
        self.restarts += 1

    def pause(self, paused_ms: int) -> None:
        """The consumer stops heartbeating for ``paused_ms`` (it keeps what it owns)."""
        if self.state == "stable" and self.flight is None:
            self.state = "paused"
            self.wake_ms = self.world.now_ms() + paused_ms

    # --- time and answers ----------------------------------------------------------------

    def tick(self) -> None:
        """Time passed: timeouts, restarts, heartbeats, joins."""
        now = self.world.now_ms()
        if self.auto_flight is not None and now - self.auto_flight[1] >= REQUEST_TIMEOUT_MS:
            self.auto_flight = None
        if self.auto_commit is not None:
            self._send_auto_commit(now)
        flight = self.flight
        if flight is not None:
            if now - flight[2] < flight[3]:
                return
            self.flight = None  # given up: look the coordinator up again
            self.coordinator = -1
            if flight[1] in ("join", "sync"):
                self.state = "rejoin"
            elif flight[1] == "leave":
                self.state = "down"
                self.wake_ms = now + BACKOFF_MS
        if now < self.wake_ms:
            return
        if self.state == "down":
            self.state = "rejoin"
            self.member_id = "" if self.instance_id is None else self.member_id
        if self.state == "paused":
            self.state = "stable"
        if self.state == "rejoin":
            self._join()
        elif self.state == "stable":
            if self.fetch_needed:
                self.fetch()
            elif now >= self.next_heartbeat_ms:
                self._send("heartbeat", gc.Heartbeat(
                    self.world.next_request_id(), self.group, self.generation, self.member_id,
                    self.instance_id), REQUEST_TIMEOUT_MS)

    def _coordinator_error(self) -> None:
        self.coordinator = -1
        self.wake_ms = self.world.now_ms() + BACKOFF_MS

    def _send_auto_commit(self, now: int) -> None:
        pending = self.auto_commit
        if pending is None or now < pending[0] or self.auto_flight is not None:
            return
        self.auto_commit = None
        _, generation, values = pending
        world = self.world
        coordinator = self.coordinator if self.coordinator >= 0 else world.leader_of(
            self.offsets_tp)
        if coordinator < 0 or self.state == "down":
            return
        request = gc.OffsetCommit(
            world.next_request_id(), self.group, generation, self.member_id, self.instance_id,
            -1, tuple(gc.CommitEntry(world.topic, p, v, -1, None) for p, v in values.items()))
        self.auto_flight = (request.request_id, now, generation, values)
        world.network.send(self.node, coordinator, GroupCall(self.node, request))

    def _generation_over(self, code: int) -> None:
        if code == gc.REBALANCE_IN_PROGRESS and self.owned and self.auto_commit is None:
            # revoked: the auto-commit of what it owned, prepared with this generation
            self.auto_commit = (self.world.now_ms() + self.world.group_rng.randrange(12),
                                self.generation,
                                {p: self.world.next_commit_value(self.group, p)
                                 for p in sorted(self.owned)})
        if code == gc.UNKNOWN_MEMBER_ID:
            self.member_id = ""
        if code == gc.FENCED_INSTANCE_ID:
            # fatal for the process (another process holds the instance id): a restart
            self.crash(REBALANCE_MS)
            return
        self.owned = frozenset()
        self.state = "rejoin"

    def on_reply(self, reply: gc.Respond) -> None:
        """An answer from a coordinator."""
        auto = self.auto_flight
        if auto is not None and auto[0] == reply.request_id:
            self.auto_flight = None
            answered = dict(reply.body["partitions"])
            for partition, value in auto[3].items():
                if answered.get((self.world.topic, partition)) == gc.NONE:
                    self.world.commit_acknowledged(self, auto[2], partition, value)
            return
        flight = self.flight
        if flight is None or flight[0] != reply.request_id or self.state == "down":
            return
        self.flight = None
        kind = flight[1]
        body = reply.body
        now = self.world.now_ms()
        if kind == "join":
            self._joined(body)
        elif kind == "sync":
            code = body["error_code"]
            if code == gc.NONE:
                self.owned = owned_of(bytes(body["assignment"]))
                self.state = "stable"
                self.auto_commit = None  # (the next auto-commit is of the new assignment)
                self.next_heartbeat_ms = now + HEARTBEAT_MS
                self.world.assigned(self)
                self.fetch()
            elif code in _COORDINATOR_ERRORS:
                self._coordinator_error()
                self.state = "rejoin"
            else:
                self._generation_over(code)
        elif kind == "heartbeat":
            code = body["error_code"]
            if code == gc.NONE:
                self.next_heartbeat_ms = now + HEARTBEAT_MS
            elif code in _COORDINATOR_ERRORS:
                self._coordinator_error()
            elif code in _GENERATION_OVER:
                self._generation_over(code)
        elif kind == "commit":
            generation, values = flight[4]
            codes: dict[tuple[str, int], int] = dict(body["partitions"])
            for partition, value in values.items():
                code = codes.get((self.world.topic, partition), gc.UNKNOWN_SERVER_ERROR)
                if code == gc.NONE:
                    self.world.commit_acknowledged(self, generation, partition, value)
            worst = next((c for c in codes.values() if c != gc.NONE), gc.NONE)
            if worst in _COORDINATOR_ERRORS:
                self._coordinator_error()
            elif worst in _GENERATION_OVER:
                self._generation_over(worst)
        elif kind == "fetch":
            code = body["error_code"]
            if code == gc.NONE:
                found = body["partitions"]
                for partition, floor in flight[4].items():
                    # (its own name: ``value`` is an ``int`` above, and mypyc holds it to that)
                    committed: group_records.OffsetValue | None = found.get(
                        (self.world.topic, partition))
                    self.world.offsets_fetched(self, reply.request_id, partition, floor,
                                               -1 if committed is None else committed.offset)
            else:
                self.fetch_needed = True
                if code in _COORDINATOR_ERRORS:
                    self._coordinator_error()
        elif kind == "leave":
            self.state = "down"
            self.member_id = "" if self.instance_id is None else self.member_id
            self.generation = -1
            self.wake_ms = now + REBALANCE_MS

    def _joined(self, body: Any) -> None:
        code = body["error_code"]
        if code == gc.NONE:
            self.member_id = body["member_id"]
            self.generation = body["generation_id"]
            members = [m["member_id"] for m in body.get("members") or ()]
            assignments: tuple[tuple[str, bytes], ...] = ()
            if body.get("leader") == self.member_id and members:
                ordered = sorted(members)
                shares: dict[str, list[int]] = {m: [] for m in ordered}
                for partition in range(self.world.config.partitions):
                    shares[ordered[partition % len(ordered)]].append(partition)
                assignments = tuple((m, assignment(self.world.topic, shares[m]))
                                    for m in ordered)
            sent = self._send("sync", gc.SyncGroup(
                self.world.next_request_id(), self.group, self.generation, self.member_id,
                self.instance_id, "consumer", body.get("protocol_name"), assignments),
                REBALANCE_MS + REQUEST_TIMEOUT_MS)
            self.state = "syncing" if sent else "rejoin"
        elif code == gc.MEMBER_ID_REQUIRED:
            self.member_id = body["member_id"]
            self._join()
        elif code in _COORDINATOR_ERRORS:
            self._coordinator_error()
            self.state = "rejoin"
        elif code == gc.FENCED_INSTANCE_ID:
            self.crash(REBALANCE_MS)
        else:
            if code == gc.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            self.state = "rejoin"
            self.wake_ms = self.world.now_ms() + BACKOFF_MS


class GroupClients:
    """Every group's members and the books the end-to-end checks keep."""

    def __init__(self, world: ClusterWorld, rng: SimRng) -> None:
        self.world = world
        self.rng = rng
        self.members: list[GroupMember] = []
        for group in GROUPS:
            for index in range(MEMBERS_PER_GROUP):
                node = GROUP_NODE_BASE + len(self.members)
                self.members.append(GroupMember(world, node, group, index))
        self.by_node = {m.node: m for m in self.members}
        self.commits_acknowledged = 0
        self.fetches_checked = 0
        self.rebalances = 0

    def operate(self) -> None:
        """One group operation per step, from the ``groups`` stream alone."""
        rng = self.rng
        member = self.members[rng.randrange(len(self.members))]
        roll = rng.randrange(100)
        if roll < 45:
            member.commit()
        elif roll < 55:
            member.fetch()
        elif roll < 58:
            member.leave()
        elif roll < 61:
            member.crash(rng.randint(2, 40))
        elif roll < 64:
            member.pause(rng.randint(SESSION_MS // 2, 2 * SESSION_MS))

    def tick(self) -> None:
        """Every member's timers."""
        for member in self.members:
            member.tick()

    def check(self) -> None:
        """GROUP_ASSIGNMENT_EXCLUSIVE over the members' own view."""
        by_generation: dict[tuple[str, int], dict[int, str]] = {}
        for member in self.members:
            if not member.owned or member.state == "down":
                continue
            owners = by_generation.setdefault((member.group, member.generation), {})
            for partition in member.owned:
                other = owners.setdefault(partition, member.client_id)
                if other != member.client_id:
                    self.world.violation("GROUP_ASSIGNMENT_EXCLUSIVE", (
                        f"{member.group}: {other} and {member.client_id} both own partition "
                        f"{partition} in generation {member.generation}"))
