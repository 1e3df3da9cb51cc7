"""Consumer groups with the four real clients against a three-broker cluster.

One cluster (three ``logproof broker`` processes on a real ZooKeeper) serves every test of the
module; each test uses its own topic and group. ``__consumer_offsets`` is created by the first
FindCoordinator with six partitions (``offsets.topic.num.partitions=6``) and replication factor
three; ``group.initial.rebalance.delay.ms=0`` keeps joins quick.

What is checked: each client subscribes, consumes, commits, closes, and a new consumer of the
same group resumes exactly at the committed offsets (no record skipped, none read twice); two
members split a six-partition topic with no partition owned by both and none left out; a member
killed with SIGKILL is evicted after its session timeout and its partitions move to the
survivor; the admin APIs of kafka-python and confluent-kafka list, describe, read the offsets
of and delete groups.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from impl.cli.cmd_cluster import Cluster

from ._load import every_broker_sees_all, pause, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

BROKERS = 3
PARTITIONS = 6
RECORDS = 60
WAIT_SECONDS = 60.0
_names = itertools.count()


@pytest.fixture(scope="module")
def cluster(zookeeper: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    chroot = f"/groups{os.getpid()}"
    client = KazooClient(hosts=zookeeper.connect_string, timeout=10.0)
    client.start(timeout=10.0)
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
        client.close()
    running = Cluster(tmp_path_factory.mktemp("groups"), BROKERS, 1,
                      zookeeper=f"{zookeeper.connect_string}{chroot}", base_port=None,
                      overrides=["group.initial.rebalance.delay.ms=0",
                                 f"offsets.topic.num.partitions={PARTITIONS}",
                                 "zookeeper.session.timeout.ms=6000"])
    try:
        running.start()
        wait_until(lambda: every_broker_sees_all(running.ports.values(), BROKERS),
                   "every broker to see the others", pause)
        yield running
    finally:
        running.stop()


def _topic_with_records(cluster: Cluster) -> str:
    """A new topic of six partitions (replication factor three) holding RECORDS records,
    ten per partition, each value ``p<partition>-<n>``."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    topic = f"g{next(_names)}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    deadline = time.monotonic() + WAIT_SECONDS
    sent = 0
    errors: list[Any] = []
    while sent < RECORDS:
        try:
            partition = sent % PARTITIONS
            producer.produce(topic, b"p%d-%d" % (partition, sent // PARTITIONS),
                             partition=partition, on_delivery=lambda e, m: errors.append(e))
            sent += 1
        except BufferError:
            producer.poll(0.1)
    while producer.flush(1.0) and time.monotonic() < deadline:
        pass
    assert len(errors) == RECORDS
    assert not any(errors), errors
    return topic


def _all_values() -> set[bytes]:
    return {b"p%d-%d" % (n % PARTITIONS, n // PARTITIONS) for n in range(RECORDS)}


# --- one client at a time: consume, commit, close, resume ------------------------------


def _kafka_python(bootstrap: str, topic: str, group: str, limit: int) -> list[bytes]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=8000)
    values: list[bytes] = []
    for message in consumer:
        values.append(message.value)
        if len(values) == limit:
            break
    consumer.commit()
    consumer.close()
    return values


def _confluent(bootstrap: str, topic: str, group: str, limit: int) -> list[bytes]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + WAIT_SECONDS
    idle = 0
    while len(values) < limit and time.monotonic() < deadline and idle < 8:
        message = consumer.poll(1.0)
        if message is None:
            idle += 1 if values or limit > RECORDS else 0
            continue
        assert message.error() is None, message.error()
        values.append(message.value() or b"")
        idle = 0
    if values:
        consumer.commit(asynchronous=False)
    consumer.close()
    return values


def _aiokafka(bootstrap: str, topic: str, group: str, limit: int) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer

    async def run() -> list[bytes]:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        values: list[bytes] = []
        try:
            deadline = time.monotonic() + WAIT_SECONDS
            idle = 0
            while len(values) < limit and time.monotonic() < deadline and idle < 8:
                batches = await consumer.getmany(timeout_ms=1000,
                                                 max_records=limit - len(values))
                got = [m.value for messages in batches.values() for m in messages]
                values += got
                idle = 0 if got else idle + (1 if values or limit > RECORDS else 0)
            await consumer.commit()
        finally:
            await consumer.stop()
        return values

    return asyncio.run(run())


def _kcat(bootstrap: str, topic: str, group: str, limit: int) -> list[bytes]:
    command = ["kcat", "-b", bootstrap, "-G", group, "-X", "auto.offset.reset=earliest",
               "-f", "%s\n", "-q"]
    # kcat stores the offset of each message it prints and commits them when it exits.
    command += ["-c", str(limit)] if limit <= RECORDS else ["-e"]
    done = subprocess.run([*command, topic], capture_output=True, timeout=WAIT_SECONDS,
                          check=True)
    return [line for line in done.stdout.split(b"\n") if line]


CLIENTS = {"kafka-python": _kafka_python, "confluent-kafka": _confluent,
           "aiokafka": _aiokafka, "kcat": _kcat}


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_consume_commit_close_and_resume_from_the_committed_offsets(
        cluster: Cluster, client: str) -> None:
    topic = _topic_with_records(cluster)
    group = f"{topic}-{client}"
    run = CLIENTS[client]
    first = run(cluster.bootstrap_servers, topic, group, 25)
    assert len(first) == 25
    rest = run(cluster.bootstrap_servers, topic, group, RECORDS + 1)
    assert sorted(first + rest) == sorted(_all_values()), (first, rest)


# --- two members ---------------------------------------------------------------------


def test_two_members_split_six_partitions_exclusively(cluster: Cluster) -> None:
    from confluent_kafka import Consumer

    topic = _topic_with_records(cluster)
    group = f"{topic}-pair"
    members = [Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000})
               for _ in range(2)]
    for member in members:
        member.subscribe([topic])
    seen: list[list[bytes]] = [[], []]
    try:
        def settled() -> bool:
            owned = [{tp.partition for tp in m.assignment()} for m in members]
            return (len(owned[0]) == len(owned[1]) == PARTITIONS // 2
                    and set(seen[0]) | set(seen[1]) == _all_values())

        def poll() -> None:
            for index, member in enumerate(members):
                message = member.poll(0.2)
                if message is not None and message.error() is None:
                    # A member reads only what the current generation gave it.
                    owned = {tp.partition for tp in member.assignment()}
                    assert message.partition() in owned, (index, message.partition(), owned)
                    seen[index].append(message.value() or b"")

        wait_until(settled, "both members to own three partitions and every record read",
                   poll, WAIT_SECONDS)
        owned = [{tp.partition for tp in m.assignment()} for m in members]
        assert owned[0] & owned[1] == set()
        assert owned[0] | owned[1] == set(range(PARTITIONS))
    finally:
        for member in members:
            member.close()


