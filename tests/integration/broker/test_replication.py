"""Two brokers, replication factor 2: followers fetch from the leader, acks=all waits for the
ISR, and after the leader stops the other broker leads with every acknowledged record."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from impl.broker.admin import AdminClient
from impl.storage import TopicPartition

from ._harness import RunningBroker

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

WAIT_SECONDS = 30.0


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _leo(broker: RunningBroker, tp: TopicPartition) -> int:
    def read() -> int:
        logs = broker.broker.logs
        assert logs is not None
        partition = logs.get(tp)
        return -1 if partition is None else partition.log_end_offset

    return broker.call_sync(read)


def test_replicated_topic_survives_leader_stop(zk_chroot: str, tmp_path: Path) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KafkaTopicPartition

    first = RunningBroker(zk_chroot, tmp_path / "b1", broker_id=1, run_controller=True).start()
    second = RunningBroker(zk_chroot, tmp_path / "b2", broker_id=2, run_controller=True).start()
    stopped: list[RunningBroker] = []
    try:
        bootstrap = f"{first.bootstrap},{second.bootstrap}"
        with AdminClient(bootstrap) as admin:
            wait_for(lambda: len(admin.metadata().brokers) == 2, "both brokers in metadata")
            result = admin.create_topics([("rep", {0: [1, 2]})], timeout_ms=20_000)
            assert result["rep"][0] == 0, result
        tp = TopicPartition("rep", 0)
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        values = [b"rep-%d" % index for index in range(200)]
        offsets = [producer.send("rep", value=v, partition=0).get(timeout=30).offset
                   for v in values]
        producer.close()
        assert offsets == list(range(200))
        wait_for(lambda: _leo(second, tp) == 200, "the follower to catch up")
        first.stop()
        stopped.append(first)

        def led_by_second() -> bool:
            with AdminClient(second.bootstrap) as admin:
                code, partitions = admin.metadata(["rep"]).topics["rep"]
                return code == 0 and partitions[0].leader == 2

        wait_for(led_by_second, "broker 2 to lead after broker 1 stopped")
        consumer = KafkaConsumer(bootstrap_servers=second.bootstrap, enable_auto_commit=False,
                                 consumer_timeout_ms=5000)
        consumer.assign([KafkaTopicPartition("rep", 0)])
        consumer.seek_to_beginning()
        received = []
        for message in consumer:
            received.append(message.value)
            if len(received) == len(values):
                break
        consumer.close()
        assert received == values
    finally:
        for broker in (second, first):
            if broker not in stopped:
                broker.stop()
