"""The replica-move machine (KIP-113 §1-§3) at one broker, as a checked model.

What is modelled: one partition on one broker with three log dirs (three so that a move can be
redirected), its log as a prefix of a record sequence of at most :data:`RECORDS_MAX` records per
copy. Each dir holds at most one copy of the partition, named ``tp`` (LIVE), ``tp.move`` (MOVE)
or ``tp.delete`` (DELETE), with its length in the page cache (``log_end``) and on disk
(``log_durable_end``); ``entry`` is a dir's name as the running broker sees it and
``entry_durable`` as it would survive a crash (a rename is durable once its dir is fsynced).

Appends reach the served log under the partition lock and are acknowledged once durable (the
single-broker view: what replication acknowledges before a flush is the replication model's
concern). The mover copies one record per ``chunk_copied``, checks ``caught_up`` without the lock,
takes the lock, copies the rest (``final_catch_up``), makes ``tp.move`` durable
(``dest_durable``), renames the source ``tp`` to ``tp.delete`` and ``tp.move`` to ``tp`` (each
with its dir fsync), swaps the in-memory log and releases the lock (``log_swapped``); the old copy
is removed later (``delete_completed``). A move can be cancelled or redirected while copying, and
a follower truncation (``source_truncated``) may cut the served log and ``tp.move`` whenever the
lock is free. At every step the process may crash (memory lost, page cache lost, renames not yet
fsynced lost or kept) and a dir may fail; after a crash, startup faults may strike (a dir
unreadable, a mount missing) and ``recovered`` applies the recovery rules of
:mod:`model.move_recovery`.

Ghost variables record what the invariants need: ``acked_end`` (records acknowledged),
``copy_destroyed`` (a deletion removed the last complete copy on a readable dir) and
``isolation_broken`` (a dir failure took the partition offline though it held none of it).

Known-bad variants: ``swap_before_dest_durable`` (Apache Kafka's order: rename without fsyncing
``tp.move``) and ``final_catch_up_unlocked`` (the last copy and the swap without the partition
lock); ``move_recovery.kip113_as_written`` (KIP-113 §3's rules as written).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
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
from .move_recovery import PROJECT_RULES, DirKind, RecoveryRule, classify

__sans_io__ = True

#: The log dirs of the broker.
DIRS = (0, 1, 2)
#: The most records one copy holds in the model.
RECORDS_MAX = 2
#: Integers are encoded in 6-bit bit-vectors (-32..31): every integer of the model (dirs, record
#: counts, one added to a count, a count of dirs) lies within 0..3, within the ±16 the encoding
#: requires; 16 bits would cost more solving time for nothing.
INT_BITS = 6


class MoveState(enum.Enum):
    """Where one replica's move is (per tp on this broker; ``impl.storage.replica_move``)."""

    NONE = "NONE"  #: KIP-113 §1: no move requested
    PENDING_PLACEMENT = "PENDING_PLACEMENT"  #: KIP-113 §1 notes: dir remembered, replica absent
    COPYING = "COPYING"  #: KIP-113 §1.2 step 3: copying source to ``tp.move``
    CAUGHT_UP = "CAUGHT_UP"  #: KIP-113 §1.2 step 4: dest LEO == source LEO seen without the lock
    SWAPPING = "SWAPPING"  #: KIP-113 §1.2 steps 5-9: under the partition lock
    DONE = "DONE"  #: KIP-113 §1.2 step 9: the destination is the live log
    CANCELLED = "CANCELLED"  #: KIP-113 §1 notes: "any" (or the current dir) cancelled it
    FAILED = "FAILED"  #: KIP-113 §1.2 notes: source or destination dir went offline


class LogDirState(enum.Enum):
    """A log dir's state (``impl.storage.log_dir_failure``)."""

    ONLINE = "ONLINE"  #: KIP-112: serving
    OFFLINE = "OFFLINE"  #: KIP-112: failed; nothing on it is read or written until restart


_IDLE = (MoveState.NONE, MoveState.DONE, MoveState.CANCELLED, MoveState.FAILED)
_ACTIVE = (MoveState.COPYING, MoveState.CAUGHT_UP)
_MOVING = (MoveState.COPYING, MoveState.CAUGHT_UP, MoveState.SWAPPING)
_COPIES = (DirKind.LIVE, DirKind.MOVE, DirKind.DELETE)

#: Strengthening lemmas on the shape of the machine (where the copies are, which steps were
#: taken): inductive on their own, in every variant with the project's rules.
STRUCTURE = ("NAMES_DURABLE", "LOG_BOUNDS", "COPIES_UNIQUE", "SERVED_SHAPE", "MOVE_SHAPE")
#: The strengthening on the data (which copies are complete): holds only when the swap is
#: ordered and locked as shipped.
DATA = ("DATA_COMPLETE",)