def _describe(cluster: Cluster, group: str) -> Any:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    return admin.describe_consumer_groups([group])[group].result(timeout=30)


def test_a_member_killed_with_sigkill_is_evicted_after_its_session_timeout(
        cluster: Cluster, tmp_path: Path) -> None:
    from confluent_kafka import Consumer

    topic = _topic_with_records(cluster)
    group = f"{topic}-kill"
    script = tmp_path / "member.py"
    script.write_text(
        "import sys\n"
        "from confluent_kafka import Consumer\n"
        "c = Consumer({'bootstrap.servers': sys.argv[1], 'group.id': sys.argv[2],\n"
        "              'session.timeout.ms': 6000, 'auto.offset.reset': 'earliest'})\n"
        "c.subscribe([sys.argv[3]])\n"
        "while True:\n"
        "    c.poll(0.5)\n")
    victim = subprocess.Popen([sys.executable, str(script), cluster.bootstrap_servers, group,
                               topic], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    survivor = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                         "session.timeout.ms": 6000, "auto.offset.reset": "earliest"})
    try:
        survivor.subscribe([topic])

        def members() -> int:
            description = _describe(cluster, group)
            return len(description.members) if str(description.state).endswith("STABLE") \
                else -1

        wait_until(lambda: members() == 2 and len(survivor.assignment()) == PARTITIONS // 2,
                   "two stable members", lambda: survivor.poll(0.2), WAIT_SECONDS)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        killed_at = time.monotonic()
        wait_until(lambda: len(survivor.assignment()) == PARTITIONS,
                   "the survivor to own every partition", lambda: survivor.poll(0.2),
                   WAIT_SECONDS)
        # Not before the killed member's session ended (6 s, less the last heartbeat's age).
        assert time.monotonic() - killed_at >= 3.0
        assert members() == 1
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()
        survivor.close()


# --- admin ---------------------------------------------------------------------------


