"""KIP-966 in the controller core (spec/controller.md "Unclean shutdowns"), input by input.

A registration's ``clean_since_broker_epoch`` says whether the broker's last shutdown was clean and
which incarnation it ended. An ISR member that restarted uncleanly since the partition state
vouched for it is not elected, and leaves the ISR, while a member that kept its log is in the
ISR (cluster simulator seed 595: ISR {2, 0}, 2 crashed losing its tail, 0 restarted cleanly, both
unseen by the controller that took over).
"""

from __future__ import annotations

from impl.controller.controller import (
    BrokersRead,
    ClusterSnapshot,
    Controller,
    ControllerConfig,
    ControllerEffect,
    Elected,
    IsrChangesRead,
    PreferredElectionRead,
    SessionExpired,
    WriteCompleted,
    ZkWrite,
)
from impl.controller.coordinator import (
    CheckOp,
    CheckResult,
    CreateResult,
    NodeStat,
    OpResult,
    SetOp,
    SetResult,
)
from impl.controller.znodes import (
    BrokerRegistration,
    LeaderIsr,
    TopicAssignment,
    decode_partition_state,
)

TP = ("t", 0)
#: the partition state's last write, as read at the failover
STATE_MZXID = 50


def _broker(broker_id: int, epoch: int, previous: int | None) -> BrokerRegistration:
    return BrokerRegistration(broker_id, "127.0.0.1", 9000 + broker_id, None, epoch,
                              clean_since_epoch=previous)


def _succeed(write: ZkWrite) -> list[OpResult]:
    results: list[OpResult] = []
    for op in write.ops:
        if isinstance(op, CheckOp):
            results.append(CheckResult())
        elif isinstance(op, SetOp):
            results.append(SetResult(NodeStat(1, 1, 1, op.version + 1, 0, 0, 10, 0)))
        else:
            results.append(CreateResult(op.path))
    return results


def _settle(core: Controller, effects: list[ControllerEffect]) -> list[LeaderIsr]:
    """Complete every write (and the writes they cause); the states written, in order."""
    written: list[LeaderIsr] = []
    queue = [e for e in effects if isinstance(e, ZkWrite)]
    for _round in range(20):
        if not queue:
            return written
        following: list[ZkWrite] = []
        for write in queue:
            for op in write.ops:
                if isinstance(op, SetOp) and op.path.endswith("/state"):
                    written.append(decode_partition_state("t", 0, op.data, op.version + 1))
            following += [e for e in core.handle(WriteCompleted(write.write_id,
                                                                _succeed(write)))
                          if isinstance(e, ZkWrite)]
        queue = following
    raise AssertionError("the controller never settled")


def _fail_over(brokers: dict[int, BrokerRegistration], state: LeaderIsr,
               replicas: tuple[int, ...] = (2, 0, 1)) -> tuple[Controller, list[LeaderIsr]]:
    core = Controller(ControllerConfig(1))
    effects = core.handle(Elected(6, 6, ClusterSnapshot(
        brokers, {"t": TopicAssignment({0: replicas})}, {TP: state})))
    return core, _settle(core, effects)


def _seed_595(previous_of_0: int) -> tuple[Controller, list[LeaderIsr]]:
    """Controller 1 takes over with both ISR members of t-0 dead; it keeps ISR {2, 0} without a
    leader. Then 2 (no marker: -1) and 0 (``previous_of_0``) register in one read."""
    state = LeaderIsr(2, 4, (2, 0), 5, 6, STATE_MZXID)
    core, written = _fail_over({1: _broker(1, 11, 3)}, state)
    assert [(s.leader, s.isr) for s in written] == [(-1, (2, 0))]
    effects = core.handle(BrokersRead({1: _broker(1, 11, 3), 2: _broker(2, 60, -1),
                                       0: _broker(0, 61, previous_of_0)}))
    return core, _settle(core, effects)


def test_seed_595_the_member_that_shut_down_cleanly_is_elected() -> None:
    core, written = _seed_595(previous_of_0=STATE_MZXID - 10)
    assert [(s.leader, s.isr) for s in written] == [(0, (0,))], (
        "broker 2 (no clean-shutdown marker) led: broker 0 would truncate acknowledged records")
    assert core.unclean_members(TP) == frozenset()  # the mark goes with the member


