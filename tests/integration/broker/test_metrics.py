"""The Prometheus endpoint (``metrics.port``): a real client's traffic moves Kafka's counters and
the gauges report the broker's state, scraped over HTTP as Prometheus would."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from impl.storage import TopicPartition

from ._harness import RunningBroker
from .test_dir_failure import FailingDirDisk
from .test_protocol_errors import Client

pytestmark = pytest.mark.integration

RECORDS = 20


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``/metrics`` as {(sample name, sorted labels): value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_metrics_endpoint_counts_a_real_clients_traffic(zk_chroot: str, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as KafkaPartition

    port = _free_port()
    disk = FailingDirDisk()
    broker = RunningBroker(zk_chroot, tmp_path, disk=disk,
                           overrides=[f"metrics.port={port}"]).start()
    try:
        assert broker.broker.metrics_port == port
        before = _scrape(port)
        assert before[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 0
        assert before[("kafka_log_logmanager_offlinelogdirectorycount", ())] == 0
        assert before[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 0
        assert before[("kafka_server_replicamanager_partitioncount", ())] == 0
        assert all(response.error_code == 0
                   for response in broker.become_leader("mt", partitions=2))
        led = _scrape(port)
        assert led[("kafka_server_replicamanager_partitioncount", ())] == 2
        assert led[("kafka_server_replicamanager_leadercount", ())] == 2
        errors: list[str] = []
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        for index in range(RECORDS):
            producer.produce("mt", value=b"v%04d" % index, partition=0,
                             on_delivery=lambda error, _: errors.append(str(error)) if error
                             else None)
        assert producer.flush(30) == 0
        assert errors == []
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                             "enable.auto.commit": False})
        consumer.assign([KafkaPartition("mt", 0, 0)])
        received = 0
        for _ in range(200):
            if received >= RECORDS:
                break
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                assert message.error() is None, message.error()
                received += 1
        consumer.close()
        assert received == RECORDS

        after = _scrape(port)
        topic = (("topic", "mt"),)
        assert ("kafka_server_brokertopicmetrics_bytesout_total", topic) not in before
        assert after[("kafka_server_brokertopicmetrics_messagesin_total", topic)] == RECORDS
        bytes_in = after[("kafka_server_brokertopicmetrics_bytesin_total", topic)]
        assert bytes_in > RECORDS * 5
        # the consumer read every record produced, once (its own topic's counter, no follower)
        assert after[("kafka_server_brokertopicmetrics_bytesout_total", topic)] >= bytes_in
        assert after[("kafka_server_brokertopicmetrics_replicationbytesout_total", ())] == 0
        produce = (("request", "Produce"),)
        assert after[("kafka_network_requestmetrics_requests_total", produce)] >= 1
        assert after[("kafka_network_requestmetrics_totaltimems_count", produce)] == after[
            ("kafka_network_requestmetrics_requests_total", produce)]
        assert after[("kafka_network_requestmetrics_requests_total",
                      (("request", "Fetch"),))] >= 1
        assert after[("kafka_network_requestmetrics_requests_total",
                      (("request", "Metadata"),))] >= 1
        assert after[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 0

        def dir_of(partition: int) -> str:
            logs = broker.broker.logs
            assert logs is not None
            hosted = logs.get(TopicPartition("mt", partition))
            assert hosted is not None
            return hosted.log_dir

        bad_dir = broker.call_sync(lambda: dir_of(1))
        disk.failed_dir = bad_dir
        client = Client(broker.bootstrap)
        from impl.storage.record_batch import build_batch
        response = client.call(0, 8, {
            "transactional_id": None, "acks": -1, "timeout": 5000,
            "topic_data": [{"name": "mt", "partition_data": [
                {"index": 1, "records": build_batch([b"x"])}]}]})
        client.close()
        assert response.responses[0].partition_responses[0].error_code == 56
        assert _scrape(port)[("kafka_log_logmanager_offlinelogdirectorycount", ())] == 1
    finally:
        disk.failed_dir = None
        broker.stop()
    with pytest.raises(urllib.error.URLError):  # the endpoint stops with the broker
        _scrape(port)
