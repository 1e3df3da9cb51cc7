"""AlterUserScramCredentials and DescribeUserScramCredentials (KIP-554) with real admin clients
(confluent-kafka and kafka-python) and ``logproof users --bootstrap-server``: credentials set
through the broker log in, deleted ones no longer do, a principal without ALTER/DESCRIBE on the
cluster is refused, and bad alterations fail their user only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from impl.broker.admin import AdminClient
from impl.cli import main as cli_main
from impl.security.client import AuthenticationError, open_socket

from .conftest import SecureBroker

pytestmark = [pytest.mark.integration,
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

TIMEOUT_SECONDS = 30.0
CLUSTER_AUTHORIZATION_FAILED = 31
UNACCEPTABLE_CREDENTIAL = 93
RESOURCE_NOT_FOUND = 91


def _logs_in(secure: SecureBroker, user: str, password: str, mechanism: str) -> bool:
    try:
        with open_socket("127.0.0.1", secure.sasl_port,
                         secure.client(user, password, mechanism), 10.0):
            return True
    except AuthenticationError:
        return False


def test_confluent_kafka_alters_and_describes_credentials(
        secure_controller_broker: SecureBroker) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient as ConfluentAdmin
    from confluent_kafka.admin._scram import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    secure = secure_controller_broker
    settings = {"bootstrap.servers": secure.sasl_bootstrap, "security.protocol": "SASL_SSL",
                "sasl.mechanisms": "SCRAM-SHA-512", "ssl.ca.location": str(secure.ca)}
    admin = ConfluentAdmin({**settings, "sasl.username": "admin",
                            "sasl.password": "admin-secret"})
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"carol-pw"),
        UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"carol-pw"),
        UserScramCredentialUpsertion(
            "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 1000), b"dave-pw"),
    ])
    futures["carol"].result(timeout=TIMEOUT_SECONDS)
    with pytest.raises(KafkaException) as refused:
        futures["dave"].result(timeout=TIMEOUT_SECONDS)
    assert refused.value.args[0].code() == UNACCEPTABLE_CREDENTIAL
    assert _logs_in(secure, "carol", "carol-pw", "SCRAM-SHA-256")
    assert _logs_in(secure, "carol", "carol-pw", "SCRAM-SHA-512")
    assert not _logs_in(secure, "carol", "wrong", "SCRAM-SHA-512")
    assert not _logs_in(secure, "dave", "dave-pw", "SCRAM-SHA-512")

    described: Any = admin.describe_user_scram_credentials(["carol", "nobody"])
    carol = described["carol"].result(timeout=TIMEOUT_SECONDS)
    assert sorted((info.mechanism, info.iterations) for info in carol.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 8192), (ScramMechanism.SCRAM_SHA_512, 4096)]
    with pytest.raises(KafkaException) as missing:
        described["nobody"].result(timeout=TIMEOUT_SECONDS)
    assert missing.value.args[0].code() == RESOURCE_NOT_FOUND
    all_users: Any = admin.describe_user_scram_credentials()
    everyone = all_users.result(timeout=TIMEOUT_SECONDS)
    assert {"admin", "alice", "bob", "carol"} <= set(everyone)

    admin.alter_user_scram_credentials([UserScramCredentialDeletion(
        "carol", ScramMechanism.SCRAM_SHA_256)])["carol"].result(timeout=TIMEOUT_SECONDS)
    assert not _logs_in(secure, "carol", "carol-pw", "SCRAM-SHA-256")
    assert _logs_in(secure, "carol", "carol-pw", "SCRAM-SHA-512")

    # alice has no ALTER or DESCRIBE on the cluster
    alice = ConfluentAdmin({**settings, "sasl.username": "alice",
                            "sasl.password": "alice-secret"})
    denied = alice.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"takeover")])
    with pytest.raises(KafkaException) as caught:
        denied["alice"].result(timeout=TIMEOUT_SECONDS)
    assert caught.value.args[0].code() == CLUSTER_AUTHORIZATION_FAILED
    assert _logs_in(secure, "alice", "alice-secret", "SCRAM-SHA-512")
    # (a denied DescribeUserScramCredentials, answered as Kafka answers it, with the top-level
    # error only, crashes confluent-kafka 2.16's client: it is checked with kafka-python below)


def test_kafka_python_and_the_command_line(secure_controller_broker: SecureBroker, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from kafka.admin import (
        KafkaAdminClient,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    secure = secure_controller_broker
    client = KafkaAdminClient(bootstrap_servers=secure.sasl_bootstrap,
                              security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                              sasl_plain_username="admin", sasl_plain_password="admin-secret",
                              ssl_cafile=str(secure.ca))
    try:
        errors = client.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "erin", ScramMechanism.SCRAM_SHA_512, "erin-pw", iterations=4096)])
        assert errors == {"erin": None}
        described = client.describe_user_scram_credentials(["erin"])
        assert described["erin"]["error"] is None
        assert [(info["mechanism"], info["iterations"])
                for info in described["erin"]["credential_infos"]] == [
            (ScramMechanism.SCRAM_SHA_512, 4096)]
    finally:
        client.close()
    assert _logs_in(secure, "erin", "erin-pw", "SCRAM-SHA-512")

    config = str(secure.command_config(tmp_path, "admin"))
    base = ["users", "--bootstrap-server", secure.sasl_bootstrap, "--command-config", config]
    assert cli_main([*base, "--entity-name", "frank", "--alter", "--add-config",
                     "SCRAM-SHA-256=[iterations=8192,password=frank-pw]"]) == 0
    assert _logs_in(secure, "frank", "frank-pw", "SCRAM-SHA-256")
    capsys.readouterr()
    assert cli_main([*base, "--describe", "--entity-name", "frank"]) == 0
    assert capsys.readouterr().out.strip() == (
        "SCRAM credential configs for user-principal 'frank' are SCRAM-SHA-256=iterations=8192")
    # a deletion of a credential frank does not have: one line, non-zero, nothing changed
    assert cli_main([*base, "--entity-name", "frank", "--alter", "--delete-config",
                     "SCRAM-SHA-512"]) != 0
    assert "RESOURCE_NOT_FOUND" in capsys.readouterr().err
    assert _logs_in(secure, "frank", "frank-pw", "SCRAM-SHA-256")
    # alice may not: CLUSTER_AUTHORIZATION_FAILED on one line
    from kafka.errors import ClusterAuthorizationFailedError

    denied = KafkaAdminClient(bootstrap_servers=secure.sasl_bootstrap,
                              security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                              sasl_plain_username="alice", sasl_plain_password="alice-secret",
                              ssl_cafile=str(secure.ca))
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            denied.describe_user_scram_credentials(["alice"])
    finally:
        denied.close()
    alice = str(secure.command_config(tmp_path, "alice"))
    assert cli_main(["users", "--bootstrap-server", secure.sasl_bootstrap, "--command-config",
                     alice, "--entity-name", "alice", "--alter", "--add-config",
                     "SCRAM-SHA-512=[password=x]"]) != 0
    assert "CLUSTER_AUTHORIZATION_FAILED" in capsys.readouterr().err
    with AdminClient(secure.sasl_bootstrap, security=secure.client("admin")) as admin:
        code, _, found = admin.describe_user_scram_credentials(["frank", "alice"])
    assert code == 0
    assert [(item.user, item.credentials) for item in found] == [
        ("frank", (("SCRAM-SHA-256", 8192),)),
        ("alice", (("SCRAM-SHA-256", 4096), ("SCRAM-SHA-512", 4096)))]
