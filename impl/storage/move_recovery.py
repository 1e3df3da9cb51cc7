"""Startup classification of a partition's dirs after a crash (KIP-113 §3, ``move_recovery``).

Input: on which *good* log dirs ``tp``, ``tp.move`` and ``tp.delete`` exist, and whether any log
dir is bad (unreadable, or without ``meta.properties`` while the broker's other dirs record a dir
that is missing: an unmounted disk, see ``LogManager._open_dirs``). Output: which rules apply
and what to do. Invariant MOVE_RECOVERY_TOTAL: exactly one live log, or the partition offline
when a bad dir may hold it; the only copy is never deleted (a scheduled deletion is carried out
only while a served copy at least as long exists, ``LogManager.delete_pending_nowait``).

KIP-113's four rules, and where they are not enough (``spec/replica_move.md`` §Recovery):

* RESUME_MOVE (rule 1): ``tp`` and one ``tp.move`` on good dirs: resume copying, from the
  destination's own LEO (KAFKA-9087).
* PROMOTE_MOVE (rule 2): one ``tp.move``, no ``tp`` on a good dir, no bad dir: rename it ``tp``.
  In this project's swap order ``tp`` is renamed away only after ``tp.move`` is durable and
  complete, so the promoted copy holds every record.
* OFFLINE_UNTOUCHED (rule 3): one ``tp.move``, no ``tp`` on a good dir, some bad dir: offline,
  touch nothing (the bad dir may hold the real ``tp``).
* DELETE_SCHEDULED (rule 4): delete ``tp.delete`` asynchronously, **only when a ``tp`` or
  ``tp.move`` exists on a good dir or no dir is bad**. Added guard: a ``tp.delete`` may be the
  last readable copy when the ``tp.move`` it was renamed for sits on a dir that is now bad.
* ABANDONED_MOVE_DELETED (added): a ``tp.move`` that cannot be resumed while ``tp`` is live on a
  good dir (several ``.move`` dirs, or one in ``tp``'s own dir) is deleted; ``tp`` stays live.
  Our protocol never makes two ``.move`` dirs (a redirect's abandon rename is durable before the
  new ``.move`` is created), so this only meets hand-made states.
* OFFLINE_AMBIGUOUS (added): two live ``tp`` dirs, or no ``tp`` and several ``tp.move`` dirs:
  offline, touch nothing (Apache Kafka refuses to start here; we keep serving the rest).
* DELETE_DEFERRED (added): only ``tp.delete`` on good dirs and some dir is bad: keep it, offline.

A ``tp.move`` whose topic was deleted cannot be mistaken for a swap: :meth:`LogManager.delete`
abandons the ``.move`` durably before renaming ``tp`` away.

This module is a sans-IO core.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from impl.storage.names import TopicPartition
from impl.trace import TraceEvent

__sans_io__ = True

MACHINE = "move_recovery"


class RecoveryRule(enum.Enum):
    """The startup rule applied to one partition."""

    LIVE = "LIVE"  #: one ``tp`` on a good dir, nothing else to do
    RESUME_MOVE = "RESUME_MOVE"  #: KIP-113 §3 rule 1
    PROMOTE_MOVE = "PROMOTE_MOVE"  #: KIP-113 §3 rule 2
    OFFLINE_UNTOUCHED = "OFFLINE_UNTOUCHED"  #: KIP-113 §3 rule 3
    DELETE_SCHEDULED = "DELETE_SCHEDULED"  #: KIP-113 §3 rule 4 (guarded)
    ABANDONED_MOVE_DELETED = "ABANDONED_MOVE_DELETED"  #: logproof: unresumable ``.move``
    OFFLINE_AMBIGUOUS = "OFFLINE_AMBIGUOUS"  #: logproof: two live copies or several ``.move``
    DELETE_DEFERRED = "DELETE_DEFERRED"  #: logproof: ``.delete`` may be the last copy


@dataclass(frozen=True, slots=True)
class PartitionDirs:
    """Where a partition's dirs are, on good log dirs only."""

    tp: TopicPartition
    live: frozenset[str] = frozenset()
    move: frozenset[str] = frozenset()
    delete: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class RecoveryDecision:
    """What startup does for one partition.

    Attributes:
        rules: every rule that applied, in order.
        live_dir: the dir whose ``tp`` is served (after a promotion, the promoted one).
        promote_dir: rename ``tp.move`` to ``tp`` here first.
        resume_dest_dir: resume a move from ``live_dir`` to this dir.
        delete_move_dirs: dirs whose ``tp.move`` is abandoned (deleted).
        delete_dirs: dirs whose ``tp.delete`` is deleted asynchronously.
        offline: no copy is served.
    """

    tp: TopicPartition
    rules: tuple[RecoveryRule, ...]
    live_dir: str | None = None
    promote_dir: str | None = None
    resume_dest_dir: str | None = None
    delete_move_dirs: tuple[str, ...] = ()
    delete_dirs: tuple[str, ...] = ()
    offline: bool = False

    def trace(self) -> TraceEvent:
        """The trace event of this classification."""
        return TraceEvent.of(
            MACHINE,
            "CLASSIFIED",
            str(self.tp),
            "CRASHED",
            "OFFLINE" if self.offline else ("LIVE" if self.live_dir else "NONE"),
            rules=tuple(rule.name for rule in self.rules),
            live_dir=self.live_dir,
            promote_dir=self.promote_dir,
            resume_dest_dir=self.resume_dest_dir,
            delete_move_dirs=self.delete_move_dirs,
            delete_dirs=self.delete_dirs,
        )


