"""``logproof cluster up --security sasl_ssl``: two brokers replicating over SASL_SSL, and an
ACL created through one broker enforced by the other (ZooKeeper change notifications).

The brokers are child processes configured as the command configures them (CA, certificates,
SCRAM admin, SASL_SSL only, ACLs on). A topic with replication factor 2 takes acks=all writes
from kafka-python authenticated as admin: they are acknowledged only once the follower has
fetched them over SASL_SSL, and both replicas are in the ISR. Then alice, who has no ACL, is
refused; admin grants her READ and DESCRIBE through broker 1, and broker 2 lets her read.
"""

from __future__ import annotations

import gc
import re
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from impl.broker.admin import AdminClient
from impl.broker.config import parse_properties
from impl.cli import main as cli_main
from impl.cli.cmd_cluster import Cluster
from impl.security.authorizer import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from impl.security.config import ClientSecurity, SecurityProtocol, parse_client_properties

pytestmark = [pytest.mark.integration,
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

WAIT_SECONDS = 30.0
RECORDS = 40


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def cluster(zk_chroot: str, tmp_path: Path) -> Iterator[Cluster]:
    running = Cluster(tmp_path, 2, 1, zookeeper=zk_chroot, base_port=None, overrides=[],
                      security="sasl_ssl")
    try:
        running.start()
        yield running
    finally:
        running.stop()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_replication_and_acl_propagation_over_sasl_ssl(cluster: Cluster, zk_chroot: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    assert cluster.admin_properties is not None
    text = cluster.admin_properties.read_text()
    admin_security = parse_client_properties(parse_properties(text))
    match = re.search(r'password="([^"]+)"', text)
    assert match is not None
    ca = str(cluster.data_dir / "tls" / "ca.pem")
    first, second = (f"127.0.0.1:{cluster.ports[b]}" for b in sorted(cluster.ports))

    def both_registered() -> bool:
        with AdminClient(first, security=admin_security) as admin:
            return len(admin.metadata().brokers) == 2

    _wait(both_registered, "both brokers in the metadata")
    with AdminClient(first, security=admin_security) as admin:
        assert admin.create_topics([("replicated", 1, 2)], timeout_ms=30_000) == {
            "replicated": (0, None)}
    common = {"bootstrap_servers": cluster.bootstrap_servers, "security_protocol": "SASL_SSL",
              "sasl_mechanism": "SCRAM-SHA-512", "ssl_cafile": ca}
    producer = KafkaProducer(**common, sasl_plain_username="admin",
                             sasl_plain_password=match.group(1), acks="all")
    offsets = [producer.send("replicated", b"r%d" % i, partition=0).get(timeout=30).offset
               for i in range(RECORDS)]
    producer.close()
    assert offsets == list(range(RECORDS))

    def fully_replicated() -> bool:
        with AdminClient(second, security=admin_security) as admin:
            [partition] = admin.metadata(["replicated"]).topics["replicated"][1]
            return sorted(partition.isr) == [1, 2]

    _wait(fully_replicated, "both replicas in the ISR")

    # alice is created through broker 1 (AlterUserScramCredentials) and logs in on broker 2
    assert cli_main(["users", "--bootstrap-server", first, "--command-config",
                     str(cluster.admin_properties), "--entity-name", "alice", "--alter",
                     "--add-config", "SCRAM-SHA-512=[password=alice-secret]"]) == 0
    alice = ClientSecurity(SecurityProtocol.SASL_SSL, "SCRAM-SHA-512", "alice", "alice-secret",
                           cafile=ca)
    with AdminClient(second, security=alice) as admin:
        assert "replicated" not in admin.metadata().topics
    grant = [AclBinding(ResourcePattern(ResourceType.TOPIC, "replicated", PatternType.LITERAL),
                        AccessControlEntry("User:alice", "*", AclOperation.READ,
                                           AclPermissionType.ALLOW))]
    with AdminClient(first, security=admin_security) as admin:
        assert admin.create_acls(grant) == [(0, None)]

    def visible_on_second() -> bool:
        with AdminClient(second, security=alice) as admin:
            return "replicated" in admin.metadata().topics

    _wait(visible_on_second, "broker 2 to learn alice's ACL")
    consumer = KafkaConsumer(**common, sasl_plain_username="alice",
                             sasl_plain_password="alice-secret", enable_auto_commit=False,
                             consumer_timeout_ms=10_000)
    consumer.assign([TopicPartition("replicated", 0)])
    consumer.seek_to_beginning()
    values = [m.value for _, m in zip(range(RECORDS), consumer, strict=False)]
    consumer.close()
    assert values == [b"r%d" % i for i in range(RECORDS)]
    # A consumer group: refused until alice may READ the group, then it consumes everything.
    from kafka.errors import GroupAuthorizationFailedError

    def group_consume() -> list[bytes]:
        consumer = KafkaConsumer("replicated", **common, sasl_plain_username="alice",
                                 sasl_plain_password="alice-secret", group_id="billing",
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 consumer_timeout_ms=20_000)
        try:
            return [m.value for _, m in zip(range(RECORDS), consumer, strict=False)]
        finally:
            consumer.close()

    with pytest.raises(GroupAuthorizationFailedError):
        group_consume()
    group = [AclBinding(ResourcePattern(ResourceType.GROUP, "billing", PatternType.LITERAL),
                        AccessControlEntry("User:alice", "*", AclOperation.READ,
                                           AclPermissionType.ALLOW))]
    with AdminClient(first, security=admin_security) as admin:
        assert admin.create_acls(group) == [(0, None)]

    def known_everywhere() -> bool:
        for bootstrap in (first, second):
            with AdminClient(bootstrap, security=admin_security) as admin:
                found = admin.describe_acls(AclBindingFilter(ResourceType.GROUP, "billing"))[2]
                if found != group:
                    return False
        return True

    _wait(known_everywhere, "both brokers to learn the group ACL")
    assert group_consume() == [b"r%d" % i for i in range(RECORDS)]
    # Committing in her group still needs READ on the topic (Kafka's OffsetCommit check), and
    # OffsetFetch needs DESCRIBE on it: a topic she may not read is refused, hers is kept.
    from kafka.errors import TopicAuthorizationFailedError
    from kafka.structs import OffsetAndMetadata

    committer = KafkaConsumer(**common, sasl_plain_username="alice",
                              sasl_plain_password="alice-secret", group_id="billing",
                              enable_auto_commit=False)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            committer.commit({TopicPartition("private", 0): OffsetAndMetadata(5, "", -1)})
        committer.commit({TopicPartition("replicated", 0): OffsetAndMetadata(7, "", -1)})
        assert committer.committed(TopicPartition("replicated", 0)) == 7
        with pytest.raises(TopicAuthorizationFailedError):
            committer.committed(TopicPartition("private", 0))
    finally:
        committer.close()
    # kafka-python leaves a TLS socket behind after the group error: finalize it here
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
