"""Startup recovery decisions checked against ``model.move_recovery.classify``.

The ``CLASSIFIED`` trace event carries the decision but not its input, so the simulator, which
knows the disk, checks each decision at the restart itself: before the log manager opens, it
records which log dirs hold ``tp``, ``tp.move`` and ``tp.delete`` and which dirs are bad; after,
it evaluates the model's classification on that input (concretely) and compares the main rule,
whether the partition is served and from where, whether a move resumes and into which dir,
which ``tp.move`` is promoted, and which ``tp.delete`` dirs are queued for deletion.

The model has three dirs: a broker with fewer is padded with empty good dirs (the
classification treats them as absent), one with more is not checked. The model keeps one entry
per dir; a dir holding two of the partition's dirs (``tp.move`` next to
a queued ``tp.delete``) is outside it and that partition's decision is counted as unchecked.

This module is a sans-IO core.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__sans_io__ = True


@dataclass(frozen=True, slots=True)
class StartupView:
    """What one partition looked like at a start: per log dir, the kinds present."""

    kinds: Mapping[str, frozenset[str]]
    bad_dirs: frozenset[str]


class _Startup:
    """The model's view of a start (``entry``, ``dir_online``, ``mount_missing`` per dir)."""

    def __init__(self, entry: dict[int, Any], online: dict[int, bool]) -> None:
        self.entry = entry
        self.dir_online = online
        self.mount_missing = dict.fromkeys(entry, False)


def model_decision(view: StartupView, log_dirs: Sequence[str]) -> dict[str, Any] | None:
    """The model's decision for one partition, or ``None`` when outside the model.

    Args:
        view: the partition's dirs and the bad dirs at the start.
        log_dirs: the broker's dirs, in order (model dir ``i`` is ``log_dirs[i]``).

    Returns:
        ``rule``, ``online``, ``live_dir``, ``resume_dir``, ``promote_dir`` and ``delete_dirs``.
    """
    try:
        from model import ConcreteOps  # noqa: PLC0415 (optional layer)
        from model import move_recovery as recovery  # noqa: PLC0415
    except ImportError:
        return None
    model_dirs = recovery_dirs()
    if len(log_dirs) > len(model_dirs):
        return None
    # Fewer dirs than the model's: the missing ones are good and hold nothing of the partition,
    # which the classification treats exactly as absent dirs.
    padded = [*log_dirs, *([""] * (len(model_dirs) - len(log_dirs)))]
    entry: dict[int, Any] = {}
    for index, log_dir in enumerate(padded):
        kinds = view.kinds.get(log_dir, frozenset())
        if len(kinds) > 1:
            return None
        entry[index] = recovery.DirKind[next(iter(kinds))] if kinds else recovery.DirKind.ABSENT
    online = {index: log_dir not in view.bad_dirs for index, log_dir in enumerate(padded)}
    dirs = tuple(range(len(padded)))
    log_dirs = padded
    startup: Any = _Startup(entry, online)  # duck-types the State the model reads
    decision = recovery.classify(ConcreteOps(), startup, dirs, recovery.PROJECT_RULES)
    served = bool(decision.online)
    return {
        "rule": decision.rule.name,
        "online": served,
        "live_dir": log_dirs[decision.live_dir] if served else None,
        "resume_dir": log_dirs[decision.resume_dir] if decision.resume else None,
        "promote_dir": next((log_dirs[d] for d in dirs if decision.promote[d]), None),
        "delete_dirs": tuple(log_dirs[d] for d in dirs if decision.schedule_delete[d]),
    }


def recovery_dirs() -> tuple[int, ...]:
    """The model's log dirs (its classification is written for exactly these)."""
    try:
        from model import replica_move  # noqa: PLC0415 (optional layer)
    except ImportError:
        return ()
    return tuple(replica_move.DIRS)


def compare(implementation: Mapping[str, Any], model: Mapping[str, Any]) -> str | None:
    """The first difference between the implementation's decision and the model's, or None."""
    for key in ("rule", "online", "live_dir", "resume_dir", "promote_dir", "delete_dirs"):
        if implementation[key] != model[key]:
            return f"{key}: implementation {implementation[key]!r}, model {model[key]!r}"
    return None
