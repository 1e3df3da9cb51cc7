"""ListOffsets by timestamp answers the first *record* at or after the timestamp, as Kafka does,
even inside one batch: ten records in one batch, asked for the sixth one's timestamp, every
client gets offset 5 (the batch's base offset 0 was the old, wrong answer)."""

from __future__ import annotations

import asyncio

import pytest

from impl.storage import record_batch as rb
from impl.storage.names import TopicPartition as StorageTp

from ._harness import RunningBroker

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

BASE_MS = 1_700_000_000_000
COUNT = 10


def _batches_in_log(broker: RunningBroker, topic: str) -> int:
    def count() -> int:
        logs = broker.broker.logs
        assert logs is not None
        partition = logs.get(StorageTp(topic, 0))
        assert partition is not None
        log = partition.log
        total = 0
        for segment in log.segments:
            raw = log.disk.read(segment.log_path, 0, segment.size)
            total += sum(1 for _ in rb.iter_batches(raw))
        return total

    return broker.call_sync(count)


def test_kafka_python_offsets_for_times_inside_one_batch(broker: RunningBroker) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    assert broker.become_leader("tk")[0].error_code == 0
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=2000)
    for i in range(COUNT):
        producer.send("tk", value=b"v%d" % i, partition=0, timestamp_ms=BASE_MS + i)
    producer.flush(timeout=30)
    producer.close()
    assert _batches_in_log(broker, "tk") == 1
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    tp = TopicPartition("tk", 0)
    answers = consumer.offsets_for_times({tp: BASE_MS + 5})
    later = consumer.offsets_for_times({tp: BASE_MS + COUNT})
    consumer.close()
    assert (answers[tp].offset, answers[tp].timestamp) == (5, BASE_MS + 5)
    assert later[tp] is None


def test_confluent_kafka_offsets_for_times_inside_one_batch(broker: RunningBroker) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    assert broker.become_leader("tc")[0].error_code == 0
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                         "linger.ms": 2000})
    for i in range(COUNT):
        producer.produce("tc", value=b"v%d" % i, partition=0, timestamp=BASE_MS + i)
    assert producer.flush(30) == 0
    assert _batches_in_log(broker, "tc") == 1
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    (found,) = consumer.offsets_for_times([TopicPartition("tc", 0, BASE_MS + 5)], timeout=20)
    (first,) = consumer.offsets_for_times([TopicPartition("tc", 0, BASE_MS)], timeout=20)
    consumer.close()
    assert found.error is None
    assert found.offset == 5
    assert first.offset == 0


def test_aiokafka_offsets_for_times_inside_one_batch(broker: RunningBroker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    assert broker.become_leader("ta")[0].error_code == 0

    async def main() -> tuple[int, int]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        await producer.start()
        try:
            batch = producer.create_batch()
            for i in range(COUNT):
                assert batch.append(key=None, value=b"v%d" % i, timestamp=BASE_MS + i) is not None
            await (await producer.send_batch(batch, "ta", partition=0))
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition("ta", 0)
            answers = await asyncio.wait_for(consumer.offsets_for_times({tp: BASE_MS + 7}), 20)
        finally:
            await consumer.stop()
        return answers[tp].offset, answers[tp].timestamp

    assert asyncio.run(main()) == (7, BASE_MS + 7)
    assert _batches_in_log(broker, "ta") == 1


def test_confluent_kafka_admin_lists_the_max_timestamp_record(broker: RunningBroker) -> None:
    """ListOffsets v7 (KIP-734) from librdkafka's AdminClient: max timestamp answers the first
    record stamped with the largest timestamp (not the batch's base, not the last of equals),
    earliest and latest at the same version."""
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.admin._listoffsets import OffsetSpec

    assert broker.become_leader("tm")[0].error_code == 0
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                         "linger.ms": 2000})
    # one batch (offsets 0-2), then another (3-4) with a record as new as offset 1's
    for stamp in (3, 9, 1):
        producer.produce("tm", value=b"v", partition=0, timestamp=BASE_MS + stamp)
    assert producer.flush(30) == 0
    for stamp in (9, 2):
        producer.produce("tm", value=b"w", partition=0, timestamp=BASE_MS + stamp)
    assert producer.flush(30) == 0
    assert _batches_in_log(broker, "tm") == 2
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition("tm", 0)
    answers = {}
    specs = (("max", OffsetSpec.max_timestamp()),  # type: ignore[no-untyped-call]
             ("earliest", OffsetSpec.earliest()),  # type: ignore[no-untyped-call]
             ("latest", OffsetSpec.latest()))  # type: ignore[no-untyped-call]
    for name, spec in specs:
        (future,) = admin.list_offsets({tp: spec}, request_timeout=20).values()
        info = future.result(timeout=30)
        answers[name] = (info.offset, info.timestamp)
    assert answers["max"] == (1, BASE_MS + 9)
    assert answers["earliest"][0] == 0
    assert answers["latest"][0] == 5
