"""The group coordinator core under random schedules, checked against the model's invariants.

A Hypothesis ``RuleBasedStateMachine`` plays two brokers sharing one replicated offsets partition
(an append that completes is in it for both, as acks=all makes it) and three consumers speaking
the classic protocol the way the real clients do (eager: a member revokes what it owns before it
rejoins; the leader assigns four partitions round-robin over the members its JoinGroup answer
lists). Rules: JoinGroup (with the KIP-394 round trip), SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, a member falling silent until its session expires, time passing,
appends completing or failing, and the offsets partition's leadership moving to the other broker
(the old one resigns, the new one loads the partition: its reads are answered by a rule of their
own, so requests arrive while it loads).

The invariants of ``model/group_coordinator.py``, on the implementation's own answers:

* GROUP_ASSIGNMENT_EXCLUSIVE: members that hold the same generation own disjoint partitions;
* GROUP_COMMIT_FENCED: an acknowledged OffsetCommit came from a member of the group's current
  generation when it was sent;
* OFFSETS_DURABLE: the last acknowledged commit of every partition is what a coordinator that
  loads the partition afresh answers;
* COORDINATOR_LOADED: every OffsetFetch answered without an error gives the last acknowledged
  commit (answers while loading or after resigning are errors).

``BrokenCommitFence`` plants the known-bad ``commit_any_generation`` variant (the generation check
of OffsetCommit removed) and ``ServeWhileLoading`` the ``serve_while_loading`` one; each must be
caught within the stated number of examples.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from impl.broker import group_coordinator as gc
from impl.broker import group_records as gr

GROUP = "g"
TOPIC = "t"
PARTITIONS = (0, 1, 2, 3)
MEMBERS = (0, 1, 2)
BROKERS = (0, 1)
SESSION_MS = 6000
CONFIG = gc.CoordinatorConfig(offsets_partitions=1, initial_rebalance_delay_ms=0)


def _assignment(partitions: list[int]) -> bytes:
    """A ``consumer`` protocol assignment of ``partitions`` of TOPIC."""
    raw = TOPIC.encode()
    body = struct.pack(">hih", 0, 1, len(raw)) + raw + struct.pack(">i", len(partitions))
    return body + b"".join(struct.pack(">i", p) for p in partitions) + struct.pack(">i", -1)


def _owned(assignment: bytes) -> set[int]:
    if not assignment:
        return set()
    size = struct.unpack_from(">h", assignment, 6)[0]
    position = 8 + size
    count = struct.unpack_from(">i", assignment, position)[0]
    return {struct.unpack_from(">i", assignment, position + 4 + 4 * i)[0] for i in range(count)}


class Client:
    """One consumer's side of the protocol."""

    def __init__(self) -> None:
        self.member_id = ""
        self.generation = -1
        self.owned: set[int] = set()
        self.leader_of: list[str] | None = None
        self.silent = False


