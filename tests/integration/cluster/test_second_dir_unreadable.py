"""A follower's, then the leader's, second log dir made unreadable under load (KIP-112).

Three brokers with two log dirs each run as child processes; as root they run as ``nobody``
(``Cluster(run_as=…)``, through ``setpriv``), since root ignores file permissions. A topic with
four partitions, replication factor 3 and ``min.insync.replicas=2``, all led by broker 1, is
spread over both dirs of every broker so that no partition has a replica on both dirs that
fail. A producer (acks=all, idempotent) and a consumer run throughout.

1. Broker 3's (a follower's) second dir is ``chmod 000``: its next checkpoint fails with EACCES,
   the dir goes offline, the broker writes a ``log_dir_event`` notification, and the controller
   marks the replicas on it offline and removes them from the ISR. Broker 3 keeps replicating the
   partitions on its first dir.
   Broker 3 is then restarted with the dir still unreadable: the dir is offline from start-up
   and the replicas it held are not recreated on the good dir (``isNew``).
2. Broker 1's (the leader's) second dir is ``chmod 000``: the partitions it led from there get
   new leaders; every partition keeps two in-sync replicas, so acks=all goes on everywhere.

Metadata (``logproof topics describe``) reports the offline replicas; the lost replicas are not
recreated on the good dirs (``isNew``); every acknowledged record is consumed exactly once, in
order. A slow variant runs twenty times as many records of 1 kB.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from impl.broker.admin import AdminClient, PartitionInfo, TopicPartitionReplica
from impl.cli.cmd_cluster import Cluster

from ._load import WAIT_SECONDS, Load, every_broker_sees_all, pause, running_load, wait_until
from .test_reassign_all import cli

pytestmark = [pytest.mark.integration]

TOPIC = "dirs"
BROKERS = 3
LEADER = 1
FOLLOWER = 3
#: partition -> replicas: broker 1 leads all four
ASSIGNMENT = {0: (1, 2, 3), 1: (1, 3, 2), 2: (1, 2, 3), 3: (1, 3, 2)}
#: broker -> partition -> index of the log dir holding it; broker 3's second dir and broker 1's
#: second dir share no partition
PLACEMENT = {
    1: {0: 0, 1: 0, 2: 1, 3: 1},
    2: {0: 0, 1: 1, 2: 0, 3: 1},
    3: {0: 1, 1: 1, 2: 0, 3: 0},
}
FAILED_DIR = 1


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data dir the brokers' user can reach (pytest's own temporary dirs are private)."""
    path = Path(tempfile.mkdtemp(prefix="logproof-dirs-")).resolve()
    path.chmod(0o755)
    try:
        yield path
    finally:
        for root, dirs, _files in os.walk(path):
            for name in dirs:
                os.chmod(os.path.join(root, name), 0o755)
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def cluster(zk_chroot: str, data_dir: Path) -> Iterator[Cluster]:
    running = Cluster(data_dir, BROKERS, 2, zookeeper=zk_chroot, base_port=None, overrides=[
        "min.insync.replicas=2", "zookeeper.session.timeout.ms=6000",
    ], run_as="nobody" if os.geteuid() == 0 else None)
    try:
        running.start()
        yield running
    finally:
        running.stop()


def partitions(servers: str) -> dict[int, PartitionInfo]:
    with AdminClient(servers) as admin:
        code, infos = admin.metadata([TOPIC]).topics.get(TOPIC, (3, ()))
    return {} if code != 0 else {info.partition: info for info in infos}


def dir_contents(servers: str, broker_id: int) -> dict[str, tuple[bool, dict[int, int]]]:
    """The broker's dirs: path -> (live, partition -> size) for the topic's live copies."""
    with AdminClient(servers) as admin:
        described = admin.describe_log_dirs([broker_id])[broker_id]
    return {
        path: (info.is_live, {p: r.size for (t, p), r in info.replicas.items()
                              if t == TOPIC and not r.is_future})
        for path, info in described.items()
    }


