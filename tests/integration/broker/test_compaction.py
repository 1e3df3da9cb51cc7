"""A compacted topic on a real broker with real clients: 10,000 updates over 100 keys, produced
by kafka-python while a KIP-113 move takes the partition to the other log dir and the cleaner
runs; once the cleaner reached the active segment, a consumer reads back exactly the latest value
of every key, each record at the offset it was acknowledged at, and far fewer than 10,000."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from impl.broker.admin import AdminClient, TopicPartitionReplica
from impl.storage.names import TopicPartition as StorageTp

from ._harness import RunningBroker

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

TOPIC = "compacted"
UPDATES = 10_000
KEYS = 100
WAIT_SECONDS = 120.0


def _wait(condition: object, what: str) -> None:
    assert callable(condition)
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_compaction_keeps_the_latest_value_per_key_during_produce_and_move(
    zk_chroot: str, tmp_path: Path
) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KafkaTp
    from kafka.admin import KafkaAdminClient, NewTopic

    broker = RunningBroker(zk_chroot, tmp_path, run_controller=True, overrides=[
        "log.cleaner.backoff.ms=100", "log.cleaner.threads=2",
    ]).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic(TOPIC, 1, 1, topic_configs={
            "cleanup.policy": "compact", "segment.bytes": "16384",
            "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "60000",
        })])
        admin.close()
        _wait(lambda: broker.broker.logs is not None
              and broker.broker.logs.get(StorageTp(TOPIC, 0)) is not None, "the partition")

        acknowledged: dict[int, tuple[bytes, bytes]] = {}
        errors: list[BaseException] = []
        produced = threading.Event()
        half = threading.Event()

        def produce() -> None:
            try:
                producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                                         linger_ms=5)
                futures = []
                for i in range(UPDATES):
                    key, value = b"key-%03d" % (i % KEYS), b"value-%05d" % i
                    futures.append((key, value, producer.send(TOPIC, key=key, value=value,
                                                              partition=0)))
                    if i == UPDATES // 2:
                        producer.flush(timeout=60)
                        half.set()
                producer.flush(timeout=60)
                for key, value, future in futures:
                    acknowledged[future.get(timeout=60).offset] = (key, value)
                producer.close()
            except BaseException as error:  # reported to the test thread
                errors.append(error)
            finally:
                half.set()
                produced.set()

        producer_thread = threading.Thread(target=produce, name="producer", daemon=True)
        producer_thread.start()
        assert half.wait(WAIT_SECONDS)
        # the KIP-113 move of the same partition, while the producer goes on
        with AdminClient(broker.bootstrap) as client:
            current = client.describe_replica_log_dirs([TopicPartitionReplica(TOPIC, 0, 1)])
            source = current[TopicPartitionReplica(TOPIC, 0, 1)].current_log_dir
            target = next(d for d in broker.log_dirs if d != source)
            codes = client.alter_replica_log_dirs({TopicPartitionReplica(TOPIC, 0, 1): target})
            assert set(codes.values()) == {0}
        producer_thread.join(WAIT_SECONDS)
        assert produced.is_set()
        assert errors == []
        assert sorted(acknowledged) == list(range(UPDATES))

        def moved() -> bool:
            with AdminClient(broker.bootstrap) as client:
                info = client.describe_replica_log_dirs([TopicPartitionReplica(TOPIC, 0, 1)])
            found = info[TopicPartitionReplica(TOPIC, 0, 1)]
            return found.current_log_dir == target and found.future_log_dir is None

        _wait(moved, "the move to finish")

        def cleaned_up_to_active() -> bool:
            def check() -> bool:
                cleaner, logs = broker.broker.cleaner, broker.broker.logs
                assert cleaner is not None
                assert logs is not None
                partition = logs.get(StorageTp(TOPIC, 0))
                assert partition is not None
                point = cleaner.points.get(StorageTp(TOPIC, 0), -1)
                return (partition.log_dir == target
                        and point == partition.log.active.base_offset > 0)
            return broker.call_sync(check)

        _wait(cleaned_up_to_active, "the cleaner to reach the active segment")

        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                 consumer_timeout_ms=5000)
        tp = KafkaTp(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        assert end == UPDATES
        read: list[tuple[int, bytes, bytes]] = []
        for message in consumer:
            read.append((message.offset, message.key, message.value))
            if message.offset == end - 1:
                break
        consumer.close()
        latest: dict[bytes, bytes] = {}
        for offset in sorted(acknowledged):
            key, value = acknowledged[offset]
            latest[key] = value
        assert {key: value for _, key, value in read} == latest
        assert all(acknowledged[offset] == (key, value) for offset, key, value in read)
        assert [offset for offset, _, _ in read] == sorted({o for o, _, _ in read})
        assert len(read) < UPDATES // 2, len(read)
        cleaner = broker.broker.cleaner
        assert cleaner is not None
        print(f"read back {len(read)} of {UPDATES} records; cleaner {cleaner.stats}")
    finally:
        broker.stop()