def test_admin_apis_of_kafka_python_and_confluent_kafka(cluster: Cluster) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient
    from kafka.admin import KafkaAdminClient

    topic = _topic_with_records(cluster)
    groups = [f"{topic}-admin-{n}" for n in range(2)]
    for group in groups:
        assert len(_confluent(cluster.bootstrap_servers, topic, group, 12)) == 12
    python_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    confluent_admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    try:
        listed = {entry["group_id"]: entry for entry in python_admin.list_groups()}
        assert set(groups) <= set(listed)
        assert listed[groups[0]]["group_state"] == "Empty"
        described = python_admin.describe_groups(groups)
        assert all(described[g]["group_state"] == "Empty" for g in groups)
        offsets = python_admin.list_group_offsets(groups[0])
        assert sum(meta.offset for meta in offsets[groups[0]].values()) == 12
        result = confluent_admin.list_consumer_groups().result(timeout=30)
        assert set(groups) <= {g.group_id for g in result.valid}
        description = confluent_admin.describe_consumer_groups([groups[1]])[groups[1]]
        assert str(description.result(timeout=30).state).endswith("EMPTY")
        request = ConsumerGroupTopicPartitions(groups[1])
        answer = confluent_admin.list_consumer_group_offsets([request])[groups[1]]
        committed = answer.result(timeout=30).topic_partitions
        assert sum(tp.offset for tp in committed if tp.offset >= 0) == 12
        assert python_admin.delete_groups([groups[0]]) == {groups[0]: "OK"}
        confluent_admin.delete_consumer_groups([groups[1]])[groups[1]].result(timeout=30)
        from confluent_kafka.admin._config import ConfigResource

        resource = ConfigResource("topic", "__consumer_offsets")
        configs = confluent_admin.describe_configs([resource])[resource].result(timeout=30)
        assert configs["cleanup.policy"].value == "compact"
        remaining = {g.group_id for g in
                     confluent_admin.list_consumer_groups().result(timeout=30).valid}
        assert not set(groups) & remaining
        # A deleted group starts over: a new consumer reads from the beginning again.
        assert len(_confluent(cluster.bootstrap_servers, topic, groups[0], RECORDS + 1)) \
            == RECORDS
    finally:
        python_admin.close()


# --- the command line ----------------------------------------------------------------


def test_groups_command_lists_describes_resets_and_deletes(
        cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    from impl.cli import main as cli_main

    topic = _topic_with_records(cluster)
    group = f"{topic}-cli"
    assert len(_confluent(cluster.bootstrap_servers, topic, group, 30)) == 30
    server = ["--bootstrap-server", cluster.bootstrap_servers]

    def run(*words: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = cli_main(["groups", *words, *server])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    code, out, _ = run("list")
    assert code == 0
    assert any(line.split()[:2] == [group, "Empty"] for line in out.splitlines()), out
    code, out, _ = run("describe", "--group", group)
    assert code == 0
    rows = [line.split() for line in out.splitlines() if line.startswith(group)]
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...: the committed partitions.
    assert rows
    assert sum(int(row[3]) for row in rows) == 30
    assert all(row[4] == "10" for row in rows)
    assert all(int(row[5]) == 10 - int(row[3]) for row in rows)
    code, out, _ = run("reset-offsets", "--group", group, "--topic", topic, "--to-earliest")
    assert code == 0
    assert "dry run" in out
    code, out, _ = run("describe", "--group", group)
    rows = [line.split() for line in out.splitlines() if line.startswith(group)]
    assert sum(int(row[3]) for row in rows) == 30  # a dry run commits nothing
    for words in (["--topic", topic, "--to-earliest"], ["--topic", f"{topic}:0,1", "--to-latest"],
                  ["--topic", f"{topic}:2", "--to-offset", "4"]):
        code, out, _ = run("reset-offsets", "--group", group, *words, "--execute")
        assert code == 0, out
    code, out, _ = run("describe", "--group", group)
    rows = [line.split() for line in out.splitlines() if line.startswith(group)]
    assert {int(row[2]): (int(row[3]), int(row[5])) for row in rows} == {
        0: (10, 0), 1: (10, 0), 2: (4, 6), 3: (0, 10), 4: (0, 10), 5: (0, 10)}
    code, _, err = run("reset-offsets", "--group", group, "--topic", "no-such-topic",
                       "--to-earliest")
    assert code == 1
    assert err.strip().count("\n") == 0
    assert "does not exist" in err
    code, out, _ = run("delete", "--group", group)
    assert code == 0
    assert "succeeded" in out
    code, _, err = run("delete", "--group", group)
    assert code == 1
    assert "GROUP_ID_NOT_FOUND" in err
