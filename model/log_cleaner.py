"""The log cleaner (Kafka log compaction) racing appends, truncation and a KIP-113 move, as a
checked model: COMPACTION_KEEPS_LATEST and COMPACTION_OFFSETS_STABLE.

What is modelled (``spec/log_cleaner.md``, ``impl/storage/log_cleaner.py`` and its shell): one
partition's log of at most ``OFFSETS`` records, each with a key, maybe a tombstone, readable or
removed by cleaning. The active segment starts at ``active_base`` (``segment_rolled`` moves it to
the LEO). ``cleaning_started`` snapshots the offset map over the dirty range ``[point, end)``
(``end``: the active segment's base); ``segments_replaced`` applies the keep rules to every record
below ``end`` and moves the cleaner point there. Between the two, records are appended, the log is
truncated (a follower after a leader change: later records at the same offsets may carry other
keys) and a move copies the log record by record into ``tp.move`` and swaps it in. Tombstones are
stamped with a delete horizon (``now + DELETE_RETENTION``) by the first cleaning that keeps them
and removed by a cleaning once the clock passed it.

The shipped cleaner aborts (``cleaning_aborted``) when the log it snapshotted was truncated or
swapped by a move, starts no cleaning and installs no result while a move copies, and never looks
at the active segment. Known-bad variants: ``clean_active_segment`` (the map and the groups reach
the LEO), ``swap_races_cleaner_replace`` (the replace happens while a move copies: the mover's
byte cursor, now pointing into a shorter file, skips records it never copied),
``truncation_unchecked`` (the replace uses a map built before a truncation) and
``tombstone_removed_early`` (a tombstone goes the first time it is cleaned).
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

#: Offsets the log may hold.
OFFSETS = (0, 1, 2)
#: Record keys.
KEYS = (0, 1)
#: The clock's range and ``delete.retention.ms`` in its ticks.
NOW_MAX = 2
DELETE_RETENTION = 1
HORIZON_MAX = NOW_MAX + DELETE_RETENTION
_N = len(OFFSETS)

#: The strengthening that makes the invariants inductive.
LEMMAS = ("CLEANER_SHAPE",)


class CleanerState(enum.Enum):
    """A partition's cleaning state (``impl.storage.log_cleaner``)."""

    IDLE = "idle"  #: LogCleaner.scala: not being cleaned
    CLEANING = "cleaning"  #: LogCleaningInProgress
    ABORTED = "aborted"  #: LogCleaningAborted
    PAUSED = "paused"  #: LogCleaningPaused(n)


_IDLE, _CLEANING = CleanerState.IDLE, CleanerState.CLEANING
_ABORTED, _PAUSED = CleanerState.ABORTED, CleanerState.PAUSED


