"""SASL server and client (PLAIN, SCRAM-SHA-256/512), SCRAM credentials and the settings."""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

import pytest

from impl.broker import api_versions
from impl.security import request_acls
from impl.security.config import (
    ClientAuth,
    SecurityConfigError,
    SecurityProtocol,
    inter_broker_client,
    parse,
    parse_client_properties,
    parse_jaas,
)
from impl.security.listener import scram_user
from impl.security.sasl import (
    FAILED_MESSAGE,
    ILLEGAL_SASL_STATE,
    SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM,
    CredentialError,
    SaslClient,
    SaslServer,
    SaslState,
    ScramCredential,
    changed_user,
    decode_user_config,
    encode_user_change,
    encode_user_config,
    make_credential,
)

SALT = b"0123456789abcdef"
CREDENTIALS = {mechanism: make_credential(mechanism, "secret", salt=SALT)
               for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")}


def server() -> SaslServer:
    return SaslServer(["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"],
                      lambda mechanism, user: CREDENTIALS[mechanism] if user == "alice" else None,
                      {"alice": "secret"})


def exchange(mechanism: str, user: str, password: str) -> SaslServer:
    sasl = server()
    assert sasl.handshake(mechanism) == 0
    client = SaslClient(mechanism, user, password)
    token: bytes | None = client.first_token()
    while token is not None and sasl.state is SaslState.AUTHENTICATING:
        step = sasl.authenticate(token)
        if step.error_code:
            assert step.error_code == SASL_AUTHENTICATION_FAILED
            assert step.error_message == FAILED_MESSAGE
            break
        token = client.next_token(step.token)
    return sasl


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_right_password_authenticates(mechanism: str) -> None:
    sasl = exchange(mechanism, "alice", "secret")
    assert sasl.state is SaslState.AUTHENTICATED
    assert sasl.principal == "User:alice"


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", "secret")])
def test_wrong_password_or_unknown_user_fails(mechanism: str, user: str, password: str) -> None:
    sasl = exchange(mechanism, user, password)
    assert sasl.state is SaslState.FAILED
    assert sasl.principal is None


def test_handshake_rules() -> None:
    sasl = server()
    assert sasl.handshake("GSSAPI") == UNSUPPORTED_SASL_MECHANISM
    assert sasl.state is SaslState.HANDSHAKE_REQUIRED
    assert sasl.handshake("PLAIN") == 0
    assert sasl.handshake("PLAIN") == ILLEGAL_SASL_STATE
    assert sasl.state.value == "failed"
    early = server()
    assert early.authenticate(b"\0alice\0secret").error_code == ILLEGAL_SASL_STATE


def test_kafka_accepts_a_final_nonce_that_ends_with_the_server_nonce() -> None:
    """librdkafka before 2.1 sends client nonce + server nonce; Kafka's endsWith accepts it."""
    sasl = server()
    sasl.handshake("SCRAM-SHA-256")
    client_first_bare = "n=alice,r=abc"
    step = sasl.authenticate(b"n,," + client_first_bare.encode())
    server_first = step.token.decode()
    server_nonce = server_first.split(",")[0][2:]
    credential = CREDENTIALS["SCRAM-SHA-256"]
    salted = hashlib.pbkdf2_hmac("sha256", b"secret", credential.salt, credential.iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()

    def final(nonce: str, key: bytes) -> bytes:
        without_proof = f"c=biws,r={nonce}"
        auth = f"{client_first_bare},{server_first},{without_proof}".encode()
        signature = hmac.new(hashlib.sha256(key).digest(), auth, "sha256").digest()
        proof = bytes(a ^ b for a, b in zip(key, signature, strict=True))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    done = sasl.authenticate(final("abc" + server_nonce, client_key))
    assert done.error_code == 0
    assert sasl.state is SaslState.AUTHENTICATED
    forged = server()
    forged.handshake("SCRAM-SHA-256")
    server_first = forged.authenticate(b"n,," + client_first_bare.encode()).token.decode()
    server_nonce = server_first.split(",")[0][2:]
    wrong_key = hmac.new(b"x" * 32, b"Client Key", "sha256").digest()
    assert forged.authenticate(final("abc" + server_nonce, wrong_key)).error_code == 58
    assert forged.state is SaslState.FAILED


def test_scram_credential_text_round_trip_and_bounds() -> None:
    credential = CREDENTIALS["SCRAM-SHA-512"]
    text = credential.to_text()
    assert text.startswith("salt=") and text.endswith(",iterations=4096")  # noqa: PT018
    assert ScramCredential.from_text(text) == credential
    with pytest.raises(CredentialError):
        ScramCredential.from_text(text + ",extra=1")
    with pytest.raises(CredentialError):
        ScramCredential.from_text(text.replace("iterations=4096", "iterations=10"))
    with pytest.raises(CredentialError):
        make_credential("SCRAM-SHA-1", "x")
    with pytest.raises(CredentialError):
        make_credential("SCRAM-SHA-256", "x", iterations=100)


def test_user_config_json() -> None:
    data = encode_user_config({"SCRAM-SHA-256": "salt=a"})
    assert data == b'{"version":1,"config":{"SCRAM-SHA-256":"salt=a"}}'
    assert decode_user_config(data) == {"SCRAM-SHA-256": "salt=a"}
    assert changed_user(encode_user_change("alice")) == "alice"
    assert changed_user(b'{"version":2,"entity_path":"topics/t"}') is None
    assert scram_user(b"n,,n=a=2Cb,r=xyz") == "a,b"


def test_listener_settings() -> None:
    properties = {
        "listener.security.protocol.map": "INTERNAL:SASL_SSL,EXTERNAL:SSL",
        "ssl.keystore.location": "/k.pem",
        "listener.name.external.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
        "sasl.jaas.config": 'x.ScramLoginModule required username="admin" password="pw";',
        "inter.broker.listener.name": "INTERNAL",
        "super.users": "User:admin;User:ops",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    }
    config = parse(properties, ["INTERNAL", "EXTERNAL"])
    assert config.listener("EXTERNAL").client_auth is ClientAuth.REQUIRED
    assert config.listener("INTERNAL").client_auth is ClientAuth.NONE
    assert config.inter_broker.protocol is SecurityProtocol.SASL_SSL
    assert config.super_users == frozenset({"User:admin", "User:ops"})
    assert config.authorizer_enabled
    client = inter_broker_client(config)
    assert (client.username, client.password, client.mechanism) == ("admin", "pw",
                                                                    "SCRAM-SHA-512")
    with pytest.raises(SecurityConfigError, match="no entry"):
        parse({}, ["INTERNAL"])
    with pytest.raises(SecurityConfigError, match="not one of the listeners"):
        parse({"inter.broker.listener.name": "OTHER"}, ["PLAINTEXT"])
    with pytest.raises(SecurityConfigError, match="unsupported SASL mechanism"):
        parse({"sasl.enabled.mechanisms": "GSSAPI"}, ["PLAINTEXT"])
    assert parse_jaas("k", 'm required user_bob="b" username="a";').plain_users == {"bob": "b"}


def test_client_properties() -> None:
    client = parse_client_properties({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": 'm required username="u" password="p";',
        "ssl.truststore.location": "/ca.pem"})
    assert (client.protocol, client.username, client.cafile) == (SecurityProtocol.SASL_SSL, "u",
                                                                 "/ca.pem")
    with pytest.raises(SecurityConfigError, match=r"needs sasl\.jaas\.config"):
        parse_client_properties({"security.protocol": "SASL_PLAINTEXT"})
    with pytest.raises(SecurityConfigError, match="unknown client config key"):
        parse_client_properties({"bootstrap.servers": "x"})


def test_every_accepted_api_declares_its_acl() -> None:
    """The table is the one place that says what each API needs: an API added to the broker
    without a row fails here."""
    missing = [key for key in (*api_versions.ACCEPTED, *api_versions.RAW_APIS)
               if key not in request_acls.REQUIRED_ACLS]
    assert missing == []
    for requirement in request_acls.REQUIRED_ACLS.values():
        if requirement.scope is not request_acls.Scope.NONE:
            assert requirement.denial_code in (29, 30, 31, 53)


@pytest.mark.parametrize("api_key", sorted(request_acls.GROUP_CHECKED))
def test_group_refusals_build_every_version(api_key: int) -> None:
    """The dispatcher's refusal of each group API builds a response of every version kio has,
    so the group handlers are protected as soon as they are added."""
    from types import SimpleNamespace

    from kio.index import load_response_schema

    from impl.broker._kio_build import build

    partition = SimpleNamespace(partition_index=0)
    body = SimpleNamespace(
        group_id="g", groups=["g"], groups_names=["g"], key="g", key_type=0,
        coordinator_keys=["g"], topics=[SimpleNamespace(name="t", partitions=[partition])])
    if api_key == request_acls.OFFSET_FETCH:
        body.groups = None  # v0-7 name one group in group_id
    resources = request_acls.checked_resources(api_key, body)
    assert resources
    data = request_acls.group_refusal_data(api_key, body, 30)
    version = 0
    while True:
        try:
            response_class = load_response_schema(api_key, version)
        except Exception:
            break
        if api_key == request_acls.OFFSET_FETCH and version >= 8:
            body.groups = [SimpleNamespace(group_id="g")]
            data = request_acls.group_refusal_data(api_key, body, 30)
        built = build(response_class, data)
        assert built is not None
        version += 1
    assert version > 0


@pytest.mark.parametrize("api_key", sorted(
    key for key, requirement in request_acls.REQUIRED_ACLS.items()
    if requirement.scope is request_acls.Scope.REQUEST
    and key in api_versions.ACCEPTED and key not in api_versions.RAW_APIS))
def test_request_wide_refusals_build_every_version(api_key: int) -> None:
    """The dispatcher's refusal of each cluster-wide API builds a response of every version
    kio has (an unauthorized ElectLeaders once failed to encode and lost its answer)."""
    from types import SimpleNamespace

    from kio.index import load_response_schema

    from impl.broker._kio_build import build

    body = SimpleNamespace(
        topic_partitions=[SimpleNamespace(topic="t", partitions=[0, 1])],
        dirs=[SimpleNamespace(topics=[SimpleNamespace(name="t", partitions=[0])])],
        creations=[object()], filters=[object()], transactional_id=None)
    data = request_acls.refusal_data(api_key, body, 31, "denied")
    version = 0
    while True:
        try:
            response_class = load_response_schema(api_key, version)
        except Exception:
            break
        assert build(response_class, data) is not None
        version += 1
    assert version > 0
    if api_key == request_acls.ELECT_LEADERS:
        results: Any = data["replica_election_results"]
        assert [p["error_code"] for p in results[0]["partition_result"]] == [31, 31]
