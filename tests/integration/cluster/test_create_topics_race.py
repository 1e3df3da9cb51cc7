"""CreateTopics on a broker that has not heard from the controller yet.

Right after start-up a broker's metadata cache lists only itself and no controller until the
controller's first UpdateMetadata arrives. The test makes that window as long as it needs: it
starts brokers 1 and 2, pauses the controller (SIGSTOP, well within its session timeout) and
only then starts broker 3, which registers but hears nothing. Then, on broker 3:

* a replication factor 3 on the three registered brokers is valid (the broker checks it
  against ``/brokers/ids``, the authority, when its own view is too small), as is an explicit
  assignment naming all three;
* Metadata names the controller (``/controller``) and every registered broker, so a client that
  sends CreateTopics to the controller (librdkafka's AdminClient) is not left "waiting for
  controller" until its request timeout.

Once the controller resumes, a confluent-kafka AdminClient bootstrapped to broker 3 creates a
replication factor 3 topic.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from impl.broker.admin import AdminClient
from impl.cli.cmd_cluster import START_TIMEOUT_SECONDS, Cluster
from impl.controller import find_free_loopback_port

pytestmark = [pytest.mark.integration]

BROKERS = 3
WAIT_SECONDS = 20.0
SESSION_TIMEOUT_MS = 20_000
NONE = 0


@pytest.fixture
def cluster(zk_chroot: str, tmp_path: Path) -> Iterator[Cluster]:
    running = Cluster(tmp_path, BROKERS, 1, zookeeper=zk_chroot, base_port=None, overrides=[
        "min.insync.replicas=2", f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
    ])
    try:
        yield running
    finally:
        for process in running.processes.values():
            if process.poll() is None:
                os.kill(process.pid, signal.SIGCONT)
        running.stop()


def start_brokers(cluster: Cluster, *broker_ids: int) -> None:
    """Start brokers together and wait (bounded) until each serves."""
    for broker_id in broker_ids:
        port = find_free_loopback_port()
        cluster.ports[broker_id] = port
        cluster._spawn(broker_id, port)
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    for broker_id in broker_ids:
        cluster._wait_ready(broker_id, cluster.processes[broker_id], deadline)


def controller_of(zk_connect: str) -> int:
    client = KazooClient(hosts=zk_connect, timeout=10.0)
    client.start(timeout=10.0)
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while client.exists("/controller") is None:
            assert time.monotonic() < deadline, "no controller elected"
            time.sleep(0.05)
        controller: int = json.loads(client.get("/controller")[0])["brokerid"]
        return controller
    finally:
        client.stop()
        client.close()


def test_create_topics_before_the_first_update_metadata(
    cluster: Cluster, zk_chroot: str
) -> None:
    from confluent_kafka.admin import AdminClient as KafkaAdminClient
    from confluent_kafka.cimpl import NewTopic

    start_brokers(cluster, 1, 2)
    controller = controller_of(zk_chroot)
    paused = cluster.processes[controller]
    os.kill(paused.pid, signal.SIGSTOP)
    try:
        start_brokers(cluster, 3)
        fresh = f"127.0.0.1:{cluster.ports[3]}"
        with AdminClient(fresh, timeout_seconds=WAIT_SECONDS) as admin:
            validated = admin.create_topics([("rf3", 2, BROKERS)], validate_only=True)
            assert validated["rf3"] == (NONE, None)
            placed = admin.create_topics([("placed", {0: [3, 1, 2]})], validate_only=True)
            assert placed["placed"] == (NONE, None)
            metadata = admin.metadata([])
        assert metadata.controller_id == controller
        assert sorted(metadata.brokers) == [1, 2, 3]
        assert metadata.brokers[1][1] == cluster.ports[1]
    finally:
        os.kill(paused.pid, signal.SIGCONT)

    kafka_admin = KafkaAdminClient({"bootstrap.servers": fresh})
    futures = kafka_admin.create_topics([NewTopic("early", 2, BROKERS)], operation_timeout=10,
                                        request_timeout=WAIT_SECONDS)
    futures["early"].result(WAIT_SECONDS + 5)
    deadline = time.monotonic() + WAIT_SECONDS
    while True:  # the broker asked may hear of the new topic a moment after the controller
        partitions = kafka_admin.list_topics("early", timeout=10).topics["early"].partitions
        if len(partitions) == 2:
            break
        assert time.monotonic() < deadline, "the topic's metadata did not propagate"
        time.sleep(0.05)
    assert all(sorted(p.replicas) == [1, 2, 3] for p in partitions.values())
