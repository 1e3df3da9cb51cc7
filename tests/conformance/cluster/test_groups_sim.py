"""Consumer groups in the cluster simulator: the brokers' nodes host the group coordinators,
simulated members join, sync, heartbeat, commit, fetch, leave, crash and pause under the run's
faults; coordinator events are replayed in ``model.group_coordinator`` and what members were told
is checked end to end."""

from __future__ import annotations

from typing import Any

from conformance._cluster_groups import GroupMember, assignment
from conformance.cluster_sim import ClusterConfig, replay_command, simulate
from conformance.group_abstraction import abstractions
from conformance.rng import SimRng
from conformance.trace_check import TraceChecker
from impl.broker import group_coordinator as gc
from impl.trace import TraceEvent


def test_a_default_run_runs_groups_and_checks_their_events() -> None:
    outcome = simulate(1, ClusterConfig())
    assert outcome.violation is None, outcome.violation
    assert outcome.group_commits > 0
    assert outcome.group_fetches > 0
    assert outcome.group_assignments > 0
    checked = {name for name in outcome.trace_verdict.actions
               if name.startswith("group_coordinator.")}
    assert {"group_coordinator.coordinator_elected", "group_coordinator.load_completed",
            "group_coordinator.join_completed", "group_coordinator.sync_completed",
            "group_coordinator.offset_committed",
            "group_coordinator.offset_fetched"} <= checked, checked


def test_without_groups_the_replay_command_says_so() -> None:
    config = ClusterConfig(groups=False, steps=20)
    assert replay_command(3, config).endswith("--no-groups")
    outcome = simulate(3, config)
    assert outcome.violation is None
    assert outcome.group_commits == 0


def event(name: str, subject: str, before: str = "STABLE", after: str = "STABLE",
          **fields: Any) -> TraceEvent:
    return TraceEvent.of("group_coordinator", name, subject, before, after, **fields)


def check(*events: TraceEvent) -> Any:
    checker = TraceChecker(abstractions(2), "replay")
    for each in events:
        found = checker.feed(each)
        if found is not None:
            return found
    return None


GROUP = "group-0"  # (offsets partition 0 of 2)
LOADED = (event("COORDINATOR_ELECTED", "__consumer_offsets-0@1", "UNLOADED", "LOADING",
                leader_epoch=1),
          event("LOAD_COMPLETED", "__consumer_offsets-0@1", "LOADING", "LOADED",
                leader_epoch=1, groups=0))


def commit(generation: int, at_acceptance: int, offset: int) -> TraceEvent:
    return event("OFFSET_COMMITTED", GROUP, broker=1, generation=generation, member="m",
                 group_generation=at_acceptance, accepted_in="STABLE",
                 offsets=(("t", 0, offset),))


def test_the_abstraction_accepts_a_fenced_commit_and_a_current_answer() -> None:
    assert check(*LOADED, commit(3, 3, 5),
                 event("OFFSET_FETCHED", GROUP, broker=1, offsets=(("t", 0, 5),))) is None


def test_a_commit_of_an_older_generation_is_refused_by_the_model() -> None:
    found = check(*LOADED, commit(2, 3, 5))
    assert found is not None
    assert found.kind == "not_enabled", found


def test_an_answer_older_than_the_acknowledged_commit_breaks_coordinator_loaded() -> None:
    found = check(*LOADED, commit(3, 3, 5),
                  event("OFFSET_FETCHED", GROUP, broker=1, offsets=(("t", 0, 4),)))
    assert found is not None
    assert found.invariant == "COORDINATOR_LOADED", found


def test_a_deposed_coordinator_unaware_may_answer_from_its_cache() -> None:
    """Broker 1, deposed while its session had expired, still serves group-0 from its cache
    after broker 2 took the partition in a later epoch and acknowledged a commit (Kafka's
    coordinator answers so too); the same answer before broker 2's election is refused."""
    successor = (event("COORDINATOR_ELECTED", "__consumer_offsets-0@2", "UNLOADED", "LOADING",
                       leader_epoch=2),
                 event("LOAD_COMPLETED", "__consumer_offsets-0@2", "LOADING", "LOADED",
                       leader_epoch=2, groups=0))
    acked = event("OFFSET_COMMITTED", GROUP, broker=2, generation=3, member="m",
                  group_generation=3, accepted_in="STABLE", offsets=(("t", 0, 5),))
    stale = event("OFFSET_FETCHED", GROUP, broker=1, offsets=(("t", 0, 4),))
    assert check(*LOADED, *successor, acked, stale) is None
    found = check(*LOADED, commit(3, 3, 5), stale)
    assert found is not None
    assert found.invariant == "COORDINATOR_LOADED", found


