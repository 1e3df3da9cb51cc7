"""The sans-IO controller core: fencing, batching, retries, election rules, request flags."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impl.controller.controller import (
    DEFERRED_WRITES_PER_ROUND,
    PARTITION_TRANSITIONS,
    BrokersRead,
    ClusterSnapshot,
    Controller,
    ControllerConfig,
    ControllerEffect,
    ControllerEvent,
    Elected,
    InvalidTransitionError,
    PartitionState,
    PartitionStatesRead,
    ReadPartitionStates,
    ReplicaState,
    Resign,
    ResponseReceived,
    SendRequest,
    WriteCompleted,
    ZkWrite,
    step_partition,
    step_replica,
)
from impl.controller.coordinator import (
    BadVersionError,
    CheckOp,
    CheckResult,
    CreateResult,
    NodeStat,
    OpResult,
    RolledBackError,
    SetOp,
    SetResult,
)
from impl.controller.requests import (
    ERROR_KAFKA_STORAGE_ERROR,
    NO_LEADER,
    ControllerResponse,
    LeaderAndIsrRequest,
    UpdateMetadataRequest,
)
from impl.controller.znodes import (
    CONTROLLER_EPOCH_PATH,
    BrokerRegistration,
    LeaderIsr,
    TopicAssignment,
    decode_partition_state,
)

TP = tuple[str, int]


def _brokers(*ids: int) -> dict[int, BrokerRegistration]:
    return {b: BrokerRegistration(b, "127.0.0.1", 9000 + b, None, 100 + b) for b in ids}


def _stat(version: int) -> NodeStat:
    return NodeStat(1, 1, 1, version, 0, 0, 10, 0)


def _succeed(write: ZkWrite) -> list[OpResult]:
    results: list[OpResult] = []
    for op in write.ops:
        if isinstance(op, CheckOp):
            results.append(CheckResult())
        elif isinstance(op, SetOp):
            results.append(SetResult(_stat(op.version + 1)))
        else:
            results.append(CreateResult(op.path))
    return results


def _writes(effects: list[ControllerEffect]) -> list[ZkWrite]:
    return [e for e in effects if isinstance(e, ZkWrite)]


def _sends(effects: list[ControllerEffect]) -> list[SendRequest]:
    return [e for e in effects if isinstance(e, SendRequest)]


def _elected(partitions: int = 6, batch: int = 4, live: tuple[int, ...] = (0, 1, 2),
             unclean: bool = False) -> tuple[Controller, list[ControllerEffect]]:
    assignment = {p: (p % 3, (p + 1) % 3, (p + 2) % 3) for p in range(partitions)}
    states = {("t", p): LeaderIsr(r[0], 0, r, 1, 0) for p, r in assignment.items()}
    core = Controller(ControllerConfig(9, unclean, batch))
    effects = core.handle(Elected(2, 5, ClusterSnapshot(_brokers(*live),
                                                        {"t": TopicAssignment(assignment)},
                                                        states)))
    return core, effects


def test_tables_reject_missing_transitions() -> None:
    assert step_partition(PartitionState.NEW, ControllerEvent.LEADER_ELECTED) is (
        PartitionState.ONLINE)
    with pytest.raises(InvalidTransitionError):
        step_partition(PartitionState.NON_EXISTENT, ControllerEvent.LEADER_ELECTED)
    with pytest.raises(InvalidTransitionError):
        step_replica(ReplicaState.NON_EXISTENT, ControllerEvent.BROKER_FAILED)
    # Only a topic's creation (or growth) makes a NEW partition.
    assert all(after is not PartitionState.NEW or before is PartitionState.NEW
               or event is ControllerEvent.TOPIC_CREATED
               for (before, event), after in PARTITION_TRANSITIONS.items())


def test_failover_sends_init_state_only_after_its_writes() -> None:
    core, effects = _elected(live=(0, 2))
    writes = _writes(effects)
    assert writes, "broker 1 is dead: partitions it led need a leader"
    assert not _sends(effects), "no request while a write is outstanding"
    for write in writes:
        assert write.ops[0] == CheckOp(CONTROLLER_EPOCH_PATH, 5)
    sends = _settle(core, effects)
    lair = [s.request for s in sends if isinstance(s.request, LeaderAndIsrRequest)]
    assert lair, "LeaderAndIsr after the writes"
    first_round = [r for r in lair if r.is_init]
    assert first_round, "the first requests of a new controller carry INIT"
    assert len(first_round) == 2, "one INIT LeaderAndIsr per live broker"
    assert lair[:2] == first_round, "only the first round is INIT"
    assert all(r.controller_epoch == 2 for r in lair)
    assert {s.broker_id for s in sends} <= {0, 2}


def test_a_fenced_write_resigns() -> None:
    core, effects = _elected(live=(0, 2))
    write = _writes(effects)[0]
    results: list[OpResult] = [BadVersionError("epoch")]
    results += [RolledBackError("rb") for _ in write.ops[1:]]
    reaction = core.handle(WriteCompleted(write.write_id, results))
    assert Resign(ControllerEvent.ZK_WRITE_FENCED) in reaction
    assert not core.active
    assert core.handle(BrokersRead(_brokers(0))) == []


def test_one_stale_partition_does_not_hold_back_the_batch() -> None:
    core, effects = _elected(partitions=9, batch=10, live=(0, 2))
    write = _writes(effects)[0]
    stale_index = 2
    results: list[OpResult] = [CheckResult()]
    results += [RolledBackError("rb") for _ in write.ops[1:]]
    results[stale_index] = BadVersionError("stale")
    reaction = core.handle(WriteCompleted(write.write_id, results))
    retry = _writes(reaction)
    reads = [e for e in reaction if isinstance(e, ReadPartitionStates)]
    stale_op = write.ops[stale_index]
    assert isinstance(stale_op, SetOp)
    assert len(retry) == 1
    assert len(retry[0].ops) == len(write.ops) - 1
    assert stale_op.path not in [op.path for op in retry[0].ops]
    assert len(reads) == 1
    assert len(reads[0].partitions) == 1
    stale_tp = reads[0].partitions[0]
    assert not _sends(reaction), "requests wait for the retry and the re-read"
    # The leader changed the ISR meanwhile: the re-read state is planned again, on version 7.
    fresh = LeaderIsr(1, 3, (1, 2), 1, 7)
    after_read = core.handle(PartitionStatesRead({stale_tp: fresh}))
    rewrite = _writes(after_read)
    assert len(rewrite) == 1
    op = rewrite[0].ops[1]
    assert isinstance(op, SetOp)
    assert op.version == 7
    planned = decode_partition_state(*stale_tp, op.data, 7)
    assert planned.leader_epoch == 4, "EPOCHS_MONOTONIC"
    assert planned.leader == 2
    assert planned.isr == (2,)


def test_unknown_write_outcome_is_re_read() -> None:
    core, effects = _elected(live=(0, 2))
    write = _writes(effects)[0]
    reaction = core.handle(WriteCompleted(write.write_id, None))
    reads = [e for e in reaction if isinstance(e, ReadPartitionStates)]
    assert len(reads) == 1
    assert len(reads[0].partitions) == len(write.ops) - 1


def _settle(core: Controller, effects: list[ControllerEffect]) -> list[SendRequest]:
    sends = _sends(effects)
    queue = _writes(effects)
    for _round in range(10):
        if not queue:
            return sends
        next_queue: list[ZkWrite] = []
        for write in queue:
            reaction = core.handle(WriteCompleted(write.write_id, _succeed(write)))
            sends += _sends(reaction)
            next_queue += _writes(reaction)
        queue = next_queue
    raise AssertionError("the controller never settled")


def test_storage_error_makes_replica_offline_and_moves_leadership() -> None:
    core, effects = _elected(partitions=3, live=(0, 1, 2))
    _settle(core, effects)
    request = LeaderAndIsrRequest(9, 2, 100, (), ())
    reaction = core.handle(ResponseReceived(
        0, request, ControllerResponse(0, {("t", 0): ERROR_KAFKA_STORAGE_ERROR})))
    sends = _settle(core, reaction)
    assert core.leader_isr[("t", 0)].leader == 1, "t-0 was led by broker 0's lost replica"
    assert 0 not in core.leader_isr[("t", 0)].isr
    assert core.replica_states[(("t", 0), 0)] is ReplicaState.OFFLINE
    assert core.leader_isr[("t", 1)].isr == (1, 2, 0), "DIR_FAILURE_ISOLATION"
    metadata = [s.request for s in sends if isinstance(s.request, UpdateMetadataRequest)]
    assert metadata
    assert all(p.offline_replicas == (0,) for m in metadata for p in m.partition_states
               if (p.topic, p.partition) == ("t", 0))
    assert not any(s.broker_id == 0 and isinstance(s.request, LeaderAndIsrRequest)
                   and any(p.partition == 0 for p in s.request.partition_states)
                   for s in sends), "no LeaderAndIsr to a replica known offline"


members = st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=4, unique=True)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(replicas=members, isr_mask=st.lists(st.booleans(), min_size=4, max_size=4),
       live=st.sets(st.integers(min_value=0, max_value=4)), unclean=st.booleans(),
       leader_index=st.integers(min_value=0, max_value=3))
def test_election_never_leaves_the_isr_unless_unclean(
    replicas: list[int], isr_mask: list[bool], live: set[int], unclean: bool, leader_index: int,
) -> None:
    isr = tuple(r for r, keep in zip(replicas, isr_mask, strict=False) if keep) or (replicas[0],)
    leader = isr[leader_index % len(isr)]
    core = Controller(ControllerConfig(9, unclean))
    state = LeaderIsr(leader, 3, isr, 1, 4)
    effects = core.handle(Elected(2, 5, ClusterSnapshot(
        _brokers(*sorted(live)), {"t": TopicAssignment({0: tuple(replicas)})}, {("t", 0): state})))
    writes = _writes(effects)
    if not writes:
        usable_isr = [r for r in isr if r in live]
        assert (leader in live and usable_isr == list(isr)) or (
            not usable_isr and not (unclean and live & set(replicas)))
        return
    op = writes[0].ops[1]
    assert isinstance(op, SetOp)
    assert op.version == 4
    new = decode_partition_state("t", 0, op.data, 5)
    assert new.leader_epoch == 4, "EPOCHS_MONOTONIC"
    assert new.controller_epoch == 2
    if new.leader == NO_LEADER:
        assert not [r for r in isr if r in live]
    elif new.leader in isr:
        assert new.leader in live
        assert set(new.isr) <= set(isr) & live
    else:
        assert unclean, "NO_COMMITTED_LOSS: a replica outside the ISR led"
        assert new.isr == (new.leader,)


def test_a_bounced_broker_loses_leadership_and_is_sent_its_replicas() -> None:
    core, effects = _elected(partitions=3, live=(0, 1, 2))
    _settle(core, effects)
    assert core.leader_isr[("t", 1)].leader == 1
    restarted = _brokers(0, 1, 2)
    restarted[1] = BrokerRegistration(1, "127.0.0.1", 9001, None, 555)
    sends = _settle(core, core.handle(BrokersRead(restarted)))
    moved = core.leader_isr[("t", 1)]
    assert moved.leader == 2, "the bounced broker's leadership moved to the next ISR member"
    assert 1 not in moved.isr
    to_bounced = [s.request for s in sends
                  if s.broker_id == 1 and isinstance(s.request, LeaderAndIsrRequest)]
    assert to_bounced
    assert all(r.broker_epoch == 555 for r in to_bounced), "addressed to the new incarnation"
    assert {p.partition for r in to_bounced for p in r.partition_states} == {0, 1, 2}
    assert not any(p.is_new for r in to_bounced for p in r.partition_states)


def test_a_bounced_broker_is_never_sent_a_state_its_isr_removal_replaces() -> None:
    # The bounced broker leads t-1 (an election, written first) and follows t-0 and t-2, which
    # only lose it from the ISR (their writes wait behind the election). The election's
    # requests must not carry t-0/t-2's cached states to the new incarnation: it lost its
    # unflushed records, and those states still list it in the ISR, in a leader epoch the
    # removal is about to replace (the cluster simulator's seed 64: the restarted broker
    # followed that stale epoch). It hears of t-0/t-2 once their removal is written.
    core, effects = _elected(partitions=3, live=(0, 1, 2))
    _settle(core, effects)
    before = {p: core.leader_isr[("t", p)].leader_epoch for p in range(3)}
    restarted = _brokers(0, 1, 2)
    restarted[1] = BrokerRegistration(1, "127.0.0.1", 9001, None, 555)
    sends = _settle(core, core.handle(BrokersRead(restarted)))
    states = [p for s in sends if s.broker_id == 1 and isinstance(s.request, LeaderAndIsrRequest)
              for p in s.request.partition_states]
    assert {p.partition for p in states} == {0, 1, 2}, "every replica of the new incarnation"
    for p in states:
        assert 1 not in p.isr, f"t-{p.partition}: sent ISR {p.isr} with the bounced broker"
        assert p.leader_epoch > before[p.partition], (
            f"t-{p.partition}: sent leader epoch {p.leader_epoch}, the one the removal replaced")


def test_a_broker_back_before_its_isr_removal_is_written_still_leaves_the_isr() -> None:
    # Broker 1 fails: its leadership (t-1) is written first, the partitions that only lose it
    # from the ISR (t-0, t-2) wait behind that election. It registers again (a new broker epoch)
    # before the election's write completes: the removal it still owes is not forgotten.
    core, effects = _elected(partitions=3, live=(0, 1, 2))
    _settle(core, effects)
    first = core.handle(BrokersRead(_brokers(0, 2)))
    election = _writes(first)
    assert [op.path for w in election for op in w.ops[1:]] == [
        "/brokers/topics/t/partitions/1/state"]
    restarted = _brokers(0, 1, 2)
    restarted[1] = BrokerRegistration(1, "127.0.0.1", 9001, None, 555)
    second = core.handle(BrokersRead(restarted))
    assert not [e for e in second if isinstance(e, ReadPartitionStates)]
    _settle(core, first + second)
    for partition in range(3):
        state = core.leader_isr[("t", partition)]
        assert 1 not in state.isr, f"t-{partition}: ISR {state.isr} keeps the restarted broker"
        assert state.leader != 1
    assert core.leader_isr[("t", 0)].isr == (0, 2)
    assert core.leader_isr[("t", 2)].isr == (2, 0)


def test_a_bounced_last_isr_member_loses_leadership_then_leads_again() -> None:
    core = Controller(ControllerConfig(9))
    effects = core.handle(Elected(2, 5, ClusterSnapshot(
        _brokers(0, 1), {"t": TopicAssignment({0: (1, 0)})},
        {("t", 0): LeaderIsr(1, 3, (1,), 1, 4)})))
    assert not _writes(effects)
    restarted = _brokers(0, 1)
    restarted[1] = BrokerRegistration(1, "127.0.0.1", 9001, None, 555)
    reaction = core.handle(BrokersRead(restarted))
    first = _writes(reaction)
    op = first[0].ops[1]
    assert isinstance(op, SetOp)
    offline = decode_partition_state("t", 0, op.data, 5)
    assert (offline.leader, offline.isr) == (NO_LEADER, (1,)), (
        "failed first: no leader, the last ISR member kept")
    _settle(core, reaction)
    state = core.leader_isr[("t", 0)]
    assert (state.leader, state.leader_epoch, state.isr) == (1, 5, (1,)), (
        "then started: it leads again, in a new leader epoch")



def test_an_isr_removal_survives_a_stale_zk_version() -> None:
    core, effects = _elected(partitions=1, live=(0, 1, 2))
    _settle(core, effects)
    restarted = _brokers(0, 1, 2)
    restarted[1] = BrokerRegistration(1, "127.0.0.1", 9001, None, 555)
    write = _writes(core.handle(BrokersRead(restarted)))[0]
    results: list[OpResult] = [CheckResult(), BadVersionError("the leader wrote its ISR")]
    reads = [e for e in core.handle(WriteCompleted(write.write_id, results))
             if isinstance(e, ReadPartitionStates)]
    assert reads
    assert reads[0].partitions == (("t", 0),)
    # Re-read: the leader rewrote the ISR with broker 1 in it (version 7); broker 1 is live
    # again, but the removal its restart calls for is still planned.
    rewrite = _writes(core.handle(PartitionStatesRead({("t", 0): LeaderIsr(0, 1, (0, 1, 2), 2,
                                                                             7)})))
    assert rewrite, "the re-read state keeps the restarted broker in the ISR"
    op = rewrite[0].ops[1]
    assert isinstance(op, SetOp)
    assert op.version == 7
    planned = decode_partition_state("t", 0, op.data, 8)
    assert (planned.leader, planned.isr) == (0, (0, 2))


def _lair_states(effects: Sequence[ControllerEffect], broker_id: int
                 ) -> list[tuple[int, int, tuple[int, ...]]]:
    """(partition, leader epoch, ISR) of every LeaderAndIsr state ``effects`` send to
    ``broker_id``."""
    return [(p.partition, p.leader_epoch, p.isr) for s in effects
            if isinstance(s, SendRequest) and s.broker_id == broker_id
            and isinstance(s.request, LeaderAndIsrRequest)
            for p in s.request.partition_states]


def test_a_bounced_broker_is_not_sent_a_state_whose_removal_was_lost_with_the_connection(
) -> None:
    # Fuzz seed 11302: broker 1 bounced (its unflushed records lost); the write of its ISR
    # removals went out as the controller's ZooKeeper connection dropped (outcome unknown), and
    # so did the re-read that followed. The queued LeaderAndIsr states (cached: broker 1 in the
    # ISR, the leader epoch the removal replaces) must not go out: the restarted broker would
    # follow them from an empty log as an ISR member. Kafka's controller retries its write once
    # connected before sending anything; here the revalidation re-reads and resends.
    core, effects = _elected(partitions=3, live=(0, 1, 2))
    _settle(core, effects)
    before = {("t", p): core.leader_isr[("t", p)] for p in range(3)}
    restarted = _brokers(0, 1, 2)
    restarted[1] = BrokerRegistration(1, "127.0.0.1", 9001, None, 555)
    sent: list[ControllerEffect] = []
    queue = _writes(core.handle(BrokersRead(restarted)))
    assert queue, "the bounced broker's removals are written"
    for _round in range(5):
        if not queue:
            break
        lost = core.handle(WriteCompleted(queue.pop(0).write_id, None))
        assert [e for e in lost if isinstance(e, ReadPartitionStates)]
        unanswered = core.handle(PartitionStatesRead({}))
        sent += lost + unanswered
        queue += _writes(unanswered)
    assert not queue
    assert not [s for s in _lair_states(sent, 1) if 1 in s[2]], (
        f"states naming the bounced broker in the ISR sent to it: {_lair_states(sent, 1)}")
    # The reconnection's revalidation: ZooKeeper still holds the old states (the writes never
    # landed), vouching for broker 1's old incarnation (KIP-903); the failover path removes
    # broker 1 and only then sends its replicas.
    vouching = {tp: replace(state, isr_broker_epochs=tuple(100 + r for r in state.isr))
                for tp, state in before.items()}
    revalidated = core.handle(Elected(2, 5, ClusterSnapshot(
        restarted, {"t": TopicAssignment({p: (p % 3, (p + 1) % 3, (p + 2) % 3)
                                          for p in range(3)})}, vouching)))
    states = _lair_states(_settle(core, revalidated), 1)
    assert {p for p, _epoch, _isr in states} == {0, 1, 2}
    assert all(1 not in isr and epoch > before[("t", p)].leader_epoch
               for p, epoch, isr in states), states


def test_a_state_queued_before_a_re_read_is_sent_as_read() -> None:
    # The write of broker 1's removals has an unknown outcome and the re-read finds it landed:
    # the LeaderAndIsr states queued from the cache before the read (the leader epoch the write
    # replaced) are rebuilt from what was read.
    core, effects = _elected(partitions=1, live=(0, 1, 2))
    _settle(core, effects)
    restarted = _brokers(0, 1, 2)
    restarted[1] = BrokerRegistration(1, "127.0.0.1", 9001, None, 555)
    write = _writes(core.handle(BrokersRead(restarted)))[0]
    op = write.ops[1]
    assert isinstance(op, SetOp)
    landed = decode_partition_state("t", 0, op.data, op.version + 1)
    assert 1 not in landed.isr
    core.handle(WriteCompleted(write.write_id, None))
    states = _lair_states(core.handle(PartitionStatesRead({("t", 0): landed})), 1)
    assert states == [(0, landed.leader_epoch, landed.isr)], states


def test_deferred_isr_changes_go_in_rounds_after_the_elections_are_sent() -> None:
    """A broker fails: the partitions it led are elected first and their LeaderAndIsr goes out
    before any partition that only loses it from the ISR is planned; those follow in rounds of
    ``DEFERRED_WRITES_PER_ROUND`` multis, each planned once the previous round is written."""
    partitions = 3 * (2 * DEFERRED_WRITES_PER_ROUND + 3)
    core, effects = _elected(partitions=partitions, batch=1)
    _settle(core, effects)
    failed = core.handle(BrokersRead(_brokers(0, 2)))
    elections = _writes(failed)
    assert len(elections) == partitions // 3  # one partition per multi; broker 1 led a third
    queue: list[ZkWrite] = list(elections)
    rounds: list[int] = []
    sent_before_isr_round = False
    while queue:
        reactions: list[ControllerEffect] = []
        for write in queue:
            reactions += core.handle(WriteCompleted(write.write_id, _succeed(write)))
        queue = _writes(reactions)
        if not rounds:
            sent_before_isr_round = any(
                isinstance(s.request, LeaderAndIsrRequest) for s in _sends(reactions))
        if queue:
            rounds.append(len(queue))
    assert sent_before_isr_round, "the elections' LeaderAndIsr goes out with the first round"
    isr_only = partitions - partitions // 3
    full, rest = divmod(isr_only, DEFERRED_WRITES_PER_ROUND)
    assert full >= 2
    assert rounds == [DEFERRED_WRITES_PER_ROUND] * full + ([rest] if rest else [])
    assert all(1 not in state.isr for state in core.leader_isr.values())
