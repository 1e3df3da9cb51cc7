"""The security stage of ``logproof demo``: a denied and an allowed client on a SASL_SSL listener.

The demo broker gets a second listener, SASL_SSL (a self-signed CA made here, SCRAM-SHA-512),
with ACLs on. Its first listener stays the local, trusted PLAINTEXT one the other demo stages
use (``User:ANONYMOUS`` is a super user there, as a laptop setup would have it). The stage
stores SCRAM credentials for ``alice`` in ZooKeeper, lets ``admin`` grant her READ on the demo
topic with CreateAcls, then shows: a wrong password refused; alice reading the topic; alice's
produce refused (topic authorization failed, error 29); the topics alice may not DESCRIBE hidden.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import trio

from .authorizer import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from .certificates import create_authority, issue
from .client import AuthenticationError, open_socket
from .config import ClientSecurity, SecurityProtocol
from .sasl import make_credential


@dataclass(frozen=True)
class DemoTls:
    """The files and passwords of the demo's secure listener."""

    ca: Path
    admin_password: str
    alice_password: str


def secure_settings(root: Path) -> tuple[str, DemoTls]:
    """Broker properties adding the SASL_SSL listener and ACLs, and what the stage needs."""
    authority = create_authority(root / "tls")
    keystore = issue(authority, root / "tls", "broker-1")
    tls = DemoTls(authority.path, secrets.token_urlsafe(12), secrets.token_urlsafe(12))
    jaas = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="admin" password="{tls.admin_password}";')
    properties = (
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL\n"
        f"ssl.keystore.location={keystore}\nssl.truststore.location={authority.path}\n"
        "sasl.enabled.mechanisms=SCRAM-SHA-512\n"
        f"sasl.jaas.config={jaas}\n"
        "inter.broker.listener.name=PLAINTEXT\n"
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n"
        "super.users=User:ANONYMOUS;User:admin\n"
    )
    return properties, tls


class SecurityDemoError(Exception):
    """The stage saw something other than what it shows."""


def run_stage(zookeeper: str, sasl_bootstrap: str, topic: str, tls: DemoTls,
              say: Callable[[str, str], None]) -> None:
    """Run the stage against a broker serving SASL_SSL on ``sasl_bootstrap``.

    Raises:
        SecurityDemoError: a client was allowed what it should not be, or refused what it
            should be allowed.
    """
    from kafka import KafkaConsumer, KafkaProducer  # noqa: PLC0415
    from kafka import TopicPartition as KafkaTopicPartition  # noqa: PLC0415
    from kafka.errors import TopicAuthorizationFailedError  # noqa: PLC0415

    from impl.broker.admin import AdminClient  # noqa: PLC0415
    from impl.cli.cmd_users import alter_user  # noqa: PLC0415
    from impl.controller._kazoo import KazooCoordinator  # noqa: PLC0415

    credentials = {"SCRAM-SHA-512": make_credential("SCRAM-SHA-512", tls.alice_password).to_text()}
    admin_credentials = {"SCRAM-SHA-512": make_credential("SCRAM-SHA-512",
                                                          tls.admin_password).to_text()}

    async def add_users() -> None:
        coordinator = await KazooCoordinator.connect(zookeeper)
        try:
            await alter_user(coordinator, "alice", credentials, [])
            await alter_user(coordinator, "admin", admin_credentials, [])
        finally:
            await coordinator.close()

    trio.run(add_users)
    say("security", "SCRAM-SHA-512 credentials of alice and admin stored in /config/users")
    host, port = sasl_bootstrap.rsplit(":", 1)

    def client(user: str, password: str) -> ClientSecurity:
        return ClientSecurity(SecurityProtocol.SASL_SSL, "SCRAM-SHA-512", user, password,
                              cafile=str(tls.ca))

    try:
        open_socket(host, int(port), client("alice", "not-her-password"), 10.0).close()
        raise SecurityDemoError("a wrong password was accepted")
    except AuthenticationError as error:
        say("security", f"alice with a wrong password: refused ({error})")
    read = AclBinding(ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                      AccessControlEntry("User:alice", "*", AclOperation.READ,
                                         AclPermissionType.ALLOW))
    with AdminClient(sasl_bootstrap, security=client("admin", tls.admin_password)) as admin:
        if admin.create_acls([read]) != [(0, None)]:
            raise SecurityDemoError("admin could not create the ACL")
    say("security", f"admin (super user) allowed User:alice to READ topic {topic!r}")
    common = {"bootstrap_servers": sasl_bootstrap, "security_protocol": "SASL_SSL",
              "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice",
              "sasl_plain_password": tls.alice_password, "ssl_cafile": str(tls.ca)}
    consumer = KafkaConsumer(**common, enable_auto_commit=False, consumer_timeout_ms=5000)
    consumer.assign([KafkaTopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    count = sum(1 for _, _ in zip(range(100), consumer, strict=False))
    consumer.close()
    if count == 0:
        raise SecurityDemoError("alice could not read the topic she may READ")
    say("security", f"alice (allowed) read {count} records over SASL_SSL")
    producer = KafkaProducer(**common, acks="all", retries=0, max_block_ms=10_000)
    try:
        producer.send(topic, value=b"forbidden", partition=0).get(timeout=30)
        raise SecurityDemoError("alice wrote to a topic she may only read")
    except TopicAuthorizationFailedError:
        say("security", "alice (denied) producing to it: refused, topic authorization "
                        "failed (error 29)")
    finally:
        producer.close()
    with AdminClient(sasl_bootstrap, security=client("alice", tls.alice_password)) as admin:
        visible = sorted(admin.metadata().topics)
    say("security", f"Metadata shows alice only the topics she may describe: {visible}")
