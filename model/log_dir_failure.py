"""The log-dir failure machine (KIP-18 / KIP-112) at one broker, as a checked model.

What is modelled: one broker with two log dirs hosting three replicas (of different partitions).
A dir fails at runtime (``io_error``): it goes ONLINE → OFFLINE for good, every replica on it goes
OFFLINE and is remembered as lost, the broker keeps serving the replicas on the other dir and
tells the controller once (``controller_notified``). Records are appended to online replicas.
LeaderAndIsr may ask the broker to host a replica it does not have (``replica_created``): it is
created empty on a good dir only when the controller says it is new (``is_new``, sent only for a
replica that never existed: KAFKA-16234, KAFKA-10314); a replica lost with its dir is not
recreated empty elsewhere, since the controller would then count an empty log as a copy.

Known-bad variants: ``recreate_lost_replica`` (a lost replica recreated empty on a good dir when
LeaderAndIsr arrives, as Kafka before the fix) and ``stop_broker_on_failure`` (KIP-18's starting
point: one failed disk takes every replica of the broker offline).
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

#: The broker's log dirs.
DIRS = (0, 1)
#: The replicas it may host (one per partition).
REPLICAS = (0, 1, 2)
#: The most records one replica holds in the model.
RECORDS_MAX = 2


class LogDirState(enum.Enum):
    """A log dir's state (``impl.storage.log_dir_failure``)."""

    ONLINE = "ONLINE"  #: KIP-112: serving
    OFFLINE = "OFFLINE"  #: KIP-112: failed; nothing on it is read or written until restart


class ReplicaStorageState(enum.Enum):
    """Whether a replica's storage can be used."""

    ONLINE = "ONLINE"  #: KIP-112: its dir is online
    OFFLINE = "OFFLINE"  #: KIP-112: its dir failed


_ON = ReplicaStorageState.ONLINE
_OFF = ReplicaStorageState.OFFLINE

#: The strengthening that makes the invariant inductive.
LEMMAS = ("STORAGE_SHAPE",)