def test_without_the_field_the_first_live_member_is_elected_as_in_kafka() -> None:
    state = LeaderIsr(2, 4, (2, 0), 5, 6, STATE_MZXID)
    core, _ = _fail_over({1: _broker(1, 11, None)}, state)
    effects = core.handle(BrokersRead({1: _broker(1, 11, None), 2: _broker(2, 60, None),
                                       0: _broker(0, 61, None)}))
    assert [(s.leader, s.isr) for s in _settle(core, effects)] == [(2, (2, 0))]


def test_a_clean_restart_of_an_incarnation_the_state_never_vouched_for_is_unclean() -> None:
    # broker 0's previous incarnation registered after the state's last write: it may itself
    # have followed a crash nobody saw, so both are marked: the last replica standing
    core, written = _seed_595(previous_of_0=STATE_MZXID + 5)
    assert [(s.leader, s.isr) for s in written] == [(2, (2, 0))]
    assert core.unclean_members(TP) == frozenset()  # the election vouched for them again


def test_an_unclean_member_alone_waits_for_the_clean_one() -> None:
    state = LeaderIsr(2, 4, (2, 0), 5, 6, STATE_MZXID)
    core, _ = _fail_over({1: _broker(1, 11, 3)}, state)
    effects = core.handle(BrokersRead({1: _broker(1, 11, 3), 2: _broker(2, 60, -1)}))
    assert [(s.leader, s.isr) for s in _settle(core, effects)] == [(-1, (0,))], (
        "the uncleanly restarted member must leave the ISR and not lead")
    effects = core.handle(BrokersRead({1: _broker(1, 11, 3), 2: _broker(2, 60, -1),
                                       0: _broker(0, 61, STATE_MZXID - 1)}))
    assert [(s.leader, s.isr) for s in _settle(core, effects)] == [(0, (0,))]


def test_a_broker_this_controller_saw_restarting_cleanly_keeps_its_place() -> None:
    # 0 leads with ISR {0, 2}; 2 fails and comes back naming the incarnation the controller saw
    state = LeaderIsr(0, 4, (0, 2), 5, 6, STATE_MZXID)
    live = {0: _broker(0, 10, 3), 1: _broker(1, 11, 3), 2: _broker(2, 12, 3)}
    core, written = _fail_over(live, state, replicas=(0, 2, 1))
    assert written == []
    _settle(core, core.handle(BrokersRead({0: live[0], 1: live[1]})))
    _settle(core, core.handle(BrokersRead({**live, 2: _broker(2, 70, 12)})))
    assert core.unclean_members(TP) == frozenset()
    # the same with -1: marked while 2 is still in the (re-read) ISR
    core, _ = _fail_over(live, state, replicas=(0, 2, 1))
    effects = core.handle(BrokersRead({**live, 2: _broker(2, 70, -1)}))
    assert core.unclean_members(TP) == {2}
    assert [(s.leader, s.isr) for s in _settle(core, effects)] == [(0, (0,))]


def test_an_uncleanly_restarted_leader_found_at_failover_loses_leadership() -> None:
    # 2 led with ISR {2, 0}; it crashed and registered again (previous -1) before anyone saw
    state = LeaderIsr(2, 4, (2, 0), 5, 6, STATE_MZXID)
    brokers = {0: _broker(0, 10, 3), 1: _broker(1, 11, 3),
               2: _broker(2, STATE_MZXID + 9, -1)}
    _core, written = _fail_over(brokers, state)
    assert [(s.leader, s.isr) for s in written] == [(0, (0,))]
    # both members bounced unseen: the clean one (previous vouched) leads, 2 is barred
    brokers = {0: _broker(0, STATE_MZXID + 8, STATE_MZXID - 3), 1: _broker(1, 11, 3),
               2: _broker(2, STATE_MZXID + 9, -1)}
    _core, written = _fail_over(brokers, state)
    assert [(s.leader, s.isr) for s in written] == [(0, (0,))]


