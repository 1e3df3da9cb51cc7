"""KIP-279 on two real brokers: a follower whose latest epoch the leader never had, and whose
older epoch the leader lacks too, asks twice and truncates to the prefix both logs share.

The test plays the controller (LeaderAndIsr over the wire) and gates the follower's fetches:

* epoch 1, leader A: A appends r0, B copies it;
* epoch 2, leader A (B is not told): A appends a0;
* epoch 3, leader B (A is not told): B appends b0;
* epoch 4, leader A, B follows: B asks for the end of epoch 3; A answers epoch 2, ending at 2.
  KIP-101 alone truncates B to min(2, 2) = 2 and keeps b0, which A never had (KAFKA-6361).
  B has no epoch 2: it truncates to the end of its epoch 1 and asks for epoch 1; A answers
  epoch 1, ending at 1: B truncates to 1 and then copies a0.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from impl.controller.requests import BrokerEndpoint
from impl.storage.record_batch import build_batch
from impl.trace import ListTraceSink
from tests.integration.broker._harness import RunningBroker
from tests.integration.broker.test_protocol_errors import Client, produce
from tests.integration.cluster.test_kip101 import (
    FOLLOWER,
    LEADER,
    TP,
    FetchGate,
    assign,
    offsets,
    partition,
    records,
    stored,
    wait_for,
)

pytestmark = pytest.mark.integration


def produce_one(broker: RunningBroker, value: bytes) -> tuple[int, int]:
    client = Client(broker.bootstrap)
    try:
        return produce(client, TP.topic, build_batch([value]), acks=1)
    finally:
        client.close()


def test_follower_asks_again_for_an_epoch_it_shares_with_the_leader(
    zk_chroot: str, tmp_path: Path,
) -> None:
    sink, leader_sink = ListTraceSink(), ListTraceSink()
    a = RunningBroker(zk_chroot, tmp_path / "a", broker_id=LEADER, dirs=1,
                      trace=leader_sink).start()
    b: RunningBroker | None = None
    try:
        b = RunningBroker(zk_chroot, tmp_path / "b", broker_id=FOLLOWER, dirs=1,
                          trace=sink).start()
        follower = b
        gate = FetchGate(follower)
        endpoints = {LEADER: BrokerEndpoint(LEADER, "127.0.0.1", a.broker.port),
                     FOLLOWER: BrokerEndpoint(FOLLOWER, "127.0.0.1", follower.broker.port)}
        both = (LEADER, FOLLOWER)

        assign(a, endpoints, leader=LEADER, leader_epoch=1, isr=both)
        assign(follower, endpoints, leader=LEADER, leader_epoch=1, isr=both)
        assert produce_one(a, b"r0") == (0, 0)
        gate.wait_completed(gate.grant())
        assert offsets(follower)[0] == 1

        assign(a, endpoints, leader=LEADER, leader_epoch=2, isr=(LEADER,))
        assert produce_one(a, b"a0") == (0, 1)

        assign(follower, endpoints, leader=FOLLOWER, leader_epoch=3, isr=(FOLLOWER,))
        assert produce_one(follower, b"b0") == (0, 1)
        assert stored(follower) == records(b"r0", b"b0")

        assign(a, endpoints, leader=LEADER, leader_epoch=4, isr=(LEADER,))
        assign(follower, endpoints, leader=LEADER, leader_epoch=4, isr=both)
        assert follower.broker.replicas is not None
        node = follower.broker.replicas.node
        wait_for(lambda: follower.call_sync(
            lambda: TP in node.followed and node.followed[TP].truncated
        ), "the follower's truncation")
        truncations = [dict(e.fields) for e in sink if e.event == "TRUNCATE"]
        assert truncations == [{"policy": "LEADER_EPOCH", "log_end_offset": 2,
                                "truncated_to": 1, "leader_epoch_end": 2, "rounds": 2}]
        assert stored(follower) == records(b"r0")

        gate.wait_completed(gate.grant())
        assert stored(follower) == stored(a) == records(b"r0", b"a0")
        entries = follower.call_sync(lambda: partition(follower).log.epochs.entries)
        assert [(e.epoch, e.start_offset) for e in entries] == [(1, 0), (2, 1)]

        # the fields the replication abstraction reads: the fetch request's epoch, the LEO and
        # HW a replica had when it took a role (none before its log exists)
        fetches = [e for e in leader_sink if e.event == "FOLLOWER_FETCH"]
        assert [(e.fields["leader_epoch"], e.fields["fetch_offset"]) for e in fetches] == [
            (1, 0), (4, 1)]
        roles = [(e.event, e.fields["leader_epoch"], e.fields.get("log_end_offset"))
                 for e in leader_sink if e.event.startswith("BECOME_")]
        assert roles == [("BECOME_LEADER", 1, None), ("BECOME_LEADER", 2, 1),
                         ("BECOME_LEADER", 4, 2)]
    finally:
        if b is not None:
            b.stop()
        a.stop()
