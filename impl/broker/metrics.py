"""A broker's Prometheus endpoint (``metrics.port``) with Kafka's standard broker metrics.

The names follow what the Prometheus JMX exporter makes of Kafka's MBeans, so dashboards and
alerts written for Apache Kafka read this broker unchanged:

- counters incremented by the shells: ``kafka_server_brokertopicmetrics_{bytesin,messagesin,
  bytesout}_total{topic}`` (record bytes and records of Produce requests; record bytes of the
  Fetch responses sent to consumers, as Kafka's BytesOutPerSec, while the bytes followers fetch
  are ``kafka_server_brokertopicmetrics_replicationbytesout_total``, Kafka's
  ReplicationBytesOutPerSec), ``kafka_network_requestmetrics_requests_total{request}`` and the
  ``kafka_network_requestmetrics_totaltimems{request}`` histogram (milliseconds),
  ``kafka_server_replicamanager_isr{shrinks,expands}_total``;
- gauges computed at scrape time by :class:`BrokerCollector` from public state of the broker:
  UnderReplicatedPartitions, PartitionCount, LeaderCount, OfflinePartitionsCount and
  ActiveControllerCount (reported by the active controller only, as in Kafka),
  OfflineLogDirectoryCount, the controller's LeaderElectionRateAndTimeMs count, and per
  partition the progress of a log-dir move
  (``kafka_log_logdirmove_bytescopied``, ``..._offsetlag``) with the broker's intra-broker
  throttle rate.

Each broker has its own :class:`prometheus_client.CollectorRegistry`: several brokers in one
process (tests, the demo cluster) do not share counters. :class:`BrokerStateView` reads any
object with a broker's ``logs``, ``controller`` and ``replicas`` (:class:`BrokerParts`), so a
benchmark that drives a ``LogManager`` or a controller alone serves the same gauges and reads
its figures from the same endpoint.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol
from wsgiref.simple_server import WSGIServer

import prometheus_client
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from impl.storage.replica_move import MoveState

from . import api_versions
from .server import DeferredResponse, PiecesResponse

if TYPE_CHECKING:
    from impl.controller import ControllerService
    from impl.storage import LogManager

    from ._codec import DecodedRequest
    from .replica_manager import ReplicaManager
    from .server import ConnectionInfo, Handler, Response

#: latency buckets in milliseconds (Kafka reports RequestMetrics TotalTimeMs in ms)
LATENCY_BUCKETS_MS: Final = (0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0,
                             1000.0, 2500.0, 5000.0, 10_000.0, 30_000.0)


#: api key → Kafka's request name (``ApiKeys``), the ``request`` label of RequestMetrics
REQUEST_NAMES: Final[dict[int, str]] = {
    **dict(enumerate((
        "Produce", "Fetch", "ListOffsets", "Metadata", "LeaderAndIsr", "StopReplica",
        "UpdateMetadata", "ControlledShutdown", "OffsetCommit", "OffsetFetch", "FindCoordinator",
        "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup", "DescribeGroups", "ListGroups",
        "SaslHandshake", "ApiVersions", "CreateTopics", "DeleteTopics", "DeleteRecords",
        "InitProducerId", "OffsetForLeaderEpoch", "AddPartitionsToTxn", "AddOffsetsToTxn",
        "EndTxn", "WriteTxnMarkers", "TxnOffsetCommit", "DescribeAcls", "CreateAcls",
        "DeleteAcls", "DescribeConfigs", "AlterConfigs", "AlterReplicaLogDirs",
        "DescribeLogDirs", "SaslAuthenticate", "CreatePartitions", "CreateDelegationToken",
        "RenewDelegationToken", "ExpireDelegationToken", "DescribeDelegationToken",
        "DeleteGroups", "ElectLeaders", "IncrementalAlterConfigs",
        "AlterPartitionReassignments", "ListPartitionReassignments", "OffsetDelete",
    ))),
    60: "DescribeCluster",
}


def request_name(api_key: int) -> str:
    """Kafka's name of an API (``Produce``, ``Fetch`` ...), ``ApiKey<n>`` if unknown."""
    return REQUEST_NAMES.get(api_key, f"ApiKey{api_key}")