def test_an_isr_change_without_the_member_settles_its_mark() -> None:
    state = LeaderIsr(2, 4, (2, 0), 5, 6, STATE_MZXID)
    core, _ = _fail_over({1: _broker(1, 11, 3)}, state)
    core.handle(BrokersRead({1: _broker(1, 11, 3), 2: _broker(2, 60, -1)}))
    assert core.unclean_members(TP) == {2}
    core.handle(IsrChangesRead((), {TP: LeaderIsr(0, 9, (0,), 6, 20, STATE_MZXID + 30)}))
    assert core.unclean_members(TP) == frozenset()


def test_a_run_of_clean_restarts_reaches_back_to_the_incarnation_seen() -> None:
    """Cluster seed 301 of the 2000-seed campaign: broker 2 restarted cleanly twice, the
    controller missing the middle incarnation; its clean-since epoch still names the one the
    controller saw (or an earlier one), so it is not marked. A run that began after it is."""
    state = LeaderIsr(0, 4, (0, 2), 5, 6, STATE_MZXID)
    live = {0: _broker(0, 10, 3), 1: _broker(1, 11, 3), 2: _broker(2, 12, 3)}
    for since, marked in ((3, frozenset()), (12, frozenset()), (13, frozenset({2}))):
        core, _ = _fail_over(live, state, replicas=(0, 2, 1))
        core.handle(BrokersRead({**live, 2: _broker(2, 90, since)}))
        assert core.unclean_members(TP) == marked, since


def test_a_leaderless_state_does_not_vouch_for_a_member_registered_after_a_crash() -> None:
    # Fuzz seed 6056: the ISR {2, 0} lost both members (0 stopped cleanly, 2 crashed losing its
    # tail); the controller's write of the leaderless state stalled across its session's expiry
    # and landed after both registered again, so both registrations precede the state's mzxid.
    # The state's writer never saw them: it vouches for neither, and 2 followed a crash.
    state = LeaderIsr(-1, 4, (2, 0), 5, 6, STATE_MZXID)
    brokers = {0: _broker(0, STATE_MZXID - 2, 3), 1: _broker(1, 11, 3),
               2: _broker(2, STATE_MZXID - 1, -1)}
    core, written = _fail_over(brokers, state)
    assert [(s.leader, s.isr) for s in written] == [(0, (0,))], (
        "broker 2 (no clean-shutdown marker) led: broker 0 would truncate acknowledged records")
    assert core.unclean_members(TP) == frozenset()  # the mark goes with the member
    # with every member registered after a crash, the last replica standing leads as before
    brokers = {0: _broker(0, STATE_MZXID - 2, -1), 1: _broker(1, 11, 3),
               2: _broker(2, STATE_MZXID - 1, -1)}
    core, written = _fail_over(brokers, state)
    assert [(s.leader, s.isr) for s in written] == [(2, (2, 0))]
    assert core.unclean_members(TP) == frozenset()



def test_a_stalled_write_of_the_previous_term_vouches_only_for_what_that_term_read() -> None:
    # Fuzz seed 13451: controller 1 planned a preferred election (leader 0, ISR {0, 1, 2}) while
    # every member was up; its session expired with the write unanswered, the write landed after
    # 2 crashed, losing its tail, and registered again, and 0 crashed too. Re-elected, its
    # failover reads 2's registration as older than the state's mzxid; the state is its own
    # stalled write, which vouched only for the incarnation of 2 it had read.
    live = {0: _broker(0, 10, 3), 1: _broker(1, 11, 3), 2: _broker(2, 12, 3)}
    for restarted, expected in ((_broker(2, STATE_MZXID - 2, -1), [(1, (1,))]),
                                (live[2], [(1, (1, 2))])):
        core = Controller(ControllerConfig(1))
        _settle(core, core.handle(Elected(6, 6, ClusterSnapshot(
            live, {"t": TopicAssignment({0: (0, 1, 2)})},
            {TP: LeaderIsr(1, 7, (0, 1, 2), 5, 15, STATE_MZXID - 10)}))))
        effects = core.handle(PreferredElectionRead((TP,)))
        assert any(isinstance(e, ZkWrite) for e in effects), "no preferred election planned"
        core.handle(SessionExpired())  # the write stays unanswered
        stalled = LeaderIsr(0, 8, (0, 1, 2), 6, 16, STATE_MZXID)  # it landed
        effects = core.handle(Elected(7, 7, ClusterSnapshot(
            {1: live[1], 2: restarted}, {"t": TopicAssignment({0: (0, 1, 2)})},
            {TP: stalled})))
        written = _settle(core, effects)
        assert [(s.leader, s.isr) for s in written] == expected, (
            "broker 2 (no clean-shutdown marker) stayed in the ISR short of committed records")


