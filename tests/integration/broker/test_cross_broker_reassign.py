"""KIP-113 §2 across brokers: ``reassign --execute`` moves a partition from broker 1 to a
chosen log dir of broker 2. The tool starts the reassignment in ZooKeeper and retries
AlterReplicaLogDirs (REPLICA_NOT_AVAILABLE) until the controller creates the replica; the new
follower catches up, joins the ISR, and the controller completes the reassignment."""

from __future__ import annotations

import contextlib
import io
import json
import time
from pathlib import Path

import pytest

from impl.broker.admin import AdminClient, TopicPartitionReplica
from impl.cli import main as cli_main

from ._harness import RunningBroker

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def test_reassign_to_a_log_dir_of_another_broker(zk_chroot: str, tmp_path: Path) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    first = RunningBroker(zk_chroot, tmp_path / "b1", broker_id=1, run_controller=True).start()
    second = RunningBroker(zk_chroot, tmp_path / "b2", broker_id=2, run_controller=True).start()
    try:
        bootstrap = f"{first.bootstrap},{second.bootstrap}"
        with AdminClient(bootstrap) as admin:
            deadline = time.monotonic() + 30
            while len(admin.metadata().brokers) < 2:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert admin.create_topics([("xb", {0: [1]})], timeout_ms=20_000)["xb"][0] == 0
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        values = [b"xb-%d" % index for index in range(100)]
        for value in values:
            producer.send("xb", value=value, partition=0)
        producer.flush(timeout=30)
        producer.close()
        target = second.log_dirs[1]
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "xb", "partition": 0, "replicas": [2], "log_dirs": [target]}]}))
        common = ["--reassignment-json-file", str(plan), "--bootstrap-server", bootstrap,
                  "--zookeeper", zk_chroot]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = cli_main(["reassign", "--execute", *common, "--timeout", "30"])
        assert status == 0, out.getvalue()
        deadline = time.monotonic() + 60
        while True:
            with AdminClient(bootstrap) as admin:
                code, partitions = admin.metadata(["xb"]).topics["xb"]
                placed = admin.describe_replica_log_dirs([TopicPartitionReplica("xb", 0, 2)])
            info = placed[TopicPartitionReplica("xb", 0, 2)]
            if (code == 0 and partitions[0].replicas == (2,) and partitions[0].leader == 2
                    and info.current_log_dir == target):
                break
            assert time.monotonic() < deadline, (code, partitions, info)
            time.sleep(0.1)
        consumer = KafkaConsumer(bootstrap_servers=second.bootstrap, enable_auto_commit=False,
                                 consumer_timeout_ms=5000)
        consumer.assign([TopicPartition("xb", 0)])
        consumer.seek_to_beginning()
        received = []
        for message in consumer:
            received.append(message.value)
            if len(received) == len(values):
                break
        consumer.close()
        assert received == values
    finally:
        second.stop()
        first.stop()


def test_reassign_that_only_reorders_replicas_completes(zk_chroot: str, tmp_path: Path) -> None:
    """A plan that only changes the order (the preferred leader) is a reassignment: --execute
    starts it and --verify reports it completed once AR has the new order."""
    first = RunningBroker(zk_chroot, tmp_path / "b1", broker_id=1, run_controller=True).start()
    second = RunningBroker(zk_chroot, tmp_path / "b2", broker_id=2, run_controller=True).start()
    try:
        bootstrap = f"{first.bootstrap},{second.bootstrap}"
        with AdminClient(bootstrap) as admin:
            deadline = time.monotonic() + 30
            while len(admin.metadata().brokers) < 2:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert admin.create_topics([("ro", {0: [1, 2]})], timeout_ms=20_000)["ro"][0] == 0
            deadline = time.monotonic() + 60
            while True:  # both replicas in the ISR before the new order may be switched to
                code, partitions = admin.metadata(["ro"]).topics["ro"]
                if code == 0 and set(partitions[0].isr) == {1, 2}:
                    break
                assert time.monotonic() < deadline, partitions
                time.sleep(0.1)
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "ro", "partition": 0, "replicas": [2, 1]}]}))
        common = ["--reassignment-json-file", str(plan), "--bootstrap-server", bootstrap,
                  "--zookeeper", zk_chroot]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert cli_main(["reassign", "--execute", *common, "--timeout", "30"]) == 0
        assert "Started the cross-broker reassignment." in out.getvalue()
        deadline = time.monotonic() + 60
        while True:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                status = cli_main(["reassign", "--verify", *common])
            if status == 0:
                break
            assert "still in progress" in out.getvalue()
            assert time.monotonic() < deadline, out.getvalue()
            time.sleep(0.2)
        assert "Reassignment of partition ro-0 is completed." in out.getvalue()
        with AdminClient(bootstrap) as admin:
            assert admin.metadata(["ro"]).topics["ro"][1][0].replicas == (2, 1)
    finally:
        second.stop()
        first.stop()
