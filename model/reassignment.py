"""The reassignment machine at the controller, across failover and log-dir failure.

spec/reassignment.md.

One partition moves from its original replicas OAR = {0, 1} to the target RAR = {2, 3}, after
the replication design V3 §F, Kafka's ``onPartitionReassignment`` and KIP-112's log-dir failure
handling at the controller. ZooKeeper holds AR (``/brokers/topics/<t>``), the leader, its epoch and
the ISR (the partition state znode) and the reassignment entry (``/admin/reassign_partitions``);
the controller's memory holds only the phase, which it loses on failover and recomputes from
ZooKeeper when it (or another broker) is elected (:func:`resumed_phase`).

Data is abstracted to one bit per replica: ``complete[b]`` — the replica's log holds every
committed record. ISR members are complete (a record commits only once every ISR member has it);
``leader_append`` commits new records, after which every replica outside the ISR is behind. A
log-dir failure loses the replica's data (``hosted`` stays, on the failed dir); the controller
marks it OFFLINE, drops it from the ISR (unless it is the last member) and re-elects a leader.
A broker may create a missing replica empty only when the LeaderAndIsr marks it ``is_new``
(KAFKA-10314): a replica lost with a failed dir is never recreated empty on a good one.

Known-bad variants: ``switch_before_caught_up`` (AR := RAR before RAR ⊆ ISR: REASSIGN_SAFE is
refuted in three steps) and ``recreate_lost_replica`` (creation ignores ``is_new``:
DIR_FAILURE_ISOLATION is refuted).
"""

from __future__ import annotations

import enum
from typing import Any

from ._dsl import (
    Bool,
    Enum,
    Int,
    Model,
    ModelDefinition,
    Ops,
    State,
    Status,
    Term,
    Transition,
    Variant,
)

__sans_io__ = True


class ReassignmentPhase(enum.Enum):
    """Where one partition's reassignment stands (design V3 §F, Kafka's phases U, A, B)."""

    NONE = "none"  #: §F 1.1: listed in /admin/reassign_partitions, AR does not contain RAR yet
    ADDING = "adding"  #: §F 2.1: AR := RAR + OAR written; LeaderAndIsr to the new replicas next
    CATCHING_UP = "catching_up"  #: §F 3.1: new replicas created (is_new); waiting for RAR ⊆ ISR
    SWITCHED = "switched"  #: §F 3.2.2-3.2.5: leader in RAR, ISR ∩ RAR, AR := RAR written
    REMOVING = "removing"  #: §F 3.2.4: StopReplica(delete) sent to OAR - RAR
    DONE = "done"  #: §F 3.2.6: the entry removed from /admin/reassign_partitions


class ReassignmentEvent(enum.Enum):
    """The transitions of the reassignment machine (model action = lower-case name)."""

    REASSIGN_STARTED = "reassign_started"  #: §F 2.1: AR + RAR written (NONE → ADDING)
    #: §F 2.1 LeaderAndIsr to AR (→ CATCHING_UP); §F 3.2.2-3.2.5 the switch (→ SWITCHED)
    LEADER_ELECTED = "leader_elected"
    ISR_CHANGED = "isr_changed"  #: §F 3.1 / §G: a caught-up replica joins the ISR
    REASSIGN_COMPLETED = "reassign_completed"  #: §F 3.2.4 StopReplica (→ REMOVING); 3.2.6 (→ DONE)


#: Brokers; each hosts at most one replica of the partition.
BROKERS = range(4)
#: Original replicas (AR at the start; broker 0 leads) and the reassignment target.
OAR = (0, 1)
RAR = (2, 3)
#: At most this many log-dir failures in a run (one disk of the partition's replicas).
MAX_DIR_FAILURES = 1
#: At most this many controller failovers in a run.
MAX_FAILOVERS = 2
MAX_LEADER_EPOCH = 4
#: The default bounded-model-checking depth: the witness (a reassignment completed across a
#: controller failover) needs 9 steps.
DEPTH = 9

