"""The cluster simulator's admin workload: topics created, grown and deleted, preferred
replica elections, each through ZooKeeper exactly as logproof's admin code writes it.

Why: the controller's topic decisions (a topic or partitions appearing under
``/brokers/topics``, ``/admin/delete_topics``, ``/admin/preferred_replica_election``) are only
reached when something writes those znodes while the cluster runs and fails. Topics, their
growth, deletion and reassignment go through :mod:`impl.controller.admin` itself
(``create_topic``, ``add_partitions``, ``delete_topic``, ``reassign_partitions``), over
:class:`SyncAdminClient`, the Coordinator port on the simulated ZooKeeper server without a
scheduler (its calls never wait, so a coroutine of them runs to completion at once:
:func:`run_now`). A preferred election is the znode
``ElectLeaders`` writes (:func:`impl.controller.znodes.encode_preferred_election`); a pending one
is not waited out, the operation is skipped instead.

Every operation is drawn from the ``admin`` stream of the seed, one draw sequence per step
whatever the system's state, so the other streams (workload, faults, network) and every seed's
fault schedule are what they were without it. The admin topics (``a0``, ``a1``, ...; a name is
never reused, so a topic's trace never continues a deleted one's) hold no client data; the
topic ``t`` the producer writes is never deleted, grown or reassigned here (its reassignments
are faults), only its leaders moved back to the preferred replicas. A reassignment of an admin
topic may meet the ``reassign`` fault, which overwrites ``/admin/reassign_partitions``: the
controller then cancels the admin topic's (KIP-455).

Fault model: a call the cluster refuses (a topic grown while one of its partitions is
reassigned, a reassignment or an election while one is pending) is counted as skipped. Besides,
the cluster simulator's ``malformed_znode`` fault has it write what an operator or a buggy tool
could (:meth:`AdminWorkload.write_malformed`): garbage where the controller reads a request or
a notice (``/admin/reassign_partitions``, ``/admin/preferred_replica_election``, an ISR change
or log-dir event notification, a topic's config with its change notice, a topic znode of a
topic nobody created, a broker registration of an id no broker has). The controller logs it
and carries on: the preferred election znode and the notifications are deleted, the
reassignment znode and the configs stay ignored until rewritten (as Kafka's), the topic and the
broker are never taken in. Nothing is expected of such a request.

This module is a sans-IO core.
"""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from mypy_extensions import mypyc_attr

from conformance.rng import SimRng
from impl.controller import admin
from impl.controller.coordinator import (
    ANY_VERSION,
    CoordinatorError,
    CoordinatorEvent,
    CreateOp,
    CreateResult,
    DeleteOp,
    NodeExistsError,
    NodeStat,
    NoNodeError,
    Op,
    OpResult,
    SetOp,
    SetResult,
)
from impl.controller.znodes import (
    ISR_CHANGE_NOTIFICATION_PATH,
    ISR_CHANGE_PREFIX,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    LOG_DIR_EVENT_PREFIX,
    PREFERRED_REPLICA_ELECTION_PATH,
    REASSIGN_PARTITIONS_PATH,
    ReassignmentTarget,
    ZnodeFormatError,
    broker_path,
    decode_reassignment,
    decode_topic,
    encode_preferred_election,
    topic_path,
)

from ._coordinator_server import SimulatedZooKeeperServer

__sans_io__ = True

_T = TypeVar("_T")

#: chance that a step carries an admin operation
ADMIN_PROBABILITY = 0.05
#: admin topics alive at once (created and not yet deleted) at most
MAX_ADMIN_TOPICS = 2
#: partitions of an admin topic at most
MAX_ADMIN_PARTITIONS = 3
#: What :meth:`AdminWorkload.write_malformed` writes (``target % len``).
MALFORMED_ZNODES = ("reassign", "preferred_election", "isr_change", "log_dir_event",
                    "topic_config", "topic", "broker")
#: Garbage any of them may get: not JSON, empty, not UTF-8, JSON of the wrong shape.
MALFORMED_DATA = (b"{not json", b"", b"\xff\xfe\x00", b"[1,2,3]", b'{"version":99}',
                  b'{"version":1,"partitions":"all"}')
