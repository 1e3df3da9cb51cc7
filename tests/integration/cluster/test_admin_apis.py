"""Topic and broker configs through real admin clients against a 3-broker cluster.

One cluster (three brokers, two log dirs each, real ZooKeeper) serves every test of the module:
kafka-python, confluent-kafka and aiokafka create topics with configs, describe them (sources,
synonyms, read-only flags), alter them (AlterConfigs and IncrementalAlterConfigs), and are
refused with INVALID_CONFIG naming the key. The stored znodes are Kafka's, and a change takes
effect without a restart: ``retention.ms`` trims a live log, ``min.insync.replicas`` refuses
an ``acks=all`` produce, the KIP-113 throttle reaches every broker's movers.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from impl.broker.admin import AdminClient, TopicPartitionReplica
from impl.cli import main as cli_main
from impl.cli.cmd_cluster import Cluster
from impl.controller import EmbeddedZooKeeper

from ._load import every_broker_sees_all, pause, stopped, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

BROKERS = 3


@pytest.fixture(scope="module")
def cluster(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Cluster]:
    chroot = f"/admin_configs_{time.monotonic_ns()}"
    client = KazooClient(hosts=zookeeper.connect_string, timeout=10.0)
    client.start(timeout=10.0)
    client.ensure_path(chroot)
    client.stop()
    client.close()
    running = Cluster(Path(tmp_path_factory.mktemp("admin-configs")), BROKERS, 2,
                      zookeeper=zookeeper.connect_string + chroot, base_port=None,
                      overrides=["log.retention.check.interval.ms=1000"])
    try:
        running.start()
        wait_until(lambda: every_broker_sees_all(running.ports.values(), BROKERS),
                   "every broker to see the cluster", pause)
        yield running
    finally:
        running.stop()


@pytest.fixture
def zk(cluster: Cluster) -> Iterator[KazooClient]:
    assert cluster.zookeeper_connect is not None
    client = KazooClient(hosts=cluster.zookeeper_connect, timeout=10.0)
    client.start(timeout=10.0)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def _znode(zk: KazooClient, path: str) -> dict[str, object]:
    data, _ = zk.get(path)
    value = json.loads(data)
    assert isinstance(value, dict)
    return value


def _config_of(zk: KazooClient, path: str) -> dict[str, str]:
    config = _znode(zk, path)["config"]
    assert isinstance(config, dict)
    return {str(key): str(value) for key, value in config.items()}


def test_confluent_create_describe_alter(cluster: Cluster, zk: KazooClient) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient as ConfluentAdmin,
    )
    from confluent_kafka.admin._config import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
    )
    from confluent_kafka.admin._resource import ResourceType
    from confluent_kafka.cimpl import NewTopic

    admin = ConfluentAdmin({"bootstrap.servers": cluster.bootstrap_servers})
    # validate_only creates nothing; a bad value is refused naming the key
    admin.create_topics([NewTopic("ck", 2, 2, config={"cleanup.policy": "compact"})],
                        validate_only=True)["ck"].result(30)
    assert not zk.exists("/brokers/topics/ck")
    with pytest.raises(KafkaException, match=r"retention\.ms") as refused:
        admin.create_topics([NewTopic("ck", 2, 2, config={"retention.ms": "soon"})]
                            )["ck"].result(30)
    assert refused.value.args[0].code() == 40  # INVALID_CONFIG
    admin.create_topics([NewTopic("ck", 2, 2, config={
        "cleanup.policy": "compact", "min.insync.replicas": "2", "retention.ms": "3600000"})]
    )["ck"].result(30)
    assert _znode(zk, "/config/topics/ck") == {"version": 1, "config": {
        "cleanup.policy": "compact", "min.insync.replicas": "2", "retention.ms": "3600000"}}

    resource = ConfigResource(ResourceType.TOPIC, "ck")
    described = admin.describe_configs([resource], request_timeout=30)[resource].result(30)
    assert described["cleanup.policy"].value == "compact"
    assert described["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert described["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert described["segment.bytes"].value == "1073741824"
    assert not described["segment.bytes"].is_read_only

    # incremental: APPEND to a list, DELETE a key; the change notice is Kafka's v2
    alter = ConfigResource(ResourceType.TOPIC, "ck", incremental_configs=[
        ConfigEntry("cleanup.policy", "delete",
                    incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ])
    admin.incremental_alter_configs([alter])[alter].result(30)
    assert _znode(zk, "/config/topics/ck")["config"] == {
        "cleanup.policy": "compact,delete", "min.insync.replicas": "2"}
    changes = sorted(zk.get_children("/config/changes"))
    assert changes
    assert changes[-1].startswith("config_change_")
    assert _znode(zk, f"/config/changes/{changes[-1]}") == {
        "version": 2, "entity_path": "topics/ck"}

    bad = ConfigResource(ResourceType.TOPIC, "ck", incremental_configs=[
        ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND)])
    with pytest.raises(KafkaException, match=r"retention\.ms"):
        admin.incremental_alter_configs([bad])[bad].result(30)
    unknown = ConfigResource(ResourceType.TOPIC, "ck", incremental_configs=[
        ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException, match=r"no\.such\.config"):
        admin.incremental_alter_configs([unknown])[unknown].result(30)

    # broker configs: a dynamic key per broker, read-only static keys, synonyms
    broker = ConfigResource(ResourceType.BROKER, "2", incremental_configs=[
        ConfigEntry("follower.replication.throttled.rate", "1000000",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([broker])[broker].result(30)
    assert _znode(zk, "/config/brokers/2")["config"] == {
        "follower.replication.throttled.rate": "1000000"}
    describe = ConfigResource(ResourceType.BROKER, "2")
    entries = admin.describe_configs([describe], request_timeout=30)[describe].result(30)
    assert entries["follower.replication.throttled.rate"].value == "1000000"
    assert entries["follower.replication.throttled.rate"].source == (
        ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert entries["broker.id"].is_read_only
    assert entries["broker.id"].value == "2"
    static = ConfigResource(ResourceType.BROKER, "2", incremental_configs=[
        ConfigEntry("broker.id", "7", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException, match=r"broker\.id"):
        admin.incremental_alter_configs([static])[static].result(30)


def test_kafka_python_create_describe_alter(cluster: Cluster, zk: KazooClient) -> None:
    from kafka.admin import (
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
        NewTopic,
    )

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers,
                             request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic("kp", 1, 3, topic_configs={"segment.ms": "600000"})])
        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "kp")], include_synonyms=True,
            config_filter="all")
        entries = described["topic"]["kp"]
        assert entries["segment.ms"]["value"] == "600000"
        assert entries["segment.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert entries["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
        assert [s["name"] for s in entries["segment.ms"]["synonyms"]] == [
            "segment.ms", "log.roll.ms"]
        # AlterConfigs replaces the whole set; kafka-python resends the keys already set
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp",
                                            configs={"retention.bytes": "1048576"})],
                            incremental=False)
        assert _znode(zk, "/config/topics/kp")["config"] == {
            "retention.bytes": "1048576", "segment.ms": "600000"}
        # a per-broker dynamic config (kafka-python cannot name the <default> entity)
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1",
                                            configs={"leader.replication.throttled.rate":
                                                     ("SET", "2000000")})])
        assert _znode(zk, "/config/brokers/1")["config"] == {
            "leader.replication.throttled.rate": "2000000"}
        entries = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")],
                                         config_filter="all")["broker"]["1"]
        assert entries["leader.replication.throttled.rate"]["value"] == "2000000"
        assert entries["leader.replication.throttled.rate"]["config_source"] == (
            "DYNAMIC_BROKER_CONFIG")
        assert entries["log.dirs"]["read_only"]
    finally:
        admin.close()


def test_aiokafka_create_describe_alter(cluster: Cluster, zk: KazooClient) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.config_resource import (
        ConfigResource,
        ConfigResourceType,
    )

    async def main() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers,
                                    request_timeout_ms=30_000)
        await admin.start()
        try:
            await admin.create_topics([NewTopic("ak", 1, 2, topic_configs={
                "message.timestamp.type": "LogAppendTime"})])
            responses = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, "ak")])
            entries = {item[0]: item for result in responses for resource in result.resources
                       for item in resource[4]}
            assert entries["message.timestamp.type"][1] == "LogAppendTime"
            # AlterConfigs replaces the whole set: message.timestamp.type reverts
            await admin.alter_configs([ConfigResource(
                ConfigResourceType.TOPIC, "ak", {"unclean.leader.election.enable": "true"})])
            assert _znode(zk, "/config/topics/ak")["config"] == {
                "unclean.leader.election.enable": "true"}
        finally:
            await admin.close()

    asyncio.run(main())


def test_config_changes_take_effect_live(cluster: Cluster, zk: KazooClient) -> None:
    """retention.ms trims a live log, min.insync.replicas refuses acks=all, the KIP-113 throttle
    reaches the movers: all without a restart."""
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import (
        AdminClient as ConfluentAdmin,
    )
    from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource
    from confluent_kafka.admin._resource import ResourceType
    from confluent_kafka.cimpl import NewTopic

    admin = ConfluentAdmin({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("live", 1, 1, config={"segment.bytes": "1024"})]
                        )["live"].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "linger.ms": 0, "message.timeout.ms": 20_000})
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: object) -> None:
        if error is not None:
            errors.append(error)

    for index in range(30):  # one batch each, so segment.bytes=1024 rolls every few
        producer.produce("live", value=b"x" * 100 + str(index).encode(), on_delivery=delivered)
        assert producer.flush(30) == 0
    assert not errors

    with AdminClient(cluster.bootstrap_servers) as ours:
        def log_start() -> int:
            from confluent_kafka import TopicPartition
            from confluent_kafka.admin._listoffsets import OffsetSpec

            earliest = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
            result = admin.list_offsets({TopicPartition("live", 0): earliest})
            return int(next(iter(result.values())).result(30).offset)

        assert log_start() == 0
        assert ours.metadata(["live"]).topics["live"][0] == 0
        resource = ConfigResource(ResourceType.TOPIC, "live", incremental_configs=[
            ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(30)
        wait_until(lambda: log_start() > 0, "retention.ms=1 to delete old segments", pause)

    # min.insync.replicas above the replication factor refuses acks=all at once
    resource = ConfigResource(ResourceType.TOPIC, "live", incremental_configs=[
        ConfigEntry("min.insync.replicas", "2", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    refused: list[KafkaError | None] = []
    strict = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                       "retries": 0, "message.timeout.ms": 20_000})

    def wait_refused() -> bool:
        strict.produce("live", value=b"late", on_delivery=lambda e, m: refused.append(e))
        strict.flush(30)
        return any(e is not None and e.code() == KafkaError.NOT_ENOUGH_REPLICAS
                   for e in refused)

    wait_until(wait_refused, "acks=all to be refused by min.insync.replicas=2", pause)

    # the KIP-113 throttle, cluster-wide (`logproof configs --entity-default`), reaches every
    # broker live
    status, out = cli("configs", "--alter", "--bootstrap-server", cluster.bootstrap_servers,
                      "--entity-type", "brokers", "--entity-default", "--add-config",
                      "replica.alter.log.dirs.io.max.bytes.per.second=123456,"
                      "follower.replication.throttled.rate=777")
    assert status == 0, out
    assert "Completed updating default config for brokers in the cluster." in out
    assert _znode(zk, "/config/brokers/<default>")["config"] == {
        "follower.replication.throttled.rate": "777",
        "replica.alter.log.dirs.io.max.bytes.per.second": "123456"}
    for broker_id in range(1, BROKERS + 1):
        def throttle_seen(broker_id: int = broker_id) -> bool:
            status, out = cli("configs", "--describe", "--bootstrap-server",
                              cluster.bootstrap_servers, "--entity-type", "brokers",
                              "--entity-name", str(broker_id))
            assert status == 0
            return ("replica.alter.log.dirs.io.max.bytes.per.second=123456 sensitive=false "
                    "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:" in out)

        wait_until(throttle_seen, f"broker {broker_id} to apply the throttle", pause)


def cli(*argv: str) -> tuple[int, str]:
    """Run a ``logproof`` command in this process: (exit status, standard output)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = cli_main(list(argv))
    return status, out.getvalue()


