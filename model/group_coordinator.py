"""The classic group coordinator with its offsets partition, as a checked model.

What is modelled: one consumer group with two members consuming two partitions, coordinated
through the offsets partition ``hash(group) % N`` of ``__consumer_offsets``, which two brokers
replicate. The broker leading that partition is the group's coordinator: it loads the partition
when it becomes leader (``coordinator_elected`` then ``load_completed``) and serves only once
loaded; the old leader unloads. The group goes EMPTY → PREPARING_REBALANCE (``member_joined``,
``member_left``, ``session_expired``) → COMPLETING_REBALANCE (``join_completed``: generation + 1,
members that did not rejoin are dropped) → STABLE (``sync_completed``: the leader's assignment is
written to the offsets partition with acks=all, then each member receives its part with
``assignment_received``). Members commit offsets (``offset_committed``: acks=all) and anyone may
fetch them (``offset_fetched``). Members revoke what they own before they rejoin (the eager
protocol; the cooperative one differs only on the client side, KIP-429). A member whose session
expires is not told: it keeps what it owns, as a paused consumer does.

Each broker has its own replica of the offsets partition (the latest offset record per
partition key and the latest group record) and its own cache of committed offsets. A leader
change truncates the new follower to the new leader's log; with acks=all both replicas hold
every acknowledged record, so the choice of the new leader never loses one (unclean election is
off). The group's membership state is held once, by whichever broker is loaded: a zombie that
keeps it is modelled through its offsets cache, which is what it would answer from.

Ghost variables record what was answered: ``acked`` (the last acknowledged commit per
partition), ``stale_commit`` (a commit accepted from a member not in the current generation) and
``stale_answer`` (an OffsetFetch answered with something other than the last acknowledged
commit).

Known-bad variants: ``commit_any_generation`` (commits accepted without the generation check),
``serve_while_loading`` (answers while the partition is still loading), ``offsets_acks_one``
(records written with acks=1: acknowledged when the leader has them) and ``zombie_coordinator``
(the old leader keeps answering after losing leadership).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

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

#: The brokers replicating the group's offsets partition.
BROKERS = (0, 1)
#: The group's members (a member id stands for one consumer).
MEMBERS = (0, 1)
#: The partitions the group consumes.
PARTITIONS = (0, 1)
#: The highest generation in the model.
GENERATION_MAX = 3
#: The highest committed offset in the model.
OFFSET_MAX = 2


class GroupState(enum.Enum):
    """A group's state (Kafka's ``GroupMetadata``)."""

    EMPTY = "EMPTY"  #: no members; offsets may still be committed and fetched
    PREPARING_REBALANCE = "PREPARING_REBALANCE"  #: waiting for the members to (re)join
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"  #: joined; waiting for the leader's assignment
    STABLE = "STABLE"  #: the generation's assignment is persisted and handed out
    DEAD = "DEAD"  #: the coordinator does not hold the group (unloaded or deleted)


class CoordinatorState(enum.Enum):
    """A broker's state for one offsets partition (``GroupMetadataManager``)."""

    UNLOADED = "UNLOADED"  #: not the leader of the partition: NOT_COORDINATOR
    LOADING = "LOADING"  #: leader, reading the partition: COORDINATOR_LOAD_IN_PROGRESS
    LOADED = "LOADED"  #: leader with the whole partition replayed: serving


_G = GroupState
_C = CoordinatorState
_JOINABLE = (_G.EMPTY, _G.PREPARING_REBALANCE, _G.COMPLETING_REBALANCE, _G.STABLE)
_ACTIVE = (_G.PREPARING_REBALANCE, _G.COMPLETING_REBALANCE, _G.STABLE)

#: The strengthenings that make the invariants inductive.
LEMMAS = ("LOGS_AGREE", "CACHE_CURRENT", "GENERATION_SHAPE", "OWNERSHIP_PERSISTED")