def test_a_state_recording_its_members_epochs_vouches_only_for_those_incarnations() -> None:
    """Fuzz seed 1915: broker 0, in the ISR of leader 2, crashed unseen (it was the controller)
    and registered again; leader 2 then rewrote the ISR (another member shrunk and re-added)
    carrying it over. The state's last write is newer than 0's registration, so the mzxid rule
    took 0 as vouched for. The state records the incarnation each member was seen in sync
    under (KIP-903): 0's is the crashed one, so its registration is a restart, and unclean."""
    brokers = {0: _broker(0, STATE_MZXID - 2, -1), 1: _broker(1, 11, 3),
               2: _broker(2, 12, 3)}
    state = LeaderIsr(2, 4, (2, 0, 1), 5, 6, STATE_MZXID, isr_broker_epochs=(12, 7, 11))
    core, written = _fail_over(brokers, state, replicas=(2, 0, 1))
    assert core.unclean_members(TP) == frozenset()  # the mark went with the member
    assert [(s.leader, s.isr) for s in written] == [(2, (2, 1))], (
        "broker 0 restarted uncleanly since the incarnation the state vouched for: it must "
        "leave the ISR")
    # the same state without the epochs: the mzxid rule keeps broker 0 (the old weakness)
    state = LeaderIsr(2, 4, (2, 0, 1), 5, 6, STATE_MZXID)
    _core, written = _fail_over(brokers, state, replicas=(2, 0, 1))
    assert written == []
    # and with 0's current incarnation recorded, it stays: the writer saw it in sync
    state = LeaderIsr(2, 4, (2, 0, 1), 5, 6, STATE_MZXID,
                      isr_broker_epochs=(12, STATE_MZXID - 2, 11))
    _core, written = _fail_over(brokers, state, replicas=(2, 0, 1))
    assert written == []


def test_the_controller_records_the_incarnations_it_read() -> None:
    """A controller's write names each live member's registration as read, and for a member
    that is not live the incarnation the state it replaces vouched for."""
    state = LeaderIsr(2, 4, (2, 0, 1), 5, 6, STATE_MZXID, isr_broker_epochs=(12, 10, 11))
    live = {0: _broker(0, 10, 3), 1: _broker(1, 11, 3), 2: _broker(2, 12, 3)}
    core, written = _fail_over(live, state, replicas=(2, 0, 1))
    assert written == []
    effects = core.handle(BrokersRead({0: live[0], 1: live[1]}))  # 2 failed
    assert [(s.leader, s.isr, s.isr_broker_epochs) for s in _settle(core, effects)] == [
        (0, (0, 1), (10, 11))]
    effects = core.handle(BrokersRead({1: live[1]}))  # 0 failed: 1 alone
    effects += core.handle(BrokersRead({}))  # 1 failed: the last member stays, leaderless
    assert [(s.leader, s.isr, s.isr_broker_epochs) for s in _settle(core, effects)][-1] == (
        -1, (1,), (11,))


def test_another_controllers_stalled_write_vouches_only_for_what_it_read() -> None:
    """A state with a leader written by a controller whose write stalled and landed after a
    member crashed and registered again: by mzxid the member is vouched for (the case that
    stayed open in ZooKeeper-era Kafka); the recorded incarnation is the one that controller
    read, so the failover sees the restart."""
    brokers = {0: _broker(0, 10, 3), 1: _broker(1, 11, 3),
               2: _broker(2, STATE_MZXID - 1, -1)}  # 2 registered again before the write
    state = LeaderIsr(0, 4, (0, 1, 2), 5, 6, STATE_MZXID, isr_broker_epochs=(10, 11, 12))
    core, written = _fail_over(brokers, state, replicas=(0, 1, 2))
    assert [(s.leader, s.isr) for s in written] == [(0, (0, 1))]
    assert core.unclean_members(TP) == frozenset()
