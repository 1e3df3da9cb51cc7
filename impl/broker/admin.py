"""A blocking Python AdminClient speaking Kafka's wire protocol itself (KIP-113's AdminClient).

It needs only the Python standard library and kio: one socket per broker, ApiVersions v0 first
to pick, per API, the highest version both sides speak, then Metadata, CreateTopics,
DeleteTopics, DescribeLogDirs and AlterReplicaLogDirs. The KIP-113 calls are
:meth:`AdminClient.alter_replica_log_dirs`, :meth:`AdminClient.describe_log_dirs` and
:meth:`AdminClient.describe_replica_log_dirs` (current dir, temporary dir and offset lag).

Every read is bounded by the socket timeout and a response size limit; a broker that cannot be
reached or answers garbage raises :class:`AdminClientError`.
"""

from __future__ import annotations

import itertools
import secrets
import struct
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kio.schema.errors import ErrorCode

from impl.security.authorizer import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from impl.security.client import AuthenticationError, open_socket
from impl.security.config import ClientSecurity
from impl.security.sasl import salted_password
from impl.security.scram_credentials import MECHANISM_IDS, MECHANISM_NAMES

from . import api_versions
from ._codec import (
    MalformedRequestError,
    decode_response,
    encode_request,
    load_request_schema,
)
from ._kio_build import build

RESPONSE_MAX_BYTES: Final = 256 * 1024 * 1024
CLIENT_ID: Final = "logproof-admin"
#: The versions this client can speak, per API key.
_CLIENT_RANGES: Final[Mapping[int, tuple[int, int]]] = {
    api_versions.METADATA: (1, 8),
    api_versions.CREATE_TOPICS: (2, 4),
    api_versions.DELETE_TOPICS: (1, 3),
    api_versions.CREATE_PARTITIONS: (0, 3),
    api_versions.DESCRIBE_LOG_DIRS: (1, 4),
    api_versions.ALTER_REPLICA_LOG_DIRS: (1, 2),
    api_versions.DESCRIBE_CONFIGS: (1, 4),
    api_versions.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    api_versions.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    api_versions.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    api_versions.CREATE_ACLS: (1, 3),
    api_versions.DESCRIBE_ACLS: (1, 3),
    api_versions.DELETE_ACLS: (1, 3),
    api_versions.FIND_COORDINATOR: (1, 3),
    api_versions.LIST_GROUPS: (0, 4),
    api_versions.DESCRIBE_GROUPS: (0, 5),
    api_versions.OFFSET_FETCH: (2, 7),
    api_versions.OFFSET_COMMIT: (2, 8),
    api_versions.DELETE_GROUPS: (0, 2),
    api_versions.LIST_OFFSETS: (1, 5),
    api_versions.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    api_versions.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
}
#: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: ask again.
_COORDINATOR_RETRIABLE: Final = frozenset({14, 15, 16})
#: DescribeConfigs and IncrementalAlterConfigs resource types.
TOPIC_RESOURCE: Final = 2
BROKER_RESOURCE: Final = 4
#: DescribeConfigs' config sources, by code.
CONFIG_SOURCES: Final[Mapping[int, str]] = {
    0: "UNKNOWN_CONFIG", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}


class AdminClientError(Exception):
    """The cluster could not be reached, lacks an API, or answered something unreadable."""