def test_configs_cli_refusals(cluster: Cluster) -> None:
    bootstrap = cluster.bootstrap_servers
    status, out = cli("configs", "--alter", "--bootstrap-server", bootstrap,
                      "--entity-type", "topics", "--entity-name", "nope",
                      "--add-config", "retention.ms=1")
    assert status != 0
    assert "UNKNOWN_TOPIC_OR_PARTITION" in out
    with AdminClient(bootstrap) as admin:
        assert admin.create_topics([("cli", 1, 1)])["cli"][0] == 0
    status, out = cli("configs", "--alter", "--bootstrap-server", bootstrap,
                      "--entity-type", "topics", "--entity-name", "cli",
                      "--add-config", "cleanup.policy=[compact,shred]")
    assert status != 0
    assert "INVALID_CONFIG" in out
    assert "cleanup.policy" in out
    assert "Traceback" not in out
    status, out = cli("configs", "--alter", "--bootstrap-server", bootstrap,
                      "--entity-type", "topics", "--entity-name", "cli",
                      "--add-config", "cleanup.policy=[compact,delete],retention.ms=5000")
    assert status == 0, out
    status, out = cli("configs", "--describe", "--bootstrap-server", bootstrap,
                      "--entity-type", "topics", "--entity-name", "cli")
    assert status == 0
    assert out.splitlines()[0] == "Dynamic configs for topic cli are:"
    assert "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:" \
        "cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}" in out
    status, out = cli("configs", "--alter", "--bootstrap-server", bootstrap,
                      "--entity-type", "topics", "--entity-name", "cli",
                      "--delete-config", "retention.ms")
    assert status == 0
    status, out = cli("configs", "--describe", "--bootstrap-server", bootstrap,
                      "--entity-type", "topics", "--entity-name", "cli")
    assert "retention.ms" not in out


