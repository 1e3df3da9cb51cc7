"""Preferred replica elections (/admin/preferred_replica_election) and per-topic
``unclean.leader.election.enable`` in the controller core."""

from __future__ import annotations

from collections.abc import Sequence

from impl.controller.controller import (
    ClusterSnapshot,
    Controller,
    ControllerConfig,
    ControllerEffect,
    Elected,
    PreferredElectionRead,
    TopicConfigsRead,
    WriteCompleted,
    ZkWrite,
)
from impl.controller.coordinator import (
    CheckOp,
    CheckResult,
    CreateResult,
    DeleteOp,
    DeleteResult,
    NodeStat,
    OpResult,
    SetOp,
    SetResult,
)
from impl.controller.znodes import (
    PREFERRED_REPLICA_ELECTION_PATH,
    BrokerRegistration,
    LeaderIsr,
    TopicAssignment,
    decode_preferred_election,
    encode_preferred_election,
)


def _brokers(*ids: int) -> dict[int, BrokerRegistration]:
    return {b: BrokerRegistration(b, "127.0.0.1", 9000 + b, None, 100 + b) for b in ids}


def _settle(core: Controller, effects: Sequence[ControllerEffect]) -> list[ZkWrite]:
    """Complete every write (and the writes they cause); all the writes seen."""
    seen: list[ZkWrite] = []
    queue = [e for e in effects if isinstance(e, ZkWrite)]
    for _round in range(10):
        if not queue:
            return seen
        seen += queue
        next_queue: list[ZkWrite] = []
        for write in queue:
            results: list[OpResult] = []
            for op in write.ops:
                if isinstance(op, CheckOp):
                    results.append(CheckResult())
                elif isinstance(op, SetOp):
                    results.append(SetResult(NodeStat(1, 1, 1, op.version + 1, 0, 0, 10, 0)))
                elif isinstance(op, DeleteOp):
                    results.append(DeleteResult())
                else:
                    results.append(CreateResult(op.path))
            reaction = core.handle(WriteCompleted(write.write_id, results))
            next_queue += [e for e in reaction if isinstance(e, ZkWrite)]
        queue = next_queue
    raise AssertionError("the controller never settled")


def _controller(state: LeaderIsr, live: tuple[int, ...], unclean: bool = False) -> Controller:
    core = Controller(ControllerConfig(9, unclean))
    _settle(core, core.handle(Elected(2, 5, ClusterSnapshot(
        _brokers(*live), {"t": TopicAssignment({0: (1, 2, 3)})}, {("t", 0): state}))))
    return core


def test_znode_format_is_kafkas() -> None:
    data = encode_preferred_election([("t", 1), ("a", 0)])
    assert data == b'{"version": 1, "partitions": [{"topic": "a", "partition": 0}, ' \
        b'{"topic": "t", "partition": 1}]}'
    assert decode_preferred_election(data) == (("a", 0), ("t", 1))


def test_preferred_election_moves_leadership_back_and_deletes_the_node() -> None:
    core = _controller(LeaderIsr(2, 4, (2, 3, 1), 1, 7), live=(1, 2, 3))
    writes = _settle(core, core.handle(PreferredElectionRead((("t", 0), ("gone", 0)))))
    assert core.leader_isr[("t", 0)].leader == 1
    assert core.leader_isr[("t", 0)].leader_epoch == 5
    assert any(isinstance(op, DeleteOp) and op.path == PREFERRED_REPLICA_ELECTION_PATH
               for write in writes for op in write.ops)


def test_preferred_election_needs_the_preferred_replica_in_the_isr() -> None:
    core = _controller(LeaderIsr(2, 4, (2, 3), 1, 7), live=(1, 2, 3))
    _settle(core, core.handle(PreferredElectionRead((("t", 0),))))
    assert core.leader_isr[("t", 0)].leader == 2


def test_topic_unclean_config_elects_a_leaderless_partition() -> None:
    # the only ISR member (1) is dead; 2 and 3 are alive but outside the ISR
    core = _controller(LeaderIsr(-1, 4, (1,), 1, 7), live=(2, 3))
    assert core.leader_isr[("t", 0)].leader == -1
    _settle(core, core.handle(TopicConfigsRead({"other": True})))
    assert core.leader_isr[("t", 0)].leader == -1
    _settle(core, core.handle(TopicConfigsRead({"t": True})))
    assert core.leader_isr[("t", 0)].leader == 2
    assert core.leader_isr[("t", 0)].isr == (2,)


def test_topic_config_overrides_the_broker_default() -> None:
    core = _controller(LeaderIsr(-1, 4, (1,), 1, 7), live=(2, 3), unclean=False)
    _settle(core, core.handle(TopicConfigsRead({"t": False})))
    assert core.leader_isr[("t", 0)].leader == -1
