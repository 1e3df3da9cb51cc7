"""KIP-554's decisions (``impl.security.scram_credentials``): per-user validation, all or
nothing per user, credentials computed from the client's salted password, describe results."""

from __future__ import annotations

import pytest

from impl.security.sasl import (
    SaslClient,
    SaslServer,
    SaslState,
    ScramCredential,
    make_credential,
    salted_password,
)
from impl.security.scram_credentials import (
    DUPLICATE_RESOURCE,
    RESOURCE_NOT_FOUND,
    UNACCEPTABLE_CREDENTIAL,
    Deletion,
    Upsertion,
    UserChange,
    describe,
    plan_alteration,
)

UNSUPPORTED_SASL_MECHANISM = 33
SALT = b"0123456789abcdef0123456789abcdef"


def upsert(user: str, mechanism_id: int = 2, iterations: int = 4096,
           password: str = "secret") -> Upsertion:
    name = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}.get(mechanism_id, "SCRAM-SHA-512")
    return Upsertion(user, mechanism_id, iterations, SALT,
                     salted_password(name, password, SALT, min(max(iterations, 1), 16384)))


def test_a_stored_upsertion_logs_in_with_the_password_only_the_client_knew() -> None:
    plan = plan_alteration([], [upsert("alice", 2, 8192, "s3cret")])
    assert plan.errors == {}
    config = plan.changes["alice"].apply({})
    assert isinstance(config, dict)
    stored = ScramCredential.from_text(config["SCRAM-SHA-512"])
    assert stored == make_credential("SCRAM-SHA-512", "s3cret", 8192, salt=SALT)
    server = SaslServer(["SCRAM-SHA-512"], lambda mechanism, user: stored, {})
    assert server.handshake("SCRAM-SHA-512") == 0
    client = SaslClient("SCRAM-SHA-512", "alice", "s3cret")
    token: bytes | None = client.first_token()
    while token is not None:
        step = server.authenticate(token)
        assert step.error_code == 0
        token = client.next_token(step.token) if server.state is not SaslState.AUTHENTICATED \
            else None
    assert server.state is SaslState.AUTHENTICATED


@pytest.mark.parametrize(("deletions", "upsertions", "code"), [
    ([], [upsert("u", iterations=4095)], UNACCEPTABLE_CREDENTIAL),
    ([], [upsert("u", iterations=16385)], UNACCEPTABLE_CREDENTIAL),
    ([], [upsert("")], UNACCEPTABLE_CREDENTIAL),
    ([], [upsert("a/b")], UNACCEPTABLE_CREDENTIAL),
    ([], [Upsertion("u", 2, 4096, b"", b"x")], UNACCEPTABLE_CREDENTIAL),
    ([], [upsert("u", mechanism_id=3)], UNSUPPORTED_SASL_MECHANISM),
    ([Deletion("u", 0)], [], UNSUPPORTED_SASL_MECHANISM),
    ([], [upsert("u"), upsert("u")], DUPLICATE_RESOURCE),
    ([Deletion("u", 2)], [upsert("u")], DUPLICATE_RESOURCE),
])
def test_a_bad_alteration_fails_its_user_only(deletions: list[Deletion],
                                              upsertions: list[Upsertion], code: int) -> None:
    plan = plan_alteration(deletions, [*upsertions, upsert("other", 1)])
    user = (deletions or upsertions)[0].user
    assert plan.errors[user][0] == code
    assert user not in plan.changes
    assert set(plan.changes) == {"other"}
    assert plan.users[-1] == "other"


def test_one_user_is_all_or_nothing() -> None:
    """A user with one bad upsertion keeps every credential it had: none of its good ones is
    applied either."""
    plan = plan_alteration([], [upsert("u", 1), upsert("u", 2, iterations=1)])
    assert plan.errors["u"][0] == UNACCEPTABLE_CREDENTIAL
    assert plan.changes == {}


def test_deleting_a_missing_credential_changes_nothing() -> None:
    change = UserChange("u", {"SCRAM-SHA-256": "x"}, ("SCRAM-SHA-512",))
    refused = change.apply({"quota": "1"})
    assert isinstance(refused, tuple)
    assert refused[0] == RESOURCE_NOT_FOUND
    assert change.apply({"SCRAM-SHA-512": "old", "quota": "1"}) == {
        "SCRAM-SHA-256": "x", "quota": "1"}


def test_describe_named_and_all_users() -> None:
    stored = {
        "alice": {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "p", 8192).to_text(),
                  "SCRAM-SHA-512": make_credential("SCRAM-SHA-512", "p", 4096).to_text()},
        "quota-only": {"producer_byte_rate": "1024"},
        "damaged": {"SCRAM-SHA-512": "salt=@@"},
    }
    everyone = describe(None, stored)
    assert [(item.user, item.credentials) for item in everyone] == [
        ("alice", ((1, 8192), (2, 4096)))]
    named = describe(["alice", "nobody", "quota-only", "bob", "bob"], stored)
    assert [(item.user, item.error_code) for item in named] == [
        ("alice", 0), ("nobody", RESOURCE_NOT_FOUND), ("quota-only", RESOURCE_NOT_FOUND),
        ("bob", DUPLICATE_RESOURCE)]
