# ruff: noqa: F405  (the API keys come from impl.api_keys' star import)
"""Which ACL every request needs: one table, API key → (resource, operation, where it is checked).

Kafka's ``KafkaApis`` authorizes each request with a fixed operation on a fixed resource type
(reference: ``KafkaApis.scala``, ``AclApis.scala``). This table is the one place that says so for
logproof: an engineer adding an API adds its row here, and a test checks that every API the
broker accepts has one. Two kinds of rows:

- ``Scope.REQUEST``: the whole request needs the operation on the cluster (or on a fixed
  resource); the dispatcher checks it before the handler runs and answers a refusal itself;
- ``Scope.PER_RESOURCE``: the request names resources (topics, groups, transactional ids) and the
  handler checks each one, answering the denied ones with the type's ``*_AUTHORIZATION_FAILED``
  code (Metadata *hides* the topics the principal may not DESCRIBE when it asked for all).

A request sent by a replica (Fetch or OffsetForLeaderEpoch with a replica id) needs CLUSTER_ACTION
on the cluster instead of the per-topic operation (``replica_operation``).

Also here: the error code of a denial per resource type, and the APIs a SASL listener serves
before authentication (ApiVersions, SaslHandshake, SaslAuthenticate).

This module is a sans-IO core.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

# Every API key (PRODUCE, FETCH, ...), re-exported for the table's readers.
from impl.api_keys import *  # noqa: F403  # ruff's F405 is off for this file (below)

from .authorizer import CLUSTER, AclOperation, Resource, ResourceType

__sans_io__ = True


# Error codes of refusals (Kafka's ``Errors``).
TOPIC_AUTHORIZATION_FAILED: Final = 29
GROUP_AUTHORIZATION_FAILED: Final = 30
CLUSTER_AUTHORIZATION_FAILED: Final = 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED: Final = 53
SECURITY_DISABLED: Final = 54

#: The code a denial on a resource of each type is answered with.
DENIAL_CODES: Final[Mapping[ResourceType, int]] = MappingProxyType({
    ResourceType.TOPIC: TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
})

#: What a SASL listener answers before the client has authenticated; anything else closes.
PRE_AUTHENTICATION_APIS: Final = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})


class Scope(enum.Enum):
    """Where a requirement is checked."""

    REQUEST = "request"  #: by the dispatcher, once, before the handler runs
    PER_RESOURCE = "per_resource"  #: by the handler, for every resource the request names
    NONE = "none"  #: the API needs no ACL (ApiVersions, the SASL APIs)


@dataclass(frozen=True)
class Requirement:
    """One row of the table: the operation on the resource type, and where it is checked."""

    scope: Scope
    resource_type: ResourceType | None = None
    operation: AclOperation | None = None
    #: the operation on the cluster a request from a replica needs instead
    replica_operation: AclOperation | None = None
    #: what Kafka additionally accepts or requires (documentation for readers of the table)
    note: str = ""

    @property
    def denial_code(self) -> int:
        """The error code of a refusal."""
        assert self.resource_type is not None, "a requirement without a resource never refuses"
        return DENIAL_CODES[self.resource_type]


def _request(operation: AclOperation, note: str = "") -> Requirement:
    return Requirement(Scope.REQUEST, ResourceType.CLUSTER, operation, note=note)


def _topic(operation: AclOperation, note: str = "", replica: AclOperation | None = None
           ) -> Requirement:
    return Requirement(Scope.PER_RESOURCE, ResourceType.TOPIC, operation, replica, note)


def _group(operation: AclOperation, note: str = "") -> Requirement:
    return Requirement(Scope.PER_RESOURCE, ResourceType.GROUP, operation, note=note)


_NO_ACL: Final = Requirement(Scope.NONE)
_OP = AclOperation

#: API key → what it needs. Every API the broker accepts must be listed (a test checks it).
REQUIRED_ACLS: Final[Mapping[int, Requirement]] = MappingProxyType({
    API_VERSIONS: _NO_ACL,
    SASL_HANDSHAKE: _NO_ACL,
    SASL_AUTHENTICATE: _NO_ACL,
    PRODUCE: _topic(_OP.WRITE, "transactional produce also needs WRITE on the transactional id"),
    FETCH: _topic(_OP.READ, replica=_OP.CLUSTER_ACTION),
    LIST_OFFSETS: _topic(_OP.DESCRIBE),
    METADATA: _topic(_OP.DESCRIBE, "topics not described are hidden from an all-topics request; "
                                   "auto-creation needs CREATE on the cluster or the topic"),
    OFFSET_FOR_LEADER_EPOCH: _topic(_OP.DESCRIBE, replica=_OP.CLUSTER_ACTION),
    CREATE_TOPICS: _topic(_OP.CREATE, "CREATE on the cluster covers every topic"),
    DELETE_TOPICS: _topic(_OP.DELETE),
    DELETE_RECORDS: _topic(_OP.DELETE),
    CREATE_PARTITIONS: _topic(_OP.ALTER),
    INIT_PRODUCER_ID: _request(_OP.IDEMPOTENT_WRITE,
                               "without a transactional id; WRITE on any topic also suffices"),
    LEADER_AND_ISR: _request(_OP.CLUSTER_ACTION),
    STOP_REPLICA: _request(_OP.CLUSTER_ACTION),
    UPDATE_METADATA: _request(_OP.CLUSTER_ACTION),
    CONTROLLED_SHUTDOWN: _request(_OP.CLUSTER_ACTION),
    CREATE_REPLICA_PLACEMENT: _request(_OP.DESCRIBE, "computes a placement, changes nothing; "
                                                     "a denial closes the connection"),
    ALTER_REPLICA_LOG_DIRS: _request(_OP.ALTER),
    DESCRIBE_LOG_DIRS: _request(_OP.DESCRIBE),
    ELECT_LEADERS: _request(_OP.ALTER),
    ALTER_PARTITION_REASSIGNMENTS: _request(_OP.ALTER),
    LIST_PARTITION_REASSIGNMENTS: _request(_OP.DESCRIBE),
    CREATE_ACLS: _request(_OP.ALTER),
    DELETE_ACLS: _request(_OP.ALTER),
    DESCRIBE_ACLS: _request(_OP.DESCRIBE),
    DESCRIBE_USER_SCRAM_CREDENTIALS: _request(_OP.DESCRIBE),
    ALTER_USER_SCRAM_CREDENTIALS: _request(_OP.ALTER),
    DESCRIBE_CONFIGS: Requirement(Scope.PER_RESOURCE, ResourceType.TOPIC, _OP.DESCRIBE_CONFIGS,
                                  note="a broker resource needs it on the cluster"),
    ALTER_CONFIGS: Requirement(Scope.PER_RESOURCE, ResourceType.TOPIC, _OP.ALTER_CONFIGS,
                               note="a broker resource needs it on the cluster"),
    INCREMENTAL_ALTER_CONFIGS: Requirement(Scope.PER_RESOURCE, ResourceType.TOPIC,
                                           _OP.ALTER_CONFIGS,
                                           note="a broker resource needs it on the cluster"),
    FIND_COORDINATOR: _group(_OP.DESCRIBE, "or DESCRIBE on the transactional id"),
    JOIN_GROUP: _group(_OP.READ),
    SYNC_GROUP: _group(_OP.READ),
    HEARTBEAT: _group(_OP.READ),
    LEAVE_GROUP: _group(_OP.READ),
    OFFSET_COMMIT: _group(_OP.READ, "and READ on each topic"),
    OFFSET_FETCH: _group(_OP.DESCRIBE, "and DESCRIBE on each topic"),
    DESCRIBE_GROUPS: _group(_OP.DESCRIBE),
    LIST_GROUPS: _group(_OP.DESCRIBE, "DESCRIBE on the cluster lists every group, else the "
                                      "groups the principal may DESCRIBE are listed"),
    DELETE_GROUPS: _group(_OP.DELETE),
    OFFSET_DELETE: _group(_OP.DELETE, "and READ on each topic"),
    DESCRIBE_CLUSTER: _NO_ACL,
})


def requirement(api_key: int) -> Requirement:
    """The row of ``api_key``.

    Raises:
        KeyError: the API has no row (its author must add one).
    """
    return REQUIRED_ACLS[api_key]


def refusal_data(api_key: int, body: object, code: int, message: str) -> dict[str, object]:
    """The response (as the nested mappings ``impl.broker._kio_build.build`` reads) refusing a
    whole request with ``code``: every item the request names carries the code, as Kafka's
    ``AbstractRequest.getErrorResponse`` does."""
    data: dict[str, object] = {"throttle_time": 0, "error_code": code, "error_message": message}
    if api_key in (LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA):
        data.update(partition_errors=[], topics=[])
    elif api_key == DESCRIBE_LOG_DIRS:
        data["results"] = []
    elif api_key == ALTER_REPLICA_LOG_DIRS:
        by_topic: dict[str, list[dict[str, object]]] = {}
        for entry in getattr(body, "dirs", ()):
            for topic in entry.topics:
                by_topic.setdefault(topic.name, []).extend(
                    {"partition_index": partition, "error_code": code}
                    for partition in topic.partitions)
        data["results"] = [{"topic_name": name, "partitions": partitions}
                           for name, partitions in by_topic.items()]
    elif api_key == INIT_PRODUCER_ID:
        data.update(producer_id=-1, producer_epoch=-1)
    elif api_key == CREATE_ACLS:
        data["results"] = [{"error_code": code, "error_message": message}
                           for _ in getattr(body, "creations", ())]
    elif api_key == DESCRIBE_ACLS:
        data["resources"] = []
    elif api_key == ALTER_PARTITION_REASSIGNMENTS:
        data["responses"] = []
    elif api_key == LIST_PARTITION_REASSIGNMENTS:
        data["topics"] = []
    elif api_key == ELECT_LEADERS:
        data["replica_election_results"] = [
            {"topic": topic.topic, "partition_result": [
                {"partition_id": partition, "error_code": code, "error_message": message}
                for partition in topic.partitions]}
            for topic in (getattr(body, "topic_partitions", None) or ())]
    elif api_key == CONTROLLED_SHUTDOWN:
        data["remaining_partitions"] = []
    elif api_key == DESCRIBE_USER_SCRAM_CREDENTIALS:
        data["results"] = []  # Kafka: the top-level error only
    elif api_key == ALTER_USER_SCRAM_CREDENTIALS:
        users = [str(item.name) for item in (*getattr(body, "deletions", ()),
                                             *getattr(body, "upsertions", ()))]
        data["results"] = [{"user": user, "error_code": code, "error_message": message}
                           for user in dict.fromkeys(users)]
    elif api_key == DELETE_ACLS:
        data["filter_results"] = [{"error_code": code, "error_message": message,
                                   "matching_acls": []} for _ in getattr(body, "filters", ())]
    return data


#: DescribeConfigs/AlterConfigs resource types: topic and broker.
_CONFIG_TOPIC: Final = 2


def config_resource(resource_type: int, name: str) -> Resource:
    """The ACL resource of a DescribeConfigs/AlterConfigs/IncrementalAlterConfigs resource: a
    topic is itself; a broker (and any other config resource type, such as a broker logger) is
    the cluster, as in Kafka's ``ConfigAdminManager``."""
    if resource_type == _CONFIG_TOPIC:
        return Resource(ResourceType.TOPIC, name)
    return CLUSTER