#: Garbage of the right shape with a wrong field, per znode (what a buggy tool writes).
MALFORMED_FIELDS: dict[str, tuple[bytes, ...]] = {
    "reassign": (
        b'{"version":1,"partitions":[{"topic":7}]}',
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[]}]}',
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[0,0]}]}',
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[0,1],'
        b'"log_dirs":[1,2]}]}',
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[0,1],'
        b'"log_dirs":["any"]}]}',
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[0,1]},'
        b'{"topic":"t","partition":0,"replicas":[1,0]}]}',
    ),
    "preferred_election": (b'{"version":1,"partitions":[{"topic":"t","partition":"0"}]}',),
    "isr_change": (b'{"version":1,"partitions":[{"partition":0}]}',
                   b'{"version":1,"partitions":[{"topic":"t","partition":"x"}]}'),
    "log_dir_event": (b'{"version":1,"broker":0,"event":2}', b'{"version":1,"broker":"b"}'),
    "topic_config": (b'{"version":1,"config":[]}',),
    "topic": (b'{"version":1,"partitions":{"x":[0]}}', b'{"version":1,"partitions":{"1":[0]}}',
              b'{"version":1,"partitions":{"0":[]}}', b'{"version":1,"partitions":{"0":[-1]}}',
              b'{"version":1,"partitions":{"0":[1,1]}}', b'{"version":1,"partitions":{"0":7}}'),
    "broker": (b'{"version":4,"endpoints":["PLAINTEXT:9092"]}', b'{"version":4,"port":9092}',
               b'{"version":4,"host":"h","port":9092,"rack":5}',
               b'{"version":4,"endpoints":"x"}'),
}
#: Kafka's topic config paths (the controller reads ``unclean.leader.election.enable``)
CONFIG_TOPICS_PATH = "/config/topics"
CONFIG_CHANGES_PATH = "/config/changes"


@mypyc_attr(native_class=False)  # mypyc: a built-in exception's subclass stays a Python class
class AdminOperationWaitedError(RuntimeError):
    """A coroutine given to :func:`run_now` suspended: it needs a scheduler."""


