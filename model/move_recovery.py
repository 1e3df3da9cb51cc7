"""Startup recovery of a partition's dirs after a crash (KIP-113 §3), two rule sets.

The classification is written once against the operations object, so it runs concretely (the
reference for ``impl/storage/move_recovery.py``) and symbolically (inside the ``recovered`` action
of :mod:`model.replica_move`). Two rule sets:

- ``project`` (shipped, ``spec/replica_move.md`` §Recovery): KIP-113's rules 1-3, rule 4 guarded
  so that a ``tp.delete`` is removed only when a live copy is established on a good dir, and the
  additions OFFLINE_AMBIGUOUS, ABANDONED_MOVE_DELETED and DELETE_DEFERRED. A log dir whose mount
  is missing at startup (its ``meta.properties`` absent while the broker's other dirs name it) is
  a *bad* dir, never an empty good one.
- ``kip113`` (known-bad: the four rules exactly as written): rule 1 for any ``tp`` with any
  ``tp.move``, rule 2 promotes every lone ``tp.move`` when no dir is bad, rule 3 otherwise,
  rule 4 deletes every ``tp.delete``; a dir whose mount is missing reads as an empty good dir
  (Apache Kafka writes a fresh ``meta.properties`` into it).

The ``move_recovery`` model definition below checks both rule sets inside the replica-move
machine with startup faults turned on (a dir unreadable at startup, a mount missing at startup).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from ._dsl import ModelDefinition, Ops, State, Status, Term, Variant

__sans_io__ = True

#: The rule set the implementation follows.
PROJECT_RULES = "project"
#: KIP-113 §3 exactly as written.
KIP113_RULES = "kip113"


class RecoveryRule(enum.Enum):
    """The main rule startup applied to the partition (``impl.storage.move_recovery``)."""

    LIVE = "LIVE"  #: one ``tp`` on a good dir, nothing else to do
    RESUME_MOVE = "RESUME_MOVE"  #: KIP-113 §3 rule 1
    PROMOTE_MOVE = "PROMOTE_MOVE"  #: KIP-113 §3 rule 2
    OFFLINE_UNTOUCHED = "OFFLINE_UNTOUCHED"  #: KIP-113 §3 rule 3
    DELETE_SCHEDULED = "DELETE_SCHEDULED"  #: KIP-113 §3 rule 4 (guarded in the project's rules)
    ABANDONED_MOVE_DELETED = "ABANDONED_MOVE_DELETED"  #: logproof: unresumable ``.move``
    OFFLINE_AMBIGUOUS = "OFFLINE_AMBIGUOUS"  #: logproof: two live copies or several ``.move``
    DELETE_DEFERRED = "DELETE_DEFERRED"  #: logproof: ``.delete`` may be the last copy


class DirKind(enum.Enum):
    """What one log dir holds of the partition (``impl.storage.names.DirKind`` plus absence)."""

    ABSENT = "ABSENT"  #: nothing of the partition on this dir
    LIVE = "LIVE"  #: KIP-113 §1: ``topic-partition``, the served copy
    MOVE = "MOVE"  #: KIP-113 §1: ``topic-partition.move``, a destination being filled
    DELETE = "DELETE"  #: KIP-113 §1 step 6: ``topic-partition.delete``, awaiting deletion


@dataclass(frozen=True)
class Classification:
    """What startup decides, as terms (concrete values or Z3 terms).

    Attributes:
        rule: the main :class:`RecoveryRule`.
        online: the partition is served.
        live_dir: the dir of the served ``tp`` (meaningful when ``online``).
        resume_dir: the ``tp.move`` dir a resumed move copies into (meaningful when ``resume``).
        resume: a move is resumed (rule 1).
        promote: per dir, ``tp.move`` is renamed ``tp`` (rule 2).
        abandon: per dir, ``tp.move`` is renamed ``tp.delete`` and deleted.
        schedule_delete: per dir, ``tp.delete`` is queued for asynchronous deletion.
        bad: per dir, the dir is treated as bad (offline) from now on.
    """

    rule: Term
    online: Term
    live_dir: Term
    resume_dir: Term
    resume: Term
    promote: dict[Any, Term]
    abandon: dict[Any, Term]
    schedule_delete: dict[Any, Term]
    bad: dict[Any, Term]


def _first(o: Ops, dirs: tuple[Any, ...], condition: dict[Any, Term]) -> Term:
    """The first dir satisfying ``condition`` (the last dir when none does)."""
    result: Term = dirs[-1]
    for d in reversed(dirs[:-1]):
        result = o.If(condition[d], d, result)
    return result


def _rule(o: Ops, cases: list[tuple[Term, RecoveryRule]], otherwise: RecoveryRule) -> Term:
    result: Term = otherwise
    for condition, rule in reversed(cases):
        result = o.If(condition, rule, result)
    return result


def classify(
    o: Ops, s: State, dirs: tuple[Any, ...], rules: str, detect_missing_mount: bool | None = None
) -> Classification:
    """Classify the partition's dirs at startup.

    Args:
        o: the operations object.
        s: the state at startup: ``entry[d]`` (a :class:`DirKind`), ``dir_online[d]`` (false for
            a dir found unreadable) and ``mount_missing[d]`` (the dir's mount is absent: it
            reads as empty).
        dirs: the log dirs.
        rules: :data:`PROJECT_RULES` or :data:`KIP113_RULES`.
        detect_missing_mount: whether a dir whose mount is missing is known to be bad (by its
            absent ``meta.properties``) rather than read as an empty good dir; by default, as
            the rule set does (the project's: yes; KIP-113's: no).

    Returns:
        The decision, as terms.

    Raises:
        ValueError: unknown rule set.
    """
    if rules not in (PROJECT_RULES, KIP113_RULES):
        raise ValueError(f"unknown recovery rules {rules!r}")
    project = rules == PROJECT_RULES
    detect = project if detect_missing_mount is None else detect_missing_mount
    if detect:
        good = {d: o.And(s.dir_online[d], o.Not(s.mount_missing[d])) for d in dirs}
    else:
        good = {d: s.dir_online[d] for d in dirs}
    seen = {d: o.If(o.And(good[d], o.Not(s.mount_missing[d])), s.entry[d], DirKind.ABSENT)
            for d in dirs}
    is_live = {d: o.Eq(seen[d], DirKind.LIVE) for d in dirs}
    is_move = {d: o.Eq(seen[d], DirKind.MOVE) for d in dirs}
    is_delete = {d: o.Eq(seen[d], DirKind.DELETE) for d in dirs}
    live_count = o.Count(*[is_live[d] for d in dirs])
    move_count = o.Count(*[is_move[d] for d in dirs])
    delete_count = o.Count(*[is_delete[d] for d in dirs])
    any_bad = o.Or(*[o.Not(good[d]) for d in dirs])
    first_live = _first(o, dirs, is_live)
    first_move = _first(o, dirs, is_move)
    bad = {d: o.Not(good[d]) for d in dirs}
    if project:
        ambiguous = o.Or(live_count >= 2, o.And(live_count == 0, move_count >= 2))
        live_case = o.And(o.Not(ambiguous), live_count == 1)
        resume = o.And(live_case, move_count == 1)
        abandon_all = o.And(live_case, move_count >= 2)
        lone_move = o.And(o.Not(ambiguous), live_count == 0, move_count == 1)
        promote_case = o.And(lone_move, o.Not(any_bad))
        untouched = o.And(lone_move, any_bad)
        nothing = o.And(live_count == 0, move_count == 0)
        deferred = o.And(nothing, delete_count >= 1, any_bad)
        delete_ok = o.Or(live_case, lone_move, o.And(nothing, o.Not(any_bad)))
        rule = _rule(o, [
            (ambiguous, RecoveryRule.OFFLINE_AMBIGUOUS),
            (resume, RecoveryRule.RESUME_MOVE),
            (abandon_all, RecoveryRule.ABANDONED_MOVE_DELETED),
            (live_case, RecoveryRule.LIVE),
            (promote_case, RecoveryRule.PROMOTE_MOVE),
            (untouched, RecoveryRule.OFFLINE_UNTOUCHED),
            (deferred, RecoveryRule.DELETE_DEFERRED),
        ], RecoveryRule.DELETE_SCHEDULED)
        return Classification(
            rule=rule,
            online=o.Or(live_case, promote_case),
            live_dir=o.If(live_case, first_live, first_move),
            resume_dir=first_move,
            resume=resume,
            promote={d: o.And(promote_case, is_move[d]) for d in dirs},
            abandon={d: o.And(abandon_all, is_move[d]) for d in dirs},
            schedule_delete={d: o.And(delete_ok, is_delete[d]) for d in dirs},
            bad=bad,
        )
    resume = o.And(live_count >= 1, move_count >= 1)
    promote_case = o.And(live_count == 0, move_count >= 1, o.Not(any_bad))
    untouched = o.And(live_count == 0, move_count >= 1, any_bad)
    rule = _rule(o, [
        (resume, RecoveryRule.RESUME_MOVE),
        (live_count >= 1, RecoveryRule.LIVE),
        (promote_case, RecoveryRule.PROMOTE_MOVE),
        (untouched, RecoveryRule.OFFLINE_UNTOUCHED),
    ], RecoveryRule.DELETE_SCHEDULED)
    return Classification(
        rule=rule,
        online=o.Or(live_count >= 1, promote_case),
        live_dir=o.If(live_count >= 1, first_live, first_move),
        resume_dir=first_move,
        resume=resume,
        promote={d: o.And(promote_case, is_move[d]) for d in dirs},
        abandon=dict.fromkeys(dirs, False),
        schedule_delete=dict(is_delete),
        bad=bad,
    )


def _build(variant: Variant) -> Any:
    from .replica_move import build  # noqa: PLC0415 - replica_move imports this module

    return build(variant)


#: The recovery-focused checks: the replica-move machine with startup faults.
MODELS = (
    ModelDefinition(
        name="move_recovery",
        doc="KIP-113 §3 startup recovery after a crash at any step, with dirs unreadable or "
        "unmounted at startup",
        build=_build,
        variants=(
            Variant(
                "shipped",
                "the project's rules: rule 4 guarded, missing mounts are bad dirs, abandons "
                "durable, plus OFFLINE_AMBIGUOUS / ABANDONED_MOVE_DELETED / DELETE_DEFERRED",
                {"recovery_rules": PROJECT_RULES, "startup_faults": True},
                shipped=True,
                expected={
                    "MOVE_NO_LOSS": Status.PROVED,
                    "MOVE_SINGLE_LIVE": Status.PROVED,
                    "MOVE_RECOVERY_TOTAL": Status.PROVED,
                    "DIR_FAILURE_ISOLATION": Status.PROVED,
                },
            ),
            Variant(
                "mount_missing_undetected",
                "the project's rules, but a dir whose disk is not mounted reads as an empty good "
                "dir (a fresh meta.properties is written into it, as Apache Kafka does)",
                {"startup_faults": True, "detect_missing_mount": False},
                expected={"MOVE_NO_LOSS": Status.VIOLATED},
                depth=6,
            ),
            Variant(
                "unguarded_async_delete",
                "the project's rules, but a queued tp.delete is removed even when the live copy "
                "it was kept for is no longer readable",
                {"startup_faults": True, "guard_async_delete": False},
                expected={"MOVE_RECOVERY_TOTAL": Status.VIOLATED},
                depth=6,
            ),
            Variant(
                "kip113_as_written",
                "KIP-113 §3's four rules exactly as written; a missing mount reads as an empty "
                "good dir and abandoned .move dirs (redirect, cancel, topic deletion) are renamed "
                "without a dir fsync (as Kafka)",
                {"recovery_rules": KIP113_RULES, "startup_faults": True,
                 "durable_abandon": False, "topic_deletion": True},
                expected={"MOVE_NO_LOSS": Status.VIOLATED},
                depth=6,
            ),
        ),
        depth=10,
        source="KIP-113 §3",
    ),
)
