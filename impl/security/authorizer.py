"""The ACL authorizer's decision, sans-IO: Kafka's ``AclAuthorizer`` over an in-memory binding set.

Spec: ``spec/authorizer.md``; model: ``model/authorizer.py`` (ACL_DENY_WINS, ACL_NO_ESCALATION).

A *binding* is a resource pattern (resource type, name, pattern type LITERAL or PREFIXED) plus an
access control entry (principal, host, operation, permission ALLOW or DENY). A request
``(principal, host, operation, resource)`` is decided as Kafka's ``AclAuthorizer.authorize``
decides it:

1. a principal listed in ``super.users`` is allowed everything;
2. the *matching* bindings are gathered by lookup: the literal pattern of the resource's name, the
   literal wildcard ``*`` of its type, and every PREFIXED pattern whose name is a prefix of the
   resource's name (never the other direction, never another resource type);
3. none → ``allow.everyone.if.no.acl.found`` (default false) decides;
4. a matching DENY whose principal is the requester or ``User:*``, whose host is the requester's or
   ``*`` and whose operation is the requested one or ALL denies (deny wins);
5. otherwise a matching ALLOW grants, where ALLOW of READ, WRITE, DELETE or ALTER implies DESCRIBE
   and ALLOW of ALTER_CONFIGS implies DESCRIBE_CONFIGS (ALL implies everything); a DENY implies
   nothing beyond its own operation (and ALL).

Also here: the filters DescribeAcls and DeleteAcls match bindings with (``ANY``, ``MATCH``, a null
name or principal), the validation CreateAcls applies, and the ZooKeeper layout and JSON Kafka
uses (``/kafka-acl/<Type>/<name>``, ``/kafka-acl-extended/prefixed/<Type>/<name>``, the change
notifications), so a shell only reads and writes bytes.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__sans_io__ = True

#: The wildcard principal of an ACL entry (every principal of type User).
WILDCARD_PRINCIPAL = "User:*"
#: The wildcard host of an ACL entry.
WILDCARD_HOST = "*"
#: The literal resource name matching every resource of its type.
WILDCARD_RESOURCE = "*"
#: The one valid name of the CLUSTER resource.
CLUSTER_NAME = "kafka-cluster"


class AclEvent(enum.Enum):
    """What changes the binding set the authorizer decides over (the model's actions)."""

    ACL_CREATED = "acl_created"  #: CreateAcls (KIP-140) or a ZooKeeper change notification
    ACL_DELETED = "acl_deleted"  #: DeleteAcls (KIP-140) or a ZooKeeper change notification


class ResourceType(enum.IntEnum):
    """Kafka's ``ResourceType`` with its wire codes (KIP-140)."""

    UNKNOWN = 0
    ANY = 1  #: filters only
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    """Kafka's ``PatternType`` with its wire codes (KIP-290)."""

    UNKNOWN = 0
    ANY = 1  #: filters only: any pattern type
    MATCH = 2  #: filters only: every pattern that would match the named resource
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    """Kafka's ``AclOperation`` with its wire codes (KIP-140)."""

    UNKNOWN = 0
    ANY = 1  #: filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    """Kafka's ``AclPermissionType`` with its wire codes (KIP-140)."""

    UNKNOWN = 0
    ANY = 1  #: filters only
    DENY = 2
    ALLOW = 3


#: ALLOW of any of these operations also grants the key (``AclAuthorizer``'s implied operations).
IMPLIED_BY: Mapping[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({
        AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
        AclOperation.ALTER,
    }),
    AclOperation.DESCRIBE_CONFIGS: frozenset({
        AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
    }),
}

#: The resource types, operations and permissions a stored binding may carry.
CONCRETE_RESOURCE_TYPES = frozenset(ResourceType) - {ResourceType.UNKNOWN, ResourceType.ANY}
CONCRETE_OPERATIONS = frozenset(AclOperation) - {AclOperation.UNKNOWN, AclOperation.ANY}
CONCRETE_PERMISSIONS = frozenset({AclPermissionType.ALLOW, AclPermissionType.DENY})


class InvalidAcl(ValueError):  # noqa: N818 - the client sent it: reads as the condition
    """A binding or filter the client sent is not valid (answered with INVALID_REQUEST)."""


@dataclass(frozen=True, order=True)
class ResourcePattern:
    """A resource pattern of a stored binding: type, name and LITERAL or PREFIXED."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType


@dataclass(frozen=True, order=True)
class AccessControlEntry:
    """Who (principal, host) may or may not (permission) do what (operation)."""

    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType


@dataclass(frozen=True, order=True)
class AclBinding:
    """One stored ACL: a pattern and an entry."""

    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True)
class Resource:
    """A concrete resource a request acts on (always a literal name)."""

    resource_type: ResourceType
    name: str


#: The cluster resource (CLUSTER_ACTION, ALTER, DESCRIBE, IDEMPOTENT_WRITE, CREATE).
CLUSTER = Resource(ResourceType.CLUSTER, CLUSTER_NAME)


def parse_principal(text: str) -> tuple[str, str]:
    """Split ``Type:name`` (Kafka's ``SecurityUtils.parseKafkaPrincipal``).

    Raises:
        InvalidAcl: not of the form ``Type:name`` with both parts non-empty.
    """
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise InvalidAcl(f"invalid principal {text!r}: expected <type>:<name>, e.g. User:alice")
    return kind, name


def validate_binding(binding: AclBinding) -> None:
    """Reject what Kafka's CreateAcls rejects.

    Raises:
        InvalidAcl: an unknown or filter-only type, pattern, operation or permission; an empty
            resource name; a CLUSTER resource not called ``kafka-cluster``; a bad principal.
    """
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type not in CONCRETE_RESOURCE_TYPES:
        raise InvalidAcl(f"invalid resource type {pattern.resource_type.name}")
    if pattern.pattern_type not in {PatternType.LITERAL, PatternType.PREFIXED}:
        raise InvalidAcl(f"invalid pattern type {pattern.pattern_type.name}: "
                         "only LITERAL and PREFIXED patterns can be stored")
    if not pattern.name:
        raise InvalidAcl("the resource name must not be empty")
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise InvalidAcl(f"the only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if pattern.pattern_type is PatternType.PREFIXED and pattern.name == WILDCARD_RESOURCE:
        raise InvalidAcl("a PREFIXED pattern cannot be '*' (use a LITERAL '*')")
    if entry.operation not in CONCRETE_OPERATIONS:
        raise InvalidAcl(f"invalid operation {entry.operation.name}")
    if entry.permission not in CONCRETE_PERMISSIONS:
        raise InvalidAcl(f"invalid permission type {entry.permission.name}")
    if not entry.host:
        raise InvalidAcl("the host must not be empty (use '*' for every host)")
    parse_principal(entry.principal)


def lookup_patterns(resource: Resource) -> tuple[ResourcePattern, ...]:
    """The stored patterns that apply to ``resource``: its literal name, the literal wildcard of
    its type, and the PREFIXED patterns of every non-empty prefix of its name."""
    found = [
        ResourcePattern(resource.resource_type, resource.name, PatternType.LITERAL),
        ResourcePattern(resource.resource_type, WILDCARD_RESOURCE, PatternType.LITERAL),
    ]
    found.extend(
        ResourcePattern(resource.resource_type, resource.name[:length], PatternType.PREFIXED)
        for length in range(1, len(resource.name) + 1)
    )
    return tuple(found)


def entry_applies(
    entry: AccessControlEntry, principal: str, host: str, operations: Iterable[AclOperation]
) -> bool:
    """Whether ``entry`` speaks of this principal (or ``User:*``), this host (or ``*``) and one
    of ``operations`` (or ALL)."""
    return (
        entry.principal in (principal, WILDCARD_PRINCIPAL)
        and entry.host in (host, WILDCARD_HOST)
        and (entry.operation is AclOperation.ALL or entry.operation in operations)
    )


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (blank entries ignored)."""
    return frozenset(part.strip() for part in text.split(";") if part.strip())


@dataclass(frozen=True)
class Decision:
    """An authorization decision and why it was taken (for the authorizer log)."""

    allowed: bool
    reason: str


@dataclass
class Authorizer:
    """The binding set and the two settings that decide; pure, no I/O.

    The shell feeds it with :meth:`apply` from ZooKeeper (the whole entry set of one pattern, as
    a change notification delivers it) and asks :meth:`authorize` for every action of a request.

    Args:
        super_users: ``super.users``.
        allow_everyone_if_no_acl_found: ``allow.everyone.if.no.acl.found``.
    """

    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    _acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = field(default_factory=dict)

    def apply(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Replace the entries of ``pattern`` (none: the pattern is gone)."""
        stored = frozenset(entries)
        if stored:
            self._acls[pattern] = stored
        else:
            self._acls.pop(pattern, None)

    def add(self, binding: AclBinding) -> bool:
        """Store one binding; whether it was new (``AclEvent.ACL_CREATED``)."""
        current = self._acls.get(binding.pattern, frozenset())
        if binding.entry in current:
            return False
        self._acls[binding.pattern] = current | {binding.entry}
        return True

    def remove(self, binding: AclBinding) -> bool:
        """Drop one binding; whether it was stored (``AclEvent.ACL_DELETED``)."""
        current = self._acls.get(binding.pattern, frozenset())
        if binding.entry not in current:
            return False
        self.apply(binding.pattern, current - {binding.entry})
        return True

    def entries(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        """The entries stored for ``pattern``."""
        return self._acls.get(pattern, frozenset())

    def patterns(self) -> list[ResourcePattern]:
        """Every pattern with stored entries."""
        return list(self._acls)

    def bindings(self) -> list[AclBinding]:
        """Every stored binding, sorted."""
        return sorted(AclBinding(pattern, entry)
                      for pattern, entries in self._acls.items() for entry in entries)

    def matching_entries(self, resource: Resource) -> list[AccessControlEntry]:
        """Every entry of every pattern that applies to ``resource`` (:func:`lookup_patterns`)."""
        found: list[AccessControlEntry] = []
        for pattern in lookup_patterns(resource):
            found.extend(self._acls.get(pattern, ()))
        return found

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource: Resource
    ) -> Decision:
        """Decide one action (see the module docstring for the rules, in their order)."""
        assert operation in CONCRETE_OPERATIONS, operation
        assert operation is not AclOperation.ALL, "a request asks for one concrete operation"
        if principal in self.super_users:
            return Decision(True, "super user")
        entries = self.matching_entries(resource)
        if not entries:
            return Decision(self.allow_everyone_if_no_acl_found,
                            "no ACL found, allow.everyone.if.no.acl.found="
                            f"{str(self.allow_everyone_if_no_acl_found).lower()}")
        deny = [entry for entry in entries if entry.permission is AclPermissionType.DENY
                and entry_applies(entry, principal, host, (operation,))]
        if deny:
            return Decision(False, f"denied by {_describe(min(deny))}")
        implied = IMPLIED_BY.get(operation, frozenset({operation}))
        allow = [entry for entry in entries if entry.permission is AclPermissionType.ALLOW
                 and entry_applies(entry, principal, host, implied)]
        if allow:
            return Decision(True, f"allowed by {_describe(min(allow))}")
        return Decision(False, "no matching ALLOW")


def _describe(entry: AccessControlEntry) -> str:
    return (f"{entry.permission.name} {entry.principal} from {entry.host} "
            f"{entry.operation.name}")


# --------------------------------------------------------------------------------------------
# DescribeAcls / DeleteAcls filters (KIP-140, KIP-290)


@dataclass(frozen=True)
class AclBindingFilter:
    """A filter of DescribeAcls/DeleteAcls; ``None`` name, principal or host match anything.

    ``pattern_type`` ANY matches every stored pattern with the name; MATCH matches the patterns
    that would apply to a resource of that name (literal, wildcard, prefixes).
    """

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def validate(self) -> None:
        """Reject UNKNOWN values (Kafka: INVALID_REQUEST).

        Raises:
            InvalidAcl: a field is UNKNOWN.
        """
        for value in (self.resource_type, self.pattern_type, self.operation, self.permission):
            if value.name == "UNKNOWN":
                raise InvalidAcl(f"the filter holds an unknown {type(value).__name__}")

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        """Whether the stored ``pattern`` passes the resource part of the filter."""
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type is PatternType.MATCH:
            if self.name is None:
                return True
            if pattern.pattern_type is PatternType.LITERAL:
                return pattern.name in (self.name, WILDCARD_RESOURCE)
            return self.name.startswith(pattern.name)
        if self.pattern_type not in (PatternType.ANY, pattern.pattern_type):
            return False
        return self.name is None or self.name == pattern.name

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        """Whether ``entry`` passes the entry part of the filter."""
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission in (AclPermissionType.ANY, entry.permission)
        )

    def matches(self, binding: AclBinding) -> bool:
        """Whether the binding passes the whole filter."""
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)


# --------------------------------------------------------------------------------------------
# ZooKeeper layout and JSON (Kafka's ``ZkAclStore``, ``ZkAclChangeStore``)

#: Literal patterns: ``/kafka-acl/<Type>/<name>``; their change notifications.
LITERAL_ACL_ROOT = "/kafka-acl"
LITERAL_CHANGES_ROOT = "/kafka-acl-changes"
#: Prefixed patterns: ``/kafka-acl-extended/prefixed/<Type>/<name>``; their notifications.
EXTENDED_ACL_ROOT = "/kafka-acl-extended"
EXTENDED_CHANGES_ROOT = "/kafka-acl-extended-changes"
#: The sequential child each change notification creates.
CHANGE_PREFIX = "acl_changes_"

#: ``ResourceType`` ↔ the CamelCase name ZooKeeper paths and JSON use.
_TYPE_NAMES = {
    ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group", ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    ResourceType.DELEGATION_TOKEN: "DelegationToken", ResourceType.USER: "User",
}
_TYPES_BY_NAME = {name: kind for kind, name in _TYPE_NAMES.items()}


def _camel(member: enum.Enum) -> str:
    return "".join(part.capitalize() for part in member.name.split("_"))


_OPERATIONS_BY_NAME = {_camel(op): op for op in CONCRETE_OPERATIONS}
_PERMISSIONS_BY_NAME = {_camel(p): p for p in CONCRETE_PERMISSIONS}


def type_name(resource_type: ResourceType) -> str:
    """The CamelCase name of a concrete resource type (``Topic``, ``TransactionalId``)."""
    return _TYPE_NAMES[resource_type]


def type_from_name(name: str) -> ResourceType:
    """The resource type called ``name`` (case-insensitive; ``transactional-id`` too).

    Raises:
        InvalidAcl: no such resource type.
    """
    wanted = name.replace("-", "").replace("_", "").lower()
    for kind, text in _TYPE_NAMES.items():
        if text.lower() == wanted:
            return kind
    raise InvalidAcl(f"unknown resource type {name!r} (known: {', '.join(_TYPES_BY_NAME)})")


def operation_from_name(name: str) -> AclOperation:
    """The operation called ``name`` (``Read``, ``cluster-action``, ``ClusterAction``, ``ALL``).

    Raises:
        InvalidAcl: no such operation.
    """
    wanted = name.replace("-", "").replace("_", "").lower()
    for text, op in _OPERATIONS_BY_NAME.items():
        if text.lower() == wanted:
            return op
    known = ", ".join(sorted(_OPERATIONS_BY_NAME))
    raise InvalidAcl(f"unknown operation {name!r} (known: {known})")


def acl_path(pattern: ResourcePattern) -> str:
    """The znode holding ``pattern``'s entries."""
    kind = type_name(pattern.resource_type)
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{LITERAL_ACL_ROOT}/{kind}/{pattern.name}"
    assert pattern.pattern_type is PatternType.PREFIXED, pattern
    return f"{EXTENDED_ACL_ROOT}/prefixed/{kind}/{pattern.name}"


def pattern_from_path(path: str) -> ResourcePattern:
    """The pattern stored at ``path`` (the inverse of :func:`acl_path`).

    Raises:
        ValueError: not an ACL znode path.
    """
    parts = path.strip("/").split("/")
    if len(parts) == 3 and "/" + parts[0] == LITERAL_ACL_ROOT:
        return ResourcePattern(_TYPES_BY_NAME[parts[1]], parts[2], PatternType.LITERAL)
    if len(parts) == 4 and "/" + parts[0] == EXTENDED_ACL_ROOT and parts[1] == "prefixed":
        return ResourcePattern(_TYPES_BY_NAME[parts[2]], parts[3], PatternType.PREFIXED)
    raise ValueError(f"not an ACL path: {path!r}")


def encode_entries(entries: Iterable[AccessControlEntry]) -> bytes:
    """Kafka's JSON of one pattern's entries: ``{"version":1,"acls":[...]}``."""
    acls = [
        {"principal": entry.principal, "permissionType": _camel(entry.permission),
         "operation": _camel(entry.operation), "host": entry.host}
        for entry in sorted(entries)
    ]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_entries(data: bytes) -> frozenset[AccessControlEntry]:
    """The entries of Kafka's JSON (empty data: none).

    Raises:
        ValueError: malformed JSON or an unknown operation or permission.
    """
    if not data:
        return frozenset()
    document = json.loads(data)
    if not isinstance(document, dict) or document.get("version") != 1:
        raise ValueError(f"unsupported ACL document {document!r}")
    entries = set()
    for item in document.get("acls", []):
        entries.add(AccessControlEntry(
            principal=str(item["principal"]), host=str(item["host"]),
            operation=_OPERATIONS_BY_NAME[item["operation"]],
            permission=_PERMISSIONS_BY_NAME[item["permissionType"]],
        ))
    return frozenset(entries)


def encode_change(pattern: ResourcePattern) -> tuple[str, bytes]:
    """The change-notification root and data for a change of ``pattern``: literal patterns use
    Kafka's ``Type:name`` text, extended ones its JSON."""
    kind = type_name(pattern.resource_type)
    if pattern.pattern_type is PatternType.LITERAL:
        return LITERAL_CHANGES_ROOT, f"{kind}:{pattern.name}".encode()
    document = {"version": 1, "resourceType": kind, "name": pattern.name,
                "patternType": _camel(pattern.pattern_type)}
    return EXTENDED_CHANGES_ROOT, json.dumps(document, separators=(",", ":")).encode()


def decode_change(root: str, data: bytes) -> ResourcePattern:
    """The pattern a change notification under ``root`` names.

    Raises:
        ValueError: malformed notification.
    """
    text = data.decode()
    if root == LITERAL_CHANGES_ROOT:
        kind, _, name = text.partition(":")
        return ResourcePattern(_TYPES_BY_NAME[kind], name, PatternType.LITERAL)
    document = json.loads(text)
    pattern_type = PatternType[str(document["patternType"]).upper()]
    return ResourcePattern(_TYPES_BY_NAME[document["resourceType"]], str(document["name"]),
                           pattern_type)