# -------------------------------------------------------------------------------------------
# Groups. The APIs acting on one group are checked by the dispatcher, so they are protected
# whatever their handlers do. The APIs naming several groups (DescribeGroups, DeleteGroups,
# FindCoordinator v4's keys) are checked per group by their handlers, which serve the allowed
# ones and answer the others GROUP_AUTHORIZATION_FAILED, as Kafka does; ListGroups lists every
# group with DESCRIBE on the cluster, else the groups the principal may DESCRIBE.
# OffsetCommit's READ and OffsetFetch's DESCRIBE on each topic are the handlers' (Kafka checks
# both).

GROUP_CHECKED: Final = frozenset({JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP, OFFSET_COMMIT,
                                  OFFSET_FETCH, OFFSET_DELETE})
#: FindCoordinator's key types.
_GROUP_KEY: Final = 0
_TRANSACTION_KEY: Final = 1


def coordinator_resource(key_type: int, key: str) -> Resource:
    """What FindCoordinator needs DESCRIBE on for one key: the group, or the transactional
    id."""
    kind = ResourceType.TRANSACTIONAL_ID if key_type == _TRANSACTION_KEY else ResourceType.GROUP
    return Resource(kind, key)


def checked_resources(api_key: int, body: object) -> list[tuple[ResourceType, str]]:
    """The group a :data:`GROUP_CHECKED` request acts on, as the dispatcher checks it."""
    if api_key == OFFSET_FETCH and getattr(body, "groups", None):
        groups: list[object] = list(getattr(body, "groups", ()))
        return [(ResourceType.GROUP, str(getattr(group, "group_id", ""))) for group in groups]
    return [(ResourceType.GROUP, str(getattr(body, "group_id", "")))]


