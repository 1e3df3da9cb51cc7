"""Every partition reassigned to other brokers and other log dirs under load (KIP-113 §2).

Four brokers with two log dirs each run as child processes. A topic with four partitions,
replication factor 3 and ``min.insync.replicas=2`` receives a steady stream from confluent-kafka
(acks=all, idempotent) while a consumer reads it; each partition holds over 1 MB before the
move, so a new leader rebuilds its idempotent producers from more than one read of its log.
``logproof reassign --execute`` then moves every partition: its leader's replica leaves, the
broker it lacked joins in a named log dir, and the two replicas that stay move to their broker's
other log dir, all in one JSON that names a broker and a dir per replica. ``--verify`` is
repeated until it reports completion; then DescribeLogDirs (``logproof log-dirs describe``)
shows every replica in its requested dir and nowhere else, ``/admin/reassign_partitions`` is
gone, the metadata shows the new replica sets with full ISRs, and every acknowledged record is
consumed exactly once, in order. A slow variant moves about 10 MB per partition.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from impl.broker.admin import AdminClient
from impl.cli import main as cli_main
from impl.cli.cmd_cluster import Cluster

from ._load import every_broker_sees_all, pause, running_load, wait_until

pytestmark = [pytest.mark.integration]

TOPIC = "moved"
BROKERS = 4
DIRS = 2
#: partition -> replicas (the first leads): each broker leads one partition and lacks one
ASSIGNMENT = {0: (1, 2, 3), 1: (2, 3, 4), 2: (3, 4, 1), 3: (4, 1, 2)}
#: bytes added to each record, and records acknowledged before the reassignment
PADDING = 1000
RECORDS_BEFORE = 5000


@pytest.fixture
def cluster(zk_chroot: str, tmp_path: Path) -> Iterator[Cluster]:
    running = Cluster(tmp_path, BROKERS, DIRS, zookeeper=zk_chroot, base_port=None,
                      overrides=["min.insync.replicas=2", "zookeeper.session.timeout.ms=6000"])
    try:
        running.start()
        yield running
    finally:
        running.stop()


def cli(*argv: str) -> tuple[int, str]:
    """Run a ``logproof`` command in this process: (exit status, standard output)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli_main(list(argv))
    return status, out.getvalue()


def replica_dirs(servers: str) -> dict[tuple[int, int], list[str]]:
    """(partition, broker) -> the dirs holding a live (not temporary) copy, from
    ``logproof log-dirs describe``."""
    status, out = cli("log-dirs", "describe", "--bootstrap-server", servers, "--topics", TOPIC)
    assert status == 0, out
    found: dict[tuple[int, int], list[str]] = {}
    for broker in json.loads(out)["brokers"]:
        for log_dir in broker["log_dirs"]:
            assert log_dir["is_live"], log_dir
            for replica in log_dir["partitions"]:
                if replica["topic"] == TOPIC and not replica["is_temporary"]:
                    found.setdefault((replica["partition"], broker["broker"]), []).append(
                        log_dir["path"])
    return found


