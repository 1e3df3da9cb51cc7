"""KIP-113 end to end: DescribeLogDirs and AlterReplicaLogDirs from kafka-python, the project's
AdminClient and the command line; a replica moved between log dirs while a producer runs."""

from __future__ import annotations

import contextlib
import io
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from impl.broker.admin import AdminClient, TopicPartitionReplica
from impl.cli import main as cli_main

from ._harness import RunningBroker

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

WAIT_SECONDS = 30.0


def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT_SECONDS) -> None:
    """Poll ``condition`` until true, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _current_dir(broker: RunningBroker, topic: str) -> tuple[str | None, str | None]:
    with AdminClient(broker.bootstrap) as admin:
        info = admin.describe_replica_log_dirs([TopicPartitionReplica(topic, 0, 1)])
    replica = info[TopicPartitionReplica(topic, 0, 1)]
    return replica.current_log_dir, replica.future_log_dir


def _cli(arguments: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli_main(arguments)
    return status, out.getvalue()


def test_kafka_python_admin_describes_and_moves(broker: RunningBroker) -> None:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient
    from kafka.errors import LogDirNotFoundError, NoError, ReplicaNotAvailableError

    assert broker.become_leader("km")[0].error_code == 0
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for index in range(50):
        producer.send("km", value=b"r%d" % index, partition=0)
    producer.flush(timeout=30)
    producer.close()
    source, _ = _current_dir(broker, "km")
    assert source in broker.log_dirs
    target = next(d for d in broker.log_dirs if d != source)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        described = admin.describe_log_dirs()
        dirs = {entry["log_dir"]: entry for entry in described[0]["log_dirs"]}
        assert set(dirs) == set(broker.log_dirs)
        partitions = [p for topic in dirs[source]["topics"] for p in topic["partitions"]]
        assert partitions[0]["partition_index"] == 0
        assert partitions[0]["partition_size"] > 0
        result = admin.alter_replica_log_dirs({("km", 0, 1): target})
        assert list(result.values()) == [NoError]
        bad = admin.alter_replica_log_dirs({
            ("km", 0, 1): "/nonexistent",
        })
        assert list(bad.values()) == [LogDirNotFoundError]
        sneaky = admin.alter_replica_log_dirs({("km", 0, 1): source + "/../" + Path(target).name})
        assert list(sneaky.values()) == [LogDirNotFoundError]
        missing = admin.alter_replica_log_dirs({("absent", 0, 1): target})
        assert list(missing.values()) == [ReplicaNotAvailableError]
    finally:
        admin.close()
    wait_for(lambda: _current_dir(broker, "km") == (target, None), "the move to finish")


def test_move_while_producing_loses_and_duplicates_nothing(
    zk_chroot: str, tmp_path: Path
) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    broker = RunningBroker(
        zk_chroot, tmp_path, overrides=["intra.broker.throttled.rate=400000",
                                        "log.segment.bytes=65536"],
    ).start()
    try:
        assert broker.become_leader("mv")[0].error_code == 0
        acknowledged: list[bytes] = []
        failures: list[BaseException] = []
        stop = threading.Event()
        preload = [b"pre-%05d-" % index + b"x" * 900 for index in range(400)]

        def produce() -> None:
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                                     linger_ms=2)
            try:
                for value in preload:
                    producer.send("mv", value=value, partition=0)
                producer.flush(timeout=30)
                acknowledged.extend(preload)
                started.set()
                index = 0
                while not stop.is_set() and index < 20_000:
                    value = b"live-%06d" % index
                    producer.send("mv", value=value, partition=0).get(timeout=30)
                    acknowledged.append(value)
                    index += 1
            except BaseException as error:
                failures.append(error)
                started.set()
            finally:
                producer.close()

        started = threading.Event()
        thread = threading.Thread(target=produce)
        thread.start()
        assert started.wait(WAIT_SECONDS)
        source, _ = _current_dir(broker, "mv")
        target = next(d for d in broker.log_dirs if d != source)
        with AdminClient(broker.bootstrap) as admin:
            result = admin.alter_replica_log_dirs({TopicPartitionReplica("mv", 0, 1): target})
        assert list(result.values()) == [0]
        saw_temporary: list[bool] = []

        def moved() -> bool:
            current, future = _current_dir(broker, "mv")
            saw_temporary.append(future is not None)
            return (current, future) == (target, None)

        wait_for(moved, "the move under load to finish")
        stop.set()
        thread.join(WAIT_SECONDS)
        assert not failures, failures
        assert any(saw_temporary), "the move finished before it could be observed"
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                 consumer_timeout_ms=5000, max_partition_fetch_bytes=1 << 20)
        consumer.assign([TopicPartition("mv", 0)])
        consumer.seek_to_beginning()
        received = []
        for message in consumer:
            received.append(message.value)
            if len(received) >= len(acknowledged):
                break
        consumer.close()
        assert received == acknowledged
    finally:
        broker.stop()


def test_cli_log_dirs_and_reassign(broker: RunningBroker, tmp_path: Path) -> None:
    from kafka import KafkaProducer

    assert broker.become_leader("cl", partitions=2)[0].error_code == 0
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for index in range(30):
        producer.send("cl", value=b"v%d" % index, partition=index % 2)
    producer.flush(timeout=30)
    producer.close()
    status, out = _cli(["log-dirs", "describe", "--bootstrap-server", broker.bootstrap,
                        "--topics", "cl"])
    assert status == 0
    document = json.loads(out)
    assert document["version"] == 1
    [entry] = document["brokers"]
    assert entry["broker"] == 1
    placed = {
        (p["topic"], p["partition"]): d["path"]
        for d in entry["log_dirs"] for p in d["partitions"] if not p["is_temporary"]
    }
    assert set(placed) == {("cl", 0), ("cl", 1)}
    assert all(d["is_live"] for d in entry["log_dirs"])
    targets = {key: next(d for d in broker.log_dirs if d != path) for key, path in placed.items()}
    plan = {"version": 1, "partitions": [
        {"topic": "cl", "partition": 0, "replicas": [1], "log_dirs": [targets[("cl", 0)]]},
        {"topic": "cl", "partition": 1, "replicas": [1], "log_dirs": ["any"]},
    ]}
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    common = ["--reassignment-json-file", str(plan_file), "--bootstrap-server", broker.bootstrap]
    status, out = _cli(["reassign", "--execute", *common])
    assert status == 0, out

    def verified() -> bool:
        code, text = _cli(["reassign", "--verify", *common])
        return code == 0 and "completed successfully" in text

    wait_for(verified, "reassign --verify to report completion")
    bad_file = tmp_path / "bad.json"
    bad_file.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "cl", "partition": 0, "replicas": [1], "log_dirs": ["relative/dir"]}]}))
    assert cli_main(["reassign", "--execute", "--reassignment-json-file", str(bad_file),
                     "--bootstrap-server", broker.bootstrap]) == 1


def test_throttle_set_live_by_reassign_and_removed_by_verify(
    broker: RunningBroker, zk_chroot: str, tmp_path: Path
) -> None:
    from kafka import KafkaProducer

    from impl.storage import UNLIMITED_RATE

    assert broker.become_leader("th")[0].error_code == 0
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for index in range(20):
        producer.send("th", value=b"t%d" % index, partition=0)
    producer.flush(timeout=30)
    producer.close()
    source, _ = _current_dir(broker, "th")
    target = next(d for d in broker.log_dirs if d != source)
    plan = tmp_path / "throttle.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "th", "partition": 0, "replicas": [1], "log_dirs": [target]}]}))

    def rate() -> int:
        logs = broker.broker.logs
        assert logs is not None
        return logs.throttle_rate

    assert broker.call_sync(rate) == UNLIMITED_RATE
    common = ["--reassignment-json-file", str(plan), "--bootstrap-server", broker.bootstrap,
              "--zookeeper", zk_chroot]
    status, _ = _cli(["reassign", "--execute", *common,
                      "--replica-alter-log-dirs-throttle", "5000000"])
    assert status == 0
    wait_for(lambda: broker.call_sync(rate) == 5_000_000, "the throttle to apply live")

    def verified() -> bool:
        code, text = _cli(["reassign", "--verify", *common])
        return code == 0 and "Throttle was removed." in text

    wait_for(verified, "the move to complete")
    wait_for(lambda: broker.call_sync(rate) == UNLIMITED_RATE, "the throttle to be removed")
    misuse = ["reassign", "--verify", "--replica-alter-log-dirs-throttle", "5", *common]
    assert cli_main(misuse) == 1


def test_a_dir_is_remembered_only_for_partitions_the_cluster_has(broker: RunningBroker) -> None:
    """Issue 15: AlterReplicaLogDirs naming partitions no topic has is answered
    REPLICA_NOT_AVAILABLE without remembering anything (before, each name was remembered, so
    requests naming millions of made-up partitions grew the broker by about 500 bytes each and
    every mover wake-up sorted them all); a partition of a topic that exists is still
    remembered for its creation, as Kafka does."""
    from impl.storage import MoveState, TopicPartition

    ghosts = {TopicPartitionReplica("ghost", index, 1): broker.log_dirs[1]
              for index in range(5_000)}
    with AdminClient(broker.bootstrap) as admin:
        answers = admin.alter_replica_log_dirs(ghosts)
    assert set(answers.values()) == {9}
    logs = broker.broker.logs
    assert logs is not None
    states = broker.call_sync(lambda: {
        logs.move_state(TopicPartition("ghost", index)).state for index in range(5_000)})
    assert states == {MoveState.NONE}


def test_a_large_describe_log_dirs_is_encoded_off_the_event_loop(
        broker: RunningBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    """A DescribeLogDirs answer of more than 2,000 partitions is built and encoded in a worker
    thread, as Metadata's and ListOffsets' are (the structured wire fuzz's seed 20261129 asked
    for every one of 32,000-odd partitions, and the loop stopped for over a second)."""
    from impl.broker import _handlers
    from impl.broker.broker import _StorageLogDirs

    count = _handlers.ENCODE_OFF_LOOP_ENTRIES + 1
    path = str(broker.config.log_dirs[0])

    async def many(self: object, topics: object) -> list[dict[str, object]]:
        return [{"error_code": 0, "log_dir": path, "total_bytes": -1, "usable_bytes": -1,
                 "topics": [{"name": "wide", "partitions": [
                     {"partition_index": index, "partition_size": index, "offset_lag": 0,
                      "is_future_key": False} for index in range(count)]}]}]

    answered_on: list[str] = []
    answer = _handlers.RequestHandlers._answer

    def spy(self: _handlers.RequestHandlers, request: object, data: dict[str, object]) -> bytes:
        if "results" in data:
            answered_on.append(threading.current_thread().name)
        return answer(self, request, data)  # type: ignore[arg-type]

    monkeypatch.setattr(_StorageLogDirs, "describe_log_dirs", many)
    monkeypatch.setattr(_handlers.RequestHandlers, "_answer", spy)
    with AdminClient(broker.bootstrap) as admin:
        described = admin.describe_log_dirs([broker.config.broker_id])
    replicas = described[broker.config.broker_id][path].replicas
    assert len(replicas) == count
    assert answered_on
    assert "broker" not in answered_on  # (the loop's thread is "broker")
