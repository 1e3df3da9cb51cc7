"""Requests naming several resources are authorized one resource at a time, as Kafka does: a
principal allowed on some of them is served for those, and each denied one gets its
``*_AUTHORIZATION_FAILED`` code (DescribeConfigs, IncrementalAlterConfigs, AlterConfigs,
CreatePartitions, DeleteRecords, DescribeGroups, DeleteGroups, ListGroups, FindCoordinator v4),
driven by confluent-kafka's AdminClient as the principal ``alice``.
"""

from __future__ import annotations

import struct
from concurrent.futures import Future
from typing import Any

import pytest

from impl.broker.admin import AdminClient
from impl.security.authorizer import AclOperation, ResourceType
from impl.security.client import open_socket

from .conftest import PASSWORDS, SecureBroker
from .test_sasl_ssl import allow, grant

pytestmark = [pytest.mark.integration,
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

TIMEOUT_SECONDS = 30.0
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31


def _confluent(secure: SecureBroker, user: str) -> dict[str, Any]:
    return {"bootstrap.servers": secure.sasl_bootstrap, "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": user,
            "sasl.password": PASSWORDS[user], "ssl.ca.location": str(secure.ca)}


def _code(future: Future[Any]) -> int:
    """The Kafka error code a confluent-kafka future ended with (0: success)."""
    from confluent_kafka import KafkaException

    try:
        future.result(timeout=TIMEOUT_SECONDS)
    except KafkaException as error:
        return int(error.args[0].code())
    return 0


def test_each_named_resource_is_authorized_alone(
        secure_controller_broker: SecureBroker) -> None:
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient as ConfluentAdmin
    from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource
    from confluent_kafka.cimpl import NewPartitions

    secure = secure_controller_broker
    with AdminClient(secure.sasl_bootstrap, security=secure.client("admin")) as admin:
        assert admin.create_topics([("open", 1, 1), ("closed", 1, 1)], timeout_ms=30_000) == {
            "open": (0, None), "closed": (0, None)}
        for group in ("mine", "theirs"):
            assert admin.commit_offsets(group, {("open", 0): 0}) == {("open", 0): 0}
    producer = Producer({**_confluent(secure, "admin"), "acks": "all"})
    for name in ("open", "closed"):
        for index in range(5):
            producer.produce(name, b"r%d" % index)
    assert producer.flush(TIMEOUT_SECONDS) == 0
    grant(secure, allow("User:alice", "open", AclOperation.DESCRIBE_CONFIGS,
                        AclOperation.ALTER_CONFIGS, AclOperation.ALTER, AclOperation.DELETE,
                        AclOperation.DESCRIBE))
    grant(secure, allow("User:alice", "kafka-cluster", AclOperation.DESCRIBE_CONFIGS,
                        resource_type=ResourceType.CLUSTER))
    grant(secure, allow("User:alice", "mine", AclOperation.DESCRIBE, AclOperation.DELETE,
                        resource_type=ResourceType.GROUP))
    alice = ConfluentAdmin(_confluent(secure, "alice"))

    # DescribeConfigs: the allowed topic and the broker are described, the other topic refused
    described = alice.describe_configs([ConfigResource("topic", "open"),
                                        ConfigResource("topic", "closed"),
                                        ConfigResource("broker", "1")])
    codes = {resource.name: _code(future) for resource, future in described.items()}
    assert codes == {"open": 0, "closed": TOPIC_AUTHORIZATION_FAILED, "1": 0}
    assert "retention.ms" in next(future.result() for resource, future in described.items()
                                  if resource.name == "open")

    # IncrementalAlterConfigs: the allowed topic is changed, the rest refused with its code
    def retention(kind: str, name: str, value: str) -> ConfigResource:
        return ConfigResource(kind, name, incremental_configs=[ConfigEntry(
            "retention.ms" if kind == "topic" else "log.retention.ms", value,
            incremental_operation=AlterConfigOpType.SET)])

    altered = alice.incremental_alter_configs([retention("topic", "open", "123456"),
                                               retention("topic", "closed", "123456"),
                                               retention("broker", "1", "123456")])
    codes = {resource.name: _code(future) for resource, future in altered.items()}
    assert codes == {"open": 0, "closed": TOPIC_AUTHORIZATION_FAILED,
                     "1": CLUSTER_AUTHORIZATION_FAILED}
    # AlterConfigs (the legacy whole-config API) too
    legacy = alice.alter_configs([ConfigResource("topic", "open", {"retention.ms": "654321"}),
                                  ConfigResource("topic", "closed", {"retention.ms": "1"})])
    codes = {resource.name: _code(future) for resource, future in legacy.items()}
    assert codes == {"open": 0, "closed": TOPIC_AUTHORIZATION_FAILED}
    with AdminClient(secure.sasl_bootstrap, security=secure.client("admin")) as admin:
        assert admin.describe_configs(2, "open", keys=["retention.ms"])[2][0].value == "654321"
        assert admin.describe_configs(2, "closed", keys=["retention.ms"])[2][0].value == (
            "604800000")

    # CreatePartitions: the allowed topic grows, the other does not
    grown = alice.create_partitions([NewPartitions("open", 2), NewPartitions("closed", 2)],
                                    operation_timeout=TIMEOUT_SECONDS)
    assert {name: _code(future) for name, future in grown.items()} == {
        "open": 0, "closed": TOPIC_AUTHORIZATION_FAILED}
    with AdminClient(secure.sasl_bootstrap, security=secure.client("admin")) as admin:
        topics = admin.metadata(["open", "closed"]).topics
        assert (len(topics["open"][1]), len(topics["closed"][1])) == (2, 1)

    # DeleteRecords: DELETE on each topic
    deleted = alice.delete_records([TopicPartition("open", 0, 2), TopicPartition("closed", 0, 2)])
    codes = {tp.topic: _code(future) for tp, future in deleted.items()}
    assert codes == {"open": 0, "closed": TOPIC_AUTHORIZATION_FAILED}
    with AdminClient(secure.sasl_bootstrap, security=secure.client("admin")) as admin:
        assert admin.list_offsets([("open", 0), ("closed", 0)], latest=False) == {
            ("open", 0): 2, ("closed", 0): 0}

    # ListGroups lists the groups alice may describe; DescribeGroups and DeleteGroups serve
    # them and refuse the others
    listed = alice.list_consumer_groups(request_timeout=TIMEOUT_SECONDS).result(
        timeout=TIMEOUT_SECONDS)
    assert sorted(group.group_id for group in listed.valid) == ["mine"]
    groups = alice.describe_consumer_groups(["mine", "theirs"],
                                            request_timeout=TIMEOUT_SECONDS)
    assert {name: _code(future) for name, future in groups.items()} == {
        "mine": 0, "theirs": GROUP_AUTHORIZATION_FAILED}
    removed = alice.delete_consumer_groups(["mine", "theirs"], request_timeout=TIMEOUT_SECONDS)
    assert {name: _code(future) for name, future in removed.items()} == {
        "mine": 0, "theirs": GROUP_AUTHORIZATION_FAILED}
    with AdminClient(secure.sasl_bootstrap, security=secure.client("admin")) as admin:
        assert [group.group_id for group in admin.list_groups()] == ["theirs"]

    # FindCoordinator v4: one answer per key
    from impl.broker._codec import decode_response, encode_request
    from impl.broker._kio_build import build

    with open_socket("127.0.0.1", secure.sasl_port, secure.client("alice"), 10.0) as sock:
        from kio.index import load_request_schema

        body = build(load_request_schema(10, 4),
                     {"key_type": 0, "coordinator_keys": ["mine", "theirs"]})
        sock.sendall(encode_request(10, 4, 7, "test", body))

        def receive(count: int) -> bytes:
            data = b""
            while len(data) < count:
                chunk = sock.recv(count - len(data))
                assert chunk, "the broker closed the connection"
                data += chunk
            return data

        (size,) = struct.unpack(">i", receive(4))
        _, answer = decode_response(10, 4, receive(size))
    codes = {str(item.key): int(item.error_code) for item in answer.coordinators}
    assert codes == {"mine": 0, "theirs": GROUP_AUTHORIZATION_FAILED}
