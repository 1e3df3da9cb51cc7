"""The Prometheus collector and counters of :mod:`impl.broker.metrics`, without a broker."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from impl.broker.metrics import BrokerMetrics, MoveProgress, batch_record_counts, request_name
from impl.storage.record_batch import build_batch


@dataclass
class View:
    """A BrokerView with settable values."""

    under_replicated: int = 0
    partitions: int = 0
    leaders: int = 0
    offline_dirs: int = 0
    active: bool = False
    offline_partitions: int = 0
    elections: int = 0
    progress: list[MoveProgress] = field(default_factory=list)
    rate: int = 0

    def under_replicated_partitions(self) -> int:
        return self.under_replicated

    def partition_count(self) -> int:
        return self.partitions

    def leader_count(self) -> int:
        return self.leaders

    def offline_log_directory_count(self) -> int:
        return self.offline_dirs

    def active_controller(self) -> bool:
        return self.active

    def offline_partitions_count(self) -> int:
        return self.offline_partitions

    def leader_elections(self) -> int:
        return self.elections

    def moves(self) -> Iterable[MoveProgress]:
        return self.progress

    def throttle_rate(self) -> int:
        return self.rate


def _samples(metrics: BrokerMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_gauges_are_read_at_scrape_time() -> None:
    view = View()
    metrics = BrokerMetrics(view)
    first = _samples(metrics)
    assert first[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 0
    assert first[("kafka_log_logmanager_offlinelogdirectorycount", ())] == 0
    assert first[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 0
    view.under_replicated, view.offline_dirs, view.offline_partitions = 3, 1, 2
    view.progress = [MoveProgress("t", 4, 1234, 7)]
    view.rate, view.elections = 1_000_000, 5
    view.partitions, view.leaders = 9, 4
    second = _samples(metrics)
    assert second[("kafka_server_replicamanager_partitioncount", ())] == 9
    assert second[("kafka_server_replicamanager_leadercount", ())] == 4
    assert second[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 3
    assert second[("kafka_log_logmanager_offlinelogdirectorycount", ())] == 1
    # OfflinePartitionsCount is the active controller's figure, as in Kafka
    assert second[("kafka_controller_kafkacontroller_offlinepartitionscount", ())] == 0
    view.active = True
    third = _samples(metrics)
    assert third[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 1
    assert third[("kafka_controller_kafkacontroller_offlinepartitionscount", ())] == 2
    assert third[("kafka_controller_controllerstats_leaderelectionrateandtimems_total", ())] == 5
    move = (("partition", "4"), ("topic", "t"))
    assert third[("kafka_log_logdirmove_bytescopied", move)] == 1234
    assert third[("kafka_log_logdirmove_offsetlag", move)] == 7
    assert third[("kafka_server_replicaalterlogdirs_throttlerate", ())] == 1_000_000


def test_counters_requests_bytes_and_isr_changes() -> None:
    metrics = BrokerMetrics()
    metrics.record_request(0, 0.003)
    metrics.record_request(0, 0.2)
    metrics.record_request(3, 0.001)
    payload = build_batch([b"a", b"bb", b"ccc"]) + build_batch([b"d"])
    metrics.record_produce("t", payload)
    metrics.record_isr_change((1, 2, 3), (1, 2))
    metrics.record_isr_change((1, 2), (1, 2, 3))
    metrics.record_isr_change((1, 2), (1, 3))  # one out, one in
    samples = _samples(metrics)
    produce = (("request", "Produce"),)
    assert samples[("kafka_network_requestmetrics_requests_total", produce)] == 2
    assert samples[("kafka_network_requestmetrics_requests_total",
                    (("request", "Metadata"),))] == 1
    assert samples[("kafka_network_requestmetrics_totaltimems_count", produce)] == 2
    assert samples[("kafka_network_requestmetrics_totaltimems_sum", produce)] == 203.0
    assert samples[("kafka_network_requestmetrics_totaltimems_bucket",
                    (("le", "5.0"), ("request", "Produce")))] == 1
    assert samples[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "t"),))] == 4
    assert samples[("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "t"),))] == len(
        payload)
    assert samples[("kafka_server_replicamanager_isrshrinks_total", ())] == 2
    assert samples[("kafka_server_replicamanager_isrexpands_total", ())] == 2


def test_fetch_bytes_per_topic_for_consumers_and_replication_bytes_for_followers() -> None:
    metrics = BrokerMetrics()
    metrics.record_fetch(False, {"a": 100, "b": 0})
    metrics.record_fetch(False, {"a": 20})
    metrics.record_fetch(True, {"a": 7, "b": 5})
    samples = _samples(metrics)
    assert samples[("kafka_server_brokertopicmetrics_bytesout_total", (("topic", "a"),))] == 120
    assert samples[("kafka_server_brokertopicmetrics_bytesout_total", (("topic", "b"),))] == 0
    assert samples[("kafka_server_brokertopicmetrics_replicationbytesout_total", ())] == 12


def test_record_counts_of_truncated_or_empty_payloads() -> None:
    batch = build_batch([b"x"] * 5)
    assert batch_record_counts(batch) == (len(batch), 5)
    assert batch_record_counts(batch + batch[:30]) == (len(batch) + 30, 5)
    assert batch_record_counts(None) == (0, 0)
    assert batch_record_counts(b"") == (0, 0)


def test_request_names_are_kafkas() -> None:
    assert [request_name(key) for key in (0, 1, 3, 4, 18, 60)] == [
        "Produce", "Fetch", "Metadata", "LeaderAndIsr", "ApiVersions", "DescribeCluster"]
    assert request_name(9999) == "ApiKey9999"
