"""The sans-IO authorizer: Kafka's decision rules, filters, validation and ZooKeeper format."""

from __future__ import annotations

import pytest

from impl.security.authorizer import (
    CLUSTER,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Authorizer,
    InvalidAcl,
    PatternType,
    Resource,
    ResourcePattern,
    ResourceType,
    acl_path,
    decode_change,
    decode_entries,
    encode_change,
    encode_entries,
    operation_from_name,
    parse_super_users,
    pattern_from_path,
    type_from_name,
    validate_binding,
)

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation


def binding(name: str, principal: str, op: AclOperation, permission: AclPermissionType = ALLOW,
            *, prefixed: bool = False, host: str = "*",
            resource_type: ResourceType = ResourceType.TOPIC) -> AclBinding:
    kind = PatternType.PREFIXED if prefixed else PatternType.LITERAL
    return AclBinding(ResourcePattern(resource_type, name, kind),
                      AccessControlEntry(principal, host, op, permission))


def topic(name: str) -> Resource:
    return Resource(ResourceType.TOPIC, name)


def allowed(authorizer: Authorizer, principal: str, op: AclOperation, resource: Resource,
            host: str = "10.0.0.1") -> bool:
    return authorizer.authorize(principal, host, op, resource).allowed


def test_no_acl_is_denied_unless_allow_everyone() -> None:
    assert not allowed(Authorizer(), "User:alice", Op.READ, topic("t"))
    assert allowed(Authorizer(allow_everyone_if_no_acl_found=True), "User:alice", Op.READ,
                   topic("t"))


def test_allow_everyone_does_not_apply_once_any_acl_exists() -> None:
    authorizer = Authorizer(allow_everyone_if_no_acl_found=True)
    authorizer.add(binding("t", "User:bob", Op.READ))
    assert not allowed(authorizer, "User:alice", Op.READ, topic("t"))
    assert allowed(authorizer, "User:alice", Op.READ, topic("other"))


def test_deny_wins_over_allow_and_super_users_win_over_deny() -> None:
    authorizer = Authorizer(super_users=parse_super_users("User:admin; User:broker;"))
    authorizer.add(binding("t", "User:*", Op.ALL))
    authorizer.add(binding("t", "User:alice", Op.WRITE, DENY))
    assert allowed(authorizer, "User:alice", Op.READ, topic("t"))
    assert not allowed(authorizer, "User:alice", Op.WRITE, topic("t"))
    assert allowed(authorizer, "User:bob", Op.WRITE, topic("t"))
    authorizer.add(binding("*", "User:*", Op.ALL, DENY))
    assert not allowed(authorizer, "User:bob", Op.READ, topic("t"))
    assert allowed(authorizer, "User:broker", Op.WRITE, topic("t"))


def test_prefixed_patterns_cover_longer_names_only() -> None:
    authorizer = Authorizer()
    authorizer.add(binding("orders-", "User:alice", Op.READ, prefixed=True))
    assert allowed(authorizer, "User:alice", Op.READ, topic("orders-eu"))
    assert allowed(authorizer, "User:alice", Op.READ, topic("orders-"))
    assert not allowed(authorizer, "User:alice", Op.READ, topic("orders"))
    assert not allowed(authorizer, "User:alice", Op.READ, Resource(ResourceType.GROUP,
                                                                     "orders-eu"))


def test_literal_is_not_a_prefix_and_wildcard_is_per_type() -> None:
    authorizer = Authorizer()
    authorizer.add(binding("a", "User:alice", Op.READ))
    authorizer.add(binding("*", "User:alice", Op.READ, resource_type=ResourceType.GROUP))
    assert not allowed(authorizer, "User:alice", Op.READ, topic("ab"))
    assert allowed(authorizer, "User:alice", Op.READ, Resource(ResourceType.GROUP, "g"))
    assert not allowed(authorizer, "User:alice", Op.READ, topic("g"))


def test_host_matching() -> None:
    authorizer = Authorizer()
    authorizer.add(binding("t", "User:alice", Op.READ, host="10.0.0.1"))
    assert allowed(authorizer, "User:alice", Op.READ, topic("t"), host="10.0.0.1")
    assert not allowed(authorizer, "User:alice", Op.READ, topic("t"), host="10.0.0.2")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALL])
def test_describe_is_implied(granted: AclOperation) -> None:
    authorizer = Authorizer()
    authorizer.add(binding("t", "User:alice", granted))
    assert allowed(authorizer, "User:alice", Op.DESCRIBE, topic("t"))