def place_replicas(cluster: Cluster, servers: str, load: Load | None = None) -> None:
    """Move every replica to its dir in PLACEMENT (AlterReplicaLogDirs) and wait."""
    wanted = {
        TopicPartitionReplica(TOPIC, partition, broker): str(cluster.log_dirs(broker)[index])
        for broker, dirs in PLACEMENT.items() for partition, index in dirs.items()
    }
    # a broker answers REPLICA_NOT_AVAILABLE for a replica it does not host yet (as Kafka's
    # does): the ISR the metadata shows is the controller's, before a follower has acted on it
    def hosted() -> bool:
        return all(
            set(dirs) <= {p for _, (_, sizes) in dir_contents(servers, broker).items()
                          for p in sizes}
            for broker, dirs in PLACEMENT.items()
        )

    wait_until(hosted, "every broker to host its replicas", pause if load is None else load.step)
    with AdminClient(servers) as admin:
        codes = admin.alter_replica_log_dirs(wanted)
    assert set(codes.values()) == {0}, codes

    def placed() -> bool:
        with AdminClient(servers) as admin:
            found = admin.describe_replica_log_dirs(wanted)
        return all(found[r].current_log_dir == d and found[r].future_log_dir is None
                   for r, d in wanted.items())

    wait_until(placed, "the replicas to reach their dirs", pause if load is None else load.step)