def build(variant: Variant) -> Model:
    """The cleaner model; flags ``clean_active``, ``replace_during_move``,
    ``ignore_truncation``, ``drop_tombstones_at_once`` (default false)."""
    clean_active = bool(variant.flags.get("clean_active", False))
    during_move = bool(variant.flags.get("replace_during_move", False))
    ignore_truncation = bool(variant.flags.get("ignore_truncation", False))
    drop_tombstones = bool(variant.flags.get("drop_tombstones_at_once", False))
    m = Model("log_cleaner", __doc__ or "")
    m.var("leo", Int(0, _N), doc="log end offset")
    m.var("key", Int(0, len(KEYS) - 1), over=[OFFSETS], doc="key of the record at each offset")
    m.var("tomb", Bool(), over=[OFFSETS], doc="the record is a tombstone")
    m.var("present", Bool(), over=[OFFSETS], doc="the record is readable in the live log")
    m.var("horizon", Int(-1, HORIZON_MAX), over=[OFFSETS],
          doc="delete horizon stamped in the record's batch (-1: none)")
    m.var("active_base", Int(0, _N), doc="base offset of the active segment")
    m.var("point", Int(0, _N), doc="the cleaner point (cleaner-offset-checkpoint)")
    m.var("state", Enum(CleanerState), doc="the partition's cleaning state")
    m.var("stale", Bool(), doc="the snapshot's log was truncated or swapped since the start")
    m.var("map_end", Int(0, _N), doc="end of the running cleaning's offset map")
    m.var("map_latest", Int(-1, _N - 1), over=[KEYS], doc="the offset map: latest offset per key")
    m.var("now", Int(0, NOW_MAX), doc="the clock")
    m.var("moving", Bool(), doc="a KIP-113 move copies the log into tp.move")
    m.var("copy_leo", Int(0, _N), doc="the mover's cursor (next offset to copy)")
    m.var("dest_present", Bool(), over=[OFFSETS], doc="the record was copied into tp.move")

    @m.init()
    def init(o: Ops) -> Mapping[str, Term]:
        return {
            "leo": 0, "key": 0, "tomb": False, "present": False, "horizon": -1,
            "active_base": 0, "point": 0, "state": _IDLE, "stale": False, "map_end": 0,
            "map_latest": -1, "now": 0, "moving": False, "copy_leo": 0, "dest_present": False,
        }

    def key_is(o: Ops, s: State, at: int, k: int) -> Term:
        return o.Eq(s.key[at], k)

    def map_of(o: Ops, s: State, at: int) -> Term:
        """``map_latest[key[at]]``."""
        term: Term = s.map_latest[KEYS[-1]]
        for k in reversed(KEYS[:-1]):
            term = o.If(key_is(o, s, at, k), s.map_latest[k], term)
        return term

    def expired(o: Ops, s: State, at: int) -> Term:
        return o.And(s.horizon[at] >= 0, s.now >= s.horizon[at])

    @m.action(modifies=["leo", "key", "tomb", "present", "horizon"],
              params={"at": OFFSETS, "k": KEYS, "tombstone": (False, True)})
    def record_appended(o: Ops, s: State, at: int, k: int, tombstone: bool) -> Transition:
        """A record (or a tombstone) of key ``k`` is appended at the LEO, in the active segment."""
        return Transition(o.Eq(s.leo, at), {
            "leo": at + 1, "key": {at: k}, "tomb": {at: tombstone}, "present": {at: True},
            "horizon": {at: -1},
        })

    @m.action(modifies=["active_base"])
    def segment_rolled(o: Ops, s: State) -> Transition:
        """The active segment is sealed; a new one starts at the LEO."""
        return Transition(s.active_base < s.leo, {"active_base": s.leo})

    @m.action(modifies=["now"])
    def clock_ticked(o: Ops, s: State) -> Transition:
        """Time passes (towards tombstones' delete horizons)."""
        return Transition(s.now < NOW_MAX, {"now": s.now + 1})

    @m.action(modifies=["state", "stale", "map_end", "map_latest"])
    def cleaning_started(o: Ops, s: State) -> Transition:
        """The cleaner picks the log and builds the offset map over ``[point, end)``."""
        end = s.leo if clean_active else s.active_base
        latest: dict[int, Term] = {}
        for k in KEYS:
            found: Term = -1
            for at in OFFSETS:  # rising: the last match wins
                hit = o.And(s.present[at], key_is(o, s, at, k), at >= s.point, at < end)
                found = o.If(hit, at, found)
            latest[k] = found
        guard = o.And(o.Eq(s.state, _IDLE), s.point < end)
        if not during_move:
            guard = o.And(guard, o.Not(s.moving))
        return Transition(guard, {
            "state": _CLEANING, "stale": False, "map_end": end, "map_latest": latest,
        })

    @m.action(modifies=["present", "horizon", "point", "state", "copy_leo"])
    def segments_replaced(o: Ops, s: State) -> Transition:
        """The cleaned groups replace the segments below the map's end; the point moves there."""
        keep: dict[int, Term] = {}
        stamp: dict[int, Term] = {}
        for at in OFFSETS:
            below = at < s.map_end
            latest = o.Not(map_of(o, s, at) > at)
            if drop_tombstones:
                tombstone_ok = o.Not(s.tomb[at])
            else:
                tombstone_ok = o.Or(o.Not(s.tomb[at]), o.Not(expired(o, s, at)))
            keep[at] = o.Or(o.Not(below), o.And(latest, tombstone_ok))
            stamp[at] = o.And(below, s.present[at], keep[at], s.tomb[at], s.horizon[at] < 0)
        present = {at: o.And(s.present[at], keep[at]) for at in OFFSETS}
        removed_behind_cursor = o.Count(*[
            o.And(s.present[at], o.Not(keep[at]), at < s.copy_leo) for at in OFFSETS
        ])
        guard = o.Eq(s.state, _CLEANING)
        if not ignore_truncation:
            guard = o.And(guard, o.Not(s.stale))
        if not during_move:
            guard = o.And(guard, o.Not(s.moving))
        return Transition(guard, {
            "present": present,
            "horizon": {at: o.If(stamp[at], s.now + DELETE_RETENTION, s.horizon[at])
                        for at in OFFSETS},
            "point": s.map_end,
            "state": _IDLE,
            # the mover's cursor is a byte position: in the shorter cleaned file it lies later
            "copy_leo": o.If(s.moving, o.Min(s.leo, s.copy_leo + removed_behind_cursor),
                             s.copy_leo),
        })

    @m.action(modifies=["state"])
    def cleaning_aborted(o: Ops, s: State) -> Transition:
        """The snapshot no longer holds (truncated, swapped, or a move runs): nothing installed."""
        return Transition(o.And(o.Eq(s.state, _CLEANING), o.Or(s.stale, s.moving)),
                          {"state": _ABORTED})

    @m.action(modifies=["state"])
    def cleaning_paused(o: Ops, s: State) -> Transition:
        """The aborted cleaning is paused (the runner resumes it right away)."""
        return Transition(o.Eq(s.state, _ABORTED), {"state": _PAUSED})

    @m.action(modifies=["state"])
    def cleaning_resumed(o: Ops, s: State) -> Transition:
        """The partition may be chosen again, from a fresh snapshot."""
        return Transition(o.Eq(s.state, _PAUSED), {"state": _IDLE})

    @m.action(modifies=["leo", "present", "active_base", "stale", "dest_present",
                        "copy_leo"], params={"to": OFFSETS})
    def log_truncated(o: Ops, s: State, to: int) -> Transition:
        """A follower truncates to ``to`` (a ``.move`` is cut along); a running cleaning's
        snapshot is stale. Never below the cleaner point: the cleaner stops below the HW, and
        only an unclean election truncates below the HW, which loses committed records anyway
        (NO_COMMITTED_LOSS assumes it off); inside the dirty range it may (KIP-101 epochs)."""
        return Transition(o.And(to < s.leo, to >= s.point), {
            "leo": to,
            "present": {at: o.And(s.present[at], at < to) for at in OFFSETS},
            "dest_present": {at: o.And(s.dest_present[at], at < to) for at in OFFSETS},
            "copy_leo": o.Min(s.copy_leo, to),
            "active_base": o.Min(s.active_base, to),
            "stale": o.Or(s.stale, o.Eq(s.state, _CLEANING)),
        })

    @m.action(modifies=["moving", "copy_leo", "dest_present"])
    def move_started(o: Ops, s: State) -> Transition:
        """AlterReplicaLogDirs: an empty ``tp.move`` is created."""
        return Transition(o.Not(s.moving),
                          {"moving": True, "copy_leo": 0, "dest_present": False})

    @m.action(modifies=["copy_leo", "dest_present"], params={"at": OFFSETS})
    def move_copied(o: Ops, s: State, at: int) -> Transition:
        """The mover copies the record at its cursor (as it is now) into ``tp.move``."""
        guard = o.And(s.moving, o.Eq(s.copy_leo, at), at < s.leo)
        return Transition(guard, {"copy_leo": at + 1, "dest_present": {at: s.present[at]}})

    @m.action(modifies=["moving", "present", "stale"])
    def move_swapped(o: Ops, s: State) -> Transition:
        """Caught up under the lock: ``tp.move`` becomes the live log."""
        return Transition(o.And(s.moving, o.Eq(s.copy_leo, s.leo)), {
            "moving": False,
            "present": {at: s.dest_present[at] for at in OFFSETS},
            "stale": o.Or(s.stale, o.Eq(s.state, _CLEANING)),
        })

    def latest_below_point(o: Ops, s: State, at: int) -> Term:
        later = [o.And(later_at < s.point, o.Eq(s.key[later_at], s.key[at]))
                 for later_at in OFFSETS if later_at > at]
        return o.And(at < s.point, at < s.leo, o.Not(o.Or(*later)) if later else True)

    @m.invariant("COMPACTION_KEEPS_LATEST", supports=(*LEMMAS, "COMPACTION_OFFSETS_STABLE"))
    def keeps_latest(o: Ops, s: State) -> Term:
        """For every key, its record with the highest offset below the cleaner point is
        readable, unless it is a tombstone whose delete horizon has passed."""
        return o.And(*[
            o.Implies(o.And(latest_below_point(o, s, at),
                            o.Not(o.And(s.tomb[at], expired(o, s, at)))),
                      s.present[at])
            for at in OFFSETS
        ])

    @m.invariant("COMPACTION_OFFSETS_STABLE", supports=LEMMAS)
    def offsets_stable(o: Ops, s: State) -> Term:
        """Every record at or past the cleaner point, and every record of the active segment,
        is readable; nothing is readable past the LEO."""
        return o.And(*[
            o.And(o.Implies(o.And(at < s.leo, o.Or(at >= s.point, at >= s.active_base)),
                            s.present[at]),
                  o.Implies(at >= s.leo, o.Not(s.present[at])))
            for at in OFFSETS
        ])

    @m.lemma("CLEANER_SHAPE", supports=LEMMAS)
    def cleaner_shape(o: Ops, s: State) -> Term:
        """Bounds (point ≤ active base ≤ LEO); a current snapshot's map is exactly the latest
        readable offset per key in ``[point, end)``; a move's copy agrees with the log below
        its cursor; horizons only on tombstones."""
        map_exact = []
        for k in KEYS:
            found: Term = -1
            for at in OFFSETS:
                hit = o.And(s.present[at], key_is(o, s, at, k), at >= s.point, at < s.map_end)
                found = o.If(hit, at, found)
            map_exact.append(o.Eq(s.map_latest[k], found))
        current = o.And(o.Eq(s.state, _CLEANING), o.Not(s.stale))
        return o.And(
            s.point <= s.active_base, s.active_base <= s.leo, s.copy_leo <= s.leo,
            o.Implies(current, o.And(s.point <= s.map_end, s.map_end <= s.active_base,
                                     *map_exact)),
            *[o.Implies(o.And(s.moving, at < s.copy_leo),
                        o.Eq(s.dest_present[at], s.present[at])) for at in OFFSETS],
            *[o.Implies(o.And(s.moving, at >= s.copy_leo), o.Not(s.dest_present[at]))
              for at in OFFSETS],
            *[o.Implies(s.horizon[at] >= 0, s.tomb[at]) for at in OFFSETS],
        )

    @m.witness("OLDER_RECORD_CLEANED")
    def older_record_cleaned(o: Ops, s: State) -> Term:
        """A cleaning removed a record a later one of its key superseded."""
        return o.And(o.Eq(s.state, _IDLE),
                     o.Or(*[o.And(at < s.leo, o.Not(s.present[at])) for at in OFFSETS]))

    @m.witness("TOMBSTONE_EXPIRED_AND_GONE")
    def tombstone_gone(o: Ops, s: State) -> Term:
        """A tombstone was kept, stamped, and removed once its horizon passed."""
        return o.Or(*[o.And(at < s.leo, s.tomb[at], s.horizon[at] >= 0, o.Not(s.present[at]))
                      for at in OFFSETS])

    return m


