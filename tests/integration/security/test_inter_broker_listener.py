"""Replication over a second listener with another security protocol: three brokers whose
clients use PLAINTEXT (listed first) and whose replica fetchers and controller use INTERNAL
(SASL_PLAINTEXT, SCRAM-SHA-512 as the super user ``admin``), with ACLs on.

An anonymous PLAINTEXT connection may not fetch as a replica (CLUSTER_ACTION), so followers
catch up only if they fetch on ``inter.broker.listener.name``; the topic's
``min.insync.replicas=3`` makes every acks=all produce wait for all three.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from impl.broker.admin import AdminClient
from impl.security.authorizer import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from impl.security.config import ClientSecurity, SecurityProtocol
from tests.integration.broker._harness import RunningBroker

from .conftest import ADMIN_PASSWORD, add_users

pytestmark = [pytest.mark.integration,
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

WAIT_SECONDS = 60.0
RECORDS = 20


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def three_brokers(zk_chroot: str, tmp_path: Path) -> Iterator[list[RunningBroker]]:
    add_users(zk_chroot)
    jaas = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="admin" password="{ADMIN_PASSWORD}";')
    brokers: list[RunningBroker] = []
    try:
        for broker_id in (1, 2, 3):
            brokers.append(RunningBroker(
                zk_chroot, tmp_path / f"b{broker_id}", broker_id=broker_id, dirs=1,
                run_controller=True, overrides=[
                    "listeners=PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,"
                    "INTERNAL:SASL_PLAINTEXT",
                    "inter.broker.listener.name=INTERNAL",
                    "sasl.enabled.mechanisms=SCRAM-SHA-512",
                    "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
                    f"sasl.jaas.config={jaas}",
                    "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                    "super.users=User:admin", "replica.lag.time.max.ms=10000",
                ]).start())
        yield brokers
    finally:
        for broker in reversed(brokers):
            broker.stop()


def test_followers_fetch_on_the_inter_broker_listener(three_brokers: list[RunningBroker]
                                                      ) -> None:
    from kafka import KafkaProducer

    first = three_brokers[0].broker
    internal = f"127.0.0.1:{first.server_ports['INTERNAL']}"
    plaintext = f"127.0.0.1:{first.server_ports['PLAINTEXT']}"
    admin_security = ClientSecurity(SecurityProtocol.SASL_PLAINTEXT, "SCRAM-SHA-512", "admin",
                                    ADMIN_PASSWORD)

    def registered() -> bool:
        with AdminClient(internal, security=admin_security) as admin:
            return len(admin.metadata().brokers) == 3

    _wait(registered, "three brokers registered")
    with AdminClient(internal, security=admin_security) as admin:
        assert admin.create_topics([("replicated", 1, 3)], timeout_ms=30_000) == {
            "replicated": (0, None)}
        assert admin.incremental_alter_configs(2, "replicated",
                                               [("min.insync.replicas", 0, "3")]) == (0, None)
        grants = [AclBinding(ResourcePattern(ResourceType.TOPIC, "replicated",
                                             PatternType.LITERAL),
                             AccessControlEntry("User:ANONYMOUS", "*", operation,
                                                AclPermissionType.ALLOW))
                  for operation in (AclOperation.WRITE, AclOperation.DESCRIBE)]
        assert admin.create_acls(grants) == [(0, None), (0, None)]

    def in_sync() -> bool:
        with AdminClient(internal, security=admin_security) as admin:
            [partition] = admin.metadata(["replicated"]).topics["replicated"][1]
            return sorted(partition.isr) == [1, 2, 3]

    _wait(in_sync, "three replicas in the ISR")

    def granted_everywhere() -> bool:
        for running in three_brokers:
            port = running.broker.server_ports["PLAINTEXT"]
            with AdminClient(f"127.0.0.1:{port}") as anonymous:
                topics = anonymous.metadata(["replicated"]).topics
                if topics.get("replicated", (-1, ()))[0] != 0:
                    return False
        return True

    _wait(granted_everywhere, "every broker to learn the anonymous grants")
    # an anonymous client produces on PLAINTEXT; acks=all with min.insync.replicas=3 succeeds
    # only once both followers have fetched each batch over INTERNAL
    producer = KafkaProducer(bootstrap_servers=plaintext, acks="all", retries=5)
    try:
        sent = [producer.send("replicated", b"r%d" % index).get(timeout=30)
                for index in range(RECORDS)]
    finally:
        producer.close()
    assert [record.offset for record in sent] == list(range(RECORDS))
    with AdminClient(internal, security=admin_security) as admin:
        [partition] = admin.metadata(["replicated"]).topics["replicated"][1]
        assert sorted(partition.isr) == [1, 2, 3]
        assert admin.list_offsets([("replicated", 0)]) == {("replicated", 0): RECORDS}
