"""Fixtures: a CA with broker and client certificates, SCRAM users in ZooKeeper, and a broker
with a SASL_SSL listener (clients, inter-broker) and an SSL listener requiring client
certificates (mTLS), ACLs on, ``User:admin`` the super user."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from impl.cli import main as cli_main
from impl.security.certificates import create_authority, issue, write_split
from impl.security.config import ClientSecurity, SecurityProtocol
from tests.integration.broker._harness import RunningBroker

ADMIN_PASSWORD = "admin-secret"
PASSWORDS = {"admin": ADMIN_PASSWORD, "alice": "alice-secret", "bob": "bob-secret"}
#: The mTLS client's principal (RFC 2253 subject of its certificate).
MTLS_PRINCIPAL = "User:CN=mtls-client,O=logproof"


@dataclass
class SecureBroker:
    """The running broker, its two ports and the files clients need."""

    running: RunningBroker
    sasl_port: int
    mtls_port: int
    ca: Path
    client_key: Path
    client_cert: Path
    zk_chroot: str

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def mtls_bootstrap(self) -> str:
        return f"127.0.0.1:{self.mtls_port}"

    def client(self, user: str, password: str | None = None,
               mechanism: str = "SCRAM-SHA-512") -> ClientSecurity:
        return ClientSecurity(SecurityProtocol.SASL_SSL, mechanism, user,
                              PASSWORDS.get(user, "") if password is None else password,
                              cafile=str(self.ca))

    def command_config(self, directory: Path, user: str) -> Path:
        path = directory / f"{user}.properties"
        path.write_text(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{PASSWORDS[user]}";\n'
            f"ssl.truststore.location={self.ca}\n")
        return path


def add_users(zk_chroot: str) -> None:
    """SCRAM-SHA-256 and -512 credentials of every test user, with ``logproof users``."""
    for user, password in PASSWORDS.items():
        status = cli_main(["users", "--zookeeper", zk_chroot, "--entity-type", "users",
                           "--entity-name", user, "--alter", "--add-config",
                           f"SCRAM-SHA-256=[password={password}],"
                           f"SCRAM-SHA-512=[iterations=4096,password={password}]"])
        assert status == 0


@pytest.fixture
def secure_broker(zk_chroot: str, tmp_path: Path) -> Iterator[SecureBroker]:
    yield from _secure_broker(zk_chroot, tmp_path, run_controller=False)


@pytest.fixture
def secure_controller_broker(zk_chroot: str, tmp_path: Path) -> Iterator[SecureBroker]:
    """:func:`secure_broker` running its own controller (topics created through the API)."""
    yield from _secure_broker(zk_chroot, tmp_path, run_controller=True)


def _secure_broker(zk_chroot: str, tmp_path: Path, *, run_controller: bool
                   ) -> Iterator[SecureBroker]:
    authority = create_authority(tmp_path / "tls")
    broker_pem = issue(authority, tmp_path / "tls", "broker-1")
    client_pem = issue(authority, tmp_path / "tls", "mtls-client")
    client_key, client_cert = write_split(client_pem)
    add_users(zk_chroot)
    jaas = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="admin" password="{ADMIN_PASSWORD}";')
    plain_jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                  f'username="admin" password="{ADMIN_PASSWORD}" '
                  f'user_admin="{ADMIN_PASSWORD}" user_alice="alice-secret";')
    overrides = [
        "listeners=SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
        f"ssl.keystore.location={broker_pem}",
        f"ssl.truststore.location={authority.path}",
        "listener.name.ssl.ssl.client.auth=required",
        "sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
        "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
        f"sasl.jaas.config={jaas}",
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={plain_jaas}",
        "inter.broker.listener.name=SASL_SSL",
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "super.users=User:admin",
    ]
    if run_controller:
        overrides += ["offsets.topic.replication.factor=1", "offsets.topic.num.partitions=2",
                      "group.initial.rebalance.delay.ms=0"]
    running = RunningBroker(zk_chroot, tmp_path, overrides=overrides,
                            run_controller=run_controller).start()
    try:
        assert running.broker.server is not None
        ports = running.broker.server.ports
        yield SecureBroker(running, ports[0], ports[1], authority.path, client_key,
                           client_cert, zk_chroot)
    finally:
        running.stop()