def test_implied_operations_stop_there() -> None:
    authorizer = Authorizer()
    authorizer.add(binding("t", "User:alice", Op.ALTER_CONFIGS))
    authorizer.add(binding("t", "User:alice", Op.DESCRIBE))
    assert allowed(authorizer, "User:alice", Op.DESCRIBE_CONFIGS, topic("t"))
    assert not allowed(authorizer, "User:alice", Op.READ, topic("t"))
    assert not allowed(authorizer, "User:alice", Op.ALTER, topic("t"))
    # A DENY of READ does not deny DESCRIBE (Kafka: deny implies nothing).
    authorizer.add(binding("t", "User:alice", Op.READ, DENY))
    assert allowed(authorizer, "User:alice", Op.DESCRIBE, topic("t"))


def test_cluster_resource() -> None:
    authorizer = Authorizer()
    authorizer.add(binding("kafka-cluster", "User:broker", Op.CLUSTER_ACTION,
                           resource_type=ResourceType.CLUSTER))
    assert allowed(authorizer, "User:broker", Op.CLUSTER_ACTION, CLUSTER)
    assert not allowed(authorizer, "User:alice", Op.CLUSTER_ACTION, CLUSTER)


def test_add_remove_apply() -> None:
    authorizer = Authorizer()
    one = binding("t", "User:alice", Op.READ)
    assert authorizer.add(one)
    assert not authorizer.add(one)
    assert authorizer.bindings() == [one]
    assert authorizer.remove(one)
    assert not authorizer.remove(one)
    assert authorizer.bindings() == []
    authorizer.apply(one.pattern, [one.entry])
    authorizer.apply(one.pattern, [])
    assert authorizer.bindings() == []


@pytest.mark.parametrize("bad", [
    binding("t", "alice", Op.READ),
    binding("t", "User:alice", Op.ANY),
    binding("t", "User:alice", Op.READ, AclPermissionType.ANY),
    binding("", "User:alice", Op.READ),
    binding("*", "User:alice", Op.READ, prefixed=True),
    binding("other", "User:alice", Op.ALTER, resource_type=ResourceType.CLUSTER),
    binding("t", "User:alice", Op.READ, resource_type=ResourceType.ANY),
    binding("t", "User:alice", Op.READ, host=""),
    AclBinding(ResourcePattern(ResourceType.TOPIC, "t", PatternType.MATCH),
               AccessControlEntry("User:a", "*", Op.READ, ALLOW)),
])
def test_create_validation_rejects(bad: AclBinding) -> None:
    with pytest.raises(InvalidAcl):
        validate_binding(bad)


def test_filters() -> None:
    stored = [
        binding("orders", "User:alice", Op.READ),
        binding("ord", "User:alice", Op.WRITE, prefixed=True),
        binding("*", "User:bob", Op.READ, DENY),
        binding("orders", "User:bob", Op.READ, resource_type=ResourceType.GROUP),
    ]

    def selected(query: AclBindingFilter) -> list[AclBinding]:
        return [one for one in stored if query.matches(one)]

    assert selected(AclBindingFilter()) == stored
    assert selected(AclBindingFilter(ResourceType.TOPIC, "orders", PatternType.MATCH)) == \
        stored[:3]
    assert selected(AclBindingFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL)) == \
        stored[:1]
    assert selected(AclBindingFilter(name="orders")) == [stored[0], stored[3]]
    assert selected(AclBindingFilter(principal="User:bob", permission=DENY)) == [stored[2]]
    assert selected(AclBindingFilter(operation=Op.WRITE)) == [stored[1]]
    with pytest.raises(InvalidAcl):
        AclBindingFilter(operation=Op.UNKNOWN).validate()


def test_zookeeper_layout_and_json_round_trip() -> None:
    literal = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.LITERAL)
    prefixed = ResourcePattern(ResourceType.TOPIC, "orders-", PatternType.PREFIXED)
    assert acl_path(literal) == "/kafka-acl/TransactionalId/tx"
    assert acl_path(prefixed) == "/kafka-acl-extended/prefixed/Topic/orders-"
    for pattern in (literal, prefixed):
        assert pattern_from_path(acl_path(pattern)) == pattern
        assert decode_change(*encode_change(pattern)) == pattern
    assert encode_change(literal) == ("/kafka-acl-changes", b"TransactionalId:tx")
    entries = [AccessControlEntry("User:alice", "*", Op.IDEMPOTENT_WRITE, ALLOW),
               AccessControlEntry("User:*", "10.0.0.1", Op.READ, DENY)]
    data = encode_entries(entries)
    assert b'"operation":"IdempotentWrite"' in data
    assert b'"permissionType":"Deny"' in data
    assert decode_entries(data) == frozenset(entries)
    assert decode_entries(b"") == frozenset()


def test_names() -> None:
    assert type_from_name("transactional-id") is ResourceType.TRANSACTIONAL_ID
    assert type_from_name("Topic") is ResourceType.TOPIC
    assert operation_from_name("ClusterAction") is Op.CLUSTER_ACTION
    assert operation_from_name("describe-configs") is Op.DESCRIBE_CONFIGS
    with pytest.raises(InvalidAcl):
        operation_from_name("fly")
    with pytest.raises(InvalidAcl):
        type_from_name("queue")
