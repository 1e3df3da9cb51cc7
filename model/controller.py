"""The controller machine: election through ZooKeeper, controller epochs, fenced writes.

spec/controller.md. Two controller candidates and three brokers hosting one partition, after the
replication design V3 (seed ``004`` §A, §D) and Apache Kafka's ZooKeeper mode
(``registerControllerAndIncrementControllerEpoch``, ``wrapRequestWithControllerEpochCheck``,
KAFKA-6082). ZooKeeper holds ``/controller`` (ephemeral: it vanishes with its owner's session),
``/controller_epoch`` with its znode version, and the partition state znode (leader, leader epoch,
the controller epoch of the writer) with its zkVersion. A candidate's memory (whether it believes
it is the controller, the epoch and versions it cached) can lag ZooKeeper arbitrarily: its session
may expire while it goes on acting, the zombie of KAFKA-6082.

Every controller write is a ``multi`` with a check of ``/controller_epoch``'s version and of the
partition's zkVersion (shipped). The known-bad variants drop the controller-epoch check (the
zombie's write lands: CONTROLLER_FENCED is refuted) or both checks (a zombie with a stale cache
also names a second leader in an existing epoch and lowers the leader epoch).
"""

from __future__ import annotations

import enum
from typing import Any

from ._dsl import Bool, Int, Model, ModelDefinition, Ops, State, Status, Term, Transition, Variant

__sans_io__ = True


class ControllerEvent(enum.Enum):
    """The transitions of the controller machine (model action = lower-case name)."""

    CONTROLLER_ELECTED = "controller_elected"  #: design V3 §D on_controller_failover; a multi
    CONTROLLER_RESIGNED = "controller_resigned"  #: the deposed controller notices and resigns
    SESSION_EXPIRED = "session_expired"  #: ZooKeeper expires a session; its ephemerals vanish
    BROKER_STARTED = "broker_started"  #: a broker (re)registers with a new session (design V3 §E)
    BROKER_FAILED = "broker_failed"  #: a broker's ephemeral node vanished (design V3 §A)
    LEADER_ELECTED = "leader_elected"  #: design V3 §A 3.3 + 4: conditional write, LeaderAndIsr
    ZK_WRITE_FENCED = "zk_write_fenced"  #: KAFKA-6082: a check failed: resign or re-read
    LOG_DIR_FAILED = "log_dir_failed"  #: KIP-112 log-dir event notification (reassignment model)
    REASSIGN_STARTED = "reassign_started"  #: design V3 §F (reassignment model)
    REASSIGN_COMPLETED = "reassign_completed"  #: design V3 §F step 3.2.6 (reassignment model)
    TOPIC_CREATED = "topic_created"  #: design V3 §B on_topic_change
    TOPIC_DELETED = "topic_deleted"  #: design V3 §B on_topic_change
    ISR_CHANGED = "isr_changed"  #: an ISR change written by a leader (design V3 §G)


class PartitionState(enum.Enum):
    """The controller's partition state machine (Kafka's PartitionStateMachine)."""

    NEW = "new"  #: design V3 §B: assigned, no leader yet
    ONLINE = "online"  #: design V3 §A: a live leader elected
    OFFLINE = "offline"  #: design V3 §A: no live replica in AR (leader -1)
    NON_EXISTENT = "non_existent"  #: deleted or never created


class ReplicaState(enum.Enum):
    """The controller's replica state machine (Kafka's ReplicaStateMachine)."""

    NEW = "new"  #: design V3 §F: a replica created by reassignment (isNew, KIP-112)
    ONLINE = "online"  #: a hosted replica the controller sends LeaderAndIsr for
    OFFLINE = "offline"  #: broker down or replica on an offline log dir (KIP-112)
    DELETION_STARTED = "deletion_started"  #: StopReplica with delete sent (design V3 §C)
    DELETION_SUCCESSFUL = "deletion_successful"  #: the broker deleted it
    DELETION_INELIGIBLE = "deletion_ineligible"  #: deletion failed (offline dir, KIP-112)
    NON_EXISTENT = "non_existent"  #: not assigned


#: Controller candidates (brokers that may win ``/controller``).
CANDIDATES = range(2)
#: Brokers hosting the partition.
BROKERS = range(3)
#: Bounds: controller epochs (elections), leader epochs and partition zkVersions.
MAX_CONTROLLER_EPOCH = 3
MAX_LEADER_EPOCH = 3
MAX_PARTITION_VERSION = 3
#: Integers are encoded in 6-bit bit-vectors (-32..31): every integer of the model lies in
#: -1..4 (a bound plus one), within the ±16 the encoding requires.
INT_BITS = 6
#: The default bounded-model-checking depth.
DEPTH = 6

NONE = -1