def batch_record_counts(records: bytes | memoryview | None) -> tuple[int, int]:
    """(bytes, records) of a produce payload of v2 record batches.

    A batch is ``baseOffset int64, batchLength int32`` then ``batchLength`` bytes, with the
    record count the int32 at byte 57 of the batch. A truncated tail counts its bytes only.
    """
    if not records:
        return 0, 0
    view = memoryview(records)
    total, count, position = len(view), 0, 0
    while position + 61 <= total:
        length = int.from_bytes(view[position + 8:position + 12], "big", signed=True)
        if length < 49:
            break
        count += max(0, int.from_bytes(view[position + 57:position + 61], "big", signed=True))
        position += 12 + length
    return total, count


@dataclass(frozen=True, slots=True)
class MoveProgress:
    """One partition's log-dir move as the collector reports it."""

    topic: str
    partition: int
    bytes_copied: int
    offset_lag: int


class BrokerView(Protocol):
    """The public state :class:`BrokerCollector` reads at scrape time."""

    def under_replicated_partitions(self) -> int: ...
    def partition_count(self) -> int: ...
    def leader_count(self) -> int: ...
    def offline_log_directory_count(self) -> int: ...
    def active_controller(self) -> bool: ...
    def offline_partitions_count(self) -> int: ...
    def leader_elections(self) -> int: ...
    def moves(self) -> Iterable[MoveProgress]: ...
    def throttle_rate(self) -> int: ...


class BrokerCollector(Collector):
    """Gauges computed when scraped, from a :class:`BrokerView`."""

    def __init__(self, view: BrokerView) -> None:
        self.view = view

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """Yield the gauges (and the election count) as of now."""
        view = self.view
        active = view.active_controller()
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions led by this broker whose ISR is smaller than their replica set",
            value=view.under_replicated_partitions())
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_partitioncount",
            "Partitions this broker hosts a replica of", value=view.partition_count())
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_leadercount",
            "Partitions this broker leads", value=view.leader_count())
        yield GaugeMetricFamily(
            "kafka_log_logmanager_offlinelogdirectorycount",
            "Log directories of this broker that are offline",
            value=view.offline_log_directory_count())
        yield GaugeMetricFamily(
            "kafka_controller_kafkacontroller_activecontrollercount",
            "1 on the active controller, 0 elsewhere", value=1 if active else 0)
        yield GaugeMetricFamily(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions without a live leader (reported by the active controller)",
            value=view.offline_partitions_count() if active else 0)
        yield CounterMetricFamily(
            "kafka_controller_controllerstats_leaderelectionrateandtimems",
            "Leader elections this broker's controller made",
            value=view.leader_elections())
        copied = GaugeMetricFamily(
            "kafka_log_logdirmove_bytescopied",
            "Bytes copied into the destination of an ongoing log-dir move",
            labels=["topic", "partition"])
        lag = GaugeMetricFamily(
            "kafka_log_logdirmove_offsetlag",
            "Offsets the destination of an ongoing log-dir move is behind its source",
            labels=["topic", "partition"])
        for move in view.moves():
            labels = [move.topic, str(move.partition)]
            copied.add_metric(labels, move.bytes_copied)
            lag.add_metric(labels, move.offset_lag)
        yield copied
        yield lag
        yield GaugeMetricFamily(
            "kafka_server_replicaalterlogdirs_throttlerate",
            "intra.broker.throttled.rate in bytes per second (absent or huge: unlimited)",
            value=view.throttle_rate())


