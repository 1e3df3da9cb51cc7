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
)