def classify(dirs: PartitionDirs, any_bad_dir: bool) -> RecoveryDecision:
    """Decide startup actions for one partition (see the module docstring)."""
    live, move, delete = sorted(dirs.live), sorted(dirs.move), sorted(dirs.delete)
    tp = dirs.tp
    if len(live) >= 2 or (not live and len(move) >= 2):
        return RecoveryDecision(tp, (RecoveryRule.OFFLINE_AMBIGUOUS,), offline=True)
    rules: list[RecoveryRule] = []
    if live:
        (live_dir,) = live
        resumable = [d for d in move if d != live_dir]
        abandoned = tuple(d for d in move if d == live_dir or len(resumable) > 1)
        resume = resumable[0] if len(resumable) == 1 else None
        if resume is not None:
            rules.append(RecoveryRule.RESUME_MOVE)
        elif not move:
            rules.append(RecoveryRule.LIVE)
        if abandoned:
            rules.append(RecoveryRule.ABANDONED_MOVE_DELETED)
        if delete:
            rules.append(RecoveryRule.DELETE_SCHEDULED)
        return RecoveryDecision(
            tp, tuple(rules), live_dir=live_dir, resume_dest_dir=resume,
            delete_move_dirs=abandoned, delete_dirs=tuple(delete),
        )
    if move:
        (move_dir,) = move
        if any_bad_dir:
            rules.append(RecoveryRule.OFFLINE_UNTOUCHED)
            if delete:
                rules.append(RecoveryRule.DELETE_SCHEDULED)
            return RecoveryDecision(tp, tuple(rules), delete_dirs=tuple(delete), offline=True)
        rules.append(RecoveryRule.PROMOTE_MOVE)
        if delete:
            rules.append(RecoveryRule.DELETE_SCHEDULED)
        return RecoveryDecision(
            tp, tuple(rules), live_dir=move_dir, promote_dir=move_dir, delete_dirs=tuple(delete)
        )
    if delete and any_bad_dir:
        return RecoveryDecision(tp, (RecoveryRule.DELETE_DEFERRED,), offline=True)
    return RecoveryDecision(tp, (RecoveryRule.DELETE_SCHEDULED,), delete_dirs=tuple(delete))


def classify_all(
    found: Iterable[PartitionDirs], any_bad_dir: bool
) -> list[RecoveryDecision]:
    """:func:`classify` for every partition, in partition order."""
    return [classify(dirs, any_bad_dir) for dirs in sorted(found, key=lambda d: d.tp)]
