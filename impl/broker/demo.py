"""The broker part of ``logproof demo``: a one-broker cluster, real clients, a live log-dir move.

:func:`run_demo` starts an embedded ZooKeeper and one broker with two log dirs (the broker
registers, wins the controller election and leads the topic it creates), produces with
confluent-kafka (acks=all) and reads everything back with kafka-python, then moves the partition
to the other log dir while a kafka-python producer keeps producing, printing the move's progress
from DescribeLogDirs, and finally checks that every acknowledged record is in the log exactly
once, in order. Every stage prints what it did; the first failure stops the demo. The last stage
(:mod:`impl.security.demo`) shows a client denied and a client allowed on a SASL_SSL listener
with ACLs.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import trio

from impl.controller import EmbeddedZooKeeper, ZooKeeperUnavailableError
from impl.security import demo as security_demo

from .admin import AdminClient, AdminClientError, TopicPartitionReplica
from .broker import Broker
from .config import load_config

TOPIC = "demo"
START_SECONDS = 30.0
MOVE_SECONDS = 60.0
PRELOAD_RECORDS = 4000
THROTTLE_BYTES_PER_SECOND = 1_000_000


class DemoError(Exception):
    """A demo stage failed (the message says which and why)."""


def _say(stage: str, message: str) -> None:
    print(f"[{stage}] {message}", flush=True)


class _BrokerThread:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.token: trio.lowlevel.TrioToken | None = None
        self.started = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name="broker", daemon=True)

    def _main(self) -> None:
        async def run() -> None:
            self.token = trio.lowlevel.current_trio_token()
            async with trio.open_nursery() as nursery:
                await nursery.start(self.broker.serve)
                self.started.set()

        try:
            trio.run(run)
        except BaseException as error:  # reported to the demo thread
            self.error = error
        finally:
            self.started.set()

    def start(self) -> None:
        self.thread.start()
        if not self.started.wait(START_SECONDS) or self.error is not None:
            raise DemoError(f"the broker did not start: {self.error!r}")

    def stop(self) -> None:
        if self.token is not None and self.thread.is_alive():
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(self.broker.request_stop, trio_token=self.token)
        self.thread.join(START_SECONDS)


def _produce_and_consume(bootstrap: str) -> None:
    # the real clients are development dependencies: imported only when the demo runs
    from confluent_kafka import Producer  # noqa: PLC0415
    from kafka import KafkaConsumer  # noqa: PLC0415
    from kafka import TopicPartition as KafkaTopicPartition  # noqa: PLC0415

    values = [b"hello-%05d" % index for index in range(1000)]
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True})
    for value in values:
        producer.produce(TOPIC, value=value, partition=0,
                         on_delivery=lambda e, _m: errors.append(str(e)) if e else None)
    if producer.flush(30) != 0 or errors:
        raise DemoError(f"confluent-kafka could not produce: {errors[:1]}")
    _say("produce", f"confluent-kafka produced {len(values)} records with acks=all")
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=5000)
    consumer.assign([KafkaTopicPartition(TOPIC, 0)])
    consumer.seek_to_beginning()
    received = []
    for message in consumer:
        received.append(message.value)
        if len(received) == len(values):
            break
    consumer.close()
    if received != values:
        raise DemoError(f"kafka-python read {len(received)} records, not the {len(values)} sent")
    _say("consume", f"kafka-python read all {len(received)} records back, in order")


def _current(admin: AdminClient) -> tuple[str | None, str | None, int]:
    replica = TopicPartitionReplica(TOPIC, 0, 1)
    info = admin.describe_replica_log_dirs([replica])[replica]
    return info.current_log_dir, info.future_log_dir, info.future_offset_lag


def _move_while_producing(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer  # noqa: PLC0415
    from kafka import TopicPartition as KafkaTopicPartition  # noqa: PLC0415

    acknowledged: list[bytes] = []
    failures: list[BaseException] = []
    stop = threading.Event()
    preloaded = threading.Event()

    def produce() -> None:
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2)
        try:
            batch = [b"bulk-%05d-" % index + b"x" * 1000 for index in range(PRELOAD_RECORDS)]
            for value in batch:
                producer.send(TOPIC, value=value, partition=0)
            producer.flush(timeout=30)
            acknowledged.extend(batch)
            preloaded.set()
            index = 0
            while not stop.is_set():
                value = b"live-%06d" % index
                producer.send(TOPIC, value=value, partition=0).get(timeout=30)
                acknowledged.append(value)
                index += 1
        except BaseException as error:
            failures.append(error)
        finally:
            preloaded.set()
            producer.close()

    thread = threading.Thread(target=produce, name="producer")
    thread.start()
    try:
        if not preloaded.wait(START_SECONDS) or failures:
            raise DemoError(f"the producer failed: {failures[:1]}")
        with AdminClient(bootstrap) as admin:
            described = admin.describe_log_dirs([1], topics=[TOPIC])[1]
            _say("log-dirs", "DescribeLogDirs: " + json.dumps({
                path: [f"{t}-{p} {r.size} bytes" for (t, p), r in sorted(info.replicas.items())]
                for path, info in sorted(described.items())
            }))
            source, _, _ = _current(admin)
            target = next(path for path in sorted(described) if path != source)
            result = admin.alter_replica_log_dirs({TopicPartitionReplica(TOPIC, 0, 1): target})
            code = next(iter(result.values()))
            if code != 0:
                raise DemoError(f"AlterReplicaLogDirs answered error {code}")
            _say("move", f"moving {TOPIC}-0 from {source} to {target} while producing "
                         f"(throttled to {THROTTLE_BYTES_PER_SECOND} bytes/s)")
            deadline = time.monotonic() + MOVE_SECONDS
            while True:
                current, future, lag = _current(admin)
                if current == target and future is None:
                    break
                if future is not None:
                    _say("move", f"copying into {future}: {lag} offsets behind")
                if time.monotonic() > deadline or failures:
                    raise DemoError(f"the move did not finish: {failures[:1]}")
                time.sleep(0.25)
            _say("move", f"{TOPIC}-0 now lives in {current}")
    finally:
        stop.set()
        thread.join(START_SECONDS)
    if failures:
        raise DemoError(f"the producer failed: {failures[0]!r}")
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=5000)
    consumer.assign([KafkaTopicPartition(TOPIC, 0)])
    consumer.seek_to_beginning()
    received: list[bytes] = []
    for message in consumer:
        received.append(message.value)
    consumer.close()
    expected = [b"hello-%05d" % index for index in range(1000)] + acknowledged
    if received != expected:
        raise DemoError(f"read {len(received)} records after the move, expected {len(expected)}")
    _say("verify", f"all {len(acknowledged)} records acknowledged during the move are in the log "
                   "exactly once, in order")


def run_demo() -> int:
    """Run the broker demo; returns 0 on success, 1 on the first failed stage."""
    warnings.filterwarnings("ignore", category=DeprecationWarning, module="kafka")
    with tempfile.TemporaryDirectory(prefix="logproof-demo-") as temporary:
        root = Path(temporary)
        dirs = [root / "disk-a", root / "disk-b"]
        for path in dirs:
            path.mkdir()
        try:
            with EmbeddedZooKeeper() as zookeeper:
                secure, tls = security_demo.secure_settings(root)
                config = load_config(
                    "broker.id=1\n"
                    "listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0\n"
                    f"log.dirs={','.join(str(d) for d in dirs)}\n"
                    f"zookeeper.connect={zookeeper.connect_string}\n"
                    f"intra.broker.throttled.rate={THROTTLE_BYTES_PER_SECOND}\n" + secure
                )
                broker = Broker(config)
                runner = _BrokerThread(broker)
                runner.start()
                try:
                    status = _stages(broker)
                    if status == 0:
                        status = _security_stage(broker, zookeeper.connect_string, tls)
                    return status
                finally:
                    runner.stop()
        except ZooKeeperUnavailableError as error:
            _say("broker", f"FAILED: {error}")
            return 1


def _stages(broker: Broker) -> int:
    bootstrap = broker.bootstrap
    _say("broker", f"broker 1 registered in ZooKeeper (epoch {broker.broker_epoch}), "
                   f"serving on {bootstrap}")
    try:
        with AdminClient(bootstrap) as admin:
            code, message = admin.create_topics([(TOPIC, 1, 1)], timeout_ms=20_000)[TOPIC]
            if code != 0:
                raise DemoError(f"CreateTopics failed: {code} {message}")
            metadata: Any = admin.metadata([TOPIC])
        leader = metadata.topics[TOPIC][1][0].leader
        _say("topic", f"created {TOPIC!r}; the controller (broker {metadata.controller_id}) "
                      f"made broker {leader} its leader")
        _produce_and_consume(bootstrap)
        _move_while_producing(bootstrap)
    except (DemoError, AdminClientError) as error:
        _say("broker", f"FAILED: {error}")
        return 1
    return 0


def _security_stage(broker: Broker, zookeeper: str, tls: security_demo.DemoTls) -> int:
    assert broker.server is not None
    sasl_bootstrap = f"127.0.0.1:{broker.server.ports[1]}"
    try:
        security_demo.run_stage(zookeeper, sasl_bootstrap, TOPIC, tls, _say)
    except (security_demo.SecurityDemoError, AdminClientError) as error:
        _say("security", f"FAILED: {error}")
        return 1
    return 0