def run_now(operation: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine over :class:`SyncAdminClient` to completion (it never suspends).

    Raises:
        AdminOperationWaitedError: it suspended after all.
    """
    try:
        operation.send(None)
    except StopIteration as done:
        result: _T = done.value
        return result
    operation.close()
    raise AdminOperationWaitedError("an admin operation waited for a scheduler")


class SyncAdminClient:
    """The Coordinator port over one session of the simulated server; every call completes
    at once (no checkpoint), so :func:`run_now` drives the admin code over it."""

    def __init__(self, server: SimulatedZooKeeperServer, session: int) -> None:
        self._server = server
        self._session = session

    @property
    def session_id(self) -> int:
        """The admin session."""
        return self._session

    def _one(self, op: Op) -> OpResult:
        result = self._server.multi(self._session, [op])[0]
        if isinstance(result, CoordinatorError):
            raise result
        return result

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     sequential: bool = False) -> str:
        """Create a node."""
        result = self._one(CreateOp(path, data, ephemeral=ephemeral, sequential=sequential))
        assert isinstance(result, CreateResult)
        return result.path

    async def get(self, path: str, *, watch: bool = False) -> tuple[bytes, NodeStat]:
        """Read a node."""
        return self._server.get(self._session, path, watch)

    async def set(self, path: str, data: bytes, *, version: int = ANY_VERSION) -> NodeStat:
        """Write a node, conditional on ``version``."""
        result = self._one(SetOp(path, data, version))
        assert isinstance(result, SetResult)
        return result.stat

    async def delete(self, path: str, *, version: int = ANY_VERSION) -> None:
        """Delete a node, conditional on ``version``."""
        self._one(DeleteOp(path, version))

    async def exists(self, path: str, *, watch: bool = False) -> NodeStat | None:
        """A node's stat or ``None``."""
        return self._server.exists(self._session, path, watch)

    async def children(self, path: str, *, watch: bool = False) -> list[str]:
        """A node's children."""
        return self._server.children(self._session, path, watch)

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        """Apply ``ops`` atomically."""
        return self._server.multi(self._session, ops)

    async def next_event(self) -> CoordinatorEvent:
        """The next queued event.

        Raises:
            AdminOperationWaitedError: none is queued (waiting needs a scheduler).
        """
        event = self.next_event_nowait()
        if event is None:
            raise AdminOperationWaitedError("no event queued for the admin session")
        return event

    def next_event_nowait(self) -> CoordinatorEvent | None:
        """The next queued event, if any."""
        return self._server.pop_event(self._session)

    async def close(self) -> None:
        """End the admin session."""
        self._server.close_session(self._session)


class AdminWorkload:
    """The admin operations of one run (see the module docstring)."""

    def __init__(self, server: SimulatedZooKeeperServer, session: int, rng: SimRng, *,
                 log_dirs: Sequence[Sequence[str]], replication_factor: int,
                 preferred: Sequence[tuple[str, int]]) -> None:
        self._server = server
        self._log_dirs = tuple(tuple(dirs) for dirs in log_dirs)
        brokers = len(self._log_dirs)
        self._client = SyncAdminClient(server, session)
        self._brokers = brokers
        self._replication_factor = replication_factor
        self._preferred = tuple(preferred)
        self._rng = rng
        self._created = 0
        #: admin topics created and not (yet) asked to be deleted
        self.alive: list[str] = []
        #: admin topics asked to be deleted
        self.deleting: list[str] = []
        #: their replicas when the deletion was asked (partition -> brokers)
        self.assigned_at_deletion: dict[str, dict[int, tuple[int, ...]]] = {}
        #: the brokers of those replicas that a reassignment pending in
        #: ``/admin/reassign_partitions`` when the deletion was asked drops (partition ->
        #: brokers): the controller may still complete it before it reads the deletion
        self.dropped_at_deletion: dict[str, dict[int, frozenset[int]]] = {}
        self.done: dict[str, int] = {}
        self.skipped = 0
        self._malformed_topics = 0
        #: malformed znodes written (:meth:`write_malformed`)
        self.malformed_written = 0

    def _replicas(self, start: int) -> tuple[int, ...]:
        return tuple((start + i) % self._brokers for i in range(self._replication_factor))

    def step(self) -> None:
        """Maybe one admin operation (four draws every step, whatever happens)."""
        happens = self._rng.chance(ADMIN_PROBABILITY)
        roll = self._rng.randrange(100)
        choice = self._rng.randrange(1 << 16)
        start = self._rng.randrange(self._brokers)
        if not happens:
            return
        if roll < 30:
            self._create(choice, start)
        elif roll < 45:
            self._add_partition(choice, start)
        elif roll < 60:
            self._delete(choice)
        elif roll < 75:
            self._reassign(choice, start)
        else:
            self._elect_preferred(choice)

    def _count(self, what: str) -> None:
        self.done[what] = self.done.get(what, 0) + 1

    def _create(self, choice: int, start: int) -> None:
        if len(self.alive) >= MAX_ADMIN_TOPICS:
            self.skipped += 1
            return
        topic = f"a{self._created}"
        self._created += 1
        partitions = 1 + choice % 2
        run_now(admin.create_topic(self._client, topic, assignment={
            p: self._replicas(start + p) for p in range(partitions)}))
        self.alive.append(topic)
        self._count("topics_created")

    def _add_partition(self, choice: int, start: int) -> None:
        if not self.alive:
            self.skipped += 1
            return
        topic = self.alive[choice % len(self.alive)]
        data, _ = self._server.get(self._client.session_id, topic_path(topic), False)
        count = len(decode_topic(topic, data).partitions)
        if count >= MAX_ADMIN_PARTITIONS:
            self.skipped += 1
            return
        try:
            run_now(admin.add_partitions(self._client, topic, count + 1,
                                         assignment={count: self._replicas(start)}))
        except (admin.AdminError, CoordinatorError):
            self.skipped += 1
            return
        self._count("partitions_added")

    def _delete(self, choice: int) -> None:
        if not self.alive:
            self.skipped += 1
            return
        topic = self.alive.pop(choice % len(self.alive))
        self.assigned_at_deletion[topic] = dict(
            run_now(admin.read_topic(self._client, topic)).partitions)
        self.dropped_at_deletion[topic] = self._dropped_by_pending_reassignment(
            topic, self.assigned_at_deletion[topic])
        run_now(admin.delete_topic(self._client, topic))
        self.deleting.append(topic)
        self._count("topics_deleted")

    def _dropped_by_pending_reassignment(
            self, topic: str, assigned: dict[int, tuple[int, ...]]) -> dict[int, frozenset[int]]:
        """The replicas of ``assigned`` that the reassignment pending in ZooKeeper drops, per
        partition (none when no reassignment is pending or its znode is malformed)."""
        try:
            data, _ = self._server.get(self._client.session_id, REASSIGN_PARTITIONS_PATH, False)
            targets = decode_reassignment(data)
        except (NoNodeError, ZnodeFormatError):
            return {}
        dropped: dict[int, frozenset[int]] = {}
        for target in targets:
            if target.topic == topic and target.partition in assigned:
                gone = frozenset(assigned[target.partition]) - set(target.replicas)
                if gone:
                    dropped[target.partition] = gone
        return dropped

    def _reassign(self, choice: int, start: int) -> None:
        """Reassign one partition of an admin topic: a new replica order, one replica fewer
        (never below two) or back to the replication factor, each replica's log dir ``any``
        or one of its broker's dirs (KIP-113)."""
        if not self.alive:
            self.skipped += 1
            return
        topic = self.alive[choice % len(self.alive)]
        assignment = run_now(admin.read_topic(self._client, topic))
        partition = (choice >> 1) % len(assignment.partitions)
        replicas = assignment.partitions[partition]
        if choice & 32 and len(replicas) > 2:
            target = tuple(r for r in replicas if r != replicas[start % len(replicas)])
        elif len(replicas) < self._replication_factor:
            target = (*replicas, next(b for b in range(self._brokers) if b not in replicas))
        else:
            shift = 1 + start % max(1, len(replicas) - 1)
            target = replicas[shift:] + replicas[:shift]
        dirs = tuple("any" if choice >> (6 + i) & 1 else
                     self._log_dirs[broker][(choice >> (10 + i)) % len(self._log_dirs[broker])]
                     for i, broker in enumerate(target))
        try:
            run_now(admin.reassign_partitions(self._client, [
                ReassignmentTarget(topic, partition, target, dirs)]))
        except admin.ReassignmentInProgressError:  # another one is running (or t's)
            self.skipped += 1
            return
        self._count("reassignments")

    def _elect_preferred(self, choice: int) -> None:
        partitions = [tp for i, tp in enumerate(self._preferred) if choice >> i & 1] or list(
            self._preferred)
        partitions += [(topic, 0) for topic in self.alive]
        try:
            run_now(self._client.create(PREFERRED_REPLICA_ELECTION_PATH,
                                        encode_preferred_election(partitions)))
        except NodeExistsError:  # the previous one is pending: ElectLeaders would wait
            self.skipped += 1
            return
        self._count("preferred_elections")

    # --- malformed znodes (the ``malformed_znode`` fault) ------------------------------------

    def write_malformed(self, target: int) -> bool:
        """Write garbage where the controller reads requests and notices (see the module
        docstring); ``target`` picks the znode and the garbage.

        Returns:
            False when nothing was written (a request of that kind is pending, or the topic
            of the config is gone).
        """
        kind = MALFORMED_ZNODES[target % len(MALFORMED_ZNODES)]
        garbage = MALFORMED_DATA + MALFORMED_FIELDS[kind]
        data = garbage[target // len(MALFORMED_ZNODES) % len(garbage)]
        server, session = self._server, self._client.session_id
        ops: list[Op]
        if kind == "reassign":
            ops = [CreateOp(REASSIGN_PARTITIONS_PATH, data)]
        elif kind == "preferred_election":
            ops = [CreateOp(PREFERRED_REPLICA_ELECTION_PATH, data)]
        elif kind == "isr_change":
            ops = [CreateOp(f"{ISR_CHANGE_NOTIFICATION_PATH}/{ISR_CHANGE_PREFIX}", data,
                            sequential=True)]
        elif kind == "log_dir_event":
            ops = [CreateOp(f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{LOG_DIR_EVENT_PREFIX}", data,
                            sequential=True)]
        elif kind == "topic_config":
            topics = [*self._preferred_topics(), *self.alive]
            topic = topics[target // 64 % len(topics)]
            for path in ("/config", CONFIG_TOPICS_PATH, CONFIG_CHANGES_PATH):
                server.multi(session, [CreateOp(path)])  # (NodeExists when there)
            path = f"{CONFIG_TOPICS_PATH}/{topic}"
            write: Op = (SetOp(path, data) if server.exists(session, path, False) is not None
                         else CreateOp(path, data))
            ops = [write, CreateOp(f"{CONFIG_CHANGES_PATH}/config_change_",
                                   b'{"version":2,"entity_path":"topics/' + topic.encode()
                                   + b'"}', sequential=True)]
        elif kind == "topic":
            # a topic nobody created, its name sometimes one Kafka refuses
            self._malformed_topics += 1
            name = f"m{self._malformed_topics}{'!' if target // 1024 % 2 else ''}"
            ops = [CreateOp(topic_path(name), data)]
        else:
            # a registration of a broker id no broker has (one of another version's tools)
            ops = [CreateOp(broker_path(self._brokers + 10 + target // 1024 % 4), data,
                            ephemeral=True)]
        results = server.multi(session, ops)
        if isinstance(results[0], CoordinatorError):
            return False  # (a pending request of that kind: left alone)
        self.malformed_written += 1
        return True

    def _preferred_topics(self) -> list[str]:
        return sorted({topic for topic, _ in self._preferred})
