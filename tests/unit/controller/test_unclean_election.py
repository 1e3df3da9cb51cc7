"""ElectLeaders UNCLEAN in the controller core (KIP-460, Kafka's admin-triggered
``OfflinePartitionLeaderElectionStrategy(allowUnclean = true)``): a partition without a live
leader and ISR member gets a live replica outside the ISR as leader (its ISR is that replica),
whatever ``unclean.leader.election.enable`` says; a live leader means ELECTION_NOT_NEEDED, no
live replica ELIGIBLE_LEADERS_NOT_AVAILABLE; a request to an inactive core NOT_CONTROLLER."""

from __future__ import annotations

from impl.controller.controller import (
    ERROR_ELECTION_NOT_NEEDED,
    ERROR_ELIGIBLE_LEADERS_NOT_AVAILABLE,
    ERROR_NOT_CONTROLLER,
    ERROR_UNKNOWN_TOPIC_OR_PARTITION,
    BrokersRead,
    ClusterSnapshot,
    Controller,
    ControllerConfig,
    ControllerEffect,
    ControllerMoved,
    Elected,
    ElectionAnswered,
    UncleanElectionRequested,
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
from impl.controller.requests import ERROR_NONE, NO_LEADER
from impl.controller.znodes import BrokerRegistration, LeaderIsr, TopicAssignment

TP = tuple[str, int]


def _brokers(*ids: int) -> dict[int, BrokerRegistration]:
    return {b: BrokerRegistration(b, "127.0.0.1", 9000 + b, None, 100 + b) for b in ids}


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


def _run(core: Controller, effects: list[ControllerEffect]) -> list[ControllerEffect]:
    """Complete every write (and the writes they cause); return all effects seen."""
    seen = list(effects)
    queue = [e for e in effects if isinstance(e, ZkWrite)]
    for _round in range(10):
        if not queue:
            return seen
        reactions: list[ControllerEffect] = []
        for write in queue:
            reactions += core.handle(WriteCompleted(write.write_id, _succeed(write)))
        seen += reactions
        queue = [e for e in reactions if isinstance(e, ZkWrite)]
    raise AssertionError("the controller never settled")


def _answers(effects: list[ControllerEffect]) -> list[ElectionAnswered]:
    return [e for e in effects if isinstance(e, ElectionAnswered)]


def _core(unclean_config: bool = False) -> Controller:
    """Brokers 1 and 2 live. t-0 (replicas 0, 1) has no leader and ISR (0,): 1 is live outside
    it. t-1 (replicas 1, 2) is led by 1. t-2 (replicas 0, 3) has no live replica."""
    assignment = {0: (0, 1), 1: (1, 2), 2: (0, 3)}
    states = {
        ("t", 0): LeaderIsr(NO_LEADER, 4, (0,), 1, 7),
        ("t", 1): LeaderIsr(1, 2, (1, 2), 1, 3),
        ("t", 2): LeaderIsr(NO_LEADER, 1, (0,), 1, 2),
    }
    core = Controller(ControllerConfig(9, unclean_config))
    effects = core.handle(Elected(2, 5, ClusterSnapshot(
        _brokers(1, 2), {"t": TopicAssignment(assignment)}, states)))
    _run(core, effects)
    assert core.leader_isr[("t", 0)].leader == NO_LEADER, "no unclean election unasked"
    return core


def test_an_unclean_election_elects_a_live_replica_outside_the_isr() -> None:
    core = _core()
    effects = core.handle(UncleanElectionRequested(7, (("t", 0), ("t", 1), ("t", 2), ("u", 0))))
    assert not _answers(effects), "answered only once the election is written"
    writes = [e for e in effects if isinstance(e, ZkWrite)]
    assert len(writes) == 1
    seen = _run(core, effects)
    [answer] = _answers(seen)
    assert answer.request_id == 7
    assert dict(answer.results) == {
        ("t", 0): ERROR_NONE,
        ("t", 1): ERROR_ELECTION_NOT_NEEDED,
        ("t", 2): ERROR_ELIGIBLE_LEADERS_NOT_AVAILABLE,
        ("u", 0): ERROR_UNKNOWN_TOPIC_OR_PARTITION,
    }
    state = core.leader_isr[("t", 0)]
    assert (state.leader, state.isr, state.leader_epoch) == (1, (1,), 5)
    # once led, a second request needs no election
    [again] = _answers(core.handle(UncleanElectionRequested(8, (("t", 0),))))
    assert dict(again.results) == {("t", 0): ERROR_ELECTION_NOT_NEEDED}


def test_the_request_waives_the_isr_rule_only_once() -> None:
    core = _core()
    _run(core, core.handle(UncleanElectionRequested(1, (("t", 2),))))
    # broker 3 (outside t-2's ISR) comes back: without a request it is not elected
    _run(core, core.handle(BrokersRead(_brokers(1, 2, 3))))
    assert core.leader_isr[("t", 2)].leader == NO_LEADER, "NO_COMMITTED_LOSS without a request"
    seen = _run(core, core.handle(UncleanElectionRequested(2, (("t", 2),))))
    assert dict(_answers(seen)[0].results) == {("t", 2): ERROR_NONE}
    assert core.leader_isr[("t", 2)].leader == 3


def test_a_request_to_an_inactive_core_or_across_a_resignation_is_not_controller() -> None:
    idle = Controller(ControllerConfig(9))
    [answer] = _answers(idle.handle(UncleanElectionRequested(3, (("t", 0),))))
    assert dict(answer.results) == {("t", 0): ERROR_NOT_CONTROLLER}
    core = _core()
    effects = core.handle(UncleanElectionRequested(4, (("t", 0),)))
    assert not _answers(effects)
    resigned = core.handle(ControllerMoved())
    [answer] = _answers(resigned)
    assert dict(answer.results) == {("t", 0): ERROR_NOT_CONTROLLER}