def test_describe_cluster_with_every_client(cluster: Cluster) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from confluent_kafka.admin import AdminClient as ConfluentAdmin
    from kafka.admin import KafkaAdminClient

    confluent = ConfluentAdmin({"bootstrap.servers": cluster.bootstrap_servers})
    described = confluent.describe_cluster(request_timeout=30).result(30)
    assert sorted(node.id for node in described.nodes) == [1, 2, 3]
    assert described.controller is not None
    assert described.controller.id in (1, 2, 3)
    assert described.cluster_id == "logproof"

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        info = admin.describe_cluster()
        assert sorted(b["broker_id"] if "broker_id" in b else b["node_id"]
                      for b in info["brokers"]) == [1, 2, 3]
        assert info["controller_id"] in (1, 2, 3)
    finally:
        admin.close()

    async def main() -> None:
        client = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        await client.start()
        try:
            info = await client.describe_cluster()
            assert sorted(b["node_id"] for b in info["brokers"]) == [1, 2, 3]
        finally:
            await client.close()

    asyncio.run(main())


def test_create_partitions_with_every_client(cluster: Cluster, zk: KazooClient) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient as ConfluentAdmin
    from confluent_kafka.cimpl import NewPartitions as ConfluentNewPartitions
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewPartitions as KafkaNewPartitions

    with AdminClient(cluster.bootstrap_servers) as ours:
        assert ours.create_topics([("grow", 1, 2)])["grow"][0] == 0

    def partitions() -> dict[str, list[int]]:
        value = _znode(zk, "/brokers/topics/grow")["partitions"]
        assert isinstance(value, dict)
        return value

    confluent = ConfluentAdmin({"bootstrap.servers": cluster.bootstrap_servers})
    confluent.create_partitions([ConfluentNewPartitions("grow", 3)],
                                validate_only=True)["grow"].result(30)
    assert len(partitions()) == 1
    confluent.create_partitions([ConfluentNewPartitions("grow", 3)])["grow"].result(30)
    assert sorted(partitions()) == ["0", "1", "2"]
    assert all(len(replicas) == 2 for replicas in partitions().values())
    with pytest.raises(KafkaException, match=r"INVALID_PARTITIONS|higher than or equal"):
        confluent.create_partitions([ConfluentNewPartitions("grow", 2)])["grow"].result(30)

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        admin.create_partitions({"grow": KafkaNewPartitions(4, [[3, 1]])})
        assert partitions()["3"] == [3, 1]
    finally:
        admin.close()

    async def main() -> None:
        client = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        await client.start()
        try:
            await client.create_partitions({"grow": NewPartitions(5)})
        finally:
            await client.close()

    asyncio.run(main())
    assert len(partitions()) == 5
    with AdminClient(cluster.bootstrap_servers) as ours:
        wait_until(lambda: all(p.leader >= 0 for p in ours.metadata(["grow"]).topics["grow"][1])
                   and len(ours.metadata(["grow"]).topics["grow"][1]) == 5,
                   "the new partitions to have leaders", pause)


