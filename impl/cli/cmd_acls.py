"""``logproof acls --add|--remove|--list``: ACL administration in the shape of ``kafka-acls.sh``.

Examples::

    logproof acls --bootstrap-server h:9093 --command-config admin.properties \\
        --add --allow-principal User:alice --operation Read --topic orders --group billing
    logproof acls --bootstrap-server h:9093 --add --allow-principal User:bob --producer \\
        --topic orders- --resource-pattern-type prefixed
    logproof acls --bootstrap-server h:9093 --list --topic orders
    logproof acls --bootstrap-server h:9093 --remove --allow-principal User:alice --topic orders

Bindings are sent with CreateAcls, DeleteAcls and DescribeAcls (KIP-140), so any Kafka client
tool sees the same ACLs.
"""

from __future__ import annotations

import argparse
from typing import Any

from impl.broker.admin import AdminClient, AdminClientError, error_name
from impl.security.authorizer import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourcePattern,
    ResourceType,
    operation_from_name,
    parse_principal,
)

from ._errors import CliError
from ._security import add_security_arguments, admin_client


def register(subparsers: Any) -> None:
    """Add the ``acls`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "acls", help="add, remove or list ACLs (the shape of kafka-acls.sh)",
        description="Add, remove or list ACL bindings through any broker of the cluster.",
    )
    parser.add_argument("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT]")
    add_security_arguments(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add bindings")
    action.add_argument("--remove", action="store_true", help="remove bindings")
    action.add_argument("--list", action="store_true", help="list bindings")
    parser.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL",
                        help="User:NAME (User:* for everyone); repeatable")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL")
    parser.add_argument("--principal", action="append", default=[],
                        help="--list only: the bindings of this principal")
    parser.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                        help="default * (every host)")
    parser.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    parser.add_argument("--operation", action="append", default=[],
                        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                             "DescribeConfigs, AlterConfigs, IdempotentWrite, All; repeatable")
    parser.add_argument("--topic", action="append", default=[])
    parser.add_argument("--group", action="append", default=[])
    parser.add_argument("--transactional-id", action="append", default=[])
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument("--resource-pattern-type", default=None,
                        choices=["literal", "prefixed", "any", "match"],
                        help="default literal for --add, literal for --remove and any for "
                             "--list")
    parser.add_argument("--producer", action="store_true",
                        help="WRITE, DESCRIBE and CREATE on the topics")
    parser.add_argument("--consumer", action="store_true",
                        help="READ and DESCRIBE on the topics, READ on the groups")
    parser.add_argument("--idempotent", action="store_true",
                        help="with --producer: IDEMPOTENT_WRITE on the cluster")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds (default 30)")
    parser.set_defaults(handler=_run)


def _resources(arguments: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    resources = [(ResourceType.TOPIC, name) for name in arguments.topic]
    resources += [(ResourceType.GROUP, name) for name in arguments.group]
    resources += [(ResourceType.TRANSACTIONAL_ID, name) for name in arguments.transactional_id]
    if arguments.cluster:
        resources.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return resources


def _operations(arguments: argparse.Namespace, resource_type: ResourceType) -> list[AclOperation]:
    operations = [operation_from_name(name) for name in arguments.operation]
    if arguments.producer:
        if resource_type is ResourceType.TOPIC:
            operations += [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE]
        if resource_type is ResourceType.CLUSTER and arguments.idempotent:
            operations.append(AclOperation.IDEMPOTENT_WRITE)
        if resource_type is ResourceType.TRANSACTIONAL_ID:
            operations += [AclOperation.WRITE, AclOperation.DESCRIBE]
    if arguments.consumer:
        if resource_type is ResourceType.TOPIC:
            operations += [AclOperation.READ, AclOperation.DESCRIBE]
        if resource_type is ResourceType.GROUP:
            operations.append(AclOperation.READ)
    return sorted(set(operations))


def _entries(arguments: argparse.Namespace, operations: list[AclOperation]
             ) -> list[AccessControlEntry]:
    entries: list[AccessControlEntry] = []
    for permission, principals, hosts in (
        (AclPermissionType.ALLOW, arguments.allow_principal, arguments.allow_host or ["*"]),
        (AclPermissionType.DENY, arguments.deny_principal, arguments.deny_host or ["*"]),
    ):
        for principal in principals:
            parse_principal(principal)
            entries.extend(AccessControlEntry(principal, host, operation, permission)
                           for host in hosts for operation in operations)
    return entries


def _pattern_type(arguments: argparse.Namespace, default: str) -> PatternType:
    return PatternType[(arguments.resource_pattern_type or default).upper()]


def _show(binding_pattern: ResourcePattern) -> str:
    return (f"ResourcePattern(resourceType={binding_pattern.resource_type.name}, "
            f"name={binding_pattern.name}, patternType={binding_pattern.pattern_type.name})")


def _print_bindings(bindings: list[AclBinding]) -> None:
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in bindings:
        by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    for pattern, entries in sorted(by_pattern.items()):
        print(f"Current ACLs for resource `{_show(pattern)}`:")
        for entry in sorted(entries):
            print(f" \t(principal={entry.principal}, host={entry.host}, "
                  f"operation={entry.operation.name}, permissionType={entry.permission.name})")
        print()


def _add(admin: AdminClient, arguments: argparse.Namespace) -> int:
    if arguments.resource_pattern_type in ("any", "match"):
        raise CliError("--add: --resource-pattern-type must be literal or prefixed")
    if not arguments.allow_principal and not arguments.deny_principal:
        raise CliError("--add needs --allow-principal or --deny-principal")
    pattern_type = _pattern_type(arguments, "literal")
    bindings: list[AclBinding] = []
    for resource_type, name in _resources(arguments):
        operations = _operations(arguments, resource_type)
        if not operations:
            continue
        bindings.extend(AclBinding(ResourcePattern(resource_type, name, pattern_type), entry)
                        for entry in _entries(arguments, operations))
    if not bindings:
        raise CliError("--add needs --operation (or --producer/--consumer) and a resource")
    failed = 0
    for binding, (code, message) in zip(bindings, admin.create_acls(bindings), strict=True):
        if code != 0:
            failed += 1
            print(f"Error adding {binding.entry} on {_show(binding.pattern)}: "
                  f"{error_name(code)}: {message or ''}")
    if failed:
        return 1
    print(f"Adding ACLs for {len({b.pattern for b in bindings})} resource(s):")
    _print_bindings(bindings)
    return 0


def _remove(admin: AdminClient, arguments: argparse.Namespace) -> int:
    resources = _resources(arguments)
    if not resources:
        raise CliError("--remove needs a resource (--topic, --group, --transactional-id, "
                       "--cluster)")
    pattern_type = _pattern_type(arguments, "literal")
    queries: list[AclBindingFilter] = []
    for resource_type, name in resources:
        operations = _operations(arguments, resource_type) or [AclOperation.ANY]
        principals: list[tuple[AclPermissionType, str | None]] = [
            *((AclPermissionType.ALLOW, p) for p in arguments.allow_principal),
            *((AclPermissionType.DENY, p) for p in arguments.deny_principal),
        ] or [(AclPermissionType.ANY, None)]
        for permission, principal in principals:
            hosts = (arguments.allow_host if permission is AclPermissionType.ALLOW
                     else arguments.deny_host) or [None]
            queries.extend(AclBindingFilter(resource_type, name, pattern_type, principal, host,
                                            operation, permission)
                           for host in hosts for operation in operations)
    removed: list[AclBinding] = []
    for code, message, deleted in admin.delete_acls(queries):
        if code != 0:
            raise CliError(f"removing ACLs failed: {error_name(code)}: {message or ''}")
        removed.extend(deleted)
    print(f"Removed {len(removed)} ACL binding(s).")
    _print_bindings(removed)
    return 0


def _list(admin: AdminClient, arguments: argparse.Namespace) -> int:
    pattern_type = _pattern_type(arguments, "any")
    queries = [AclBindingFilter(resource_type, name, pattern_type)
               for resource_type, name in _resources(arguments)] or [AclBindingFilter()]
    principals = arguments.principal or [None]
    found: list[AclBinding] = []
    for query in queries:
        for principal in principals:
            code, message, bindings = admin.describe_acls(AclBindingFilter(
                query.resource_type, query.name, query.pattern_type, principal))
            if code != 0:
                raise CliError(f"listing ACLs failed: {error_name(code)}: {message or ''}")
            found.extend(binding for binding in bindings if binding not in found)
    _print_bindings(found)
    return 0


def _run(arguments: argparse.Namespace) -> int:
    try:
        with admin_client(arguments) as admin:
            if arguments.add:
                return _add(admin, arguments)
            if arguments.remove:
                return _remove(admin, arguments)
            return _list(admin, arguments)
    except InvalidAcl as error:
        raise CliError(str(error)) from None
    except AdminClientError as error:
        raise CliError(str(error)) from None
