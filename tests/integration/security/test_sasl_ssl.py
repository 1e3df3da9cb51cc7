"""A SASL_SSL + mTLS broker with ACLs, driven by real clients (kafka-python, confluent-kafka,
aiokafka, kcat) and the project's admin client and command line."""

from __future__ import annotations

import asyncio
import gc
import json
import shutil
import socket
import ssl
import struct
import subprocess
import time
import warnings
from pathlib import Path

import pytest

from impl.broker.admin import AdminClient, AdminClientError, TopicPartitionReplica
from impl.cli import main as cli_main
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
from impl.security.client import AuthenticationError, open_socket

from .conftest import MTLS_PRINCIPAL, PASSWORDS, SecureBroker

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

RECORDS = 50
TOPIC_AUTHORIZATION_FAILED = 29


def allow(principal: str, topic: str, *operations: AclOperation,
          resource_type: ResourceType = ResourceType.TOPIC) -> list[AclBinding]:
    return [AclBinding(ResourcePattern(resource_type, topic, PatternType.LITERAL),
                       AccessControlEntry(principal, "*", operation, AclPermissionType.ALLOW))
            for operation in operations]


def grant(secure: SecureBroker, bindings: list[AclBinding]) -> None:
    with AdminClient(secure.sasl_bootstrap, security=secure.client("admin")) as admin:
        assert admin.create_acls(bindings) == [(0, None)] * len(bindings)


def topic(secure: SecureBroker, name: str) -> None:
    assert secure.running.become_leader(name)[0].error_code == 0


def test_admin_acls_roundtrip_and_refusals(secure_broker: SecureBroker) -> None:
    secure = secure_broker
    bindings = allow("User:alice", "orders", AclOperation.READ, AclOperation.WRITE)
    grant(secure, bindings)
    with AdminClient(secure.sasl_bootstrap, security=secure.client("admin")) as admin:
        code, _, found = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, "orders",
                                                              PatternType.MATCH))
        assert code == 0
        assert sorted(found) == sorted(bindings)
    # alice may not administer ACLs: ALTER on the cluster is denied.
    with AdminClient(secure.sasl_bootstrap, security=secure.client("alice")) as admin:
        assert admin.create_acls(bindings[:1])[0][0] == 31
        assert admin.describe_acls(AclBindingFilter())[0] == 31


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", "secret")])
def test_bad_credentials_are_refused_and_the_connection_closed(
        secure_broker: SecureBroker, user: str, password: str) -> None:
    with pytest.raises(AuthenticationError, match="Authentication failed"):
        open_socket("127.0.0.1", secure_broker.sasl_port,
                    secure_broker.client(user, password), 10.0)
    with pytest.raises(AdminClientError, match="Authentication failed"):
        AdminClient(secure_broker.sasl_bootstrap,
                    security=secure_broker.client(user, password)).metadata()


