"""A steady load for cluster tests: one producer and one consumer running throughout.

:class:`Load` produces numbered records round-robin over a topic's partitions with
confluent-kafka (acks=all, idempotent) and consumes them from offset 0 with a consumer assigned
to every partition, both driven by :meth:`Load.step`. Tests call :meth:`Load.wait_for` to keep
both clients going while they wait for a condition (with a bound), and :meth:`Load.finish` at
the end: every record sent was acknowledged, and every acknowledged record was consumed exactly
once, in the order produced, on the partition it was sent to.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from impl.broker.admin import AdminClient, AdminClientError

#: The bound of every wait.
WAIT_SECONDS = 40.0
#: Records produced per step, and the most sent but not yet acknowledged.
RECORDS_PER_STEP = 10
IN_FLIGHT_MAX = 1000
POLL_SECONDS = 0.02


def wait_until(condition: Callable[[], bool], what: str, poll: Callable[[], Any],
               seconds: float = WAIT_SECONDS) -> None:
    """Call ``poll`` until ``condition`` holds, within ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        poll()


def pause() -> None:
    """The pace of a wait without clients to drive."""
    time.sleep(0.05)


def stopped(pid: int) -> bool:
    """Whether the process is stopped by a signal (state T in ``/proc/<pid>/stat``)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def every_broker_sees_all(ports: Iterable[int], brokers: int) -> bool:
    """Whether each broker's metadata lists all ``brokers`` (CreateTopics checks the
    replication factor against the answering broker's own view)."""
    for port in ports:
        try:
            with AdminClient(f"127.0.0.1:{port}", timeout_seconds=5) as admin:
                if len(admin.metadata([]).brokers) < brokers:
                    return False
        except AdminClientError:
            return False
    return True


def value_of(partition: int, sequence: int, padding: int = 0) -> bytes:
    """The payload of a record: its partition and its number there, then ``padding`` bytes."""
    return b"p%02d-%07d" % (partition, sequence) + b"." * padding


class Load:
    """A producer and a consumer on ``topic`` (see the module docstring).

    Args:
        padding: bytes added to each record's value (to grow logs quickly).
        records_per_step: records produced per :meth:`step`.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, *, padding: int = 0,
                 records_per_step: int = RECORDS_PER_STEP) -> None:
        from confluent_kafka import Consumer, Producer, TopicPartition

        self.topic = topic
        self.partitions = partitions
        self.padding = padding
        self.records_per_step = records_per_step
        self.sent: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.acknowledged: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.received: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.errors: list[str] = []
        self._next = 0
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "delivery.timeout.ms": 120_000, "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 500,
        })
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": "load-check",
            "enable.auto.commit": False, "enable.partition.eof": False,
            "topic.metadata.refresh.interval.ms": 500, "auto.offset.reset": "error",
        })
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])

    @property
    def acknowledged_count(self) -> int:
        """Records acknowledged so far."""
        return sum(len(values) for values in self.acknowledged.values())

    @property
    def sent_count(self) -> int:
        """Records handed to the producer so far."""
        return sum(len(values) for values in self.sent.values())

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self.errors.append(str(error))
        else:
            partition, value = message.partition(), message.value()
            assert partition is not None
            assert value is not None
            self.acknowledged[partition].append(value)

    def step(self, produce: bool = True) -> None:
        """Produce a few records (unless too many await their acknowledgement), then serve
        both clients' callbacks and consume what is available."""
        if produce and self.sent_count - self.acknowledged_count < IN_FLIGHT_MAX:
            for _ in range(self.records_per_step):
                partition = self._next % self.partitions
                value = value_of(partition, len(self.sent[partition]), self.padding)
                self.producer.produce(self.topic, value=value, partition=partition,
                                      on_delivery=self._delivered)
                self.sent[partition].append(value)
                self._next += 1
        self.producer.poll(POLL_SECONDS)
        for message in self.consumer.consume(500, POLL_SECONDS):
            assert message.error() is None, message.error()
            received_partition, received = message.partition(), message.value()
            assert received_partition is not None
            assert received is not None
            self.received[received_partition].append(received)

    def wait_for(self, condition: Callable[[], bool], what: str,
                 seconds: float = WAIT_SECONDS) -> None:
        """Keep producing and consuming until ``condition`` holds (bounded)."""
        wait_until(condition, what, self.step, seconds)

    def more_acks(self, count: int, what: str) -> None:
        """Keep going until ``count`` more records are acknowledged."""
        target = self.acknowledged_count + count
        self.wait_for(lambda: self.acknowledged_count >= target, what)

    def finish(self) -> None:
        """Flush the producer, read everything back and check it (module docstring)."""
        remaining = self.producer.flush(WAIT_SECONDS)
        assert remaining == 0, f"{remaining} record(s) never acknowledged"
        assert self.errors == []
        wait_until(lambda: all(len(self.received[p]) >= len(self.acknowledged[p])
                               for p in range(self.partitions)),
                   "every acknowledged record to be consumed", lambda: self.step(False))
        for partition in range(self.partitions):
            sent, acked = self.sent[partition], self.acknowledged[partition]
            assert acked == sent, f"partition {partition}: acknowledgements out of order or lost"
            received = self.received[partition]
            assert received == acked, (
                f"partition {partition}: consumed {len(received)} records, "
                f"{len(set(received))} distinct, for {len(acked)} acknowledged"
            )

    def close(self) -> None:
        """Close both clients (without waiting for undelivered records)."""
        self.producer.flush(0)
        self.consumer.close()


@contextmanager
def running_load(bootstrap: str, topic: str, partitions: int, **options: int) -> Iterator[Load]:
    """A :class:`Load` (``options``: its keyword arguments), closed on the way out."""
    load = Load(bootstrap, topic, partitions, **options)
    try:
        yield load
    finally:
        load.close()