def build(variant: Variant) -> Model:
    """The group coordinator model; flags ``check_generation``, ``wait_for_load``,
    ``acks_all`` and ``unload_on_resign`` (default true)."""
    check_generation = bool(variant.flags.get("check_generation", True))
    wait_for_load = bool(variant.flags.get("wait_for_load", True))
    acks_all = bool(variant.flags.get("acks_all", True))
    unload_on_resign = bool(variant.flags.get("unload_on_resign", True))
    m = Model("group_coordinator", __doc__ or "")
    m.var("leader", Int(0, len(BROKERS) - 1), doc="the leader of the offsets partition")
    m.var("coordinator", Enum(CoordinatorState), over=[BROKERS], doc="each broker's load state")
    m.var("log_offset", Int(0, OFFSET_MAX), over=[BROKERS, PARTITIONS],
          doc="each replica's latest offset record per partition key")
    m.var("log_generation", Int(0, GENERATION_MAX), over=[BROKERS],
          doc="each replica's latest group record: its generation")
    m.var("log_owner", Int(0, len(MEMBERS) - 1), over=[BROKERS, PARTITIONS],
          doc="each replica's latest group record: the owner of each partition")
    m.var("log_member", Bool(), over=[BROKERS, MEMBERS],
          doc="each replica's latest group record: its members")
    m.var("cache_offset", Int(0, OFFSET_MAX), over=[BROKERS, PARTITIONS],
          doc="each broker's cache of committed offsets")
    m.var("state", Enum(GroupState), doc="the group's state at its coordinator")
    m.var("generation", Int(0, GENERATION_MAX), doc="the group's generation")
    m.var("member", Bool(), over=[MEMBERS], doc="the member belongs to the group")
    m.var("joined", Bool(), over=[MEMBERS], doc="the member's JoinGroup is parked")
    m.var("owner", Int(0, len(MEMBERS) - 1), over=[PARTITIONS],
          doc="the assignment of generation ``assigned_generation``")
    m.var("assigned_generation", Int(0, GENERATION_MAX),
          doc="the generation whose assignment ``owner`` is")
    m.var("member_generation", Int(0, GENERATION_MAX), over=[MEMBERS],
          doc="client side: the generation the member last joined")
    m.var("owns", Bool(), over=[MEMBERS, PARTITIONS], doc="client side: the member consumes it")
    m.var("acked", Int(0, OFFSET_MAX), over=[PARTITIONS],
          doc="ghost: the last acknowledged commit per partition")
    m.var("stale_commit", Bool(), doc="ghost: a commit from outside the generation was accepted")
    m.var("stale_answer", Bool(),
          doc="ghost: an OffsetFetch answered other than the last acknowledged commit")

    @m.init()
    def init(o: Ops) -> Mapping[str, Term]:
        return {
            "leader": 0, "coordinator": {0: _C.LOADED, 1: _C.UNLOADED},
            "log_offset": 0, "log_generation": 0, "log_owner": 0, "log_member": False,
            "cache_offset": 0, "state": _G.EMPTY, "generation": 0, "member": False,
            "joined": False, "owner": 0, "assigned_generation": 0, "member_generation": 0,
            "owns": False, "acked": 0, "stale_commit": False, "stale_answer": False,
        }

    def serving(o: Ops, s: State) -> Term:
        """The group's coordinator (the leader) has loaded the partition."""
        return o.Or(*[o.And(s.leader == b, o.Eq(s.coordinator[b], _C.LOADED)) for b in BROKERS])

    def answers(o: Ops, s: State, b: int) -> Term:
        """Broker ``b`` answers group requests (it believes it is the coordinator)."""
        if wait_for_load:
            return o.Eq(s.coordinator[b], _C.LOADED)
        return o.Ne(s.coordinator[b], _C.UNLOADED)

    @m.action(modifies=["leader", "coordinator", "cache_offset", "log_offset", "log_generation",
                        "log_owner", "log_member", "state", "joined"],
              params={"b": BROKERS})
    def coordinator_elected(o: Ops, s: State, b: int) -> Transition:
        """Broker ``b`` becomes leader of the offsets partition (the other was in the ISR): it
        starts loading; the old leader resigns and unloads; the follower truncates to ``b``."""
        old = 1 - b
        return Transition(s.leader == old, {
            "leader": b,
            "coordinator": {b: _C.LOADING,
                            old: _C.UNLOADED if unload_on_resign else s.coordinator[old]},
            "cache_offset": {(b, p): 0 for p in PARTITIONS},
            "log_offset": {(old, p): s.log_offset[b, p] for p in PARTITIONS},
            "log_generation": {old: s.log_generation[b]},
            "log_owner": {(old, p): s.log_owner[b, p] for p in PARTITIONS},
            "log_member": {(old, n): s.log_member[b, n] for n in MEMBERS},
            "state": _G.DEAD, "joined": False,
        })

    @m.action(modifies=["coordinator", "cache_offset", "state", "generation", "member", "joined",
                        "owner", "assigned_generation"], params={"b": BROKERS})
    def load_completed(o: Ops, s: State, b: int) -> Transition:
        """Leader ``b`` has replayed the partition: offsets into its cache, the group from its
        latest group record (STABLE with its members, or EMPTY)."""
        guard = o.And(o.Eq(s.coordinator[b], _C.LOADING), s.leader == b)
        has_members = o.Or(*[s.log_member[b, n] for n in MEMBERS])
        return Transition(guard, {
            "coordinator": {b: _C.LOADED},
            "cache_offset": {(b, p): s.log_offset[b, p] for p in PARTITIONS},
            "state": o.If(has_members, _G.STABLE, _G.EMPTY),
            "generation": s.log_generation[b],
            "member": {n: s.log_member[b, n] for n in MEMBERS},
            "joined": False,
            "owner": {p: s.log_owner[b, p] for p in PARTITIONS},
            "assigned_generation": s.log_generation[b],
        })

    @m.action(modifies=["member", "joined", "state", "owns"], params={"n": MEMBERS})
    def member_joined(o: Ops, s: State, n: int) -> Transition:
        """JoinGroup from member ``n`` (having revoked what it owned): parked; a rebalance."""
        guard = o.And(serving(o, s), o.In(s.state, _JOINABLE), o.Not(s.joined[n]))
        return Transition(guard, {
            "member": {n: True}, "joined": {n: True}, "state": _G.PREPARING_REBALANCE,
            "owns": {(n, p): False for p in PARTITIONS},
        })

    @m.action(modifies=["member", "joined", "state", "generation", "member_generation"])
    def join_completed(o: Ops, s: State) -> Transition:
        """Every member rejoined or the rebalance timeout passed: the next generation holds the
        members that rejoined; each gets the JoinGroup answer."""
        guard = o.And(serving(o, s), o.Eq(s.state, _G.PREPARING_REBALANCE),
                      s.generation < GENERATION_MAX)
        any_joined = o.Or(*[s.joined[n] for n in MEMBERS])
        return Transition(guard, {
            "member": {n: s.joined[n] for n in MEMBERS},
            "joined": False,
            "state": o.If(any_joined, _G.COMPLETING_REBALANCE, _G.EMPTY),
            "generation": s.generation + 1,
            "member_generation": {n: o.If(s.joined[n], s.generation + 1, s.member_generation[n])
                                  for n in MEMBERS},
        })

    @m.action(modifies=["log_generation", "log_owner", "log_member", "owner",
                        "assigned_generation", "state"],
              params={"a0": MEMBERS, "a1": MEMBERS})
    def sync_completed(o: Ops, s: State, a0: int, a1: int) -> Transition:
        """The leader's SyncGroup carries the assignment (partition 0 to ``a0``, 1 to ``a1``);
        the group record is written through the leader, then the group is STABLE."""
        assignment = {0: a0, 1: a1}
        guard = o.And(serving(o, s), o.Eq(s.state, _G.COMPLETING_REBALANCE),
                      s.member[a0], s.member[a1])
        targets = BROKERS if acks_all else None
        updates: dict[str, Term] = {
            "owner": assignment, "assigned_generation": s.generation, "state": _G.STABLE,
        }
        if targets is not None:
            updates["log_generation"] = dict.fromkeys(targets, s.generation)
            updates["log_owner"] = {(t, p): assignment[p] for t in targets for p in PARTITIONS}
            updates["log_member"] = {(t, n): s.member[n] for t in targets for n in MEMBERS}
        else:
            updates["log_generation"] = {
                t: o.If(s.leader == t, s.generation, s.log_generation[t]) for t in BROKERS}
            updates["log_owner"] = {
                (t, p): o.If(s.leader == t, assignment[p], s.log_owner[t, p])
                for t in BROKERS for p in PARTITIONS}
            updates["log_member"] = {
                (t, n): o.If(s.leader == t, s.member[n], s.log_member[t, n])
                for t in BROKERS for n in MEMBERS}
        return Transition(guard, updates)

    @m.action(modifies=["owns"], params={"n": MEMBERS})
    def assignment_received(o: Ops, s: State, n: int) -> Transition:
        """Member ``n`` gets its SyncGroup answer: its part of the generation's assignment."""
        guard = o.And(serving(o, s), o.Eq(s.state, _G.STABLE), s.member[n],
                      s.member_generation[n] == s.generation,
                      s.assigned_generation == s.generation)
        return Transition(guard, {"owns": {(n, p): s.owner[p] == n for p in PARTITIONS}})

    @m.action(modifies=["member", "joined", "state", "owns"], params={"n": MEMBERS})
    def member_left(o: Ops, s: State, n: int) -> Transition:
        """LeaveGroup from member ``n`` (it revoked what it owned): a rebalance."""
        guard = o.And(serving(o, s), s.member[n], o.In(s.state, _ACTIVE))
        return Transition(guard, {
            "member": {n: False}, "joined": {n: False}, "state": _G.PREPARING_REBALANCE,
            "owns": {(n, p): False for p in PARTITIONS},
        })

    @m.action(modifies=["member", "joined", "state"], params={"n": MEMBERS})
    def session_expired(o: Ops, s: State, n: int) -> Transition:
        """Member ``n`` sent no heartbeat within its session timeout: removed, a rebalance; the
        member itself is not told and keeps what it owns."""
        guard = o.And(serving(o, s), s.member[n], o.In(s.state, _ACTIVE))
        return Transition(guard, {
            "member": {n: False}, "joined": {n: False}, "state": _G.PREPARING_REBALANCE,
        })

    @m.action(modifies=["log_offset", "cache_offset", "acked", "stale_commit"],
              params={"b": BROKERS, "n": MEMBERS, "p": PARTITIONS})
    def offset_committed(o: Ops, s: State, b: int, n: int, p: int) -> Transition:
        """OffsetCommit by member ``n`` of the next offset of partition ``p`` through broker
        ``b``: accepted from a member of the current generation (not while the assignment is
        being completed), written through the leader, then acknowledged."""
        in_generation = o.And(s.member[n], s.member_generation[n] == s.generation)
        fence = in_generation if check_generation else s.member[n]
        guard = o.And(answers(o, s, b), s.leader == b, fence,
                      o.In(s.state, (_G.STABLE, _G.PREPARING_REBALANCE)),
                      s.acked[p] < OFFSET_MAX)
        value = s.acked[p] + 1
        targets = BROKERS if acks_all else (b,)
        return Transition(guard, {
            "log_offset": {(t, p): value for t in targets},
            "cache_offset": {(b, p): value},
            "acked": {p: value},
            "stale_commit": o.Or(s.stale_commit, o.Not(in_generation)),
        })

    @m.action(modifies=["stale_answer"], params={"b": BROKERS, "p": PARTITIONS})
    def offset_fetched(o: Ops, s: State, b: int, p: int) -> Transition:
        """OffsetFetch of partition ``p`` answered by broker ``b`` from its cache."""
        return Transition(answers(o, s, b), {
            "stale_answer": o.Or(s.stale_answer, s.cache_offset[b, p] != s.acked[p]),
        })

    @m.action(modifies=["log_offset", "log_generation", "log_owner", "log_member"])
    def replicated(o: Ops, s: State) -> Transition:
        """The follower fetches: its replica becomes the leader's."""
        def follower_copy(t: int, array: str, key: int) -> Term:
            other = getattr(s, array)[(1 - t, key)]
            return o.If(s.leader == t, getattr(s, array)[(t, key)], other)
        return Transition(True, {
            "log_offset": {(t, p): follower_copy(t, "log_offset", p)
                           for t in BROKERS for p in PARTITIONS},
            "log_generation": {t: o.If(s.leader == t, s.log_generation[t],
                                       s.log_generation[1 - t]) for t in BROKERS},
            "log_owner": {(t, p): follower_copy(t, "log_owner", p)
                          for t in BROKERS for p in PARTITIONS},
            "log_member": {(t, n): follower_copy(t, "log_member", n)
                           for t in BROKERS for n in MEMBERS},
        })

    # -- invariants ---------------------------------------------------------------------

    @m.invariant("GROUP_ASSIGNMENT_EXCLUSIVE", supports=LEMMAS)
    def group_assignment_exclusive(o: Ops, s: State) -> Term:
        """Within one generation no partition is owned by two members."""
        return o.ForAll(PARTITIONS, lambda p: o.Not(o.And(
            s.owns[0, p], s.owns[1, p], s.member_generation[0] == s.member_generation[1])))

    @m.invariant("GROUP_COMMIT_FENCED", supports=LEMMAS)
    def group_commit_fenced(o: Ops, s: State) -> Term:
        """No commit from a stale generation or an unknown member was accepted."""
        return o.Not(s.stale_commit)

    @m.invariant("OFFSETS_DURABLE", supports=LEMMAS)
    def offsets_durable(o: Ops, s: State) -> Term:
        """The leader's replica, whichever broker leads, holds every acknowledged commit."""
        return o.ForAll(BROKERS, lambda b: o.Implies(
            s.leader == b, o.ForAll(PARTITIONS, lambda p: s.log_offset[b, p] == s.acked[p])))

    @m.invariant("COORDINATOR_LOADED", supports=LEMMAS)
    def coordinator_loaded(o: Ops, s: State) -> Term:
        """Every OffsetFetch answer was the last acknowledged commit: nobody answered from an
        unloaded or half-loaded cache."""
        return o.Not(s.stale_answer)

    # -- lemmas -------------------------------------------------------------------------

    @m.lemma("LOGS_AGREE", supports=LEMMAS)
    def logs_agree(o: Ops, s: State) -> Term:
        """Both replicas hold the same records, the acknowledged offsets among them."""
        return o.And(
            o.ForAll(PARTITIONS, lambda p: o.And(
                s.log_offset[0, p] == s.log_offset[1, p], s.log_offset[0, p] == s.acked[p],
                s.log_owner[0, p] == s.log_owner[1, p])),
            s.log_generation[0] == s.log_generation[1],
            o.ForAll(MEMBERS, lambda n: o.Eq(s.log_member[0, n], s.log_member[1, n])),
        )

    @m.lemma("CACHE_CURRENT", supports=LEMMAS)
    def cache_current(o: Ops, s: State) -> Term:
        """Only the leader loads or is loaded; a loaded cache equals its replica; the group is
        held (not DEAD) exactly when the leader is loaded."""
        def shape(b: int) -> Term:
            return o.And(
                o.Implies(o.Ne(s.coordinator[b], _C.UNLOADED), s.leader == b),
                o.Implies(o.Eq(s.coordinator[b], _C.LOADED), o.ForAll(
                    PARTITIONS, lambda p: s.cache_offset[b, p] == s.log_offset[b, p])))
        return o.And(o.ForAll(BROKERS, shape),
                     o.Eq(o.Eq(s.state, _G.DEAD), o.Not(serving(o, s))))

    @m.lemma("GENERATION_SHAPE", supports=LEMMAS)
    def generation_shape(o: Ops, s: State) -> Term:
        """While served, the persisted group record is of the current generation or older, and
        so is the assignment in memory; a completing rebalance has
        none yet; parked joiners own nothing and the group is preparing."""
        return o.And(
            s.assigned_generation <= s.generation,
            o.Implies(serving(o, s),
                      o.ForAll(BROKERS, lambda b: s.log_generation[b] <= s.generation)),
            o.Implies(o.Eq(s.state, _G.COMPLETING_REBALANCE),
                      s.assigned_generation < s.generation),
            o.Implies(s.assigned_generation == s.generation, o.ForAll(BROKERS, lambda b: o.And(
                s.log_generation[b] == s.generation,
                o.ForAll(PARTITIONS, lambda p: s.log_owner[b, p] == s.owner[p])))),
            o.ForAll(MEMBERS, lambda n: o.Implies(s.joined[n], o.And(
                o.Eq(s.state, _G.PREPARING_REBALANCE), s.member[n],
                o.ForAll(PARTITIONS, lambda p: o.Not(s.owns[n, p]))))),
        )

    @m.lemma("OWNERSHIP_PERSISTED", supports=LEMMAS)
    def ownership_persisted(o: Ops, s: State) -> Term:
        """What a member owns came from a persisted group record of its generation: no newer
        than the replicas' record, and that record's owner when it is the same generation."""
        def owned(n: int, p: int) -> Term:
            return o.Implies(s.owns[n, p], o.And(
                o.Implies(s.member_generation[n] == s.generation,
                          o.And(s.assigned_generation == s.generation, s.owner[p] == n)),
                o.ForAll(BROKERS, lambda b: o.And(
                    s.member_generation[n] <= s.log_generation[b],
                    o.Implies(s.member_generation[n] == s.log_generation[b],
                              s.log_owner[b, p] == n)))))
        return o.ForAll(MEMBERS, lambda n: o.ForAll(PARTITIONS, lambda p: owned(n, p)))

    @m.witness("REBALANCED_AFTER_FAILOVER")
    def rebalanced_after_failover(o: Ops, s: State) -> Term:
        """The coordinator moved and reloaded, offsets were committed, and both members own a
        partition of one generation."""
        return o.And(s.leader == 1, o.Eq(s.coordinator[1], _C.LOADED), s.acked[0] >= 1,
                     s.owns[0, 0], s.owns[1, 1],
                     s.member_generation[0] == s.member_generation[1])

    return m


