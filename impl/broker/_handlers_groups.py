"""The group APIs on the wire, and the trio pump of the group coordinator.

Each handler turns a kio request into an input of :class:`impl.broker.group_coordinator.
GroupCoordinator`, waits for the ``Respond`` effect that answers it, and describes the response
for :func:`impl.broker._kio_build.build` (one description for every version). The coordinator
is hosted by the broker node (:mod:`impl.broker.node_groups`), which loads and unloads the
``__consumer_offsets`` partitions it leads and carries the coordinator's writes as acks=all
produces; :class:`GroupService` steps requests and ticks into the node through the replica
manager. It decides nothing about groups.

Resources for authorization: FindCoordinator names a Group (DESCRIBE); JoinGroup, SyncGroup,
Heartbeat, LeaveGroup and OffsetCommit a Group (READ, commits also the Topic); OffsetFetch and
DescribeGroups a Group (DESCRIBE); DeleteGroups and OffsetDelete a Group (DELETE); ListGroups
the Cluster (DESCRIBE). Each handler reads the group id first, in ``_group_id``.
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import trio

from impl.security.authorizer import CLUSTER, AclOperation, Resource, ResourceType
from impl.security.request_acls import (
    DENIAL_CODES,
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    coordinator_resource,
)
from impl.security.session import current_session

from . import api_versions, group_records
from . import group_coordinator as gc
from ._codec import DecodedRequest, encode_response
from ._kio_build import build
from .server import ConnectionInfo, Response

if TYPE_CHECKING:
    from ._handlers import HandlerContext

log = logging.getLogger(__name__)

NONE: Final = 0
INVALID_REQUEST: Final = 42
TOPIC_ALREADY_EXISTS: Final = 36
#: FindCoordinator key types.
KEY_TYPE_GROUP: Final = 0
KEY_TYPE_TRANSACTION: Final = 1
#: ``__consumer_offsets``'s topic configs, as Kafka creates it.
OFFSETS_TOPIC_CONFIGS: Final[Mapping[str, str]] = {
    "cleanup.policy": "compact", "segment.bytes": "104857600",
}
#: How often the coordinator is ticked (session, rebalance and retention deadlines).
TICK_SECONDS: Final = 0.1

GroupHandler = Callable[[DecodedRequest, ConnectionInfo], Awaitable[Response | None]]


def _millis(value: Any) -> int:
    """A kio duration (``timedelta``) or integer in milliseconds."""
    if hasattr(value, "total_seconds"):
        milliseconds: int = round(value.total_seconds() * 1000)
        return milliseconds
    return int(value)


def _wall_ms() -> int:
    return int(time.time() * 1000)


class GroupService:
    """The trio side of the group coordinator, which the broker node hosts
    (:mod:`impl.broker.node_groups`): the node loads and unloads ``__consumer_offsets``
    partitions as it gains and loses their leadership and carries the coordinator's writes as
    its own acks=all produces; this service builds the coordinator, steps requests into the node
    through the replica manager, ticks it and runs the appends to ``__consumer_offsets`` in
    tasks of their own.

    Args:
        context: the broker's handler context (config, metadata, replica manager, topic admin).
    """

    def __init__(self, context: HandlerContext) -> None:
        self.context = context
        config = context.config
        self.partition_count = config.offsets_topic_num_partitions
        self.coordinator = gc.GroupCoordinator(
            config.broker_id,
            gc.CoordinatorConfig(
                offsets_partitions=config.offsets_topic_num_partitions,
                min_session_timeout_ms=config.group_min_session_timeout_ms,
                max_session_timeout_ms=config.group_max_session_timeout_ms,
                initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
                max_size=config.group_max_size,
                offset_metadata_max_bytes=config.offset_metadata_max_bytes,
                offsets_retention_ms=config.offsets_retention_ms,
                offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
            ),
            new_member_suffix=lambda: str(uuid.uuid4()),
            trace=context.replicas.trace,
        )
        context.replicas.host_groups(self.coordinator, config.offsets_commit_timeout_ms)
        self._request_ids = itertools.count(1)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        """Tick the coordinator and carry out appends to ``__consumer_offsets`` until
        cancelled."""
        replicas = self.context.replicas
        async with trio.open_nursery() as nursery:
            replicas.spawn = nursery.start_soon
            task_status.started()
            try:
                host = replicas.node.groups
                while True:
                    await replicas.group_tick()
                    # a load under way reads its next chunk at once (other tasks run between)
                    await trio.sleep(0 if host is not None and host.reading() else TICK_SECONDS)
            finally:
                replicas.spawn = None

    async def call(self, request: gc.Request) -> Mapping[str, Any]:
        """Step a request in and wait for its answer."""
        return await self.context.replicas.group_call(request)

    def next_id(self) -> int:
        """A fresh request id."""
        return next(self._request_ids)


class GroupHandlers:
    """The group APIs (registered by :class:`impl.broker._handlers.RequestHandlers`)."""

    def __init__(self, context: HandlerContext) -> None:
        self.context = context
        self.service = GroupService(context)

    def handlers(self) -> dict[int, GroupHandler]:
        """API key -> handler."""
        return {
            api_versions.FIND_COORDINATOR: self.find_coordinator,
            api_versions.JOIN_GROUP: self.join_group,
            api_versions.SYNC_GROUP: self.sync_group,
            api_versions.HEARTBEAT: self.heartbeat,
            api_versions.LEAVE_GROUP: self.leave_group,
            api_versions.OFFSET_COMMIT: self.offset_commit,
            api_versions.OFFSET_FETCH: self.offset_fetch,
            api_versions.LIST_GROUPS: self.list_groups,
            api_versions.DESCRIBE_GROUPS: self.describe_groups,
            api_versions.DELETE_GROUPS: self.delete_groups,
            api_versions.OFFSET_DELETE: self.offset_delete,
        }

    @staticmethod
    def _answer(request: DecodedRequest, data: dict[str, Any]) -> bytes:
        data.setdefault("throttle_time", 0)
        return encode_response(request, build(request.response_class, data))

    # --- FindCoordinator ---------------------------------------------------------------

    async def find_coordinator(self, request: DecodedRequest, info: ConnectionInfo) -> Response:
        """FindCoordinator v0-v4: the leader of the group's offsets partition, creating
        ``__consumer_offsets`` on first use; transactional ids answer INVALID_REQUEST."""
        body = request.body
        key_type = getattr(body, "key_type", KEY_TYPE_GROUP)
        keys = list(getattr(body, "coordinator_keys", None) or [getattr(body, "key", "")])
        answers = [await self._coordinator_of(key, key_type) for key in keys]
        if request.api_version >= 4:
            return self._answer(request, {"coordinators": answers})
        first = answers[0]
        return self._answer(request, {key: value for key, value in first.items() if key != "key"})

    async def _coordinator_of(self, key: str, key_type: int) -> dict[str, Any]:
        def error(code: int, message: str) -> dict[str, Any]:
            return {"key": key, "error_code": code, "error_message": message, "node_id": -1,
                    "host": "", "port": -1}

        # Kafka: DESCRIBE on the group (or transactional id) of each key, decided per key
        resource = coordinator_resource(key_type, key)
        if not self.context.allowed(AclOperation.DESCRIBE, resource):
            return error(DENIAL_CODES[resource.resource_type],
                         f"DESCRIBE on {resource.resource_type.name} {key!r} is not authorized")
        if key_type == KEY_TYPE_TRANSACTION:
            return error(INVALID_REQUEST, "transactions are not supported by this broker")
        if key_type != KEY_TYPE_GROUP:
            return error(INVALID_REQUEST, f"unknown coordinator key type {key_type}")
        if not key:
            return error(gc.INVALID_GROUP_ID, "the group id is empty")
        metadata = self.context.metadata
        if not metadata.has_topic(gc.OFFSETS_TOPIC):
            await self._create_offsets_topic()
            return error(gc.COORDINATOR_NOT_AVAILABLE, "the offsets topic is being created")
        count = len(metadata.partitions(gc.OFFSETS_TOPIC)) or self.service.partition_count
        partition = group_records.partition_for(key, count)
        state = metadata.partition(gc.OFFSETS_TOPIC, partition)
        broker = metadata.broker(state.leader) if state is not None else None
        if broker is None:
            return error(gc.COORDINATOR_NOT_AVAILABLE, "the group's offsets partition has no "
                         "leader")
        # the coordinator's endpoint on the listener this request came in on (Kafka answers
        # COORDINATOR_NOT_AVAILABLE when the coordinator has no such listener)
        address = self.context.endpoint_on(broker, current_session().listener)
        if address is None:
            return error(gc.COORDINATOR_NOT_AVAILABLE, "the coordinator has no endpoint on "
                         "this listener")
        return {"key": key, "error_code": NONE, "error_message": None,
                "node_id": broker.broker_id, "host": address[0], "port": address[1]}

    async def _create_offsets_topic(self) -> None:
        config = self.context.config
        live = len(self.context.metadata.brokers)
        registry = self.context.registry
        if registry is not None:
            registered = await registry.registered_brokers()
            if registered is not None:
                live = max(live, len(registered))
        factor = max(1, min(config.offsets_topic_replication_factor, live))
        # Compacted, never deleted by retention: an idle group's offsets must outlive
        # log.retention.ms (they expire by offsets.retention.minutes instead).
        code, message = await self.context.topic_admin.create_topic(
            gc.OFFSETS_TOPIC, config.offsets_topic_num_partitions, factor, None, False,
            topic_configs=dict(OFFSETS_TOPIC_CONFIGS))
        if code not in (NONE, TOPIC_ALREADY_EXISTS):
            log.warning("creating %s failed: %s %s", gc.OFFSETS_TOPIC, code, message)

    # --- membership --------------------------------------------------------------------

    async def join_group(self, request: DecodedRequest, info: ConnectionInfo) -> Response:
        """JoinGroup v0-v7."""
        body = request.body
        session_ms = _millis(body.session_timeout)
        rebalance = getattr(body, "rebalance_timeout", None)
        answer = await self.service.call(gc.JoinGroup(
            request_id=self.service.next_id(), group_id=body.group_id, member_id=body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
            client_id=request.client_id or "", client_host=f"/{info.peer.rsplit(':', 1)[0]}",
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=session_ms if rebalance is None else _millis(rebalance),
            protocol_type=body.protocol_type,
            protocols=tuple((p.name, bytes(p.metadata)) for p in body.protocols),
            require_known_member_id=request.api_version >= 4,
        ))
        data = dict(answer)
        data.setdefault("generation_id", -1)
        data.setdefault("leader", "")
        data.setdefault("members", [])
        data["leader"] = data["leader"] or ""
        if request.api_version < 7 and data.get("protocol_name") is None:
            data["protocol_name"] = ""  # nullable only from v7
        return self._answer(request, data)

    async def sync_group(self, request: DecodedRequest, info: ConnectionInfo) -> Response:
        """SyncGroup v0-v5."""
        body = request.body
        answer = await self.service.call(gc.SyncGroup(
            request_id=self.service.next_id(), group_id=body.group_id,
            generation_id=body.generation_id, member_id=body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
            protocol_type=getattr(body, "protocol_type", None),
            protocol_name=getattr(body, "protocol_name", None),
            assignments=tuple((a.member_id, bytes(a.assignment)) for a in body.assignments),
        ))
        data = dict(answer)
        data.setdefault("assignment", b"")
        return self._answer(request, data)

    async def heartbeat(self, request: DecodedRequest, info: ConnectionInfo) -> Response:
        """Heartbeat v0-v4."""
        body = request.body
        answer = await self.service.call(gc.Heartbeat(
            request_id=self.service.next_id(), group_id=body.group_id,
            generation_id=body.generation_id, member_id=body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
        ))
        return self._answer(request, dict(answer))

    async def leave_group(self, request: DecodedRequest, info: ConnectionInfo) -> Response:
        """LeaveGroup v0-v5 (v3+: several members, each with its own error)."""
        body = request.body
        if request.api_version >= 3:
            members = tuple((m.member_id, m.group_instance_id) for m in body.members)
        else:
            members = ((body.member_id, None),)
        answer = await self.service.call(gc.LeaveGroup(self.service.next_id(), body.group_id,
                                                       members))
        data = dict(answer)
        if request.api_version < 3 and data.get("error_code") == NONE and data["members"]:
            data["error_code"] = data["members"][0]["error_code"]
        return self._answer(request, data)

    # --- offsets -----------------------------------------------------------------------

    async def offset_commit(self, request: DecodedRequest, info: ConnectionInfo) -> Response:
        """OffsetCommit v2-v8; partitions of unknown topics answer UNKNOWN_TOPIC_OR_PARTITION."""
        body = request.body
        metadata = self.context.metadata
        entries: list[gc.CommitEntry] = []
        unknown: set[tuple[str, int]] = set()
        # Kafka's handleOffsetCommitRequest: READ on each topic, else TOPIC_AUTHORIZATION_FAILED
        denied = {topic.name for topic in body.topics
                  if not self.context.topic_allowed(AclOperation.READ, topic.name)}
        for topic in body.topics:
            for partition in topic.partitions:
                slot = (topic.name, partition.partition_index)
                if topic.name in denied:
                    continue
                if metadata.partition(topic.name, partition.partition_index) is None:
                    unknown.add(slot)
                    continue
                entries.append(gc.CommitEntry(
                    topic.name, partition.partition_index, partition.committed_offset,
                    getattr(partition, "committed_leader_epoch", -1),
                    partition.committed_metadata))
        retention = getattr(body, "retention_time", None)
        retention_ms = -1 if retention is None else _millis(retention)
        answer: Mapping[str, Any] = {"partitions": {}}
        if entries:
            answer = await self.service.call(gc.OffsetCommit(
                request_id=self.service.next_id(), group_id=body.group_id,
                generation_id=body.generation_id_or_member_epoch, member_id=body.member_id,
                group_instance_id=getattr(body, "group_instance_id", None),
                retention_ms=retention_ms if retention_ms >= 0 else -1,
                entries=tuple(entries)))
        codes: dict[tuple[str, int], int] = dict(answer["partitions"])
        status = answer.get("error_code")
        topics = []
        for topic in body.topics:
            partitions = []
            for partition in topic.partitions:
                slot = (topic.name, partition.partition_index)
                if topic.name in denied:
                    code = TOPIC_AUTHORIZATION_FAILED
                elif slot in unknown:
                    code = gc.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    code = codes.get(slot, status if status is not None else NONE)
                partitions.append({"partition_index": partition.partition_index,
                                   "error_code": code})
            topics.append({"name": topic.name, "partitions": partitions})
        return self._answer(request, {"topics": topics})

    async def offset_fetch(self, request: DecodedRequest, info: ConnectionInfo) -> Response:
        """OffsetFetch v1-v7 (``topics`` null from v2: every committed partition)."""
        body = request.body
        partitions: tuple[tuple[str, int], ...] | None = None
        if body.topics is not None:
            partitions = tuple((topic.name, index) for topic in body.topics
                               for index in topic.partition_indexes)
        answer = await self.service.call(gc.OffsetFetch(self.service.next_id(), body.group_id,
                                                        partitions))
        error = answer["error_code"]
        found: Mapping[tuple[str, int], Any] = answer["partitions"]
        # Kafka's handleOffsetFetchRequest: DESCRIBE on each topic; a named partition of a
        # topic without it answers TOPIC_AUTHORIZATION_FAILED, "all partitions" leaves it out
        visible = {topic for topic, _ in (partitions or tuple(found))
                   if self.context.topic_allowed(AclOperation.DESCRIBE, topic)}
        wanted = partitions if partitions is not None else tuple(
            slot for slot in found if slot[0] in visible)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for topic, index in wanted:
            value = found.get((topic, index)) if topic in visible else None
            code = error if request.api_version < 2 else NONE
            if topic not in visible:
                code = TOPIC_AUTHORIZATION_FAILED
            by_topic.setdefault(topic, []).append({
                "partition_index": index,
                "committed_offset": value.offset if value is not None else -1,
                "committed_leader_epoch": value.leader_epoch if value is not None else -1,
                "metadata": value.metadata if value is not None else "",
                # v0-v1 carry no top-level error: each partition gets it.
                "error_code": code,
            })
        return self._answer(request, {
            "error_code": error,
            "topics": [{"name": name, "partitions": rows} for name, rows in by_topic.items()],
        })

    async def offset_delete(self, request: DecodedRequest, info: ConnectionInfo) -> Response:
        """OffsetDelete v0."""
        body = request.body
        requested = tuple((topic.name, p.partition_index) for topic in body.topics
                          for p in topic.partitions)
        # Kafka's handleOffsetDeleteRequest: READ on each topic
        denied = {topic for topic, _ in requested
                  if not self.context.topic_allowed(AclOperation.READ, topic)}
        wanted = tuple(slot for slot in requested if slot[0] not in denied)
        answer = await self.service.call(gc.OffsetDelete(self.service.next_id(), body.group_id,
                                                         wanted))
        codes: Mapping[tuple[str, int], int] = answer["partitions"]
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for topic, index in requested:
            code = TOPIC_AUTHORIZATION_FAILED if topic in denied else \
                codes.get((topic, index), NONE)
            by_topic.setdefault(topic, []).append({"partition_index": index, "error_code": code})
        return self._answer(request, {
            "error_code": answer["error_code"],
            "topics": [{"name": name, "partitions": rows} for name, rows in by_topic.items()],
        })

    # --- admin -------------------------------------------------------------------------

    async def list_groups(self, request: DecodedRequest, info: ConnectionInfo) -> Response:
        """ListGroups v0-v4: the groups this broker coordinates."""
        states = tuple(getattr(request.body, "states_filter", None) or ())
        answer = dict(await self.service.call(gc.ListGroups(self.service.next_id(), states)))
        # Kafka: DESCRIBE on the cluster lists every group, else those the principal may
        # DESCRIBE
        if not self.context.allowed(AclOperation.DESCRIBE, CLUSTER):
            answer["groups"] = [group for group in answer["groups"]
                                if self._group_allowed(AclOperation.DESCRIBE,
                                                       str(group["group_id"]))]
        return self._answer(request, answer)

    def _group_allowed(self, operation: AclOperation, group_id: str) -> bool:
        return self.context.allowed(operation, Resource(ResourceType.GROUP, group_id))

    async def describe_groups(self, request: DecodedRequest, info: ConnectionInfo) -> Response:
        """DescribeGroups v0-v5."""
        # Kafka: DESCRIBE on each group; the denied ones answer GROUP_AUTHORIZATION_FAILED
        names = tuple(request.body.groups)
        allowed = tuple(name for name in names
                        if self._group_allowed(AclOperation.DESCRIBE, name))
        described: dict[str, Mapping[str, Any]] = {}
        if allowed:
            answer = await self.service.call(gc.DescribeGroups(self.service.next_id(), allowed))
            described = {str(group["group_id"]): group for group in answer["groups"]}
        groups = [{**described[name], "authorized_operations": -2147483648}
                  if name in described else
                  {"error_code": GROUP_AUTHORIZATION_FAILED, "group_id": name,
                   "group_state": "", "protocol_type": "", "protocol_data": "", "members": [],
                   "authorized_operations": -2147483648}
                  for name in names]
        return self._answer(request, {"groups": groups})

    async def delete_groups(self, request: DecodedRequest, info: ConnectionInfo) -> Response:
        """DeleteGroups v0-v2."""
        # Kafka: DELETE on each group; the denied ones answer GROUP_AUTHORIZATION_FAILED
        names = tuple(request.body.groups_names)
        allowed = tuple(dict.fromkeys(name for name in names
                                      if self._group_allowed(AclOperation.DELETE, name)))
        codes: dict[str, int] = {}
        if allowed:
            answer = await self.service.call(gc.DeleteGroups(self.service.next_id(), allowed))
            codes.update(answer["results"])
        return self._answer(request, {"results": [
            {"group_id": name, "error_code": codes.get(name, GROUP_AUTHORIZATION_FAILED)}
            for name in dict.fromkeys(names)]})