NONE = -1
_P = ReassignmentPhase
#: Every invariant and lemma of the model is proved together with all the others.
SUPPORTS = ("REASSIGN_SAFE", "DIR_FAILURE_ISOLATION", "ISR_COMPLETE", "RESUMABLE", "STRUCTURE")


def build(variant: Variant) -> Model:
    """The reassignment model of one variant.

    Flags:
        switch_needs_isr: the switch waits until RAR ⊆ ISR (``True``; REASSIGN_SAFE's guard).
        create_needs_is_new: a broker creates a missing replica only when the LeaderAndIsr marks
            it ``is_new`` (``True``; KIP-112, KAFKA-10314).
    """
    switch_needs_isr: bool = variant.flags.get("switch_needs_isr", True)
    create_needs_is_new: bool = variant.flags.get("create_needs_is_new", True)

    m = Model("reassignment", "one partition reassigned from {0, 1} to {2, 3} across controller "
                              "failover and a log-dir failure (design V3 §F, KIP-112)")
    m.var("zk_ar", Bool(), over=[BROKERS], doc="AR in /brokers/topics/<t>")
    m.var("zk_isr", Bool(), over=[BROKERS], doc="ISR in the partition state")
    m.var("zk_leader", Int(NONE, len(BROKERS) - 1), doc="leader in the partition state")
    m.var("zk_leader_epoch", Int(0, MAX_LEADER_EPOCH), doc="leader epoch in the partition state")
    m.var("zk_entry", Bool(), doc="the partition's entry in /admin/reassign_partitions")
    m.var("ctl_active", Bool(), doc="a controller is active (its memory is valid)")
    m.var("phase", Enum(ReassignmentPhase), doc="the active controller's phase (memory)")
    m.var("hosted", Bool(), over=[BROKERS], doc="the broker hosts a log for the partition")
    m.var("complete", Bool(), over=[BROKERS], doc="that log holds every committed record")
    m.var("dir_failed", Bool(), over=[BROKERS], doc="the log dir holding the replica failed")
    m.var("offline", Bool(), over=[BROKERS], doc="the controller marked the replica OFFLINE")
    m.var("is_new", Bool(), over=[BROKERS],
          doc="the controller's LeaderAndIsr marks the replica new (added, not yet in the ISR)")
    m.var("failovers", Int(0, MAX_FAILOVERS), doc="controller failovers so far")
    m.var("failed_over_mid_reassignment", Bool(),
          doc="ghost: a controller resigned while a reassignment was under way")

    def in_rar(b: int) -> bool:
        return b in RAR

    def ar_is(o: Ops, s: State, members: tuple[int, ...]) -> Term:
        return o.ForAll(BROKERS, lambda b: s.zk_ar[b] if b in members else o.Not(s.zk_ar[b]))

    def resumed_phase(o: Ops, s: State) -> Term:
        """The phase a newly elected controller resumes from ZooKeeper alone (the impl's
        ``classify``): no entry → DONE; AR lacks part of RAR → NONE; AR ⊋ RAR → ADDING (it
        re-sends the LeaderAndIsr, which is idempotent); AR = RAR → SWITCHED (it re-sends the
        StopReplica, idempotent too)."""
        rar_in_ar = o.And(*[s.zk_ar[b] for b in RAR])
        return o.If(
            o.Not(s.zk_entry), _P.DONE,
            o.If(o.Not(rar_in_ar), _P.NONE,
                 o.If(ar_is(o, s, RAR), _P.SWITCHED, _P.ADDING)))

    def first(o: Ops, candidates: list[tuple[int, Term]]) -> Term:
        """The first broker whose condition holds, or -1."""
        chosen: Term = NONE
        for b, condition in reversed(candidates):
            chosen = o.If(condition, b, chosen)
        return chosen

    @m.init()
    def init(o: Ops) -> dict[str, Any]:
        return {
            "zk_ar": {b: b in OAR for b in BROKERS},
            "zk_isr": {b: b in OAR for b in BROKERS},
            "zk_leader": OAR[0],
            "zk_leader_epoch": 0,
            "zk_entry": True,
            "ctl_active": True,
            "phase": _P.NONE,
            "hosted": {b: b in OAR for b in BROKERS},
            "complete": {b: b in OAR for b in BROKERS},
            "dir_failed": False,
            "offline": False,
            "is_new": False,
            "failovers": 0,
            "failed_over_mid_reassignment": False,
        }

    @m.action(modifies=["zk_ar", "phase"])
    def reassign_started(o: Ops, s: State) -> Transition:
        """The controller reads the entry and writes AR := RAR + OAR (§F 2.1), then moves on."""
        return Transition(
            o.And(s.ctl_active, o.Eq(s.phase, _P.NONE), s.zk_entry),
            {"zk_ar": dict.fromkeys(RAR, True), "phase": _P.ADDING},
        )

    @m.action(
        modifies=["zk_ar", "zk_isr", "zk_leader", "zk_leader_epoch", "phase", "hosted",
                  "complete", "is_new"],
    )
    def leader_elected(o: Ops, s: State) -> Transition:
        """ADDING: LeaderAndIsr to every replica of AR; missing new replicas are created empty
        with ``is_new`` (→ CATCHING_UP). CATCHING_UP with RAR ⊆ ISR (shipped): the switch, one
        conditional write — a leader in RAR (the current one if it is there), ISR := ISR ∩ RAR,
        AR := RAR — and a leader epoch bump (→ SWITCHED)."""
        adding = o.Eq(s.phase, _P.ADDING)
        catching_up = o.Eq(s.phase, _P.CATCHING_UP)
        rar_in_isr = o.And(*[s.zk_isr[b] for b in RAR])
        can_switch = o.And(catching_up, s.zk_leader_epoch < MAX_LEADER_EPOCH)
        if switch_needs_isr:
            can_switch = o.And(can_switch, rar_in_isr)
        in_sync_target = first(o, [(b, o.And(s.zk_isr[b], o.Not(s.offline[b]))) for b in RAR])
        any_target = first(o, [(b, o.Not(s.offline[b])) for b in RAR])
        leader_kept = o.Or(*[o.And(s.zk_leader == b) for b in RAR])
        new_leader = o.If(leader_kept, s.zk_leader,
                          o.If(in_sync_target != NONE, in_sync_target, any_target))
        created = {b: o.And(adding, o.Not(s.hosted[b])) for b in RAR}
        return Transition(
            o.And(s.ctl_active, o.Or(adding, can_switch)),
            {
                "zk_ar": {b: o.If(adding, s.zk_ar[b], in_rar(b)) for b in BROKERS},
                "zk_isr": {b: o.If(adding, s.zk_isr[b],
                                   o.And(in_rar(b), o.Or(s.zk_isr[b], new_leader == b)))
                           for b in BROKERS},
                "zk_leader": o.If(adding, s.zk_leader, new_leader),
                "zk_leader_epoch": o.If(adding, s.zk_leader_epoch, s.zk_leader_epoch + 1),
                "phase": o.If(adding, _P.CATCHING_UP, _P.SWITCHED),
                "hosted": {b: o.Or(s.hosted[b], created[b]) for b in RAR},
                "complete": {b: o.And(s.complete[b], o.Not(created[b])) for b in RAR},
                "is_new": {b: o.Or(s.is_new[b], created[b]) for b in RAR},
            },
        )

    @m.action(modifies=["zk_isr", "complete", "is_new"], params={"b": BROKERS})
    def isr_changed(o: Ops, s: State, b: int) -> Transition:
        """Replica ``b`` of AR fetches up to the leader's LEO and the leader adds it to the ISR
        (design V3 §G); the controller hears of it (``/isr_change_notification``)."""
        return Transition(
            o.And(s.zk_leader != NONE, s.zk_ar[b], s.hosted[b], o.Not(s.offline[b]),
                  o.Not(s.zk_isr[b])),
            {"zk_isr": {b: True}, "complete": {b: True}, "is_new": {b: False}},
        )

    @m.action(modifies=["complete"])
    def leader_append(o: Ops, s: State) -> Transition:
        """The leader commits new records: every replica outside the ISR is now behind."""
        return Transition(
            s.zk_leader != NONE,
            {"complete": {b: o.And(s.complete[b], s.zk_isr[b]) for b in BROKERS}},
        )

    @m.action(modifies=["zk_entry", "phase", "hosted", "complete", "is_new"])
    def reassign_completed(o: Ops, s: State) -> Transition:
        """SWITCHED: StopReplica(delete) to every broker outside AR (→ REMOVING). REMOVING: the
        entry leaves /admin/reassign_partitions (→ DONE)."""
        switched = o.Eq(s.phase, _P.SWITCHED)
        removing = o.Eq(s.phase, _P.REMOVING)
        deleted = {b: o.And(switched, o.Not(s.zk_ar[b])) for b in BROKERS}
        return Transition(
            o.And(s.ctl_active, o.Or(switched, removing)),
            {
                "zk_entry": o.And(s.zk_entry, o.Not(removing)),
                "phase": o.If(switched, _P.REMOVING, _P.DONE),
                "hosted": {b: o.And(s.hosted[b], o.Not(deleted[b])) for b in BROKERS},
                "complete": {b: o.And(s.complete[b], o.Not(deleted[b])) for b in BROKERS},
                "is_new": {b: o.And(s.is_new[b], o.Not(deleted[b])) for b in BROKERS},
            },
        )

    @m.action(modifies=["ctl_active", "phase", "failovers", "failed_over_mid_reassignment"])
    def controller_resigned(o: Ops, s: State) -> Transition:
        """The controller fails (or resigns): its memory is lost."""
        under_way = o.Not(o.In(s.phase, (_P.NONE, _P.DONE)))
        return Transition(
            o.And(s.ctl_active, s.failovers < MAX_FAILOVERS),
            {
                "ctl_active": False,
                "phase": _P.NONE,
                "failovers": s.failovers + 1,
                "failed_over_mid_reassignment": o.Or(s.failed_over_mid_reassignment, under_way),
            },
        )

    @m.action(modifies=["ctl_active", "phase"])
    def controller_elected(o: Ops, s: State) -> Transition:
        """A controller is elected and resumes from ZooKeeper (design V3 §D step 7)."""
        return Transition(o.Not(s.ctl_active), {"ctl_active": True, "phase": resumed_phase(o, s)})

    @m.action(
        modifies=["zk_isr", "zk_leader", "zk_leader_epoch", "complete", "dir_failed", "offline"],
        params={"b": BROKERS},
    )
    def log_dir_failed(o: Ops, s: State, b: int) -> Transition:
        """The log dir holding ``b``'s replica fails (KIP-112): its data is lost; the controller
        marks the replica OFFLINE, drops it from the ISR unless it is the last member, and
        elects a new leader from the rest of the ISR if it led (or none)."""
        others = [(t, o.And(s.zk_isr[t], o.Not(s.offline[t]))) for t in BROKERS if t != b]
        last_member = o.Not(o.Or(*[s.zk_isr[t] for t in BROKERS if t != b]))
        was_leader = s.zk_leader == b
        new_leader = o.If(was_leader, first(o, others), s.zk_leader)
        failures = o.Count(*[s.dir_failed[t] for t in BROKERS])
        return Transition(
            o.And(s.hosted[b], o.Not(s.dir_failed[b]), failures < MAX_DIR_FAILURES,
                  s.zk_leader_epoch < MAX_LEADER_EPOCH),
            {
                "zk_isr": {b: o.And(s.zk_isr[b], last_member)},
                "zk_leader": new_leader,
                "zk_leader_epoch": o.If(was_leader, s.zk_leader_epoch + 1, s.zk_leader_epoch),
                "complete": {b: False},
                "dir_failed": {b: True},
                "offline": {b: True},
            },
        )

    @m.action(modifies=["hosted", "complete", "offline"], params={"b": BROKERS})
    def broker_started(o: Ops, s: State, b: int) -> Transition:
        """Broker ``b`` restarts (or is sent a LeaderAndIsr) for a replica of AR it lost with a
        failed dir: it creates the log empty on a good dir only if the request marks it
        ``is_new`` (shipped); the replica is then ONLINE again, empty."""
        guard = o.And(s.zk_ar[b], s.dir_failed[b], s.offline[b])
        if create_needs_is_new:
            guard = o.And(guard, s.is_new[b])
        return Transition(guard, {"hosted": {b: True}, "complete": {b: False},
                                  "offline": {b: False}})

    # -- invariants ----------------------------------------------------------------------

    @m.invariant("REASSIGN_SAFE", supports=SUPPORTS)
    def reassign_safe(o: Ops, s: State) -> Term:
        """AR becomes RAR only with every target replica caught up (or lost with its own dir);
        the ISR stays inside AR; some online replica of AR holds every committed record."""
        switched = ar_is(o, s, RAR)
        return o.And(
            o.Implies(switched, o.And(*[o.Or(s.complete[b], s.dir_failed[b]) for b in RAR])),
            o.ForAll(BROKERS, lambda b: o.Implies(s.zk_isr[b], s.zk_ar[b])),
            o.Exists(BROKERS, lambda b: o.And(s.zk_ar[b], s.complete[b], o.Not(s.offline[b]))),
        )

    @m.lemma("ISR_COMPLETE", supports=SUPPORTS)
    def isr_complete(o: Ops, s: State) -> Term:
        """Every online ISR member holds every committed record, and the leader is one."""
        return o.And(
            o.ForAll(BROKERS, lambda b: o.Implies(
                o.And(s.zk_isr[b], o.Not(s.offline[b])), o.And(s.complete[b], s.hosted[b]))),
            o.ForAll(BROKERS, lambda b: o.Implies(
                s.zk_leader == b, o.And(s.zk_isr[b], o.Not(s.offline[b])))),
        )

    @m.invariant("DIR_FAILURE_ISOLATION", supports=SUPPORTS)
    def dir_failure_isolation(o: Ops, s: State) -> Term:
        """Only replicas on a failed dir are OFFLINE; a replica lost with its dir comes back
        online only as a new (``is_new``) replica or once caught up, never as an empty old one;
        online ISR members hold the committed records."""
        return o.ForAll(BROKERS, lambda b: o.And(
            o.Implies(s.offline[b], s.dir_failed[b]),
            o.Implies(o.And(s.dir_failed[b], o.Not(s.offline[b])),
                      o.Or(s.is_new[b], s.complete[b])),
            o.Implies(o.And(s.zk_isr[b], o.Not(s.offline[b])), s.complete[b]),
        ))

    @m.lemma("RESUMABLE", supports=SUPPORTS)
    def resumable(o: Ops, s: State) -> Term:
        """The active controller's phase is the one ZooKeeper resumes, or the step after it
        that writes nothing to ZooKeeper (a re-sent request)."""
        resumed = resumed_phase(o, s)
        return o.Implies(s.ctl_active, o.Or(
            o.Eq(s.phase, resumed),
            o.And(o.Eq(resumed, _P.ADDING), o.Eq(s.phase, _P.CATCHING_UP)),
            o.And(o.Eq(resumed, _P.SWITCHED), o.Eq(s.phase, _P.REMOVING)),
        ))

    @m.lemma("STRUCTURE", supports=SUPPORTS)
    def structure(o: Ops, s: State) -> Term:
        """The facts that make the invariants inductive: AR is OAR, OAR + RAR or RAR; the
        phase and the reassignment entry follow AR; at most one dir has failed and the online
        ISR has lost at most that member; an offline ISR member is the last one; a replica
        recreated after its dir failed stays new until it joins the ISR; after the switch every
        target replica is in the ISR unless its dir failed; only RAR replicas are new."""
        full = tuple(sorted(OAR + RAR))
        failures = o.Count(*[s.dir_failed[b] for b in BROKERS])
        online_isr = o.Count(*[o.And(s.zk_isr[b], o.Not(s.offline[b])) for b in BROKERS])
        return o.And(
            o.Or(ar_is(o, s, OAR), ar_is(o, s, full), ar_is(o, s, RAR)),
            o.Implies(o.Not(s.zk_entry), ar_is(o, s, RAR)),
            failures <= MAX_DIR_FAILURES,
            online_isr + failures >= 2,
            o.ForAll(BROKERS, lambda b: o.And(
                o.Implies(o.And(s.offline[b], s.zk_isr[b]),
                          o.And(*[o.Not(s.zk_isr[t]) for t in BROKERS if t != b])),
                o.Implies(s.offline[b], s.dir_failed[b]),
                o.Implies(o.And(s.dir_failed[b], o.Not(s.offline[b]), o.Not(s.is_new[b])),
                          s.zk_isr[b]),
                o.Implies(s.is_new[b], o.And(s.hosted[b], o.Not(s.zk_isr[b]))),
                o.Implies(s.complete[b], s.hosted[b]),
                o.Implies(s.zk_isr[b], s.zk_ar[b]),
                o.Implies(o.And(s.zk_ar[b], o.Not(s.hosted[b])), o.And(
                    o.Not(s.complete[b]), o.Not(s.zk_isr[b]))),
            )),
            o.And(*[o.And(o.Not(s.is_new[b]), o.Implies(s.dir_failed[b], s.offline[b]))
                    for b in BROKERS if b not in RAR]),
            o.Implies(ar_is(o, s, RAR),
                      o.And(*[o.Or(s.zk_isr[b], s.dir_failed[b]) for b in RAR])),
        )

    @m.witness("DONE_ACROSS_FAILOVER")
    def done_across_failover(o: Ops, s: State) -> Term:
        """A reassignment completed although the controller failed over in its middle."""
        return o.And(o.Eq(s.phase, _P.DONE), s.failed_over_mid_reassignment)

    return m


