"""Request handlers: one method per API, each serving every version the broker accepts.

Each handler reads the kio request, asks the cores and the replica manager, and describes the
response once as nested mappings; :func:`impl.broker._kio_build.build` turns that into the
request version's response class. Fetch is the exception: its response is written by
:mod:`impl.broker.fetch_response` so record bytes can go out with ``os.sendfile``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import trio

from impl.security import request_acls
from impl.security.acl_apis import AclApis
from impl.security.authorizer import CLUSTER, AclOperation, Resource, ResourceType
from impl.security.enforcement import RequestAuthorizer
from impl.security.scram_apis import ScramApis
from impl.security.session import current_session
from impl.storage.names import TopicPartition

from . import api_versions, configs, controller_wire
from ._codec import DecodedRequest, encode_response
from ._handlers_admin import AdminHandlers, ConfigBackend
from ._handlers_groups import GroupHandlers
from ._kio_build import build
from .config import BrokerConfig
from .config_store import ReplicationQuotas
from .fetch_response import FetchPartitionReply, encode_fetch_response
from .metadata_cache import BrokerEndpoint, MetadataCache
from .produce_response import PartitionResult, encode_produce_response
from .purgatory import FetchBudget
from .replica_manager import AppendedProduce, ReplicaManager
from .replication import fetcher_broker_epoch
from .server import (
    CloseConnectionError,
    ConnectionInfo,
    DeferredResponse,
    PiecesResponse,
    Response,
)
from .topic_names import topic_name_error

log = logging.getLogger(__name__)

NONE: Final = 0
OFFSET_OUT_OF_RANGE: Final = 1
UNKNOWN_TOPIC_OR_PARTITION: Final = 3
LEADER_NOT_AVAILABLE: Final = 5
#: the leader is alive but has no endpoint on the request's listener (Metadata v6+)
LISTENER_NOT_FOUND: Final = 72
NOT_LEADER_OR_FOLLOWER: Final = 6
REPLICA_NOT_AVAILABLE: Final = 9
REQUEST_TIMED_OUT: Final = 7
INVALID_TOPIC_EXCEPTION: Final = 17
TOPIC_ALREADY_EXISTS: Final = 36
INVALID_PARTITIONS: Final = 37
INVALID_REPLICATION_FACTOR: Final = 38
INVALID_REPLICA_ASSIGNMENT: Final = 39
INVALID_CONFIG: Final = 40
INVALID_REQUEST: Final = 42
TOPIC_AUTHORIZATION_FAILED: Final = request_acls.TOPIC_AUTHORIZATION_FAILED
TRANSACTIONAL_ID_AUTHORIZATION_FAILED: Final = 53
KAFKA_STORAGE_ERROR: Final = 56
LOG_DIR_NOT_FOUND: Final = 57
FENCED_LEADER_EPOCH: Final = 74
UNKNOWN_LEADER_EPOCH: Final = 75
OFFSET_NOT_AVAILABLE: Final = 78
#: The most partitions one CreateTopics topic may ask for (a bound on the controller's work).
PARTITIONS_PER_TOPIC_MAX: Final = 100_000
#: Fairness: a handler iterating a request's entries yields to other clients every this many
#: entries, a response with more entries than :data:`ENCODE_OFF_LOOP_ENTRIES` is built and
#: encoded in a worker thread, and a controller request naming more than
#: :data:`CONTROLLER_CHUNK_PARTITIONS` partitions is applied in chunks of that many (each one
#: creates or deletes logs, with fsyncs), so no request holds the event loop for long.
YIELD_EVERY_ENTRIES: Final = 512
ENCODE_OFF_LOOP_ENTRIES: Final = 2_000
CONTROLLER_CHUNK_PARTITIONS: Final = 1
#: Kafka's ``LIST_OFFSETS`` special timestamps.
LATEST_TIMESTAMP: Final = -1
EARLIEST_TIMESTAMP: Final = -2


class TopicAdmin(Protocol):
    """Topic creation and deletion through ZooKeeper (the controller's admin helpers)."""

    async def create_topic(
        self,
        topic: str,
        partition_count: int,
        replication_factor: int,
        assignment: dict[int, tuple[int, ...]] | None,
        validate_only: bool,
        *,
        topic_configs: dict[str, str] | None = None,
    ) -> tuple[int, str | None]:
        """Create (or only validate) a topic with its configs; (error code, message)."""

    async def delete_topic(self, topic: str) -> int:
        """Mark a topic for deletion; an error code."""


class ClusterRegistry(Protocol):
    """ZooKeeper's view of the cluster, read when the metadata cache has not caught up.

    Right after start-up a broker's cache lists only itself and no controller until the
    controller's first UpdateMetadata arrives, and a registration the controller has not yet
    processed is missing from every cache. ``/brokers/ids`` and ``/controller`` are the
    authority the controller itself reads.
    """

    async def registered_brokers(self) -> list[BrokerEndpoint] | None:
        """Every broker registered under ``/brokers/ids``; None if ZooKeeper cannot say."""

    async def controller_id(self) -> int:
        """The broker id in ``/controller``; -1 if there is none or ZooKeeper cannot say."""


class LogDirs(Protocol):
    """The KIP-113 operations of the storage engine, as the broker answers them."""

    async def describe_log_dirs(
        self, topics: dict[str, set[int]] | None
    ) -> list[dict[str, Any]]:
        """Per log dir: ``{"log_dir", "error_code", "topics": [{"name", "partitions": [...]}],
        "total_bytes", "usable_bytes"}`` in the DescribeLogDirs response shape, of the
        partitions in ``topics`` (``None``: all)."""

    def alter_replica_log_dir(self, tp: TopicPartition, log_dir: str) -> int:
        """Start (or cancel) a move of ``tp`` to ``log_dir``; an error code."""


ProducerIdAllocator = Callable[[], Awaitable[int]]
ControllerRequestHandler = Callable[[int, Any], Any]


@dataclass
class HandlerContext:
    """Everything the handlers read or drive."""

    config: BrokerConfig
    metadata: MetadataCache
    replicas: ReplicaManager
    topic_admin: TopicAdmin
    log_dirs: LogDirs
    allocate_producer_id: ProducerIdAllocator
    on_update_metadata: Callable[[Any], None]
    #: sees every controller request first (the broker learns leaders' endpoints from them)
    on_controller_request: Callable[[Any], None] | None = None
    #: read when the metadata cache lags ZooKeeper (None: the cache is all there is)
    registry: ClusterRegistry | None = None
    #: ``/config`` for the admin handlers (None: the config APIs are not served)
    config_backend: ConfigBackend | None = None
    #: KIP-73 replication throttles (None: never throttle)
    quotas: ReplicationQuotas | None = None
    #: decides every request's ACLs (None: no ``authorizer.class.name``, everything allowed)
    authorization: RequestAuthorizer | None = None
    #: CreateAcls, DescribeAcls, DeleteAcls (without a store: SECURITY_DISABLED)
    acl_apis: AclApis | None = None
    #: DescribeUserScramCredentials, AlterUserScramCredentials (KIP-554; None: no ZooKeeper)
    scram_apis: ScramApis | None = None
    #: listener name → this broker's advertised (host, port) on it (filled once the listeners
    #: are bound): Metadata advertises this broker on the listener the request came in on
    own_endpoints: dict[str, tuple[str, int]] = field(default_factory=dict)

    def allowed(self, operation: AclOperation, resource: Resource) -> bool:
        """Whether the current session may act (always, without an authorizer)."""
        return self.authorization is None or self.authorization.allowed(operation, resource)

    def topic_allowed(self, operation: AclOperation, name: str) -> bool:
        """Whether the current session may act on topic ``name``."""
        return self.allowed(operation, Resource(ResourceType.TOPIC, name))

    def endpoint_on(self, broker: BrokerEndpoint, listener: str) -> tuple[str, int] | None:
        """``broker``'s advertised (host, port) on ``listener`` (None: it has no such
        listener), as Metadata, FindCoordinator and DescribeCluster answer: this broker from
        its own ``advertised.listeners`` (bound ports filled in; authoritative even before the
        controller's UpdateMetadata reaches it), a broker registered without listener names at
        its only endpoint."""
        if broker.broker_id == self.config.broker_id and self.own_endpoints:
            return self.own_endpoints.get(listener)
        if not broker.listeners:
            return broker.host, broker.port
        endpoint = next((e for e in broker.listeners if e.listener == listener), None)
        return None if endpoint is None else (endpoint.host, endpoint.port)


def _throttle() -> dict[str, Any]:
    return {"throttle_time": 0}


class RequestHandlers:
    """Dispatches decoded requests to the API handlers."""

    def __init__(self, context: HandlerContext) -> None:
        self.context = context
        self._placement_seed = context.config.broker_id
        self._handlers: dict[
            int, Callable[[DecodedRequest], Awaitable[Response | DeferredResponse | None]]] = {
            api_versions.API_VERSIONS: self.api_versions,
            api_versions.METADATA: self.metadata,
            api_versions.PRODUCE: self.produce,
            api_versions.FETCH: self.fetch,
            api_versions.LIST_OFFSETS: self.list_offsets,
            api_versions.CREATE_TOPICS: self.create_topics,
            api_versions.DELETE_TOPICS: self.delete_topics,
            api_versions.INIT_PRODUCER_ID: self.init_producer_id,
            api_versions.DESCRIBE_LOG_DIRS: self.describe_log_dirs,
            api_versions.ALTER_REPLICA_LOG_DIRS: self.alter_replica_log_dirs,
            api_versions.OFFSET_FOR_LEADER_EPOCH: self.offset_for_leader_epoch,
            api_versions.LEADER_AND_ISR: self.controller_request,
            api_versions.STOP_REPLICA: self.controller_request,
            api_versions.UPDATE_METADATA: self.controller_request,
        }
        self.admin = AdminHandlers(self, context.config_backend)
        self._handlers.update(self.admin.table())
        acl_apis = context.acl_apis or AclApis(None)
        self._handlers.update({
            api_versions.CREATE_ACLS: acl_apis.create_acls,
            api_versions.DESCRIBE_ACLS: acl_apis.describe_acls,
            api_versions.DELETE_ACLS: acl_apis.delete_acls,
        })
        scram_apis = context.scram_apis or ScramApis(lambda: None)
        self._handlers.update({
            api_versions.DESCRIBE_USER_SCRAM_CREDENTIALS:
                scram_apis.describe_user_scram_credentials,
            api_versions.ALTER_USER_SCRAM_CREDENTIALS: scram_apis.alter_user_scram_credentials,
        })
        #: the group APIs and the group coordinator's pump (``run`` them with the broker)
        self.groups = GroupHandlers(context)
        self._group_handlers = self.groups.handlers()

    async def __call__(self, request: DecodedRequest, info: ConnectionInfo
                       ) -> Response | DeferredResponse | None:
        """Answer one request (None: no response is sent), after the request-wide ACL check of
        :mod:`impl.security.request_acls` (per-topic checks are the handlers' own)."""
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        group_handler = self._group_handlers.get(request.api_key)
        if group_handler is not None:
            return await group_handler(request, info)
        if request.api_key == api_versions.FETCH:
            return await self.fetch(request, info.connection_id)
        handler = self._handlers[request.api_key]
        return await handler(request)

    # --- authorization (impl.security.request_acls) ----------------------------------------

    def _allowed(self, operation: AclOperation, resource: Resource) -> bool:
        return self.context.allowed(operation, resource)

    def _topic_allowed(self, operation: AclOperation, name: str) -> bool:
        return self.context.topic_allowed(operation, name)

    def _group_refusal(self, request: DecodedRequest) -> bytes | None:
        """Check the groups (or transactional ids) a group API names (None: all allowed)."""
        operation = request_acls.group_operation(request.api_key)
        for kind, name in request_acls.checked_resources(request.api_key, request.body):
            if not self._allowed(operation, Resource(kind, name)):
                return self._answer(request, request_acls.group_refusal_data(
                    request.api_key, request.body, request_acls.DENIAL_CODES[kind]))
        return None

    def _refusal(self, request: DecodedRequest) -> bytes | None:
        """The error answer of a request whose request-wide ACL is denied (None: go on)."""
        if self.context.authorization is None:
            return None
        requirement = request_acls.requirement(request.api_key)
        if request.api_key in request_acls.GROUP_CHECKED:
            return self._group_refusal(request)
        if requirement.scope is not request_acls.Scope.REQUEST:
            return None
        assert requirement.operation is not None
        if self._allowed(requirement.operation, CLUSTER):
            return None
        if request.api_key == api_versions.INIT_PRODUCER_ID and (
            request.body.transactional_id is not None
            or any(self._topic_allowed(AclOperation.WRITE, name)
                   for name in self.context.metadata.topics)
        ):
            return None  # Kafka: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic
        message = f"{requirement.operation.name} on the cluster is not authorized"
        return self._answer(request, request_acls.refusal_data(
            request.api_key, request.body, requirement.denial_code, message))

    def _answer(self, request: DecodedRequest, data: dict[str, Any]) -> bytes:
        return encode_response(request, build(request.response_class, data))

    async def _answer_large(self, request: DecodedRequest, data: dict[str, Any],
                            entries: int) -> bytes:
        """:meth:`_answer`, in a worker thread when the response has many entries (building
        and encoding a million-topic Metadata answer takes seconds of CPU)."""
        if entries <= ENCODE_OFF_LOOP_ENTRIES:
            return self._answer(request, data)
        return await trio.to_thread.run_sync(self._answer, request, data)

    # --- ApiVersions, Metadata -------------------------------------------------------------

    async def api_versions(self, request: DecodedRequest) -> Response:
        """ApiVersions v0-v3: the advertised table."""
        return self._answer(
            request,
            {
                "error_code": NONE,
                "api_keys": [
                    {"api_key": key, "min_version": low, "max_version": high}
                    for key, (low, high) in sorted(api_versions.ADVERTISED.items())
                ],
                **_throttle(),
            },
        )

    async def metadata(self, request: DecodedRequest) -> Response:
        """Metadata v0-v8 from the metadata cache (leader epochs reported as -1)."""
        cache = self.context.metadata
        requested = request.body.topics
        if requested is None or (request.api_version == 0 and not requested):
            # Kafka hides the topics the principal may not DESCRIBE from an all-topics request.
            names = [name for name in cache.topics
                     if self._topic_allowed(AclOperation.DESCRIBE, name)]
        else:
            # a topic named twice is answered once, as Kafka does (it collects them in a set)
            names = list(dict.fromkeys(topic.name for topic in requested))
        topics: list[dict[str, Any]] = []
        live = {broker.broker_id for broker in cache.brokers}
        brokers, controller_id = cache.brokers, cache.controller_id
        if controller_id < 0:
            # No UpdateMetadata yet: clients looking for the controller (CreateTopics) would
            # wait for one; answer from ZooKeeper instead.
            brokers, controller_id = await self._registered_view(brokers)
        answered = self._on_listener(brokers, current_session().listener)
        reachable = {broker["node_id"] for broker in answered}
        missing_listener = (LISTENER_NOT_FOUND if request.api_version >= 6
                            else LEADER_NOT_AVAILABLE)
        for count, name in enumerate(names, 1):
            if count % YIELD_EVERY_ENTRIES == 0:
                await trio.lowlevel.checkpoint()
            if topic_name_error(name) is not None:
                topics.append({"error_code": INVALID_TOPIC_EXCEPTION, "name": name,
                               "partitions": []})
                continue
            if requested is not None and not self._topic_allowed(AclOperation.DESCRIBE, name):
                topics.append({"error_code": TOPIC_AUTHORIZATION_FAILED, "name": name,
                               "partitions": []})
                continue
            if not cache.has_topic(name):
                code = UNKNOWN_TOPIC_OR_PARTITION
                if self.context.config.auto_create_topics_enable and getattr(
                    request.body, "allow_auto_topic_creation", True
                ):
                    code = (await self._auto_create(name) if self._create_allowed(name)
                            else TOPIC_AUTHORIZATION_FAILED)
                topics.append({"error_code": code, "name": name, "partitions": []})
                continue
            partitions = []
            for state in cache.partitions(name):
                if state.leader in reachable:
                    error = NONE
                elif state.leader in live:
                    error = missing_listener
                else:
                    error = LEADER_NOT_AVAILABLE
                partitions.append(
                    {
                        "error_code": error,
                        "partition_index": state.partition,
                        "leader_id": state.leader if error == NONE else -1,
                        "leader_epoch": state.leader_epoch,
                        "replica_nodes": state.replicas,
                        "isr_nodes": state.isr,
                        "offline_replicas": state.offline_replicas,
                    }
                )
            topics.append({"error_code": NONE, "name": name, "is_internal": False,
                           "partitions": partitions})
        entries = sum(len(topic["partitions"]) + 1 for topic in topics)
        return await self._answer_large(
            request,
            {
                **_throttle(),
                "brokers": answered,
                "cluster_id": self.context.config.cluster_id,
                "controller_id": controller_id,
                "topics": topics,
            },
            entries,
        )

    def _on_listener(self, brokers: list[BrokerEndpoint], listener: str) -> list[dict[str, Any]]:
        """Each broker's endpoint on ``listener`` (the one the request came in on), as Kafka
        answers Metadata: a broker without that listener is left out. This broker answers with
        its bound port; a broker registered without listener names is answered at its only
        endpoint."""
        answered: list[dict[str, Any]] = []
        for broker in brokers:
            address = self.context.endpoint_on(broker, listener)
            if address is None:
                continue
            answered.append({"node_id": broker.broker_id, "host": address[0],
                             "port": address[1], "rack": broker.rack})
        return answered

    async def _registered_view(
        self, cached: list[BrokerEndpoint]
    ) -> tuple[list[BrokerEndpoint], int]:
        """The cached brokers plus those registered in ZooKeeper, and ``/controller``'s id."""
        registry = self.context.registry
        if registry is None:
            return cached, self.context.metadata.controller_id
        registered = await registry.registered_brokers()
        controller_id = await registry.controller_id()
        if registered is None:
            return cached, controller_id
        merged = {broker.broker_id: broker for broker in registered}
        merged.update((broker.broker_id, broker) for broker in cached)
        return [merged[b] for b in sorted(merged)], controller_id

    async def _live_broker_ids(self, needed: Callable[[set[int]], bool]) -> set[int]:
        """The live broker ids: the cache's, or, when they do not satisfy ``needed``, the
        registrations under ``/brokers/ids`` (the authority; the cache may lag it after
        start-up)."""
        live = {broker.broker_id for broker in self.context.metadata.brokers}
        if needed(live) or self.context.registry is None:
            return live
        registered = await self.context.registry.registered_brokers()
        if registered is None:
            return live
        return {broker.broker_id for broker in registered}

    def _create_allowed(self, name: str) -> bool:
        """CREATE on the cluster, or on the topic (Kafka: either suffices)."""
        return (self._allowed(AclOperation.CREATE, CLUSTER)
                or self._topic_allowed(AclOperation.CREATE, name))

    async def _auto_create(self, name: str) -> int:
        """``auto.create.topics.enable``: create with the broker defaults; the client retries
        on LEADER_NOT_AVAILABLE (5) until the controller has elected a leader."""
        config = self.context.config
        live = await self._live_broker_ids(
            lambda ids: len(ids) >= config.default_replication_factor
        )
        factor = min(config.default_replication_factor, len(live))
        code, message = await self.context.topic_admin.create_topic(
            name, config.num_partitions, max(factor, 1), None, False
        )
        if code not in (NONE, TOPIC_ALREADY_EXISTS):
            log.info("auto-creating %s failed: %d %s", name, code, message)
            return code
        return LEADER_NOT_AVAILABLE

    # --- Produce ---------------------------------------------------------------------------

    async def produce(self, request: DecodedRequest) -> Response | DeferredResponse | None:
        """Produce v3-v8: one batch per partition, acks 0/1/all, idempotence. An answer that
        waits for acks once the appends are done is deferred (the connection reads on)."""
        body = request.body
        if body.transactional_id is not None:
            return self._produce_all(request, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        timeout_ms = int(body.timeout.total_seconds() * 1000)
        acks = int(body.acks)
        # every partition refused here is answered at once; the others are appended in request
        # order and waited for together (one acks=all round for the whole request)
        rows: list[tuple[str, list[tuple[int, int | None]]]] = []  # (index, refusal or None)
        appended: list[tuple[TopicPartition, bytes | None]] = []
        for topic in body.topic_data:
            writable = self._topic_allowed(AclOperation.WRITE, topic.name)
            refusal = (TOPIC_AUTHORIZATION_FAILED if not writable else
                       INVALID_TOPIC_EXCEPTION if topic_name_error(topic.name) is not None else
                       None)
            rows.append((topic.name, [(int(item.index), refusal)
                                      for item in topic.partition_data]))
            if refusal is None:
                appended.extend((TopicPartition(topic.name, int(item.index)), item.records)
                                for item in topic.partition_data)
        pending = (await self.context.replicas.append_partitions(appended, acks, timeout_ms)
                   if appended else None)
        answer = functools.partial(self._produce_answer, request.api_version,
                                   request.head.correlation_id, acks, rows, pending)
        if pending is not None and not pending.answered():
            return DeferredResponse(answer)
        return await answer()

    @staticmethod
    async def _produce_answer(
        api_version: int, correlation_id: int, acks: int,
        rows: list[tuple[str, list[tuple[int, int | None]]]], pending: AppendedProduce | None,
    ) -> Response | None:
        """The Produce response of ``rows`` (each partition's refusal, or its result in
        ``pending``), once every appended partition is answered (records not referenced: a
        deferred answer holds none of the request's bytes)."""
        produced = iter(await pending.results() if pending is not None else [])
        results: list[tuple[str, list[PartitionResult]]] = []
        failed: int | None = None
        for name, row in rows:
            partitions: list[PartitionResult] = []
            for index, refused in row:
                if refused is not None:
                    answer = PartitionResult(index, refused)
                else:
                    result = next(produced)
                    answer = PartitionResult(index, result.error_code, result.base_offset,
                                             result.log_append_time_ms, result.log_start_offset,
                                             result.error_message)
                if answer.error_code != NONE and failed is None:
                    failed = answer.error_code
                partitions.append(answer)
            results.append((name, partitions))
        if acks == 0:
            if failed is not None:
                raise CloseConnectionError(f"produce with acks=0 failed with error {failed}")
            return None
        return encode_produce_response(api_version, correlation_id, results)

    def _produce_all(self, request: DecodedRequest, code: int) -> Response | None:
        if int(request.body.acks) == 0:
            raise CloseConnectionError(f"produce with acks=0 failed with error {code}")
        return encode_produce_response(
            request.api_version, request.head.correlation_id,
            [(topic.name, [PartitionResult(int(item.index), code)
                           for item in topic.partition_data])
             for topic in request.body.topic_data])

    # --- Fetch -----------------------------------------------------------------------------

    def _fetch_partition(
        self,
        tp: TopicPartition,
        item: Any,
        replica_id: int,
        limit: int,
        *,
        connection_id: int = -1,
        broker_epoch: int = -1,
        asked_again: bool = False,
    ) -> FetchPartitionReply:
        if topic_name_error(tp.topic) is not None:
            return FetchPartitionReply(tp.partition, UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1)
        # (the broker node decides: the epoch fence, the range, the follower's progress,
        # KIP-73's leader throttle)
        reply = self.context.replicas.fetch_partition(
            tp, replica_id, int(item.fetch_offset),
            int(getattr(item, "current_leader_epoch", -1)),
            limit,
            log_start_offset=int(getattr(item, "log_start_offset", -1)) if replica_id >= 0
            else -1, incarnation=connection_id, broker_epoch=broker_epoch,
            asked_again=asked_again,
        )
        if reply.error == OFFSET_OUT_OF_RANGE:
            return FetchPartitionReply(tp.partition, OFFSET_OUT_OF_RANGE, reply.high_watermark,
                                       reply.high_watermark, reply.log_start_offset)
        if reply.error != NONE:
            return FetchPartitionReply(tp.partition, reply.error, -1, -1, -1)
        answer = FetchPartitionReply(
            tp.partition, NONE, reply.high_watermark, reply.high_watermark,
            reply.log_start_offset, tuple(reply.records or ()),
        )
        quotas = self.context.quotas
        if reply.throttled and quotas is not None:
            quotas.record_leader(answer.records_size)
        return answer

    def _fetch_once(self, body: Any, connection_id: int = -1, client_id: str | None = None,
                    *, asked_again: bool = False,
                    ) -> tuple[list[tuple[str, list[FetchPartitionReply]]], FetchBudget]:
        replica_id = int(body.replica_id)
        broker_epoch = fetcher_broker_epoch(client_id, replica_id) if replica_id >= 0 else -1
        budget = FetchBudget(int(body.max_bytes))
        topics: list[tuple[str, list[FetchPartitionReply]]] = []
        readable: dict[str, bool] = {}
        for topic in body.topics:
            replies: list[FetchPartitionReply] = []
            if topic.topic not in readable:
                readable[topic.topic] = self._fetch_allowed(topic.topic, replica_id)
            for item in topic.partitions:
                if not readable[topic.topic]:
                    code = TOPIC_AUTHORIZATION_FAILED if replica_id < 0 else (
                        request_acls.CLUSTER_AUTHORIZATION_FAILED)
                    replies.append(FetchPartitionReply(int(item.partition), code, -1, -1, -1))
                    budget.took(0, error=True)
                    continue
                reply = self._fetch_partition(
                    TopicPartition(topic.topic, int(item.partition)), item, replica_id,
                    budget.limit(int(item.partition_max_bytes)), connection_id=connection_id,
                    broker_epoch=broker_epoch, asked_again=asked_again,
                )
                budget.took(reply.records_size, error=reply.error_code != NONE)
                replies.append(reply)
            topics.append((topic.topic, replies))
        return topics, budget

    def _fetch_allowed(self, topic: str, replica_id: int) -> bool:
        """A consumer needs READ on the topic, a follower CLUSTER_ACTION on the cluster."""
        if replica_id >= 0:
            return self._allowed(AclOperation.CLUSTER_ACTION, CLUSTER)
        return self._topic_allowed(AclOperation.READ, topic)

    async def fetch(self, request: DecodedRequest, connection_id: int = -1) -> Response:
        """Fetch v4-v11: records below the HW (LEO for followers), zero-copy, delayed; a
        follower's incarnation is the connection it fetches on, its broker epoch the one its
        client id names (:func:`~impl.broker.replication.fetcher_client_id`)."""
        body = request.body
        max_wait_seconds = max(body.max_wait.total_seconds(), 0.0)
        deadline = trio.current_time() + max_wait_seconds
        min_bytes = int(body.min_bytes)
        follower = int(body.replica_id) >= 0
        partitions: list[TopicPartition] | None = None
        while True:
            # (asked again after a wake: a follower's position was recorded on arrival)
            topics, budget = self._fetch_once(body, connection_id, request.client_id,
                                              asked_again=partitions is not None)
            if budget.answered(min_bytes=min_bytes, now=trio.current_time(), deadline=deadline,
                               stopping=self.context.replicas.stopping):
                break
            for _, replies in topics:
                for reply in replies:
                    for piece in reply.record_slices:
                        piece.close()  # type: ignore[attr-defined]
            # (a follower's fetch is asked again on new records or a log change, not on a
            # lone HW move: Kafka's DelayedFetch; its answer's HW follows with the next one;
            # either is asked again only on a change to one of its partitions)
            if partitions is None:
                partitions = [TopicPartition(topic.topic, int(item.partition))
                              for topic in body.topics for item in topic.partitions]
            await self.context.replicas.wait_changed(deadline, records_only=follower,
                                                     partitions=partitions)
        pieces = encode_fetch_response(
            request.api_version, request.head.correlation_id, topics, session_id=0
        )
        sent: dict[str, int] = {}
        for name, replies in topics:
            sent[name] = sent.get(name, 0) + sum(reply.records_size for reply in replies)
        return PiecesResponse(pieces, sent)

    # --- ListOffsets -----------------------------------------------------------------------

    async def list_offsets(self, request: DecodedRequest) -> Response:
        """ListOffsets v1-v7: earliest (-2), latest (-1), max timestamp (-3, KIP-734; v7 is
        the version a client asks it with) or by timestamp."""
        replicas = self.context.replicas
        replica_id = int(getattr(request.body, "replica_id", -1))
        topics = []
        count = 0
        for topic in request.body.topics:
            partitions = []
            # topic-level verdicts once per topic, not once per partition entry
            allowed = self._topic_allowed(AclOperation.DESCRIBE, topic.name)
            bad_name = topic_name_error(topic.name) is not None
            for item in topic.partitions:
                count += 1
                if count % YIELD_EVERY_ENTRIES == 0:
                    await trio.lowlevel.checkpoint()
                tp = TopicPartition(topic.name, int(item.partition_index))
                entry: dict[str, Any] = {"partition_index": item.partition_index,
                                         "timestamp": -1, "offset": -1, "leader_epoch": -1}
                if not allowed:
                    entry["error_code"] = TOPIC_AUTHORIZATION_FAILED
                    partitions.append(entry)
                    continue
                if bad_name:
                    entry["error_code"] = UNKNOWN_TOPIC_OR_PARTITION
                    partitions.append(entry)
                    continue
                # (the broker node decides: the epoch fence, latest = HW for a consumer and
                # LEO for a follower, earliest = log start, the search by time below the HW)
                answer = replicas.list_offsets(
                    tp, int(item.timestamp), int(getattr(item, "current_leader_epoch", -1)),
                    replica_id)
                entry["error_code"] = answer.error
                if answer.error == OFFSET_NOT_AVAILABLE and request.api_version < 5:
                    # the code exists from v5 on; older clients retry LEADER_NOT_AVAILABLE
                    entry["error_code"] = LEADER_NOT_AVAILABLE
                if answer.error == NONE:
                    entry.update(offset=answer.offset, timestamp=answer.timestamp,
                                 leader_epoch=answer.leader_epoch)
                partitions.append(entry)
            topics.append({"name": topic.name, "partitions": partitions})
        return await self._answer_large(request, {**_throttle(), "topics": topics}, count)

    # --- OffsetForLeaderEpoch (followers) ---------------------------------------------------

    def _offset_for_leader_epoch_allowed(self, topic: str, replica_id: int) -> bool:
        """A follower needs CLUSTER_ACTION on the cluster, anyone else DESCRIBE on the topic."""
        if replica_id >= 0:
            return self._allowed(AclOperation.CLUSTER_ACTION, CLUSTER)
        return self._topic_allowed(AclOperation.DESCRIBE, topic)

    async def offset_for_leader_epoch(self, request: DecodedRequest) -> Response:
        """OffsetForLeaderEpoch v3 (KIP-101/279): the end offset of a leader epoch, for a
        follower deciding where to truncate."""
        replicas = self.context.replicas
        topics = []
        for topic in request.body.topics:
            partitions = []
            for item in topic.partitions:
                tp = TopicPartition(topic.topic, int(item.partition))
                entry: dict[str, Any] = {"partition": item.partition, "leader_epoch": -1,
                                         "end_offset": -1}
                if not self._offset_for_leader_epoch_allowed(
                        topic.topic, int(getattr(request.body, "replica_id", -1))):
                    entry["error_code"] = (TOPIC_AUTHORIZATION_FAILED
                                           if int(getattr(request.body, "replica_id", -1)) < 0
                                           else request_acls.CLUSTER_AUTHORIZATION_FAILED)
                    partitions.append(entry)
                    continue
                answer = replicas.offset_for_leader_epoch(
                    tp, int(item.current_leader_epoch), int(item.leader_epoch))
                entry["error_code"] = answer.error
                if answer.error == NONE:
                    entry.update(leader_epoch=answer.leader_epoch, end_offset=answer.end_offset)
                partitions.append(entry)
            topics.append({"topic": topic.topic, "partitions": partitions})
        return self._answer(request, {**_throttle(), "topics": topics})

    # --- CreateTopics, DeleteTopics --------------------------------------------------------

    async def create_topics(self, request: DecodedRequest) -> Response:
        """CreateTopics v2-v4 through ZooKeeper; waits (bounded) until metadata shows it."""
        body = request.body
        timeout_seconds = max(body.timeout.total_seconds(), 0.0)
        names = [topic.name for topic in body.topics]
        results: list[dict[str, Any]] = []
        created: list[str] = []
        for topic in body.topics:
            if not self._create_allowed(topic.name):
                results.append({"name": topic.name, "error_code": TOPIC_AUTHORIZATION_FAILED,
                                "error_message": "CREATE is not authorized"})
                continue
            code, message = await self._create_one(topic, names, bool(body.validate_only))
            if code == NONE and not body.validate_only:
                created.append(topic.name)
            results.append({"name": topic.name, "error_code": code, "error_message": message})
        if created and timeout_seconds > 0:
            ready = await self._wait_metadata(
                lambda: all(self._topic_ready(name) for name in created), timeout_seconds
            )
            if not ready:
                for result in results:
                    if result["name"] in created:
                        result["error_code"] = REQUEST_TIMED_OUT
                        result["error_message"] = "topic created; metadata not yet propagated"
        return self._answer(request, {**_throttle(), "topics": results})

    def _topic_ready(self, name: str) -> bool:
        cache = self.context.metadata
        partitions = cache.partitions(name)
        return bool(partitions) and all(state.leader >= 0 for state in partitions)

    async def _wait_metadata(self, condition: Callable[[], bool], timeout_seconds: float) -> bool:
        deadline = trio.current_time() + timeout_seconds
        while not condition():
            if trio.current_time() >= deadline:
                return False
            await self.context.replicas.wait_changed(deadline)
        return True

    async def _create_one(
        self, topic: Any, names: Sequence[str], validate_only: bool
    ) -> tuple[int, str | None]:
        name = topic.name
        reason = topic_name_error(name)
        if reason is not None:
            return INVALID_TOPIC_EXCEPTION, reason
        if names.count(name) > 1:
            return INVALID_REQUEST, f"topic {name!r} appears more than once in the request"
        topic_configs: dict[str, str] = {}
        for config in topic.configs:
            if config.name in topic_configs:
                return INVALID_REQUEST, f"config {config.name!r} appears more than once"
            if config.value is None:
                return INVALID_CONFIG, f"Null value not supported for configuration {config.name}"
            topic_configs[config.name] = config.value
        try:
            configs.validate(configs.ResourceType.TOPIC, topic_configs)
        except configs.InvalidConfigError as error:
            return INVALID_CONFIG, str(error)
        partitions = int(topic.num_partitions)
        factor = int(topic.replication_factor)
        assignment: dict[int, tuple[int, ...]] | None = None
        if topic.assignments:
            if partitions != -1 or factor != -1:
                return INVALID_REQUEST, (
                    "give either replica assignments or num_partitions and replication_factor"
                )
            assignment = {
                int(item.partition_index): tuple(int(b) for b in item.broker_ids)
                for item in topic.assignments
            }
            if sorted(assignment) != list(range(len(assignment))):
                return INVALID_REPLICA_ASSIGNMENT, "partitions must be numbered 0..n-1"
            if len(assignment) > PARTITIONS_PER_TOPIC_MAX:
                return INVALID_PARTITIONS, f"more than {PARTITIONS_PER_TOPIC_MAX} partitions"
            named = {broker for replicas in assignment.values() for broker in replicas}
            live = await self._live_broker_ids(lambda ids: named <= ids)
            for replicas in assignment.values():
                if not replicas or len(set(replicas)) != len(replicas):
                    return INVALID_REPLICA_ASSIGNMENT, "empty or duplicate replica list"
                if not set(replicas) <= live:
                    return INVALID_REPLICA_ASSIGNMENT, "assignment names a broker not alive"
            partitions = len(assignment)
            factor = len(next(iter(assignment.values())))
        else:
            if partitions == -1:
                partitions = self.context.config.num_partitions
            if factor == -1:
                factor = self.context.config.default_replication_factor
            if not 0 < partitions <= PARTITIONS_PER_TOPIC_MAX:
                return INVALID_PARTITIONS, (
                    f"number of partitions must be in 1..{PARTITIONS_PER_TOPIC_MAX}: {partitions}"
                )
            if factor <= 0:
                return INVALID_REPLICATION_FACTOR, f"replication factor must be positive: {factor}"
            live_count = len(await self._live_broker_ids(lambda ids: len(ids) >= factor))
            if factor > live_count:
                return INVALID_REPLICATION_FACTOR, (
                    f"replication factor {factor} larger than the {live_count} live brokers"
                )
        if self.context.metadata.has_topic(name):
            return TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists"
        return await self.context.topic_admin.create_topic(
            name, partitions, factor, assignment, validate_only, topic_configs=topic_configs
        )

    async def delete_topics(self, request: DecodedRequest) -> Response:
        """DeleteTopics v1-v3 through ZooKeeper; waits (bounded) until metadata drops it."""
        body = request.body
        timeout_seconds = max(body.timeout.total_seconds(), 0.0)
        results: list[dict[str, Any]] = []
        deleted: list[str] = []
        for name in body.topic_names:
            if not self._topic_allowed(AclOperation.DELETE, name):
                results.append({"name": name, "error_code": TOPIC_AUTHORIZATION_FAILED})
                continue
            if topic_name_error(name) is not None or not self.context.metadata.has_topic(name):
                results.append({"name": name, "error_code": UNKNOWN_TOPIC_OR_PARTITION})
                continue
            code = await self.context.topic_admin.delete_topic(name)
            if code == NONE:
                deleted.append(name)
            results.append({"name": name, "error_code": code})
        if deleted and timeout_seconds > 0:
            gone = await self._wait_metadata(
                lambda: not any(self.context.metadata.has_topic(name) for name in deleted),
                timeout_seconds,
            )
            if not gone:
                for result in results:
                    if result["name"] in deleted:
                        result["error_code"] = REQUEST_TIMED_OUT
        return self._answer(request, {**_throttle(), "responses": results})

    # --- InitProducerId --------------------------------------------------------------------

    async def init_producer_id(self, request: DecodedRequest) -> Response:
        """InitProducerId v0-v1 for idempotent producers (transactions are not supported)."""
        if request.body.transactional_id is not None:
            return self._answer(
                request,
                {**_throttle(), "error_code": TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                 "producer_id": -1, "producer_epoch": -1},
            )
        producer_id = await self.context.allocate_producer_id()
        return self._answer(
            request,
            {**_throttle(), "error_code": NONE, "producer_id": producer_id, "producer_epoch": 0},
        )

    # --- KIP-113 ---------------------------------------------------------------------------

    async def describe_log_dirs(self, request: DecodedRequest) -> Response:
        """DescribeLogDirs v1-v4 (KIP-113): per dir, its partitions, sizes and lags."""
        requested = request.body.topics
        topics: dict[str, set[int]] | None = None
        if requested is not None:
            topics = {}
            for topic in requested:
                topics.setdefault(topic.topic, set()).update(int(p) for p in topic.partitions)
        results = await self.context.log_dirs.describe_log_dirs(topics)
        entries = sum(len(topic["partitions"]) for result in results
                      for topic in result["topics"])
        return await self._answer_large(
            request, {**_throttle(), "error_code": NONE, "results": results}, entries)

    async def alter_replica_log_dirs(self, request: DecodedRequest) -> Response:
        """AlterReplicaLogDirs v1-v2 (KIP-113): the dir must be one of ``log.dirs`` exactly.

        A partition the cluster does not have (not in the metadata cache) is answered
        REPLICA_NOT_AVAILABLE, as Kafka answers a replica not hosted, but its dir is not
        remembered: Kafka remembers a dir for any name, so a request naming millions of
        made-up partitions grew the broker's memory without bound. A replica about to be
        created by a reassignment belongs to a partition the cache knows.
        """
        configured = set(self.context.config.log_dirs)
        cache = self.context.metadata
        by_topic: dict[str, list[dict[str, Any]]] = {}
        count = 0
        for entry in request.body.dirs:
            path = entry.path
            for topic in entry.topics:
                results = by_topic.setdefault(topic.name, [])
                bad_name = topic_name_error(topic.name) is not None
                for partition in topic.partitions:
                    count += 1
                    if count % YIELD_EVERY_ENTRIES == 0:
                        await trio.lowlevel.checkpoint()
                    if bad_name:
                        code = INVALID_TOPIC_EXCEPTION
                    elif path not in configured:
                        code = LOG_DIR_NOT_FOUND
                    elif cache.partition(topic.name, int(partition)) is None:
                        code = REPLICA_NOT_AVAILABLE
                    else:
                        code = self.context.log_dirs.alter_replica_log_dir(
                            TopicPartition(topic.name, int(partition)), path
                        )
                    results.append({"partition_index": partition, "error_code": code})
        return await self._answer_large(
            request,
            {
                **_throttle(),
                "results": [
                    {"topic_name": name, "partitions": partitions}
                    for name, partitions in by_topic.items()
                ],
            },
            count,
        )

    # --- KIP-879 CreateReplicaPlacement (the controller's codec) ----------------------------

    async def create_replica_placement(self, frame: bytes) -> Response:
        """CreateReplicaPlacement v0 (KIP-879): a placement from this broker's metadata.

        Raises:
            ValueError: the frame does not parse (the server closes the connection).
        """
        from kio.schema.request_header.v2.header import RequestHeader  # noqa: PLC0415

        from impl.controller import placement  # noqa: PLC0415
        from impl.ports import SeededRng  # noqa: PLC0415

        from ._wire_scan import scan  # noqa: PLC0415

        try:
            scan(RequestHeader, frame, 0)  # lengths checked before kio allocates
            header, size = _header_reader(RequestHeader)(frame, 0)
        except Exception as error:  # kio raises several types for bad bytes
            raise ValueError(f"CreateReplicaPlacement header: {error!r}") from None
        request = placement.decode_create_replica_placement_request(
            frame[size:], int(header.request_api_version)
        )
        cache = self.context.metadata
        assignments = {
            placement.TopicPartition(state.topic, state.partition): state.replicas
            for topic in cache.topics
            for state in cache.partitions(topic)
        }
        view = placement.ClusterView.of({b.broker_id: b.rack for b in cache.brokers}, assignments)
        seed = self._placement_seed
        self._placement_seed += 1
        try:
            placer = placement.load_replica_placer(self.context.config.replica_placer,
                                                   SeededRng(seed))
        except placement.PlacementError as error:
            response = placement.CreateReplicaPlacementResponse(
                error_code=error.error_code, error_message=str(error)
            )
        else:
            response = placement.handle_create_replica_placement(
                request, view, placer, SeededRng(seed)
            )
        return placement.response_frame(int(header.correlation_id), response)

    # --- controller to broker --------------------------------------------------------------

    async def controller_request(self, request: DecodedRequest) -> Response:
        """LeaderAndIsr, StopReplica, UpdateMetadata from the controller."""
        # Converting a request of tens of thousands of partitions, and encoding its answer,
        # are done in a worker thread (0.15 s each of the event loop for 20,000 partitions).
        large = controller_wire.partitions_in(request.body) > ENCODE_OFF_LOOP_ENTRIES
        if large:
            converted = await trio.to_thread.run_sync(
                controller_wire.request_from_wire, request.api_key, request.body)
        else:
            converted = controller_wire.request_from_wire(request.api_key, request.body)
        response = await self._apply_in_chunks(converted)

        def answer() -> bytes:
            return encode_response(
                request,
                controller_wire.response_to_wire(request.api_key, request.api_version, response),
            )
        return await trio.to_thread.run_sync(answer) if large else answer()

    async def _apply_in_chunks(self, converted: Any) -> Any:
        """:meth:`handle_controller_request`, a large LeaderAndIsr or StopReplica in chunks of
        :data:`CONTROLLER_CHUNK_PARTITIONS` partitions with a checkpoint between them (creating
        or deleting 2,000 logs at once stalled every client for tens of seconds). The node
        applies each partition's state on its own, so the chunks decide what the whole request
        would. A new controller's first LeaderAndIsr (the controller's INIT flag, which is not on
        the wire) is chunked alike: it names every partition the broker hosts."""
        import dataclasses  # noqa: PLC0415

        from impl.controller.requests import (  # noqa: PLC0415 (types only used here)
            ControllerResponse,
            LeaderAndIsrRequest,
            StopReplicaRequest,
        )

        items: Sequence[Any]
        if isinstance(converted, LeaderAndIsrRequest):
            field, items = "partition_states", converted.partition_states
        elif isinstance(converted, StopReplicaRequest):
            field, items = "partitions", converted.partitions
        else:
            return self.handle_controller_request(converted)
        if len(items) <= CONTROLLER_CHUNK_PARTITIONS:
            return self.handle_controller_request(converted)
        errors: dict[tuple[str, int], int] = {}
        for start in range(0, len(items), CONTROLLER_CHUNK_PARTITIONS):
            chunk = dataclasses.replace(
                converted, **{field: items[start : start + CONTROLLER_CHUNK_PARTITIONS]}
            )
            response = self.handle_controller_request(chunk)
            if response.error_code != NONE:
                return response
            errors.update(response.partition_errors)
            await trio.lowlevel.checkpoint()
        return ControllerResponse(partition_errors=errors)

    def handle_controller_request(self, converted: Any) -> Any:
        """Apply a controller request dataclass; returns the ``ControllerResponse``."""
        from impl.controller.requests import (  # noqa: PLC0415 (types only used here)
            ControllerResponse,
            LeaderAndIsrRequest,
            StopReplicaRequest,
        )

        replicas = self.context.replicas
        if self.context.on_controller_request is not None:
            self.context.on_controller_request(converted)
        if isinstance(converted, LeaderAndIsrRequest):
            return replicas.leader_and_isr(converted)
        if isinstance(converted, StopReplicaRequest):
            return replicas.stop_replica(converted)
        fenced = replicas.other_controller_request(converted)
        if fenced.error_code != NONE:
            return fenced
        self.context.on_update_metadata(converted)
        replicas.notify()
        return ControllerResponse()


def _header_reader(header_class: type[Any]) -> Any:
    from kio.serial import entity_reader  # noqa: PLC0415

    return entity_reader(header_class)


def metadata_brokers(live_brokers: Sequence[Any]) -> list[BrokerEndpoint]:
    """Metadata-cache endpoints from controller ``BrokerEndpoint`` dataclasses."""
    return [BrokerEndpoint(b.broker_id, b.host, b.port, b.rack, tuple(b.listeners))
            for b in live_brokers]


__all__ = [
    "ClusterRegistry",
    "HandlerContext",
    "LogDirs",
    "RequestHandlers",
    "TopicAdmin",
    "metadata_brokers",
]
