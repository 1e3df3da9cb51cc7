"""A log dir that fails while no record is produced is found by the periodic HW checkpoint.

Kafka rewrites every dir's ``replication-offset-checkpoint`` each
``replica.high.watermark.checkpoint.interval.ms`` (5 s), changed or not; that write is what
finds a dead disk on an idle broker. One broker with two dirs runs as ``nobody`` (root ignores
``chmod``), holds one partition on each dir, and gets no traffic; the second dir is made
unreadable and must be reported offline (DescribeLogDirs error, the partition's replica offline
in Metadata) within about one interval. The wait is bounded generously (the machine may be
loaded); the time it took is printed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from impl.broker.admin import AdminClient, TopicPartitionReplica
from impl.cli.cmd_cluster import Cluster

from ._load import every_broker_sees_all, pause, wait_until
from .test_second_dir_unreadable import data_dir  # noqa: F401 (fixture)

pytestmark = [pytest.mark.integration]

TOPIC = "idle"
#: bound of the wait for the failure to be noticed: the 5 s interval plus generous slack
NOTICE_SECONDS = 20.0


@pytest.fixture
def cluster(zk_chroot: str, data_dir: Path) -> Iterator[Cluster]:  # noqa: F811
    running = Cluster(data_dir, 1, 2, zookeeper=zk_chroot, base_port=None, overrides=[],
                      run_as="nobody" if os.geteuid() == 0 else None)
    try:
        running.start()
        yield running
    finally:
        running.stop()


def test_idle_dir_failure_is_noticed_by_the_hw_checkpoint(cluster: Cluster) -> None:
    servers = cluster.bootstrap_servers
    wait_until(lambda: every_broker_sees_all(cluster.ports.values(), 1), "the broker", pause)
    with AdminClient(servers) as admin:
        created = admin.create_topics([(TOPIC, {0: (1,), 1: (1,)})], timeout_ms=20_000)
        assert created[TOPIC][0] == 0, created
    dirs = [str(d) for d in cluster.log_dirs(1)]
    wanted = {TopicPartitionReplica(TOPIC, p, 1): dirs[p] for p in (0, 1)}
    with AdminClient(servers) as admin:
        assert set(admin.alter_replica_log_dirs(wanted).values()) == {0}

    def placed() -> bool:
        with AdminClient(servers) as admin:
            found = admin.describe_replica_log_dirs(wanted)
        return all(found[r].current_log_dir == d and found[r].future_log_dir is None
                   for r, d in wanted.items())

    wait_until(placed, "one partition on each dir", pause)

    def checkpointed() -> bool:
        """Both dirs' checkpoints name their partition: nothing is left to change them."""
        for index, log_dir in enumerate(dirs):
            for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint"):
                path = Path(log_dir) / name
                lines = path.read_text().splitlines() if path.exists() else []
                if lines[2:] != [f"{TOPIC} {index} 0"]:
                    return False
        return True

    wait_until(checkpointed, "the checkpoints to settle (the broker is idle from here)", pause)

    os.chmod(dirs[1], 0o000)
    started = time.monotonic()

    def offline() -> bool:
        with AdminClient(servers) as admin:
            described = admin.describe_log_dirs([1])[1]
            code, infos = admin.metadata([TOPIC]).topics[TOPIC]
        by_partition = {info.partition: info for info in infos}
        return (not described[dirs[1]].is_live and described[dirs[0]].is_live
                and code == 0 and 1 in by_partition[1].offline_replicas
                and by_partition[0].offline_replicas == ())

    wait_until(offline, "the idle failed dir to be reported offline", pause, NOTICE_SECONDS)
    print(f"idle dir failure reported after {time.monotonic() - started:.2f} s")