P, H, V = Status.PROVED, Status.HOLDS, Status.VIOLATED

MODELS = (
    ModelDefinition(
        name="reassignment",
        doc="partition reassignment at the controller with failover and log-dir failure",
        build=build,
        variants=(
            Variant(
                "shipped",
                "switch only when RAR ⊆ ISR; create a missing replica only when is_new",
                {},
                shipped=True,
                expected={"REASSIGN_SAFE": P, "ISR_COMPLETE": P, "DIR_FAILURE_ISOLATION": P,
                          "RESUMABLE": P, "STRUCTURE": P},
            ),
            Variant(
                "switch_before_caught_up",
                "AR := RAR before RAR ⊆ ISR",
                {"switch_needs_isr": False},
                expected={"REASSIGN_SAFE": V, "ISR_COMPLETE": V, "DIR_FAILURE_ISOLATION": V,
                          "RESUMABLE": H, "STRUCTURE": V},
            ),
            Variant(
                "recreate_lost_replica",
                "a broker recreates a replica lost with a failed dir, empty, without is_new",
                {"create_needs_is_new": False},
                expected={"REASSIGN_SAFE": H, "ISR_COMPLETE": H, "DIR_FAILURE_ISOLATION": V,
                          "RESUMABLE": H, "STRUCTURE": V},
            ),
        ),
        depth=DEPTH,
        source="design V3 §D/§F; KIP-112; Kafka onPartitionReassignment; KAFKA-10314",
    ),
)
