"""The ACL authorizer's decision (Kafka's ``AclAuthorizer``), as a checked model.

What is modelled (``impl/security/authorizer.py``, ``spec/authorizer.md``): the set of stored ACL
bindings over a small universe of resource patterns, principals, hosts, operations and
permissions, changed by ``acl_created`` and ``acl_deleted`` (CreateAcls/DeleteAcls or a
ZooKeeper change notification), with ``super.users`` and ``allow.everyone.if.no.acl.found``
fixed at start (every combination is an initial state). The decision :func:`authorized` is
written the way ``AclAuthorizer`` computes it: *look up* the stored patterns by the resource's
literal name, the literal wildcard ``*`` and the PREFIXED patterns of each prefix of the name;
deny wins; ALLOW of READ/WRITE implies DESCRIBE.

The invariants are stated *declaratively* over what a binding *covers* (same resource type;
LITERAL: the same name or ``*``; PREFIXED: the resource name starts with the pattern's name), so
they check the lookup and the order of the rules, not a restatement of them:

- ACL_DENY_WINS: no request that a stored DENY covers (its principal or ``User:*``, its host or
  ``*``, its operation or ALL) is allowed, whatever ALLOWs exist (super users aside);
- ACL_NO_ESCALATION: a request is allowed only by a super user, by an ALLOW that covers the
  resource (and applies to the principal, host and an operation implying the requested one), or
  by ``allow.everyone.if.no.acl.found`` when no binding covers the resource at all: bindings on
  resource A never grant anything on resource B unless a pattern covers B.

Known-bad variants: ``allow_wins`` (any matching ALLOW grants even if a DENY matches),
``prefix_reversed`` (PREFIXED looked up in the wrong direction: a pattern ``ab`` applies to the
resource ``a``), ``type_blind`` (the lookup ignores the resource type: a GROUP binding grants a
TOPIC of the same name).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from ._dsl import Bool, Model, ModelDefinition, Ops, State, Status, Term, Transition, Variant

__sans_io__ = True


class AclEvent(enum.Enum):
    """The model's actions, named as the implementation's events."""

    ACL_CREATED = "acl_created"  #: CreateAcls or a change notification adds a binding
    ACL_DELETED = "acl_deleted"  #: DeleteAcls or a change notification removes one


#: The wildcards of Kafka's ACL entries and literal patterns.
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
WILDCARD_RESOURCE = "*"

#: The principals and hosts requests come from.
PRINCIPALS = ("User:alice", "User:bob")
HOSTS = ("10.0.0.1", "10.0.0.2")
#: The principals and hosts bindings name (bob only through the wildcard).
BINDING_PRINCIPALS = ("User:alice", WILDCARD_PRINCIPAL)
BINDING_HOSTS = ("10.0.0.1", WILDCARD_HOST)
#: The operations requests ask for, and those bindings carry.
OPERATIONS = ("READ", "WRITE", "DESCRIBE")
BINDING_OPERATIONS = ("READ", "WRITE", "DESCRIBE", "ALL")
#: ALLOW of any of these operations grants the key (Kafka's implied operations).
IMPLIED_BY: Mapping[str, tuple[str, ...]] = {"DESCRIBE": ("DESCRIBE", "READ", "WRITE")}
#: The resources requests act on: (type, name).
RESOURCES = (("TOPIC", "a"), ("TOPIC", "ab"), ("TOPIC", "b"), ("GROUP", "a"))
#: The stored patterns: (type, pattern type, name).
PATTERNS = (
    ("TOPIC", "LITERAL", "a"), ("TOPIC", "LITERAL", "ab"), ("TOPIC", "LITERAL", WILDCARD_RESOURCE),
    ("TOPIC", "PREFIXED", "a"), ("TOPIC", "PREFIXED", "ab"),
    ("GROUP", "LITERAL", "a"), ("GROUP", "PREFIXED", "a"),
)
#: The principals ``super.users`` may list at start: nobody, or bob.
SUPER_USER_CHOICES = ("", "User:bob")


@dataclass(frozen=True)
class Binding:
    """One binding of the universe: permission, principal, host, operation, pattern."""

    permission: str
    principal: str
    host: str
    operation: str
    resource_type: str
    pattern_type: str
    name: str

    @property
    def key(self) -> str:
        """The binding as a label: ``ALLOW/User:alice/*/READ/TOPIC/PREFIXED/a``."""
        return "/".join((self.permission, self.principal, self.host, self.operation,
                         self.resource_type, self.pattern_type, self.name))


#: Every binding of the universe, by key.
BINDINGS: Mapping[str, Binding] = {
    binding.key: binding
    for (resource_type, pattern_type, name) in PATTERNS
    for permission in ("ALLOW", "DENY")
    for principal in BINDING_PRINCIPALS
    for host in BINDING_HOSTS
    for operation in BINDING_OPERATIONS
    for binding in (Binding(permission, principal, host, operation, resource_type,
                            pattern_type, name),)
}


@dataclass(frozen=True)
class Request:
    """One action to authorize."""

    principal: str
    host: str
    operation: str
    resource_type: str
    name: str


#: Every request of the universe.
REQUESTS = tuple(
    Request(principal, host, operation, resource_type, name)
    for principal in PRINCIPALS for host in HOSTS for operation in OPERATIONS
    for (resource_type, name) in RESOURCES
)


def covers(binding: Binding, resource_type: str, name: str) -> bool:
    """Whether the binding's pattern covers the resource (the declarative reading)."""
    if binding.resource_type != resource_type:
        return False
    if binding.pattern_type == "LITERAL":
        return binding.name in (name, WILDCARD_RESOURCE)
    return name.startswith(binding.name)


def applies(binding: Binding, request: Request, operations: tuple[str, ...]) -> bool:
    """Whether the binding's entry speaks of the request's principal, host and an operation."""
    return (binding.principal in (request.principal, WILDCARD_PRINCIPAL)
            and binding.host in (request.host, WILDCARD_HOST)
            and binding.operation in (*operations, "ALL"))


def looked_up(request: Request, flags: Mapping[str, object]) -> list[Binding]:
    """The bindings the decision considers: the patterns found by lookup, as ``AclAuthorizer``
    builds them (the literal name, the literal ``*``, the PREFIXED prefixes of the name)."""
    name = request.name
    prefixes = [name[:length] for length in range(1, len(name) + 1)]
    if flags.get("prefix_reversed", False):
        prefixes = [pattern for _, kind, pattern in PATTERNS
                    if kind == "PREFIXED" and pattern.startswith(name)]
    keys = {("LITERAL", name), ("LITERAL", WILDCARD_RESOURCE)}
    keys.update(("PREFIXED", prefix) for prefix in prefixes)
    type_blind = bool(flags.get("type_blind", False))
    return [binding for binding in BINDINGS.values()
            if (type_blind or binding.resource_type == request.resource_type)
            and (binding.pattern_type, binding.name) in keys]


def authorized(o: Ops, s: State, request: Request, flags: Mapping[str, object]) -> Term:
    """``AclAuthorizer.authorize`` for one request in state ``s`` (``flags``: the variant)."""
    found = looked_up(request, flags)
    any_acl = o.Or(False, *[s.bound[binding.key] for binding in found])
    deny = o.Or(False, *[s.bound[binding.key] for binding in found
                         if binding.permission == "DENY"
                         and applies(binding, request, (request.operation,))])
    implied = IMPLIED_BY.get(request.operation, (request.operation,))
    allow = o.Or(False, *[s.bound[binding.key] for binding in found
                          if binding.permission == "ALLOW" and applies(binding, request, implied)])
    by_acls = allow if flags.get("allow_wins", False) else o.And(o.Not(deny), allow)
    return o.Or(s.super_user[request.principal],
                o.If(any_acl, by_acls, s.allow_everyone_if_no_acl_found))


def build(variant: Variant) -> Model:
    """The authorizer model; flags ``allow_wins``, ``prefix_reversed``, ``type_blind``."""
    flags = variant.flags
    m = Model("authorizer", __doc__ or "")
    m.var("bound", Bool(), over=[tuple(BINDINGS)], doc="the binding is stored")
    m.var("super_user", Bool(), over=[PRINCIPALS], doc="super.users lists the principal")
    m.var("allow_everyone_if_no_acl_found", Bool(), doc="allow.everyone.if.no.acl.found")

    @m.init(params={"super_users": SUPER_USER_CHOICES, "allow_everyone": (False, True)})
    def init(o: Ops, super_users: str, allow_everyone: bool) -> Mapping[str, Term]:
        return {
            "bound": False,
            "super_user": {principal: principal == super_users for principal in PRINCIPALS},
            "allow_everyone_if_no_acl_found": allow_everyone,
        }

    @m.action(modifies=["bound"], params={"binding": tuple(BINDINGS)})
    def acl_created(o: Ops, s: State, binding: str) -> Transition:
        """CreateAcls stores a binding (or a change notification brings it)."""
        return Transition(o.Not(s.bound[binding]), {"bound": {binding: True}})

    @m.action(modifies=["bound"], params={"binding": tuple(BINDINGS)})
    def acl_deleted(o: Ops, s: State, binding: str) -> Transition:
        """DeleteAcls removes a binding (or a change notification drops it)."""
        return Transition(s.bound[binding], {"bound": {binding: False}})

    @m.invariant("ACL_DENY_WINS")
    def acl_deny_wins(o: Ops, s: State) -> Term:
        """A request a stored DENY covers is refused, whatever ALLOWs exist (super users aside).

        Each request's decision is built once and shared by the implications of every binding
        (the same formula; building it per binding cost more than proving it)."""
        decisions = {request: authorized(o, s, request, flags) for request in REQUESTS}
        return o.And(*[
            o.Implies(o.And(o.Not(s.super_user[request.principal]), s.bound[binding.key]),
                      o.Not(decisions[request]))
            for request in REQUESTS for binding in BINDINGS.values()
            if binding.permission == "DENY"
            and covers(binding, request.resource_type, request.name)
            and applies(binding, request, (request.operation,))
        ])

    @m.invariant("ACL_NO_ESCALATION")
    def acl_no_escalation(o: Ops, s: State) -> Term:
        """Allowed only by a super user, a covering ALLOW, or the no-ACL default on a resource no
        binding covers: bindings on A never grant anything on B unless a pattern covers B."""
        terms = []
        for request in REQUESTS:
            covering = [binding for binding in BINDINGS.values()
                        if covers(binding, request.resource_type, request.name)]
            implied = IMPLIED_BY.get(request.operation, (request.operation,))
            granted = o.Or(False, *[s.bound[binding.key] for binding in covering
                                    if binding.permission == "ALLOW"
                                    and applies(binding, request, implied)])
            uncovered = o.Not(o.Or(False, *[s.bound[binding.key] for binding in covering]))
            terms.append(o.Implies(
                authorized(o, s, request, flags),
                o.Or(s.super_user[request.principal], granted,
                     o.And(s.allow_everyone_if_no_acl_found, uncovered))))
        return o.And(*terms)

    @m.witness("PREFIX_ALLOW_WITH_WILDCARD_DENY")
    def prefix_allow_with_wildcard_deny(o: Ops, s: State) -> Term:
        """alice may do ALL on the topics prefixed ``a`` and reads ``ab``, but a DENY of WRITE on
        ``ab`` for every principal refuses her that write, while she still writes ``a``; bob,
        an ordinary user, may not even read ``ab``."""
        def request(principal: str, operation: str, name: str) -> Request:
            return Request(principal, "10.0.0.2", operation, "TOPIC", name)

        return o.And(
            o.Not(s.allow_everyone_if_no_acl_found), o.Not(s.super_user["User:bob"]),
            s.bound["ALLOW/User:alice/*/ALL/TOPIC/PREFIXED/a"],
            authorized(o, s, request("User:alice", "READ", "ab"), flags),
            o.Not(authorized(o, s, request("User:alice", "WRITE", "ab"), flags)),
            authorized(o, s, request("User:alice", "WRITE", "a"), flags),
            o.Not(authorized(o, s, request("User:bob", "READ", "ab"), flags)),
        )

    return m