def build(variant: Variant) -> Model:
    """The replica-move model for one variant.

    Flags (all optional): ``dest_durable_before_swap`` (default true), ``lock_final_catch_up``
    (default true), ``recovery_rules`` (``project`` or ``kip113``), ``durable_abandon`` (default
    true: abandoning a ``tp.move`` renames it with a dir fsync), ``startup_faults`` (default false:
    dirs unreadable or unmounted at startup), ``topic_deletion`` (default false).
    """
    flags = variant.flags
    durable_first = bool(flags.get("dest_durable_before_swap", True))
    locked = bool(flags.get("lock_final_catch_up", True))
    rules = str(flags.get("recovery_rules", PROJECT_RULES))
    durable_abandon = bool(flags.get("durable_abandon", True))
    startup_faults = bool(flags.get("startup_faults", False))
    project = rules == PROJECT_RULES
    detect_mount = bool(flags.get("detect_missing_mount", project))
    guard_delete = bool(flags.get("guard_async_delete", project))
    all_dirs_for_move = bool(flags.get("move_needs_all_dirs", project))
    records_max = int(flags.get("records_max", RECORDS_MAX))
    topic_deletion = bool(flags.get("topic_deletion", False))

    m = Model("replica_move", __doc__ or "", int_bits=INT_BITS)
    m.var("running", Bool(), doc="the broker process is up")
    m.var("move_state", Enum(MoveState), doc="the move machine's state (memory)")
    m.var("source_dir", Int(0, len(DIRS) - 1), doc="dir of the served log (memory)")
    m.var("dest_dir", Int(0, len(DIRS) - 1), doc="dir of tp.move (memory)")
    m.var("lock_held", Bool(), doc="the mover holds the partition lock")
    m.var("dest_durable", Bool(), doc="tp.move fsynced under the lock")
    m.var("source_renamed", Bool(), doc="tp renamed tp.delete (dir fsynced)")
    m.var("dest_renamed", Bool(), doc="tp.move renamed tp (dir fsynced)")
    m.var("partition_online", Bool(), doc="the broker serves the partition")
    m.var("entry", Enum(DirKind), over=[DIRS], doc="the partition's dir name on each log dir")
    m.var("entry_durable", Enum(DirKind), over=[DIRS], doc="the name a crash would leave")
    m.var("log_end", Int(0, records_max), over=[DIRS], doc="records in the copy (page cache)")
    m.var("log_durable_end", Int(0, records_max), over=[DIRS], doc="records fsynced")
    m.var("dir_online", Bool(), over=[DIRS], doc="LogDirState.ONLINE (false: OFFLINE)")
    m.var("mount_missing", Bool(), over=[DIRS], doc="the dir's mount is absent at this start")
    m.var("delete_pending", Bool(), over=[DIRS], doc="tp.delete queued for deletion (memory)")
    m.var("recovery_rule", Enum(RecoveryRule), doc="the main rule of the last startup")
    m.var("acked_end", Int(0, records_max), doc="ghost: records acknowledged")
    m.var("isolation_broken", Bool(), doc="ghost: a dir failure took the partition offline "
          "although that dir held no copy of it")
    m.var("copy_destroyed", Bool(), doc="ghost: the last complete readable copy was deleted")
    if topic_deletion:
        m.var("topic_deleted", Bool(), doc="the partition was deleted (StopReplica, delete)")

    def readable(o: Ops, s: State, d: Any) -> Term:
        return o.And(s.dir_online[d], o.Not(s.mount_missing[d]))

    def may_start_move(o: Ops, s: State, d: Any) -> Term:
        """The destination is readable and, under the project's rules, so is every dir: an
        offline dir may hold a ``tp.move`` nobody can abandon, so no move (nor redirect)
        starts until every dir is back."""
        if all_dirs_for_move:
            return o.And(*[readable(o, s, e) for e in DIRS])
        return readable(o, s, d)

    def complete(o: Ops, s: State, d: Any) -> Term:
        return o.And(o.In(s.entry[d], _COPIES), s.log_end[d] >= s.acked_end)

    def abandon_update(o: Ops, s: State, d: Any) -> dict[str, Any]:
        """``tp.move`` on ``d`` renamed ``tp.delete`` (fsynced when abandons are durable)."""
        entry = o.store(s.entry, d, DirKind.DELETE)
        durable = o.store(s.entry_durable, d, DirKind.DELETE) if durable_abandon else (
            s.entry_durable)
        return {"entry": entry, "entry_durable": durable,
                "delete_pending": o.store(s.delete_pending, d, True)}

    # -- init ----------------------------------------------------------------------------

    @m.init()
    def init(o: Ops) -> Mapping[str, Term]:
        first = {d: DirKind.LIVE if d == DIRS[0] else DirKind.ABSENT for d in DIRS}
        return {
            "running": True, "move_state": MoveState.NONE, "source_dir": DIRS[0],
            "dest_dir": DIRS[0], "lock_held": False, "dest_durable": False,
            "source_renamed": False, "dest_renamed": False, "partition_online": True,
            "entry": first, "entry_durable": first, "log_end": 0, "log_durable_end": 0,
            "dir_online": True, "mount_missing": False, "delete_pending": False,
            "recovery_rule": RecoveryRule.LIVE, "acked_end": 0, "isolation_broken": False,
            "copy_destroyed": False,
            **({"topic_deleted": False} if topic_deletion else {}),
        }

    # -- the move (KIP-113 §1.2) ----------------------------------------------------------

    @m.action(modifies=["log_end", "log_durable_end", "acked_end"])
    def source_appended(o: Ops, s: State) -> Transition:
        """A producer or fetcher appends one record to the served log (under the lock)."""
        src = s.source_dir
        guard = o.And(s.running, s.partition_online, o.Not(s.lock_held), readable(o, s, src),
                      s.log_end[src] < records_max)
        grown = s.log_end[src] + 1
        return Transition(guard, {
            "log_end": o.store(s.log_end, src, grown),
            "log_durable_end": o.store(s.log_durable_end, src, grown),
            "acked_end": o.Max(s.acked_end, grown),
        })

    @m.action(modifies=["log_end", "log_durable_end", "acked_end"])
    def source_truncated(o: Ops, s: State) -> Transition:
        """A follower truncation removes the served log's last record (under the lock, so
        never during the locked swap); ``tp.move`` follows it, and so does every copy's length,
        which counts the records it shares with the served log (a ``tp.delete`` keeps its bytes,
        but its tail no longer belongs to the partition). Truncation is fsynced. The removed
        record was never committed (the replication model's NO_COMMITTED_LOSS), so the records
        the partition must keep end there too. A truncation by several records is as many
        steps."""
        src = s.source_dir
        guard = o.And(s.running, s.partition_online, o.Not(s.lock_held), readable(o, s, src),
                      s.log_end[src] >= 1)
        cut = s.log_end[src] - 1
        return Transition(guard, {
            "log_end": {d: o.Min(s.log_end[d], cut) for d in DIRS},
            "log_durable_end": {d: o.Min(s.log_durable_end[d], cut) for d in DIRS},
            "acked_end": cut,
        })

    @m.action(modifies=["move_state", "dest_dir", "entry", "entry_durable", "log_end",
                        "log_durable_end", "dest_durable", "source_renamed", "dest_renamed"],
              params={"d": DIRS})
    def requested(o: Ops, s: State, d: int) -> Transition:
        """AlterReplicaLogDirs names dir ``d``: create ``tp.move`` there (dirs fsynced).

        Refused (KAFKA_STORAGE_ERROR) while any dir is offline under the project's rules."""
        guard = o.And(s.running, s.partition_online, o.In(s.move_state, _IDLE),
                      s.source_dir != d, may_start_move(o, s, d), o.Eq(s.entry[d], DirKind.ABSENT))
        return Transition(guard, {
            "move_state": MoveState.COPYING, "dest_dir": d,
            "entry": {d: DirKind.MOVE}, "entry_durable": {d: DirKind.MOVE},
            "log_end": {d: 0}, "log_durable_end": {d: 0},
            "dest_durable": False, "source_renamed": False, "dest_renamed": False,
        })

    @m.action(modifies=["log_end"])
    def chunk_copied(o: Ops, s: State) -> Transition:
        """One record copied from the source to ``tp.move`` (not yet fsynced)."""
        src, dst = s.source_dir, s.dest_dir
        guard = o.And(s.running, o.Eq(s.move_state, MoveState.COPYING),
                      readable(o, s, src), readable(o, s, dst),
                      s.log_end[dst] < s.log_end[src])
        return Transition(guard, {"log_end": o.store(s.log_end, dst, s.log_end[dst] + 1)})

    @m.action(modifies=["move_state"])
    def caught_up(o: Ops, s: State) -> Transition:
        """Without the lock, the mover sees dest LEO == source LEO."""
        guard = o.And(s.running, o.Eq(s.move_state, MoveState.COPYING),
                      s.log_end[s.dest_dir] == s.log_end[s.source_dir])
        return Transition(guard, {"move_state": MoveState.CAUGHT_UP})

    @m.action(modifies=["move_state", "lock_held"])
    def lock_acquired(o: Ops, s: State) -> Transition:
        """The mover takes the partition lock (``final_catch_up_unlocked``: it does not)."""
        guard = o.And(s.running, o.Eq(s.move_state, MoveState.CAUGHT_UP))
        return Transition(guard, {"move_state": MoveState.SWAPPING, "lock_held": locked})

    @m.action(modifies=["log_end"])
    def final_catch_up(o: Ops, s: State) -> Transition:
        """The rest of the source copied to ``tp.move`` (under the lock in the shipped order)."""
        src, dst = s.source_dir, s.dest_dir
        guard = o.And(s.running, o.Eq(s.move_state, MoveState.SWAPPING),
                      o.Not(s.dest_durable), o.Not(s.source_renamed),
                      readable(o, s, src), readable(o, s, dst),
                      s.log_end[dst] < s.log_end[src])
        return Transition(guard, {"log_end": o.store(s.log_end, dst, s.log_end[src])})

    @m.action(modifies=["log_durable_end", "dest_durable"])
    def dest_durable(o: Ops, s: State) -> Transition:
        """``tp.move``'s data and dir fsynced, caught up with the source."""
        src, dst = s.source_dir, s.dest_dir
        guard = o.And(s.running, o.Eq(s.move_state, MoveState.SWAPPING),
                      o.Not(s.dest_durable), s.log_end[dst] == s.log_end[src])
        return Transition(guard, {
            "log_durable_end": o.store(s.log_durable_end, dst, s.log_end[dst]),
            "dest_durable": True,
        })

    @m.action(modifies=["entry", "entry_durable", "source_renamed"])
    def source_renamed(o: Ops, s: State) -> Transition:
        """``tp`` renamed ``tp.delete`` on the source dir, dir fsynced (KIP-113 step 6)."""
        src, dst = s.source_dir, s.dest_dir
        ready = s.dest_durable if durable_first else s.log_end[dst] == s.log_end[src]
        guard = o.And(s.running, o.Eq(s.move_state, MoveState.SWAPPING),
                      o.Not(s.source_renamed), ready, readable(o, s, src))
        return Transition(guard, {
            "entry": o.store(s.entry, src, DirKind.DELETE),
            "entry_durable": o.store(s.entry_durable, src, DirKind.DELETE),
            "source_renamed": True,
        })

    @m.action(modifies=["entry", "entry_durable", "dest_renamed"])
    def dest_renamed(o: Ops, s: State) -> Transition:
        """``tp.move`` renamed ``tp`` on the destination dir, dir fsynced (KIP-113 step 7)."""
        dst = s.dest_dir
        guard = o.And(s.running, o.Eq(s.move_state, MoveState.SWAPPING), s.source_renamed,
                      o.Not(s.dest_renamed), readable(o, s, dst))
        return Transition(guard, {
            "entry": o.store(s.entry, dst, DirKind.LIVE),
            "entry_durable": o.store(s.entry_durable, dst, DirKind.LIVE),
            "dest_renamed": True,
        })

    @m.action(modifies=["move_state", "source_dir", "dest_dir", "lock_held", "dest_durable",
                        "source_renamed", "dest_renamed", "delete_pending"])
    def log_swapped(o: Ops, s: State) -> Transition:
        """The in-memory log swapped, the lock released, ``tp.delete`` queued (steps 8-9)."""
        guard = o.And(s.running, o.Eq(s.move_state, MoveState.SWAPPING), s.dest_renamed)
        return Transition(guard, {
            "move_state": MoveState.DONE, "source_dir": s.dest_dir, "dest_dir": s.source_dir,
            "lock_held": False, "dest_durable": False, "source_renamed": False,
            "dest_renamed": False,
            "delete_pending": o.store(s.delete_pending, s.source_dir, True),
        })

    @m.action(modifies=["entry", "entry_durable", "log_end", "log_durable_end",
                        "delete_pending", "copy_destroyed"], params={"d": DIRS})
    def delete_completed(o: Ops, s: State, d: int) -> Transition:
        """A queued ``tp.delete`` on dir ``d`` removed (dir fsynced).

        The project's rule deletes only while another complete copy is served from a readable
        dir; KIP-113 rule 4 deletes unconditionally.
        """
        src = s.source_dir
        safe = o.And(s.partition_online, src != d, readable(o, s, src),
                     o.Eq(s.entry[src], DirKind.LIVE), s.log_end[src] >= s.log_end[d])
        guard = o.And(s.running, s.delete_pending[d], o.Eq(s.entry[d], DirKind.DELETE),
                      readable(o, s, d), safe if guard_delete else True)
        other_copy = o.Or(*[o.And(readable(o, s, e), o.In(s.entry[e], (DirKind.LIVE,
                                                                       DirKind.MOVE)),
                                  s.log_end[e] >= s.acked_end)
                            for e in DIRS if e != d])
        destroyed = o.And(s.acked_end >= 1, complete(o, s, d), o.Not(other_copy),
                          o.Not(s.topic_deleted) if topic_deletion else True)
        return Transition(guard, {
            "entry": {d: DirKind.ABSENT}, "entry_durable": {d: DirKind.ABSENT},
            "log_end": {d: 0}, "log_durable_end": {d: 0}, "delete_pending": {d: False},
            "copy_destroyed": o.Or(s.copy_destroyed, destroyed),
        })

    @m.action(modifies=["move_state", "entry", "entry_durable", "delete_pending"])
    def cancel_requested(o: Ops, s: State) -> Transition:
        """"any" (or the current dir) requested: abandon ``tp.move`` (→ ``tp.delete``)."""
        guard = o.And(s.running, o.In(s.move_state, _ACTIVE))
        update: dict[str, Any] = {"move_state": MoveState.CANCELLED}
        update.update(abandon_update(o, s, s.dest_dir))
        return Transition(guard, update)

    @m.action(modifies=["move_state", "dest_dir", "entry", "entry_durable", "log_end",
                        "log_durable_end", "delete_pending"], params={"d": DIRS})
    def redirected(o: Ops, s: State, d: int) -> Transition:
        """Another destination ``d`` while copying: abandon the old ``tp.move``, start anew."""
        guard = o.And(s.running, o.In(s.move_state, _ACTIVE), s.source_dir != d,
                      s.dest_dir != d, may_start_move(o, s, d), o.Eq(s.entry[d], DirKind.ABSENT))
        abandoned = abandon_update(o, s, s.dest_dir)
        return Transition(guard, {
            "move_state": MoveState.COPYING, "dest_dir": d,
            "entry": abandoned["entry"].set(d, DirKind.MOVE),
            "entry_durable": abandoned["entry_durable"].set(d, DirKind.MOVE),
            "log_end": {d: 0}, "log_durable_end": {d: 0},
            "delete_pending": abandoned["delete_pending"],
        })

    # -- faults --------------------------------------------------------------------------

    @m.action(modifies=["move_state", "lock_held", "dest_durable", "source_renamed",
                        "dest_renamed", "partition_online", "entry", "entry_durable",
                        "dir_online", "delete_pending", "isolation_broken"], params={"d": DIRS})
    def dir_failed(o: Ops, s: State, d: int) -> Transition:
        """Dir ``d`` fails at runtime (IO_ERROR): its copies go offline with it.

        A move whose destination failed before ``tp.move`` became ``tp`` is dropped and a
        renamed source is renamed back; a failed source (or a destination already renamed
        ``tp``) takes the partition offline.
        """
        src, dst = s.source_dir, s.dest_dir
        moving = o.In(s.move_state, _MOVING)
        dest_dropped = o.And(moving, dst == d, o.Not(s.dest_renamed))
        restore = o.And(dest_dropped, s.source_renamed)
        offline = o.Or(o.And(s.partition_online, src == d),
                       o.And(moving, dst == d, s.dest_renamed))
        failed = o.And(moving, o.Or(src == d, dst == d))
        guard = o.And(s.running, s.dir_online[d], o.Not(s.mount_missing[d]))
        return Transition(guard, {
            "dir_online": {d: False},
            "move_state": o.If(failed, MoveState.FAILED, s.move_state),
            "lock_held": o.If(failed, False, s.lock_held),
            "dest_durable": o.If(failed, False, s.dest_durable),
            "source_renamed": o.If(failed, False, s.source_renamed),
            "dest_renamed": o.If(failed, False, s.dest_renamed),
            "partition_online": o.And(s.partition_online, o.Not(offline)),
            "entry": o.If(restore, o.store(s.entry, src, DirKind.LIVE), s.entry),
            "entry_durable": o.If(restore, o.store(s.entry_durable, src, DirKind.LIVE),
                                  s.entry_durable),
            "delete_pending": {d: False},
            "isolation_broken": o.Or(s.isolation_broken, o.And(
                s.partition_online, offline, o.Eq(s.entry[d], DirKind.ABSENT))),
        })

    @m.action(modifies=["running", "move_state", "lock_held", "dest_durable", "source_renamed",
                        "dest_renamed", "partition_online", "entry", "entry_durable",
                        "log_end", "dir_online", "mount_missing", "delete_pending"],
              params={"renames_kept": (False, True)})
    def crashed(o: Ops, s: State, renames_kept: bool) -> Transition:
        """The process dies: memory and page cache lost; renames not yet fsynced are all kept
        or all lost; every dir is probed again at the next start."""
        entry = s.entry if renames_kept else s.entry_durable
        return Transition(s.running, {
            "running": False, "move_state": MoveState.NONE, "lock_held": False,
            "dest_durable": False, "source_renamed": False, "dest_renamed": False,
            "partition_online": False, "entry": entry, "entry_durable": entry,
            "log_end": s.log_durable_end, "dir_online": True, "mount_missing": False,
            "delete_pending": False,
        })

    if startup_faults:

        @m.action(modifies=["dir_online"], params={"d": DIRS})
        def unreadable_at_startup(o: Ops, s: State, d: int) -> Transition:
            """Dir ``d`` cannot be read when the broker starts (LogDirEvent)."""
            guard = o.And(o.Not(s.running), s.dir_online[d], o.Not(s.mount_missing[d]))
            return Transition(guard, {"dir_online": {d: False}})

        @m.action(modifies=["mount_missing"], params={"d": DIRS})
        def mount_missing_at_startup(o: Ops, s: State, d: int) -> Transition:
            """Dir ``d``'s disk is not mounted at this start: the path reads as empty."""
            guard = o.And(o.Not(s.running), s.dir_online[d], o.Not(s.mount_missing[d]))
            return Transition(guard, {"mount_missing": {d: True}})

    @m.action(modifies=["running", "move_state", "source_dir", "dest_dir", "partition_online",
                        "entry", "entry_durable", "dir_online", "delete_pending",
                        "recovery_rule"])
    def recovered(o: Ops, s: State) -> Transition:
        """The broker starts and classifies the partition's dirs (KIP-113 §3)."""
        decision = classify(o, s, DIRS, rules, detect_mount)
        entry = {d: o.If(decision.promote[d], DirKind.LIVE,
                         o.If(decision.abandon[d], DirKind.DELETE, s.entry[d])) for d in DIRS}
        return Transition(o.Not(s.running), {
            "running": True,
            "move_state": o.If(decision.resume, MoveState.COPYING, MoveState.NONE),
            "source_dir": decision.live_dir,
            "dest_dir": decision.resume_dir,
            "partition_online": decision.online,
            "entry": entry,
            "entry_durable": entry,
            "dir_online": {d: o.Not(decision.bad[d]) for d in DIRS},
            "delete_pending": {d: o.Or(decision.schedule_delete[d], decision.abandon[d])
                               for d in DIRS},
            "recovery_rule": decision.rule,
        })

    if topic_deletion:

        @m.action(modifies=["move_state", "partition_online", "entry", "entry_durable",
                            "delete_pending", "topic_deleted"])
        def topic_deleted(o: Ops, s: State) -> Transition:
            """StopReplica with delete: a move in progress is abandoned, ``tp`` renamed
            ``tp.delete`` (durably) and queued for deletion; the partition is no longer served."""
            src = s.source_dir
            guard = o.And(s.running, s.partition_online, o.Not(s.topic_deleted),
                          o.Not(o.Eq(s.move_state, MoveState.SWAPPING)), readable(o, s, src))
            moving = o.In(s.move_state, _ACTIVE)
            abandoned = abandon_update(o, s, s.dest_dir)
            entry = o.If(moving, abandoned["entry"], s.entry)
            durable = o.If(moving, abandoned["entry_durable"], s.entry_durable)
            pending = o.If(moving, abandoned["delete_pending"], s.delete_pending)
            return Transition(guard, {
                "move_state": MoveState.NONE, "partition_online": False, "topic_deleted": True,
                "entry": o.store(entry, src, DirKind.DELETE),
                "entry_durable": o.store(durable, src, DirKind.DELETE),
                "delete_pending": o.store(pending, src, True),
            })

    # -- invariants ----------------------------------------------------------------------

    @m.invariant("MOVE_NO_LOSS", supports=STRUCTURE + DATA)
    def move_no_loss(o: Ops, s: State) -> Term:
        """Every acknowledged record survives a crash on some copy, and the served log holds
        all of them."""
        survives = o.Exists(DIRS, lambda d: o.And(
            o.In(s.entry_durable[d], _COPIES), s.log_durable_end[d] >= s.acked_end))
        served = o.Implies(o.And(s.running, s.partition_online),
                           s.log_end[s.source_dir] >= s.acked_end)
        if topic_deletion:
            return o.Implies(o.Not(s.topic_deleted), o.And(survives, served))
        return o.And(survives, served)

    @m.invariant("MOVE_SINGLE_LIVE", supports=STRUCTURE)
    def move_single_live(o: Ops, s: State) -> Term:
        """At most one readable ``tp``; outside the locked swap the served copy is ``tp``."""
        live = o.Count(*[o.And(readable(o, s, d), o.Eq(s.entry[d], DirKind.LIVE))
                         for d in DIRS])
        served_is_live = o.Implies(o.And(s.partition_online, o.Not(s.lock_held)),
                                   o.Eq(s.entry[s.source_dir], DirKind.LIVE))
        return o.Implies(s.running, o.And(live <= 1, served_is_live))

    @m.invariant("MOVE_RECOVERY_TOTAL", supports=STRUCTURE)
    def move_recovery_total(o: Ops, s: State) -> Term:
        """No deletion removes the last complete readable copy, and the running broker leaves
        the partition offline only while some dir is bad (and so may hold it)."""
        some_bad = o.Exists(DIRS, lambda d: o.Not(readable(o, s, d)))
        if topic_deletion:
            return o.And(
                o.Not(s.copy_destroyed),
                o.Implies(o.And(s.running, s.topic_deleted), o.Not(s.partition_online)),
                o.Implies(o.And(s.running, o.Not(s.topic_deleted), o.Not(s.partition_online)),
                          some_bad))
        return o.And(o.Not(s.copy_destroyed),
                     o.Implies(o.And(s.running, o.Not(s.partition_online)), some_bad))

    @m.invariant("DIR_FAILURE_ISOLATION", supports=STRUCTURE)
    def dir_failure_isolation(o: Ops, s: State) -> Term:
        """The partition is served only from a readable dir, and a dir failure takes it offline
        only when that dir holds a copy of it."""
        served_readable = o.Implies(o.And(s.running, s.partition_online),
                                    readable(o, s, s.source_dir))
        return o.And(served_readable, o.Not(s.isolation_broken))

    # -- inductive strengthening (the reachable shapes of the machine) --------------------

    def moving(o: Ops, s: State) -> Term:
        return o.And(s.running, o.In(s.move_state, _MOVING))

    @m.lemma("NAMES_DURABLE", supports=STRUCTURE)
    def names_durable(o: Ops, s: State) -> Term:
        """Every rename is fsynced with its dir: a crash changes no name."""
        return o.ForAll(DIRS, lambda d: o.Eq(s.entry[d], s.entry_durable[d]))

    @m.lemma("LOG_BOUNDS", supports=STRUCTURE)
    def log_bounds(o: Ops, s: State) -> Term:
        """Durable ≤ cached ≤ acknowledged; an absent copy is empty."""
        return o.ForAll(DIRS, lambda d: o.And(
            s.log_durable_end[d] <= s.log_end[d], s.log_end[d] <= s.acked_end,
            o.Implies(o.Eq(s.entry[d], DirKind.ABSENT), s.log_end[d] == 0)))

    @m.lemma("COPIES_UNIQUE", supports=STRUCTURE)
    def copies_unique(o: Ops, s: State) -> Term:
        """At most one ``tp`` and one ``tp.move`` exist, on any dir; with no ``tp``, a
        ``tp.move`` does."""
        return o.And(
            o.Count(*[o.Eq(s.entry[d], DirKind.LIVE) for d in DIRS]) <= 1,
            o.Count(*[o.Eq(s.entry[d], DirKind.MOVE) for d in DIRS]) <= 1,
            o.Or(o.Exists(DIRS, lambda d: o.Eq(s.entry[d], DirKind.LIVE)),
                 o.Exists(DIRS, lambda d: o.Eq(s.entry[d], DirKind.MOVE))),
        )

    @m.lemma("SERVED_SHAPE", supports=STRUCTURE)
    def served_shape(o: Ops, s: State) -> Term:
        """A served partition is read from a readable ``tp`` (or, mid-swap, the renamed
        source); outside a move no readable ``tp.move`` is left behind."""
        src = s.source_dir
        return o.Implies(o.And(s.running, s.partition_online), o.And(
            readable(o, s, src),
            o.Or(o.Eq(s.entry[src], DirKind.LIVE),
                 o.And(o.Eq(s.move_state, MoveState.SWAPPING), s.source_renamed)),
            o.Implies(o.Not(o.In(s.move_state, _MOVING)), o.ForAll(DIRS, lambda d:
                      o.Implies(o.Eq(s.entry[d], DirKind.MOVE), o.Not(readable(o, s, d)))))))

    @m.lemma("MOVE_SHAPE", supports=STRUCTURE)
    def move_shape(o: Ops, s: State) -> Term:
        """While moving: the steps happen in order and the copies are where they should be."""
        src, dst = s.source_dir, s.dest_dir
        active = o.In(s.move_state, _ACTIVE)
        swapping = o.Eq(s.move_state, MoveState.SWAPPING)
        shape = o.And(
            s.partition_online, src != dst, readable(o, s, src), readable(o, s, dst),
            o.Implies(o.Not(s.source_renamed), o.Eq(s.entry[src], DirKind.LIVE)),
            o.Implies(o.Not(s.dest_renamed), o.Eq(s.entry[dst], DirKind.MOVE)),
            o.Implies(active, o.Not(o.Or(s.lock_held, s.dest_durable, s.source_renamed,
                                         s.dest_renamed))),
            o.Implies(swapping, s.lock_held) if locked else o.Not(s.lock_held),
            o.Implies(s.source_renamed, o.And(s.dest_durable if durable_first else True,
                                              o.Eq(s.entry[src], DirKind.DELETE))),
            o.Implies(s.dest_renamed, o.And(s.source_renamed,
                                            o.Eq(s.entry[dst], DirKind.LIVE))),
            o.ForAll(DIRS, lambda d: o.Implies(o.Eq(s.entry[d], DirKind.LIVE), o.Or(
                o.And(d == src, o.Not(s.source_renamed)), o.And(d == dst, s.dest_renamed)))),
            o.ForAll(DIRS, lambda d: o.Implies(o.Eq(s.entry[d], DirKind.MOVE), o.And(
                d == dst, o.Not(s.dest_renamed)))),
        )
        idle = o.And(o.Not(s.lock_held), o.Not(s.dest_durable), o.Not(s.source_renamed),
                     o.Not(s.dest_renamed))
        stopped = o.Implies(o.Not(s.running), o.And(
            o.Eq(s.move_state, MoveState.NONE), o.Not(s.partition_online)))
        return o.And(o.If(moving(o, s), shape, idle), stopped)

    @m.lemma("DATA_COMPLETE", supports=STRUCTURE + DATA)
    def data_complete(o: Ops, s: State) -> Term:
        """Every ``tp`` and the served log hold every acknowledged record, durably; a durable
        ``tp.move`` is complete; with no ``tp``, a durable complete ``tp.move`` exists."""
        src, dst = s.source_dir, s.dest_dir
        some_live = o.Exists(DIRS, lambda d: o.Eq(s.entry[d], DirKind.LIVE))
        complete_move = o.Exists(DIRS, lambda d: o.And(
            o.Eq(s.entry[d], DirKind.MOVE), s.log_durable_end[d] == s.acked_end))
        return o.And(
            o.ForAll(DIRS, lambda d: o.Implies(
                o.Eq(s.entry[d], DirKind.LIVE), s.log_durable_end[d] == s.acked_end)),
            o.Or(some_live, complete_move),
            o.Implies(o.And(s.running, s.partition_online), o.And(
                s.log_end[src] == s.acked_end, s.log_durable_end[src] == s.acked_end)),
            o.Implies(o.And(moving(o, s), s.dest_durable), o.And(
                s.log_durable_end[dst] == s.acked_end, s.log_end[dst] == s.acked_end)),
            o.ForAll(DIRS, lambda d: o.Implies(o.Eq(s.entry[d], DirKind.LIVE),
                                               s.log_end[d] == s.acked_end)),
        )

    # -- witnesses -----------------------------------------------------------------------

    @m.witness("MOVE_COMPLETED")
    def move_completed(o: Ops, s: State) -> Term:
        """A move finished with data: the live log is on another dir and holds a record."""
        return o.And(s.running, o.Eq(s.move_state, MoveState.DONE), s.acked_end >= 1,
                     s.source_dir != DIRS[0])

    @m.witness("PROMOTED_AFTER_CRASH")
    def promoted_after_crash(o: Ops, s: State) -> Term:
        """A crash mid-swap recovered by promoting ``tp.move`` with data."""
        return o.And(s.running, o.Eq(s.recovery_rule, RecoveryRule.PROMOTE_MOVE),
                     s.partition_online, s.acked_end >= 1)

    return m


