"""The deterministic cluster simulator: brokers x log dirs, controllers, clients, faults.

Theory of operation
-------------------
A cluster of ``brokers`` simulated brokers (:class:`conformance._cluster_nodes.SimBroker`),
each the storage engine's real :class:`~impl.storage.manager.LogManager` over its own
:class:`~conformance.disk.SimDisk` with ``log_dirs`` dirs, plus the replication core
(:mod:`impl.broker.replication`) and the idempotence core; each broker also runs a controller
candidate, the real :class:`~impl.controller.controller.Controller` core over one
:class:`~conformance._coordinator_server.SimulatedZooKeeperServer` (election ``multi``,
``/controller_epoch`` conditional writes, sessions, ephemeral registrations). Controller
requests (LeaderAndIsr, StopReplica, UpdateMetadata), follower fetches, OffsetForLeaderEpoch,
produce and consume requests are messages over one :class:`~conformance.network.SimNetwork`.
Clients: one idempotent ``acks=all`` producer (one batch in flight per partition, retried with
the same sequence until answered) writing to a topic of ``partitions`` partitions with
replication factor ``min(3, brokers)`` and ``min.insync.replicas`` 2, one consumer reading
below the HW, and an admin client sending DeleteRecords (:mod:`conformance._cluster_records`).

One seed decides everything through named :class:`~conformance.rng.SimRng` streams:
``workload`` (produce, consume, intra-broker moves through AlterReplicaLogDirs, throttle
changes, flushes; drawn without looking at the system, so removing a fault leaves the
operations alone), ``faults`` (the schedule, planned up front: :func:`plan_faults`;
crashes of the last live in-sync copy, session expiries, connection losses and malformed
znodes come from ``faults-last-copy``, ``faults-session``, ``faults-connection`` and
``faults-malformed``), ``network`` (the run's loss/duplication/reordering mix and every
delivery delay), and per broker ``crash`` streams (what an unflushed crash loses).

Admin workload (:mod:`conformance._cluster_admin`, the ``admin`` stream, so the other streams
and every seed's fault schedule are unchanged): about one step in twenty carries an admin
operation, written to ZooKeeper by logproof's own admin code (``impl.controller.admin``'s
``create_topic``, ``add_partitions``, ``delete_topic``; the ``/admin/preferred_replica_election``
znode ElectLeaders writes): a topic ``a<n>`` created (one or two partitions, replication factor
``min(3, brokers)``, at most two alive; a name is never reused), a partition added to one (the
``/brokers/topics/a<n>`` change the controller watches, up to three), one deleted
(``/admin/delete_topics``), a partition of one reassigned (``reassign_partitions``: a new
order, one replica fewer or back to the replication factor, each replica's log dir ``any`` or
one of its broker's), or a preferred replica election of some of ``t``'s partitions and the
admin topics' first. The admin topics carry no client data; ``t`` is never grown or
deleted. Every controller and replication event of the admin topics is trace-checked like
``t``'s.

Fault model
-----------
* ``crash``: the broker process dies and loses what was not fsynced (SimDisk's contract); its
  ZooKeeper sessions expire (its registration and, if it was controller, ``/controller``
  vanish); it restarts ``target`` steps later (log recovery, new registration, new broker epoch).
  Lossy faults (``crash``, ``dir_failure``) strike only a *healthy* cluster — every broker up and
  every partition's ISR in ZooKeeper equal to its online replicas, at least two of them — so the
  loss of unflushed data never exceeds what replication is there to survive (Kafka's guarantee
  needs one surviving in-sync copy, not fsync). ``crash_last_copy`` strikes whenever, for
  every partition whose ISR in ZooKeeper holds the broker, another member of that ISR holds
  every acknowledged batch, live or stopped cleanly, and has not crashed uncleanly since it
  last joined the ISR; a lossy fault needs that too besides health, since a member that
  crashed uncleanly stays in ZooKeeper's ISR until a controller fails it (restarted while no
  controller ran, it looks healthy: fuzz seeds 9726, 5093). That is what NO_COMMITTED_LOSS promises:
  one in-sync copy surviving a lossy crash, as KIP-966 (``min.insync.replicas`` - 1 unclean
  shutdowns) but within the ISR: a copy that already left the ISR (KIP-966's eligible leader
  replicas, which ZooKeeper's partition state does not keep) is not counted, so the crash of
  the last ISR member after the others left it is outside the promise and never injected.
* ``clean_restart``: everything is flushed, then the broker crashes and restarts (any time).
* ``crash_last_copy``: another member of an ISR that holds the broker stops cleanly (flushed,
  clean-shutdown marker written), then the broker crashes losing its unflushed tail: it was the
  last *live* in-sync copy (cluster seed 595's interleaving, in the other order). Downtimes:
  ``target % 16 + 2`` steps for the crashed broker, ``target // 16 % 16 + 2`` for the stopped
  one. Unlike ``crash`` it strikes an unhealthy cluster too (partitions, catch-ups,
  reassignments, brokers down), under the promise below.
* ``session_expiry``: the broker's ZooKeeper session expires (its registration vanishes, its
  process keeps running and keeps its broker epoch until then); it registers again ``target``
  steps later (2-20) with a new broker epoch. The controller fails the broker, so controller
  requests on their way to it arrive after later epochs: addressed to its unchanged broker
  epoch they are accepted (as in Kafka), and the leader epoch and ZooKeeper's zkVersion fence
  what they start. Drawn from a stream of its own (``faults-session``, at a quarter of the
  fault probability), so the other faults of a seed stay as they were.
* ``dir_failure``: one log dir fails with EIO (at most one per run); its replicas go offline,
  the broker notifies the controller (``/log_dir_event_notification``).
* ``controller_expiry``: the active controller's session expires; its client re-creates a
  session at once but the node hears of the expiry only ``target`` ms later. Even ``target``:
  at once, a zombie whose inputs still reach it, which must resign at the first read or write
  it completes on the new session rather than act on it (fuzz seed 10226). Odd ``target``: as
  its next fenced write is sent, which stalls and runs ``target`` ms later on the new session,
  usually after another broker won the next term: ``/controller_epoch``'s version check must
  fence it (KAFKA-6082).
* ``connection_loss``: the broker's ZooKeeper connection (its registration's session and its
  controller's) drops and comes back on the same sessions ``2 + target // 4 % 60`` ms later,
  within the session timeout: SUSPENDED, watches dropped, requests failing with ConnectionLoss,
  then CONNECTED (:data:`CONNECTION_LOSS_SHAPES`: at once, with the controller node's next read
  or next election ``multi``/fenced write in flight, or on the active controller while an
  operator deletes ``/controller``; ``target // 240 % 2``: it flaps once). The active controller
  revalidates its term and re-reads everything, or resigns. Drawn from ``faults-connection``.
* ``malformed_znode``: garbage where the controller reads requests and notices
  (:meth:`conformance._cluster_admin.AdminWorkload.write_malformed`); logged and ignored, the
  notices deleted; no check expects anything of it. Drawn from ``faults-malformed``.
* ``partition``: one broker is cut from every other node for ``target`` steps (ZooKeeper stays
  reachable, so a partitioned leader shrinks its ISR and is fenced by epochs).
* ``reassign``: ``/admin/reassign_partitions`` is written with a new replica order, a new
  replica set when there are more brokers than replicas, one replica fewer (never below two;
  the dropped replica is stopped and deleted) or one more (back to the replication factor, the
  new replica created empty); the controller carries it out.
* the network's per-run mix: loss, duplication, reordering (``network`` stream).
* the storage broker's faults (broker id ``brokers``; :class:`StorageBroker`): the single-broker
  simulator's whole disk fault model, planned from the ``storage-broker`` stream.

What is checked (names of ``spec/VOCABULARY.md``)
-------------------------------------------------
After every step: LEADER_UNIQUE (at most one broker leads a partition in a leader epoch),
EPOCHS_MONOTONIC (a replica's leader epoch never decreases; nor does the partition state's in
ZooKeeper), HW_MONOTONIC (a leader's HW never decreases while it leads in one epoch),
LOG_MATCHING (an ISR member's log equals the leader's below the HW, and a follower joins the ISR
only holding everything below the HW), NO_COMMITTED_LOSS (the current leader, the live broker
leading in ZooKeeper's leader epoch, holds every acknowledged batch at its acknowledged
offset), CONTROLLER_FENCED (a controller write lands only under the current controller epoch),
DIR_FAILURE_ISOLATION (a replica lost with a failed dir is never recreated empty without
``is_new``), READ_CONSISTENT (the consumer reads contiguous batches, no producer batch twice,
sequences in order). At the end the cluster is healed and
settled (topic deletions completed included), then every acknowledged batch must be in the
leader's log exactly once, in the order acknowledged, what the consumer read must still be the
log's prefix, and TOPIC_DELETED: a topic asked to be deleted is gone from ZooKeeper (unless
a broker assigned one of its replicas has a failed dir: it answers StopReplica
KAFKA_STORAGE_ERROR until it restarts, as Kafka's), no broker serves a replica of it (but a
stray, outside the assignment when the deletion was asked and untouched since but by a
LeaderAndIsr then in flight, that Kafka leaves hosted too) and the brokers assigned one when
the deletion was asked hold no log of it; FOLLOWER_PROGRESS (no live follower of the current
epoch left marked failed) and CLUSTER_HEALS (every broker up and every partition healthy, but
one that cannot heal in Kafka either: :meth:`ClusterWorld._cannot_heal`). With
``groups`` (the default), the brokers host group coordinators over ``__consumer_offsets`` and
simulated members run consumer groups (:mod:`conformance._cluster_groups`):
GROUP_ASSIGNMENT_EXCLUSIVE, COORDINATOR_LOADED and OFFSETS_DURABLE are checked end to end.
Every trace event is fed to the :class:`~conformance.trace_check.TraceChecker` (group
coordinator events through :mod:`conformance.group_abstraction`).

This module is a sans-IO core.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from conformance import move_sim
from conformance.clock import SimClock
from conformance.move_abstraction import move_abstractions
from conformance.move_sim import BrokerWorld, Fault, SimConfig, ViolationFound
from conformance.network import NetworkFaults, SimNetwork
from conformance.rng import SimRng
from conformance.trace_check import Abstraction, TraceChecker, TraceVerdict
from impl.broker import group_coordinator as gc
from impl.broker import group_records
from impl.broker.node import ISR_SCAN_STEP_PARTITIONS, MAX_TIMESTAMP
from impl.broker.replication import ReplicaRole, ReplicaState
from impl.controller.coordinator import CreateOp, DeleteOp, NoNodeError, SetOp
from impl.controller.requests import LeaderAndIsrRequest
from impl.controller.znodes import (
    CONTROLLER_PATH,
    PERSISTENT_PATHS,
    REASSIGN_PARTITIONS_PATH,
    ReassignmentTarget,
    TopicAssignment,
    decode_partition_state,
    decode_topic,
    encode_reassignment,
    encode_topic,
    partition_state_path,
    topic_path,
)
from impl.storage import record_batch as rb
from impl.storage import replica_move as rm
from impl.storage.config import UNLIMITED_RATE
from impl.storage.errors import StorageError
from impl.storage.manager import MoverCopy, MoverSwap
from impl.storage.names import TopicPartition
from impl.trace import TraceEvent

from ._cluster_admin import AdminWorkload
from ._cluster_groups import GROUP_NODE_BASE, OFFSETS_PARTITIONS, GroupClients
from ._cluster_nodes import (
    CONSUMER_NODE,
    FETCH_MAX_BYTES,
    PRODUCE_TIMEOUT_MS,
    PRODUCER_NODE,
    RETRY_MS,
    BatchKey,
    FetchCall,
    FetchReply,
    ListOffsetsCall,
    ListOffsetsReply,
    ProduceCall,
    ProduceReply,
    SimBroker,
    batch_keys,
    read_bytes,
)
from ._cluster_records import ADMIN_NODE, RecordsAdmin
from ._coordinator_pump import ControllerCall
from ._coordinator_server import SimulatedZooKeeperServer

__sans_io__ = True

TOPIC: Final = "t"
#: One-way delays of the simulated network (a LAN).
NETWORK_DELAY_MIN_NS: Final = 50_000
NETWORK_DELAY_MAX_NS: Final = 600_000

#: The implementation variants (known-bad ones must be caught; see docs/conformance.md).
VARIANTS: dict[str, str] = {
    "shipped": "the implementation as it ships",
    "truncate_to_hw": (
        "followers truncate to their own HW on a leader change (replica.truncation.policy="
        "high_watermark, design V3): KIP-101's loss of an acknowledged record"
    ),
    "no_epoch_check": (
        "controller writes do not check /controller_epoch's version: a zombie controller's "
        "write lands (KAFKA-6082)"
    ),
    "isr_expanded_early": (
        "a follower joins the ISR as soon as it fetches, before it has caught up to the HW"
    ),
}

FAULT_KINDS = (
    "crash",
    "clean_restart",
    "dir_failure",
    "controller_expiry",
    "partition",
    "reassign",
    "session_expiry",
    "crash_last_copy",
    "connection_loss",
    "malformed_znode",
)
#: The faults of the streams added after ``faults`` (``faults-last-copy``, ``faults-session``,
#: ``faults-connection``, ``faults-malformed``): a schedule without them is the plan of a seed
#: as it was drawn before them.
LATER_STREAM_KINDS = ("session_expiry", "crash_last_copy", "connection_loss", "malformed_znode")
#: ``connection_loss``'s shapes (``target % 4``): the loss lands at once, with the node's next
#: read or next election multi or fenced write in flight, or at once on the active controller
#: while an operator deletes ``/controller`` (a forced controller move); the connection is
#: down ``2 + target // 4 % 60`` ms (the session timeout is 6 s: it survives); with
#: ``target // 240 % 2`` it flaps: it drops again, as long, with the node's first read once
#: back (a revalidation's, an election's).
CONNECTION_LOSS_SHAPES = ("now", "read", "write", "controller_moved")
#: The storage broker's faults (``move_sim.FAULT_KINDS``; its id is ``brokers``).
STORAGE_FAULT_KINDS = move_sim.FAULT_KINDS

_THROTTLE_RATES = (UNLIMITED_RATE, 1 << 20, 64 << 10, 8 << 10)


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """One cluster run's shape (everything else comes from the seed).

    Attributes:
        brokers: brokers (each also a controller candidate).
        log_dirs: log dirs per broker.
        partitions: partitions of the one topic.
        steps: workload steps (then the cluster is healed and settled).
        fault_probability: chance that a step carries a fault.
        variant: one of :data:`VARIANTS`.
        network_faults: draw a loss/duplication/reordering mix from the seed.
        min_insync_replicas: ``min.insync.replicas`` (capped by the replication factor).
        replica_lag_time_max_ms: ``replica.lag.time.max.ms`` (simulated).
        unclean_leader_election: ``unclean.leader.election.enable`` (loss checks then off).
        segment_bytes: ``log.segment.bytes``.
        chunk_bytes: a mover's chunk.
        settle_steps_max: bound on the healing steps after the workload.
        trace_check: replay trace events in the models.
        model_machines: besides ``replica_move`` (always), the machines whose events are
            replayed in their models (``"replication"``, ``"controller"``, both by default); the
            others' events are counted as unchecked and the end-to-end checks cover them.
        storage_broker: run the storage broker alongside the cluster (see the module
            docstring): the single-broker simulator's storage workload and disk faults.
        groups: run consumer groups (:mod:`conformance._cluster_groups`): the brokers host
            group coordinators over ``__consumer_offsets``, members join, sync, heartbeat,
            commit, fetch offsets, leave, crash and pause; coordinator events are
            trace-checked against ``model.group_coordinator``.
        delete_records: an admin client sends DeleteRecords (:mod:`conformance._cluster_records`).
        admin: run the admin workload (:mod:`conformance._cluster_admin`): topics created,
            grown and deleted, preferred replica elections.
        delayed_fetches: a leader parks a follower's fetch that found nothing and asks it
            again when woken or expired (:class:`conformance._cluster_nodes.SimBroker`); off,
            every fetch is answered at once (as the simulator did before: the regression tests
            recorded then replay their seeds that way).
        fetch_rounds: a follower sends each leader one request at a time naming many
            partitions, and matches the answers to the node's calls, through the trio
            fetcher's own :class:`impl.broker.fetch_rounds.FollowerRounds`; the leader answers
            a round as the trio handlers do (a byte budget over its partitions, parked whole).
            Off, each of the node's calls travels alone (as the simulator did before: the
            regression tests recorded then replay their seeds that way).
        isr_scan_step_partitions: the brokers' periodic ISR scan visits at most this many
            partitions led per step (``NodeConfig.isr_scan_step_partitions``); a longer scan
            goes on one step a pump, messages delivered between its steps. The default, the
            shipped one, is more than a simulated broker leads: every scan in one step.
    """

    brokers: int = 3
    log_dirs: int = 2
    partitions: int = 2
    steps: int = 300
    fault_probability: float = 0.03
    variant: str = "shipped"
    network_faults: bool = True
    min_insync_replicas: int = 2
    replica_lag_time_max_ms: int = 40
    unclean_leader_election: bool = False
    segment_bytes: int = 2048
    chunk_bytes: int = 700
    settle_steps_max: int = 600
    trace_check: bool = True
    model_machines: tuple[str, ...] = ("replication", "controller")
    storage_broker: bool = True
    groups: bool = True
    delete_records: bool = True
    admin: bool = True
    delayed_fetches: bool = True
    fetch_rounds: bool = True
    isr_scan_step_partitions: int = ISR_SCAN_STEP_PARTITIONS

    def __post_init__(self) -> None:
        assert self.brokers >= 1
        assert self.log_dirs >= 1
        assert self.partitions >= 1
        assert self.steps >= 0
        assert 0.0 <= self.fault_probability <= 1.0
        assert self.variant in VARIANTS, f"unknown variant {self.variant!r}"
        assert self.isr_scan_step_partitions >= 1
        assert set(self.model_machines) <= {"replication", "controller"}, self.model_machines

    @property
    def replication_factor(self) -> int:
        """``min(3, brokers)``."""
        return min(3, self.brokers)

    @property
    def min_isr(self) -> int:
        """``min.insync.replicas`` capped by the replication factor."""
        return min(self.min_insync_replicas, self.replication_factor)

    @property
    def storage_config(self) -> SimConfig:
        """The storage broker's shape: three dirs (a move, a redirect and a failure need
        them), the cluster's partitions (the last one compacted, with the log cleaner, when
        there are two or more), segments, chunks and fault rate."""
        return SimConfig(brokers=1, log_dirs=max(3, self.log_dirs), partitions=self.partitions,
                         steps=self.steps, fault_probability=self.fault_probability,
                         segment_bytes=self.segment_bytes, chunk_bytes=self.chunk_bytes,
                         trace_check=self.trace_check,
                         compacted=1 if self.partitions >= 2 else 0)


@dataclass(frozen=True, slots=True, order=True)
class ClusterFault:
    """One planned fault: at ``step``, of ``kind``, on ``broker``, with ``target`` (downtime
    steps, dir index, notice delay in ms, partition duration in steps, a reassignment choice,
    the steps before a broker whose session expired registers again, a connection loss's shape
    and duration, or a malformed znode's choice)."""

    step: int
    kind: str
    broker: int = 0
    target: int = 0

    def spec(self) -> str:
        """``step:kind:broker:target``, the form ``--faults`` takes."""
        return f"{self.step}:{self.kind}:{self.broker}:{self.target}"

    @staticmethod
    def parse(spec: str) -> ClusterFault:
        """The inverse of :meth:`spec`.

        Raises:
            ValueError: not a cluster fault spec.
        """
        parts = spec.strip().split(":")
        if len(parts) != 4 or (parts[1] not in FAULT_KINDS and parts[1] not in STORAGE_FAULT_KINDS):
            raise ValueError(f"not a cluster fault spec (step:kind:broker:target): {spec!r}")
        return ClusterFault(int(parts[0]), parts[1], int(parts[2]), int(parts[3]))


def format_faults(faults: Sequence[ClusterFault]) -> str:
    """Faults as a comma-separated list of specs ("" for none)."""
    return ",".join(fault.spec() for fault in faults)


def parse_faults(text: str) -> tuple[ClusterFault, ...]:
    """The inverse of :func:`format_faults`.

    Raises:
        ValueError: a spec is malformed.
    """
    return tuple(sorted(ClusterFault.parse(s) for s in text.split(",") if s.strip()))


def plan_faults(seed: int, config: ClusterConfig) -> tuple[ClusterFault, ...]:
    """The fault schedule of a run, from the seed's ``faults`` stream alone."""
    rng = SimRng(seed).stream("faults")
    faults: list[ClusterFault] = []
    dir_failures = 0
    for step in range(1, config.steps):
        if not rng.chance(config.fault_probability):
            continue
        broker = rng.randrange(config.brokers)
        roll = rng.randrange(100)
        if roll < 25:
            faults.append(ClusterFault(step, "crash", broker, rng.randint(3, 20)))
        elif roll < 40:
            faults.append(ClusterFault(step, "clean_restart", broker, rng.randint(2, 10)))
        elif roll < 48:
            target = rng.randrange(config.log_dirs)
            if dir_failures == 0 and config.log_dirs >= 2:
                dir_failures += 1
                faults.append(ClusterFault(step, "dir_failure", broker, target))
        elif roll < 65:
            faults.append(ClusterFault(step, "controller_expiry", broker, rng.randint(5, 60)))
        elif roll < 85:
            faults.append(ClusterFault(step, "partition", broker, rng.randint(5, 40)))
        else:
            faults.append(ClusterFault(step, "reassign", broker, rng.randrange(1 << 16)))
    # Crashes of the last live in-sync copy, and session expiries, come from streams of their
    # own, so that they leave the faults above (and every seed pinned by them) unchanged.
    more = SimRng(seed).stream("faults-last-copy")
    for step in range(1, config.steps):
        if more.chance(config.fault_probability / 4):
            faults.append(ClusterFault(step, "crash_last_copy", more.randrange(config.brokers),
                                       more.randrange(256)))
    expiries = SimRng(seed).stream("faults-session")
    for step in range(1, config.steps):
        if expiries.chance(config.fault_probability / 4):
            faults.append(ClusterFault(step, "session_expiry", expiries.randrange(config.brokers),
                                       expiries.randint(2, 20)))
    losses = SimRng(seed).stream("faults-connection")
    for step in range(1, config.steps):
        if losses.chance(config.fault_probability / 4):
            faults.append(ClusterFault(step, "connection_loss", losses.randrange(config.brokers),
                                       losses.randrange(4 * 60 * 2)))
    malformed = SimRng(seed).stream("faults-malformed")
    for step in range(1, config.steps):
        if malformed.chance(config.fault_probability / 4):
            faults.append(ClusterFault(step, "malformed_znode", 0, malformed.randrange(1 << 12)))
    if config.storage_broker:
        # the storage broker's own schedule, from a stream of its own (so the cluster's
        # faults are the same with it or without it)
        storage = move_sim.plan_faults(seed, config.storage_config,
                                       SimRng(seed).stream("storage-broker"))
        faults.extend(ClusterFault(f.step, f.kind, config.brokers, f.target) for f in storage)
    return tuple(sorted(faults))


def network_mix(seed: int, config: ClusterConfig) -> NetworkFaults:
    """The run's network fault mix (its own stream, so it never shifts other draws)."""
    if not config.network_faults:
        return NetworkFaults(delay_min_ns=NETWORK_DELAY_MIN_NS, delay_max_ns=NETWORK_DELAY_MAX_NS)
    rng = SimRng(seed).stream("network-mix")
    return NetworkFaults(
        loss_probability=rng.choice((0.0, 0.01, 0.05)),
        duplicate_probability=rng.choice((0.0, 0.02)),
        reorder_probability=rng.choice((0.0, 0.1)),
        delay_min_ns=NETWORK_DELAY_MIN_NS,
        delay_max_ns=NETWORK_DELAY_MAX_NS,
    )


@dataclass(frozen=True, slots=True)
class ClusterViolation:
    """What a check (or the trace checker) found."""

    invariant: str
    kind: str
    message: str
    step: int


@dataclass(frozen=True, slots=True)
class ClusterOutcome:
    """Everything one cluster run produced (field names as :class:`move_sim.SimOutcome`'s)."""

    seed: int
    config: ClusterConfig
    faults: tuple[ClusterFault, ...]
    violation: ClusterViolation | None
    steps: int
    events: int
    trace: tuple[TraceEvent, ...]
    trace_digest: str
    trace_verdict: TraceVerdict
    restarts: int
    acknowledged_batches: int
    consumed_batches: int
    moves_done: int
    leader_elections: int
    controller_elections: int
    faults_skipped: int
    #: consumer groups: commits acknowledged, OffsetFetch answers checked, assignments received
    group_commits: int = 0
    group_fetches: int = 0
    group_assignments: int = 0
    #: admin operations carried out (topics created, partitions added, topics deleted,
    #: preferred elections)
    admin_operations: int = 0
    #: ZooKeeper connection losses that landed (``connection_loss``), and the warnings the
    #: controllers logged about malformed znodes (``malformed_znode``)
    connection_losses: int = 0
    zookeeper_warnings: int = 0
    #: follower fetches the leaders parked and answered later (woken or expired)
    delayed_fetches: int = 0


def replay_command(seed: int, config: ClusterConfig,
                   faults: Sequence[ClusterFault] | None = None) -> str:
    """The command that reproduces a cluster run (the shape always, other settings when they
    differ from the defaults)."""
    default = ClusterConfig()
    parts = [f"logproof conformance replay --seed {seed} --brokers {config.brokers} "
             f"--log-dirs {config.log_dirs} --partitions {config.partitions} "
             f"--steps {config.steps}"]
    if config.fault_probability != default.fault_probability:
        parts.append(f"--fault-probability {config.fault_probability}")
    if config.variant != default.variant:
        parts.append(f"--variant {config.variant}")
    if config.segment_bytes != default.segment_bytes:
        parts.append(f"--segment-bytes {config.segment_bytes}")
    if config.chunk_bytes != default.chunk_bytes:
        parts.append(f"--chunk-bytes {config.chunk_bytes}")
    if not config.network_faults:
        parts.append("--no-network-faults")
    if config.model_machines != default.model_machines:
        parts.append(f"--model-machines {','.join(config.model_machines) or 'none'}")
    if not config.storage_broker:
        parts.append("--no-storage-broker")
    if not config.groups:
        parts.append("--no-groups")
    if not config.delete_records:
        parts.append("--no-delete-records")
    if not config.admin:
        parts.append("--no-admin")
    if not config.delayed_fetches:
        parts.append("--no-delayed-fetches")
    if not config.fetch_rounds:
        parts.append("--no-fetch-rounds")
    if config.isr_scan_step_partitions != default.isr_scan_step_partitions:
        parts.append(f"--isr-scan-step {config.isr_scan_step_partitions}")
    if faults is not None:
        parts.append(f"--faults '{format_faults(faults)}'")
    return " ".join(parts)


def cluster_abstractions(config: ClusterConfig) -> list[Abstraction]:
    """The move abstraction, plus those of ``config.model_machines`` (``"replication"``,
    ``"controller"``: ``conformance.<name>_abstraction``, each exposing an ``abstractions()``
    factory whose default checks against the shipped model) when their modules are there."""
    # (the storage broker's compacted partition: the log cleaner's abstraction too)
    found: list[Abstraction] = list(move_abstractions(config.storage_config))
    for name in config.model_machines:
        try:
            module = importlib.import_module(f"conformance.{name}_abstraction")
        except ImportError:
            continue
        factory = getattr(module, "abstractions", None)
        if callable(factory):
            # Every variant is checked against the shipped model: the spec.
            found.extend(factory())
    if config.groups:
        from conformance import group_abstraction  # noqa: PLC0415 (optional layer)

        found.extend(group_abstraction.abstractions(OFFSETS_PARTITIONS))
    return found


# --- clients ---------------------------------------------------------------------------------


@dataclass
class _InFlight:
    batch: bytes
    epoch: int
    sequence: int
    count: int
    crc: int
    attempts: set[int] = field(default_factory=set)
    sent_ms: int = 0


#: The prober's producer id, its requests after the first batch, and the error each must get.
PROBE_PRODUCER_ID: Final = 4343
_PROBES = ("duplicate", "old_epoch", "gap", "new_epoch", "bad_acks")
_PROBE_ERRORS = {"duplicate": 0, "old_epoch": 47, "gap": 45, "new_epoch": 45, "bad_acks": 21}


class SimProducer:
    """An idempotent ``acks=all`` producer: one batch in flight per partition, retried with the
    same producer epoch and sequence until acknowledged."""

    PRODUCER_ID: Final = 4242

    def __init__(self, world: ClusterWorld) -> None:
        self.world = world
        self.epoch = 0
        self.next_sequence: dict[TopicPartition, int] = {}
        self.in_flight: dict[TopicPartition, _InFlight] = {}
        self._request_ids = 0
        self._values = 0
        self.sequence_resets = 0
        #: the prober's requests in flight: request id -> (kind, partition)
        self.probes: dict[int, tuple[str, TopicPartition]] = {}
        #: per partition: the offset of the prober's acknowledged first batch
        self.probe_base: dict[TopicPartition, int] = {}

    def produce(self, tp: TopicPartition, count: int) -> None:
        """Send a new batch of ``count`` records if none is in flight."""
        if tp in self.in_flight:
            return
        values = []
        for _ in range(count):
            self._values += 1
            values.append(f"v{self._values}".encode())
        sequence = self.next_sequence.get(tp, 0)
        batch = rb.build_batch(values, timestamp_ms=self.world.clock.wall_ms(),
                               producer_id=self.PRODUCER_ID, producer_epoch=self.epoch,
                               base_sequence=sequence)
        crc = rb.parse_header(batch).crc
        self.in_flight[tp] = _InFlight(batch, self.epoch, sequence, count, crc)
        self._send(tp)

    def _send(self, tp: TopicPartition) -> None:
        flight = self.in_flight[tp]
        leader = self.world.leader_of(tp)
        flight.sent_ms = self.world.now_ms()
        if leader < 0:
            return
        self._request_ids += 1
        flight.attempts.add(self._request_ids)
        self.world.network.send(PRODUCER_NODE, leader,
                                ProduceCall(self._request_ids, tp, flight.batch))

    def tick(self) -> None:
        """Retry batches left unanswered."""
        now_ms = self.world.now_ms()
        # (a retry changes only its own batch's record)
        due: list[TopicPartition] = []
        for tp, flight in self.in_flight.items():
            if now_ms - flight.sent_ms >= PRODUCE_TIMEOUT_MS + RETRY_MS:
                due.append(tp)
        for tp in sorted(due) if len(due) > 1 else due:
            self._send(tp)

    # --- probes: requests the leader must refuse (IDEMPOTENCE_SEQUENCED) ----------------------

    def probe(self, tp: TopicPartition, choice: int) -> None:
        """A second idempotent producer (:data:`PROBE_PRODUCER_ID`): its first batch of ``tp``
        (epoch 1, sequence 0) until acknowledged, then one request that must be refused: an
        older producer epoch (INVALID_PRODUCER_EPOCH), a sequence gap or a new epoch not
        starting at 0 (OUT_OF_ORDER_SEQUENCE_NUMBER), ``acks=2`` (INVALID_REQUIRED_ACKS); or
        the first batch again, a duplicate answered with its first offset."""
        leader = self.world.leader_of(tp)
        if leader < 0:
            return
        established = self.probe_base.get(tp)
        kind = "first" if established is None else _PROBES[choice % len(_PROBES)]
        epoch, sequence, acks = {
            "first": (1, 0, -1), "duplicate": (1, 0, -1), "old_epoch": (0, 1, -1),
            "gap": (1, 2 + choice % 5, -1), "new_epoch": (2, 1 + choice % 3, -1),
            "bad_acks": (1, 1, 2),
        }[kind]
        batch = rb.build_batch([b"probe"], timestamp_ms=self.world.clock.wall_ms(),
                               producer_id=PROBE_PRODUCER_ID, producer_epoch=epoch,
                               base_sequence=sequence)
        self._request_ids += 1
        self.probes[self._request_ids] = (kind, tp)
        self.world.network.send(PRODUCER_NODE, leader,
                                ProduceCall(self._request_ids, tp, batch, acks))

    def _probe_reply(self, kind: str, reply: ProduceReply) -> None:
        if kind == "first":
            if reply.error == 0:
                self.probe_base.setdefault(reply.tp, reply.base_offset)
            return
        if self.world.config.unclean_leader_election:
            return  # (the first batch may be lost, and the producer's state with it)
        expected = _PROBE_ERRORS[kind]
        if kind == "duplicate":
            if reply.error == 0 and reply.base_offset != self.probe_base[reply.tp]:
                self.world.violation("IDEMPOTENCE_SEQUENCED", (
                    f"{reply.tp}: the prober's first batch again was appended at "
                    f"{reply.base_offset}, not answered as the duplicate at "
                    f"{self.probe_base[reply.tp]}"))
        elif reply.error == 0:
            self.world.violation("IDEMPOTENCE_SEQUENCED", (
                f"{reply.tp}: the prober's {kind} batch was appended at {reply.base_offset}; "
                f"expected error {expected}"))
        elif reply.error in (45, 47, 21) and reply.error != expected:
            self.world.violation("IDEMPOTENCE_SEQUENCED", (
                f"{reply.tp}: the prober's {kind} batch was refused with {reply.error}; "
                f"expected {expected}"))

    def on_reply(self, reply: ProduceReply) -> None:
        """Acknowledged, or to be retried (soon)."""
        probe = self.probes.pop(reply.request_id, None)
        if probe is not None:
            self._probe_reply(probe[0], reply)
            return
        flight = self.in_flight.get(reply.tp)
        if flight is None or reply.request_id not in flight.attempts:
            return
        if reply.error == 0:
            del self.in_flight[reply.tp]
            self.next_sequence[reply.tp] = flight.sequence + flight.count
            self.world.acknowledged(reply.tp, (
                reply.base_offset, reply.base_offset + flight.count, flight.crc,
                self.PRODUCER_ID, flight.epoch, flight.sequence))
            return
        if reply.error == 45 and flight.sequence > 0 and (
                not self.world.config.unclean_leader_election):
            # IDEMPOTENCE_CONTINUOUS: the batch before this one was acknowledged, and with
            # clean elections an acknowledged batch is in every later leader's log: the leader
            # must take the next sequence (Kafka rebuilds its producer state from the log on
            # every change of role; a cache kept across leader -> follower -> leader refuses).
            self.world.violation("IDEMPOTENCE_CONTINUOUS", (
                f"{reply.tp}: OUT_OF_ORDER_SEQUENCE_NUMBER for sequence {flight.sequence} "
                f"(epoch {flight.epoch}) right after the acknowledged sequence "
                f"{flight.sequence - 1}"))
        if reply.error in (45, 47):
            # OUT_OF_ORDER_SEQUENCE_NUMBER / INVALID_PRODUCER_EPOCH: a new epoch, sequences
            # restart (the batch is re-sent as a new one).
            self.sequence_resets += 1
            self.epoch += 1
            self.next_sequence = {}
            del self.in_flight[reply.tp]
            return
        flight.sent_ms = self.world.now_ms() - PRODUCE_TIMEOUT_MS  # retry after RETRY_MS


class SimConsumer:
    """Reads each partition from its leader below the HW and checks what it reads."""

    def __init__(self, world: ClusterWorld) -> None:
        self.world = world
        self.position: dict[TopicPartition, int] = {}
        self.consumed: dict[TopicPartition, list[BatchKey]] = {}
        self.seen: dict[TopicPartition, set[tuple[int, int, int]]] = {}
        self.last_sequence: dict[tuple[TopicPartition, int, int], int] = {}
        self.in_flight: dict[TopicPartition, tuple[int, int]] = {}
        self._request_ids = 0
        #: per partition: base offset -> (next offset, max timestamp) of each batch read
        self.timestamps: dict[TopicPartition, dict[int, tuple[int, int]]] = {}
        #: ListOffsets in flight: request id -> the timestamp asked and the position then
        self.offsets_asked: dict[int, tuple[int, int]] = {}

    def poll(self, tp: TopicPartition) -> None:
        """Fetch from the current position (one request in flight per partition)."""
        now_ms = self.world.now_ms()
        if tp in self.in_flight and now_ms - self.in_flight[tp][1] < PRODUCE_TIMEOUT_MS:
            return
        leader = self.world.leader_of(tp)
        if leader < 0:
            return
        self._request_ids += 1
        self.in_flight[tp] = (self._request_ids, now_ms)
        self.world.network.send(CONSUMER_NODE, leader, FetchCall(
            self._request_ids, -1, 0, tp, self.position.get(tp, 0), -1, FETCH_MAX_BYTES,
            CONSUMER_NODE))

    def on_reply(self, reply: FetchReply) -> None:
        """Check the batches: contiguous, each producer batch once, sequences in order."""
        flight = self.in_flight.get(reply.tp)
        if flight is None or flight[0] != reply.request_id:
            return
        del self.in_flight[reply.tp]
        if reply.error != 0 or not reply.records:
            return
        self.accept(reply.tp, batch_keys(reply.records))
        times = self.timestamps.setdefault(reply.tp, {})
        for header in rb.iter_batches(reply.records):
            times[header.base_offset] = (header.next_offset, header.max_timestamp)

    def list_offsets(self, tp: TopicPartition, choice: int) -> None:
        """ListOffsets from the leader: latest, earliest, the time of a batch already read, or,
        once batches were read, max timestamp (KIP-734) in a quarter of the asks by time
        (``choice`` picks which)."""
        leader = self.world.leader_of(tp)
        if leader < 0:
            return
        timestamp = (-1, -2)[choice % 2]
        times = self.timestamps.get(tp)
        if choice % 3 == 2 and times:
            bases = sorted(times)
            timestamp = (MAX_TIMESTAMP if (choice // 3) % 4 == 3
                         else times[bases[(choice // 3) % len(bases)]][1])
        self._request_ids += 1
        self.offsets_asked[self._request_ids] = timestamp, self.position.get(tp, 0)
        self.world.network.send(CONSUMER_NODE, leader, ListOffsetsCall(
            self._request_ids, -1, tp, timestamp, -1, CONSUMER_NODE))

    def on_list_offsets(self, reply: ListOffsetsReply) -> None:
        """READ_CONSISTENT for a search by time: the answer is the first record at or after
        the time among the batches read, and its timestamp reaches it (timestamps grow with
        offsets: one batch in flight per partition, stamped when built). For max timestamp:
        the answer's timestamp reaches every batch read (still above the log start), and no
        batch read before it reaches that timestamp (it is the first record with the largest;
        none is an answer too: Kafka's answer for a consumer when that record is not below
        the HW). For latest: the end offset is never below what the consumer had read when it
        asked (everything read was committed, and a leader answers latest only once its HW
        reached its epoch's start)."""
        entry = self.offsets_asked.pop(reply.request_id, None)
        if entry is None or reply.error != 0:
            return
        asked, position = entry
        what = "max timestamp" if asked == MAX_TIMESTAMP else f"for time {asked}"
        if asked == -1 and reply.offset < position:
            self.world.violation("READ_CONSISTENT", (
                f"{reply.tp}: ListOffsets latest answered {reply.offset}, below offset "
                f"{position} the consumer had already read"))
        deleted = self.world.records_admin.mark(reply.tp)  # (DeleteRecords: gone below it)
        if asked == MAX_TIMESTAMP and reply.offset >= 0:
            for base, (_, max_timestamp) in self.timestamps.get(reply.tp, {}).items():
                if base >= deleted and max_timestamp > reply.timestamp:
                    self.world.violation("READ_CONSISTENT", (
                        f"{reply.tp}: ListOffsets max timestamp answered offset {reply.offset} "
                        f"stamped {reply.timestamp}, below the batch at {base} stamped "
                        f"{max_timestamp}"))
            asked = reply.timestamp
        if asked < 0 or reply.offset < 0:
            return
        if reply.timestamp < asked:
            self.world.violation("READ_CONSISTENT", (
                f"{reply.tp}: ListOffsets {what} answered offset {reply.offset} with "
                f"the earlier time {reply.timestamp}"))
        for base, (end, max_timestamp) in self.timestamps.get(reply.tp, {}).items():
            if deleted <= base < reply.offset and max_timestamp >= asked and end <= reply.offset:
                self.world.violation("READ_CONSISTENT", (
                    f"{reply.tp}: ListOffsets {what} answered offset {reply.offset}, "
                    f"past the batch at {base} stamped {max_timestamp}"))

    def accept(self, tp: TopicPartition, keys: list[BatchKey]) -> None:
        """Take batches read at the current position."""
        position = self.position.get(tp, 0)
        seen = self.seen.setdefault(tp, set())
        consumed = self.consumed.setdefault(tp, [])
        for key in keys:
            base, end, _, producer_id, epoch, sequence = key
            if base != position:
                self.world.violation("READ_CONSISTENT", (
                    f"{tp}: the consumer at offset {position} was given a batch at {base}: "
                    f"{'a gap' if base > position else 'an overlap'}"))
            identity = (producer_id, epoch, sequence)
            if identity in seen:
                self.world.violation("READ_CONSISTENT", (
                    f"{tp}: producer batch {identity} read twice (at {base})"))
            previous = self.last_sequence.get((tp, producer_id, epoch), -1)
            if sequence <= previous:
                self.world.violation("READ_CONSISTENT", (
                    f"{tp}: producer sequence {sequence} read after {previous} (epoch {epoch})"))
            seen.add(identity)
            self.last_sequence[(tp, producer_id, epoch)] = sequence
            consumed.append(key)
            position = end
        self.position[tp] = position


# --- the world -------------------------------------------------------------------------------


class ClusterWorld:
    """The simulated cluster: nodes, ZooKeeper, network, clock, and the end-to-end books."""

    def __init__(self, seed: int, config: ClusterConfig,
                 emit: Callable[[TraceEvent], None]) -> None:
        self.seed = seed
        self.config = config
        self.emit = emit
        root = SimRng(seed)
        self.root = root
        self.clock = SimClock()
        self.zk = SimulatedZooKeeperServer()
        self.network = SimNetwork(self.clock, root.stream("network"), network_mix(seed, config))
        #: delays of ZooKeeper notifications to the controllers
        self.watch_rng = root.stream("watches")
        #: parameters of the workload's later operations (ListOffsets, ...)
        self.extra_rng = root.stream("workload-extra")
        self._crash_rngs = {b: root.stream(f"broker-{b}").stream("crash")
                            for b in range(config.brokers)}
        self._append_rngs = {b: root.stream(f"broker-{b}").stream("append")
                             for b in range(config.brokers)}
        #: ids of controller-to-broker channels (connections), unique within the run
        self.channel_ids = itertools.count(1)
        self.admin = self.zk.open_session(60_000)
        for path in PERSISTENT_PATHS:
            self.zk.multi(self.admin, [CreateOp(path)])
        self.topic = TOPIC
        self.tps = tuple(TopicPartition(TOPIC, p) for p in range(config.partitions))
        #: the offsets partitions of the groups' coordinators (none without groups)
        self.offsets_tps = tuple(TopicPartition(gc.OFFSETS_TOPIC, p)
                                 for p in range(OFFSETS_PARTITIONS if config.groups else 0))
        #: every replicated partition the per-step checks cover
        self.checked_tps = self.tps + self.offsets_tps
        self.group_rng = root.stream("group-clients")
        self._request_ids = itertools.count(1)
        self._commit_values: dict[tuple[str, int], int] = {}
        #: (group, partition) -> the highest commit acknowledged to a member
        self.group_acked: dict[tuple[str, int], int] = {}
        self.brokers = [SimBroker(self, b) for b in range(config.brokers)]
        # books
        self.acked: dict[TopicPartition, list[BatchKey]] = {tp: [] for tp in self.tps}
        self.acked_set: dict[TopicPartition, set[BatchKey]] = {tp: set() for tp in self.tps}
        self.shadow: dict[tuple[int, TopicPartition], list[BatchKey]] = {}
        self.shadow_sets: dict[tuple[int, TopicPartition], set[BatchKey]] = {}
        self.leader_of_epoch: dict[tuple[TopicPartition, int], int] = {}
        self.hw_seen: dict[tuple[int, int, TopicPartition, int], int] = {}
        self.zk_epochs: dict[TopicPartition, int] = {}
        self.lost_with_dir: set[tuple[int, TopicPartition]] = set()
        self.failed_dirs = 0
        self.restart_at: dict[int, int] = {}
        #: replicas of brokers stopped cleanly: the batches they held (flushed at the stop)
        self.stopped_holding: dict[tuple[int, TopicPartition], set[BatchKey]] = {}
        #: replicas that lost their unflushed tail and have not left the ISR since
        self.tail_lost: set[tuple[int, TopicPartition]] = set()
        #: brokers whose ZooKeeper session expired: the step they register again
        self.reregister_at: dict[int, int] = {}
        #: OffsetFetch requests answered by a leader of the group's offsets partition deposed
        #: by a later epoch in ZooKeeper, its LeaderAndIsr not arrived (request ids)
        self.deposed_answers: set[int] = set()
        #: per admin topic asked to be deleted: the replicas brokers served outside the
        #: assignment read with the request (strays), (broker, tp) -> the (incarnation, leader
        #: epoch) each may be left in (as served then, or as a LeaderAndIsr then in flight
        #: to that incarnation makes it)
        self.strays_at_deletion: dict[
            str, dict[tuple[int, TopicPartition], set[tuple[int, int]]]] = {}
        self.heal_at: int | None = None
        self.moves_done = 0
        self.leader_elections = 0
        self.controller_elections = 0
        self.faults_skipped = 0
        #: ZooKeeper connection losses that landed; malformed znodes the controllers logged
        self.connection_losses = 0
        self.zookeeper_warnings = 0
        self._state_cache: dict[TopicPartition, tuple[int, tuple[int, int, tuple[int, ...]]]] = {}
        self._state_paths: dict[TopicPartition, str] = {}
        self._assignment_cache: dict[str, tuple[int, dict[int, tuple[int, ...]]]] = {}
        #: per (broker, tp): bumped whenever the shadow log is rebuilt (not on appends)
        self.generation: dict[tuple[int, TopicPartition], int] = {}
        self._committed_checked: dict[TopicPartition, tuple[int, int, int, int]] = {}
        self._matching_checked: dict[tuple[TopicPartition, int], tuple[int, ...]] = {}
        for broker in self.brokers:
            broker.start()
        assignment = {p: tuple((p + i) % config.brokers for i in range(config.replication_factor))
                      for p in range(config.partitions)}
        self.zk.multi(self.admin, [CreateOp(topic_path(TOPIC),
                                            encode_topic(TopicAssignment(assignment)))])
        if config.groups:
            offsets = {p: tuple((p + 1 + i) % config.brokers
                                for i in range(config.replication_factor))
                       for p in range(OFFSETS_PARTITIONS)}
            self.zk.multi(self.admin, [CreateOp(topic_path(gc.OFFSETS_TOPIC),
                                                encode_topic(TopicAssignment(offsets)))])
        self.producer = SimProducer(self)
        self.consumer = SimConsumer(self)
        #: DeleteRecords (its own stream): the books forget the batches below its offsets
        self.records_admin = RecordsAdmin(self, root.stream("records-admin"))
        self.groups = GroupClients(self, root.stream("groups")) if config.groups else None
        self.admin_ops = AdminWorkload(
            self.zk, self.admin, root.stream("admin"),
            log_dirs=[broker.log_dirs for broker in self.brokers],
            replication_factor=config.replication_factor,
            preferred=[(TOPIC, p) for p in range(config.partitions)])

    # --- plumbing --------------------------------------------------------------------------

    def now_ms(self) -> int:
        """Simulated milliseconds."""
        return self.clock.monotonic_ns() // 1_000_000

    def append_rng(self, broker: int) -> SimRng:
        """The stream deciding which of ``broker``'s appends wait for the lock."""
        return self._append_rngs[broker]

    def crash_rng(self, broker: int) -> SimRng:
        """The stream deciding what ``broker``'s crashes lose."""
        return self._crash_rngs[broker]

    def violation(self, invariant: str, message: str) -> None:
        """Stop the run with a violation."""
        raise ViolationFound(invariant, message)

    # --- the groups' books -----------------------------------------------------------------

    def next_request_id(self) -> int:
        """A group request id unique in the run (a node's answers are routed by it)."""
        return next(self._request_ids)

    def next_commit_value(self, group: str, partition: int) -> int:
        """A fresh offset to commit for ``group``'s ``partition`` (increasing, so an answer
        older than an acknowledged commit is recognised)."""
        key = (group, partition)
        value = self._commit_values[key] = self._commit_values.get(key, 0) + 1
        return value

    def commit_acknowledged(self, member: Any, generation: int, partition: int,
                            value: int) -> None:
        """A member was told its commit of ``value`` succeeded."""
        del generation
        key = (member.group, partition)
        self.group_acked[key] = max(self.group_acked.get(key, -1), value)
        assert self.groups is not None
        self.groups.commits_acknowledged += 1

    def offsets_fetch_served(self, broker: SimBroker, request: gc.OffsetFetch) -> None:
        """``broker`` answered ``request``: note it if the broker's node led the group's offsets
        partition in an epoch older than ZooKeeper's (deposed, its LeaderAndIsr not arrived:
        after a session expiry), when it still owns the partition in its own view and answers
        from its cache, as Kafka's coordinator does (``ownedPartitions`` changes only with a
        LeaderAndIsr)."""
        node = broker.node
        tp = self.offsets_tps[group_records.partition_for(request.group_id,
                                                          OFFSETS_PARTITIONS)]
        state = node.states.get(tp) if node is not None else None
        if state is None or state.role is not ReplicaRole.LEADER:
            return
        recorded = self._state(tp)
        if recorded is not None and state.leader_epoch < recorded[1]:
            self.deposed_answers.add(request.request_id)

    def offsets_fetched(self, member: Any, request_id: int, partition: int, floor: int,
                        value: int) -> None:
        """OFFSETS_DURABLE: an OffsetFetch answers at least the last commit acknowledged
        before it was sent, unless a leader deposed by a later epoch answered it (Kafka's
        ZooKeeper-era window: the commit was acknowledged by the later epoch's leader)."""
        assert self.groups is not None
        self.groups.fetches_checked += 1
        if value < floor and request_id not in self.deposed_answers:
            self.violation("OFFSETS_DURABLE", (
                f"{member.group}: OffsetFetch by {member.client_id} answered {value} for "
                f"{TOPIC}-{partition}, older than the acknowledged commit {floor}"))

    def assigned(self, member: Any) -> None:
        """A member received its assignment."""
        assert self.groups is not None
        self.groups.rebalances += 1

    def leader_of(self, tp: TopicPartition) -> int:
        """The leader a client would be routed to (the partition state in ZooKeeper, which
        UpdateMetadata carries to the brokers' caches)."""
        found = self._state(tp)
        return -1 if found is None else found[0]

    def _state(self, tp: TopicPartition) -> tuple[int, int, tuple[int, ...]] | None:
        path = self._state_paths.get(tp)
        if path is None:
            path = self._state_paths[tp] = partition_state_path(tp.topic, tp.partition)
        try:
            data, stat = self.zk.get(self.admin, path, False)
        except NoNodeError:
            return None
        cached = self._state_cache.get(tp)
        if cached is not None and cached[0] == stat.mzxid:
            return cached[1]
        state = decode_partition_state(tp.topic, tp.partition, data, stat.version)
        decoded = (state.leader, state.leader_epoch, state.isr)
        self._state_cache[tp] = (stat.mzxid, decoded)
        return decoded

    # --- hooks from the brokers ------------------------------------------------------------

    def resync(self, broker: SimBroker, tp: TopicPartition) -> None:
        """Re-read one replica's batches from its log (after recovery, truncation, creation)."""
        key = (broker.id, tp)
        self.generation[key] = self.generation.get(key, 0) + 1
        partition = broker.log(tp)
        if partition is None:
            self.shadow.pop(key, None)
            self.shadow_sets.pop(key, None)
            return
        keys: list[BatchKey] = []
        offset = partition.log_start_offset
        while offset < partition.log_end_offset:
            found = batch_keys(read_bytes(partition, offset, 1 << 20))
            if not found:
                break
            keys.extend(found)
            offset = found[-1][1]
        self.shadow[key] = keys
        self.shadow_sets[key] = set(keys)

    def appended(self, broker: SimBroker, tp: TopicPartition, partition: Any, base: int) -> None:
        """New batches from ``base`` on ``broker``'s replica."""
        key = (broker.id, tp)
        if key not in self.shadow:
            self.resync(broker, tp)
            return
        found = batch_keys(read_bytes(partition, base, 1 << 20))
        self.shadow[key].extend(found)
        self.shadow_sets[key].update(found)

    def truncated(self, broker: SimBroker, tp: TopicPartition, offset: int) -> None:
        """``broker``'s replica was truncated."""
        del offset
        self.resync(broker, tp)

    def replica_created(self, broker: SimBroker, tp: TopicPartition, is_new: bool) -> None:
        """DIR_FAILURE_ISOLATION: a replica lost with a failed dir is never recreated empty.

        Recreated with ``is_new`` (a reassignment that added the broker back, a topic of the
        same name created again), the broker serves a new replica on a good dir: it is no
        longer lost, so it counts among the partition's online replicas again (the cluster's
        health, FOLLOWER_PROGRESS)."""
        if (broker.id, tp) in self.lost_with_dir:
            if not is_new:
                self.violation("DIR_FAILURE_ISOLATION", (
                    f"broker {broker.id} recreated {tp}, lost with a failed dir, without "
                    f"is_new"))
            self.lost_with_dir.discard((broker.id, tp))
        self.resync(broker, tp)

    def replica_deleted(self, broker: SimBroker, tp: TopicPartition) -> None:
        """StopReplica deleted a replica."""
        self.shadow.pop((broker.id, tp), None)
        self.shadow_sets.pop((broker.id, tp), None)

    def role_changed(self, broker: SimBroker, tp: TopicPartition, previous: ReplicaState | None,
                     state: ReplicaState) -> None:
        """LEADER_UNIQUE and EPOCHS_MONOTONIC on one replica's new state."""
        if previous is not None and state.leader_epoch < previous.leader_epoch:
            self.violation("EPOCHS_MONOTONIC", (
                f"broker {broker.id}: {tp} leader epoch {previous.leader_epoch} -> "
                f"{state.leader_epoch}"))
        if state.role is ReplicaRole.LEADER:
            if previous is None or previous.role is not ReplicaRole.LEADER or (
                    previous.leader_epoch != state.leader_epoch):
                self.leader_elections += 1
            other = self.leader_of_epoch.setdefault((tp, state.leader_epoch), broker.id)
            if other != broker.id:
                self.violation("LEADER_UNIQUE", (
                    f"{tp}: brokers {other} and {broker.id} both lead in leader epoch "
                    f"{state.leader_epoch}"))

    def hw_moved(self, broker: SimBroker, tp: TopicPartition, high_watermark: int) -> None:
        """HW_MONOTONIC: a leader's HW never decreases within one leadership."""
        state = broker.states[tp]
        key = (broker.id, broker.incarnation, tp, state.leader_epoch)
        if high_watermark < self.hw_seen.get(key, 0):
            self.violation("HW_MONOTONIC", (
                f"broker {broker.id}: {tp} HW {self.hw_seen[key]} -> {high_watermark} in "
                f"leader epoch {state.leader_epoch}"))
        self.hw_seen[key] = high_watermark

    def isr_written(self, broker: SimBroker, tp: TopicPartition, before: tuple[int, ...],
                    after: tuple[int, ...]) -> None:
        """LOG_MATCHING at an ISR expansion: a new member holds the leader's log below the HW."""
        partition = broker.log(tp)
        if partition is None:
            return
        high_watermark = partition.high_watermark
        for member in after:
            if member in before or member == broker.id:
                continue
            follower = self.brokers[member]
            recorded = broker.follower_incarnations.get(tp, {}).get(member)
            if not follower.alive or recorded != follower.incarnation:
                continue
            follower_log = follower.log(tp)
            if follower_log is None:
                continue
            if follower_log.log_end_offset < high_watermark:
                self.violation("LOG_MATCHING", (
                    f"{tp}: broker {member} joined the ISR {after} with LEO "
                    f"{follower_log.log_end_offset} below the leader's HW {high_watermark}"))

    def acknowledged(self, tp: TopicPartition, key: BatchKey) -> None:
        """The producer got an acks=all acknowledgement."""
        self.acked[tp].append(key)
        self.acked_set[tp].add(key)

    def controller_elected(self, node: Any) -> None:
        """A candidate won the election."""
        del node
        self.controller_elections += 1

    # --- state queries ---------------------------------------------------------------------

    def current_leader(self, tp: TopicPartition) -> SimBroker | None:
        """The live broker leading ``tp`` in the highest leader epoch any live broker knows,
        unless ZooKeeper's partition state names a newer epoch: a leader deposed while its
        session had expired (or while its LeaderAndIsr is on the way), still unaware, is no
        one's leader (a client with ZooKeeper's metadata is fenced by the newer epoch,
        KIP-320); the partition has none until the new leader takes office."""
        best: SimBroker | None = None
        best_epoch = -1
        for broker in self.brokers:
            state = broker.states.get(tp) if broker.alive else None
            if state is not None and state.role is ReplicaRole.LEADER and (
                    state.leader_epoch > best_epoch) and broker.log(tp) is not None:
                best, best_epoch = broker, state.leader_epoch
        if best is not None:
            written = self._state(tp)
            if written is not None and written[1] > best_epoch:
                return None
        return best

    def online_replicas(self, tp: TopicPartition) -> list[int]:
        """Brokers assigned ``tp`` whose replica is not lost with a failed dir."""
        assigned = self._assignment(tp.topic).get(tp.partition, ())
        return [b for b in assigned if (b, tp) not in self.lost_with_dir]

    def _assignment(self, topic: str = TOPIC) -> dict[int, tuple[int, ...]]:
        try:
            data, stat = self.zk.get(self.admin, topic_path(topic), False)
        except NoNodeError:
            return {}
        cached = self._assignment_cache.get(topic)
        if cached is None or cached[0] != stat.mzxid:
            cached = self._assignment_cache[topic] = (
                stat.mzxid, dict(decode_topic(topic, data).partitions))
        return dict(cached[1])

    def healthy(self, tps: Sequence[TopicPartition] | None = None) -> bool:
        """Every broker up, every partition's ISR = its online replicas (at least two), each
        leader's own view agreeing (``tps``: those partitions only; default every checked
        one)."""
        if not all(broker.alive for broker in self.brokers):
            return False
        for tp in self.checked_tps if tps is None else tps:
            state = self._state(tp)
            online = self.online_replicas(tp)
            if state is None or len(online) < min(2, self.config.replication_factor):
                return False
            leader, _, isr = state
            if leader < 0 or set(isr) != set(online):
                return False
            mine = self.brokers[leader].states.get(tp)
            if mine is None or mine.role is not ReplicaRole.LEADER or set(mine.isr) != set(isr):
                return False
        return True

    # --- faults ----------------------------------------------------------------------------

    def inject(self, fault: ClusterFault, step: int) -> None:
        """Apply one planned fault (or skip it when it cannot apply now)."""
        broker = self.brokers[fault.broker % len(self.brokers)]
        kind = fault.kind
        if kind in ("crash", "clean_restart"):
            if not broker.alive or (kind == "crash" and not self._may_lose(broker)):
                self.faults_skipped += 1
                return
            self._stop(broker, step + max(1, fault.target), lose_unflushed=kind == "crash")
        elif kind == "crash_last_copy":
            partner = self._last_copy_partner(broker)
            if partner is None:
                self.faults_skipped += 1
                return
            self._stop(partner, step + fault.target // 16 % 16 + 2, lose_unflushed=False)
            self._stop(broker, step + fault.target % 16 + 2, lose_unflushed=True)
        elif kind == "dir_failure":
            if not broker.alive or self.failed_dirs or not self._may_lose(broker):
                self.faults_skipped += 1
                return
            assert broker.manager is not None
            log_dir = broker.log_dirs[fault.target % len(broker.log_dirs)]
            on_dir = [tp for tp, p in broker.manager.partitions().items()
                      if p.log_dir == log_dir]
            broker.disk.fail_dir(log_dir)
            self.failed_dirs += 1
            for tp in on_dir:
                self.lost_with_dir.add((broker.id, tp))
                partition = broker.manager.get(tp)
                try:
                    if partition is not None:
                        partition.flush()
                except (StorageError, OSError):
                    pass
                self.shadow.pop((broker.id, tp), None)
                self.shadow_sets.pop((broker.id, tp), None)
            broker.after_io()
        elif kind == "controller_expiry":
            for each in self.brokers:
                node = each.controller
                if each.alive and node is not None and node.core.active and not node.expiring:
                    if fault.target % 2:
                        node.stall_next_write(max(1, fault.target))
                    else:
                        node.expire(max(1, fault.target))
                    return
            self.faults_skipped += 1
        elif kind == "session_expiry":
            # the broker's registration vanishes (its process keeps running); it registers
            # again after ``target`` steps, with a new broker epoch
            if not broker.alive or broker.id in self.reregister_at:
                self.faults_skipped += 1
                return
            broker.expire_session()
            self.reregister_at[broker.id] = step + max(1, fault.target)
        elif kind == "connection_loss":
            self._lose_connection(broker, fault.target)
        elif kind == "malformed_znode":
            if not self.admin_ops.write_malformed(fault.target):
                self.faults_skipped += 1
        elif kind == "partition":
            others = [b.id for b in self.brokers if b.id != broker.id]
            members = [m.node for m in self.groups.members] if self.groups is not None else []
            self.network.partition([[broker.id], [*others, PRODUCER_NODE, CONSUMER_NODE,
                                                  *members]])
            self.heal_at = step + max(1, fault.target)
        else:
            self._reassign(fault.target)

    def _lose_connection(self, broker: SimBroker, target: int) -> None:
        """``connection_loss`` (:data:`CONNECTION_LOSS_SHAPES`): ``broker``'s ZooKeeper
        connection drops and comes back on the same sessions."""
        controller = broker.controller
        shape = CONNECTION_LOSS_SHAPES[target % 4]
        down_ms = 2 + target // 4 % 60
        if not broker.alive or controller is None or controller.connection_lost or (
                shape == "controller_moved" and not controller.node.active):
            self.faults_skipped += 1
            return
        flaps = bool(target // 240 % 2)
        if shape == "controller_moved":
            controller.lose_connection(down_ms, flaps=flaps)
            # (an operator forcing a controller move; the candidates' watches fire)
            self.zk.multi(self.admin, [DeleteOp(CONTROLLER_PATH)])
        else:
            controller.lose_connection(down_ms, shape, flaps=flaps)

    def _stop(self, broker: SimBroker, restart_step: int, *, lose_unflushed: bool) -> None:
        """``broker`` stops (cleanly, or losing its unflushed tail) until ``restart_step``."""
        for tp in self.checked_tps:
            held = self.shadow_sets.get((broker.id, tp))
            if lose_unflushed:
                self.tail_lost.add((broker.id, tp))
            elif held is not None:
                self.stopped_holding[(broker.id, tp)] = set(held)
        broker.crash(lose_unflushed=lose_unflushed)
        self.reregister_at.pop(broker.id, None)  # the restart registers (a new session)
        for tp in self.checked_tps:
            self.shadow.pop((broker.id, tp), None)
            self.shadow_sets.pop((broker.id, tp), None)
        self.restart_at[broker.id] = restart_step

    def _intact_member_left(self, broker_id: int, tps: Sequence[TopicPartition]) -> bool:
        """Whether each of ``tps`` whose ISR in ZooKeeper holds ``broker_id`` has another member
        that has not lost a tail since it last joined the ISR. A healthy ISR may still name
        members that crashed uncleanly: with no controller acting (the one that holds
        ``/controller`` cut from ZooKeeper) no one takes them out, and their leader's ISR
        writes fail too; the next controller then trusts none of them (KIP-966), so a lossy
        crash of the last other member would exceed the promise (fuzz seed 5093)."""
        for tp in tps:
            state = self._state(tp)
            if state is None or broker_id not in state[2]:
                continue
            if all(m == broker_id or (m, tp) in self.tail_lost for m in state[2]):
                return False
        return True

    def _holds_everything(self, member: int, tp: TopicPartition) -> bool:
        """Whether ``member``'s replica of ``tp`` holds every acknowledged batch (its log if
        it runs, what it held when it stopped cleanly if not; but those DeleteRecords may have
        deleted, as NO_COMMITTED_LOSS) and lost no tail since it last joined the ISR."""
        if (member, tp) in self.tail_lost:
            return False
        broker = self.brokers[member]
        held = (self.shadow_sets.get((member, tp)) if broker.alive
                else self.stopped_holding.get((member, tp)))
        if held is None:
            return False
        deleted = self.records_admin.mark(tp)
        return all(key in held for key in self.acked_set[tp] if key[1] > deleted)

    def _may_lose(self, broker: SimBroker) -> bool:
        """Whether a lossy fault (``crash``, ``dir_failure``) may strike ``broker`` now: the
        cluster is healthy, and every partition whose ISR in ZooKeeper holds ``broker`` has
        another member that lost no tail since it last joined the ISR and, for a partition
        with a book of acknowledged batches, holds every one of them. A member that crashed
        uncleanly stays in ZooKeeper's ISR until a controller fails it: restarted before any
        controller ran (fuzz seed 9726), it made the cluster look healthy while no other copy
        held what its crash lost."""
        if not self.healthy():
            return False
        for tp in self.checked_tps:
            state = self._state(tp)
            if state is None or broker.id not in state[2]:
                continue
            others = [m for m in state[2] if m != broker.id]
            if tp in self.acked_set:
                if not any(self._holds_everything(m, tp) for m in others):
                    return False
            elif all((m, tp) in self.tail_lost for m in others):
                return False
        return True

    def _last_copy_partner(self, broker: SimBroker) -> SimBroker | None:
        """For ``crash_last_copy``: a live fellow ISR member of ``broker`` to stop cleanly
        first, when the crash keeps the promise (module docstring) with it stopped; else None."""
        if not broker.alive:
            return None
        # The offsets partitions keep no book of acknowledged batches: they must be healthy
        # (ISR = online replicas, all up) with another intact member: a third in-sync copy
        # then survives both stops, or the partner stopped cleanly holds everything.
        if self.offsets_tps and not (self.healthy(self.offsets_tps) and self._intact_member_left(
                broker.id, self.offsets_tps)):
            return None
        partner: SimBroker | None = None
        for tp in self.tps:
            state = self._state(tp)
            if state is None or broker.id not in state[2]:
                continue
            others = [m for m in state[2] if m != broker.id]
            if partner is None:
                partner = next((self.brokers[m] for m in others if self.brokers[m].alive
                                and self._holds_everything(m, tp)), None)
            if not any(self._holds_everything(m, tp) for m in others):
                return None
        return partner

    def _reassign(self, choice: int) -> None:
        assignment = self._assignment()
        if not assignment:
            self.faults_skipped += 1
            return
        partition = choice % len(assignment)
        replicas = assignment[partition]
        brokers = self.config.brokers
        if choice & 8 and len(replicas) < self.config.replication_factor:
            # back to the replication factor: a new replica, created empty (isNew)
            missing = [b for b in range(brokers) if b not in replicas]
            target = (*replicas, missing[(choice >> 4) % len(missing)])
        elif choice & 8 and len(replicas) > 2 and len(replicas) >= brokers:
            # one replica fewer: the controller stops and deletes it (StopReplica)
            drop = replicas[(choice >> 4) % len(replicas)]
            target = tuple(r for r in replicas if r != drop)
        elif brokers > len(replicas):
            pool = list(range(self.config.brokers))
            start = (choice >> 4) % len(pool)
            target = tuple(pool[(start + i) % len(pool)] for i in range(len(replicas)))
        else:
            shift = 1 + (choice >> 4) % max(1, len(replicas) - 1)
            target = replicas[shift:] + replicas[:shift]
        if target == replicas:
            self.faults_skipped += 1
            return
        data = encode_reassignment([ReassignmentTarget(TOPIC, partition, target)])
        results = self.zk.multi(self.admin, [CreateOp(REASSIGN_PARTITIONS_PATH, data)])
        if isinstance(results[0], Exception):
            results = self.zk.multi(self.admin, [SetOp(REASSIGN_PARTITIONS_PATH, data)])

    def restarts_due(self, step: int) -> None:
        """Restart the brokers whose downtime ended; heal a partition that ended."""
        for broker_id in sorted(self.restart_at):
            if self.restart_at[broker_id] <= step:
                del self.restart_at[broker_id]
                broker = self.brokers[broker_id]
                broker.start()
                for tp in self.checked_tps:
                    self.stopped_holding.pop((broker_id, tp), None)
                for tp in self.checked_tps:
                    self.resync(broker, tp)
        for broker_id in sorted(self.reregister_at):
            if self.reregister_at[broker_id] <= step:
                del self.reregister_at[broker_id]
                broker = self.brokers[broker_id]
                if broker.alive:
                    broker.register()
        if self.heal_at is not None and self.heal_at <= step:
            self.heal_at = None
            self.network.heal()

    # --- workload --------------------------------------------------------------------------

    def operate(self, rng: SimRng) -> None:
        """One workload operation, drawn without looking at the system."""
        roll = rng.randrange(100)
        tp = self.tps[rng.randrange(len(self.tps))]
        broker = self.brokers[rng.randrange(len(self.brokers))]
        if roll < 50:
            self.producer.produce(tp, rng.randint(1, 4))
        elif roll < 72:
            self.consumer.poll(tp)
        elif roll < 78:
            target = rng.randrange(self.config.log_dirs)
            if broker.alive and broker.manager is not None and broker.log(tp) is not None:
                broker.manager.alter_replica_log_dir(tp, broker.log_dirs[target])
                broker.after_io()
        elif roll < 81:
            choice = rng.randrange(len(_THROTTLE_RATES))
            for each in self.brokers:
                if each.alive and each.manager is not None:
                    each.manager.set_throttle_rate(_THROTTLE_RATES[choice])
        elif roll < 90:
            partition = broker.log(tp)
            if broker.alive and partition is not None:
                with contextlib.suppress(StorageError, OSError):
                    partition.flush()
                broker.after_io()
        elif roll < 95:
            # (parameters from a stream of their own: the draws above stay as they were)
            self.consumer.list_offsets(tp, self.extra_rng.randrange(1 << 16))
        elif roll < 98:
            self.producer.probe(tp, self.extra_rng.randrange(1 << 16))
        self.records_admin.operate()

    def admin_step(self) -> None:
        """One step of the admin workload; for a deletion it asks, the replicas that brokers
        serve outside the assignment read with the request are recorded as the topic's strays
        (:meth:`_final_deletion_check`), each with the leader epoch it is served in and those
        of the LeaderAndIsr requests for it then in flight to its broker (a late one may still
        arrive and be accepted, as in ZooKeeper-era Kafka; fuzz seed 11608)."""
        asked = len(self.admin_ops.deleting)
        self.admin_ops.step()
        for topic in self.admin_ops.deleting[asked:]:
            assigned = self.admin_ops.assigned_at_deletion.get(topic, {})
            strays: dict[tuple[int, TopicPartition], set[tuple[int, int]]] = {}
            for broker in self.brokers:
                for tp, state in sorted(broker.states.items()):
                    if (tp.topic == topic and state.role is not ReplicaRole.OFFLINE
                            and broker.id not in assigned.get(tp.partition, ())):
                        strays[(broker.id, tp)] = {(broker.incarnation, state.leader_epoch)}
            for target, request in self._controller_requests_in_flight():
                if not isinstance(request, LeaderAndIsrRequest) or not (
                        0 <= target < len(self.brokers)):
                    continue  # (the storage broker and the clients get no controller request)
                broker = self.brokers[target]
                for item in request.partition_states:
                    tp = TopicPartition(item.topic, item.partition)
                    if (broker.alive and item.topic == topic
                            and target not in assigned.get(item.partition, ())):
                        strays.setdefault((target, tp), set()).add(
                            (broker.incarnation, item.leader_epoch))
            self.strays_at_deletion[topic] = strays

    def _controller_requests_in_flight(self) -> list[tuple[int, object]]:
        """Every controller request that may still reach a broker, with that broker: the one
        in flight on each channel of a running controller candidate and every copy still in
        the network."""
        found: list[tuple[int, object]] = []
        for broker in self.brokers:
            if broker.controller is not None:
                found.extend(broker.controller.in_flight())
        found.extend((target, payload.request) for _source, target, payload
                     in self.network.in_transit()
                     if isinstance(payload, ControllerCall))
        return found

    def movers(self) -> None:
        """One step of every broker's movers (chunk copies and swaps)."""
        for broker in self.brokers:
            manager = broker.manager
            if not broker.alive or manager is None:
                continue
            for tp in manager.mover_slots():
                partition = manager.get(tp)
                action = manager.mover_action(tp, self.clock.monotonic_ns())
                if partition is None or action is None:
                    continue
                try:
                    if isinstance(action, MoverCopy):
                        manager.copy_step_nowait(tp, self.config.chunk_bytes)
                    elif isinstance(action, MoverSwap):
                        lock: Any = partition.lock
                        lock.acquire_nowait()
                        if manager.move_state(tp).state is rm.MoveState.CAUGHT_UP:
                            manager.swap_locked_nowait(tp)
                            if manager.move_state(tp).state is rm.MoveState.DONE:
                                self.moves_done += 1
                        else:
                            lock.release()
                except (StorageError, OSError):
                    pass
                broker.after_io()

    # --- the event loop --------------------------------------------------------------------

    def advance(self, delta_ns: int) -> None:
        """Let ``delta_ns`` of simulated time pass, in sub-ticks of at most 400 us."""
        while delta_ns > 0:
            tick_ns = min(delta_ns, 400_000)
            self.clock.advance_ns(tick_ns)
            delta_ns -= tick_ns
            self.pump(periodic=delta_ns == 0)

    def pump(self, *, periodic: bool = True) -> None:
        """Controllers, brokers and clients do their work; due messages arrive."""
        brokers = self.brokers
        for broker in brokers:
            if broker.alive:
                controller = broker.controller
                if controller is not None:
                    controller.tick()
        for broker in brokers:
            if broker.alive:
                broker.tick(periodic=periodic)
        producer = self.producer
        if producer.in_flight:
            producer.tick()
        groups = self.groups
        if groups is not None:
            groups.tick()
        for _, _, source, target, payload, _ in self.network.deliver_due():
            if target == PRODUCER_NODE:
                if isinstance(payload, ProduceReply):
                    producer.on_reply(payload)
            elif target == CONSUMER_NODE:
                if isinstance(payload, FetchReply):
                    self.consumer.on_reply(payload)
                elif isinstance(payload, ListOffsetsReply):
                    self.consumer.on_list_offsets(payload)
            elif 0 <= target < len(brokers):
                brokers[target].deliver(source, payload)
            elif target == ADMIN_NODE:
                self.records_admin.on_reply(payload)
            elif target >= GROUP_NODE_BASE and groups is not None:
                member = groups.by_node.get(target)
                if member is not None and isinstance(payload, gc.Respond):
                    member.on_reply(payload)

    # --- checks ----------------------------------------------------------------------------

    def check(self) -> None:
        """The per-step end-to-end checks."""
        if self.groups is not None:
            self.groups.check()
            self._check_coordinators()
        for tp in self.checked_tps:
            state = self._state(tp)
            if state is not None:
                for member, lost in [k for k in self.tail_lost if k[1] == tp]:
                    if member not in state[2]:
                        self.tail_lost.discard((member, lost))
                epoch = state[1]
                if epoch < self.zk_epochs.get(tp, -1):
                    self.violation("EPOCHS_MONOTONIC", (
                        f"{tp}: the partition state's leader epoch went "
                        f"{self.zk_epochs[tp]} -> {epoch}"))
                self.zk_epochs[tp] = epoch
            leader = self.current_leader(tp)
            if leader is None:
                continue
            self._check_matching(tp, leader)
            if not self.config.unclean_leader_election and tp in self.acked and (
                    state is None or leader.states[tp].leader_epoch >= state[1]):
                # (a leader of an older epoch than ZooKeeper's, whose successor is down or not
                # told yet, may lack what its successor acknowledged with another ISR: the
                # leader of record is checked once it leads)
                self._check_committed(tp, leader)

    def _check_coordinators(self) -> None:
        """COORDINATOR_LOADED: a broker holds an offsets partition loaded (or loading) only
        while its node leads it (a zombie coordinator answers from a cache nobody updates)."""
        for broker in self.brokers:
            node = broker.node
            host = node.groups if node is not None else None
            if host is None:
                continue
            for tp in self.offsets_tps:
                state = node.states.get(tp) if node is not None else None
                if state is not None and state.role is ReplicaRole.LEADER:
                    continue
                held = host.coordinator.coordinator_state(tp.partition)
                if held is not gc.CoordinatorState.UNLOADED:
                    self.violation("COORDINATOR_LOADED", (
                        f"broker {broker.id} holds {tp} {held.name} without leading it "
                        f"({'no replica' if state is None else state.role.value})"))

    def _check_matching(self, tp: TopicPartition, leader: SimBroker) -> None:
        """LOG_MATCHING: each ISR member's log equals the leader's below the HW."""
        partition = leader.log(tp)
        mine = self.shadow.get((leader.id, tp))
        if partition is None or mine is None:
            return
        high_watermark = partition.high_watermark
        incarnations = leader.follower_incarnations.get(tp, {})
        leader_generation = self.generation.get((leader.id, tp), 0)
        for member in leader.states[tp].isr:
            if member == leader.id:
                continue
            follower = self.brokers[member]
            theirs = self.shadow.get((member, tp))
            follower_log = follower.log(tp) if follower.alive else None
            if theirs is None or follower_log is None:
                continue
            recorded = incarnations.get(member)
            follower_leo = follower_log.log_end_offset
            theirs_state = follower.states.get(tp)
            if theirs_state is not None and (
                    theirs_state.leader_epoch > leader.states[tp].leader_epoch):
                # The member already follows a later epoch (a reassignment deleted its replica
                # and created it again, an election): a stale leader's ISR does not bind it.
                continue
            if recorded == follower.incarnation and follower_leo < high_watermark:
                self.violation("LOG_MATCHING", (
                    f"{tp}: ISR member {member} of leader {leader.id} (epoch "
                    f"{leader.states[tp].leader_epoch}) holds offsets below "
                    f"{follower_leo} only, under the HW {high_watermark}"))
            bound = min(high_watermark, follower_leo)
            signature = (leader.id, leader.incarnation, follower.incarnation, bound,
                         leader_generation, self.generation.get((member, tp), 0))
            if self._matching_checked.get((tp, member)) == signature:
                continue
            self._matching_checked[(tp, member)] = signature
            deleted = self.records_admin.mark(tp)  # (DeleteRecords: what each log may lack)
            left = [k for k in mine if deleted <= k[0] and k[1] <= bound]
            right = [k for k in theirs if deleted <= k[0] and k[1] <= bound]
            if left != right:
                self.violation("LOG_MATCHING", (
                    f"{tp}: ISR member {member}'s log differs from leader {leader.id}'s below "
                    f"offset {bound}"))

    def _check_committed(self, tp: TopicPartition, leader: SimBroker) -> None:
        """NO_COMMITTED_LOSS: the leader holds every acknowledged batch where it was acked."""
        held = self.shadow_sets.get((leader.id, tp))
        if held is None:
            return
        acked = self.acked[tp]
        mark = (leader.id, leader.incarnation, self.generation.get((leader.id, tp), 0))
        last = self._committed_checked.get(tp)
        start = last[3] if last is not None and last[:3] == mark else 0
        self._committed_checked[tp] = (*mark, len(acked))
        deleted = self.records_admin.mark(tp)
        for key in acked[start:]:
            if key not in held and key[1] > deleted:
                self.violation("NO_COMMITTED_LOSS", (
                    f"{tp}: leader {leader.id} (epoch {leader.states[tp].leader_epoch}) lacks "
                    f"acknowledged batch [{key[0]},{key[1]}) (producer epoch {key[4]}, "
                    f"sequence {key[5]})"))

    def settle(self, steps_max: int, step: int) -> int:
        """Heal everything and run until the cluster is healthy and the clients are done."""
        self.network.heal()
        self.heal_at = None
        for broker in self.brokers:
            if broker.manager is not None:
                broker.manager.set_throttle_rate(UNLIMITED_RATE)
        settled = 0
        for settled in range(steps_max):
            # Crashed brokers come back when their downtime ends, as during the workload: a
            # restart at once could beat the cluster to noticing the crash.
            self.restarts_due(step + settled)
            for broker in self.brokers:
                if broker.manager is not None:
                    broker.manager.set_throttle_rate(UNLIMITED_RATE)
            self.clock.advance_ns(1_000_000)
            self.pump()
            self.movers()
            for tp in self.tps:
                self.consumer.poll(tp)
            self.check()
            if not self.producer.in_flight and self.healthy() and self._caught_up() and (
                    self._groups_settled()) and self._deletions_settled():
                break
        return settled

    def _deletions_settled(self) -> bool:
        """Every admin topic asked to be deleted is gone from ZooKeeper (but those
        :meth:`_deletion_may_stall`)."""
        return all(self.zk.exists(self.admin, topic_path(topic), False) is None
                   for topic in self.admin_ops.deleting if not self._deletion_may_stall(topic))

    def _deletion_may_stall(self, topic: str) -> bool:
        """A broker assigned a replica of ``topic`` has a failed dir: unless it still hosts
        the replica on a good dir, it cannot tell whether the replica is on the failed one and
        answers StopReplica (delete) KAFKA_STORAGE_ERROR (Kafka's ``LogManager.asyncDelete``
        with offline dirs), so the deletion waits (``ReplicaDeletionIneligible``) for a good
        answer that the failure, permanent here, never allows."""
        brokers = {b for replicas in self._assignment(topic).values() for b in replicas}
        managers = [self.brokers[b].manager for b in sorted(brokers)]
        return any(manager is not None and manager.offline_dirs for manager in managers)

    def _groups_settled(self) -> bool:
        """Every offsets partition's leader has loaded it."""
        for tp in self.offsets_tps:
            leader = self.current_leader(tp)
            host = leader.node.groups if leader is not None and leader.node is not None else None
            if host is None or host.coordinator.coordinator_state(tp.partition) is not (
                    gc.CoordinatorState.LOADED):
                return False
        return True

    def _caught_up(self) -> bool:
        for tp in self.tps:
            leader = self.current_leader(tp)
            partition = leader.log(tp) if leader is not None else None
            if leader is None or partition is None:
                return False
            if self.consumer.position.get(tp, 0) < partition.high_watermark:
                return False
            for member in leader.states[tp].isr:
                log = self.brokers[member].log(tp)
                if log is None or log.log_end_offset != partition.log_end_offset:
                    return False
        for tp in self.offsets_tps:
            leader = self.current_leader(tp)
            partition = leader.log(tp) if leader is not None else None
            if leader is None or partition is None:
                return False
            for member in leader.states[tp].isr:
                log = self.brokers[member].log(tp)
                if log is None or log.log_end_offset != partition.log_end_offset:
                    return False
        return True

    def final_check(self) -> None:
        """Every acknowledged batch once, in order; the consumer's reads still the prefix."""
        for tp in self.tps:
            leader = self.current_leader(tp)
            if leader is None:
                continue
            self.resync(leader, tp)
            log = self.shadow.get((leader.id, tp), [])
            if not self.config.unclean_leader_election:
                self._check_committed(tp, leader)
                deleted = self.records_admin.mark(tp)  # (DeleteRecords: gone below it)
                positions = {key: index for index, key in enumerate(log)}
                order = [positions[key] for key in self.acked[tp] if key[1] > deleted]
                if order != sorted(order):
                    self.violation("READ_CONSISTENT", (
                        f"{tp}: acknowledged batches are not in acknowledgement order in the "
                        f"log of leader {leader.id}"))
                consumed = [k for k in self.consumer.consumed.get(tp, []) if k[0] >= deleted]
                kept = [k for k in log if k[0] >= deleted]
                if kept[: len(consumed)] != consumed:
                    self.violation("NO_COMMITTED_LOSS", (
                        f"{tp}: what the consumer read ({len(consumed)} batches) is no longer "
                        f"the prefix of leader {leader.id}'s log"))
            identities = [(k[3], k[4], k[5]) for k in log]
            if len(identities) != len(set(identities)):
                self.violation("READ_CONSISTENT", f"{tp}: a producer batch is in the log twice")
        self._final_deletion_check()
        self._final_group_check()
        self._final_follower_check()
        self._final_heal_check()

    def _final_follower_check(self) -> None:
        """FOLLOWER_PROGRESS after the run: no running broker is left with a follower marked
        failed (Kafka's ``markPartitionFailed``: it waits for a newer LeaderAndIsr) while it
        follows the partition's live leader in the partition's current leader epoch, on a
        replica assigned to it and online. No newer LeaderAndIsr comes then (the controller has
        nothing to change), so the replica never fetches again: a partition that could be
        replicated is not, and its ISR waits for it forever (the stall of a fenced answer
        applied to the wrong call). A stray (a replica no longer assigned whose StopReplica was
        lost) and a follower of an older epoch are not judged: the first is Kafka's, the second
        waits for the LeaderAndIsr on its way."""
        for broker in self.brokers:
            node = broker.node
            if not broker.alive or node is None:
                continue
            for tp, followed in sorted(node.followed.items()):
                if not followed.failed or broker.id not in self.online_replicas(tp):
                    continue
                state = self._state(tp)
                if state is None:
                    continue
                leader, leader_epoch, _ = state
                if followed.leader != leader or followed.leader_epoch != leader_epoch or (
                        not 0 <= leader < len(self.brokers)) or not self.brokers[leader].alive:
                    continue
                self.violation("FOLLOWER_PROGRESS", (
                    f"{tp}: broker {broker.id} follows leader {leader} in its current epoch "
                    f"{leader_epoch} but has marked the partition failed: it will not fetch "
                    f"again (no newer LeaderAndIsr is coming)"))

    def _final_heal_check(self) -> None:
        """CLUSTER_HEALS after the run: once the faults stopped and the healing steps ran, every
        broker is up and every checked partition healthy (:meth:`healthy`: a live leader, the
        ISR its online replicas, the leader agreeing), but one that cannot heal in Kafka either
        (:meth:`_cannot_heal`). A partition left under-replicated, or without a leader, while
        nothing stands in its way is a liveness failure no safety invariant sees: a follower
        that never fetches again without being marked failed, an ISR expansion never sent, a
        reassignment that never completes."""
        down = [broker.id for broker in self.brokers if not broker.alive]
        if down:
            self.violation("CLUSTER_HEALS", (
                f"brokers {down} still down after {self.config.settle_steps_max} healing steps"))
        for tp in self.checked_tps:
            if self.healthy([tp]) or self._cannot_heal(tp):
                continue
            state = self._state(tp)
            leader = -1 if state is None else state[0]
            mine = (self.brokers[leader].states.get(tp)
                    if 0 <= leader < len(self.brokers) else None)
            self.violation("CLUSTER_HEALS", (
                f"{tp}: not healed after {self.config.settle_steps_max} healing steps: "
                f"ZooKeeper's leader and ISR {None if state is None else (state[0], state[2])}, "
                f"online replicas {self.online_replicas(tp)}, the leader's own ISR "
                f"{None if mine is None else sorted(mine.isr)}"))

    def _cannot_heal(self, tp: TopicPartition) -> bool:
        """``tp`` stays unhealthy in Kafka too: fewer than two online replicas; no leader while
        every member of its ISR was lost with a failed dir (no unclean election); or a replica
        assigned to a broker with a failed dir that does not serve it: the broker cannot tell
        whether the replica is on that dir, so without ``is_new`` it answers
        KAFKA_STORAGE_ERROR instead of creating it (KAFKA-10314) and the controller holds it
        offline (a reassignment that added the broker back while it was down: seed 335)."""
        online = self.online_replicas(tp)
        if len(online) < min(2, self.config.replication_factor):
            return True
        state = self._state(tp)
        if state is None:
            return False
        leader, _, isr = state
        if leader < 0 and not self.config.unclean_leader_election and isr and all(
                (broker, tp) in self.lost_with_dir for broker in isr):
            return True
        for broker_id in online:
            manager = self.brokers[broker_id].manager
            if manager is not None and manager.offline_dirs:
                partition = manager.get(tp)
                if partition is None or partition.offline:
                    return True
        return False

    def _final_deletion_check(self) -> None:
        """TOPIC_DELETED after the run: a topic asked to be deleted is gone from ZooKeeper
        (unless the deletion is stalled: :meth:`_deletion_may_stall`), no broker still serves a
        replica of it but a stray left as it was, and the brokers assigned a replica when the
        deletion was asked no longer hold its log (but those a reassignment pending then drops:
        the controller may complete it first, and a replica it removes from a broker that is
        down stays on that broker's disk, as in ZooKeeper-era Kafka).

        A stray is a replica a broker served outside the topic's assignment when the deletion
        was asked: a reassignment removed it and its StopReplica never reached the broker,
        which kept running (its session had expired, so the controller held it dead and sent
        nothing; or the controller that queued the request lost its term first). ZooKeeper-era
        Kafka leaves such a replica hosted: its channel manager drops a request to a broker
        that is not live and clears every queue when the controller resigns, ``onBrokerStartup``
        addresses only the replicas assigned to a broker that registers again, and the
        TopicDeletionManager sends StopReplica (delete) only to the replicas assigned when the
        deletion runs. A stray is excused only while untouched since the deletion was asked
        (same incarnation of its broker, same leader epoch) but for a LeaderAndIsr then in
        flight to its broker, whose epoch it may be left in (a late request, accepted with the
        broker's unchanged broker epoch, as by Kafka's broker): one that a controller request
        created or changed since is judged as any other replica."""
        for topic in self.admin_ops.deleting:
            if self.zk.exists(self.admin, topic_path(topic), False) is not None:
                if self._deletion_may_stall(topic):
                    # (stalled as Kafka's: a new controller's LeaderAndIsr may even have
                    # re-created replicas already deleted; they go when deletion resumes)
                    continue
                self.violation("TOPIC_DELETED", (
                    f"topic {topic} asked to be deleted is still in ZooKeeper after the cluster "
                    f"settled"))
            assigned = self.admin_ops.assigned_at_deletion.get(topic, {})
            dropped = self.admin_ops.dropped_at_deletion.get(topic, {})
            strays = self.strays_at_deletion.get(topic, {})
            for broker in self.brokers:
                # (an OFFLINE replica, on a failed dir, is not served)
                served = sorted(
                    str(tp) for tp, state in broker.states.items()
                    if tp.topic == topic and state.role is not ReplicaRole.OFFLINE
                    and (broker.incarnation, state.leader_epoch) not in strays.get(
                        (broker.id, tp), ()))
                if served:
                    self.violation("TOPIC_DELETED", (
                        f"broker {broker.id} still serves {', '.join(served)} of deleted topic "
                        f"{topic}"))
                # (a replica a reassignment removed while its broker was down stays on its
                # disk, as in ZooKeeper-era Kafka: only the replicas assigned when the deletion
                # was asked must be gone, but those a reassignment then pending drops: the
                # controller may complete it before it reads the deletion; fuzz seed 19241)
                kept = sorted(str(tp) for tp in (broker.manager.partitions()
                                                 if broker.manager is not None else {})
                              if tp.topic == topic and broker.id in assigned.get(tp.partition, ())
                              and broker.id not in dropped.get(tp.partition, ())
                              and broker.log(tp) is not None)
                if kept:
                    self.violation("TOPIC_DELETED", (
                        f"broker {broker.id} still holds the logs of {', '.join(kept)} of "
                        f"deleted topic {topic}"))

    def _final_group_check(self) -> None:
        """OFFSETS_DURABLE after the run: the loaded coordinator of each group holds at least
        every acknowledged commit."""
        if self.groups is None:
            return
        for (group, partition), acked in sorted(self.group_acked.items()):
            leader = self.current_leader(TopicPartition(
                gc.OFFSETS_TOPIC, group_records.partition_for(group, OFFSETS_PARTITIONS)))
            host = leader.node.groups if leader is not None and leader.node is not None else None
            if host is None or host.coordinator.coordinator_state(
                    group_records.partition_for(group, OFFSETS_PARTITIONS)) is not (
                    gc.CoordinatorState.LOADED):
                continue  # (the run did not settle: nothing loaded to compare)
            held = host.coordinator.groups.get(group)
            value = held.offsets.get((TOPIC, partition)) if held is not None else None
            if value is None or value.offset < acked:
                self.violation("OFFSETS_DURABLE", (
                    f"{group}: after the run the coordinator on broker "
                    f"{-1 if leader is None else leader.id} holds "
                    f"{None if value is None else value.offset} for {TOPIC}-{partition}, "
                    f"older than the acknowledged commit {acked}"))


class StorageBroker:
    """The storage broker: one more broker of the run, outside the replicated topic, whose
    real ``LogManager`` (over its own ``SimDisk`` and clock) takes the single-broker
    simulator's storage workload, one operation per step (appends, producers inside a move's
    locked window, AlterReplicaLogDirs moves, redirects and cancels, the throttle, replica
    creation while a dir is lost, flushes, checkpoints, reads) and its disk faults (crashes
    mid-operation and inside the swap, torn tails and torn middles, dirs failing whole or in
    part, one failing file, a full disk, dirs unreadable at startup and repaired), with its
    end-to-end checks (``MOVE_NO_LOSS``, ``READ_CONSISTENT``, ``MOVE_SINGLE_LIVE``,
    ``DIR_FAILURE_ISOLATION``, ``MOVE_RECOVERY_TOTAL`` and recovery against
    ``model.move_recovery``) and its events in the run's trace (``t-<p>@<brokers>``)."""

    def __init__(self, seed: int, config: ClusterConfig,
                 emit: Callable[[TraceEvent], None]) -> None:
        self.config = config.storage_config
        root = SimRng(seed).stream("storage-broker")
        self._workload = root.stream("workload")
        self.world = BrokerWorld(config.brokers, self.config, SimClock(),
                                 root.stream(f"broker-{config.brokers}"), emit)

    def inject(self, fault: ClusterFault) -> None:
        """One of its planned faults (a crash restarts it at once)."""
        planned = Fault(fault.step, fault.kind, 0, fault.target)
        move_sim._guarded(self.world, planned.apply)

    def step(self, step: int) -> None:
        """One workload operation, then the checks."""
        world = self.world
        world.clock.advance_ns(self._workload.randrange(2_000_000))
        move_sim._guarded(world, move_sim._draw_operation(self._workload, self.config))
        if self.config.compacted:
            move_sim._guarded(world, functools.partial(BrokerWorld.compaction_step,
                                                       draw=world.cleaner_draw()))
        move_sim._guarded(world, BrokerWorld.extra_operation)
        world.check_structure()
        if step % self.config.verify_interval == 0:
            world.check_records()

    def finish(self) -> None:
        """Every move finished, then everything read back."""
        move_sim._guarded(self.world, lambda w: w.settle())
        self.world.check_structure()
        self.world.check_records()


def simulate(
    seed: int,
    config: ClusterConfig,
    faults: Sequence[ClusterFault] | None = None,
    *,
    abstractions: Callable[[ClusterConfig], Sequence[Abstraction]] | None = cluster_abstractions,
    keep_trace: bool = False,
) -> ClusterOutcome:
    """Run one seed of the cluster simulator.

    Args:
        seed: decides the workload, the fault schedule (unless given), the network mix and
            every delay.
        config: the cluster's shape.
        faults: a schedule replacing the seed's (replay, shrinking).
        abstractions: builds the trace checker's abstractions (``None``: count events only).
        keep_trace: keep the events (a digest is always computed).

    Returns:
        The outcome; ``violation`` is ``None`` when every check passed.
    """
    schedule = tuple(sorted(faults)) if faults is not None else plan_faults(seed, config)
    command = replay_command(seed, config, faults)
    checker = TraceChecker(
        abstractions(config) if abstractions is not None and config.trace_check else (), command)
    digest = hashlib.sha256()
    kept: list[TraceEvent] = []
    counter = [0]

    # The digest covers every event's JSON line and a newline; lines are hashed in batches
    # (the same bytes in the same order: the same digest).
    lines: list[str] = []

    def digest_lines() -> None:
        lines.append("")
        digest.update("\n".join(lines).encode())
        lines.clear()

    def emit(event: TraceEvent) -> None:
        counter[0] += 1
        lines.append(event.to_json())
        if len(lines) >= 256:
            digest_lines()
        if keep_trace:
            kept.append(event)
        checker.feed(event)

    by_step: dict[int, list[ClusterFault]] = {}
    for fault in schedule:
        by_step.setdefault(fault.step, []).append(fault)
    violation: ClusterViolation | None = None
    step = 0
    world: ClusterWorld | None = None
    workload = SimRng(seed).stream("workload")
    storage: StorageBroker | None = None
    try:
        world = ClusterWorld(seed, config, emit)
        if config.storage_broker:
            storage = StorageBroker(seed, config, emit)
        for _ in range(20):  # the first election and topic creation settle before the workload
            world.clock.advance_ns(1_000_000)
            world.pump()
        for step in range(config.steps):
            world.advance(500_000 + workload.randrange(2_000_000))
            world.restarts_due(step)
            for fault in by_step.get(step, ()):
                if storage is not None and fault.broker == config.brokers:
                    storage.inject(fault)
                elif fault.kind in FAULT_KINDS:
                    world.inject(fault, step)
            world.operate(workload)
            if config.admin:
                world.admin_step()
            if world.groups is not None:
                world.groups.operate()
            world.movers()
            world.pump()
            world.check()
            if storage is not None:
                storage.step(step)
            if checker.violation is not None:
                break
        else:
            step = config.steps
            world.settle(config.settle_steps_max, step)
            world.final_check()
            if storage is not None:
                storage.finish()
    except ViolationFound as found:
        violation = ClusterViolation(found.invariant, "end_to_end", found.message, step)
    except (AssertionError, rm.InvalidMoveTransition, StorageError, KeyError, ValueError,
            RuntimeError) as error:
        violation = ClusterViolation("IMPLEMENTATION_ERROR", "exception",
                                     f"{type(error).__name__}: {error}", step)
    if violation is None and checker.violation is not None:
        found_trace = checker.violation
        violation = ClusterViolation(found_trace.invariant or found_trace.kind.upper(), "trace",
                                     found_trace.describe(), step)
    digest_lines()
    return ClusterOutcome(
        seed=seed,
        config=config,
        faults=schedule,
        violation=violation,
        steps=step,
        events=counter[0],
        trace=tuple(kept),
        trace_digest=digest.hexdigest(),
        trace_verdict=checker.verdict(),
        restarts=(0 if world is None else sum(b.restarts for b in world.brokers))
        + (0 if storage is None else storage.world.restarts),
        acknowledged_batches=0 if world is None else sum(len(v) for v in world.acked.values()),
        consumed_batches=0 if world is None else sum(
            len(v) for v in world.consumer.consumed.values()),
        moves_done=(0 if world is None else world.moves_done)
        + (0 if storage is None else storage.world.moves_done),
        leader_elections=0 if world is None else world.leader_elections,
        controller_elections=0 if world is None else world.controller_elections,
        faults_skipped=0 if world is None else world.faults_skipped,
        group_commits=0 if world is None or world.groups is None
        else world.groups.commits_acknowledged,
        group_fetches=0 if world is None or world.groups is None
        else world.groups.fetches_checked,
        group_assignments=0 if world is None or world.groups is None
        else world.groups.rebalances,
        admin_operations=0 if world is None else sum(world.admin_ops.done.values()),
        connection_losses=0 if world is None else world.connection_losses,
        zookeeper_warnings=0 if world is None else world.zookeeper_warnings,
        delayed_fetches=0 if world is None else sum(b.delayed_fetches for b in world.brokers),
    )
