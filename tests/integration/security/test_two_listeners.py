"""Two brokers with two listeners each (PLAINTEXT first, SASL_SSL second): every listener is
registered in ZooKeeper and carried by UpdateMetadata, so a client bootstrapping on the second
listener sees both brokers at their SASL_SSL ports and produces to a partition led by the other
broker, while a client on the first listener sees both brokers at their PLAINTEXT ports and a
group consumer on it is sent to its coordinator's PLAINTEXT endpoint.

The cluster is built by ``logproof cluster up --security sasl_ssl`` (CA, certificates, SCRAM
admin, ACLs); each broker is then started again from its config with a PLAINTEXT listener in
front of its SASL_SSL one (the inter-broker listener stays SASL_SSL).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from impl.broker.admin import AdminClient
from impl.broker.config import parse_properties
from impl.cli.cmd_cluster import Cluster
from impl.controller import find_free_loopback_port
from impl.security.config import parse_client_properties

pytestmark = [pytest.mark.integration,
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

WAIT_SECONDS = 60.0


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def cluster(zk_chroot: str, tmp_path: Path) -> Iterator[tuple[Cluster, dict[int, int]]]:
    running = Cluster(tmp_path, 2, 1, zookeeper=zk_chroot, base_port=None, overrides=[],
                      security="sasl_ssl")
    plaintext: dict[int, int] = {}
    try:
        running.start()
        running.stop()
        for broker_id, port in sorted(running.ports.items()):
            config = tmp_path / f"broker-{broker_id}" / "server.properties"
            plaintext[broker_id] = find_free_loopback_port()
            text = config.read_text().replace(
                f"listeners=SASL_SSL://127.0.0.1:{port}\n",
                f"listeners=PLAINTEXT://127.0.0.1:{plaintext[broker_id]},"
                f"SASL_SSL://127.0.0.1:{port}\n")
            assert "PLAINTEXT://" in text
            config.write_text(text)
            log = (tmp_path / f"broker-{broker_id}" / "broker.log").open("ab")
            running.processes[broker_id] = subprocess.Popen(
                [sys.executable, "-m", "impl.cli", "broker", "--config", str(config)],
                stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                start_new_session=True)
            log.close()
        for broker_id, process in running.processes.items():
            assert process.stdout is not None
            assert b"serving" in process.stdout.readline(), f"broker {broker_id} did not start"
        yield running, plaintext
    finally:
        running.stop()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_metadata_answers_every_broker_on_the_request_listener(
        cluster: tuple[Cluster, dict[int, int]]) -> None:
    from kafka import KafkaProducer

    running, plaintext = cluster
    assert running.admin_properties is not None
    text = running.admin_properties.read_text()
    admin_security = parse_client_properties(parse_properties(text))
    match = re.search(r'password="([^"]+)"', text)
    assert match is not None
    sasl_ports = dict(running.ports)
    second_listener = f"127.0.0.1:{sasl_ports[1]}"

    def brokers_on(bootstrap: str, secure: bool) -> dict[int, int]:
        with AdminClient(bootstrap, security=admin_security if secure else None) as admin:
            return {b: port for b, (_host, port, _rack) in admin.metadata().brokers.items()}

    _wait(lambda: brokers_on(second_listener, True) == sasl_ports,
          "both brokers at their SASL_SSL ports")
    _wait(lambda: brokers_on(f"127.0.0.1:{plaintext[2]}", False) == plaintext,
          "both brokers at their PLAINTEXT ports")
    with AdminClient(second_listener, security=admin_security) as admin:
        assert admin.create_topics([("spread", 2, 1)], timeout_ms=30_000) == {
            "spread": (0, None)}

    def leaders() -> dict[int, int]:
        with AdminClient(second_listener, security=admin_security) as admin:
            partitions = admin.metadata(["spread"]).topics["spread"][1]
            return {p.partition: p.leader for p in partitions}

    _wait(lambda: sorted(leaders().values()) == [1, 2], "a leader on each broker")
    [remote] = [partition for partition, leader in leaders().items() if leader == 2]
    producer = KafkaProducer(bootstrap_servers=second_listener, security_protocol="SASL_SSL",
                             sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="admin",
                             sasl_plain_password=match.group(1), acks="all",
                             ssl_cafile=str(running.data_dir / "tls" / "ca.pem"))
    try:
        sent = [producer.send("spread", b"v%d" % i, partition=remote).get(timeout=30)
                for i in range(5)]
    finally:
        producer.close()
    assert [record.offset for record in sent] == list(range(5))
    assert {record.partition for record in sent} == {remote}
    # A group consumer on the PLAINTEXT listener (the anonymous principal, granted READ on the
    # topic and the group) is sent to its coordinator's PLAINTEXT endpoint by FindCoordinator,
    # although each broker's SASL_SSL endpoint is registered first.
    from kafka import KafkaConsumer

    from impl.security.authorizer import (
        AccessControlEntry,
        AclBinding,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourcePattern,
        ResourceType,
    )

    grants = [AclBinding(ResourcePattern(kind, name, PatternType.LITERAL),
                         AccessControlEntry("User:ANONYMOUS", "*", AclOperation.READ,
                                            AclPermissionType.ALLOW))
              for kind, name in ((ResourceType.TOPIC, "spread"), (ResourceType.GROUP, "plain"))]
    with AdminClient(second_listener, security=admin_security) as admin:
        assert admin.create_acls(grants) == [(0, None), (0, None)]

    def group_consume() -> list[bytes]:
        consumer = KafkaConsumer("spread", bootstrap_servers=f"127.0.0.1:{plaintext[1]}",
                                 group_id="plain", auto_offset_reset="earliest",
                                 enable_auto_commit=False, consumer_timeout_ms=15_000)
        try:
            values = [m.value for _, m in zip(range(5), consumer, strict=False)]
            consumer.commit()
            return values
        finally:
            consumer.close()

    values: list[bytes] = []

    def consumed() -> bool:
        values[:] = group_consume()
        return len(values) == 5

    _wait(consumed, "a PLAINTEXT group consumer to read the 5 records")
    assert sorted(values) == [b"v%d" % i for i in range(5)]
