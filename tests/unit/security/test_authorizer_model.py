"""The authorizer's implementation decides exactly as its model, on generated binding sets.

For a generated set of bindings of the model's universe, a ``super.users`` choice and the
``allow.everyone.if.no.acl.found`` setting, the model state is reached by ``acl_created`` steps
(so it is a reachable state), and every request of the universe is decided by both the model's
concrete reading (:func:`model.authorizer.authorized`) and ``impl.security.authorizer``; the
decisions must be equal, and the model's invariants must hold in that state.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from impl.security.authorizer import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    Authorizer,
    PatternType,
    Resource,
    ResourcePattern,
    ResourceType,
)
from model import State
from model._dsl import CONCRETE
from model.authorizer import (
    BINDINGS,
    REQUESTS,
    SUPER_USER_CHOICES,
    Binding,
    authorized,
)
from model.registry import find

DEFINITION = find("authorizer")
MODEL = DEFINITION.model()
KEYS = sorted(BINDINGS)


def implementation_binding(binding: Binding) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType[binding.resource_type], binding.name,
                        PatternType[binding.pattern_type]),
        AccessControlEntry(binding.principal, binding.host, AclOperation[binding.operation],
                           AclPermissionType[binding.permission]),
    )


def model_state(keys: list[str], super_user: str, allow_everyone: bool) -> State:
    [initial] = [
        state for state in MODEL.initial_states()
        if state.allow_everyone_if_no_acl_found == allow_everyone
        and all(state.super_user[principal] == (principal == super_user)
                for principal in ("User:alice", "User:bob"))
    ]
    state = initial
    for key in keys:
        state = MODEL.step(state, "acl_created", {"binding": key})
    return state


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    keys=st.lists(st.sampled_from(KEYS), unique=True, max_size=12),
    super_user=st.sampled_from(SUPER_USER_CHOICES),
    allow_everyone=st.booleans(),
)
def test_implementation_decides_as_the_model(keys: list[str], super_user: str,
                                             allow_everyone: bool) -> None:
    state = model_state(keys, super_user, allow_everyone)
    assert MODEL.check_invariants(state) == []
    authorizer = Authorizer(super_users=frozenset({super_user}) - {""},
                            allow_everyone_if_no_acl_found=allow_everyone)
    for key in keys:
        assert authorizer.add(implementation_binding(BINDINGS[key]))
    for request in REQUESTS:
        expected = bool(authorized(CONCRETE, state, request, {}))
        decision = authorizer.authorize(
            request.principal, request.host, AclOperation[request.operation],
            Resource(ResourceType[request.resource_type], request.name))
        assert decision.allowed == expected, (request, keys, decision)


def test_a_known_bad_variant_disagrees_with_the_implementation() -> None:
    """The comparison can fail: the allow-wins reading differs on an ALLOW plus a DENY."""
    keys = ["ALLOW/User:alice/*/READ/TOPIC/LITERAL/a", "DENY/User:*/*/READ/TOPIC/PREFIXED/a"]
    state = model_state(keys, "", False)
    request = next(r for r in REQUESTS if (r.principal, r.operation, r.resource_type, r.name)
                   == ("User:alice", "READ", "TOPIC", "a"))
    assert authorized(CONCRETE, state, request, {"allow_wins": True})
    assert not authorized(CONCRETE, state, request, {})