def error_name(code: int) -> str:
    """Kafka's upper-case name of an error code (``LOG_DIR_NOT_FOUND``)."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"ERROR_{code}"


@dataclass(frozen=True, slots=True)
class TopicPartitionReplica:
    """A replica: a partition on one broker (KIP-113)."""

    topic: str
    partition: int
    broker_id: int


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """One replica in a log dir (KIP-113 ``ReplicaInfo``)."""

    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirInfo:
    """One log dir of a broker (KIP-113 ``LogDirInfo``): error 0 when it is live."""

    error_code: int
    replicas: Mapping[tuple[str, int], ReplicaInfo]
    total_bytes: int = -1
    usable_bytes: int = -1

    @property
    def is_live(self) -> bool:
        """Whether the dir is online."""
        return self.error_code == 0


@dataclass(frozen=True, slots=True)
class ReplicaLogDirInfo:
    """Where a replica lives and its move progress (KIP-113 ``ReplicaDirInfo``)."""

    current_log_dir: str | None
    future_log_dir: str | None
    future_offset_lag: int


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """A partition in Metadata."""

    partition: int
    error_code: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    #: The partition's leader epoch (Metadata v7+; -1 when the broker does not report it).
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ConfigEntryInfo:
    """One DescribeConfigs entry: value (None if sensitive), source, flags, synonyms."""

    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool
    synonyms: tuple[tuple[str, str | None, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    """Brokers, controller and topics as Metadata reports them."""

    brokers: Mapping[int, tuple[str, int, str | None]]
    controller_id: int
    topics: Mapping[str, tuple[int, tuple[PartitionInfo, ...]]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GroupListing:
    """A group as ListGroups reports it."""

    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class GroupMember:
    """A member as DescribeGroups reports it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A group as DescribeGroups reports it (``state`` in Kafka's words, e.g. ``Stable``)."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[GroupMember, ...]


def parse_bootstrap_servers(value: str) -> list[tuple[str, int]]:
    """``host:port[,host:port]`` → addresses.

    Raises:
        AdminClientError: an entry without a numeric port.
    """
    addresses: list[tuple[str, int]] = []
    for entry in (item.strip() for item in value.split(",")):
        if not entry:
            continue
        host, colon, port = entry.rpartition(":")
        if not colon or not port.isdigit() or not host or not 0 < int(port) < 65536:
            raise AdminClientError(f"bad bootstrap server {entry!r}: expected HOST:PORT")
        addresses.append((host.strip("[]"), int(port)))
    if not addresses:
        raise AdminClientError("no bootstrap server given")
    return addresses


@dataclass(frozen=True, slots=True)
class UserScramCredentials:
    """One user of DescribeUserScramCredentials: its error, or (mechanism, iterations) per
    credential."""

    user: str
    error_code: int
    error_message: str | None
    credentials: tuple[tuple[str, int], ...]


#: Bytes of the random salt of a credential set through AlterUserScramCredentials.
SALT_BYTES: Final = 32


class _Connection:
    def __init__(self, host: str, port: int, timeout_seconds: float,
                 security: ClientSecurity | None = None) -> None:
        self.address = f"{host}:{port}"
        try:
            self.sock = open_socket(host, port, security, timeout_seconds)
        except OSError as error:
            raise AdminClientError(f"cannot connect to {self.address}: {error}") from None
        except AuthenticationError as error:
            raise AdminClientError(f"{self.address}: {error}") from None
        self.correlation = itertools.count(1)
        self.ranges: dict[int, tuple[int, int]] = {}

    def close(self) -> None:
        self.sock.close()

    def _receive_exact(self, count: int) -> bytes:
        chunks: list[bytes] = []
        remaining = count
        while remaining:
            try:
                chunk = self.sock.recv(min(remaining, 1 << 20))
            except OSError as error:
                raise AdminClientError(f"{self.address}: {error}") from None
            if not chunk:
                raise AdminClientError(f"{self.address} closed the connection")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def call(self, api_key: int, version: int, body: Any) -> Any:
        correlation_id = next(self.correlation)
        frame = encode_request(api_key, version, correlation_id, CLIENT_ID, body)
        try:
            self.sock.sendall(frame)
        except OSError as error:
            raise AdminClientError(f"{self.address}: {error}") from None
        (size,) = struct.unpack(">i", self._receive_exact(4))
        if not 4 <= size <= RESPONSE_MAX_BYTES:
            raise AdminClientError(f"{self.address} sent a response frame of {size} bytes")
        payload = self._receive_exact(size)
        try:
            received_id, response = decode_response(api_key, version, payload)
        except MalformedRequestError as error:
            raise AdminClientError(f"{self.address}: {error}") from None
        if received_id != correlation_id:
            raise AdminClientError(f"{self.address} answered another request")
        return response

    def negotiate(self) -> None:
        from kio.schema.api_versions.v0.request import ApiVersionsRequest  # noqa: PLC0415

        response = self.call(api_versions.API_VERSIONS, 0, ApiVersionsRequest())
        if int(response.error_code) != 0:
            raise AdminClientError(
                f"{self.address} refused ApiVersions: {error_name(int(response.error_code))}"
            )
        self.ranges = {
            int(item.api_key): (int(item.min_version), int(item.max_version))
            for item in response.api_keys
        }

    def version_for(self, api_key: int) -> int:
        low, high = _CLIENT_RANGES[api_key]
        broker = self.ranges.get(api_key)
        if broker is None or broker[1] < low or broker[0] > high:
            raise AdminClientError(f"{self.address} does not support api key {api_key}")
        return min(high, broker[1])


class AdminClient:
    """Administers a cluster through any of its brokers.

    Args:
        bootstrap_servers: ``host:port[,host:port]``.
        timeout_seconds: per socket operation.
        security: TLS and SASL settings (None: PLAINTEXT).
    """

    def __init__(self, bootstrap_servers: str, *, timeout_seconds: float = 30.0,
                 security: ClientSecurity | None = None) -> None:
        self._security = security
        self._bootstrap = parse_bootstrap_servers(bootstrap_servers)
        self._timeout_seconds = timeout_seconds
        self._connections: dict[tuple[str, int], _Connection] = {}
        self._metadata: ClusterMetadata | None = None

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection."""
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    def _connect(self, address: tuple[str, int]) -> _Connection:
        connection = self._connections.get(address)
        if connection is None:
            connection = _Connection(address[0], address[1], self._timeout_seconds,
                                     self._security)
            try:
                connection.negotiate()
            except AdminClientError:
                connection.close()
                raise
            self._connections[address] = connection
        return connection

    def _any(self) -> _Connection:
        errors = []
        for address in self._bootstrap:
            try:
                return self._connect(address)
            except AdminClientError as error:
                errors.append(str(error))
        raise AdminClientError("; ".join(errors))

    def _broker(self, broker_id: int) -> _Connection:
        metadata = self._metadata or self.metadata()
        broker = metadata.brokers.get(broker_id)
        if broker is None:
            metadata = self.metadata()
            broker = metadata.brokers.get(broker_id)
            if broker is None:
                raise AdminClientError(f"broker {broker_id} is not alive in the cluster")
        return self._connect((broker[0], broker[1]))

    def _call(self, connection: _Connection, api_key: int, data: Mapping[str, Any]) -> Any:
        version = connection.version_for(api_key)
        request_class: type[Any] = load_request_schema(api_key, version)
        return connection.call(api_key, version, build(request_class, data))

    # --- metadata and topics ---------------------------------------------------------------

    def metadata(self, topics: Sequence[str] | None = None) -> ClusterMetadata:
        """Brokers, controller and topics (all topics when ``topics`` is None)."""
        response = self._call(
            self._any(),
            api_versions.METADATA,
            {
                "topics": None if topics is None else [{"name": name} for name in topics],
                "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False,
            },
        )
        brokers = {
            int(b.node_id): (b.host, int(b.port), b.rack) for b in response.brokers
        }
        described: dict[str, tuple[int, tuple[PartitionInfo, ...]]] = {}
        for topic in response.topics:
            partitions = tuple(
                sorted(
                    (
                        PartitionInfo(
                            int(p.partition_index),
                            int(p.error_code),
                            int(p.leader_id),
                            tuple(int(r) for r in p.replica_nodes),
                            tuple(int(r) for r in p.isr_nodes),
                            tuple(int(r) for r in getattr(p, "offline_replicas", ())),
                            int(getattr(p, "leader_epoch", -1)),
                        )
                        for p in topic.partitions
                    ),
                    key=lambda info: info.partition,
                )
            )
            described[topic.name] = (int(topic.error_code), partitions)
        metadata = ClusterMetadata(brokers, int(response.controller_id), described)
        self._metadata = metadata
        return metadata

    def create_topics(
        self,
        topics: Iterable[tuple[str, int, int] | tuple[str, Mapping[int, Sequence[int]]]],
        *,
        timeout_ms: int = 30_000,
        validate_only: bool = False,
        configs: Mapping[str, Mapping[str, str]] | None = None,
    ) -> dict[str, tuple[int, str | None]]:
        """Create topics: ``(name, partitions, replication factor)`` or ``(name, assignment)``;
        ``configs``: name → the topic's configs (``retention.ms`` → ``"60000"``).

        Returns:
            name → (error code, message).
        """
        entries = []
        for spec in topics:
            name = spec[0]
            given = (configs or {}).get(name, {})
            settings = [{"name": key, "value": value} for key, value in given.items()]
            if len(spec) == 3:
                _, partitions, factor = spec
                entries.append({"name": name, "num_partitions": partitions,
                                "replication_factor": factor, "assignments": [],
                                "configs": settings})
            else:
                _, assignment = spec
                entries.append({
                    "name": name, "num_partitions": -1, "replication_factor": -1,
                    "assignments": [{"partition_index": p, "broker_ids": list(replicas)}
                                    for p, replicas in sorted(assignment.items())],
                    "configs": settings,
                })
        response = self._call(
            self._any(), api_versions.CREATE_TOPICS,
            {"topics": entries, "timeout": timeout_ms, "validate_only": validate_only},
        )
        return {
            topic.name: (int(topic.error_code), getattr(topic, "error_message", None))
            for topic in response.topics
        }

    def create_partitions(
        self, counts: Mapping[str, int], *, timeout_ms: int = 30_000, validate_only: bool = False,
    ) -> dict[str, tuple[int, str | None]]:
        """CreatePartitions: grow each topic to ``counts[name]`` partitions, placed by the
        cluster.

        Returns:
            name → (error code, message).
        """
        response = self._call(self._any(), api_versions.CREATE_PARTITIONS, {
            "topics": [{"name": name, "count": count, "assignments": None}
                       for name, count in counts.items()],
            "timeout": timeout_ms, "validate_only": validate_only,
        })
        return {result.name: (int(result.error_code), result.error_message)
                for result in response.results}

    def delete_topics(self, names: Iterable[str], *, timeout_ms: int = 30_000) -> dict[str, int]:
        """Delete topics; name → error code."""
        response = self._call(
            self._any(), api_versions.DELETE_TOPICS,
            {"topic_names": list(names), "timeout": timeout_ms},
        )
        return {item.name: int(item.error_code) for item in response.responses}

    # --- ACLs (KIP-140, KIP-290) -----------------------------------------------------------

    def create_acls(self, bindings: Sequence[AclBinding]) -> list[tuple[int, str | None]]:
        """CreateAcls: (error code, message) per binding, in order."""
        response = self._call(self._any(), api_versions.CREATE_ACLS, {"creations": [
            {"resource_type": int(b.pattern.resource_type), "resource_name": b.pattern.name,
             "resource_pattern_type": int(b.pattern.pattern_type),
             "principal": b.entry.principal, "host": b.entry.host,
             "operation": int(b.entry.operation), "permission_type": int(b.entry.permission)}
            for b in bindings]})
        return [(int(item.error_code), item.error_message) for item in response.results]

    def describe_user_scram_credentials(
        self, users: Sequence[str] | None = None
    ) -> tuple[int, str | None, list[UserScramCredentials]]:
        """DescribeUserScramCredentials (KIP-554): (error code, message, one entry per user;
        ``users`` None: every user with a credential)."""
        response = self._call(self._any(), api_versions.DESCRIBE_USER_SCRAM_CREDENTIALS, {
            "users": None if users is None else [{"name": user} for user in users]})
        return int(response.error_code), response.error_message, [
            UserScramCredentials(
                item.user, int(item.error_code), item.error_message,
                tuple((MECHANISM_NAMES.get(int(info.mechanism), "UNKNOWN"),
                       int(info.iterations)) for info in item.credential_infos))
            for item in response.results]

    def alter_user_scram_credentials(
        self, upsertions: Sequence[tuple[str, str, str, int]],
        deletions: Sequence[tuple[str, str]] = (),
    ) -> dict[str, tuple[int, str | None]]:
        """AlterUserScramCredentials (KIP-554): ``(user, mechanism, password, iterations)``
        to set (the password is salted here with a fresh random salt; only the salted
        password is sent) and ``(user, mechanism)`` to remove; user → (error code, message).

        Raises:
            AdminClientError: an unknown mechanism.
        """
        def mechanism_id(mechanism: str) -> int:
            if mechanism not in MECHANISM_IDS:
                raise AdminClientError(f"unknown SCRAM mechanism {mechanism!r} (known: "
                                       f"{', '.join(MECHANISM_IDS)})")
            return MECHANISM_IDS[mechanism]

        upserts = []
        for user, mechanism, password, iterations in upsertions:
            salt = secrets.token_bytes(SALT_BYTES)
            upserts.append({"name": user, "mechanism": mechanism_id(mechanism),
                            "iterations": iterations, "salt": salt,
                            "salted_password": salted_password(mechanism, password, salt,
                                                               iterations)})
        response = self._call(self._any(), api_versions.ALTER_USER_SCRAM_CREDENTIALS, {
            "deletions": [{"name": user, "mechanism": mechanism_id(mechanism)}
                          for user, mechanism in deletions],
            "upsertions": upserts})
        return {item.user: (int(item.error_code), item.error_message)
                for item in response.results}

    def describe_acls(self, query: AclBindingFilter) -> tuple[int, str | None, list[AclBinding]]:
        """DescribeAcls: (error code, message, the matching bindings)."""
        response = self._call(self._any(), api_versions.DESCRIBE_ACLS, _filter_fields(query))
        found = [
            AclBinding(
                ResourcePattern(ResourceType(int(resource.resource_type)),
                                resource.resource_name, PatternType(int(resource.pattern_type))),
                AccessControlEntry(acl.principal, acl.host, AclOperation(int(acl.operation)),
                                   AclPermissionType(int(acl.permission_type))))
            for resource in response.resources for acl in resource.acls
        ]
        return int(response.error_code), response.error_message, found

    def delete_acls(self, queries: Sequence[AclBindingFilter]
                    ) -> list[tuple[int, str | None, list[AclBinding]]]:
        """DeleteAcls: per filter, (error code, message, the bindings deleted)."""
        response = self._call(self._any(), api_versions.DELETE_ACLS, {
            "filters": [{**_filter_fields(query)} for query in queries]})
        return [
            (int(result.error_code), result.error_message, [
                AclBinding(
                    ResourcePattern(ResourceType(int(acl.resource_type)), acl.resource_name,
                                    PatternType(int(acl.pattern_type))),
                    AccessControlEntry(acl.principal, acl.host, AclOperation(int(acl.operation)),
                                       AclPermissionType(int(acl.permission_type))))
                for acl in result.matching_acls])
            for result in response.filter_results
        ]

    # --- KIP-113 ---------------------------------------------------------------------------

    def describe_log_dirs(
        self,
        broker_ids: Iterable[int] | None = None,
        *,
        topics: Iterable[str] | None = None,
    ) -> dict[int, dict[str, LogDirInfo]]:
        """Each broker's log dirs with their replicas (KIP-113 ``describeLogDirs``).

        Args:
            broker_ids: the brokers to ask (default: every live broker).
            topics: restrict to these topics (default: all).

        Returns:
            broker id → log dir path → :class:`LogDirInfo`.
        """
        metadata = self.metadata() if topics is not None or broker_ids is None else (
            self._metadata or self.metadata()
        )
        brokers = sorted(metadata.brokers) if broker_ids is None else list(broker_ids)
        request_topics: list[dict[str, Any]] | None = None
        if topics is not None:
            request_topics = []
            for name in topics:
                partitions = metadata.topics.get(name, (0, ()))[1]
                request_topics.append(
                    {"topic": name, "partitions": [info.partition for info in partitions]}
                )
        result: dict[int, dict[str, LogDirInfo]] = {}
        for broker_id in brokers:
            response = self._call(
                self._broker(broker_id), api_versions.DESCRIBE_LOG_DIRS,
                {"topics": request_topics},
            )
            dirs: dict[str, LogDirInfo] = {}
            for item in response.results:
                replicas = {
                    (topic.name, int(p.partition_index)): ReplicaInfo(
                        int(p.partition_size), int(p.offset_lag), bool(p.is_future_key)
                    )
                    for topic in item.topics
                    for p in topic.partitions
                }
                dirs[item.log_dir] = LogDirInfo(
                    int(item.error_code), replicas,
                    int(getattr(item, "total_bytes", -1)), int(getattr(item, "usable_bytes", -1)),
                )
            result[broker_id] = dirs
        return result

    def describe_replica_log_dirs(
        self, replicas: Iterable[TopicPartitionReplica]
    ) -> dict[TopicPartitionReplica, ReplicaLogDirInfo]:
        """Current dir, temporary (future) dir and its offset lag per replica (KIP-113)."""
        wanted = list(replicas)
        by_broker: dict[int, list[TopicPartitionReplica]] = {}
        for replica in wanted:
            by_broker.setdefault(replica.broker_id, []).append(replica)
        result: dict[TopicPartitionReplica, ReplicaLogDirInfo] = {}
        for broker_id, items in by_broker.items():
            request_topics: dict[str, set[int]] = {}
            for replica in items:
                request_topics.setdefault(replica.topic, set()).add(replica.partition)
            response = self._call(
                self._broker(broker_id), api_versions.DESCRIBE_LOG_DIRS,
                {"topics": [{"topic": name, "partitions": sorted(partitions)}
                            for name, partitions in request_topics.items()]},
            )
            current: dict[tuple[str, int], str] = {}
            future: dict[tuple[str, int], tuple[str, int]] = {}
            for item in response.results:
                if int(item.error_code) != 0:
                    continue
                for topic in item.topics:
                    for p in topic.partitions:
                        key = (topic.name, int(p.partition_index))
                        if p.is_future_key:
                            future[key] = (item.log_dir, int(p.offset_lag))
                        else:
                            current[key] = item.log_dir
            for replica in items:
                key = (replica.topic, replica.partition)
                future_dir, lag = future.get(key, (None, 0))
                result[replica] = ReplicaLogDirInfo(current.get(key), future_dir, lag)
        return result

    def alter_replica_log_dirs(
        self, assignment: Mapping[TopicPartitionReplica, str]
    ) -> dict[TopicPartitionReplica, int]:
        """Move replicas to log dirs (KIP-113 ``alterReplicaLogDirs``); replica → error code.

        ``REPLICA_NOT_AVAILABLE`` (9) means the broker does not host the replica yet and has
        remembered the dir for when it does; callers retry.
        """
        by_broker: dict[int, dict[str, dict[str, list[int]]]] = {}
        for replica, path in assignment.items():
            by_broker.setdefault(replica.broker_id, {}).setdefault(path, {}).setdefault(
                replica.topic, []
            ).append(replica.partition)
        result: dict[TopicPartitionReplica, int] = {}
        for broker_id, dirs in by_broker.items():
            response = self._call(
                self._broker(broker_id), api_versions.ALTER_REPLICA_LOG_DIRS,
                {"dirs": [
                    {"path": path, "topics": [
                        {"name": name, "partitions": partitions}
                        for name, partitions in topics.items()
                    ]}
                    for path, topics in dirs.items()
                ]},
            )
            for topic in response.results:
                for p in topic.partitions:
                    result[TopicPartitionReplica(topic.topic_name, int(p.partition_index),
                                                 broker_id)] = int(p.error_code)
        return result

    # --- configs -----------------------------------------------------------------------------

    def _config_connection(self, resource_type: int, name: str) -> _Connection:
        """Broker configs of broker N go to broker N; everything else to any broker."""
        if resource_type == BROKER_RESOURCE and name:
            if not name.isdigit():
                raise AdminClientError(f"broker id must be a number, got {name!r}")
            return self._broker(int(name))
        return self._any()

    def describe_configs(
        self, resource_type: int, name: str, *, keys: Sequence[str] | None = None,
        synonyms: bool = True,
    ) -> tuple[int, str | None, list[ConfigEntryInfo]]:
        """A topic's or broker's configs (broker ``""``: the cluster-wide default entity).

        Returns:
            (error code, error message, entries).
        """
        return self._describe_configs(self._config_connection(resource_type, name),
                                      resource_type, [name], keys, synonyms)[name]

    def describe_topic_configs(
        self, names: Sequence[str], *, synonyms: bool = True,
    ) -> dict[str, tuple[int, str | None, list[ConfigEntryInfo]]]:
        """Several topics' configs in one DescribeConfigs (each topic answered, or refused,
        alone).

        Returns:
            name → (error code, error message, entries).
        """
        if not names:
            return {}
        return self._describe_configs(self._any(), TOPIC_RESOURCE, names, None, synonyms)

    def _describe_configs(
        self, connection: _Connection, resource_type: int, names: Sequence[str],
        keys: Sequence[str] | None, synonyms: bool,
    ) -> dict[str, tuple[int, str | None, list[ConfigEntryInfo]]]:
        response = self._call(connection, api_versions.DESCRIBE_CONFIGS, {
            "resources": [{"resource_type": resource_type, "resource_name": name,
                           "configuration_keys": None if keys is None else list(keys)}
                          for name in names],
            "include_synonyms": synonyms, "include_documentation": False,
        })
        described: dict[str, tuple[int, str | None, list[ConfigEntryInfo]]] = {}
        for result in response.results:
            entries = [
                ConfigEntryInfo(
                    entry.name, entry.value,
                    CONFIG_SOURCES.get(int(getattr(entry, "config_source", 0)),
                                       "UNKNOWN_CONFIG"),
                    bool(entry.read_only), bool(entry.is_sensitive),
                    tuple((s.name, s.value, CONFIG_SOURCES.get(int(s.source), "UNKNOWN_CONFIG"))
                          for s in getattr(entry, "synonyms", ())),
                )
                for entry in result.configs
            ]
            described[result.resource_name] = (int(result.error_code), result.error_message,
                                               entries)
        missing = [name for name in names if name not in described]
        if missing:
            raise AdminClientError(f"DescribeConfigs answered no entry for {missing[0]!r}")
        return described

    def incremental_alter_configs(
        self, resource_type: int, name: str,
        operations: Sequence[tuple[str, int, str | None]], *, validate_only: bool = False,
    ) -> tuple[int, str | None]:
        """IncrementalAlterConfigs (KIP-339) on one entity: ``(key, op, value)`` with op SET 0,
        DELETE 1, APPEND 2, SUBTRACT 3; (error code, message)."""
        response = self._call(
            self._config_connection(resource_type, name), api_versions.INCREMENTAL_ALTER_CONFIGS,
            {"resources": [{"resource_type": resource_type, "resource_name": name,
                            "configs": [{"name": key, "config_operation": op, "value": value}
                                        for key, op, value in operations]}],
             "validate_only": validate_only},
        )
        (result,) = response.responses
        return int(result.error_code), result.error_message

    # --- KIP-455 reassignments -----------------------------------------------------------------

    def alter_partition_reassignments(
        self, targets: Mapping[tuple[str, int], Sequence[int] | None], *, timeout_ms: int = 30_000
    ) -> dict[tuple[str, int], tuple[int, str | None]]:
        """Start (replicas) or cancel (None) partition reassignments (KIP-455).

        Returns:
            (topic, partition) → (error code, message); a request-level error is given to
            every partition.
        """
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), replicas in sorted(targets.items()):
            by_topic.setdefault(topic, []).append({
                "partition_index": partition,
                "replicas": None if replicas is None else list(replicas),
            })
        response = self._call(self._any(), api_versions.ALTER_PARTITION_REASSIGNMENTS, {
            "timeout": timeout_ms,
            "topics": [{"name": name, "partitions": items} for name, items in by_topic.items()],
        })
        if int(response.error_code) != 0:
            return {tp: (int(response.error_code), response.error_message) for tp in targets}
        return {
            (topic.name, int(p.partition_index)): (int(p.error_code), p.error_message)
            for topic in response.responses
            for p in topic.partitions
        }

    def list_partition_reassignments(
        self, *, timeout_ms: int = 30_000
    ) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
        """Ongoing reassignments (KIP-455): (topic, partition) → (replicas, adding, removing).

        Raises:
            AdminClientError: the broker refused the request.
        """
        response = self._call(self._any(), api_versions.LIST_PARTITION_REASSIGNMENTS,
                              {"timeout": timeout_ms, "topics": None})
        if int(response.error_code) != 0:
            raise AdminClientError(
                f"ListPartitionReassignments: {error_name(int(response.error_code))}: "
                f"{response.error_message or ''}")
        return {
            (topic.name, int(p.partition_index)): (
                tuple(int(r) for r in p.replicas), tuple(int(r) for r in p.adding_replicas),
                tuple(int(r) for r in p.removing_replicas))
            for topic in response.topics
            for p in topic.partitions
        }
    # --- consumer groups ---------------------------------------------------------------------

    def find_coordinator(self, group: str, *, wait_seconds: float = 30.0) -> int:
        """The broker coordinating ``group`` (waits while the offsets topic is being created or
        its partition loads)."""
        deadline = time.monotonic() + wait_seconds
        while True:
            response = self._call(self._any(), api_versions.FIND_COORDINATOR,
                                  {"key": group, "key_type": 0})
            code = int(response.error_code)
            if code == 0:
                return int(response.node_id)
            if code not in _COORDINATOR_RETRIABLE or time.monotonic() >= deadline:
                raise AdminClientError(f"no coordinator for group {group!r}: {error_name(code)}")
            time.sleep(0.2)

    def _group_call(self, group: str, api_key: int, data: Mapping[str, Any],
                    error_of: Any, *, wait_seconds: float = 30.0) -> Any:
        """Call the group's coordinator, again while it moves or loads."""
        deadline = time.monotonic() + wait_seconds
        while True:
            coordinator = self.find_coordinator(group, wait_seconds=wait_seconds)
            response = self._call(self._broker(coordinator), api_key, data)
            code = int(error_of(response))
            if code not in _COORDINATOR_RETRIABLE or time.monotonic() >= deadline:
                return response
            self._metadata = None
            time.sleep(0.2)

    def list_groups(self) -> list[GroupListing]:
        """Every group of the cluster (ListGroups on every broker), sorted by id."""
        metadata = self.metadata()
        found: dict[str, GroupListing] = {}
        for broker_id in sorted(metadata.brokers):
            response = self._call(self._broker(broker_id), api_versions.LIST_GROUPS,
                                  {"states_filter": []})
            code = int(response.error_code)
            if code != 0:
                raise AdminClientError(f"broker {broker_id} cannot list groups: "
                                       f"{error_name(code)}")
            for group in response.groups:
                found[group.group_id] = GroupListing(
                    group.group_id, group.protocol_type, getattr(group, "group_state", ""))
        return [found[name] for name in sorted(found)]

    def describe_group(self, group: str) -> GroupDescription:
        """The group's state, protocol and members (DescribeGroups at its coordinator)."""
        response = self._group_call(group, api_versions.DESCRIBE_GROUPS,
                                    {"groups": [group],
                                     "include_authorized_operations": False},
                                    lambda r: r.groups[0].error_code)
        described = response.groups[0]
        code = int(described.error_code)
        if code != 0:
            raise AdminClientError(f"cannot describe group {group!r}: {error_name(code)}")
        members = tuple(
            GroupMember(m.member_id, getattr(m, "group_instance_id", None), m.client_id,
                        m.client_host, bytes(m.member_metadata), bytes(m.member_assignment))
            for m in described.members)
        return GroupDescription(group, described.group_state, described.protocol_type,
                                described.protocol_data, members)

    def group_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets (OffsetFetch of every partition)."""
        response = self._group_call(group, api_versions.OFFSET_FETCH,
                                    {"group_id": group, "topics": None,
                                     "require_stable": False},
                                    lambda r: r.error_code)
        code = int(response.error_code)
        if code != 0:
            raise AdminClientError(f"cannot read the offsets of {group!r}: {error_name(code)}")
        return {(topic.name, int(p.partition_index)): int(p.committed_offset)
                for topic in response.topics for p in topic.partitions
                if int(p.committed_offset) >= 0}

    def commit_offsets(self, group: str, offsets: Mapping[tuple[str, int], int]
                       ) -> dict[tuple[str, int], int]:
        """Commit offsets outside the group protocol (generation -1, as Kafka's tools do; the
        group must have no members); (topic, partition) → error code."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append({
                "partition_index": partition, "committed_offset": offset,
                "committed_leader_epoch": -1, "committed_metadata": "", "commit_timestamp": -1})
        response = self._group_call(
            group, api_versions.OFFSET_COMMIT,
            {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
             "group_instance_id": None, "retention_time": -1,
             "topics": [{"name": name, "partitions": rows} for name, rows in by_topic.items()]},
            lambda r: r.topics[0].partitions[0].error_code if r.topics else 0)
        return {(topic.name, int(p.partition_index)): int(p.error_code)
                for topic in response.topics for p in topic.partitions}

    def delete_groups(self, groups: Iterable[str]) -> dict[str, int]:
        """Delete groups (each must have no members); group → error code."""
        results: dict[str, int] = {}
        for group in groups:
            response = self._group_call(group, api_versions.DELETE_GROUPS,
                                        {"groups_names": [group]},
                                        lambda r: r.results[0].error_code)
            results[group] = int(response.results[0].error_code)
        return results

    def list_offsets(self, partitions: Iterable[tuple[str, int]], *, latest: bool = True
                     ) -> dict[tuple[str, int], int]:
        """The log end (``latest``) or log start offset of each partition, from its leader;
        -1 where the leader cannot answer."""
        metadata = self.metadata()
        by_leader: dict[int, list[tuple[str, int]]] = {}
        answer: dict[tuple[str, int], int] = {}
        for topic, partition in partitions:
            infos = metadata.topics.get(topic, (0, ()))[1]
            leader = next((p.leader for p in infos if p.partition == partition), -1)
            answer[(topic, partition)] = -1
            if leader >= 0:
                by_leader.setdefault(leader, []).append((topic, partition))
        for leader, wanted in by_leader.items():
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for topic, partition in wanted:
                by_topic.setdefault(topic, []).append({
                    "partition_index": partition, "current_leader_epoch": -1,
                    "timestamp": -1 if latest else -2, "max_num_offsets": 1})
            response = self._call(self._broker(leader), api_versions.LIST_OFFSETS, {
                "replica_id": -1, "isolation_level": 0,
                "topics": [{"name": name, "partitions": rows} for name, rows in by_topic.items()]})
            for topic in response.topics:
                for p in topic.partitions:
                    if int(p.error_code) == 0:
                        answer[(topic.name, int(p.partition_index))] = int(p.offset)
        return answer


def _filter_fields(query: AclBindingFilter) -> dict[str, Any]:
    return {
        "resource_type_filter": int(query.resource_type),
        "resource_name_filter": query.name,
        "pattern_type_filter": int(query.pattern_type),
        "principal_filter": query.principal,
        "host_filter": query.host,
        "operation": int(query.operation),
        "permission_type": int(query.permission),
    }
