"""The group coordinator core, driven through ``step`` as the trio pump drives it.

A small harness plays the pump: appends land in an in-memory offsets partition (one list of
batches per partition) and complete when the test says so, reads return that list, and time is
a number the test moves. Each test states the Kafka rule it checks.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import pytest

from impl.broker import group_coordinator as gc
from impl.broker import group_records as gr

GROUP = "g"
CONFIG = gc.CoordinatorConfig(offsets_partitions=4, initial_rebalance_delay_ms=0,
                              offsets_retention_ms=60_000,
                              offsets_retention_check_interval_ms=1_000)
SESSION_MS = 10_000


class Pump:
    """The test's pump: holds the offsets partitions' records and every answer."""

    def __init__(self, config: gc.CoordinatorConfig = CONFIG) -> None:
        counter = itertools.count(1)
        self.node = gc.GroupCoordinator(1, config, lambda: f"id{next(counter)}")
        self.now_ms = 1_000_000
        self.log: dict[int, list[bytes]] = {}
        self.pending: list[gc.Append] = []
        self.answers: dict[int, Mapping[str, Any]] = {}
        self.request_ids = itertools.count(1)

    def step(self, event: gc.Input) -> None:
        for effect in self.node.step(event, self.now_ms):
            if isinstance(effect, gc.Respond):
                assert effect.request_id not in self.answers, "answered twice"
                self.answers[effect.request_id] = effect.body
            elif isinstance(effect, gc.Append):
                if effect.acks == 0:
                    self.write(effect)
                else:
                    self.pending.append(effect)
            else:
                batches = tuple(self.log.get(effect.partition, []))
                self.step(gc.PartitionRead(effect.partition, effect.leader_epoch, batches,
                                           len(batches), True))

    def write(self, append: gc.Append) -> None:
        self.log.setdefault(append.partition, []).append(
            gr.build_records(append.records, self.now_ms))

    def complete(self, error_code: int = 0) -> None:
        """Complete every pending append (written when it succeeds)."""
        pending, self.pending = self.pending, []
        for append in pending:
            if error_code == 0:
                self.write(append)
            self.step(gc.AppendCompleted(append.token, error_code))

    def elect(self, epoch: int = 0) -> None:
        self.step(gc.Elected(self.node.partition_for(GROUP), epoch))

    def call(self, make: Any, **fields: Any) -> Mapping[str, Any] | None:
        request_id = next(self.request_ids)
        self.step(make(request_id=request_id, **fields))
        return self.answers.get(request_id)

    def join(self, member_id: str = "", instance: str | None = None,
             protocols: tuple[tuple[str, bytes], ...] = (("range", b"r"),),
             v4: bool = True) -> int:
        request_id = next(self.request_ids)
        self.step(gc.JoinGroup(request_id, GROUP, member_id, instance, "client", "/127.0.0.1",
                               SESSION_MS, 30_000, "consumer", protocols, v4))
        return request_id

    def sync(self, member_id: str, generation: int,
             assignments: tuple[tuple[str, bytes], ...] = ()) -> int:
        request_id = next(self.request_ids)
        self.step(gc.SyncGroup(request_id, GROUP, generation, member_id, None, None, None,
                               assignments))
        return request_id

    def commit(self, member_id: str, generation: int, offset: int) -> int:
        request_id = next(self.request_ids)
        self.step(gc.OffsetCommit(request_id, GROUP, generation, member_id, None, -1,
                                  (gc.CommitEntry("t", 0, offset, 0, "m"),)))
        return request_id

    def fetch(self) -> Mapping[str, Any] | None:
        return self.call(gc.OffsetFetch, group_id=GROUP, partitions=(("t", 0),))

    def tick(self, milliseconds: int) -> None:
        self.now_ms += milliseconds
        self.step(gc.Tick())


def stable_pair(pump: Pump) -> tuple[str, str, int]:
    """Two members joined (KIP-394 round trip), synced and STABLE: (leader, other, gen)."""
    first = pump.join()
    second = pump.join()
    one = pump.answers[first]
    two = pump.answers[second]
    assert one["error_code"] == two["error_code"] == gc.MEMBER_ID_REQUIRED
    a, b = pump.join(one["member_id"]), pump.join(two["member_id"])
    joined_a, joined_b = pump.answers[a], pump.answers[b]
    assert joined_a["generation_id"] == joined_b["generation_id"] == 1
    leader = joined_a["leader"]
    assert leader in (one["member_id"], two["member_id"])
    other = two["member_id"] if leader == one["member_id"] else one["member_id"]
    leader_answer = joined_a if joined_a["member_id"] == leader else joined_b
    assert {m["member_id"] for m in leader_answer["members"]} == {leader, other}
    follower_sync = pump.sync(other, 1)
    assert follower_sync not in pump.answers  # parked until the leader's assignment persists
    leader_sync = pump.sync(leader, 1, ((leader, b"A"), (other, b"B")))
    assert leader_sync not in pump.answers
    assert len(pump.pending) == 1
    pump.complete()
    assert pump.answers[leader_sync]["assignment"] == b"A"
    assert pump.answers[follower_sync]["assignment"] == b"B"
    return leader, other, 1


def test_partition_for_is_kafkas_abs_hash_mod_n() -> None:
    assert gr.java_string_hash("hello") == 99162322
    assert gr.partition_for("hello", 50) == 99162322 % 50
    # "polygenelubricants".hashCode() is Integer.MIN_VALUE: Utils.abs maps it to 0.
    assert gr.java_string_hash("polygenelubricants") == -(2**31)
    assert gr.partition_for("polygenelubricants", 7) == 0
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16: Java hashes both code units.
    assert gr.java_string_hash("\U0001f600") == 31 * 0xD83D + 0xDE00


def test_answers_not_coordinator_then_load_in_progress_then_serves() -> None:
    pump = Pump()
    assert pump.fetch() == {"error_code": gc.NOT_COORDINATOR, "partitions": {}}
    partition = pump.node.partition_for(GROUP)
    effects = pump.node.step(gc.Elected(partition, 3), pump.now_ms)
    assert effects == [gc.ReadPartition(partition, 3, -1, CONFIG.load_buffer_bytes)]
    assert pump.fetch() == {"error_code": gc.COORDINATOR_LOAD_IN_PROGRESS, "partitions": {}}
    assert pump.call(gc.Heartbeat, group_id=GROUP, generation_id=1, member_id="m",
                     group_instance_id=None) == {"error_code": gc.NONE}
    assert pump.answers[pump.sync("m", 1)]["error_code"] == gc.REBALANCE_IN_PROGRESS
    # A read for an older epoch is stale (KAFKA-10614): still loading.
    pump.step(gc.PartitionRead(partition, 2, (), 0, True))
    assert pump.fetch() == {"error_code": gc.COORDINATOR_LOAD_IN_PROGRESS, "partitions": {}}
    pump.step(gc.PartitionRead(partition, 3, (), 0, True))
    assert pump.fetch() == {"error_code": gc.NONE, "partitions": {("t", 0): None}}


def test_rebalance_then_commits_are_fenced_by_member_and_generation() -> None:
    pump = Pump()
    pump.elect()
    leader, other, generation = stable_pair(pump)
    ok = pump.commit(other, generation, 42)
    assert ok not in pump.answers  # answered only once the append is committed
    assert pump.fetch()["partitions"][("t", 0)] is None  # type: ignore[index]
    pump.complete()
    assert pump.answers[ok] == {"partitions": {("t", 0): gc.NONE}}
    assert pump.fetch()["partitions"][("t", 0)].offset == 42  # type: ignore[index]
    stale = pump.commit(other, generation - 1, 7)
    unknown = pump.commit("stranger", generation, 7)
    assert pump.answers[stale] == {"partitions": {("t", 0): gc.ILLEGAL_GENERATION}}
    assert pump.answers[unknown] == {"partitions": {("t", 0): gc.UNKNOWN_MEMBER_ID}}
    assert not pump.pending
    # A member leaves: a rebalance; the other's commit with the old generation still counts
    # while the group prepares (Kafka accepts commits in PreparingRebalance).
    left = pump.call(gc.LeaveGroup, group_id=GROUP, members=((leader, None),))
    assert left == {"error_code": gc.NONE, "members": [
        {"member_id": leader, "group_instance_id": None, "error_code": gc.NONE}]}
    assert pump.node.groups[GROUP].state is gc.GroupState.PREPARING_REBALANCE
    during = pump.commit(other, generation, 43)
    pump.complete()
    assert pump.answers[during] == {"partitions": {("t", 0): gc.NONE}}
    rejoin = pump.join(other)
    assert pump.answers[rejoin]["generation_id"] == generation + 1
    old = pump.commit(other, generation, 44)
    assert pump.answers[old] == {"partitions": {("t", 0): gc.ILLEGAL_GENERATION}}
    completing = pump.commit(other, generation + 1, 44)
    assert pump.answers[completing] == {"partitions": {("t", 0): gc.REBALANCE_IN_PROGRESS}}


def test_failed_append_answers_kafkas_mapping_and_changes_nothing() -> None:
    pump = Pump()
    pump.elect()
    _, other, generation = stable_pair(pump)
    lost = pump.commit(other, generation, 9)
    pump.complete(gc.NOT_LEADER_OR_FOLLOWER)
    assert pump.answers[lost] == {"partitions": {("t", 0): gc.NOT_COORDINATOR}}
    assert pump.fetch()["partitions"][("t", 0)] is None  # type: ignore[index]
    short = pump.commit(other, generation, 9)
    pump.complete(gc.NOT_ENOUGH_REPLICAS)
    assert pump.answers[short] == {"partitions": {("t", 0): gc.COORDINATOR_NOT_AVAILABLE}}


def test_reload_restores_group_and_offsets_from_the_partition() -> None:
    pump = Pump()
    pump.elect()
    leader, other, generation = stable_pair(pump)
    pump.commit(other, generation, 5)
    pump.complete()
    successor = Pump()
    successor.log = pump.log
    successor.elect(1)
    group = successor.node.groups[GROUP]
    assert group.state is gc.GroupState.STABLE
    assert group.generation == generation
    assert set(group.members) == {leader, other}
    assert group.members[other].assignment == b"B"
    assert successor.fetch()["partitions"][("t", 0)].offset == 5  # type: ignore[index]
    beat = successor.call(gc.Heartbeat, group_id=GROUP, generation_id=generation,
                          member_id=other, group_instance_id=None)
    assert beat == {"error_code": gc.NONE}


def test_resignation_unloads_and_answers_parked_requests() -> None:
    pump = Pump()
    pump.elect(4)
    parked = pump.join(v4=False)
    pump.node.groups[GROUP].join_deadline_ms = None
    joined = pump.answers.get(parked)
    assert joined is not None  # a lone v3 member completes the join at once
    member = joined["member_id"]
    sync = pump.sync(member, 1)
    assert sync not in pump.answers or pump.pending
    pump.step(gc.Resigned(pump.node.partition_for(GROUP), 3))  # older epoch: ignored
    assert GROUP in pump.node.groups
    pump.step(gc.Resigned(pump.node.partition_for(GROUP), 5))
    assert pump.answers[sync]["error_code"] == gc.NOT_COORDINATOR
    assert GROUP not in pump.node.groups
    assert pump.fetch() == {"error_code": gc.NOT_COORDINATOR, "partitions": {}}
    pump.complete()  # the leader's sync append completes after the unload: ignored


def test_session_expiry_removes_a_silent_member_and_rebalances() -> None:
    pump = Pump()
    pump.elect()
    leader, other, generation = stable_pair(pump)
    pump.tick(SESSION_MS // 2)
    assert pump.call(gc.Heartbeat, group_id=GROUP, generation_id=generation,
                     member_id=leader, group_instance_id=None) == {"error_code": gc.NONE}
    group = pump.node.groups[GROUP]
    assert other in group.members
    pump.tick(SESSION_MS // 2)  # the other member's session ends now
    assert other not in group.members
    assert group.state is gc.GroupState.PREPARING_REBALANCE
    beat = pump.call(gc.Heartbeat, group_id=GROUP, generation_id=generation, member_id=leader,
                     group_instance_id=None)
    assert beat == {"error_code": gc.REBALANCE_IN_PROGRESS}
    rejoin = pump.join(leader)
    assert pump.answers[rejoin]["generation_id"] == generation + 1
    assert [m["member_id"] for m in pump.answers[rejoin]["members"]] == [leader]


def test_static_member_rejoining_unchanged_keeps_the_generation() -> None:
    pump = Pump()
    pump.elect()
    first = pump.join(instance="i-1")
    member = pump.answers[first]["member_id"]
    assert member.startswith("i-1-")
    pump.sync(member, 1, ((member, b"A"),))
    pump.complete()
    again = pump.join(instance="i-1")
    assert again not in pump.answers  # the new member id is persisted first (KAFKA-10284)
    pump.complete()
    answer = pump.answers[again]
    assert answer["generation_id"] == 1
    assert answer["member_id"] != member
    fenced = pump.call(gc.Heartbeat, group_id=GROUP, generation_id=1, member_id=member,
                       group_instance_id="i-1")
    assert fenced == {"error_code": gc.FENCED_INSTANCE_ID}
    assert pump.node.groups[GROUP].state is gc.GroupState.STABLE


def test_initial_delay_holds_the_first_join() -> None:
    pump = Pump(gc.CoordinatorConfig(offsets_partitions=4, initial_rebalance_delay_ms=3000))
    pump.elect()
    parked = pump.join(v4=False)
    assert parked not in pump.answers
    pump.tick(2000)
    assert parked not in pump.answers
    pump.tick(1000)
    assert pump.answers[parked]["generation_id"] == 1


def test_delete_group_and_offset_expiry() -> None:
    pump = Pump()
    pump.elect()
    simple = pump.commit("", -1, 3)  # a commit outside the group protocol: an EMPTY group
    pump.complete()
    assert pump.answers[simple] == {"partitions": {("t", 0): gc.NONE}}
    described = pump.call(gc.DescribeGroups, group_ids=(GROUP,))
    assert described["groups"][0]["group_state"] == "Empty"  # type: ignore[index]
    here = pump.node.partition_for(GROUP)
    missing = next(f"m{n}" for n in itertools.count() if pump.node.partition_for(f"m{n}") == here)
    elsewhere = next(f"m{n}" for n in itertools.count() if pump.node.partition_for(f"m{n}") != here)
    deleted = pump.call(gc.DeleteGroups, group_ids=(GROUP, missing, elsewhere))
    assert deleted is None  # answered once the tombstones are committed
    pump.complete()
    assert pump.answers[max(pump.answers)] == {"results": {
        GROUP: gc.NONE, missing: gc.GROUP_ID_NOT_FOUND, elsewhere: gc.NOT_COORDINATOR}}
    assert pump.fetch()["partitions"][("t", 0)] is None  # type: ignore[index]
    pump.commit("", -1, 4)
    pump.complete()
    pump.tick(CONFIG.offsets_retention_ms + CONFIG.offsets_retention_check_interval_ms)
    assert GROUP not in pump.node.groups
    reloaded = Pump()
    reloaded.log = pump.log
    reloaded.elect(1)
    assert GROUP not in reloaded.node.groups  # the tombstones are in the partition


def test_records_round_trip_and_truncation_is_an_error() -> None:
    member = gr.MemberValue("m", "i", "c", "/h", 7, 5, b"s", b"a")
    value = gr.GroupValue("consumer", 3, "range", "m", 9, (member,))
    encoded = gr.encode_group_value(value)
    assert gr.decode_group_value(encoded) == value
    with pytest.raises(gr.GroupRecordError):
        gr.decode_group_value(encoded[:-1])
    for offset in (gr.OffsetValue(5, 2, "meta", 10), gr.OffsetValue(5, -1, "", 10, 99)):
        assert gr.decode_offset_value(gr.encode_offset_value(offset)) == offset
    key = gr.OffsetKey("g", "t", 3)
    assert gr.decode_key(gr.encode_offset_key(key)) == key
    assert gr.decode_key(b"\x00\x07rest") is None  # an unknown key version is skipped