def build(variant: Variant) -> Model:
    """The controller model of one variant.

    Flags:
        check_controller_epoch: every write is a ``multi`` checking ``/controller_epoch``'s
            version (``True``; KAFKA-6082's fix).
        check_partition_version: partition state writes are conditional on the zkVersion
            (``True``).
    """
    check_epoch: bool = variant.flags.get("check_controller_epoch", True)
    check_version: bool = variant.flags.get("check_partition_version", True)

    m = Model("controller", "two controller candidates, ZooKeeper sessions, fenced writes "
                            "(design V3 §A/§D, KAFKA-6082)", int_bits=INT_BITS)
    m.var("session", Bool(), over=[CANDIDATES], doc="the candidate's ZooKeeper session is live")
    m.var("zk_controller", Int(NONE, len(CANDIDATES) - 1), doc="owner of /controller (ephemeral)")
    m.var("zk_controller_epoch", Int(0, MAX_CONTROLLER_EPOCH), doc="/controller_epoch")
    m.var("zk_epoch_version", Int(0, MAX_CONTROLLER_EPOCH), doc="/controller_epoch's version")
    m.var("active", Bool(), over=[CANDIDATES], doc="the candidate believes it is the controller")
    m.var("ctl_epoch", Int(0, MAX_CONTROLLER_EPOCH), over=[CANDIDATES],
          doc="the controller epoch the candidate holds")
    m.var("ctl_epoch_version", Int(0, MAX_CONTROLLER_EPOCH), over=[CANDIDATES],
          doc="epochZkVersion: /controller_epoch's version the candidate cached")
    m.var("ctl_leader_epoch", Int(0, MAX_LEADER_EPOCH), over=[CANDIDATES],
          doc="the partition's leader epoch the candidate cached")
    m.var("ctl_partition_version", Int(0, MAX_PARTITION_VERSION), over=[CANDIDATES],
          doc="the partition state zkVersion the candidate cached")
    m.var("zk_leader", Int(NONE, len(BROKERS) - 1), doc="leader in the partition state")
    m.var("zk_leader_epoch", Int(0, MAX_LEADER_EPOCH), doc="leader epoch in the partition state")
    m.var("zk_partition_version", Int(0, MAX_PARTITION_VERSION),
          doc="zkVersion of the partition state znode (the partition epoch)")
    m.var("zk_state_controller_epoch", Int(0, MAX_CONTROLLER_EPOCH),
          doc="controller_epoch field of the partition state: the writer's epoch")
    m.var("broker_leader", Bool(), over=[BROKERS], doc="the broker believes it leads")
    m.var("broker_leader_epoch", Int(0, MAX_LEADER_EPOCH), over=[BROKERS],
          doc="the leader epoch the broker last accepted")
    m.var("broker_controller_epoch", Int(0, MAX_CONTROLLER_EPOCH), over=[BROKERS],
          doc="the highest controller epoch the broker has seen (STALE_CONTROLLER_EPOCH check)")
    m.var("stale_write", Bool(), doc="ghost: a controller not holding ZooKeeper's epoch wrote")
    m.var("max_leader_epoch", Int(0, MAX_LEADER_EPOCH),
          doc="ghost: the highest leader epoch ever written")

    @m.init()
    def init(o: Ops) -> dict[str, Any]:
        return {
            "session": True,
            "zk_controller": NONE,
            "zk_controller_epoch": 0,
            "zk_epoch_version": 0,
            "active": False,
            "ctl_epoch": 0,
            "ctl_epoch_version": 0,
            "ctl_leader_epoch": 0,
            "ctl_partition_version": 0,
            "zk_leader": 0,
            "zk_leader_epoch": 0,
            "zk_partition_version": 0,
            "zk_state_controller_epoch": 0,
            "broker_leader": {b: b == 0 for b in BROKERS},
            "broker_leader_epoch": 0,
            "broker_controller_epoch": 0,
            "stale_write": False,
            "max_leader_epoch": 0,
        }

    @m.action(
        modifies=["zk_controller", "zk_controller_epoch", "zk_epoch_version", "active",
                  "ctl_epoch", "ctl_epoch_version", "ctl_leader_epoch", "ctl_partition_version"],
        params={"c": CANDIDATES},
    )
    def controller_elected(o: Ops, s: State, c: int) -> Transition:
        """``c`` wins: one ``multi`` creates the ephemeral ``/controller`` and sets
        ``/controller_epoch`` to epoch+1 with a version check; it then reads the partition state
        (design V3 §D steps 1-3)."""
        new_epoch = s.zk_controller_epoch + 1
        new_version = s.zk_epoch_version + 1
        return Transition(
            o.And(s.session[c], s.zk_controller == NONE, o.Not(s.active[c]),
                  s.zk_controller_epoch < MAX_CONTROLLER_EPOCH,
                  s.zk_epoch_version < MAX_CONTROLLER_EPOCH),
            {
                "zk_controller": c,
                "zk_controller_epoch": new_epoch,
                "zk_epoch_version": new_version,
                "active": {c: True},
                "ctl_epoch": {c: new_epoch},
                "ctl_epoch_version": {c: new_version},
                "ctl_leader_epoch": {c: s.zk_leader_epoch},
                "ctl_partition_version": {c: s.zk_partition_version},
            },
        )

    @m.action(modifies=["session", "zk_controller"], params={"c": CANDIDATES})
    def session_expired(o: Ops, s: State, c: int) -> Transition:
        """ZooKeeper expires ``c``'s session and deletes its ephemeral ``/controller``; ``c``
        itself learns of it only later (a GC pause, a partition)."""
        return Transition(s.session[c], {
            "session": {c: False},
            "zk_controller": o.If(s.zk_controller == c, NONE, s.zk_controller),
        })

    @m.action(modifies=["session"], params={"c": CANDIDATES})
    def broker_started(o: Ops, s: State, c: int) -> Transition:
        """``c`` opens a new session (after resigning, if it was the controller)."""
        return Transition(o.And(o.Not(s.session[c]), o.Not(s.active[c])), {"session": {c: True}})

    @m.action(modifies=["active"], params={"c": CANDIDATES})
    def controller_resigned(o: Ops, s: State, c: int) -> Transition:
        """``c`` learns that ``/controller`` is no longer its own and resigns."""
        return Transition(o.And(s.active[c], s.zk_controller != c), {"active": {c: False}})

    @m.action(
        modifies=["zk_leader", "zk_leader_epoch", "zk_partition_version",
                  "zk_state_controller_epoch", "ctl_leader_epoch", "ctl_partition_version",
                  "broker_leader", "broker_leader_epoch", "broker_controller_epoch",
                  "stale_write", "max_leader_epoch"],
        params={"c": CANDIDATES, "b": BROKERS},
    )
    def leader_elected(o: Ops, s: State, c: int, b: int) -> Transition:
        """Controller ``c`` names broker ``b`` leader in its cached epoch + 1 (design V3 §A 3.3)
        and sends it a LeaderAndIsr (§A 4).

        The write is a ``multi``: check ``/controller_epoch``'s version (shipped) and set the
        partition state with the cached zkVersion. The broker accepts the request if its
        controller epoch is not older than one it has seen and the leader epoch is newer than
        its own (Kafka's STALE_CONTROLLER_EPOCH and leader-epoch checks).
        """
        guard = o.And(
            s.active[c],
            s.ctl_leader_epoch[c] < MAX_LEADER_EPOCH,
            s.zk_partition_version < MAX_PARTITION_VERSION,
        )
        if check_epoch:
            guard = o.And(guard, s.ctl_epoch_version[c] == s.zk_epoch_version)
        if check_version:
            guard = o.And(guard, s.ctl_partition_version[c] == s.zk_partition_version)
        new_leader_epoch = s.ctl_leader_epoch[c] + 1
        new_version = s.zk_partition_version + 1
        accepted = o.And(s.ctl_epoch[c] >= s.broker_controller_epoch[b],
                         new_leader_epoch > s.broker_leader_epoch[b])
        return Transition(guard, {
            "zk_leader": b,
            "zk_leader_epoch": new_leader_epoch,
            "zk_partition_version": new_version,
            "zk_state_controller_epoch": s.ctl_epoch[c],
            "ctl_leader_epoch": {c: new_leader_epoch},
            "ctl_partition_version": {c: new_version},
            "broker_leader": {b: o.Or(accepted, s.broker_leader[b])},
            "broker_leader_epoch": {b: o.If(accepted, new_leader_epoch,
                                            s.broker_leader_epoch[b])},
            "broker_controller_epoch": {b: o.If(accepted, s.ctl_epoch[c],
                                                s.broker_controller_epoch[b])},
            "stale_write": o.Or(s.stale_write, s.ctl_epoch[c] != s.zk_controller_epoch),
            "max_leader_epoch": o.Max(s.max_leader_epoch, new_leader_epoch),
        })

    fenced_modifies = ["active", "ctl_leader_epoch", "ctl_partition_version"]

    @m.action(modifies=fenced_modifies, params={"c": CANDIDATES})
    def zk_write_fenced(o: Ops, s: State, c: int) -> Transition:
        """A write by ``c`` fails its check: a stale ``/controller_epoch`` version makes it
        resign (ControllerMovedException); a stale partition zkVersion makes it re-read the
        partition state and retry (BADVERSION)."""
        epoch_moved = s.ctl_epoch_version[c] != s.zk_epoch_version if check_epoch else False
        version_moved = (
            s.ctl_partition_version[c] != s.zk_partition_version if check_version else False
        )
        return Transition(o.And(s.active[c], o.Or(epoch_moved, version_moved)), {
            "active": {c: o.Not(epoch_moved)},
            "ctl_leader_epoch": {c: s.zk_leader_epoch},
            "ctl_partition_version": {c: s.zk_partition_version},
        })

    # -- invariants ----------------------------------------------------------------------

    @m.invariant("CONTROLLER_FENCED", supports=["EPOCH_VERSION_TRACKS"])
    def controller_fenced(o: Ops, s: State) -> Term:
        """Only the controller holding ZooKeeper's controller epoch has changed partition
        state: a zombie's write never lands."""
        return o.Not(s.stale_write)

    @m.lemma("EPOCH_VERSION_TRACKS")
    def epoch_version_tracks(o: Ops, s: State) -> Term:
        """``/controller_epoch``'s version moves with its value, and a candidate's cached version
        is that of the epoch it holds."""
        return o.And(
            s.zk_epoch_version == s.zk_controller_epoch,
            o.ForAll(CANDIDATES, lambda c: o.And(
                s.ctl_epoch_version[c] == s.ctl_epoch[c],
                s.ctl_epoch[c] <= s.zk_controller_epoch,
            )),
        )

    @m.invariant("EPOCHS_MONOTONIC", supports=["CACHE_CURRENT", "BROKER_EPOCH_BOUND"])
    def epochs_monotonic(o: Ops, s: State) -> Term:
        """The leader epoch in ZooKeeper is never written lower than it has been, and no broker
        or candidate holds an epoch above ZooKeeper's."""
        return o.And(
            s.zk_leader_epoch == s.max_leader_epoch,
            o.ForAll(CANDIDATES, lambda c: s.ctl_epoch[c] <= s.zk_controller_epoch),
        )

    @m.lemma("CACHE_CURRENT")
    def cache_current(o: Ops, s: State) -> Term:
        """A candidate whose cached zkVersion is ZooKeeper's has the current leader epoch."""
        return o.ForAll(CANDIDATES, lambda c: o.And(
            s.ctl_partition_version[c] <= s.zk_partition_version,
            s.ctl_leader_epoch[c] <= s.zk_leader_epoch,
            o.Implies(s.ctl_partition_version[c] == s.zk_partition_version,
                      s.ctl_leader_epoch[c] == s.zk_leader_epoch),
        ))

    @m.lemma("BROKER_EPOCH_BOUND", supports=["CACHE_CURRENT"])
    def broker_epoch_bound(o: Ops, s: State) -> Term:
        """No broker has accepted a leader epoch above ZooKeeper's; one that leads in it is
        ZooKeeper's leader."""
        return o.ForAll(BROKERS, lambda b: o.And(
            s.broker_leader_epoch[b] <= s.zk_leader_epoch,
            o.Implies(o.And(s.broker_leader[b], s.broker_leader_epoch[b] == s.zk_leader_epoch),
                      s.zk_leader == b),
        ))

    @m.invariant("LEADER_UNIQUE", supports=["BROKER_EPOCH_BOUND", "CACHE_CURRENT"])
    def leader_unique(o: Ops, s: State) -> Term:
        """At most one broker leads in any one leader epoch."""
        return o.And(*[
            o.Not(o.And(s.broker_leader[a], s.broker_leader[b],
                        s.broker_leader_epoch[a] == s.broker_leader_epoch[b]))
            for a in BROKERS for b in BROKERS if a < b
        ])

    @m.witness("FAILOVER_THEN_ELECTION")
    def failover_then_election(o: Ops, s: State) -> Term:
        """A second controller took over and a broker leads in the epoch it wrote."""
        return o.And(s.zk_controller_epoch == 2, s.zk_state_controller_epoch == 2,
                     o.Exists(BROKERS, lambda b: o.And(
                         s.broker_leader[b], s.broker_leader_epoch[b] == s.zk_leader_epoch)))

    return m