MODELS = (
    ModelDefinition(
        name="log_cleaner",
        doc="COMPACTION_KEEPS_LATEST, COMPACTION_OFFSETS_STABLE: compaction racing appends, "
            "truncation and a KIP-113 move",
        build=build,
        variants=(
            Variant("shipped", "never the active segment; abort on a truncated or swapped "
                    "snapshot; no cleaning while a move copies; tombstones kept until their "
                    "horizon", shipped=True,
                    expected={"COMPACTION_KEEPS_LATEST": Status.PROVED,
                              "COMPACTION_OFFSETS_STABLE": Status.PROVED}),
            Variant("clean_active_segment", "the map and the groups reach into the active "
                    "segment", {"clean_active": True},
                    expected={"COMPACTION_OFFSETS_STABLE": Status.VIOLATED}),
            Variant("swap_races_cleaner_replace", "the cleaner replaces segments while a move "
                    "copies them: the mover's byte cursor skips records",
                    {"replace_during_move": True},
                    expected={"COMPACTION_KEEPS_LATEST": Status.VIOLATED}),
            Variant("truncation_unchecked", "the replace uses an offset map built before a "
                    "truncation", {"ignore_truncation": True},
                    expected={"COMPACTION_KEEPS_LATEST": Status.VIOLATED}),
            Variant("tombstone_removed_early", "a tombstone goes the first time it is cleaned, "
                    "before delete.retention.ms", {"drop_tombstones_at_once": True},
                    expected={"COMPACTION_KEEPS_LATEST": Status.VIOLATED}),
        ),
        depth=8,
        source="Kafka log compaction (LogCleaner, LogCleanerManager, LogLoader), KIP-534",
    ),
)