def build(variant: Variant) -> Model:
    """The log-dir failure model; flags ``recreate_lost`` and ``stop_broker`` (default false)."""
    recreate_lost = bool(variant.flags.get("recreate_lost", False))
    stop_broker = bool(variant.flags.get("stop_broker", False))
    m = Model("log_dir", __doc__ or "")
    m.var("dir_state", Enum(LogDirState), over=[DIRS], doc="each log dir's state")
    m.var("notified", Bool(), over=[DIRS], doc="the controller was told the dir failed")
    m.var("hosted", Bool(), over=[REPLICAS], doc="the broker has a log for the replica")
    m.var("replica_dir", Int(0, len(DIRS) - 1), over=[REPLICAS], doc="the dir of its log")
    m.var("storage", Enum(ReplicaStorageState), over=[REPLICAS], doc="its storage state")
    m.var("lost", Bool(), over=[REPLICAS], doc="its log went down with a failed dir")
    m.var("log_end", Int(0, RECORDS_MAX), over=[REPLICAS], doc="records in its log")
    m.var("acked_end", Int(0, RECORDS_MAX), over=[REPLICAS], doc="ghost: records acknowledged")
    m.var("ever_created", Bool(), over=[REPLICAS], doc="ghost: the replica existed once")
    m.var("recreated_empty", Bool(), over=[REPLICAS],
          doc="ghost: an empty log replaced a replica that held acknowledged records")
    m.var("isolation_broken", Bool(),
          doc="ghost: a dir failure took offline a replica stored on another dir")

    @m.init()
    def init(o: Ops) -> Mapping[str, Term]:
        return {
            "dir_state": LogDirState.ONLINE, "notified": False,
            "hosted": {r: r < 2 for r in REPLICAS},
            "replica_dir": {r: r % len(DIRS) for r in REPLICAS},
            "storage": _ON, "lost": False, "log_end": 0, "acked_end": 0,
            "ever_created": {r: r < 2 for r in REPLICAS},
            "recreated_empty": False, "isolation_broken": False,
        }

    def on_dir(o: Ops, s: State, r: int, d: int) -> Term:
        return o.And(s.hosted[r], s.replica_dir[r] == d)

    @m.action(modifies=["dir_state", "storage", "lost", "isolation_broken"], params={"d": DIRS})
    def io_error(o: Ops, s: State, d: int) -> Transition:
        """An ``OSError`` on dir ``d``: the dir and its replicas go offline (once)."""
        hit = {r: on_dir(o, s, r, d) if not stop_broker else s.hosted[r] for r in REPLICAS}
        collateral = o.Or(*[o.And(hit[r], o.Eq(s.storage[r], _ON), o.Not(on_dir(o, s, r, d)))
                            for r in REPLICAS])
        return Transition(o.Eq(s.dir_state[d], LogDirState.ONLINE), {
            "dir_state": {d: LogDirState.OFFLINE},
            "storage": {r: o.If(hit[r], _OFF, s.storage[r]) for r in REPLICAS},
            "lost": {r: o.Or(s.lost[r], hit[r]) for r in REPLICAS},
            "isolation_broken": o.Or(s.isolation_broken, collateral),
        })

    @m.action(modifies=["notified"], params={"d": DIRS})
    def controller_notified(o: Ops, s: State, d: int) -> Transition:
        """The broker writes ``/log_dir_event_notification`` for dir ``d``, once."""
        guard = o.And(o.Eq(s.dir_state[d], LogDirState.OFFLINE), o.Not(s.notified[d]))
        return Transition(guard, {"notified": {d: True}})

    @m.action(modifies=["log_end", "acked_end"], params={"r": REPLICAS})
    def appended(o: Ops, s: State, r: int) -> Transition:
        """A record appended to replica ``r`` (only while its storage is online)."""
        guard = o.And(s.hosted[r], o.Eq(s.storage[r], _ON), s.log_end[r] < RECORDS_MAX)
        return Transition(guard, {"log_end": {r: s.log_end[r] + 1},
                                  "acked_end": {r: o.Max(s.acked_end[r], s.log_end[r] + 1)}})

    @m.action(modifies=["hosted", "replica_dir", "storage", "lost", "log_end", "ever_created",
                        "recreated_empty"],
              params={"r": REPLICAS, "d": DIRS, "is_new": (False, True)})
    def replica_created(o: Ops, s: State, r: int, d: int, is_new: bool) -> Transition:
        """LeaderAndIsr names replica ``r``, which the broker has no usable log for: create it
        empty on the good dir ``d``; ``is_new`` only for a replica that never existed."""
        absent = o.Or(o.Not(s.hosted[r]), s.lost[r])
        allowed = o.Or(o.Not(s.lost[r]), True if recreate_lost else is_new)
        guard = o.And(absent, allowed, o.Eq(s.dir_state[d], LogDirState.ONLINE),
                      o.Not(s.ever_created[r]) if is_new else True)
        return Transition(guard, {
            "hosted": {r: True}, "replica_dir": {r: d}, "storage": {r: _ON},
            "lost": {r: False}, "log_end": {r: 0}, "ever_created": {r: True},
            "recreated_empty": {r: o.Or(s.recreated_empty[r], s.acked_end[r] >= 1)},
        })

    @m.invariant("DIR_FAILURE_ISOLATION", supports=LEMMAS)
    def dir_failure_isolation(o: Ops, s: State) -> Term:
        """A failed dir takes offline only its own replicas (the broker keeps serving the rest)
        and a replica lost with its dir is never recreated empty elsewhere."""
        def served_if_dir_online(r: int) -> Term:
            return o.Implies(
                o.And(s.hosted[r], o.Not(s.lost[r]),
                      o.Eq(s.dir_state[s.replica_dir[r]], LogDirState.ONLINE)),
                o.Eq(s.storage[r], _ON))
        return o.And(
            o.Not(s.isolation_broken),
            o.ForAll(REPLICAS, served_if_dir_online),
            o.ForAll(REPLICAS, lambda r: o.Not(s.recreated_empty[r])),
        )

    @m.lemma("STORAGE_SHAPE", supports=LEMMAS)
    def storage_shape(o: Ops, s: State) -> Term:
        """Offline exactly when lost; lost exactly when hosted on an offline dir; hosted
        replicas existed; logs hold what was acknowledged; no collateral failure yet."""
        def shape(r: int) -> Term:
            dir_offline = o.Eq(s.dir_state[s.replica_dir[r]], LogDirState.OFFLINE)
            return o.And(
                o.Implies(s.hosted[r], s.ever_created[r]),
                o.Eq(o.Eq(s.storage[r], _OFF), s.lost[r]),
                o.Implies(s.lost[r], o.And(s.hosted[r], dir_offline)),
                o.Implies(o.And(s.hosted[r], o.Not(s.lost[r])), o.Not(dir_offline)),
                s.log_end[r] == s.acked_end[r],
                o.Implies(o.Not(s.hosted[r]), s.acked_end[r] == 0),
            )
        return o.ForAll(REPLICAS, shape)

    @m.witness("SERVING_WITH_FAILED_DIR")
    def serving_with_failed_dir(o: Ops, s: State) -> Term:
        """A dir failed and was reported, and a replica on the other dir took a record since."""
        return o.Exists(DIRS, lambda d: o.And(
            s.notified[d], o.Exists(REPLICAS, lambda r: o.And(
                s.hosted[r], o.Eq(s.storage[r], _ON), s.replica_dir[r] != d,
                s.acked_end[r] >= 1))))

    return m


MODELS = (
    ModelDefinition(
        name="log_dir_failure",
        doc="KIP-18/KIP-112: a failed dir takes only its replicas offline; lost replicas are "
        "not recreated empty",
        build=build,
        variants=(
            Variant("shipped", "offline per dir; recreate only when is_new", shipped=True,
                    expected={"DIR_FAILURE_ISOLATION": Status.PROVED}),
            Variant("recreate_lost_replica",
                    "a lost replica recreated empty on a good dir when LeaderAndIsr arrives",
                    {"recreate_lost": True},
                    expected={"DIR_FAILURE_ISOLATION": Status.VIOLATED}),
            Variant("stop_broker_on_failure",
                    "one failed dir takes every replica of the broker offline (before KIP-18)",
                    {"stop_broker": True},
                    expected={"DIR_FAILURE_ISOLATION": Status.VIOLATED}),
        ),
        depth=6,
        source="KIP-18, KIP-112",
    ),
)