def build_election(variant: Variant) -> Model:
    """Who may lead after an unclean shutdown (spec/controller.md, KIP-966): one partition on
    three brokers, its ISR, which logs hold every committed record, the clean-shutdown marker and
    the controller's marks of members that restarted uncleanly since the ISR vouched for them.

    Flags:
        bar_unclean: the controller reads the registration's clean-since epoch and bars a
            member that restarted uncleanly while a member it did not mark is in the ISR
            (``True``); ``False`` is ZooKeeper-era Kafka, seed 595.
        admin_unclean: an operator's ElectLeaders UNCLEAN (KIP-460) may be asked at any time:
            with no leader and no live ISR member, the controller elects a live replica outside
            the ISR, whose ISR is then itself (``False``: the shipped protocol elects only ISR
            members; the variant shows the loss the operator accepts).
    """
    bar: bool = variant.flags.get("bar_unclean", True)
    admin: bool = variant.flags.get("admin_unclean", False)

    m = Model("controller_election", "election after unclean shutdowns: the clean-shutdown "
                                     "marker and KIP-966's rule", int_bits=INT_BITS)
    m.var("alive", Bool(), over=[BROKERS], doc="the broker runs")
    m.var("isr", Bool(), over=[BROKERS], doc="the broker is in the ISR in ZooKeeper")
    m.var("leader", Int(NONE, len(BROKERS) - 1), doc="the leader in ZooKeeper (-1: none)")
    m.var("complete", Bool(), over=[BROKERS],
          doc="ghost: the broker's log holds every committed record")
    m.var("clean_marker", Bool(), over=[BROKERS],
          doc="the broker's last shutdown was clean (its marker names the vouched incarnation)")
    m.var("unclean", Bool(), over=[BROKERS],
          doc="the controller marked the broker: restarted uncleanly since the ISR vouched")
    m.var("passed_over", Bool(),
          doc="ghost: a leader was elected while a marked member was live in the ISR")

    @m.init()
    def init(o: Ops) -> dict[str, Any]:
        return {"alive": True, "isr": True, "leader": 0, "complete": True,
                "clean_marker": True, "unclean": False, "passed_over": False}

    def trusted(o: Ops, s: State, b: int) -> Term:
        return o.And(s.isr[b], o.Not(s.unclean[b]))

    def live_leader(o: Ops, s: State) -> Term:
        return o.Or(*[o.And(s.leader == b, s.alive[b]) for b in BROKERS])

    @m.action(modifies=["complete"])
    def appended(o: Ops, s: State) -> Transition:
        """The leader commits a record: every ISR member (all live, at least
        ``min.insync.replicas`` = 2 of them) holds it, no other replica does."""
        guard = o.And(live_leader(o, s),
                      o.ForAll(BROKERS, lambda b: o.Implies(s.isr[b], s.alive[b])),
                      o.Count(*[s.isr[b] for b in BROKERS]) >= 2)
        return Transition(guard, {"complete": {b: s.isr[b] for b in BROKERS}})

    @m.action(modifies=["isr", "unclean"], params={"b": BROKERS, "add": (True, False)})
    def isr_changed(o: Ops, s: State, b: int, add: bool) -> Transition:
        """The leader shrinks the ISR by follower ``b``, or admits ``b`` once it is live and
        caught up (which vouches for it: its mark goes)."""
        if add:
            guard = o.And(live_leader(o, s), o.Not(s.isr[b]), s.alive[b], s.complete[b])
            return Transition(guard, {"isr": {b: True}, "unclean": {b: False}})
        guard = o.And(live_leader(o, s), s.leader != b, s.isr[b])
        return Transition(guard, {"isr": {b: False}, "unclean": {b: False}})

    @m.action(modifies=["alive", "complete", "clean_marker", "leader"],
              params={"b": BROKERS, "clean": (True, False)})
    def broker_failed(o: Ops, s: State, b: int, clean: bool) -> Transition:
        """``b`` stops: cleanly (flushed, marker written) or not (its unflushed tail, which may
        hold committed records, is lost; only while another ISR member, live or stopped, is
        complete and unmarked: the fault model's bound, KIP-966's MinISR - 1 within the
        ISR)."""
        guard = s.alive[b]
        if not clean:
            guard = o.And(guard, o.Or(*[
                o.And(trusted(o, s, other), s.complete[other])
                for other in BROKERS if other != b]))
        return Transition(guard, {
            "alive": {b: False},
            "complete": {b: s.complete[b] if clean else False},
            "clean_marker": {b: clean},
            "leader": o.If(s.leader == b, NONE, s.leader),
        })

    @m.action(modifies=["alive", "unclean"], params={"b": BROKERS})
    def broker_started(o: Ops, s: State, b: int) -> Transition:
        """``b`` registers again; its registration carries the clean-since epoch (the
        marker's), which the controller reads (shipped)."""
        marked = o.Or(s.unclean[b], o.And(s.isr[b], o.Not(s.clean_marker[b]))) if bar \
            else s.unclean[b]
        return Transition(o.Not(s.alive[b]), {"alive": {b: True}, "unclean": {b: marked}})

    @m.action(modifies=["leader", "isr", "unclean", "passed_over"], params={"b": BROKERS})
    def leader_elected(o: Ops, s: State, b: int) -> Transition:
        """With no leader, the controller elects live ISR member ``b``; a marked member only when
        no ISR member is unmarked (shipped). The state it writes drops the marked members from
        the ISR while an unmarked one remains."""
        any_trusted = o.Or(*[trusted(o, s, r) for r in BROKERS])
        guard = o.And(s.leader == NONE, s.alive[b], s.isr[b])
        if bar:
            guard = o.And(guard, o.Or(o.Not(s.unclean[b]), o.Not(any_trusted)))
        barred = {r: o.And(s.unclean[r], any_trusted) for r in BROKERS}
        isr = {r: o.And(s.isr[r], o.Not(barred[r])) for r in BROKERS}
        if admin:  # ElectLeaders UNCLEAN: a live replica outside the ISR when none in it lives
            outside = o.And(s.leader == NONE, s.alive[b], o.Not(s.isr[b]), o.ForAll(
                BROKERS, lambda r: o.Implies(s.isr[r], o.Not(s.alive[r]))))
            guard = o.Or(guard, outside)
            isr = {r: o.If(s.isr[b], isr[r], r == b) for r in BROKERS}
        return Transition(guard, {
            "leader": b,
            "isr": isr,
            "unclean": {r: o.And(s.unclean[r], o.Not(barred[r]), o.Not(s.unclean[b]))
                        for r in BROKERS},
            "passed_over": o.Or(s.passed_over, o.Or(*[
                o.And(s.unclean[r], s.alive[r], s.isr[r]) for r in BROKERS if r != b])),
        })

    @m.invariant("NO_COMMITTED_LOSS", supports=["ISR_VOUCHED", "TRUSTED_MEMBER",
                                                "LEADER_TRUSTED"])
    def no_committed_loss(o: Ops, s: State) -> Term:
        """An elected leader holds every committed record."""
        return o.ForAll(BROKERS, lambda b: o.Implies(s.leader == b, s.complete[b]))

    @m.lemma("ISR_VOUCHED", supports=["TRUSTED_MEMBER", "LEADER_TRUSTED"])
    def isr_vouched(o: Ops, s: State) -> Term:
        """An ISR member missing a committed record is marked, or down after an unclean
        shutdown (it is marked when it registers); a broker down after an unclean shutdown
        misses some."""
        return o.ForAll(BROKERS, lambda b: o.And(
            o.Implies(o.And(s.isr[b], o.Not(s.complete[b])),
                      o.Or(s.unclean[b], o.And(o.Not(s.alive[b]), o.Not(s.clean_marker[b])))),
            o.Implies(o.And(o.Not(s.alive[b]), o.Not(s.clean_marker[b])),
                      o.Not(s.complete[b]))))

    @m.lemma("TRUSTED_MEMBER", supports=["ISR_VOUCHED", "LEADER_TRUSTED"])
    def trusted_member(o: Ops, s: State) -> Term:
        """Some ISR member is complete and unmarked."""
        return o.Exists(BROKERS, lambda b: o.And(trusted(o, s, b), s.complete[b]))

    @m.lemma("LEADER_TRUSTED", supports=["ISR_VOUCHED", "TRUSTED_MEMBER"])
    def leader_trusted(o: Ops, s: State) -> Term:
        """A leader is live, in the ISR, complete and unmarked."""
        return o.ForAll(BROKERS, lambda b: o.Implies(
            s.leader == b, o.And(s.alive[b], trusted(o, s, b), s.complete[b])))

    @m.witness("UNCLEAN_MEMBER_PASSED_OVER")
    def unclean_member_passed_over(o: Ops, s: State) -> Term:
        """A leader was elected while a member that restarted uncleanly was live in the ISR."""
        return o.And(s.passed_over, s.leader != NONE)

    return m