def test_plaintext_client_on_a_tls_port_is_closed(secure_broker: SecureBroker) -> None:
    # An ApiVersions request in clear text: the TLS handshake fails and the broker closes.
    request = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
    with socket.create_connection(("127.0.0.1", secure_broker.sasl_port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        received = b""
        try:
            while chunk := sock.recv(4096):
                received += chunk
        except ConnectionResetError:
            pass
    # Whatever came back is a TLS alert, never a Kafka response to the request.
    assert not received or received[0] == 0x15


def test_nothing_but_sasl_before_authentication(secure_broker: SecureBroker) -> None:
    context = ssl.create_default_context(cafile=str(secure_broker.ca))
    with socket.create_connection(("127.0.0.1", secure_broker.sasl_port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        # A Metadata v1 request (all topics) before authenticating: closed without an answer.
        request = struct.pack(">hhih", 3, 1, 7, 4) + b"test" + struct.pack(">i", -1)
        sock.sendall(struct.pack(">i", len(request)) + request)
        assert sock.recv(4096) == b""


def test_alice_reads_but_may_not_write(secure_broker: SecureBroker) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import TopicAuthorizationFailedError

    secure = secure_broker
    topic(secure, "reports")
    grant(secure, allow("User:admin", "reports", AclOperation.WRITE))
    grant(secure, allow("User:alice", "reports", AclOperation.READ))
    common = {"bootstrap_servers": secure.sasl_bootstrap, "security_protocol": "SASL_SSL",
              "sasl_mechanism": "SCRAM-SHA-512", "ssl_cafile": str(secure.ca)}
    producer = KafkaProducer(**common, sasl_plain_username="admin",
                             sasl_plain_password=PASSWORDS["admin"], acks="all")
    for index in range(RECORDS):
        producer.send("reports", value=b"r%d" % index, partition=0)
    producer.flush(timeout=30)
    producer.close()
    consumer = KafkaConsumer(**common, sasl_plain_username="alice",
                             sasl_plain_password=PASSWORDS["alice"], enable_auto_commit=False,
                             consumer_timeout_ms=10_000)
    consumer.assign([TopicPartition("reports", 0)])
    consumer.seek_to_beginning()
    values = [message.value for _, message in zip(range(RECORDS), consumer, strict=False)]
    consumer.close()
    assert values == [b"r%d" % index for index in range(RECORDS)]
    denied = KafkaProducer(**common, sasl_plain_username="alice",
                           sasl_plain_password=PASSWORDS["alice"], acks="all", retries=0,
                           enable_idempotence=False, max_block_ms=10_000)
    future = denied.send("reports", value=b"nope", partition=0)
    with pytest.raises(TopicAuthorizationFailedError):
        future.get(timeout=30)
    denied.close()


def test_metadata_hides_topics_not_described(secure_broker: SecureBroker) -> None:
    secure = secure_broker
    topic(secure, "visible")
    topic(secure, "hidden")
    grant(secure, allow("User:alice", "visible", AclOperation.DESCRIBE))
    with AdminClient(secure.sasl_bootstrap, security=secure.client("alice")) as admin:
        assert set(admin.metadata().topics) == {"visible"}
    with AdminClient(secure.sasl_bootstrap, security=secure.client("admin")) as admin:
        assert {"visible", "hidden"} <= set(admin.metadata().topics)


def test_confluent_kafka_sasl_ssl_scram(secure_broker: SecureBroker) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    secure = secure_broker
    topic(secure, "ck")
    grant(secure, allow("User:bob", "ck", AclOperation.READ, AclOperation.WRITE))
    grant(secure, allow("User:bob", "kafka-cluster", AclOperation.IDEMPOTENT_WRITE,
                        resource_type=ResourceType.CLUSTER))
    grant(secure, allow("User:bob", "unused", AclOperation.READ,
                        resource_type=ResourceType.GROUP))
    common = {"bootstrap.servers": secure.sasl_bootstrap, "security.protocol": "SASL_SSL",
              "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob",
              "sasl.password": PASSWORDS["bob"], "ssl.ca.location": str(secure.ca)}
    errors: list[str] = []
    producer = Producer({**common, "acks": "all", "enable.idempotence": True})
    for index in range(RECORDS):
        producer.produce("ck", value=b"c%d" % index, partition=0,
                         on_delivery=lambda error, _: errors.append(str(error)) if error else None)
    assert producer.flush(30) == 0
    assert errors == []
    consumer = Consumer({**common, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition("ck", 0, 0)])
    received: list[bytes] = []
    for _ in range(200):
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            received.append(message.value() or b"")
        if len(received) == RECORDS:
            break
    consumer.close()
    assert received == [b"c%d" % index for index in range(RECORDS)]


def test_aiokafka_sasl_ssl_scram(secure_broker: SecureBroker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.helpers import create_ssl_context

    secure = secure_broker
    topic(secure, "ak")
    grant(secure, allow("User:alice", "ak", AclOperation.READ, AclOperation.WRITE))

    async def run() -> list[bytes]:
        common = {"bootstrap_servers": secure.sasl_bootstrap, "security_protocol": "SASL_SSL",
                  "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice",
                  "sasl_plain_password": PASSWORDS["alice"],
                  "ssl_context": create_ssl_context(cafile=str(secure.ca))}
        producer = AIOKafkaProducer(**common, acks="all")
        await producer.start()
        try:
            for index in range(RECORDS):
                await producer.send_and_wait("ak", b"a%d" % index, partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**common, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition("ak", 0)])
            await consumer.seek_to_beginning(TopicPartition("ak", 0))
            values: list[bytes] = []
            while len(values) < RECORDS:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                values.extend(m.value for ms in batch.values() for m in ms if m.value)
            return values
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [b"a%d" % index for index in range(RECORDS)]


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kcat_sasl_ssl(secure_broker: SecureBroker, mechanism: str) -> None:
    secure = secure_broker
    topic(secure, "kc")
    grant(secure, allow("User:alice", "kc", AclOperation.READ, AclOperation.WRITE))
    options = ["-b", secure.sasl_bootstrap, "-X", "security.protocol=SASL_SSL",
               "-X", f"sasl.mechanisms={mechanism}", "-X", "sasl.username=alice",
               "-X", f"sasl.password={PASSWORDS['alice']}", "-X", f"ssl.ca.location={secure.ca}"]
    lines = "".join(f"k{index}\n" for index in range(RECORDS))
    subprocess.run(["kcat", *options, "-P", "-t", "kc", "-p", "0"], input=lines.encode(),
                   check=True, timeout=60)
    result = subprocess.run(["kcat", *options, "-C", "-t", "kc", "-p", "0", "-o", "beginning",
                             "-c", str(RECORDS), "-e"], capture_output=True, check=True,
                            timeout=60)
    assert result.stdout.decode().split() == [f"k{index}" for index in range(RECORDS)]


def test_mtls_principal_from_the_certificate(secure_broker: SecureBroker) -> None:
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, TopicPartition

    secure = secure_broker
    topic(secure, "tls")
    grant(secure, allow(MTLS_PRINCIPAL, "tls", AclOperation.READ, AclOperation.WRITE))
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": secure.mtls_bootstrap, "security.protocol": "SSL",
                         "ssl.ca.location": str(secure.ca),
                         "ssl.certificate.location": str(secure.client_cert),
                         "ssl.key.location": str(secure.client_key), "acks": "all",
                         "enable.idempotence": False})
    for index in range(RECORDS):
        producer.produce("tls", value=b"t%d" % index, partition=0,
                         on_delivery=lambda error, _: errors.append(str(error)) if error else None)
    assert producer.flush(30) == 0
    assert errors == []
    consumer = KafkaConsumer(bootstrap_servers=secure.mtls_bootstrap, security_protocol="SSL",
                             ssl_cafile=str(secure.ca), ssl_certfile=str(secure.client_cert),
                             ssl_keyfile=str(secure.client_key), enable_auto_commit=False,
                             consumer_timeout_ms=10_000)
    consumer.assign([TopicPartition("tls", 0)])
    consumer.seek_to_beginning()
    values = [message.value for _, message in zip(range(RECORDS), consumer, strict=False)]
    consumer.close()
    assert values == [b"t%d" % index for index in range(RECORDS)]


def test_acls_command_line(secure_broker: SecureBroker, tmp_path: Path,
                           capsys: pytest.CaptureFixture[str]) -> None:
    secure = secure_broker
    admin = ["--bootstrap-server", secure.sasl_bootstrap,
             "--command-config", str(secure.command_config(tmp_path, "admin"))]
    assert cli_main(["acls", *admin, "--add", "--allow-principal", "User:alice",
                     "--consumer", "--topic", "pay-", "--group", "billing",
                     "--resource-pattern-type", "prefixed"]) == 0
    assert cli_main(["acls", *admin, "--list", "--topic", "pay-eu",
                     "--resource-pattern-type", "match"]) == 0
    listed = capsys.readouterr().out
    assert "name=pay-, patternType=PREFIXED" in listed
    assert "principal=User:alice, host=*, operation=READ, permissionType=ALLOW" in listed
    assert cli_main(["acls", *admin, "--remove", "--topic", "pay-",
                     "--resource-pattern-type", "prefixed"]) == 0
    assert "Removed 2 ACL binding(s)." in capsys.readouterr().out
    alice = ["--bootstrap-server", secure.sasl_bootstrap,
             "--command-config", str(secure.command_config(tmp_path, "alice"))]
    assert cli_main(["acls", *alice, "--list"]) == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in capsys.readouterr().err


def test_admin_commands_with_command_config(secure_controller_broker: SecureBroker,
                                            tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """topics, configs, groups and log-dirs take --command-config as kafka-topics.sh and its
    siblings do: the super user administers the SASL_SSL listener, a user without ACLs sees
    nothing, and no settings is one line."""
    secure = secure_controller_broker
    admin = ["--bootstrap-server", secure.sasl_bootstrap,
             "--command-config", str(secure.command_config(tmp_path, "admin"))]
    assert cli_main(["topics", "create", *admin, "--topic", "cc", "--partitions", "2",
                     "--config", "retention.ms=60000"]) == 0
    assert cli_main(["topics", "alter", *admin, "--topic", "cc", "--partitions", "3"]) == 0
    capsys.readouterr()
    assert cli_main(["topics", "describe", *admin, "--topic", "cc"]) == 0
    described = capsys.readouterr().out
    assert "PartitionCount: 3" in described
    assert "Configs: retention.ms=60000" in described
    assert cli_main(["configs", *admin, "--describe", "--entity-type", "topics",
                     "--entity-name", "cc"]) == 0
    assert "retention.ms=60000" in capsys.readouterr().out
    assert cli_main(["groups", "list", *admin]) == 0
    assert capsys.readouterr().out.startswith("GROUP")
    assert cli_main(["log-dirs", "describe", *admin, "--topics", "cc"]) == 0
    (broker,) = json.loads(capsys.readouterr().out)["brokers"]
    hosted = {(p["topic"], p["partition"]) for d in broker["log_dirs"] for p in d["partitions"]}
    assert hosted == {("cc", 0), ("cc", 1), ("cc", 2)}
    alice = ["--bootstrap-server", secure.sasl_bootstrap,
             "--command-config", str(secure.command_config(tmp_path, "alice"))]
    assert cli_main(["topics", "list", *alice]) == 0
    assert "cc" not in capsys.readouterr().out.split()
    assert cli_main(["topics", "alter", *alice, "--topic", "cc", "--partitions", "4"]) == 1
    assert "TOPIC_AUTHORIZATION_FAILED" in capsys.readouterr().err
    # DESCRIBE without DESCRIBE_CONFIGS: the partitions are shown, the configs are the refusal
    assert cli_main(["acls", *admin, "--add", "--allow-principal", "User:alice",
                     "--operation", "Describe", "--topic", "cc"]) == 0
    capsys.readouterr()
    assert cli_main(["topics", "describe", *alice, "--topic", "cc"]) == 0
    described = capsys.readouterr().out
    assert "PartitionCount: 3\tReplicationFactor: 1\tConfigs: (TOPIC_AUTHORIZATION_FAILED)\n" in (
        described), described
    assert cli_main(["topics", "list", "--bootstrap-server", secure.sasl_bootstrap,
                     "--timeout", "5"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("logproof: error: "), err


def test_reassign_and_placement_with_command_config(secure_controller_broker: SecureBroker,
                                                    tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """reassign (generate, execute, verify) and placement take --command-config too: a log-dir
    move of a SASL_SSL cluster is proposed by its placer, started and seen complete."""
    secure = secure_controller_broker
    admin = ["--bootstrap-server", secure.sasl_bootstrap,
             "--command-config", str(secure.command_config(tmp_path, "admin"))]
    assert cli_main(["topics", "create", *admin, "--topic", "rc", "--partitions", "1"]) == 0
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "rc"}]}))
    capsys.readouterr()
    assert cli_main(["reassign", "--generate", *admin, "--topics-to-move-json-file",
                     str(topics), "--broker-list", "1"]) == 0
    assert "Proposed partition reassignment configuration" in capsys.readouterr().out
    assert cli_main(["placement", *admin, "--partitions", "2",
                     "--replication-factor", "1"]) == 0
    assert capsys.readouterr().out.endswith("PARTITION  LEADER  REPLICAS\n0          1       1\n"
                                            "1          1       1\n")
    assert cli_main(["log-dirs", "describe", *admin, "--topics", "rc"]) == 0
    (broker,) = json.loads(capsys.readouterr().out)["brokers"]
    (current,) = [d["path"] for d in broker["log_dirs"] for p in broker_partitions(d)]
    target = next(path for path in secure.running.log_dirs if path != current)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "rc", "partition": 0, "replicas": [1], "log_dirs": [target]}]}))
    common = [*admin, "--reassignment-json-file", str(plan)]
    assert cli_main(["reassign", "--execute", *common]) == 0
    deadline = time.monotonic() + 30
    while True:
        capsys.readouterr()
        if cli_main(["reassign", "--verify", *common]) == 0 and (
                "completed successfully" in capsys.readouterr().out):
            break
        assert time.monotonic() < deadline, "the move did not complete in 30 s"
        time.sleep(0.1)
    # without the settings, against the SASL_SSL listener: one line, exit 1
    assert cli_main(["reassign", "--verify", "--bootstrap-server", secure.sasl_bootstrap,
                     "--reassignment-json-file", str(plan)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err


def broker_partitions(log_dir: dict[str, object]) -> list[object]:
    """The partitions of one dir of ``log-dirs describe``'s JSON (the temporary ones left out)."""
    partitions = log_dir["partitions"]
    assert isinstance(partitions, list)
    return [p for p in partitions if not p["is_temporary"]]


def _controller_requests(secure: SecureBroker) -> list[tuple[int, int, object]]:
    from impl.broker import controller_wire
    from impl.controller.requests import (
        BrokerEndpoint,
        LeaderAndIsrPartitionState,
        LeaderAndIsrRequest,
        StopReplicaPartition,
        StopReplicaRequest,
        UpdateMetadataRequest,
    )

    broker = secure.running.broker
    requests: list[LeaderAndIsrRequest | StopReplicaRequest | UpdateMetadataRequest] = [
        LeaderAndIsrRequest(1, 99, broker.broker_epoch, (LeaderAndIsrPartitionState(
            "stolen", 0, 99, 1, 5, (1,), 0, (1,), is_new=True),),
            (BrokerEndpoint(1, "127.0.0.1", secure.sasl_port),)),
        StopReplicaRequest(1, 99, broker.broker_epoch, (StopReplicaPartition("stolen", 0, -2,
                                                                             True),)),
        UpdateMetadataRequest(1, 99, broker.broker_epoch, (), ()),
    ]
    result = []
    for request in requests:
        api_key, version = controller_wire.api_of(request)
        result.append((api_key, version, controller_wire.request_to_wire(request)))
    return result


def _roundtrip(sock: socket.socket, api_key: int, version: int, body: object) -> object:
    from impl.broker._codec import decode_response, encode_request

    def receive(count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = sock.recv(count - len(data))
            if not chunk:
                break
            data += chunk
        return data

    sock.sendall(encode_request(api_key, version, 9, "test", body))
    header = receive(4)
    if not header:
        return None
    (size,) = struct.unpack(">i", header)
    return decode_response(api_key, version, receive(size))[1]


def test_cluster_apis_refused_to_ordinary_and_unauthenticated_clients(
        secure_broker: SecureBroker) -> None:
    secure = secure_broker
    for api_key, version, body in _controller_requests(secure):
        # An authenticated principal without CLUSTER_ACTION: CLUSTER_AUTHORIZATION_FAILED.
        with open_socket("127.0.0.1", secure.sasl_port, secure.client("alice"), 10.0) as sock:
            response = _roundtrip(sock, api_key, version, body)
            assert int(response.error_code) == 31, api_key  # type: ignore[attr-defined]
        # Not authenticated at all: the connection is closed without an answer.
        context = ssl.create_default_context(cafile=str(secure.ca))
        with socket.create_connection(("127.0.0.1", secure.sasl_port), timeout=10) as raw, \
                context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
            assert _roundtrip(sock, api_key, version, body) is None
    assert "stolen" not in secure.running.broker.metadata.topics
    assert "stolen" not in {tp.topic for tp in secure.running.broker.replicas.states}  # type: ignore[union-attr]
    topic(secure, "moved")
    replica = TopicPartitionReplica("moved", 0, 1)
    with AdminClient(secure.sasl_bootstrap, security=secure.client("alice")) as admin:
        results = admin.alter_replica_log_dirs({replica: secure.running.log_dirs[1]})
        assert results == {replica: 31}


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_consumer_group_needs_read_on_the_group(secure_broker: SecureBroker) -> None:
    """FindCoordinator for a group alice may not DESCRIBE is refused at dispatch (the success
    case, which needs a controller for the offsets topic, is in test_secure_cluster)."""
    from kafka import KafkaConsumer
    from kafka.errors import GroupAuthorizationFailedError

    secure = secure_broker
    topic(secure, "grouped")
    grant(secure, allow("User:alice", "grouped", AclOperation.READ))
    consumer = KafkaConsumer("grouped", bootstrap_servers=secure.sasl_bootstrap,
                             security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                             ssl_cafile=str(secure.ca), sasl_plain_username="alice",
                             sasl_plain_password=PASSWORDS["alice"], group_id="billing",
                             enable_auto_commit=False, consumer_timeout_ms=15_000)
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            list(consumer)
    finally:
        consumer.close()
        # kafka-python leaves a TLS socket behind after the group error: finalize it here, not
        # in whichever later test the garbage collector happens to run in
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()