def group_operation(api_key: int) -> AclOperation:
    """The operation a :data:`GROUP_CHECKED` request needs on its group."""
    requirement = REQUIRED_ACLS[api_key]
    assert requirement.operation is not None
    return requirement.operation


def group_refusal_data(api_key: int, body: object, code: int) -> dict[str, object]:
    """The response refusing a :data:`GROUP_CHECKED` request with ``code``."""
    message = "the principal is not authorized for this group"
    data: dict[str, object] = {"throttle_time": 0, "error_code": code, "error_message": message}
    if api_key == JOIN_GROUP:
        data.update(generation_id=-1, protocol_type=None, protocol_name=None, leader="",
                    skip_assignment=False, member_id="", members=[])
    elif api_key == SYNC_GROUP:
        data.update(protocol_type=None, protocol_name=None, assignment=b"")
    elif api_key == LEAVE_GROUP:
        data["members"] = []
    elif api_key == OFFSET_COMMIT:
        data["topics"] = [{"name": topic.name, "partitions": [
            {"partition_index": partition.partition_index, "error_code": code}
            for partition in topic.partitions]} for topic in getattr(body, "topics", ())]
    elif api_key == OFFSET_FETCH:
        data["topics"] = []
        data["groups"] = [{"group_id": group.group_id, "topics": [], "error_code": code}
                          for group in (getattr(body, "groups", None) or ())]
    elif api_key == OFFSET_DELETE:
        data["topics"] = []
    return data