def test_partition_reassignments_kip455(cluster: Cluster, zk: KazooClient) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition

    with AdminClient(cluster.bootstrap_servers) as ours:
        assert ours.create_topics([("moving", {0: [1, 2], 1: [2, 3]})])["moving"][0] == 0
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        admin.alter_partition_reassignments({TopicPartition("moving", 0): [3, 2]})

        def done() -> bool:
            listed = admin.list_partition_reassignments()
            replicas = _znode(zk, "/brokers/topics/moving")["partitions"]
            assert isinstance(replicas, dict)
            return not listed and replicas["0"] == [3, 2]

        wait_until(done, "the reassignment to complete", pause)
        assert not zk.exists("/admin/reassign_partitions")
        # cancelling when nothing is in progress is refused with Kafka's error
        results = admin.alter_partition_reassignments({TopicPartition("moving", 1): None})
        assert [error.__name__ for error in results.values()] == [
            "NoReassignmentInProgressError"]
        results = admin.alter_partition_reassignments({TopicPartition("moving", 7): [1, 2]})
        assert [error.__name__ for error in results.values()] == [
            "UnknownTopicOrPartitionError"]
    finally:
        admin.close()


def test_reassign_cli_without_zookeeper_and_cancel(cluster: Cluster, zk: KazooClient,
                                                   tmp_path: Path) -> None:
    from confluent_kafka import Producer

    bootstrap = cluster.bootstrap_servers
    with AdminClient(bootstrap) as ours:
        assert ours.create_topics([("ra", {0: [1]}), ("rb", {0: [2]})])["ra"][0] == 0
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    # more than one 8 MiB mover chunk, so the throttled move below (one mover: no saved-up
    # credit) stays in progress
    for index in range(10_000):
        producer.produce("rb", value=b"v" * 1000 + str(index).encode(), partition=0)
        if index % 1000 == 999:
            producer.poll(0)
    assert producer.flush(30) == 0

    # cross-broker, with the KIP-73 throttle, through the admin APIs only
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "ra", "partition": 0, "replicas": [2, 3]}]}))
    status, out = cli("reassign", "--execute", "--bootstrap-server", bootstrap,
                      "--reassignment-json-file", str(plan), "--throttle", "50000000")
    assert status == 0, out
    assert "Started the cross-broker reassignment." in out
    assert _config_of(zk, "/config/brokers/1").get(
        "leader.replication.throttled.rate") == "50000000"
    assert _znode(zk, "/config/topics/ra")["config"] == {
        "leader.replication.throttled.replicas": "0:1",
        "follower.replication.throttled.replicas": "0:2,0:3"}

    def verified() -> bool:
        status, _ = cli("reassign", "--verify", "--bootstrap-server", bootstrap,
                        "--reassignment-json-file", str(plan))
        return status == 0

    wait_until(verified, "reassign --verify to report completion", pause)
    assert "leader.replication.throttled.replicas" not in _config_of(zk, "/config/topics/ra")

    # a log-dir move kept slow by the mover throttle, then cancelled
    with AdminClient(bootstrap) as ours:
        replica = TopicPartitionReplica("rb", 0, 2)
        current = ours.describe_replica_log_dirs([replica])[replica].current_log_dir
        assert current is not None
        other = next(str(d) for d in cluster.log_dirs(2) if str(d) != current)
        status, out = cli("configs", "--alter", "--bootstrap-server", bootstrap,
                          "--entity-type", "brokers", "--entity-name", "2", "--add-config",
                          "replica.alter.log.dirs.io.max.bytes.per.second=1000,"
                          "num.replica.alter.log.dirs.threads=1")
        assert status == 0, out

        def throttled() -> bool:
            _, out = cli("configs", "--describe", "--bootstrap-server", bootstrap,
                         "--entity-type", "brokers", "--entity-name", "2")
            return "replica.alter.log.dirs.io.max.bytes.per.second=1000 " in out

        wait_until(throttled, "broker 2 to throttle its movers", pause)
        move = tmp_path / "move.json"
        move.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "rb", "partition": 0, "replicas": [2], "log_dirs": [other]}]}))
        status, out = cli("reassign", "--execute", "--bootstrap-server", bootstrap,
                          "--reassignment-json-file", str(move))
        assert status == 0, out
        wait_until(lambda: ours.describe_replica_log_dirs([replica])[replica].future_log_dir
                   == other, "the move to start", pause)
        status, out = cli("reassign", "--cancel", "--bootstrap-server", bootstrap,
                          "--reassignment-json-file", str(move))
        assert status == 0, out
        assert "Cancelled the log-dir move of rb-0 on broker 2" in out
        wait_until(lambda: ours.describe_replica_log_dirs([replica])[replica].future_log_dir
                   is None, "the move to be cancelled", pause)
        assert ours.describe_replica_log_dirs([replica])[replica].current_log_dir == current