class GroupMachine(RuleBasedStateMachine):
    """Two coordinator nodes, one shared offsets partition, three clients."""

    coordinator_class: type[gc.GroupCoordinator] = gc.GroupCoordinator

    def __init__(self) -> None:
        super().__init__()
        counter = itertools.count()
        self.nodes = {b: self.coordinator_class(b, CONFIG, lambda: f"u{next(counter)}")
                      for b in BROKERS}
        self.leader = 0
        self.epoch = 0
        self.now_ms = 1_000_000
        self.log: list[bytes] = []
        self.pending: list[tuple[int, gc.Append]] = []
        #: reads of the offsets partition (a load) not answered yet
        self.reads: list[tuple[int, gc.ReadPartition]] = []
        self.answers: dict[int, Mapping[str, Any]] = {}
        self.request_ids = itertools.count(1)
        self.clients = {m: Client() for m in MEMBERS}
        #: request id -> (member, generation, partition, offset, fenced correctly when sent)
        self.commits: dict[int, tuple[int, int, int, int, bool]] = {}
        #: SyncGroup and JoinGroup request id -> the client that sent it
        self.sync_of: dict[int, int] = {}
        self.join_of: dict[int, int] = {}
        self.acked: dict[int, int] = {}
        self.next_offset = itertools.count(1)
        self._step(0, gc.Elected(0, 0))
        self.load_progresses()

    # --- the pump ------------------------------------------------------------------------

    def _step(self, broker: int, event: gc.Input) -> None:
        for effect in self.nodes[broker].step(event, self.now_ms):
            if isinstance(effect, gc.Respond):
                assert effect.request_id not in self.answers, "a request answered twice"
                self.answers[effect.request_id] = effect.body
                self._answered(effect.request_id, effect.body)
            elif isinstance(effect, gc.Append):
                if effect.acks == 0:
                    self.log.append(gr.build_records(effect.records, self.now_ms))
                else:
                    self.pending.append((broker, effect))
            else:
                self.reads.append((broker, effect))

    def _answered(self, request_id: int, body: Mapping[str, Any]) -> None:
        joiner = self.join_of.pop(request_id, None)
        if joiner is not None:
            self._joined(joiner, body)
        m = self.sync_of.pop(request_id, None)
        if m is not None and body.get("error_code") == gc.NONE:
            self.clients[m].owned = _owned(body["assignment"])
        commit = self.commits.pop(request_id, None)
        if commit is None:
            return
        _, _, partition, offset, fenced = commit
        if body["partitions"].get((TOPIC, partition)) == gc.NONE:
            # GROUP_COMMIT_FENCED
            assert fenced, f"commit {request_id} accepted from outside the generation"
            self.acked[partition] = offset

    def _group(self) -> gc.Group | None:
        return self.nodes[self.leader].groups.get(GROUP)

    def _request(self, broker: int, make: Any, **fields: Any) -> Mapping[str, Any] | None:
        request_id = next(self.request_ids)
        self._step(broker, make(request_id=request_id, **fields))
        return self.answers.get(request_id)

    # --- rules ---------------------------------------------------------------------------

    @rule(m=st.sampled_from(MEMBERS))
    def join(self, m: int) -> None:
        """JoinGroup, as a client sends it: revoke first (eager); answers are read in
        ``_answered`` (MEMBER_ID_REQUIRED: rejoin with the id; a generation: SyncGroup)."""
        client = self.clients[m]
        client.owned = set()
        client.silent = False
        self._send_join(m)

    def _send_join(self, m: int) -> None:
        client = self.clients[m]
        protocols = (("range", b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"),)
        request_id = next(self.request_ids)
        self.join_of[request_id] = m
        self._step(self.leader, gc.JoinGroup(request_id, GROUP, client.member_id, None,
                                             f"c{m}", "/h", SESSION_MS, SESSION_MS,
                                             "consumer", protocols, True))

    def _joined(self, m: int, answer: Mapping[str, Any]) -> None:
        client = self.clients[m]
        code = answer["error_code"]
        if code == gc.MEMBER_ID_REQUIRED:
            client.member_id = answer["member_id"]
            self._send_join(m)
        elif code == gc.UNKNOWN_MEMBER_ID:
            client.member_id = ""
        elif code == gc.NONE and answer["member_id"] == client.member_id:
            client.generation = answer["generation_id"]
            client.owned = set()
            client.leader_of = [member["member_id"] for member in answer["members"]] \
                if answer["leader"] == client.member_id else None
            self._send_sync(m)

    @precondition(lambda self: any(c.generation >= 0 and c.member_id
                                   for c in self.clients.values()))
    @rule(data=st.data())
    def sync(self, data: st.DataObject) -> None:
        """A SyncGroup again (the first one follows the JoinGroup answer at once)."""
        m = data.draw(st.sampled_from([m for m, c in self.clients.items()
                                       if c.generation >= 0 and c.member_id]))
        self._send_sync(m)

    def _send_sync(self, m: int) -> None:
        client = self.clients[m]
        assignments: tuple[tuple[str, bytes], ...] = ()
        if client.leader_of:
            members = client.leader_of
            assignments = tuple(
                (member, _assignment([p for p in PARTITIONS if p % len(members) == i]))
                for i, member in enumerate(members))
        request_id = next(self.request_ids)
        self.sync_of[request_id] = m
        self._step(self.leader, gc.SyncGroup(request_id, GROUP, client.generation,
                                             client.member_id, None, None, None, assignments))

    @rule(m=st.sampled_from(MEMBERS))
    def heartbeat(self, m: int) -> None:
        client = self.clients[m]
        if not client.member_id or client.silent:
            return
        answer = self._request(self.leader, gc.Heartbeat, group_id=GROUP,
                               generation_id=client.generation, member_id=client.member_id,
                               group_instance_id=None)
        if answer is not None and answer["error_code"] in (gc.UNKNOWN_MEMBER_ID,
                                                          gc.ILLEGAL_GENERATION,
                                                          gc.REBALANCE_IN_PROGRESS):
            if answer["error_code"] == gc.UNKNOWN_MEMBER_ID:
                client.member_id = ""
            client.owned = set()  # eager: revoke, then rejoin on a later rule

    @rule(m=st.sampled_from(MEMBERS))
    def leave(self, m: int) -> None:
        client = self.clients[m]
        if not client.member_id:
            return
        self._request(self.leader, gc.LeaveGroup, group_id=GROUP,
                      members=((client.member_id, None),))
        self.clients[m] = Client()

    @rule(m=st.sampled_from(MEMBERS))
    def fall_silent(self, m: int) -> None:
        """The member stops heartbeating (a paused process): it keeps what it owns."""
        self.clients[m].silent = True

    @precondition(lambda self: any(c.member_id for c in self.clients.values()))
    @rule(data=st.data(), p=st.sampled_from(PARTITIONS), broker=st.sampled_from(BROKERS))
    def commit(self, data: st.DataObject, p: int, broker: int) -> None:
        self.commit_as(data.draw(st.sampled_from([m for m, c in self.clients.items()
                                                  if c.member_id])), p, broker)

    def commit_as(self, m: int, p: int, broker: int) -> None:
        """OffsetCommit of the next offset of ``p`` by client ``m`` through ``broker``."""
        client = self.clients[m]
        current = self._group()
        fenced = current is not None and broker == self.leader and \
            client.member_id in current.members and client.generation == current.generation
        offset = next(self.next_offset)
        request_id = next(self.request_ids)
        self.commits[request_id] = (m, client.generation, p, offset, fenced)
        self._step(broker, gc.OffsetCommit(request_id, GROUP, client.generation,
                                           client.member_id, None, -1,
                                           (gc.CommitEntry(TOPIC, p, offset, 0, ""),)))

    @rule(broker=st.sampled_from(BROKERS), p=st.sampled_from(PARTITIONS))
    def fetch(self, broker: int, p: int) -> None:
        answer = self._request(broker, gc.OffsetFetch, group_id=GROUP,
                               partitions=((TOPIC, p),))
        assert answer is not None
        if answer["error_code"] == gc.NONE:
            value = answer["partitions"][(TOPIC, p)]
            # COORDINATOR_LOADED
            assert (value.offset if value is not None else None) == self.acked.get(p), \
                f"broker {broker} answered {value} for partition {p}, acked {self.acked.get(p)}"

    @precondition(lambda self: bool(self.pending))
    @rule(fail=st.booleans(), first=st.booleans())
    def complete_append(self, fail: bool, first: bool) -> None:
        broker, append = self.pending.pop(0 if first else -1)
        code = gc.NONE
        if broker != self.leader or append.leader_epoch != self.epoch:
            code = gc.NOT_LEADER_OR_FOLLOWER  # a deposed leader cannot reach the ISR
        elif fail:
            code = gc.NOT_ENOUGH_REPLICAS
        if code == gc.NONE:
            self.log.append(gr.build_records(append.records, self.now_ms))
        self._step(broker, gc.AppendCompleted(append.token, code))

    @precondition(lambda self: bool(self.reads))
    @rule()
    def load_progresses(self) -> None:
        """The shell answers a pending read of the offsets partition (the whole log)."""
        broker, read = self.reads.pop(0)
        self._step(broker, gc.PartitionRead(read.partition, read.leader_epoch, tuple(self.log),
                                            len(self.log), True))

    @rule(milliseconds=st.sampled_from((500, 2000, SESSION_MS)))
    def time_passes(self, milliseconds: int) -> None:
        self.now_ms += milliseconds
        for m, client in self.clients.items():
            if client.member_id and not client.silent and milliseconds < SESSION_MS:
                self.heartbeat(m)
        for broker in BROKERS:
            self._step(broker, gc.Tick())

    @rule()
    def leadership_moves(self) -> None:
        old, new = self.leader, 1 - self.leader
        self.epoch += 1
        self.leader = new
        self._step(old, gc.Resigned(0, self.epoch))
        self._step(new, gc.Elected(0, self.epoch))

    # --- invariants ------------------------------------------------------------------------

    @invariant()
    def assignment_exclusive(self) -> None:
        by_generation: dict[int, set[int]] = {}
        for client in self.clients.values():
            seen = by_generation.setdefault(client.generation, set())
            assert not seen & client.owned, "GROUP_ASSIGNMENT_EXCLUSIVE"
            seen |= client.owned

    @invariant()
    def offsets_durable(self) -> None:
        fresh = gc.GroupCoordinator(9, CONFIG, lambda: "x")
        effects = fresh.step(gc.Elected(0, 0), self.now_ms)
        assert effects
        fresh.step(gc.PartitionRead(0, 0, tuple(self.log), len(self.log), True), self.now_ms)
        group = fresh.groups.get(GROUP)
        loaded = {p: v.offset for (_, p), v in group.offsets.items()} if group else {}
        assert loaded == self.acked, "OFFSETS_DURABLE"


SETTINGS = settings(max_examples=60, stateful_step_count=30, deadline=None, derandomize=True,
                    report_multiple_bugs=False, suppress_health_check=[HealthCheck.too_slow])

TestGroupCoordinator = GroupMachine.TestCase
TestGroupCoordinator.settings = SETTINGS


class _NoGenerationCheck(gc.GroupCoordinator):
    """The ``commit_any_generation`` variant: OffsetCommit's generation is not checked."""

    def _on_commit(self, request: gc.OffsetCommit, out: list[gc.Effect]) -> None:
        group = self.groups.get(request.group_id)
        if group is not None and request.member_id in group.members:
            request = gc.OffsetCommit(request.request_id, request.group_id, group.generation,
                                      request.member_id, request.group_instance_id,
                                      request.retention_ms, request.entries)
        super()._on_commit(request, out)



class _ServesWhileLoading(gc.GroupCoordinator):
    """The ``serve_while_loading`` variant: OffsetFetch is answered before the load ends."""

    def _on_elected(self, event: gc.Elected, out: list[gc.Effect]) -> None:
        super()._on_elected(event, out)
        self.partitions[event.partition].state = gc.CoordinatorState.LOADED



#: Examples (derandomized search, 30 steps each) within which each planted variant is caught.
PLANTED_BUDGETS: dict[type[gc.GroupCoordinator], int] = {
    _NoGenerationCheck: 300,
    _ServesWhileLoading: 1500,
}


@pytest.mark.slow
@pytest.mark.parametrize("broken", list(PLANTED_BUDGETS))
def test_known_bad_variants_are_caught(broken: type[gc.GroupCoordinator]) -> None:
    class Broken(GroupMachine):
        coordinator_class = broken

    case = Broken.TestCase
    case.settings = settings(SETTINGS, max_examples=PLANTED_BUDGETS[broken])
    with pytest.raises(AssertionError):
        case().runTest()


def test_serving_while_loading_is_caught_on_the_shortest_schedule() -> None:
    """The schedule the search needs: commit, move the leadership, fetch before the load."""
    class Broken(GroupMachine):
        coordinator_class = _ServesWhileLoading

    machine = Broken()
    machine.join(0)
    machine.complete_append(fail=False, first=True)  # the assignment is persisted: STABLE
    machine.commit_as(0, 0, machine.leader)
    machine.complete_append(fail=False, first=True)
    assert machine.acked == {0: 1}
    machine.leadership_moves()
    with pytest.raises(AssertionError, match="answered None for partition 0, acked 1"):
        machine.fetch(1, 0)
    shipped = GroupMachine()  # the shipped core answers COORDINATOR_LOAD_IN_PROGRESS instead
    shipped.join(0)
    shipped.complete_append(fail=False, first=True)
    shipped.commit_as(0, 0, shipped.leader)
    shipped.complete_append(fail=False, first=True)
    shipped.leadership_moves()
    shipped.fetch(1, 0)
    shipped.load_progresses()
    shipped.fetch(1, 0)