MODELS = (
    ModelDefinition(
        name="group_coordinator",
        doc="the classic group protocol with its offsets partition: exclusive assignment, "
        "fenced commits, durable offsets, answers only from loaded state",
        build=build,
        variants=(
            Variant("shipped", "generation-checked commits, serve after load, acks=all, "
                    "unload on resignation", shipped=True,
                    expected={"GROUP_ASSIGNMENT_EXCLUSIVE": Status.PROVED,
                              "GROUP_COMMIT_FENCED": Status.PROVED,
                              "OFFSETS_DURABLE": Status.PROVED,
                              "COORDINATOR_LOADED": Status.PROVED}),
            Variant("commit_any_generation",
                    "OffsetCommit accepted from a member of any generation",
                    {"check_generation": False},
                    expected={"GROUP_COMMIT_FENCED": Status.VIOLATED}),
            Variant("serve_while_loading",
                    "the coordinator answers before its load of the partition completes",
                    {"wait_for_load": False},
                    expected={"COORDINATOR_LOADED": Status.VIOLATED}),
            Variant("offsets_acks_one",
                    "group and offset records written with acks=1",
                    {"acks_all": False},
                    expected={"OFFSETS_DURABLE": Status.VIOLATED}),
            Variant("zombie_coordinator",
                    "the old leader keeps answering after losing the offsets partition",
                    {"unload_on_resign": False},
                    expected={"COORDINATOR_LOADED": Status.VIOLATED}),
        ),
        depth=9,
        source="Kafka GroupCoordinator/GroupMetadataManager (classic protocol), KIP-345, KIP-394",
    ),
)