MODELS = (
    ModelDefinition(
        name="authorizer",
        doc="ACL_DENY_WINS, ACL_NO_ESCALATION: AclAuthorizer's decision over stored bindings",
        build=build,
        variants=(
            Variant("shipped", "lookup by literal, wildcard and prefixes of the name; deny wins",
                    shipped=True, expected={"ACL_DENY_WINS": Status.PROVED,
                                            "ACL_NO_ESCALATION": Status.PROVED}),
            Variant("allow_wins", "any matching ALLOW grants, even when a DENY matches",
                    {"allow_wins": True}, expected={"ACL_DENY_WINS": Status.VIOLATED}),
            Variant("prefix_reversed",
                    "PREFIXED looked up the wrong way: pattern 'ab' applies to resource 'a'",
                    {"prefix_reversed": True}, expected={"ACL_DENY_WINS": Status.VIOLATED,
                                                    "ACL_NO_ESCALATION": Status.VIOLATED}),
            Variant("type_blind", "the lookup ignores the resource type (GROUP grants TOPIC)",
                    {"type_blind": True}, expected={"ACL_NO_ESCALATION": Status.VIOLATED}),
        ),
        depth=3,
        source="KIP-140 (AdminClient ACL APIs), KIP-290 (prefixed ACLs), AclAuthorizer",
    ),
)