@pytest.mark.parametrize(("padding", "scale"), [
    pytest.param(0, 1, id="small"),
    pytest.param(1000, 20, id="heavy", marks=pytest.mark.slow),
])
def test_follower_then_leader_second_dir_unreadable(
    cluster: Cluster, zk_chroot: str, padding: int, scale: int
) -> None:
    servers = cluster.bootstrap_servers
    wait_until(lambda: every_broker_sees_all(cluster.ports.values(), BROKERS),
               "every broker to see all brokers", pause)
    with AdminClient(servers) as admin:
        created = admin.create_topics([(TOPIC, ASSIGNMENT)], timeout_ms=20_000)
        assert created[TOPIC][0] == 0, created
    wait_until(lambda: {p: (i.leader, set(i.isr)) for p, i in partitions(servers).items()}
               == {p: (LEADER, set(r)) for p, r in ASSIGNMENT.items()},
               "broker 1 to lead with full ISRs", pause)
    place_replicas(cluster, servers)
    follower_bad = str(cluster.log_dirs(FOLLOWER)[FAILED_DIR])
    leader_bad = str(cluster.log_dirs(LEADER)[FAILED_DIR])
    on_follower_bad = {p for p, i in PLACEMENT[FOLLOWER].items() if i == FAILED_DIR}
    on_leader_bad = {p for p, i in PLACEMENT[LEADER].items() if i == FAILED_DIR}
    assert not on_follower_bad & on_leader_bad

    with running_load(servers, TOPIC, len(ASSIGNMENT), padding=padding,
                      records_per_step=10 * min(scale, 10)) as load:
        load.more_acks(300 * scale, "acknowledgements before any dir fails")

        # 1. The follower's second dir.
        os.chmod(follower_bad, 0o000)
        load.wait_for(
            lambda: all(FOLLOWER not in i.isr and FOLLOWER in i.offline_replicas
                        for p, i in partitions(servers).items() if p in on_follower_bad),
            "the follower's replicas on the failed dir to be offline and out of the ISR")
        described = dir_contents(servers, FOLLOWER)
        assert described[follower_bad][0] is False
        follower_good = str(cluster.log_dirs(FOLLOWER)[1 - FAILED_DIR])
        serving = described[follower_good]
        assert serving[0] is True
        assert set(serving[1]) == set(ASSIGNMENT) - on_follower_bad
        load.more_acks(300 * scale, "acknowledgements with the follower's dir offline")
        state = partitions(servers)
        for partition, info in state.items():
            assert info.leader == LEADER
            if partition in on_follower_bad:
                assert set(info.isr) == set(ASSIGNMENT[partition]) - {FOLLOWER}
            else:
                assert FOLLOWER in info.isr
                assert info.offline_replicas == ()
        # The follower still replicates the partitions on its good dir.
        load.wait_for(lambda: all(
            dir_contents(servers, FOLLOWER)[follower_good][1][p] > size
            for p, size in serving[1].items()
        ), "the follower's good dir to grow")

        # The follower restarts with its second dir still unreadable: the dir is offline from
        # start-up, the replicas it held there are not known to be lost, and LeaderAndIsr (not
        # isNew) must not recreate them on the good dir.
        follower = cluster.processes[FOLLOWER]
        follower.send_signal(signal.SIGTERM)
        assert follower.wait(WAIT_SECONDS) == 0
        load.wait_for(lambda: all(FOLLOWER not in i.isr for i in partitions(servers).values()),
                      "the stopped follower to leave every ISR")
        cluster.restart(FOLLOWER)
        load.wait_for(
            lambda: all((FOLLOWER in i.isr) == (p not in on_follower_bad)
                        for p, i in partitions(servers).items()),
            "the restarted follower back in the ISR of the partitions on its good dir")
        load.more_acks(200 * scale, "acknowledgements after the follower's restart")
        described = dir_contents(servers, FOLLOWER)
        assert described[follower_bad][0] is False
        assert set(described[follower_good][1]) == set(ASSIGNMENT) - on_follower_bad
        assert all(FOLLOWER in i.offline_replicas
                   for p, i in partitions(servers).items() if p in on_follower_bad)

        # 2. The leader's second dir.
        os.chmod(leader_bad, 0o000)
        load.wait_for(
            lambda: all(i.leader not in (-1, LEADER) and LEADER not in i.isr
                        and LEADER in i.offline_replicas
                        for p, i in partitions(servers).items() if p in on_leader_bad),
            "new leaders for the leader's partitions on the failed dir")
        before = {p: len(acked) for p, acked in load.acknowledged.items()}
        load.wait_for(lambda: all(len(load.acknowledged[p]) >= before[p] + 100 * scale
                                  for p in ASSIGNMENT),
                      "acknowledgements on every partition after both failures")

        state = partitions(servers)
        for partition, info in state.items():
            assert len(info.isr) >= 2, info
            if partition in on_leader_bad:
                assert set(info.offline_replicas) == {LEADER}, info
            elif partition in on_follower_bad:
                assert info.leader == LEADER, info
                assert set(info.offline_replicas) == {FOLLOWER}, info
        status, out = cli("topics", "describe", "--bootstrap-server", servers,
                          "--topic", TOPIC)
        assert status == 0, out
        for partition in sorted(ASSIGNMENT):
            line = next(x for x in out.splitlines() if f"\tPartition: {partition}\t" in x)
            offline = LEADER if partition in on_leader_bad else FOLLOWER
            assert line.endswith(f"\tOffline: {offline}"), line

        # isNew: no lost replica was recreated on a good dir.
        for broker, lost in ((FOLLOWER, on_follower_bad), (LEADER, on_leader_bad)):
            described = dir_contents(servers, broker)
            good = described[str(cluster.log_dirs(broker)[1 - FAILED_DIR])]
            assert good[0] is True
            assert set(good[1]) == set(ASSIGNMENT) - lost, (broker, described)
        load.finish()
    # The controller deleted the notifications it processed.
    zk = KazooClient(hosts=zk_chroot, timeout=10.0)
    zk.start(timeout=10.0)
    try:
        wait_until(lambda: zk.get_children("/log_dir_event_notification") == [],
                   "the log dir notifications to be deleted", pause)
    finally:
        zk.stop()
        zk.close()
    # Brokers with an offline dir still stop cleanly.
    assert cluster.stop() == [0] * BROKERS
