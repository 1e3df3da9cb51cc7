"""Admin request handlers: configs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs),
DescribeCluster, CreatePartitions and KIP-455's Alter/ListPartitionReassignments.

Each handler names the resource it acts on (a topic, or the cluster for broker configs) at
its top, where an authorizer hooks in. ZooKeeper is reached through the :class:`ConfigBackend`
port the broker implements (:mod:`impl.broker.config_store` carries the bytes); validation and
resolution are :mod:`impl.broker.configs`' decisions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

import trio

from impl.controller.coordinator import CoordinatorError
from impl.security import request_acls
from impl.security.authorizer import AclOperation, Resource
from impl.security.session import current_session
from impl.storage import TopicPartition

from . import admin_zk, api_versions, configs
from ._codec import DecodedRequest
from .configs import (
    AlterOp,
    BrokerLayers,
    ConfigEntry,
    InvalidConfigError,
    InvalidRequestError,
    ResourceType,
)
from .server import Response
from .topic_names import topic_name_error

if TYPE_CHECKING:
    from impl.controller.coordinator import Coordinator
    from impl.controller.placement import ReplicaPlacer
    from impl.ports import Rng

    from ._handlers import RequestHandlers

NONE: Final = 0
UNKNOWN_SERVER_ERROR: Final = -1
UNKNOWN_TOPIC_OR_PARTITION: Final = 3
INVALID_TOPIC_EXCEPTION: Final = 17
OFFSET_OUT_OF_RANGE: Final = 1
REQUEST_TIMED_OUT: Final = 7
KAFKA_STORAGE_ERROR: Final = 56
PREFERRED_LEADER_NOT_AVAILABLE: Final = 80
ELIGIBLE_LEADERS_NOT_AVAILABLE: Final = 83
ELECTION_NOT_NEEDED: Final = 84
NOT_CONTROLLER: Final = 41
ELECTION_PREFERRED: Final = 0
ELECTION_UNCLEAN: Final = 1
#: DeleteRecords' offset meaning "up to the high watermark"
DELETE_TO_HIGH_WATERMARK: Final = -1
INVALID_PARTITIONS: Final = 37
INVALID_CONFIG: Final = 40
INVALID_REQUEST: Final = 42
UNSUPPORTED_ENDPOINT_TYPE: Final = 118
#: ``cluster_authorized_operations`` when the client did not ask for them (Kafka's INT_MIN)
CLUSTER_OPERATIONS_OMITTED: Final = -(2**31)
#: The most partitions one topic may grow to (the CreateTopics bound).
PARTITIONS_PER_TOPIC_MAX: Final = 100_000


class ConfigBackend(Protocol):
    """``/config`` as the config handlers need it (the broker's ZooKeeper shell)."""

    def layers(self) -> BrokerLayers:
        """This broker's config layers as last read."""

    async def topic_exists(self, topic: str) -> bool:
        """Whether ``/brokers/topics/<t>`` exists."""

    async def read(self, resource: ResourceType, name: str) -> dict[str, str]:
        """An entity's stored dynamic config (read from ZooKeeper)."""

    async def write(
        self, resource: ResourceType, name: str, update: Callable[[dict[str, str]], dict[str, str]]
    ) -> dict[str, str]:
        """Read-modify-write an entity's config and announce it under ``/config/changes``."""

    def coordinator(self) -> Coordinator:
        """The ZooKeeper port (raises :class:`BackendError` when not connected)."""

    def placer(self) -> tuple[ReplicaPlacer, Rng]:
        """The cluster's replica placer (KIP-879) with a fresh seeded generator."""

    async def elect_unclean(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """ElectLeaders UNCLEAN through this broker's controller: one Kafka error code per
        partition (NOT_CONTROLLER everywhere when this broker is not the controller)."""


class BackendError(Exception):
    """ZooKeeper could not be read or written (UNKNOWN_SERVER_ERROR to the client)."""


class _ResourceError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _describe_entry(entry: ConfigEntry, with_documentation: bool) -> dict[str, Any]:
    return {
        "name": entry.name,
        "value": entry.value,
        "read_only": entry.read_only,
        "is_default": entry.is_default,
        "config_source": int(entry.source),
        "is_sensitive": entry.sensitive,
        "synonyms": [
            {"name": s.name, "value": s.value, "source": int(s.source)} for s in entry.synonyms
        ],
        "config_type": int(entry.type),
        "documentation": entry.doc if with_documentation else None,
    }


class AdminHandlers:
    """The admin APIs, registered into :class:`~impl.broker._handlers.RequestHandlers`."""

    def __init__(self, handlers: RequestHandlers, backend: ConfigBackend | None) -> None:
        self._handlers = handlers
        self._backend = backend
        self._broker_id = handlers.context.config.broker_id

    def table(self) -> dict[int, Callable[[DecodedRequest], Awaitable[Response | None]]]:
        """API key → handler, for the APIs this class serves."""
        return {
            api_versions.DESCRIBE_CONFIGS: self.describe_configs,
            api_versions.ALTER_CONFIGS: self.alter_configs,
            api_versions.INCREMENTAL_ALTER_CONFIGS: self.incremental_alter_configs,
            api_versions.DESCRIBE_CLUSTER: self.describe_cluster,
            api_versions.CREATE_PARTITIONS: self.create_partitions,
            api_versions.ALTER_PARTITION_REASSIGNMENTS: self.alter_partition_reassignments,
            api_versions.LIST_PARTITION_REASSIGNMENTS: self.list_partition_reassignments,
            api_versions.DELETE_RECORDS: self.delete_records,
            api_versions.ELECT_LEADERS: self.elect_leaders,
        }

    @property
    def backend(self) -> ConfigBackend:
        """The ZooKeeper port.

        Raises:
            BackendError: the broker runs without one (a test harness).
        """
        if self._backend is None:
            raise BackendError("this broker has no ZooKeeper connection for configs")
        return self._backend

    def _answer(self, request: DecodedRequest, data: Mapping[str, Any]) -> bytes:
        return self._handlers._answer(request, dict(data))

    # --- resources ---------------------------------------------------------------------------

    def _authorize(self, operation: AclOperation, resource: Resource) -> None:
        """Raise the resource type's ``*_AUTHORIZATION_FAILED`` unless the session may act:
        each resource a request names is decided alone, so the allowed ones are served."""
        if not self._handlers.context.allowed(operation, resource):
            raise _ResourceError(request_acls.DENIAL_CODES[resource.resource_type],
                                 f"{operation.name} on {resource.resource_type.name} "
                                 f"{resource.name!r} is not authorized")

    def _topic_allowed(self, operation: AclOperation, name: str) -> bool:
        return self._handlers.context.topic_allowed(operation, name)

    async def _topic(self, name: str) -> None:
        """Resource: Topic ``name``. Raises for a bad name or an unknown topic."""
        reason = topic_name_error(name) if name else "topic name must not be empty"
        if reason is not None:
            raise _ResourceError(INVALID_TOPIC_EXCEPTION, reason)
        if not await self.backend.topic_exists(name):
            raise _ResourceError(UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")

    def _broker_entity(self, name: str) -> str:
        """Resource: Cluster. A broker config entity: ``""`` is ``<default>``, else this id."""
        if name in ("", configs.DEFAULT_BROKER):
            return configs.DEFAULT_BROKER
        if name != str(self._broker_id):
            raise _ResourceError(
                INVALID_REQUEST,
                f"Unexpected broker id, expected {self._broker_id} or empty string, but received "
                f"{name}",
            )
        return name

    # --- DescribeConfigs ---------------------------------------------------------------------

    async def describe_configs(self, request: DecodedRequest) -> Response:
        """DescribeConfigs v0-v4: topic and broker configs with sources and synonyms."""
        body = request.body
        with_synonyms = bool(getattr(body, "include_synonyms", False))
        with_documentation = bool(getattr(body, "include_documentation", False))
        results: list[dict[str, Any]] = []
        for resource in body.resources:
            kind = int(resource.resource_type)
            keys = resource.configuration_keys
            result: dict[str, Any] = {
                "resource_type": kind, "resource_name": resource.resource_name,
                "error_code": NONE, "error_message": None, "configs": [],
            }
            try:
                self._authorize(AclOperation.DESCRIBE_CONFIGS,
                                request_acls.config_resource(kind, resource.resource_name))
                entries = await self._describe_one(kind, resource.resource_name, keys,
                                                   with_synonyms)
                result["configs"] = [_describe_entry(e, with_documentation) for e in entries]
            except _ResourceError as error:
                result.update(error_code=error.code, error_message=error.message)
            except BackendError as error:
                result.update(error_code=UNKNOWN_SERVER_ERROR, error_message=str(error))
            results.append(result)
        return self._answer(request, {"throttle_time": 0, "results": results})

    async def _describe_one(
        self, kind: int, name: str, keys: Any, with_synonyms: bool
    ) -> list[ConfigEntry]:
        key_list = None if keys is None else [str(key) for key in keys]
        if kind == ResourceType.TOPIC:
            await self._topic(name)
            overrides = await self.backend.read(ResourceType.TOPIC, name)
            return configs.describe_topic(overrides, self.backend.layers(), key_list,
                                          with_synonyms=with_synonyms)
        if kind == ResourceType.BROKER:
            entity = self._broker_entity(name)
            layers = self.backend.layers()
            if entity == configs.DEFAULT_BROKER:
                layers = BrokerLayers(default=await self.backend.read(ResourceType.BROKER, entity))
            return configs.describe_broker(
                layers, key_list, describing_default=entity == configs.DEFAULT_BROKER,
                with_synonyms=with_synonyms,
            )
        raise _ResourceError(INVALID_REQUEST, f"unsupported config resource type {kind}")

    # --- AlterConfigs, IncrementalAlterConfigs ------------------------------------------------

    async def _entity(self, kind: int, name: str) -> tuple[ResourceType, str]:
        if kind == ResourceType.TOPIC:
            await self._topic(name)
            return ResourceType.TOPIC, name
        if kind == ResourceType.BROKER:
            return ResourceType.BROKER, self._broker_entity(name)
        raise _ResourceError(INVALID_REQUEST, f"unsupported config resource type {kind}")

    async def _alter_each(
        self,
        request: DecodedRequest,
        make_update: Callable[
            [Any, ResourceType, str], Callable[[dict[str, str]], dict[str, str]]
        ],
    ) -> Response:
        body = request.body
        validate_only = bool(body.validate_only)
        seen: set[tuple[int, str]] = set()
        responses: list[dict[str, Any]] = []
        for resource in body.resources:
            kind, name = int(resource.resource_type), resource.resource_name
            result: dict[str, Any] = {"resource_type": kind, "resource_name": name,
                                      "error_code": NONE, "error_message": None}
            try:
                if (kind, name) in seen:
                    raise _ResourceError(INVALID_REQUEST,
                                         f"resource {name!r} appears more than once")
                seen.add((kind, name))
                self._authorize(AclOperation.ALTER_CONFIGS,
                                request_acls.config_resource(kind, name))
                resource_type, entity = await self._entity(kind, name)
                update = make_update(resource, resource_type, entity)
                if validate_only:
                    update(await self.backend.read(resource_type, entity))
                else:
                    await self.backend.write(resource_type, entity, update)
            except _ResourceError as error:
                result.update(error_code=error.code, error_message=error.message)
            except InvalidConfigError as error:
                result.update(error_code=INVALID_CONFIG, error_message=str(error))
            except InvalidRequestError as error:
                result.update(error_code=INVALID_REQUEST, error_message=str(error))
            except BackendError as error:
                result.update(error_code=UNKNOWN_SERVER_ERROR, error_message=str(error))
            responses.append(result)
        return self._answer(request, {"throttle_time": 0, "responses": responses})

    async def alter_configs(self, request: DecodedRequest) -> Response:
        """AlterConfigs v0-v2: replace an entity's whole dynamic config (omitted keys revert)."""

        def make_update(
            resource: Any, resource_type: ResourceType, entity: str
        ) -> Callable[[dict[str, str]], dict[str, str]]:
            configs.check_unique(item.name for item in resource.configs)
            new = configs.alter(resource_type, {item.name: item.value
                                                for item in resource.configs})
            return lambda current: new

        return await self._alter_each(request, make_update)

    async def incremental_alter_configs(self, request: DecodedRequest) -> Response:
        """IncrementalAlterConfigs v0-v1 (KIP-339): SET, DELETE, APPEND, SUBTRACT per key."""
        layers = self._backend.layers() if self._backend is not None else BrokerLayers()

        def make_update(
            resource: Any, resource_type: ResourceType, entity: str
        ) -> Callable[[dict[str, str]], dict[str, str]]:
            operations: list[tuple[str, AlterOp, str | None]] = []
            for item in resource.configs:
                try:
                    op = AlterOp(int(item.config_operation))
                except ValueError:
                    raise InvalidRequestError(
                        f"unknown config operation {int(item.config_operation)} for "
                        f"{item.name}") from None
                operations.append((item.name, op, item.value))

            def effective(key: str) -> str | None:
                if resource_type is ResourceType.TOPIC and key in configs.TOPIC_CONFIGS:
                    return configs.topic_entry(key, {}, layers).value
                return layers.broker_value(key)

            return lambda current: configs.incremental_alter(
                resource_type, current, operations, effective)

        return await self._alter_each(request, make_update)

    # --- DescribeCluster ----------------------------------------------------------------------

    async def describe_cluster(self, request: DecodedRequest) -> Response:
        """DescribeCluster v0-v1 (KIP-700). Resource: Cluster."""
        cache = self._handlers.context.metadata
        brokers, controller_id = cache.brokers, cache.controller_id
        if controller_id < 0:
            brokers, controller_id = await self._handlers._registered_view(brokers)
        endpoint_type = int(getattr(request.body, "endpoint_type", 1))
        if endpoint_type != 1:
            return self._answer(request, {
                "throttle_time": 0, "error_code": UNSUPPORTED_ENDPOINT_TYPE,
                "error_message": "only broker endpoints are described", "endpoint_type":
                endpoint_type, "cluster_id": "", "controller_id": -1, "brokers": [],
                "cluster_authorized_operations": CLUSTER_OPERATIONS_OMITTED,
            })
        # each broker at its endpoint on the request's listener; one without it is left out
        listener = current_session().listener
        described = []
        for broker in sorted(brokers, key=lambda b: b.broker_id):
            address = self._handlers.context.endpoint_on(broker, listener)
            if address is not None:
                described.append({"broker_id": broker.broker_id, "host": address[0],
                                  "port": address[1], "rack": broker.rack})
        return self._answer(request, {
            "throttle_time": 0, "error_code": NONE, "error_message": None,
            "endpoint_type": endpoint_type,
            "cluster_id": self._handlers.context.config.cluster_id,
            "controller_id": controller_id,
            "brokers": described,
            "cluster_authorized_operations": CLUSTER_OPERATIONS_OMITTED,
        })

    # --- CreatePartitions ---------------------------------------------------------------------

    async def create_partitions(self, request: DecodedRequest) -> Response:
        """CreatePartitions v0-v3: grow topics, placed by the cluster's placer (KIP-879) unless
        the request names the replicas; waits (bounded) until metadata shows them. Resource:
        each Topic."""
        body = request.body
        timeout_seconds = max(body.timeout.total_seconds(), 0.0)
        validate_only = bool(body.validate_only)
        names = [topic.name for topic in body.topics]
        results: list[dict[str, Any]] = []
        grown: dict[str, int] = {}
        live = await self._handlers._live_broker_ids(lambda ids: True)
        for topic in body.topics:
            name, count = topic.name, int(topic.count)
            code, message = NONE, None
            reason = topic_name_error(name)
            if reason is not None:
                code, message = INVALID_TOPIC_EXCEPTION, reason
            elif names.count(name) > 1:
                code, message = INVALID_REQUEST, f"topic {name!r} appears more than once"
            elif not self._topic_allowed(AclOperation.ALTER, name):
                code = request_acls.TOPIC_AUTHORIZATION_FAILED
                message = f"ALTER on topic {name!r} is not authorized"
            elif count > PARTITIONS_PER_TOPIC_MAX:
                code, message = INVALID_PARTITIONS, f"more than {PARTITIONS_PER_TOPIC_MAX}"
            else:
                assignment = None
                if topic.assignments is not None:
                    assignment = {index: tuple(int(b) for b in item.broker_ids)
                                  for index, item in enumerate(topic.assignments)}
                try:
                    placer, rng = self.backend.placer()
                    code, message = await admin_zk.create_partitions(
                        self.backend.coordinator(), name, count, assignment, placer=placer,
                        rng=rng, live_brokers=live, validate_only=validate_only)
                except BackendError as error:
                    code, message = UNKNOWN_SERVER_ERROR, str(error)
                except CoordinatorError as error:
                    code, message = UNKNOWN_SERVER_ERROR, f"ZooKeeper: {error!r}"
                if code == NONE and not validate_only:
                    grown[name] = count
            results.append({"name": name, "error_code": code, "error_message": message})
        if grown and timeout_seconds > 0:
            cache = self._handlers.context.metadata

            def ready() -> bool:
                return all(
                    len([p for p in cache.partitions(name) if p.leader >= 0]) >= count
                    for name, count in grown.items()
                )

            if not await self._handlers._wait_metadata(ready, timeout_seconds):
                for result in results:
                    if result["name"] in grown:
                        result["error_code"] = REQUEST_TIMED_OUT
                        result["error_message"] = "partitions created; metadata not yet updated"
        return self._answer(request, {"throttle_time": 0, "results": results})

    # --- KIP-455 reassignments ----------------------------------------------------------------

    async def alter_partition_reassignments(self, request: DecodedRequest) -> Response:
        """AlterPartitionReassignments v0 (KIP-455) through ``/admin/reassign_partitions``.
        Resource: Cluster."""
        requested: dict[tuple[str, int], tuple[int, ...] | None] = {}
        duplicate: set[tuple[str, int]] = set()
        for topic in request.body.topics:
            for item in topic.partitions:
                tp = (topic.name, int(item.partition_index))
                if tp in requested:
                    duplicate.add(tp)
                requested[tp] = (None if item.replicas is None
                                 else tuple(int(b) for b in item.replicas))
        try:
            live = await self._handlers._live_broker_ids(lambda ids: True)
            outcome = await admin_zk.alter_reassignments(
                self.backend.coordinator(),
                {tp: r for tp, r in requested.items() if tp not in duplicate}, live)
            top_code, top_message = NONE, None
        except (BackendError, CoordinatorError) as error:
            outcome, top_code, top_message = {}, UNKNOWN_SERVER_ERROR, str(error)
        for tp in duplicate:
            outcome[tp] = (INVALID_REQUEST, f"{tp[0]}-{tp[1]} appears more than once")
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (name, partition), (code, message) in sorted(outcome.items()):
            by_topic.setdefault(name, []).append(
                {"partition_index": partition, "error_code": code, "error_message": message})
        return self._answer(request, {
            "throttle_time": 0, "error_code": top_code, "error_message": top_message,
            "responses": [{"name": name, "partitions": partitions}
                          for name, partitions in by_topic.items()],
        })

    async def list_partition_reassignments(self, request: DecodedRequest) -> Response:
        """ListPartitionReassignments v0 (KIP-455). Resource: Cluster."""
        topics = request.body.topics
        wanted = None if topics is None else {
            t.name: [int(p) for p in t.partition_indexes] for t in topics}
        try:
            ongoing = await admin_zk.list_reassignments(self.backend.coordinator(), wanted)
            code, message = NONE, None
        except (BackendError, CoordinatorError) as error:
            ongoing, code, message = {}, UNKNOWN_SERVER_ERROR, str(error)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (name, partition), item in sorted(ongoing.items()):
            by_topic.setdefault(name, []).append({
                "partition_index": partition, "replicas": list(item.replicas),
                "adding_replicas": list(item.adding), "removing_replicas": list(item.removing),
            })
        return self._answer(request, {
            "throttle_time": 0, "error_code": code, "error_message": message,
            "topics": [{"name": name, "partitions": partitions}
                       for name, partitions in by_topic.items()],
        })

    # --- DeleteRecords ------------------------------------------------------------------------

    async def delete_records(self, request: DecodedRequest) -> Response:
        """DeleteRecords v0-v2: move each partition's log start offset up (``-1`` means the
        HW), durably on the leader, and answer once every ISR member's log start offset has
        followed (Kafka's DelayedDeleteRecords), or REQUEST_TIMED_OUT after the request's
        timeout. The broker node decides (:class:`~impl.broker.node.DeleteRecords`).
        Resource: each Topic."""
        replicas = self._handlers.context.replicas
        # Kafka's handleDeleteRecordsRequest: DELETE on each topic
        deletable = {topic.name for topic in request.body.topics
                     if self._topic_allowed(AclOperation.DELETE, topic.name)}
        wanted: dict[TopicPartition, int] = {}
        for topic in request.body.topics:
            if topic_name_error(topic.name) is not None or topic.name not in deletable:
                continue
            for item in topic.partitions:
                wanted[TopicPartition(topic.name, int(item.partition_index))] = int(item.offset)
        timeout_ms = max(int(request.body.timeout.total_seconds() * 1000), 0)
        answers = await replicas.delete_records(wanted, timeout_ms)
        topics: list[dict[str, Any]] = []
        for topic in request.body.topics:
            results: list[dict[str, Any]] = []
            for item in topic.partitions:
                partition = int(item.partition_index)
                answer = answers.get(TopicPartition(topic.name, partition))
                if topic.name not in deletable:
                    code, low_watermark = request_acls.TOPIC_AUTHORIZATION_FAILED, -1
                elif answer is None:
                    code, low_watermark = UNKNOWN_TOPIC_OR_PARTITION, -1
                else:
                    code, low_watermark = answer.error, answer.low_watermark
                results.append({"partition_index": partition, "low_watermark": low_watermark,
                                "error_code": code})
            topics.append({"name": topic.name, "partitions": results})
        return self._answer(request, {"throttle_time": 0, "topics": topics})

    # --- ElectLeaders -------------------------------------------------------------------------

    async def elect_leaders(self, request: DecodedRequest) -> Response:
        """ElectLeaders v0-v2 (KIP-460). Resource: Cluster.

        A preferred election is asked of the controller through
        ``/admin/preferred_replica_election`` (ZooKeeper-era Kafka's znode); the answer waits,
        bounded by the request's timeout, until the metadata shows each partition led by its
        preferred replica. An unclean election is asked of this broker's controller, as Kafka's
        brokers do (clients send ElectLeaders to the controller; another broker answers
        NOT_CONTROLLER): the controller elects a live replica outside the ISR for each partition
        without a live leader and ISR member (NONE), answers ELECTION_NOT_NEEDED when a live
        leader exists and ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is live; the answer
        then waits, bounded, for the metadata to show the new leader (Kafka's
        DelayedElectLeader).
        """
        body = request.body
        election_type = int(getattr(body, "election_type", ELECTION_PREFERRED))
        timeout_seconds = max(body.timeout.total_seconds(), 0.0)
        cache = self._handlers.context.metadata
        if body.topic_partitions is None:
            wanted = [(name, state.partition) for name in cache.topics
                      for state in cache.partitions(name)]
        else:
            wanted = [(item.topic, int(p)) for item in body.topic_partitions
                      for p in item.partitions]
        outcome: dict[tuple[str, int], tuple[int, str | None]] = {}
        to_elect: list[tuple[str, int]] = []
        unclean: list[tuple[str, int]] = []
        from ._handlers import YIELD_EVERY_ENTRIES  # noqa: PLC0415 (it imports this module)

        for index, (topic, partition) in enumerate(dict.fromkeys(wanted)):
            if index and not index % YIELD_EVERY_ENTRIES:  # (every partition, when null)
                await trio.lowlevel.checkpoint()
            state = cache.partition(topic, partition)
            if state is None:
                outcome[(topic, partition)] = (UNKNOWN_TOPIC_OR_PARTITION, None)
            elif election_type == ELECTION_UNCLEAN:
                unclean.append((topic, partition))
            elif election_type != ELECTION_PREFERRED:
                outcome[(topic, partition)] = (INVALID_REQUEST,
                                               f"unknown election type {election_type}")
            elif state.replicas and state.leader == state.replicas[0]:
                outcome[(topic, partition)] = (ELECTION_NOT_NEEDED, None)
            elif not state.replicas or state.replicas[0] not in state.isr:
                outcome[(topic, partition)] = (
                    PREFERRED_LEADER_NOT_AVAILABLE,
                    f"the preferred replica of {topic}-{partition} is not in the ISR")
            else:
                to_elect.append((topic, partition))
        if unclean:
            outcome.update(await self._elect_unclean(unclean, timeout_seconds))
            if all(code == NOT_CONTROLLER for code, _ in outcome.values()):
                # the whole request went to the wrong broker: clients refresh and retry
                return await self._election_answer(request, NOT_CONTROLLER, outcome)
        top_code = NONE
        if to_elect:
            try:
                await admin_zk.request_preferred_election(
                    self.backend.coordinator(), to_elect, timeout_seconds)
            except (BackendError, CoordinatorError, admin_zk.ElectionBusyError) as error:
                top_code = UNKNOWN_SERVER_ERROR
                for tp in to_elect:
                    outcome[tp] = (UNKNOWN_SERVER_ERROR, str(error))
            else:
                def elected() -> bool:
                    for topic, partition in to_elect:
                        state = cache.partition(topic, partition)
                        if state is None or not state.replicas or (
                                state.leader != state.replicas[0]):
                            return False
                    return True

                await self._handlers._wait_metadata(elected, timeout_seconds)
                for topic, partition in to_elect:
                    state = cache.partition(topic, partition)
                    if state is not None and state.replicas and state.leader == state.replicas[0]:
                        outcome[(topic, partition)] = (NONE, None)
                    else:
                        outcome[(topic, partition)] = (
                            REQUEST_TIMED_OUT, "the election did not complete in time")
        return await self._election_answer(request, top_code, outcome)

    async def _election_answer(self, request: DecodedRequest, top_code: int,
                               outcome: Mapping[tuple[str, int], tuple[int, str | None]]
                               ) -> Response:
        """The answer, built and encoded in a worker thread beyond ``ENCODE_OFF_LOOP_ENTRIES``
        partitions (an ElectLeaders of every partition of a 32,767-partition topic held the
        event loop for 0.3-0.5 s building it)."""
        from ._handlers import ENCODE_OFF_LOOP_ENTRIES  # noqa: PLC0415 (it imports this module)

        def answer() -> bytes:
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for (topic, partition), (code, message) in sorted(outcome.items()):
                by_topic.setdefault(topic, []).append(
                    {"partition_id": partition, "error_code": code, "error_message": message})
            return self._answer(request, {
                "throttle_time": 0, "error_code": top_code,
                "replica_election_results": [{"topic": topic, "partition_result": results}
                                             for topic, results in by_topic.items()],
            })

        if len(outcome) <= ENCODE_OFF_LOOP_ENTRIES:
            return answer()
        return await trio.to_thread.run_sync(answer)

    async def _elect_unclean(self, partitions: list[tuple[str, int]], timeout_seconds: float
                             ) -> dict[tuple[str, int], tuple[int, str | None]]:
        """Ask the controller, then wait (bounded) for the elected leaders' metadata."""
        cache = self._handlers.context.metadata
        outcome: dict[tuple[str, int], tuple[int, str | None]] = {}
        deadline = trio.current_time() + timeout_seconds
        codes: dict[tuple[str, int], int] | None = None
        with trio.move_on_at(deadline):
            codes = await self.backend.elect_unclean(partitions)
        if codes is None:
            return dict.fromkeys(
                partitions, (REQUEST_TIMED_OUT, "the controller did not answer in time"))
        messages = {
            NOT_CONTROLLER: "this broker is not the controller",
            ELIGIBLE_LEADERS_NOT_AVAILABLE: "no replica of the partition is live",
            ELECTION_NOT_NEEDED: "the partition has a live leader",
        }
        for tp in partitions:
            code = codes.get(tp, NOT_CONTROLLER)
            outcome[tp] = (code, messages.get(code))
        elected = [tp for tp in partitions if outcome[tp][0] == NONE]

        def visible() -> bool:
            for topic, partition in elected:
                state = cache.partition(topic, partition)
                if state is None or state.leader < 0:
                    return False
            return True

        await self._handlers._wait_metadata(visible, max(deadline - trio.current_time(), 0.0))
        for topic, partition in elected:
            state = cache.partition(topic, partition)
            if state is None or state.leader < 0:
                outcome[(topic, partition)] = (
                    REQUEST_TIMED_OUT, "the new leader was not in the metadata in time")
        return outcome