class BrokerMetrics:
    """The counters the shells increment, in a registry of their own, plus the collector."""

    def __init__(self, view: BrokerView | None = None) -> None:
        self.registry = prometheus_client.CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.requests = prometheus_client.Counter(
            "kafka_network_requestmetrics_requests", "Requests answered, per API",
            ["request"], registry=registry)
        self.total_time_ms = prometheus_client.Histogram(
            "kafka_network_requestmetrics_totaltimems",
            "Time from a request's decoding to its response, in milliseconds, per API",
            ["request"], buckets=LATENCY_BUCKETS_MS, registry=registry)
        self.bytes_in = prometheus_client.Counter(
            "kafka_server_brokertopicmetrics_bytesin", "Bytes produced to the broker, per topic",
            ["topic"], registry=registry)
        self.messages_in = prometheus_client.Counter(
            "kafka_server_brokertopicmetrics_messagesin",
            "Records produced to the broker, per topic", ["topic"], registry=registry)
        self.bytes_out = prometheus_client.Counter(
            "kafka_server_brokertopicmetrics_bytesout",
            "Record bytes of the Fetch responses sent to consumers, per topic", ["topic"],
            registry=registry)
        self.replication_bytes_out = prometheus_client.Counter(
            "kafka_server_brokertopicmetrics_replicationbytesout",
            "Record bytes of the Fetch responses sent to follower replicas", registry=registry)
        self.isr_shrinks = prometheus_client.Counter(
            "kafka_server_replicamanager_isrshrinks", "ISR shrinks this broker made",
            registry=registry)
        self.isr_expands = prometheus_client.Counter(
            "kafka_server_replicamanager_isrexpands", "ISR expansions this broker made",
            registry=registry)
        if view is not None:
            registry.register(BrokerCollector(view))
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        #: labelled children by API key (requests, latency) and by topic (bytes and records
        #: in, bytes out)
        self._request_children: dict[
            int, tuple[prometheus_client.Counter, prometheus_client.Histogram]] = {}
        self._topic_children: dict[
            str, tuple[prometheus_client.Counter, prometheus_client.Counter]] = {}
        self._bytes_out_children: dict[str, prometheus_client.Counter] = {}

    def record_request(self, api_key: int, elapsed_seconds: float) -> None:
        """One request answered in ``elapsed_seconds``."""
        children = self._request_children.get(api_key)
        if children is None:  # (a labelled child looked up once per API, not per request)
            name = request_name(api_key)
            children = self._request_children[api_key] = (
                self.requests.labels(name), self.total_time_ms.labels(name))
        children[0].inc()
        children[1].observe(elapsed_seconds * 1000)

    def record_produce(self, topic: str, records: bytes | memoryview | None) -> None:
        """A Produce request carried ``records`` for ``topic``."""
        size, count = batch_record_counts(records)
        children = self._topic_children.get(topic)
        if children is None:
            children = self._topic_children[topic] = (
                self.bytes_in.labels(topic), self.messages_in.labels(topic))
        children[0].inc(size)
        children[1].inc(count)

    def record_fetch(self, follower: bool, topic_bytes: Mapping[str, int]) -> None:
        """A Fetch response carried ``topic_bytes`` record bytes per topic, to a follower
        (replication bytes out) or to a consumer (bytes out per topic)."""
        if follower:
            self.replication_bytes_out.inc(sum(topic_bytes.values()))
            return
        children = self._bytes_out_children
        for topic, size in topic_bytes.items():
            child = children.get(topic)
            if child is None:
                child = children[topic] = self.bytes_out.labels(topic)
            child.inc(size)

    def record_isr_change(self, before: tuple[int, ...], after: tuple[int, ...]) -> None:
        """This broker changed a partition's ISR from ``before`` to ``after``."""
        if set(after) - set(before):
            self.isr_expands.inc()
        if set(before) - set(after):
            self.isr_shrinks.inc()

    def start(self, port: int, host: str = "") -> int:
        """Serve ``/metrics`` on ``port`` (0: a free one) from a thread; returns the port."""
        server, thread = prometheus_client.start_http_server(port, addr=host or "0.0.0.0",
                                                             registry=self.registry)
        self._server, self._thread = server, thread
        return int(server.server_port)

    def stop(self) -> None:
        """Stop serving (idempotent)."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=10)


#: moves that are copying or about to swap (their destination exists)
_ACTIVE_MOVES: Final = frozenset({MoveState.COPYING, MoveState.CAUGHT_UP, MoveState.SWAPPING})


class BrokerParts(Protocol):
    """What :class:`BrokerStateView` reads: a running :class:`~impl.broker.broker.Broker`, or a
    benchmark's stand-in holding only the parts it drives (``None`` for the others)."""

    @property
    def logs(self) -> LogManager | None: ...
    @property
    def controller(self) -> ControllerService | None: ...
    @property
    def replicas(self) -> ReplicaManager | None: ...


