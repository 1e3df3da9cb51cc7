"""The replication machine: leader epochs, high watermark, ISR and truncation (spec/replication.md).

One partition on three replicas, after the replication design V3 (seed ``004`` §A, §C, §G and
discussion 3), KIP-101 (leader epochs), KIP-279 (OffsetForLeaderEpoch v1) and KIP-320 (fencing by
the leader epoch). A record is identified by ``(offset, epoch)`` — a leader appends at most one
record per offset in its epoch and :data:`LEADER_UNIQUE` makes that leader unique — so a log is a
sequence of epochs (``0`` past the log end). ZooKeeper's partition state (leader, leader epoch,
ISR, zkVersion) is written atomically by the controller; followers learn of an election in an
action of their own, so any follower may lag behind any number of elections (the zombie leaders
of design V3 discussion 3 stay in the model).

The truncation rule is the variant's choice (:class:`TruncationPolicy`): the design V3 text
(truncate to the local HW) is refuted by KIP-101 scenarios 1 and 2; KIP-101's epoch rule without
KIP-279 is refuted by the fast leader change of KAFKA-6361; the shipped rule (KIP-279 with
KIP-320's fencing) is proved: LEADER_UNIQUE, LOG_MATCHING, COMMITTED_DURABLE and
NO_COMMITTED_LOSS are inductive together with the lemmas written next to them. The bounds (three
replicas, two log slots, leader epochs 1..3, two initial states) and the depth are written in the
spec and in ``MODELS``.
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


class ReplicaRole(enum.Enum):
    """The role a replica believes it has (design V3 §C)."""

    LEADER = "LEADER"  #: design V3 §C becomeLeader: serves produce and fetch, advances the HW
    FOLLOWER = "FOLLOWER"  #: design V3 §C becomeFollower: truncates, then fetches from the leader
    OFFLINE = "OFFLINE"  #: crashed or restarted without a LeaderAndIsr yet (design V3 §E)


class ReplicationEvent(enum.Enum):
    """The transitions of the replication machine (model action = lower-case name)."""

    BECOME_LEADER = "BECOME_LEADER"  #: design V3 §A election + §C becomeLeader
    BECOME_FOLLOWER = "BECOME_FOLLOWER"  #: design V3 §C becomeFollower (truncation included)
    LEADER_APPEND = "LEADER_APPEND"  #: a produce request appended by the leader
    FOLLOWER_FETCH = "FOLLOWER_FETCH"  #: design V3 §G ReplicaFetchRequest and its response
    HW_ADVANCE = "HW_ADVANCE"  #: design V3 §G ``leader.hw = min of leo of every replica in ISR``
    ISR_SHRINK = "ISR_SHRINK"  #: design V3 §G maybe_change_ISR, conditional on the zkVersion
    ISR_EXPAND = "ISR_EXPAND"  #: design V3 §G maybe_change_ISR; KIP-320 rule 4
    TRUNCATE = "TRUNCATE"  #: KIP-101/279 truncation; performed inside ``become_follower`` here
    CRASH = "CRASH"  #: process crash (power failure variants: the unflushed suffix is lost)
    RESTART = "RESTART"  #: process restart (design V3 §E), role OFFLINE until told


class TruncationPolicy(enum.Enum):
    """How a replica truncates its log when it becomes a follower."""

    HIGH_WATERMARK = "HIGH_WATERMARK"  #: design V3 §C becomeFollower: truncate to the local HW
    LEADER_EPOCH = "LEADER_EPOCH"  #: KIP-101 OffsetForLeaderEpoch (KIP-279 v1 when shipped)


#: How many replicas the partition has (the proofs' bound; see ``build``'s ``replicas`` flag).
REPLICA_COUNT = 3
#: Replica (broker) ids of the partition.
REPLICAS = range(REPLICA_COUNT)
#: Log slots: offsets ``0 .. MAX_LOG - 1``.
MAX_LOG = 2
OFFSETS = range(MAX_LOG)
#: The highest leader epoch an election may write (epoch 1 is the initial one).
MAX_EPOCH = 3
#: The default bounded-model-checking depth: every known-bad variant is refuted within it (its
#: longest first counterexample, KAFKA-6361 and KIP-320 rule 4, takes 5 steps).
DEPTH = 5

#: The length of the shortest run on which two logs diverge (LOG_MATCHING itself broken) in
#: the variants that let them diverge (KIP-101 scenario 2, KAFKA-6361): past DEPTH, so those
#: counterexamples are searched on their own (``Variant.beyond``).
DIVERGENCE_LENGTH = 7

#: Integers are encoded in 6-bit bit-vectors (-32..31): every integer of the model lies in
#: -1..MAX_EPOCH + 1 (an epoch plus one), within the ±16 the encoding requires for headroom, and
#: the model adds only one to a value or compares two; 16 bits would cost twice the solving time.
INT_BITS = 6

#: The ISR at the start: replica 2 is a follower that has not caught up yet.
INITIAL_ISR = (0, 1)
#: The two initial states (see ``init``).
STARTS = ("empty", "committed")

NONE = -1
#: The durability invariants and the lemmas they are proved with.
DURABILITY = ("LEADER_UNIQUE", "EPOCH_BOUND", "LOG_SHAPE", "LEADER_OWNS_EPOCH", "FOLLOWER_PREFIX",
              "LOG_MATCHING", "HW_COMMITTED", "WELL_FORMED", "VOUCHED", "COMMITTED_DURABLE",
              "NO_COMMITTED_LOSS")
#: LOG_MATCHING and the lemmas it is proved with, each supporting the others.
LOG_LEMMAS = ("LEADER_UNIQUE", "EPOCH_BOUND", "LOG_SHAPE", "LEADER_OWNS_EPOCH", "FOLLOWER_PREFIX",
              "LOG_MATCHING")


def _ordered_pairs(replicas: range = REPLICAS) -> list[tuple[int, int]]:
    return [(a, b) for a in replicas for b in replicas if a < b]


def build(variant: Variant) -> Model:
    """The replication model of one variant.

    Flags (all optional; the defaults are the shipped protocol):
        policy: :class:`TruncationPolicy` (``LEADER_EPOCH``).
        kip279: with ``LEADER_EPOCH``, truncate to the common prefix (KIP-279) rather than to the
            KIP-101 answer for the follower's last epoch (``True``).
        unclean: allow an out-of-ISR replica to be elected when no ISR member is live (``False``):
            ``unclean.leader.election.enable``, or an operator's ElectLeaders UNCLEAN (KIP-460),
            which takes the same transition when asked.
        power_failure: a crash may lose the replica's unflushed suffix above its HW (``False``).
        rule4: KIP-320 rule 4, ISR expansion only once the leader's HW reached its epoch start
            (``True``).
        replicas: how many replicas (3). The proofs and the known-bad variants use three; the
            trace checker builds the same definitions over as many replicas as a simulated
            partition has had (a reassignment across four or more brokers), to replay it.
    """
    flags = variant.flags
    policy: TruncationPolicy = flags.get("policy", TruncationPolicy.LEADER_EPOCH)
    kip279: bool = flags.get("kip279", True)
    unclean: bool = flags.get("unclean", False)
    power_failure: bool = flags.get("power_failure", False)
    rule4: bool = flags.get("rule4", True)
    REPLICAS = range(flags.get("replicas", REPLICA_COUNT))  # noqa: N806 (shadows the default)
    count = "three" if len(REPLICAS) == REPLICA_COUNT else str(len(REPLICAS))

    m = Model(
        "replication",
        f"one partition on {count} replicas: leader epochs, HW, ISR, truncation "
        "(design V3, KIP-101/279/320)",
        int_bits=INT_BITS,
    )
    m.var("zk_leader", Int(NONE, len(REPLICAS) - 1), doc="leader in the partition state znode")
    m.var("zk_epoch", Int(1, MAX_EPOCH), doc="leader epoch in the partition state znode")
    m.var("zk_isr", Bool(), over=[REPLICAS], doc="ISR in the partition state znode")
    m.var("live", Bool(), over=[REPLICAS], doc="the broker process runs")
    m.var("role", Enum(ReplicaRole), over=[REPLICAS], doc="the role the replica believes")
    m.var("epoch", Int(1, MAX_EPOCH), over=[REPLICAS], doc="leader epoch last accepted")
    m.var("leader", Int(0, len(REPLICAS) - 1), over=[REPLICAS], doc="the leader it follows")
    m.var("log", Int(0, MAX_EPOCH), over=[REPLICAS, OFFSETS],
          doc="epoch of the record at each offset; 0 at and past the LEO")
    m.var("leo", Int(0, MAX_LOG), over=[REPLICAS], doc="log end offset")
    m.var("hw", Int(0, MAX_LOG), over=[REPLICAS], doc="high watermark")
    m.var("epoch_start", Int(0, MAX_LOG), over=[REPLICAS],
          doc="LEO when the replica became leader: the start offset of its epoch")
    m.var("local_isr", Bool(), over=[REPLICAS, REPLICAS], doc="the ISR a leader believes")
    m.var("remote_leo", Int(NONE, MAX_LOG), over=[REPLICAS, REPLICAS],
          doc="a leader's view of a follower's LEO (its last fetch offset); -1 unknown")
    m.var("committed", Int(0, MAX_EPOCH), over=[OFFSETS],
          doc="ghost: every record a leader ever exposed below its HW")
    m.var("committed_len", Int(0, MAX_LOG), doc="ghost: how many offsets are committed")

    def entry(o: Ops, s: State, r: Term, i: int) -> Term:
        """``log[r][i]`` for a replica ``r`` that may be symbolic (a three-way choice)."""
        if not o.is_symbolic_key(r):
            return s.log[(r, i)]
        value = s.log[(REPLICAS[-1], i)]
        for t in reversed(REPLICAS[:-1]):
            value = o.If(r == t, s.log[(t, i)], value)
        return value

    def has_prefix(o: Ops, s: State, r: Term, length: Term) -> Term:
        """Replica ``r`` holds the committed records ``0 .. length-1``."""
        return o.ForAll(OFFSETS, lambda i: o.Implies(
            i < length, o.And(i < s.leo[r], o.Eq(entry(o, s, r, i), s.committed[i]))))

    def truncated_log(o: Ops, s: State, r: int, new_leo: Term) -> dict[Any, Term]:
        return {(r, i): o.If(i < new_leo, s.log[(r, i)], 0) for i in OFFSETS}

    def truncation_point(o: Ops, s: State, r: int, leader: Term) -> Term:
        """The LEO follower ``r`` keeps when it starts following ``leader``."""
        leo_r = s.leo[r]
        if policy is TruncationPolicy.HIGH_WATERMARK:
            return o.Min(leo_r, s.hw[r])
        leo_l = s.leo[leader]
        if kip279:
            # KIP-279: OffsetForLeaderEpoch v1 iterated to its fixed point, the longest common
            # prefix (records are (offset, epoch), so equal epochs mean equal records).
            point: Term = 0
            for k in range(1, MAX_LOG + 1):
                point = o.If(o.And(k <= leo_r, k <= leo_l, *[
                    s.log[(r, i)] == entry(o, s, leader, i) for i in range(k)
                ]), k, point)
            return point
        # KIP-101: ask for the epoch of the last record; the leader answers the start offset of
        # the first epoch above it in its own log (its LEO when there is none).
        last_epoch: Term = 0
        for k in range(1, MAX_LOG + 1):
            last_epoch = o.If(leo_r == k, s.log[(r, k - 1)], last_epoch)
        answer = leo_l
        for i in reversed(OFFSETS):
            answer = o.If(o.And(i < leo_l, entry(o, s, leader, i) > last_epoch), i, answer)
        return o.If(leo_r == 0, 0, o.Min(answer, leo_r))

    def is_leader(o: Ops, s: State, r: Term) -> Term:
        return o.Eq(s.role[r], ReplicaRole.LEADER)

    def current_leader(o: Ops, s: State, r: int) -> Term:
        """``r`` leads in ZooKeeper's epoch: the zkVersion it cached is still ZooKeeper's (every
        write by anyone else is an election, which raises the epoch)."""
        return o.And(s.zk_leader == r, is_leader(o, s, r), s.epoch[r] == s.zk_epoch)

    def holds_log_of(o: Ops, s: State, r: int, leader: int, length: Term) -> Term:
        """Replica ``r`` holds ``leader``'s log up to ``length``."""
        return o.And(*[o.Implies(i < length, o.And(i < s.leo[r],
                                                   s.log[(r, i)] == s.log[(leader, i)]))
                       for i in OFFSETS])

    def stale_bound(o: Ops, s: State, r: int) -> Term:
        """The least fetch offset leader ``r`` holds from an ISR member that has since moved
        to a later epoch (its LEO when there is none)."""
        least: Term = s.leo[r]
        for t in REPLICAS:
            if t != r:
                least = o.If(o.And(s.local_isr[(r, t)], s.epoch[t] > s.epoch[r]),
                             o.Min(least, s.remote_leo[(r, t)]), least)
        return least

    def vouched(o: Ops, s: State, r: int, u: int) -> Term:
        """How much of leader ``r``'s log replica ``u`` is known to hold."""
        bound = stale_bound(o, s, r)
        return o.If(o.And(s.local_isr[(r, u)], s.epoch[u] <= s.epoch[r]),
                    o.Min(bound, s.remote_leo[(r, u)]), bound)

    @m.init(params={"start": STARTS})
    def init(o: Ops, start: str) -> dict[str, Any]:
        """Replica 0 leads epoch 1 with ISR {0, 1}; replica 2 has not caught up yet.

        ``empty``: every log is empty. ``committed``: the state ``empty`` reaches after
        ``leader_append(0)``, ``follower_fetch(1)`` twice and ``hw_advance(0)`` — one record
        committed, on the leader and on follower 1, whose HW still lags one round trip behind.
        It is reachable from ``empty``, so the reachable states are the same; starting there too
        lets the bounded check reach four steps further past the first commit.
        """
        committed = start == "committed"
        return {
            "zk_leader": 0,
            "zk_epoch": 1,
            "zk_isr": {r: r in INITIAL_ISR for r in REPLICAS},
            "live": True,
            "role": {r: ReplicaRole.LEADER if r == 0 else ReplicaRole.FOLLOWER
                     for r in REPLICAS},
            "epoch": 1,
            "leader": 0,
            "log": {(r, i): 1 if committed and i == 0 and r in INITIAL_ISR else 0
                    for r in REPLICAS for i in OFFSETS},
            "leo": {r: 1 if committed and r in INITIAL_ISR else 0 for r in REPLICAS},
            "hw": {r: 1 if committed and r == 0 else 0 for r in REPLICAS},
            "epoch_start": 0,
            "local_isr": {(r, t): r == 0 and t in INITIAL_ISR for r in REPLICAS for t in REPLICAS},
            "remote_leo": {(r, t): 1 if committed and r == 0 and t == 1 else 0
                           for r in REPLICAS for t in REPLICAS},
            "committed": {i: 1 if committed and i == 0 else 0 for i in OFFSETS},
            "committed_len": 1 if committed else 0,
        }

    @m.action(
        modifies=["zk_leader", "zk_epoch", "zk_isr", "role", "epoch", "leader", "epoch_start",
                  "local_isr", "remote_leo"],
        params={"r": REPLICAS},
    )
    def become_leader(o: Ops, s: State, r: int) -> Transition:
        """The controller elects ``r`` (design V3 §A) and ``r`` becomes leader (§C).

        Clean: ``r`` is a live ISR member; the new ISR is the live part of the old one. Unclean
        (variant): any live replica when no ISR member is live; the new ISR is ``{r}``. The new
        leader forgets its followers' LEOs (unknown until they fetch in its epoch).
        """
        eligible: Term = s.zk_isr[r]
        if unclean:
            any_isr_live = o.Exists(REPLICAS, lambda t: o.And(s.zk_isr[t], s.live[t]))
            eligible = o.Or(s.zk_isr[r], o.Not(any_isr_live))
        new_epoch = s.zk_epoch + 1
        new_isr = {
            t: o.If(s.zk_isr[r], o.And(s.zk_isr[t], s.live[t]), t == r) for t in REPLICAS
        }
        return Transition(
            o.And(s.live[r], s.zk_epoch < MAX_EPOCH, eligible),
            {
                "zk_leader": r,
                "zk_epoch": new_epoch,
                "zk_isr": new_isr,
                "role": {r: ReplicaRole.LEADER},
                "epoch": {r: new_epoch},
                "leader": {r: r},
                "epoch_start": {r: s.leo[r]},
                "local_isr": {(r, t): new_isr[t] for t in REPLICAS},
                "remote_leo": {(r, t): NONE for t in REPLICAS},
            },
        )

    @m.action(modifies=["role", "epoch", "leader", "log", "leo", "hw"], params={"r": REPLICAS})
    def become_follower(o: Ops, s: State, r: int) -> Transition:
        """``r`` accepts the LeaderAndIsr of ZooKeeper's leader and truncates (design V3 §C).

        KIP-320 rules 1 and 2: the follower truncates before it fetches, against the leader of
        the epoch it has just accepted.
        """
        leader = s.zk_leader
        guard = o.And(
            s.live[r], leader != NONE, leader != r, is_leader(o, s, leader),
            s.epoch[leader] == s.zk_epoch,
            o.Or(s.epoch[r] < s.zk_epoch, o.Eq(s.role[r], ReplicaRole.OFFLINE)),
        )
        new_leo = truncation_point(o, s, r, leader)
        return Transition(guard, {
            "role": {r: ReplicaRole.FOLLOWER},
            "epoch": {r: s.zk_epoch},
            "leader": {r: o.Max(leader, 0)},
            "log": truncated_log(o, s, r, new_leo),
            "leo": {r: new_leo},
            "hw": {r: o.Min(s.hw[r], new_leo)},
        })

    @m.action(modifies=["log", "leo"], params={"r": REPLICAS})
    def leader_append(o: Ops, s: State, r: int) -> Transition:
        """A replica that believes it leads appends one record in its epoch."""
        leo_r = s.leo[r]
        return Transition(
            o.And(is_leader(o, s, r), leo_r < MAX_LOG),
            {
                "log": {(r, i): o.If(leo_r == i, s.epoch[r], s.log[(r, i)]) for i in OFFSETS},
                "leo": {r: leo_r + 1},
            },
        )

    @m.action(modifies=["log", "leo", "hw", "remote_leo"],
              params={"f": REPLICAS, "delivered": (True, False)})
    def follower_fetch(o: Ops, s: State, f: int, delivered: bool) -> Transition:
        """Follower ``f`` fetches from the leader it follows (design V3 §G, KIP-320 fencing).

        The leader records the fetch offset as ``f``'s LEO and answers every record from it to
        its LEO with its HW as it stands: the HW this fetch lets it raise (``hw_advance``)
        reaches the follower only with its next fetch. With ``delivered`` false the response is
        lost: the leader has recorded the fetch offset, the follower is unchanged.
        """
        leader = s.leader[f]
        leo_f = s.leo[f]
        leo_l = s.leo[leader]
        guard = o.And(
            o.Eq(s.role[f], ReplicaRole.FOLLOWER), leader != f, is_leader(o, s, leader),
            s.epoch[leader] == s.epoch[f], leo_f <= leo_l,
        )
        remote = {(t, f): o.If(leader == t, leo_f, s.remote_leo[(t, f)])
                  for t in REPLICAS if t != f}
        if not delivered:
            return Transition(guard, {"remote_leo": remote})
        return Transition(guard, {
            "log": {(f, i): o.If(leo_f <= i, entry(o, s, leader, i), s.log[(f, i)])
                    for i in OFFSETS},
            "leo": {f: leo_l},
            "hw": {f: o.Min(s.hw[leader], leo_l)},
            "remote_leo": remote,
        })

    @m.action(modifies=["hw", "committed", "committed_len"], params={"r": REPLICAS})
    def hw_advance(o: Ops, s: State, r: int) -> Transition:
        """Leader ``r`` raises its HW to the least LEO of the ISR it believes (design V3 §G).

        KIP-320 rule 3 holds by construction: remote LEOs are reset when a replica becomes
        leader and only fenced fetches in its own epoch set them.
        """
        new_hw: Term = s.leo[r]
        for t in REPLICAS:
            if t != r:
                new_hw = o.If(s.local_isr[(r, t)], o.Min(new_hw, s.remote_leo[(r, t)]), new_hw)
        return Transition(
            o.And(is_leader(o, s, r), new_hw > s.hw[r]),
            {
                "hw": {r: new_hw},
                "committed": {
                    i: o.If(o.And(s.committed_len <= i, i < new_hw), s.log[(r, i)],
                            s.committed[i])
                    for i in OFFSETS
                },
                "committed_len": o.Max(s.committed_len, new_hw),
            },
        )

    @m.action(modifies=["zk_isr", "local_isr"], params={"f": REPLICAS})
    def isr_shrink(o: Ops, s: State, f: int) -> Transition:
        """ZooKeeper's leader drops ``f`` from the ISR with a write conditional on its cached
        zkVersion (design V3 §G)."""
        return _isr_change(o, s, f, shrink=True)

    @m.action(modifies=["zk_isr", "local_isr"], params={"f": REPLICAS})
    def isr_expand(o: Ops, s: State, f: int) -> Transition:
        """ZooKeeper's leader adds ``f``, caught up to its HW, with a conditional write.

        KIP-320 rule 4 (shipped): only once the leader's HW has reached the start of its epoch.
        """
        return _isr_change(o, s, f, shrink=False)

    def _isr_change(o: Ops, s: State, f: int, shrink: bool) -> Transition:
        options: list[Term] = []
        for r in REPLICAS:
            if r == f:
                continue
            if shrink:
                allowed = s.local_isr[(r, f)]
            else:
                allowed = o.And(o.Not(s.local_isr[(r, f)]), s.remote_leo[(r, f)] >= s.hw[r])
                if rule4:
                    allowed = o.And(allowed, s.hw[r] >= s.epoch_start[r])
            options.append(o.And(current_leader(o, s, r), allowed))
        return Transition(o.Or(*options), {
            "zk_isr": {f: not shrink},
            "local_isr": {(r, f): o.If(s.zk_leader == r, not shrink, s.local_isr[(r, f)])
                          for r in REPLICAS if r != f},
        })

    crash_params: dict[str, Any] = {"r": REPLICAS}
    if power_failure:
        crash_params["keep"] = range(MAX_LOG + 1)

    @m.action(modifies=["live", "role", "log", "leo"], params=crash_params)
    def crash(o: Ops, s: State, r: int, keep: int | None = None) -> Transition:
        """Replica ``r``'s process dies; with power failure its unflushed suffix is lost.

        The suffix a power failure may take is bounded below by the HW checkpoint.
        """
        if keep is None:
            return Transition(s.live[r], {"live": {r: False}, "role": {r: ReplicaRole.OFFLINE}})
        return Transition(
            o.And(s.live[r], s.hw[r] <= keep, keep <= s.leo[r]),
            {
                "live": {r: False},
                "role": {r: ReplicaRole.OFFLINE},
                "log": truncated_log(o, s, r, keep),
                "leo": {r: keep},
            },
        )

    @m.action(modifies=["live"], params={"r": REPLICAS})
    def restart(o: Ops, s: State, r: int) -> Transition:
        """Replica ``r``'s process starts again; it waits for a LeaderAndIsr (role OFFLINE)."""
        return Transition(o.Not(s.live[r]), {"live": {r: True}})

    # -- invariants ----------------------------------------------------------------------

    @m.invariant("LEADER_UNIQUE", supports=["EPOCH_BOUND"])
    def leader_unique(o: Ops, s: State) -> Term:
        """At most one replica believes it leads in any one epoch."""
        return o.And(*[
            o.Not(o.And(is_leader(o, s, a), is_leader(o, s, b), s.epoch[a] == s.epoch[b]))
            for a, b in _ordered_pairs(REPLICAS)
        ])

    @m.lemma("EPOCH_BOUND")
    def epoch_bound(o: Ops, s: State) -> Term:
        """No replica has accepted an epoch ZooKeeper has not written."""
        return o.ForAll(REPLICAS, lambda r: s.epoch[r] <= s.zk_epoch)

    @m.invariant("COMMITTED_DURABLE", supports=DURABILITY)
    def committed_durable(o: Ops, s: State) -> Term:
        """StrongIsr: every ZooKeeper ISR member holds every committed record."""
        return o.ForAll(REPLICAS, lambda r: o.Implies(
            s.zk_isr[r], has_prefix(o, s, r, s.committed_len)))

    @m.invariant("LOG_MATCHING", supports=LOG_LEMMAS)
    def log_matching(o: Ops, s: State) -> Term:
        """Logs that hold the same epoch at an offset hold the same epochs below it."""
        parts: list[Term] = []
        for a, b in _ordered_pairs(REPLICAS):
            for i in OFFSETS:
                if i == 0:
                    continue
                agree = o.And(i < s.leo[a], i < s.leo[b], s.log[(a, i)] == s.log[(b, i)])
                below = o.And(*[s.log[(a, j)] == s.log[(b, j)] for j in range(i)])
                parts.append(o.Implies(agree, below))
        return o.And(*parts)

    @m.lemma("LEADER_OWNS_EPOCH", supports=LOG_LEMMAS)
    def leader_owns_epoch(o: Ops, s: State) -> Term:
        """A record of the epoch a replica leads in is in that leader's log, at its offset: only
        the leader of an epoch writes records of it."""
        parts: list[Term] = []
        for leader in REPLICAS:
            for r in REPLICAS:
                if r == leader:
                    continue
                for i in OFFSETS:
                    parts.append(o.Implies(
                        o.And(is_leader(o, s, leader), i < s.leo[r],
                              s.log[(r, i)] == s.epoch[leader]),
                        o.And(i < s.leo[leader], s.log[(leader, i)] == s.epoch[leader])))
        return o.And(*parts)

    @m.lemma("LOG_SHAPE", supports=LOG_LEMMAS)
    def log_shape(o: Ops, s: State) -> Term:
        """Below the LEO a log holds epochs ZooKeeper has written, in non-decreasing order, none
        above the replica's own epoch; at and past the LEO it holds 0; the HW is within the
        log."""
        parts: list[Term] = []
        for r in REPLICAS:
            parts.append(s.hw[r] <= s.leo[r])
            for i in OFFSETS:
                parts.append(o.If(i < s.leo[r],
                                  o.And(s.log[(r, i)] >= 1, s.log[(r, i)] <= s.epoch[r]),
                                  s.log[(r, i)] == 0))
                if i > 0:
                    parts.append(o.Implies(i < s.leo[r], s.log[(r, i - 1)] <= s.log[(r, i)]))
        return o.And(*parts)

    @m.lemma("FOLLOWER_PREFIX", supports=LOG_LEMMAS)
    def follower_prefix(o: Ops, s: State) -> Term:
        """A follower whose leader leads in the follower's epoch holds a prefix of that
        leader's log: truncation left no record the leader lacks (KIP-101/279), so its next
        fetch cannot make the two logs agree at an offset above a difference."""
        parts: list[Term] = []
        for f in REPLICAS:
            for leader in REPLICAS:
                if leader == f:
                    continue
                following = o.And(o.Eq(s.role[f], ReplicaRole.FOLLOWER), s.leader[f] == leader,
                                  is_leader(o, s, leader), s.epoch[leader] == s.epoch[f])
                prefix = o.And(s.leo[f] <= s.leo[leader], *[
                    o.Implies(i < s.leo[f], s.log[(f, i)] == s.log[(leader, i)])
                    for i in OFFSETS
                ])
                parts.append(o.Implies(following, prefix))
        return o.And(*parts)

    @m.lemma("HW_COMMITTED", supports=DURABILITY)
    def hw_committed(o: Ops, s: State) -> Term:
        """Every HW is within the committed prefix; below its HW a leader's log is that prefix."""
        parts: list[Term] = []
        for r in REPLICAS:
            parts.append(s.hw[r] <= s.committed_len)
            parts.append(o.Implies(is_leader(o, s, r), o.And(*[
                o.Implies(i < s.hw[r], s.log[(r, i)] == s.committed[i]) for i in OFFSETS])))
        return o.And(*parts)

    @m.lemma("WELL_FORMED", supports=DURABILITY)
    def well_formed(o: Ops, s: State) -> Term:
        """ZooKeeper names a leader, in its ISR, that leads in ZooKeeper's epoch unless it
        crashed since and believes exactly that ISR; only it leads in that epoch; a replica in a
        leader's epoch that does not lead follows it; a deposed leader's ISR holds a member that
        has moved to a later epoch; the committed prefix is a well-formed log."""
        parts: list[Term] = [s.zk_leader != NONE]
        for r in REPLICAS:
            parts.append(o.Implies(s.zk_leader == r, o.And(s.zk_isr[r], o.Or(
                o.And(is_leader(o, s, r), s.epoch[r] == s.zk_epoch),
                o.Eq(s.role[r], ReplicaRole.OFFLINE)))))
            parts.append(o.Implies(o.And(is_leader(o, s, r), s.epoch[r] == s.zk_epoch),
                                   o.And(s.zk_leader == r, *[
                                       s.local_isr[(r, t)] == s.zk_isr[t]
                                       for t in REPLICAS if t != r])))
            parts.append(o.Implies(
                o.And(is_leader(o, s, r), s.epoch[r] < s.zk_epoch),
                o.Or(*[o.And(s.local_isr[(r, t)], s.epoch[t] > s.epoch[r])
                       for t in REPLICAS if t != r])))
            parts.append(o.Implies(is_leader(o, s, r), s.epoch_start[r] <= s.leo[r]))
            for t in REPLICAS:
                if t == r:
                    continue
                remote = s.remote_leo[(r, t)]
                parts.append(o.Implies(is_leader(o, s, r), o.And(
                    remote <= s.leo[r], o.Implies(remote >= 0, s.epoch[t] >= s.epoch[r]))))
                parts.append(o.Implies(
                    o.And(is_leader(o, s, r), o.Not(is_leader(o, s, t)),
                          s.epoch[t] == s.epoch[r]),
                    o.And(s.leader[t] == r, remote <= s.leo[t],
                          holds_log_of(o, s, t, r, remote))))
        for i in OFFSETS:
            parts.append(o.If(i < s.committed_len,
                              o.And(s.committed[i] >= 1, s.committed[i] <= s.zk_epoch),
                              s.committed[i] == 0))
        return o.And(*parts)

    @m.lemma("VOUCHED", supports=DURABILITY)
    def vouched_lemma(o: Ops, s: State) -> Term:
        """Whoever may be elected (the ISR) and whoever leads now holds every record any leader
        may still commit: a deposed leader's log up to the fetch offsets its moved-on ISR
        members sent, and up to each one's own fetch offset while it still follows."""
        parts: list[Term] = []
        for r in REPLICAS:
            for u in REPLICAS:
                if u == r:
                    continue
                parts.append(o.Implies(
                    o.And(is_leader(o, s, r), o.Or(s.zk_isr[u], current_leader(o, s, u))),
                    holds_log_of(o, s, u, r, vouched(o, s, r, u))))
                parts.append(o.Implies(
                    o.And(is_leader(o, s, r), current_leader(o, s, u), s.epoch[r] < s.epoch[u]),
                    stale_bound(o, s, r) <= s.epoch_start[u]))
            # Past its epoch start only the current leader commits (KIP-320 rule 4's premise).
            parts.append(o.Implies(current_leader(o, s, r),
                                   s.committed_len <= o.Max(s.hw[r], s.epoch_start[r])))
        return o.And(*parts)

    @m.invariant("NO_COMMITTED_LOSS", supports=DURABILITY)
    def no_committed_loss(o: Ops, s: State) -> Term:
        """The current leader (having taken its role in ZooKeeper's epoch) holds every committed
        record: a record once below a HW is never lost."""
        return o.ForAll(REPLICAS, lambda r: o.Implies(
            current_leader(o, s, r), has_prefix(o, s, r, s.committed_len)))

    @m.witness("FAILOVER_KEEPS_COMMITTED")
    def failover_keeps_committed(o: Ops, s: State) -> Term:
        """Leadership moved off replica 0 and replica 0, now following the new leader in its
        epoch, still holds the committed record."""
        return o.And(s.zk_leader != 0, s.zk_leader != NONE, s.committed_len >= 1,
                     o.Exists(REPLICAS, lambda r: o.And(r != 0, current_leader(o, s, r))),
                     o.Eq(s.role[0], ReplicaRole.FOLLOWER), s.epoch[0] == s.zk_epoch,
                     s.leo[0] >= s.committed_len)

    return m


