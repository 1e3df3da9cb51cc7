"""A controller failover finds an ISR member that restarted unseen (cluster simulator seed 85).

The active controller was also t-0's leader. It crashed, losing its unflushed records, and
registered again before any other broker became controller: no controller ever saw it fail. The
next controller (the same broker) read the state znode, still naming it leader of epoch 4 with
the full ISR, and sent that state back: the restarted broker led epoch 4 again without the
records its followers had acknowledged, and they truncated to it (NO_COMMITTED_LOSS).

Its registration's czxid (its broker epoch) is newer than the state znode's mzxid: it restarted
after the state last vouched for it. The failover handles it as Kafka handles a bounced broker
(KIP-380) and KRaft one that re-registers after an unclean shutdown (KIP-966).
"""

from __future__ import annotations

from impl.controller.controller import (
    ClusterSnapshot,
    Controller,
    ControllerConfig,
    ControllerEffect,
    Elected,
    SendRequest,
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
from impl.controller.requests import LeaderAndIsrRequest
from impl.controller.znodes import (
    BrokerRegistration,
    LeaderIsr,
    TopicAssignment,
    decode_partition_state,
)

STATE_MZXID = 50


def _brokers(epochs: dict[int, int]) -> dict[int, BrokerRegistration]:
    return {b: BrokerRegistration(b, "127.0.0.1", 9000 + b, None, e) for b, e in epochs.items()}


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


def _fail_over(epochs: dict[int, int], isr: tuple[int, ...]) -> tuple[
        Controller, list[ControllerEffect], list[SendRequest]]:
    """Broker 2 becomes controller; t-0 (replicas 1, 2, 0) was led by 2 in epoch 4."""
    core = Controller(ControllerConfig(2))
    state = LeaderIsr(2, 4, isr, 5, 6, STATE_MZXID)
    effects = core.handle(Elected(6, 6, ClusterSnapshot(
        _brokers(epochs), {"t": TopicAssignment({0: (1, 2, 0)})}, {("t", 0): state})))
    sends = [e for e in effects if isinstance(e, SendRequest)]
    queue = [e for e in effects if isinstance(e, ZkWrite)]
    for _round in range(10):
        if not queue:
            break
        following: list[ZkWrite] = []
        for write in queue:
            reaction = core.handle(WriteCompleted(write.write_id, _succeed(write)))
            effects += reaction
            sends += [e for e in reaction if isinstance(e, SendRequest)]
            following += [e for e in reaction if isinstance(e, ZkWrite)]
        queue = following
    assert not queue, "the controller never settled"
    return core, effects, sends


def _leaders_sent(sends: list[SendRequest]) -> list[tuple[int, int, int]]:
    """(receiving broker, leader, leader epoch) of every LeaderAndIsr partition state sent."""
    return [(s.broker_id, p.leader, p.leader_epoch) for s in sends
            if isinstance(s.request, LeaderAndIsrRequest) for p in s.request.partition_states]


def test_a_leader_registered_after_its_state_was_written_loses_leadership() -> None:
    core, effects, sends = _fail_over({0: 10, 1: 11, 2: STATE_MZXID + 7}, (2, 0, 1))
    writes = [e for e in effects if isinstance(e, ZkWrite)]
    assert writes, "the stale state was kept: the restarted broker would lead epoch 4 again"
    op = writes[0].ops[1]
    assert isinstance(op, SetOp)
    new = decode_partition_state("t", 0, op.data, 7)
    assert (new.leader, new.leader_epoch, new.isr) == (1, 5, (0, 1)), new
    assert all((leader, epoch) != (2, 4) for _b, leader, epoch in _leaders_sent(sends)), (
        "the stale state (broker 2 leading epoch 4) was sent")
    assert (2, 1, 5) in _leaders_sent(sends), "the restarted broker follows the new leader"
    assert core.leader_isr[("t", 0)].leader == 1


def test_a_restarted_follower_leaves_the_isr() -> None:
    core, _effects, _sends = _fail_over({0: STATE_MZXID + 3, 1: 11, 2: 12}, (2, 0, 1))
    state = core.leader_isr[("t", 0)]
    assert (state.leader, state.leader_epoch, state.isr) == (2, 5, (2, 1))


def test_brokers_registered_before_the_state_keep_it() -> None:
    core, effects, sends = _fail_over({0: 10, 1: 11, 2: STATE_MZXID - 1}, (2, 0, 1))
    assert not [e for e in effects if isinstance(e, ZkWrite)]
    assert (2, 2, 4) in _leaders_sent(sends), "the INIT LeaderAndIsr resends the state"
    assert core.leader_isr[("t", 0)].leader == 2


def test_a_restarted_last_isr_member_keeps_leading() -> None:
    # Nobody else holds the log: taking leadership away would leave t-0 offline until the
    # same broker is elected again, with the same records.
    core, effects, _sends = _fail_over({0: 10, 1: 11, 2: STATE_MZXID + 7}, (2,))
    assert not [e for e in effects if isinstance(e, ZkWrite)]
    assert core.leader_isr[("t", 0)].leader == 2