@dataclass(frozen=True)
class Parts:
    """A :class:`BrokerParts` of a benchmark driving a ``LogManager`` or a controller alone."""

    logs: LogManager | None = None
    controller: ControllerService | None = None
    replicas: ReplicaManager | None = None


class BrokerStateView:
    """A :class:`BrokerView` of a running :class:`~impl.broker.broker.Broker`'s public state
    (zero everywhere before the broker has opened its logs), or of a :class:`Parts`."""

    def __init__(self, broker: BrokerParts) -> None:
        self.broker = broker

    def under_replicated_partitions(self) -> int:
        """Partitions this broker leads whose ISR lacks one of their replicas."""
        replicas = self.broker.replicas
        if replicas is None:
            return 0
        me = replicas.broker_id
        return sum(1 for state in list(replicas.states.values())
                   if state.leader == me and len(state.isr) < len(state.replicas))

    def partition_count(self) -> int:
        """Partitions this broker hosts (a replica the controller gave it)."""
        replicas = self.broker.replicas
        return 0 if replicas is None else len(replicas.states)

    def leader_count(self) -> int:
        """Partitions this broker leads."""
        replicas = self.broker.replicas
        if replicas is None:
            return 0
        me = replicas.broker_id
        return sum(1 for state in list(replicas.states.values()) if state.leader == me)

    def offline_log_directory_count(self) -> int:
        """Configured log dirs that failed."""
        logs = self.broker.logs
        return 0 if logs is None else len(logs.offline_dirs)

    def active_controller(self) -> bool:
        """Whether this broker is the active controller."""
        controller = self.broker.controller
        return controller is not None and controller.is_active

    def offline_partitions_count(self) -> int:
        """Partitions the controller knows with no leader."""
        controller = self.broker.controller
        core = None if controller is None else controller.core
        if core is None:
            return 0
        return sum(1 for state in list(core.leader_isr.values()) if state.leader < 0)

    def leader_elections(self) -> int:
        """Leader changes this broker's controller made (since it started)."""
        controller = self.broker.controller
        core = None if controller is None else controller.core
        return 0 if core is None else core.leader_elections

    def moves(self) -> Iterator[MoveProgress]:
        """Every ongoing log-dir move: bytes in its destination, offsets behind."""
        logs = self.broker.logs
        if logs is None:
            return
        for tp, partition in list(logs.partitions().items()):
            future = partition.future
            if future is None or logs.move_state(tp).state not in _ACTIVE_MOVES:
                continue
            yield MoveProgress(tp.topic, tp.partition, future.size_in_bytes,
                               max(0, partition.log_end_offset - future.log_end_offset))

    def throttle_rate(self) -> int:
        """``intra.broker.throttled.rate`` in force (bytes per second)."""
        logs = self.broker.logs
        return 0 if logs is None else logs.throttle_rate


def observed(handler: Handler, metrics: BrokerMetrics) -> Handler:
    """``handler`` counting each request, its latency and Produce/Fetch bytes in ``metrics`` (a
    deferred answer's latency runs until it is finished)."""
    async def handle(request: DecodedRequest, info: ConnectionInfo
                     ) -> Response | DeferredResponse | None:
        started = time.perf_counter()
        response = await handler(request, info)
        api_key = request.api_key
        if api_key == api_versions.PRODUCE:
            for topic in request.body.topic_data:
                for item in topic.partition_data:
                    metrics.record_produce(str(topic.name), item.records)
        elif api_key == api_versions.FETCH and isinstance(response, PiecesResponse):
            metrics.record_fetch(int(request.body.replica_id) >= 0, response.topic_bytes)
        if isinstance(response, DeferredResponse):
            finish = response.finish

            async def timed() -> Response | None:
                try:
                    return await finish()
                finally:
                    metrics.record_request(api_key, time.perf_counter() - started)

            return DeferredResponse(timed)
        metrics.record_request(api_key, time.perf_counter() - started)
        return response

    return handle
