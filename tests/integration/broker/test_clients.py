"""Real clients end to end: every acknowledged record is read back once, in order, byte-exact.

kcat, kafka-python (default settings: idempotence on), confluent-kafka and aiokafka each produce
with acks=all and consume with manual assignment.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import subprocess

import pytest

from ._harness import RunningBroker

pytestmark = [
    pytest.mark.integration,
    # kafka-python 3.0.12 reads its schemas with importlib.resources.read_text (deprecated)
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

RECORDS = 300


def _values(seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(rng.randrange(1, 2000)) for _ in range(RECORDS)]


def test_kafka_python(broker: RunningBroker) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    assert broker.become_leader("kp")[0].error_code == 0
    values = _values(1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    futures = [producer.send("kp", value=value, partition=0) for value in values]
    producer.flush(timeout=30)
    offsets = [future.get(timeout=30).offset for future in futures]
    producer.close()
    assert offsets == list(range(RECORDS))
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=5000)
    consumer.assign([TopicPartition("kp", 0)])
    consumer.seek_to_beginning()
    received = []
    for message in consumer:
        received.append((message.offset, message.value))
        if len(received) == RECORDS:
            break
    consumer.close()
    assert received == list(enumerate(values))


def test_confluent_kafka(broker: RunningBroker) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    assert broker.become_leader("ck")[0].error_code == 0
    values = _values(2)
    acknowledged: list[tuple[int, bytes]] = []
    errors: list[str] = []

    def delivered(error: object, message: object) -> None:
        if error is not None:
            errors.append(str(error))
        else:
            acknowledged.append((message.offset(), message.value()))  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                         "enable.idempotence": True})
    for value in values:
        producer.produce("ck", value=value, partition=0, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert errors == []
    assert sorted(acknowledged) == list(enumerate(values))
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("ck", 0, 0)])
    received: list[tuple[int | None, bytes | None]] = []
    for _ in range(200):
        if len(received) >= RECORDS:
            break
        for message in consumer.consume(num_messages=1000, timeout=0.5):
            assert message.error() is None, message.error()
            received.append((message.offset(), message.value()))
    consumer.close()
    assert received == list(enumerate(values))


def test_aiokafka(broker: RunningBroker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    assert broker.become_leader("ak")[0].error_code == 0
    values = _values(3)

    async def main() -> list[tuple[int, bytes]]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        await producer.start()
        try:
            offsets = []
            for value in values:
                metadata = await producer.send_and_wait("ak", value, partition=0)
                offsets.append(metadata.offset)
        finally:
            await producer.stop()
        assert offsets == list(range(RECORDS))
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            partition = TopicPartition("ak", 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            received: list[tuple[int, bytes]] = []
            while len(received) < RECORDS:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 10)
                for messages in batch.values():
                    received.extend((m.offset, m.value) for m in messages)
        finally:
            await consumer.stop()
        return received

    assert asyncio.run(main()) == list(enumerate(values))


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat(broker: RunningBroker) -> None:
    assert broker.become_leader("kc")[0].error_code == 0
    lines = [f"line-{index}-{'x' * (index % 50)}" for index in range(RECORDS)]
    produced = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-P", "-t", "kc", "-p", "0", "-X", "acks=all"],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60, check=False,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-C", "-t", "kc", "-p", "0", "-o", "beginning", "-e",
         "-f", "%o %s\\n"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == [f"{i} {line}" for i, line in enumerate(lines)]