def test_delete_records_with_every_client(cluster: Cluster) -> None:
    """DeleteRecords moves the log start offset on the leader (Fetch and ListOffsets honour it)
    and on the followers, which learn it from the leader's fetch answers."""
    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
    from aiokafka.structs import TopicPartition as AioTopicPartition
    from confluent_kafka import Consumer, KafkaError, Producer
    from confluent_kafka import TopicPartition as ConfluentTopicPartition
    from confluent_kafka.admin import AdminClient as ConfluentAdmin
    from confluent_kafka.admin._listoffsets import OffsetSpec
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition as KafkaTopicPartition

    bootstrap = cluster.bootstrap_servers
    with AdminClient(bootstrap) as ours:
        assert ours.create_topics([("dr", {0: [1, 2, 3]})])["dr"][0] == 0
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for index in range(100):
        producer.produce("dr", value=b"%d" % index, partition=0)
    assert producer.flush(30) == 0

    confluent = ConfluentAdmin({"bootstrap.servers": bootstrap})

    def earliest() -> int:
        spec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
        result = confluent.list_offsets({ConfluentTopicPartition("dr", 0): spec})
        return int(next(iter(result.values())).result(30).offset)

    deleted = confluent.delete_records([ConfluentTopicPartition("dr", 0, 10)])
    assert next(iter(deleted.values())).result(30).low_watermark == 10
    assert earliest() == 10

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        result = admin.delete_records({KafkaTopicPartition("dr", 0): 20})
        assert [item["low_watermark"] for item in result.values()] == [20]
    finally:
        admin.close()
    assert earliest() == 20

    async def main() -> None:
        client = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await client.start()
        try:
            low = await client.delete_records(
                {AioTopicPartition("dr", 0): RecordsToDelete(before_offset=30)})
            assert list(low.values()) == [30]
        finally:
            await client.close()

    asyncio.run(main())
    assert earliest() == 30

    # Fetch below the log start offset is out of range; a consumer resetting to earliest
    # starts at 30
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dr",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([ConfluentTopicPartition("dr", 0, 5)])
        first = None
        deadline = time.monotonic() + 30
        while first is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is None:
                first = message.offset()
            else:
                assert error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART
        assert first == 30
    finally:
        consumer.close()

    # the followers learn the log start offset from the leader's fetch answers
    with AdminClient(bootstrap) as ours:
        leader = ours.metadata(["dr"]).topics["dr"][1][0].leader
        followers = [b for b in (1, 2, 3) if b != leader]

        def followers_follow() -> bool:
            return all(_follower_log_start(cluster, broker_id) == 30 for broker_id in followers)

        wait_until(followers_follow, "the followers' log start offset", pause)