P, H, V = Status.PROVED, Status.HOLDS, Status.VIOLATED

HW = TruncationPolicy.HIGH_WATERMARK

MODELS = (
    ModelDefinition(
        name="replication",
        doc="leader epochs, HW, ISR and truncation on three replicas",
        build=build,
        variants=(
            Variant(
                "shipped",
                "LEADER_EPOCH truncation to the common prefix (KIP-279) with KIP-320 fencing; "
                "unclean election off; a crash keeps the log",
                {},
                shipped=True,
                expected={"LEADER_UNIQUE": P, "EPOCH_BOUND": P, "COMMITTED_DURABLE": P,
                          "LOG_MATCHING": P, "LEADER_OWNS_EPOCH": P, "LOG_SHAPE": P,
                          "FOLLOWER_PREFIX": P, "HW_COMMITTED": P, "WELL_FORMED": P,
                          "VOUCHED": P, "NO_COMMITTED_LOSS": P},
            ),
            Variant(
                "power_failure",
                "the shipped protocol where a crash loses the unflushed suffix above the HW: "
                "records acknowledged before fsync are lost with the ISR members that held them "
                "(KIP-101 scenario 2's m2, KIP-966 Last Replica Standing); the logs still match",
                {"power_failure": True},
                expected={"LEADER_UNIQUE": P, "EPOCH_BOUND": P, "COMMITTED_DURABLE": V,
                          "LOG_MATCHING": P, "LEADER_OWNS_EPOCH": P, "LOG_SHAPE": P,
                          "FOLLOWER_PREFIX": P, "HW_COMMITTED": H, "WELL_FORMED": V,
                          "VOUCHED": V, "NO_COMMITTED_LOSS": V},
            ),
            Variant(
                "truncate_to_hw",
                "design V3 becomeFollower: truncate to the local HW — KIP-101 scenario 1",
                {"policy": HW},
                expected={"LEADER_UNIQUE": P, "EPOCH_BOUND": P, "COMMITTED_DURABLE": V,
                          "LOG_MATCHING": H, "LEADER_OWNS_EPOCH": H, "LOG_SHAPE": H,
                          "FOLLOWER_PREFIX": V, "HW_COMMITTED": H, "WELL_FORMED": V,
                          "VOUCHED": V, "NO_COMMITTED_LOSS": V},
            ),
            Variant(
                "truncate_to_hw_power_failure",
                "truncate to the local HW, and a crash loses the unflushed suffix — KIP-101 "
                "scenario 2 (the logs diverge)",
                {"policy": HW, "power_failure": True},
                expected={"LEADER_UNIQUE": P, "EPOCH_BOUND": P, "COMMITTED_DURABLE": V,
                          "LOG_MATCHING": H, "LEADER_OWNS_EPOCH": H, "LOG_SHAPE": H,
                          "FOLLOWER_PREFIX": V, "HW_COMMITTED": H, "WELL_FORMED": V,
                          "VOUCHED": V, "NO_COMMITTED_LOSS": V},
                beyond={"LOG_MATCHING": DIVERGENCE_LENGTH},
            ),
            Variant(
                "unclean_election",
                "unclean leader election on — Jepsen 2013: with no ISR member live, an "
                "out-of-sync replica is elected and committed records are lost",
                {"unclean": True},
                expected={"LEADER_UNIQUE": P, "EPOCH_BOUND": P, "COMMITTED_DURABLE": V,
                          "LOG_MATCHING": P, "LEADER_OWNS_EPOCH": P, "LOG_SHAPE": P,
                          "FOLLOWER_PREFIX": P, "HW_COMMITTED": V, "WELL_FORMED": H,
                          "VOUCHED": V, "NO_COMMITTED_LOSS": V},
            ),
            Variant(
                "kip101_without_kip279",
                "OffsetForLeaderEpoch as KIP-101 first built it — KAFKA-6361 fast leader "
                "change: the leader never had the follower's epoch and the logs diverge",
                {"kip279": False},
                expected={"LEADER_UNIQUE": P, "EPOCH_BOUND": P, "COMMITTED_DURABLE": H,
                          "LOG_MATCHING": H, "LEADER_OWNS_EPOCH": H, "LOG_SHAPE": H,
                          "FOLLOWER_PREFIX": V, "HW_COMMITTED": H, "WELL_FORMED": H,
                          "VOUCHED": H, "NO_COMMITTED_LOSS": H},
                beyond={"LOG_MATCHING": DIVERGENCE_LENGTH},
            ),
            Variant(
                "kip320_without_rule4",
                "ISR expansion before the leader's HW reaches the start of its epoch — KIP-320 "
                "rule 4: a follower that lacks records the old leader committed joins the ISR",
                {"rule4": False},
                expected={"LEADER_UNIQUE": P, "EPOCH_BOUND": P, "COMMITTED_DURABLE": V,
                          "LOG_MATCHING": P, "LEADER_OWNS_EPOCH": P, "LOG_SHAPE": P,
                          "FOLLOWER_PREFIX": P, "HW_COMMITTED": H, "WELL_FORMED": H,
                          "VOUCHED": V, "NO_COMMITTED_LOSS": V},
            ),
        ),
        depth=DEPTH,
        source="design V3 §A/§C/§G, KIP-101, KIP-279, KIP-320",
    ),
)
