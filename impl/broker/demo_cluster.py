"""The cluster part of ``logproof demo``: three brokers, a leader SIGKILLed under load.

:func:`run_cluster_demo` starts an embedded ZooKeeper and three brokers as child processes with
two log dirs each (the :class:`~impl.cli.cmd_cluster.Cluster` that ``logproof cluster up`` runs),
creates a topic with replication factor 3 and ``min.insync.replicas=2``, and produces with
confluent-kafka (acks=all, idempotent) while the partition's leader is killed with SIGKILL. It
prints the new leader and leader epoch once the controller has elected one, restarts the killed
broker, waits until it is back in the ISR, and finally reads the partition with a consumer and
checks that every acknowledged record is in it exactly once, in order. Everything is stopped and
the temporary dir removed on success and on failure; every wait is bounded.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from impl.controller import ZooKeeperUnavailableError
from impl.controller.znodes import decode_partition_state, partition_state_path

from .admin import AdminClient, AdminClientError

if TYPE_CHECKING:
    from impl.cli.cmd_cluster import Cluster

TOPIC = "failover"
BROKERS = 3
LOG_DIRS_PER_BROKER = 2
MIN_INSYNC_REPLICAS = 2
SESSION_TIMEOUT_MS = 4000
WAIT_SECONDS = 30.0
RECORDS_PER_PHASE = 300
INVALID_REPLICATION_FACTOR = 38


class ClusterDemoError(Exception):
    """A step of the cluster demo failed (the message says which and why)."""


def _say(stage: str, message: str) -> None:
    print(f"[{stage}] {message}", flush=True)


def _wait_for(condition: Callable[[], bool], what: str, poll: Callable[[], Any]) -> float:
    """Call ``poll`` until ``condition`` holds, within :data:`WAIT_SECONDS`; returns seconds."""
    start = time.monotonic()
    deadline = start + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise ClusterDemoError(f"timed out after {WAIT_SECONDS:.0f} s waiting for {what}")
        poll()
    return time.monotonic() - start


@dataclass(frozen=True, slots=True)
class _PartitionView:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    def line(self) -> str:
        return (f"Topic: {TOPIC}\tPartition: 0\tLeader: {self.leader}\t"
                f"LeaderEpoch: {self.leader_epoch}\t"
                f"Replicas: {','.join(map(str, self.replicas))}\t"
                f"Isr: {','.join(map(str, self.isr))}")


class _Observer:
    """Leader, replicas and ISR as Metadata reports them; the leader epoch from ZooKeeper."""

    def __init__(self, cluster: Cluster) -> None:
        from kazoo.client import KazooClient  # noqa: PLC0415

        self.cluster = cluster
        self.zookeeper: Any = KazooClient(hosts=cluster.zookeeper_connect, timeout=10.0)
        self.zookeeper.start(timeout=10.0)

    def close(self) -> None:
        self.zookeeper.stop()
        self.zookeeper.close()

    def live_bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.cluster.ports[b]}"
                        for b, process in sorted(self.cluster.processes.items())
                        if process.poll() is None)

    def view(self) -> _PartitionView | None:
        """The partition now, or ``None`` while no live broker can describe it."""
        try:
            with AdminClient(self.live_bootstrap(), timeout_seconds=5.0) as admin:
                metadata = admin.metadata([TOPIC])
        except AdminClientError:
            return None
        code, partitions = metadata.topics.get(TOPIC, (-1, ()))
        if code != 0 or not partitions or partitions[0].error_code != 0:
            return None
        info = partitions[0]
        path = partition_state_path(TOPIC, 0)
        if not self.zookeeper.exists(path):
            return None
        data, stat = self.zookeeper.get(path)
        state = decode_partition_state(TOPIC, 0, data, stat.version)
        return _PartitionView(info.leader, state.leader_epoch, info.replicas, info.isr)


def _restart(cluster: Cluster, broker_id: int) -> None:
    """Start a killed broker again on its port, with its config and log dirs."""
    from impl.cli.cmd_cluster import START_TIMEOUT_SECONDS  # noqa: PLC0415

    old = cluster.processes[broker_id]
    if old.stdout is not None:
        old.stdout.close()
    cluster._spawn(broker_id, cluster.ports[broker_id])
    cluster._wait_ready(broker_id, cluster.processes[broker_id],
                        time.monotonic() + START_TIMEOUT_SECONDS)


def _failover(cluster: Cluster, observer: _Observer, bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: PLC0415

    def all_registered() -> bool:
        # every broker must see the others before one of them places three replicas
        for port in cluster.ports.values():
            try:
                with AdminClient(f"127.0.0.1:{port}", timeout_seconds=5.0) as admin:
                    if len(admin.metadata([]).brokers) < BROKERS:
                        return False
            except AdminClientError:
                return False
        return True

    _wait_for(all_registered, f"all {BROKERS} brokers in every broker's metadata",
              lambda: time.sleep(0.05))
    outcome: list[tuple[int, str | None]] = []

    def created() -> bool:
        with AdminClient(bootstrap) as admin:
            result = admin.create_topics([(TOPIC, 1, BROKERS)], timeout_ms=20_000)[TOPIC]
        outcome[:] = [result]
        return result[0] != INVALID_REPLICATION_FACTOR

    _wait_for(created, "CreateTopics to see every broker", lambda: time.sleep(0.1))
    code, message = outcome[0]
    if code != 0:
        raise ClusterDemoError(f"CreateTopics failed: {code} {message}")
    current: list[_PartitionView | None] = [None]

    def observe() -> _PartitionView | None:
        current[0] = observer.view()
        return current[0]

    def settled() -> bool:
        view = observe()
        return view is not None and view.leader > 0 and len(view.isr) == BROKERS

    _wait_for(settled, "the topic's leader and full ISR", lambda: time.sleep(0.05))
    before_kill = current[0]
    assert before_kill is not None
    _say("topic", f"created {TOPIC!r} (replication factor {BROKERS}, "
                  f"min.insync.replicas={MIN_INSYNC_REPLICAS}): {before_kill.line()}")

    acknowledged: list[bytes] = []
    errors: list[str] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            errors.append(str(error))
        else:
            acknowledged.append(message.value())

    # log_level 2: the refused connections to the killed broker are expected, not news
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "delivery.timeout.ms": 60_000, "retry.backoff.ms": 100,
                         "topic.metadata.refresh.interval.ms": 500, "log_level": 2})
    sent = 0

    def produce_some() -> None:
        nonlocal sent
        if errors:
            raise ClusterDemoError(f"the producer failed: {errors[0]}")
        for _ in range(20):
            producer.produce(TOPIC, value=b"record-%06d" % sent, partition=0,
                             on_delivery=delivered)
            sent += 1
        producer.poll(0.05)

    try:
        _wait_for(lambda: len(acknowledged) >= RECORDS_PER_PHASE, "acks before the kill",
                  produce_some)
        victim = before_kill.leader
        _say("produce", f"confluent-kafka (acks=all, idempotent): {len(acknowledged)} records "
                        f"acknowledged by leader {victim}")
        process = cluster.processes[victim]
        os.kill(process.pid, signal.SIGKILL)
        try:
            process.wait(WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            raise ClusterDemoError(f"broker {victim} did not die of SIGKILL") from None
        _say("failover", f"SIGKILLed the leader, broker {victim} (pid {process.pid}), "
                         "while producing")

        def elected() -> bool:
            view = observe()
            return view is not None and view.leader not in (-1, victim)

        took = _wait_for(elected, "a new leader", produce_some)
        after_kill = current[0]
        assert after_kill is not None
        _say("failover", f"new leader: broker {after_kill.leader}, leader epoch "
                         f"{after_kill.leader_epoch} (was {before_kill.leader_epoch}), "
                         f"elected {took:.1f} s after the kill; {after_kill.line()}")
        before = len(acknowledged)
        _wait_for(lambda: len(acknowledged) >= before + RECORDS_PER_PHASE,
                  "acks from the new leader", produce_some)
        _say("produce", f"{len(acknowledged) - before} more records acknowledged by the new "
                        f"leader, broker {after_kill.leader}")

        _restart(cluster, victim)
        _say("restart", f"broker {victim} restarted on its port with its two log dirs")

        def rejoined() -> bool:
            view = observe()
            return view is not None and victim in view.isr

        took = _wait_for(rejoined, f"broker {victim} back in the ISR", produce_some)
        rejoined_view = current[0]
        assert rejoined_view is not None
        _say("restart", f"broker {victim} is back in the ISR after {took:.1f} s; "
                        f"{rejoined_view.line()}")
        after = len(acknowledged)
        _wait_for(lambda: len(acknowledged) >= after + RECORDS_PER_PHASE,
                  "acks after the restart", produce_some)
        remaining = producer.flush(WAIT_SECONDS)
        if remaining != 0:
            raise ClusterDemoError(f"{remaining} records still unacknowledged after "
                                   f"{WAIT_SECONDS:.0f} s")
    finally:
        producer.flush(0)
    if errors:
        raise ClusterDemoError(f"the producer failed: {errors[0]}")
    if len(acknowledged) != sent:
        raise ClusterDemoError(f"{sent} records sent but {len(acknowledged)} acknowledged")
    _say("produce", f"all {sent} records acknowledged, none failed")

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "logproof-demo",
                         "enable.auto.commit": False, "enable.partition.eof": False,
                         "log_level": 2})
    received: list[bytes] = []
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])

        def consume() -> None:
            for message in consumer.consume(500, 0.2):
                if message.error() is not None:
                    raise ClusterDemoError(f"the consumer failed: {message.error()}")
                value = message.value()
                if value is not None:
                    received.append(value)

        _wait_for(lambda: len(received) >= len(acknowledged), "every record", consume)
        low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
    finally:
        consumer.close()
    # values are numbered in production order, zero-padded: sorting restores that order
    expected = sorted(acknowledged)
    if received != expected or (low, high) != (0, len(expected)):
        duplicates = len(received) - len(set(received))
        missing = len(set(expected) - set(received))
        raise ClusterDemoError(
            f"read {len(received)} records (offsets {low}..{high}), expected {len(expected)}: "
            f"{missing} missing, {duplicates} duplicated"
            + ("" if missing or duplicates else ", out of order"))
    _say("verify", f"the consumer read all {len(received)} acknowledged records exactly once, "
                   "in order, across the failover and the restart")


def run_cluster_demo() -> int:
    """Run the failover demo; returns 0 on success, 1 (after a one-line message) on failure."""
    # imported here: impl.cli imports impl.broker while discovering its commands
    from impl.cli._errors import CliError  # noqa: PLC0415
    from impl.cli.cmd_cluster import Cluster  # noqa: PLC0415

    root = Path(tempfile.mkdtemp(prefix="logproof-cluster-demo-"))
    cluster = Cluster(root, BROKERS, LOG_DIRS_PER_BROKER, zookeeper=None, base_port=None,
                      overrides=[f"min.insync.replicas={MIN_INSYNC_REPLICAS}",
                                 f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}"])
    status = 0
    observer: _Observer | None = None
    try:
        bootstrap = cluster.start()
        pids = ", ".join(f"{b}: pid {p.pid}" for b, p in sorted(cluster.processes.items()))
        _say("cluster", f"ZooKeeper on {cluster.zookeeper_connect}; {BROKERS} brokers with "
                        f"{LOG_DIRS_PER_BROKER} log dirs each serving on {bootstrap} ({pids})")
        observer = _Observer(cluster)
        _failover(cluster, observer, bootstrap)
    except (ClusterDemoError, AdminClientError, CliError, ZooKeeperUnavailableError) as error:
        _say("failover", f"FAILED: {error}")
        status = 1
    except Exception as error:  # any other failure still ends in one line and a clean stop
        _say("failover", f"FAILED: {type(error).__name__}: {error}")
        status = 1
    finally:
        if observer is not None:
            observer.close()
        codes = cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    if status == 0:
        if any(code != 0 for code in codes):
            _say("cluster", f"FAILED: brokers exited with {codes} when stopped")
            return 1
        _say("cluster", f"stopped {len(codes)} brokers and ZooKeeper; data dir removed")
    return status