MODELS = (
    ModelDefinition(
        name="replica_move",
        doc="KIP-113 §1-§3: one broker, three dirs, appends during the move, crash and dir "
        "failure at every step",
        build=build,
        variants=(
            Variant(
                "shipped",
                "durable tp.move before the source rename, final catch-up under the lock, the "
                "project's recovery rules",
                shipped=True,
                expected={
                    "MOVE_NO_LOSS": Status.PROVED,
                    "MOVE_SINGLE_LIVE": Status.PROVED,
                    "MOVE_RECOVERY_TOTAL": Status.PROVED,
                    "DIR_FAILURE_ISOLATION": Status.PROVED,
                },
            ),
            Variant(
                "swap_before_dest_durable",
                "Apache Kafka's order: tp.move is renamed without fsyncing its data first",
                {"dest_durable_before_swap": False},
                expected={"MOVE_NO_LOSS": Status.VIOLATED},
                depth=8,
            ),
            Variant(
                "move_while_dir_offline",
                "a move may start while another dir is offline (and may hold a tp.move that "
                "nobody could abandon); checked without records: the defect is availability",
                {"move_needs_all_dirs": False, "records_max": 0},
                expected={"MOVE_RECOVERY_TOTAL": Status.VIOLATED},
                depth=9,
            ),
            Variant(
                "final_catch_up_unlocked",
                "the final catch-up and the swap run without the partition lock",
                {"lock_final_catch_up": False},
                expected={"MOVE_NO_LOSS": Status.VIOLATED},
                depth=8,
            ),
        ),
        depth=12,
        source="KIP-113 §1-§3",
    ),
)
