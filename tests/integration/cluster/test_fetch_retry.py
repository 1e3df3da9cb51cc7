"""A follower refused by its leader keeps the partition and retries (issue #5).

The controller sends LeaderAndIsr to each broker on its own channel, so a follower can hear of a
new leader or epoch before the leader does. Its first request is then refused; Kafka's
``AbstractFetcherThread`` delays such a partition by ``replica.fetch.backoff.ms`` and tries
again, and only FENCED_LEADER_EPOCH (the follower's epoch is the older one) waits for the next
LeaderAndIsr. The test plays the controller for two in-process brokers and delivers each pair of
LeaderAndIsr requests in the order that makes the follower's request fail:

1. epoch 1, follower first: the leader does not know the partition (UNKNOWN_TOPIC_OR_PARTITION);
2. epoch 2, same leader, follower first: the leader's epoch is older (UNKNOWN_LEADER_EPOCH);
3. epoch 3, same leader, leader first: the follower's epoch is older (FENCED_LEADER_EPOCH): it
   stays followed, waiting for its LeaderAndIsr;
4. epoch 4, roles swapped, new follower first: the new leader is still a follower
   (NOT_LEADER_OR_FOLLOWER).

After each step an acks=all produce (the ISR holds both brokers) completes, so the follower
fetched again without another LeaderAndIsr. With ``high_watermark`` truncation the refused
request is the Fetch itself; with ``leader_epoch`` it is OffsetForLeaderEpoch (the Fetch in
step 3).

The second test sets a back-off far above the produce timeout: while one partition waits out
its back-off, another partition followed from the same leader is still fetched.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from impl.broker.replica_fetcher import ReplicaFetcher
from impl.broker.replication import TruncationPolicy
from impl.controller.requests import (
    BrokerEndpoint,
    ControllerResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
)
from impl.storage import TopicPartition
from impl.storage.record_batch import build_batch
from tests.integration.broker._harness import RunningBroker
from tests.integration.broker.test_protocol_errors import Client

pytestmark = pytest.mark.integration

TP = TopicPartition("retry", 0)
FIRST, SECOND = 1, 2
WAIT_SECONDS = 30.0
#: The produce's own timeout: far above the 1 s back-off, below the client socket's.
PRODUCE_TIMEOUT_MS = 20_000
FETCHER_LOGGER = "impl.broker.replica_fetcher"

UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


class Controller:
    """Plays the controller: one LeaderAndIsr at a time, to the broker the test names."""

    def __init__(self, brokers: dict[int, RunningBroker]) -> None:
        self.brokers = brokers
        self.endpoints = {broker_id: BrokerEndpoint(broker_id, "127.0.0.1", b.broker.port)
                          for broker_id, b in brokers.items()}

    def tell(self, target: int, *, leader: int, leader_epoch: int,
             tp: TopicPartition = TP) -> None:
        both = (FIRST, SECOND)
        broker = self.brokers[target]
        request = LeaderAndIsrRequest(
            9, 1, broker.broker.broker_epoch,
            (LeaderAndIsrPartitionState(tp.topic, tp.partition, 1, leader, leader_epoch, both,
                                        leader_epoch, both, is_new=True),),
            (self.endpoints[leader],),
        )
        response: ControllerResponse = broker.send(request)
        assert response.error_code == 0
        assert dict(response.partition_errors) in ({}, {(tp.topic, tp.partition): 0})


def produce_acks_all(leader: RunningBroker, value: bytes,
                     tp: TopicPartition = TP) -> tuple[int, int]:
    client = Client(leader.bootstrap)
    client.sock.settimeout(PRODUCE_TIMEOUT_MS / 1000 + 10)
    try:
        response = client.call(0, 8, {
            "transactional_id": None, "acks": -1, "timeout": PRODUCE_TIMEOUT_MS,
            "topic_data": [{"name": tp.topic, "partition_data": [
                {"index": tp.partition, "records": build_batch([value])}]}]})
    finally:
        client.close()
    partition = response.responses[0].partition_responses[0]
    return int(partition.error_code), int(partition.base_offset)


def log_end_offset(broker: RunningBroker, tp: TopicPartition = TP) -> int:
    def read() -> int:
        logs = broker.broker.logs
        assert logs is not None
        found = logs.get(tp)
        return -1 if found is None else found.log_end_offset

    return broker.call_sync(read)


def fetcher(broker: RunningBroker) -> ReplicaFetcher:
    replicas = broker.broker.replicas
    assert replicas is not None
    found: ReplicaFetcher = replicas.fetcher
    return found


class Refusals:
    """The follower-side log lines saying the leader refused this partition with a code."""

    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        self.caplog = caplog
        self.seen = 0

    def wait(self, code: int) -> None:
        """Wait until a refusal with ``code`` is logged after the previous one waited for."""
        needle = f"error {code}"

        def found() -> bool:
            records = list(self.caplog.records)
            for index in range(self.seen, len(records)):
                message = records[index].getMessage()
                if (records[index].name == FETCHER_LOGGER and str(TP) in message
                        and needle in message):
                    self.seen = index + 1
                    return True
            return False

        wait_for(found, f"the follower to be refused with {code}")


@pytest.mark.parametrize("policy", [TruncationPolicy.HIGH_WATERMARK,
                                    TruncationPolicy.LEADER_EPOCH])
def test_follower_told_before_its_leader_retries_and_joins(
    zk_chroot: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, policy: TruncationPolicy,
) -> None:
    caplog.set_level(logging.INFO, logger=FETCHER_LOGGER)
    refusals = Refusals(caplog)
    overrides = [f"replica.truncation.policy={policy.value.lower()}",
                 "replica.fetch.backoff.ms=1000"]
    brokers: dict[int, RunningBroker] = {}
    try:
        for broker_id in (FIRST, SECOND):
            brokers[broker_id] = RunningBroker(zk_chroot, tmp_path / f"b{broker_id}",
                                               broker_id=broker_id, dirs=1,
                                               overrides=overrides).start()
        first, second = brokers[FIRST], brokers[SECOND]
        controller = Controller(brokers)

        # 1. the follower hears of epoch 1 before the leader has the partition at all
        controller.tell(SECOND, leader=FIRST, leader_epoch=1)
        refusals.wait(UNKNOWN_TOPIC_OR_PARTITION)
        controller.tell(FIRST, leader=FIRST, leader_epoch=1)
        assert produce_acks_all(first, b"v0") == (0, 0)

        # 2. the follower hears of epoch 2 first: the leader's epoch is the older one
        controller.tell(SECOND, leader=FIRST, leader_epoch=2)
        refusals.wait(UNKNOWN_LEADER_EPOCH)
        controller.tell(FIRST, leader=FIRST, leader_epoch=2)
        assert produce_acks_all(first, b"v1") == (0, 1)

        # 3. the leader hears of epoch 3 first: the follower is fenced and, as in Kafka, keeps
        # the partition but waits for its own LeaderAndIsr
        controller.tell(FIRST, leader=FIRST, leader_epoch=3)
        refusals.wait(FENCED_LEADER_EPOCH)
        assert second.call_sync(lambda: fetcher(second).followed()) == {TP: FIRST}
        controller.tell(SECOND, leader=FIRST, leader_epoch=3)
        assert produce_acks_all(first, b"v2") == (0, 2)

        # 4. roles swap at epoch 4; the new follower hears of it while the new leader is still
        # a follower
        controller.tell(FIRST, leader=SECOND, leader_epoch=4)
        refusals.wait(NOT_LEADER_OR_FOLLOWER)
        controller.tell(SECOND, leader=SECOND, leader_epoch=4)
        assert produce_acks_all(second, b"v3") == (0, 3)
        wait_for(lambda: log_end_offset(first) == log_end_offset(second) == 4,
                 "both logs to hold the four records")
    finally:
        for broker in reversed(brokers.values()):
            broker.stop()


def test_a_partition_backing_off_does_not_hold_the_others_from_its_leader(
    zk_chroot: str, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=FETCHER_LOGGER)
    refusals = Refusals(caplog)
    #: longer than the produce timeout: a back-off that held the leader's whole fetch loop
    #: would time the produce out
    overrides = [f"replica.fetch.backoff.ms={3 * PRODUCE_TIMEOUT_MS}"]
    steady = TopicPartition("steady", 0)
    brokers: dict[int, RunningBroker] = {}
    try:
        for broker_id in (FIRST, SECOND):
            brokers[broker_id] = RunningBroker(zk_chroot, tmp_path / f"b{broker_id}",
                                               broker_id=broker_id, dirs=1,
                                               overrides=overrides).start()
        first = brokers[FIRST]
        controller = Controller(brokers)
        controller.tell(SECOND, leader=FIRST, leader_epoch=1)
        refusals.wait(UNKNOWN_TOPIC_OR_PARTITION)
        controller.tell(FIRST, leader=FIRST, leader_epoch=1)
        controller.tell(FIRST, leader=FIRST, leader_epoch=1, tp=steady)
        controller.tell(SECOND, leader=FIRST, leader_epoch=1, tp=steady)
        assert produce_acks_all(first, b"s0", steady) == (0, 0)
        assert log_end_offset(brokers[SECOND], steady) == 1
        # the refused partition is still waiting out its back-off, and still followed
        assert log_end_offset(brokers[SECOND]) == 0
        assert brokers[SECOND].call_sync(lambda: fetcher(brokers[SECOND]).followed()) == {
            TP: FIRST, steady: FIRST}
    finally:
        for broker in reversed(brokers.values()):
            broker.stop()