def test_delete_records_waits_for_the_followers(cluster: Cluster) -> None:
    """Kafka's DelayedDeleteRecords: with a follower in the ISR that does not fetch (paused
    with SIGSTOP, well within its ZooKeeper session and replica.lag.time.max.ms), DeleteRecords
    answers REQUEST_TIMED_OUT after its timeout; once the follower runs again it follows and
    the answer is the low watermark."""
    import os
    import signal

    from confluent_kafka import KafkaException, Producer
    from confluent_kafka import TopicPartition as ConfluentTopicPartition
    from confluent_kafka.admin import AdminClient as ConfluentAdmin

    bootstrap = cluster.bootstrap_servers
    with AdminClient(bootstrap) as ours:
        controller = ours.metadata([]).controller_id
        follower = next(b for b in (1, 2, 3) if b != controller)
        leader = next(b for b in (1, 2, 3) if b not in (follower, controller))
        assert ours.create_topics([("drw", {0: [leader, follower]})])["drw"][0] == 0
        wait_until(lambda: {r for p in ours.metadata(["drw"]).topics["drw"][1] for r in p.isr}
                   == {leader, follower}, "both replicas in the ISR", pause)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for index in range(10):
        producer.produce("drw", value=b"%d" % index, partition=0)
    assert producer.flush(30) == 0
    # The admin client knows only the leader and has its metadata before the follower stops:
    # a Metadata request sent to the stopped broker would hang until the client's socket
    # timeout, longer than the wait below.
    admin = ConfluentAdmin({"bootstrap.servers": f"127.0.0.1:{cluster.ports[leader]}"})
    admin.list_topics(topic="drw", timeout=30)
    paused = cluster.processes[follower]
    os.kill(paused.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: stopped(paused.pid), "the follower to stop", pause)
        future = next(iter(admin.delete_records([ConfluentTopicPartition("drw", 0, 5)],
                                                operation_timeout=2).values()))
        with pytest.raises(KafkaException) as timed_out:
            future.result(30)
        assert timed_out.value.args[0].code() == 7  # REQUEST_TIMED_OUT
    finally:
        os.kill(paused.pid, signal.SIGCONT)
    done = next(iter(admin.delete_records([ConfluentTopicPartition("drw", 0, 5)],
                                          operation_timeout=30).values()))
    assert done.result(60).low_watermark == 5