def test_answers_while_loading_or_from_another_broker_are_refused() -> None:
    loading = check(LOADED[0], event("OFFSET_FETCHED", GROUP, broker=1, offsets=()))
    assert loading is not None
    assert loading.kind == "not_enabled", loading
    elsewhere = check(*LOADED, event("OFFSET_FETCHED", GROUP, broker=2, offsets=()))
    assert elsewhere is not None
    assert elsewhere.kind == "not_enabled", elsewhere
    unloaded = check(*LOADED, event("COORDINATOR_RESIGNED", "__consumer_offsets-0@1", "LOADED",
                                    "UNLOADED", leader_epoch=1),
                     event("OFFSET_FETCHED", GROUP, broker=1, offsets=()))
    assert unloaded is not None
    assert unloaded.kind == "not_enabled", unloaded


class _World:
    """What a simulated member needs of its world: a clock, a network that records, metadata."""

    topic = "t"

    class config:  # noqa: N801 (stands for the ClusterConfig attribute)
        partitions = 2

    def __init__(self) -> None:
        self.now = 0
        self.sent: list[Any] = []
        self.ids = 0
        self.values = 0
        self.group_acked: dict[Any, int] = {}
        self.group_rng = SimRng(1).stream("x")
        self.network = self

    def send(self, source: int, target: int, payload: Any) -> None:
        self.sent.append(payload.request)

    def now_ms(self) -> int:
        return self.now

    def leader_of(self, tp: Any) -> int:
        return 0

    def next_request_id(self) -> int:
        self.ids += 1
        return self.ids

    def next_commit_value(self, group: str, partition: int) -> int:
        self.values += 1
        return self.values

    def assigned(self, member: Any) -> None:
        pass

    def commit_acknowledged(self, *args: Any) -> None:
        pass


def test_a_revoked_owners_auto_commit_never_follows_a_newer_commit() -> None:
    """Seed 654 of ``logproof fuzz --seeds 2000`` (OFFSETS_DURABLE): a member told
    REBALANCE_IN_PROGRESS prepared its auto-commit (value 1, generation 1); the coordinator
    failed over and reloaded generation 1, the member was handed the same partition again and
    committed value 2, and then the stale auto-commit went out and overwrote it with 1, which a
    later OffsetFetch answered. The coordinator was right (generation 1 was current); the member
    was not: an auto-commit not yet sent is dropped when a new assignment arrives, and a commit
    waits for the auto-commit's answer (one ordered connection)."""
    world = _World()
    member = GroupMember(world, 1100, "group-0", 1)  # type: ignore[arg-type]
    member.state, member.member_id, member.generation = "stable", "m", 1
    member.owned = frozenset({0})
    member.coordinator = 0
    member._generation_over(gc.REBALANCE_IN_PROGRESS)
    prepared = member.auto_commit
    assert prepared is not None
    member._join()
    join = world.sent[-1]
    member.on_reply(gc.Respond(join.request_id, {
        "error_code": gc.NONE, "member_id": "m", "generation_id": 1, "leader": "other",
        "members": [], "protocol_name": "range"}))
    sync = world.sent[-1]
    member.on_reply(gc.Respond(sync.request_id, {
        "error_code": gc.NONE, "assignment": assignment("t", [0])}))
    assert member.auto_commit is None
    world.now += 20
    member.tick()  # the OffsetFetch of the new assignment goes out, no auto-commit
    assert not any(isinstance(r, gc.OffsetCommit) for r in world.sent)
    # and an auto-commit in flight holds the next commit back
    member.flight = None
    member.auto_flight = (99, world.now, 1, {0: 1})
    member.commit()
    assert not any(isinstance(r, gc.OffsetCommit) for r in world.sent)