@pytest.mark.parametrize(("padding", "records_before"), [
    pytest.param(PADDING, RECORDS_BEFORE, id="1MB"),
    pytest.param(2 * PADDING, 4 * RECORDS_BEFORE, id="10MB", marks=pytest.mark.slow),
])
def test_every_partition_moves_to_other_brokers_and_dirs(
    cluster: Cluster, zk_chroot: str, tmp_path: Path, padding: int, records_before: int
) -> None:
    servers = cluster.bootstrap_servers
    wait_until(lambda: every_broker_sees_all(cluster.ports.values(), BROKERS),
               "every broker to see all brokers", pause)
    with AdminClient(servers) as admin:
        created = admin.create_topics([(TOPIC, ASSIGNMENT)], timeout_ms=20_000)
        assert created[TOPIC][0] == 0, created

    def partitions() -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
        """partition -> (leader, replicas, ISR)."""
        with AdminClient(servers) as admin:
            code, infos = admin.metadata([TOPIC]).topics.get(TOPIC, (3, ()))
        if code != 0:
            return {}
        return {i.partition: (i.leader, i.replicas, i.isr) for i in infos if i.error_code == 0}

    wait_until(lambda: {p: (s[0], set(s[2])) for p, s in partitions().items()}
               == {p: (r[0], set(r)) for p, r in ASSIGNMENT.items()},
               "leaders and full ISRs", pause)
    before = replica_dirs(servers)
    assert set(before) == {(p, b) for p, r in ASSIGNMENT.items() for b in r}

    all_brokers = set(range(1, BROKERS + 1))
    plan: list[dict[str, object]] = []
    target: dict[int, tuple[tuple[int, ...], tuple[str, ...]]] = {}
    for partition, replicas in sorted(ASSIGNMENT.items()):
        (joining,) = all_brokers - set(replicas)
        staying = replicas[1:]
        dirs = []
        for broker in staying:
            (current,) = before[(partition, broker)]
            (other,) = {str(d) for d in cluster.log_dirs(broker)} - {current}
            dirs.append(other)
        dirs.append(str(cluster.log_dirs(joining)[partition % DIRS]))
        new_replicas = (*staying, joining)
        target[partition] = (new_replicas, tuple(dirs))
        plan.append({"topic": TOPIC, "partition": partition, "replicas": list(new_replicas),
                     "log_dirs": dirs})
    plan_file = tmp_path / "reassignment.json"
    plan_file.write_text(json.dumps({"version": 1, "partitions": plan}))
    common = ["--reassignment-json-file", str(plan_file), "--bootstrap-server", servers,
              "--zookeeper", zk_chroot]

    with running_load(servers, TOPIC, len(ASSIGNMENT), padding=padding,
                      records_per_step=100) as load:
        # Over 1 MB per partition: a new leader rebuilds its producers from more than one read.
        load.more_acks(records_before, "acknowledgements before the reassignment")
        assert min(len(v) for v in load.acknowledged.values()) * padding > 1 << 20
        status, out = cli("reassign", "--execute", *common, "--timeout", "30")
        assert status == 0, out
        assert "Started the cross-broker reassignment." in out

        verified: list[str] = []

        def verify() -> bool:
            status, out = cli("reassign", "--verify", *common)
            verified.append(out)
            return status == 0

        load.wait_for(verify, "reassign --verify to report completion")
        for partition, (new_set, new_dirs) in target.items():
            assert f"Reassignment of partition {TOPIC}-{partition} is completed." in verified[-1]
            for broker, log_dir in zip(new_set, new_dirs, strict=True):
                assert (f"Reassignment of replica {TOPIC}-{partition}-{broker} to log dir "
                        f"{log_dir} completed successfully.") in verified[-1]
        load.more_acks(400, "acknowledgements after the reassignment")

        placed = replica_dirs(servers)
        for partition, (new_set, new_dirs) in target.items():
            for broker, log_dir in zip(new_set, new_dirs, strict=True):
                assert placed.get((partition, broker)) == [log_dir], (partition, broker, placed)
        assert set(placed) == {(p, b) for p, (r, _d) in target.items() for b in r}, placed
        zk = KazooClient(hosts=zk_chroot, timeout=10.0)
        zk.start(timeout=10.0)
        try:
            assert zk.exists("/admin/reassign_partitions") is None
        finally:
            zk.stop()
            zk.close()
        load.wait_for(lambda: {p: (s[1], set(s[2])) for p, s in partitions().items()}
                      == {p: (r, set(r)) for p, (r, _d) in target.items()},
                      "the new replica sets with full ISRs")
        assert all(s[0] in target[p][0] for p, s in partitions().items())
        load.finish()
    assert cluster.stop() == [0] * BROKERS