def _follower_log_start(cluster: Cluster, broker_id: int) -> int:
    """The follower's log start offset as written in its ``log-start-offset-checkpoint``."""
    for log_dir in cluster.log_dirs(broker_id):
        path = log_dir / "log-start-offset-checkpoint"
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[2:]:
            topic, partition, offset = line.split()
            if (topic, partition) == ("dr", "0"):
                return int(offset)
    return -1


def test_auto_create_topics_is_on_by_default(cluster: Cluster) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    producer.produce("auto-created", value=b"x")
    assert producer.flush(30) == 0
    with AdminClient(cluster.bootstrap_servers) as ours:
        assert ours.metadata(["auto-created"]).topics["auto-created"][0] == 0


def test_topic_configs_go_with_the_topic(cluster: Cluster, zk: KazooClient) -> None:
    """Every new topic gets its /config/topics/<t> (empty without configs, as Kafka writes it),
    and deleting the topic removes it."""
    from confluent_kafka.admin import AdminClient as ConfluentAdmin
    from confluent_kafka.cimpl import NewTopic

    admin = ConfluentAdmin({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("gone", 1, 1, config={"retention.ms": "1000"}),
                         NewTopic("plain", 1, 1)])["gone"].result(30)
    wait_until(lambda: zk.exists("/config/topics/plain") is not None, "plain's config node",
               pause)
    assert _config_of(zk, "/config/topics/plain") == {}
    assert _config_of(zk, "/config/topics/gone") == {"retention.ms": "1000"}
    admin.delete_topics(["gone"])["gone"].result(30)
    wait_until(lambda: not zk.exists("/config/topics/gone")
               and not zk.exists("/brokers/topics/gone"), "the topic and its configs to go",
               pause)


def test_elect_preferred_leaders(cluster: Cluster, zk: KazooClient) -> None:
    """Runs last: it restarts broker 1. Its partitions' leadership moves away and, once it is
    back in the ISR, ElectLeaders (PREFERRED) moves it back through
    /admin/preferred_replica_election."""
    import signal

    from confluent_kafka import TopicPartition as ConfluentTopicPartition
    from confluent_kafka._model import ElectionType
    from confluent_kafka.admin import AdminClient as ConfluentAdmin
    from kafka.admin import KafkaAdminClient

    bootstrap = cluster.bootstrap_servers
    with AdminClient(bootstrap) as ours:
        created = ours.create_topics([("el", {0: [1, 2]}), ("el2", {0: [1, 3]})])
        assert created["el"][0] == 0
        assert created["el2"][0] == 0

        # (a broker that has just restarted answers a topic without partitions until the
        # controller's UpdateMetadata reaches it: asked again)
        def leader(topic: str) -> int:
            partitions = ours.metadata([topic]).topics[topic][1]
            return partitions[0].leader if partitions else -1

        def isr(topic: str) -> tuple[int, ...]:
            partitions = ours.metadata([topic]).topics[topic][1]
            return partitions[0].isr if partitions else ()

        wait_until(lambda: leader("el") == 1 and leader("el2") == 1, "broker 1 to lead", pause)
        process = cluster.processes[1]
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        ours.close()
        survivors = ",".join(f"127.0.0.1:{cluster.ports[b]}" for b in (2, 3))
        with AdminClient(survivors) as others:
            wait_until(lambda: others.metadata(["el"]).topics["el"][1][0].leader == 2
                       and others.metadata(["el2"]).topics["el2"][1][0].leader == 3,
                       "leadership to move away from broker 1", pause)
        cluster.restart(1)
        wait_until(lambda: 1 in isr("el") and 1 in isr("el2"), "broker 1 back in the ISR",
                   pause)
        assert leader("el") == 2

        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            response = admin.elect_leaders(0, {"el": [0]})
            assert [p.error_code for r in response.replica_election_results
                    for p in r.partition_result] == [0]
        finally:
            admin.close()
        # the answering broker saw the new leader; the others follow its UpdateMetadata
        wait_until(lambda: leader("el") == 1, "the metadata to show the new leader", pause)
        assert not zk.exists("/admin/preferred_replica_election")

        confluent = ConfluentAdmin({"bootstrap.servers": bootstrap})
        results = confluent.elect_leaders(
            ElectionType.PREFERRED, [ConfluentTopicPartition("el2", 0)]).result(60)
        assert list(results.values()) == [None]
        wait_until(lambda: leader("el2") == 1, "the metadata to show the new leader", pause)
        # already led by its preferred replica: ELECTION_NOT_NEEDED
        again = confluent.elect_leaders(
            ElectionType.PREFERRED, [ConfluentTopicPartition("el2", 0)]).result(60)
        assert [error.code() for error in again.values() if error is not None] == [84]