def build_failover(variant: Variant) -> Model:
    """What a failover may trust of a member that restarted unseen (spec/controller.md, "A state
    records the incarnations it vouches for": KIP-903's ISR with broker epochs, fuzz seed 1915).

    One partition on three brokers. No controller sees a broker stop or register again: the
    next controller reads ZooKeeper only (``controller_elected``) and must tell from the
    partition state which live ISR members restarted since the state vouched for them. The
    incarnations are abstracted into booleans relating each broker's current registration and
    clean run to what the state's last write recorded (``restarted_since_vouched``,
    ``clean_since_vouched``) or to the write's zxid (``written_after_registration``,
    ``clean_since_written``: the ``mzxid`` rule), and the leader's memory of the fetches it saw
    caught up in its leadership (``leader_saw_in_sync``, ``in_sync_current``,
    ``in_sync_clean``).

    Flags:
        record_incarnations: each state records, per ISR member, the incarnation its writer
            vouches for, and the failover compares registrations with it (``True``); ``False``
            is the ``mzxid`` rule alone (a member is vouched for iff it registered before the
            state's last write), seed 1915's.
        leave_out_unobserved: a leader's ISR write leaves out a member it has not seen caught
            up in its leadership (``True``); ``False`` carries it over recorded as -1 (no
            incarnation known), for which the failover falls back on the ``mzxid`` rule.
        bound_since_joined: the fault bound: a lossy crash only while another ISR member is
            complete and had no unclean shutdown since the incarnation the state vouches for
            (``False``: ``controller_election``'s bound); ``True``: since it last joined the
            ISR (the cluster simulator's, docs/conformance.md).
        remember_join: the fetch that brings a follower back into the ISR is the incarnation
            the leader vouches for it by from then on (``True``, shipped); ``False`` keeps the
            one of the latest fetch it saw caught up, perhaps from before an unclean restart.
    """
    record: bool = variant.flags.get("record_incarnations", True)
    leave_out: bool = variant.flags.get("leave_out_unobserved", True)
    since_joined: bool = variant.flags.get("bound_since_joined", False)
    remember: bool = variant.flags.get("remember_join", True)

    m = Model("controller_failover_vouching", "a failover after unseen restarts: the "
                                              "incarnations a partition state vouches for "
                                              "(KIP-903, KIP-966)", int_bits=INT_BITS)
    m.var("alive", Bool(), over=[BROKERS], doc="the broker runs (registered)")
    m.var("isr", Bool(), over=[BROKERS], doc="the broker is in the ISR in ZooKeeper")
    m.var("leader", Int(NONE, len(BROKERS) - 1), doc="the leader in ZooKeeper (-1: none)")
    m.var("leading", Bool(),
          doc="the leader in ZooKeeper runs in the leadership it was given (not restarted)")
    m.var("complete", Bool(), over=[BROKERS],
          doc="ghost: the broker's log holds every committed record")
    m.var("clean_marker", Bool(), over=[BROKERS],
          doc="the broker's last shutdown was clean (its registration's clean-since epoch "
              "is not -1)")
    m.var("vouch_recorded", Bool(), over=[BROKERS],
          doc="the state records an incarnation of the broker (not -1, field present)")
    m.var("restarted_since_vouched", Bool(), over=[BROKERS],
          doc="the broker's registration is not the incarnation the state records")
    m.var("clean_since_vouched", Bool(), over=[BROKERS],
          doc="every shutdown of the broker since the incarnation the state records was clean "
              "(its clean-since epoch is not newer)")
    m.var("written_after_registration", Bool(), over=[BROKERS],
          doc="the state's last write (mzxid) is newer than the broker's registration (czxid)")
    m.var("clean_since_written", Bool(), over=[BROKERS],
          doc="the broker's clean run began with an incarnation registered before the state's "
              "last write")
    m.var("leader_saw_in_sync", Bool(), over=[BROKERS],
          doc="the leader saw a fetch of the broker caught up in its leadership "
              "(in_sync_epochs has an entry)")
    m.var("in_sync_current", Bool(), over=[BROKERS],
          doc="that fetch was of the broker's current incarnation")
    m.var("in_sync_clean", Bool(), over=[BROKERS],
          doc="every shutdown of the broker since that fetch was clean")
    m.var("lost_since_joined", Bool(), over=[BROKERS],
          doc="ghost: the broker lost an unflushed tail since it last joined the ISR")
    m.var("passed_over", Bool(),
          doc="ghost: a failover elected a leader while barring a live member registered "
              "before the state's last write (which the mzxid rule trusts)")

    @m.init()
    def init(o: Ops) -> dict[str, Any]:
        return {"alive": True, "isr": True, "leader": 0, "leading": True, "complete": True,
                "clean_marker": True, "vouch_recorded": record,
                "restarted_since_vouched": False, "clean_since_vouched": True,
                "written_after_registration": True, "clean_since_written": True,
                "leader_saw_in_sync": False, "in_sync_current": False, "in_sync_clean": False,
                "lost_since_joined": False, "passed_over": False}

    def is_leader(o: Ops, s: State, b: int) -> Term:
        return s.leader == b

    def leader_complete(o: Ops, s: State) -> Term:
        return o.Or(*[o.And(is_leader(o, s, b), s.complete[b]) for b in BROKERS])

    def restarted(o: Ops, s: State, b: int) -> Term:
        """The failover's test: ``b``'s registration is not the incarnation vouched for."""
        return o.If(s.vouch_recorded[b], s.restarted_since_vouched[b],
                    o.Not(s.written_after_registration[b]))

    def restarted_uncleanly(o: Ops, s: State, b: int) -> Term:
        """``_restarted_uncleanly``: the clean run does not reach back to the vouched one."""
        return o.Not(o.If(s.vouch_recorded[b], s.clean_since_vouched[b],
                          s.clean_since_written[b]))

    def written(o: Ops, s: State) -> dict[str, Any]:
        """Any write of the partition state: every registration precedes it."""
        return {"written_after_registration": True,
                "clean_since_written": {b: o.Or(s.alive[b], s.clean_marker[b])
                                        for b in BROKERS}}

    @m.action(modifies=["complete"])
    def appended(o: Ops, s: State) -> Transition:
        """The leader commits a record: every ISR member (all live, at least
        ``min.insync.replicas`` = 2 of them) fetched it, no other replica holds it."""
        guard = o.And(s.leading,
                      o.ForAll(BROKERS, lambda b: o.Implies(s.isr[b], s.alive[b])),
                      o.Count(*[s.isr[b] for b in BROKERS]) >= 2)
        return Transition(guard, {"complete": {b: s.isr[b] for b in BROKERS}})

    @m.action(modifies=["complete", "leader_saw_in_sync", "in_sync_current", "in_sync_clean"],
              params={"b": BROKERS, "to_end": (True, False)})
    def follower_fetch(o: Ops, s: State, b: int, to_end: bool) -> Transition:
        """Follower ``b`` fetches caught up (to the leader's log end, or to its log end at
        ``b``'s previous fetch: then a follower out of the ISR may still miss a record
        committed since); the leader records the broker epoch the fetch names."""
        guard = o.And(s.leading, s.alive[b], o.Not(is_leader(o, s, b)))
        copied = leader_complete(o, s) if to_end else o.If(s.isr[b], leader_complete(o, s),
                                                            s.complete[b])
        return Transition(guard, {"complete": {b: copied}, "leader_saw_in_sync": {b: True},
                                  "in_sync_current": {b: True}, "in_sync_clean": {b: True}})

    @m.action(modifies=["alive", "complete", "clean_marker", "leading", "clean_since_vouched",
                        "clean_since_written", "in_sync_current", "in_sync_clean",
                        "lost_since_joined"],
              params={"b": BROKERS, "clean": (True, False)})
    def broker_failed(o: Ops, s: State, b: int, clean: bool) -> Transition:
        """``b`` stops, unseen by any controller: cleanly (flushed, marker written) or not (its
        unflushed tail, which may hold committed records, is lost; only while another ISR
        member, live or stopped, is complete and trusted: it had no unclean shutdown since the
        incarnation the state vouches for. That is ``controller_election``'s bound, KIP-966's
        MinISR - 1 within the ISR)."""
        guard = s.alive[b]
        if not clean:
            guard = o.And(guard, o.Or(*[
                o.And(s.isr[other], s.complete[other],
                      o.Not(s.lost_since_joined[other]) if since_joined
                      else s.clean_since_vouched[other])
                for other in BROKERS if other != b]))
        return Transition(guard, {
            "alive": {b: False},
            "complete": {b: s.complete[b] if clean else False},
            "clean_marker": {b: clean},
            "leading": o.And(s.leading, o.Not(is_leader(o, s, b))),
            "clean_since_vouched": {b: o.And(s.clean_since_vouched[b], clean)},
            "clean_since_written": {b: o.And(s.clean_since_written[b], clean)},
            "in_sync_current": {b: False},
            "in_sync_clean": {b: o.And(s.in_sync_clean[b], clean)},
            "lost_since_joined": {b: o.Or(s.lost_since_joined[b], not clean)},
        })

    @m.action(modifies=["alive", "restarted_since_vouched", "written_after_registration"],
              params={"b": BROKERS})
    def broker_started(o: Ops, s: State, b: int) -> Transition:
        """``b`` registers again (a new broker epoch), unseen by any controller (it was the
        controller, or the controller fails before it reads the registration)."""
        return Transition(o.Not(s.alive[b]), {"alive": {b: True},
                                              "restarted_since_vouched": {b: True},
                                              "written_after_registration": {b: False}})

    @m.action(modifies=["isr", "vouch_recorded", "restarted_since_vouched",
                        "clean_since_vouched", "written_after_registration",
                        "clean_since_written", "lost_since_joined", "leader_saw_in_sync",
                        "in_sync_current", "in_sync_clean"],
              params={"b": BROKERS, "add": (True, False)})
    def isr_changed(o: Ops, s: State, b: int, add: bool) -> Transition:
        """The leader shrinks the ISR by follower ``b``, or admits ``b`` once it is live and
        caught up, carrying the other members over (``_vouched_isr``). It records its own
        broker epoch, the joining follower's from its fetch and each kept member's from the
        latest fetch it saw caught up in its leadership; shipped: a member it has not seen so
        is left out."""
        if add:
            guard = o.And(s.leading, o.Not(s.isr[b]), s.alive[b], s.complete[b])
        else:
            guard = o.And(s.leading, o.Not(is_leader(o, s, b)), s.isr[b])
        others = [r for r in BROKERS if r != b]
        seen = {r: o.Or(is_leader(o, s, r), s.leader_saw_in_sync[r]) for r in others}
        kept = {r: o.And(s.isr[r], seen[r]) if leave_out else s.isr[r] for r in others}
        fresh = {r: o.Or(is_leader(o, s, r), s.in_sync_current[r]) for r in others}
        clean = {r: o.Or(is_leader(o, s, r), s.in_sync_clean[r]) for r in others}
        return Transition(guard, {
            **written(o, s),
            "isr": {b: add, **kept},
            "vouch_recorded": {b: record, **{r: o.And(record, seen[r]) for r in others}},
            "restarted_since_vouched": {b: False, **{r: o.Not(fresh[r]) for r in others}},
            "clean_since_vouched": {b: True, **clean},
            "lost_since_joined": {b: False if add else s.lost_since_joined[b]},
            # shipped: the joining fetch is what the leader vouches for ``b`` by from then on
            "leader_saw_in_sync": {b: o.Or(s.leader_saw_in_sync[b], add and remember)},
            "in_sync_current": {b: o.Or(s.in_sync_current[b], add and remember)},
            "in_sync_clean": {b: o.Or(s.in_sync_clean[b], add and remember)},
        })

    @m.action(modifies=["isr", "leader", "leading", "vouch_recorded", "restarted_since_vouched",
                        "clean_since_vouched", "written_after_registration",
                        "clean_since_written", "leader_saw_in_sync", "in_sync_current",
                        "in_sync_clean", "passed_over"],
              params={"b": (NONE, *BROKERS)})
    def controller_elected(o: Ops, s: State, b: int) -> Transition:
        """A controller fails over knowing nothing but ZooKeeper: a live ISR member whose
        registration is not the incarnation the state vouches for (shipped; ``mzxid``: one
        registered after the state's last write) restarted since; it is marked unclean when its
        clean run does not reach back to the vouched incarnation (KIP-966), or when the state
        has no leader and the registration follows an unclean shutdown. Dead and restarted
        members leave the ISR (unless no other member remains), marked ones are barred while an
        unmarked member is in the ISR; the leader stays if usable, else ``b``, a usable member,
        is elected (-1: none usable; the ISR keeps the unbarred members). A write records each
        live member's registration and reaches the leader in a new leader epoch."""
        bounced0 = {r: o.And(s.isr[r], s.alive[r], restarted(o, s, r)) for r in BROKERS}
        marked = {r: o.Or(o.And(bounced0[r], restarted_uncleanly(o, s, r)),
                          o.And(s.leader == NONE, s.isr[r], s.alive[r],
                                o.Not(s.clean_marker[r])))
                  for r in BROKERS}
        others_remain = o.Or(*[o.And(s.isr[r], s.alive[r], o.Not(bounced0[r]))
                               for r in BROKERS])
        any_unmarked = o.Or(*[o.And(s.isr[r], o.Not(marked[r])) for r in BROKERS])
        barred = {r: o.And(marked[r], any_unmarked) for r in BROKERS}
        usable = {r: o.And(s.isr[r], s.alive[r], o.Not(o.And(bounced0[r], others_remain)),
                           o.Not(barred[r])) for r in BROKERS}
        any_usable = o.Or(*usable.values())
        keep = o.Or(*[o.And(is_leader(o, s, r), usable[r]) for r in BROKERS])
        if b == NONE:
            guard = o.Not(any_usable)
        else:
            guard = o.And(usable[b], o.Implies(keep, is_leader(o, s, b)))
        isr = {r: o.If(any_usable, usable[r], o.And(s.isr[r], o.Not(barred[r])))
               for r in BROKERS}
        write = o.Or(s.leader != b, *[o.Ne(isr[r], s.isr[r]) for r in BROKERS])
        fresh = o.Or(write, o.Not(s.leading))
        vouched = {r: o.And(write, isr[r], s.alive[r]) for r in BROKERS}
        after_write = written(o, s)
        return Transition(guard, {
            "isr": isr,
            "leader": b,
            "leading": b != NONE,
            "vouch_recorded": {r: o.If(vouched[r], record, s.vouch_recorded[r])
                               for r in BROKERS},
            "restarted_since_vouched": {r: o.And(s.restarted_since_vouched[r],
                                                 o.Not(vouched[r])) for r in BROKERS},
            "clean_since_vouched": {r: o.Or(s.clean_since_vouched[r], vouched[r])
                                    for r in BROKERS},
            "written_after_registration": {r: o.Or(s.written_after_registration[r], write)
                                           for r in BROKERS},
            "clean_since_written": {
                r: o.If(write, after_write["clean_since_written"][r], s.clean_since_written[r])
                for r in BROKERS},
            "leader_saw_in_sync": {r: o.And(s.leader_saw_in_sync[r], o.Not(fresh))
                                   for r in BROKERS},
            "in_sync_current": {r: o.And(s.in_sync_current[r], o.Not(fresh)) for r in BROKERS},
            "in_sync_clean": {r: o.And(s.in_sync_clean[r], o.Not(fresh)) for r in BROKERS},
            "passed_over": o.Or(s.passed_over, o.And(b != NONE, o.Or(*[
                o.And(barred[r], s.written_after_registration[r]) for r in BROKERS
                if r != b]))),
        })

    @m.invariant("NO_COMMITTED_LOSS", supports=["LEADER_TRUSTED"])
    def no_committed_loss(o: Ops, s: State) -> Term:
        """A broker leading the partition holds every committed record."""
        return o.ForAll(BROKERS, lambda b: o.Implies(o.And(s.leading, is_leader(o, s, b)),
                                                     s.complete[b]))

    @m.lemma("LEADER_TRUSTED", supports=["ISR_VOUCHED", "TRUSTED_MEMBER", "SEEN_IN_SYNC"])
    def leader_trusted(o: Ops, s: State) -> Term:
        """A leading broker is live, in the ISR and complete, with only clean shutdowns since
        the incarnation the state vouches for."""
        return o.Implies(s.leading, o.Exists(BROKERS, lambda b: o.And(
            is_leader(o, s, b), s.alive[b], s.isr[b], s.complete[b],
            s.clean_since_vouched[b])))

    @m.lemma("ISR_VOUCHED", supports=["LEADER_TRUSTED", "TRUSTED_MEMBER", "SEEN_IN_SYNC"])
    def isr_vouched(o: Ops, s: State) -> Term:
        """The state records an incarnation of every ISR member (when states record them); a
        member whose shutdowns since it were all clean is complete; a live member still in the
        recorded incarnation has had no shutdown since; one whose last shutdown was unclean and
        whose shutdowns since the recorded one were all clean is still in it."""
        return o.ForAll(BROKERS, lambda b: o.Implies(s.isr[b], o.And(
            s.vouch_recorded[b] if record else True,
            o.Implies(s.clean_since_vouched[b], s.complete[b]),
            o.Implies(o.And(s.alive[b], o.Not(s.restarted_since_vouched[b])),
                      s.clean_since_vouched[b]),
            o.Implies(o.And(o.Not(s.clean_marker[b]), s.clean_since_vouched[b]),
                      o.And(s.alive[b], o.Not(s.restarted_since_vouched[b]))))))

    @m.lemma("SEEN_IN_SYNC", supports=["LEADER_TRUSTED", "ISR_VOUCHED"])
    def seen_in_sync(o: Ops, s: State) -> Term:
        """The leader's memory: a fetch of the current incarnation follows every shutdown of
        it, which were then clean; a member seen caught up with only clean shutdowns since is
        complete while in the ISR."""
        return o.ForAll(BROKERS, lambda b: o.And(
            o.Implies(s.in_sync_current[b],
                      o.And(s.alive[b], s.in_sync_clean[b], s.leader_saw_in_sync[b])),
            o.Implies(s.in_sync_clean[b], s.leader_saw_in_sync[b]),
            o.Implies(o.And(o.Not(s.clean_marker[b]), s.in_sync_clean[b]), s.in_sync_current[b]),
            o.Implies(o.And(s.isr[b], s.in_sync_clean[b]), s.complete[b])))

    @m.lemma("TRUSTED_MEMBER", supports=["ISR_VOUCHED", "LEADER_TRUSTED",
                                         "LEADERLESS_RESTARTED"])
    def trusted_member(o: Ops, s: State) -> Term:
        """Some ISR member had no unclean shutdown since the incarnation the state records."""
        return o.Exists(BROKERS, lambda b: o.And(s.isr[b], s.clean_since_vouched[b]))

    @m.lemma("LEADERLESS_RESTARTED", supports=["LEADER_TRUSTED"])
    def leaderless_restarted(o: Ops, s: State) -> Term:
        """A state without a leader is written by a failover that found no usable member, so it
        names only members that were not live: every live member of it registered since."""
        return o.Implies(s.leader == NONE, o.ForAll(BROKERS, lambda b: o.Implies(
            o.And(s.isr[b], s.alive[b]), s.restarted_since_vouched[b])))

    @m.witness("UNSEEN_RESTART_PASSED_OVER")
    def unseen_restart_passed_over(o: Ops, s: State) -> Term:
        """A failover elected a leader while barring a member that restarted uncleanly unseen,
        registered before the state's last write."""
        return o.And(s.passed_over, s.leading)

    return m


