"""Deleting a topic and creating it again at once (a test suite's setup, a Terraform replace).

The create is refused with TOPIC_ALREADY_EXISTS while the deletion is in progress (as Kafka
answers "marked for deletion"); once it is gone, the new topic gets leaders and metadata within
the request's timeout. (It used not to: the controller's shell cached the ``partitions`` znodes
it had ensured for the first topic, which the deletion removed, so every create of the new
topic's partition states failed with NoNode and CreateTopics timed out.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from impl.broker.admin import AdminClient
from impl.cli.cmd_cluster import Cluster

from ._load import every_broker_sees_all, pause, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

BROKERS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: object) -> Iterator[Cluster]:
    from kazoo.client import KazooClient

    connect = zookeeper.connect_string  # type: ignore[attr-defined]
    chroot = f"/recreate_{time.monotonic_ns()}"
    client = KazooClient(hosts=connect, timeout=10.0)
    client.start(timeout=10.0)
    client.ensure_path(chroot)
    client.stop()
    client.close()
    running = Cluster(Path(tmp_path_factory.mktemp("recreate")), BROKERS, 1,
                      zookeeper=connect + chroot, base_port=None, overrides=[])
    try:
        running.start()
        wait_until(lambda: every_broker_sees_all(running.ports.values(), BROKERS),
                   "every broker to see the cluster", pause)
        yield running
    finally:
        running.stop()


def test_recreate_right_after_delete_with_confluent(cluster: Cluster) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient as ConfluentAdmin
    from confluent_kafka.cimpl import NewTopic

    admin = ConfluentAdmin({"bootstrap.servers": cluster.bootstrap_servers})

    def create_once_gone() -> None:
        """Create ``again``, retrying while the previous one is still being deleted."""
        started = time.monotonic()
        while True:
            try:
                admin.create_topics([NewTopic("again", 3, 2)],
                                    request_timeout=25)["again"].result(30)
                return
            except KafkaException as error:
                if error.args[0].code() != 36:  # TOPIC_ALREADY_EXISTS while being deleted
                    raise
                assert time.monotonic() - started < 30, "the deletion never finished"
                pause()

    with AdminClient(cluster.bootstrap_servers) as ours:
        for _round in range(3):
            create_once_gone()
            wait_until(lambda: all(p.leader >= 0 for p in
                                   ours.metadata(["again"]).topics["again"][1]),
                       "the new topic's leaders", pause)
            admin.delete_topics(["again"])["again"].result(30)