def test_elect_unclean_leaders(cluster: Cluster) -> None:
    """Runs after the preferred election (it stops brokers 2 and 3). A partition whose only ISR
    member is down stays leaderless with a live replica outside the ISR; ElectLeaders UNCLEAN
    (confluent-kafka) makes the controller elect that replica (ISR = itself), answers
    ELIGIBLE_LEADERS_NOT_AVAILABLE for a partition with no live replica, and ELECTION_NOT_NEEDED
    (kafka-python) once a leader is live."""
    import signal

    from confluent_kafka import KafkaException, Producer
    from confluent_kafka import TopicPartition as ConfluentTopicPartition
    from confluent_kafka._model import ElectionType
    from confluent_kafka.admin import AdminClient as ConfluentAdmin
    from kafka.admin import KafkaAdminClient

    bootstrap = cluster.bootstrap_servers
    with AdminClient(bootstrap) as ours:
        created = ours.create_topics([("uc", {0: [2, 3]}), ("ucd", {0: [2]})])
        assert created["uc"][0] == 0
        assert created["ucd"][0] == 0
        def led_by_2() -> bool:
            partitions = ours.metadata(["uc"]).topics["uc"][1]
            return bool(partitions) and partitions[0].leader == 2 and set(
                partitions[0].isr) == {2, 3}

        wait_until(led_by_2, "uc led by 2 with both replicas in the ISR", pause)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for index in range(10):
        producer.produce("uc", value=b"%d" % index, partition=0)
    assert producer.flush(30) == 0

    for broker_id in (3, 2):  # 3 leaves the ISR, then the last ISR member goes
        process = cluster.processes[broker_id]
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    cluster.restart(3)
    live = ",".join(f"127.0.0.1:{cluster.ports[b]}" for b in (1, 3))
    with AdminClient(live) as ours:
        def state(topic: str) -> tuple[int, tuple[int, ...]]:
            partitions = ours.metadata([topic]).topics[topic][1]
            if not partitions:  # a restarted broker before its UpdateMetadata: asked again
                return -2, ()
            return partitions[0].leader, tuple(partitions[0].isr)

        wait_until(lambda: state("uc") == (-1, (2,)) and state("ucd") == (-1, (2,)),
                   "uc and ucd leaderless, broker 2 their last ISR member", pause)
        assert state("uc") == (-1, (2,)), "unclean.leader.election.enable is off"

        confluent = ConfluentAdmin({"bootstrap.servers": live})
        partitions = [ConfluentTopicPartition("uc", 0), ConfluentTopicPartition("ucd", 0)]
        outcome: dict[tuple[str, int], int] = {}

        def answered() -> bool:  # the client's controller may lag a restart: NOT_CONTROLLER
            try:
                results = confluent.elect_leaders(ElectionType.UNCLEAN, partitions).result(60)
            except KafkaException as error:
                if error.args[0].code() != 41:
                    raise
                return False
            outcome.clear()
            outcome.update({(tp.topic, tp.partition): 0 if error is None else error.code()
                            for tp, error in results.items()})
            return 41 not in outcome.values()

        wait_until(answered, "the controller to answer ElectLeaders", pause)
        assert outcome == {("uc", 0): 0, ("ucd", 0): 83}
        wait_until(lambda: state("uc") == (3, (3,)),
                   "the live replica outside the ISR to lead, alone", pause)

        admin = KafkaAdminClient(bootstrap_servers=live)
        try:
            response = admin.elect_leaders(1, {"uc": [0]})
            assert [p.error_code for r in response.replica_election_results
                    for p in r.partition_result] == [84]  # ELECTION_NOT_NEEDED
        finally:
            admin.close()
    cluster.restart(2)