P, H, V = Status.PROVED, Status.HOLDS, Status.VIOLATED

MODELS = (
    ModelDefinition(
        name="controller",
        doc="controller failover through ZooKeeper: controller epoch, fenced writes",
        build=build,
        variants=(
            Variant(
                "shipped",
                "every write is a multi checking /controller_epoch's version and the zkVersion",
                {},
                shipped=True,
                expected={"CONTROLLER_FENCED": P, "EPOCH_VERSION_TRACKS": P,
                          "EPOCHS_MONOTONIC": P, "CACHE_CURRENT": P, "BROKER_EPOCH_BOUND": P,
                          "LEADER_UNIQUE": P},
            ),
            Variant(
                "no_controller_epoch_check",
                "writes check the partition zkVersion only: the zombie controller of KAFKA-6082",
                {"check_controller_epoch": False},
                expected={"CONTROLLER_FENCED": V, "EPOCH_VERSION_TRACKS": P,
                          "EPOCHS_MONOTONIC": P, "CACHE_CURRENT": P, "BROKER_EPOCH_BOUND": P,
                          "LEADER_UNIQUE": P},
            ),
            Variant(
                "no_fencing",
                "writes check neither the controller epoch nor the zkVersion",
                {"check_controller_epoch": False, "check_partition_version": False},
                expected={"CONTROLLER_FENCED": V, "EPOCH_VERSION_TRACKS": P,
                          "EPOCHS_MONOTONIC": V, "CACHE_CURRENT": V, "BROKER_EPOCH_BOUND": V,
                          "LEADER_UNIQUE": V},
            ),
        ),
        depth=DEPTH,
        source="design V3 §A/§D; Kafka ZooKeeper mode; KAFKA-6082",
    ),
    ModelDefinition(
        name="controller_election",
        doc="who may lead after an unclean shutdown: clean-shutdown marker, KIP-966's rule",
        build=build_election,
        variants=(
            Variant(
                "shipped",
                "the registration's clean-since epoch marks an uncleanly restarted member, "
                "which is not elected while an unmarked member is in the ISR",
                {},
                shipped=True,
                expected={"NO_COMMITTED_LOSS": P, "ISR_VOUCHED": P, "TRUSTED_MEMBER": P,
                          "LEADER_TRUSTED": P},
            ),
            Variant(
                "elect_unclean",
                "the controller ignores how a member last shut down (ZooKeeper-era Kafka, "
                "cluster simulator seed 595)",
                {"bar_unclean": False},
                expected={"NO_COMMITTED_LOSS": V, "ISR_VOUCHED": V, "TRUSTED_MEMBER": V,
                          "LEADER_TRUSTED": V},
            ),
            Variant(
                "elect_leaders_unclean",
                "an operator's ElectLeaders UNCLEAN (KIP-460): with no ISR member live, a live "
                "replica outside the ISR is elected, alone in the ISR — the committed records it "
                "lacks are lost, as the operator asked",
                {"admin_unclean": True},
                expected={"NO_COMMITTED_LOSS": V, "ISR_VOUCHED": V, "TRUSTED_MEMBER": V,
                          "LEADER_TRUSTED": V},
            ),
        ),
        depth=DEPTH,
        source="KIP-966; cluster simulator seed 595",
    ),
    ModelDefinition(
        name="controller_failover_vouching",
        doc="a failover after unseen restarts: the incarnations a state vouches for (KIP-903)",
        build=build_failover,
        variants=(
            Variant(
                "shipped",
                "each state records the incarnation it vouches for of each member; a leader's "
                "ISR write leaves out a member not seen caught up in its leadership",
                {},
                shipped=True,
                expected={"NO_COMMITTED_LOSS": P, "LEADER_TRUSTED": P, "ISR_VOUCHED": P,
                          "SEEN_IN_SYNC": P, "TRUSTED_MEMBER": P, "LEADERLESS_RESTARTED": P},
            ),
            Variant(
                "mzxid",
                "a member is vouched for iff it registered before the state's last write (fuzz "
                "seed 1915: a leader's ISR write carries over a member that restarted unseen)",
                {"record_incarnations": False, "leave_out_unobserved": False},
                expected={"NO_COMMITTED_LOSS": V, "LEADER_TRUSTED": V, "ISR_VOUCHED": V,
                          "SEEN_IN_SYNC": H, "TRUSTED_MEMBER": H, "LEADERLESS_RESTARTED": H},
            ),
            Variant(
                "leader_keeps_unobserved",
                "a leader's ISR write carries over a member it has not seen caught up, recorded "
                "as -1: the failover falls back on the mzxid rule for it",
                {"leave_out_unobserved": False},
                expected={"NO_COMMITTED_LOSS": V, "LEADER_TRUSTED": V, "ISR_VOUCHED": V,
                          "SEEN_IN_SYNC": H, "TRUSTED_MEMBER": H, "LEADERLESS_RESTARTED": H},
            ),
            Variant(
                "forget_join",
                "the leader vouches for a kept member by the latest fetch it saw caught up only, "
                "not by the fetch that brought it back in: under the cluster simulator's fault "
                "bound (a lossy crash while another ISR member is complete and lost no tail "
                "since it last joined the ISR) a member that rejoined after an unclean restart "
                "is recorded in its earlier incarnation, marked at the failover, and the last "
                "replica standing elected short of a record it held",
                {"bound_since_joined": True, "remember_join": False},
                expected={"NO_COMMITTED_LOSS": V, "LEADER_TRUSTED": V, "ISR_VOUCHED": H,
                          "SEEN_IN_SYNC": H, "TRUSTED_MEMBER": V, "LEADERLESS_RESTARTED": H},
                depth=11,
            ),
        ),
        depth=DEPTH,
        source="KIP-903; KIP-966; fuzz seed 1915",
    ),
)
