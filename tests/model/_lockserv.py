"""The worked example of ``model/__init__.py``: a lock server, used to test the layer itself."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from model import (
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

NODES = range(2)


class Phase(enum.Enum):
    """Where the server is (used to exercise enum variables)."""

    IDLE = "idle"  #: nobody holds the lock
    GRANTED = "granted"  #: one node holds it


def build(variant: Variant) -> Model:
    """The lock server; flags: ``check_free`` (guard lock on the server having it),
    ``leak_frame`` (unlock also writes ``grants_count`` outside its frame)."""
    m = Model("lockserv", "one lock, granted to at most one node")
    m.var("held", Bool(), over=[NODES], doc="node n holds the lock")
    m.var("server_free", Bool(), doc="the server has the lock")
    m.var("phase", Enum(Phase), doc="the server's phase")
    m.var("grants_count", Int(0, 3), doc="grants so far, saturating at 3")

    @m.init()
    def init(o: Ops) -> Mapping[str, Term]:
        return {"held": False, "server_free": True, "phase": Phase.IDLE, "grants_count": 0}

    @m.action(modifies=["held", "server_free", "phase", "grants_count"], params={"n": NODES})
    def lock(o: Ops, s: State, n: int) -> Transition:
        guard = s.server_free if variant.flags.get("check_free", True) else True
        return Transition(guard, {
            "held": {n: True},
            "server_free": False,
            "phase": Phase.GRANTED,
            "grants_count": o.Min(s.grants_count + 1, 3),
        })

    unlock_frame = ["held", "server_free", "phase"]

    @m.action(modifies=unlock_frame, params={"n": NODES})
    def unlock(o: Ops, s: State, n: int) -> Transition:
        update: dict[str, Any] = {"held": {n: False}, "server_free": True, "phase": Phase.IDLE}
        if variant.flags.get("leak_frame", False):
            update["grants_count"] = 0
        return Transition(s.held[n], update)

    @m.invariant("MUTEX", supports=["HELD_MEANS_TAKEN"])
    def mutex(o: Ops, s: State) -> Term:
        return o.Not(o.And(s.held[0], s.held[1]))

    @m.lemma("HELD_MEANS_TAKEN", supports=["MUTEX"])
    def held_means_taken(o: Ops, s: State) -> Term:
        return o.ForAll(NODES, lambda n: o.Implies(
            s.held[n], o.And(o.Not(s.server_free), o.Eq(s.phase, Phase.GRANTED))))

    @m.invariant("FEW_GRANTS")
    def few_grants(o: Ops, s: State) -> Term:
        """Deliberately false after three grants: bounded checking must find it."""
        return s.grants_count < 3

    @m.witness("LOCKED")
    def locked(o: Ops, s: State) -> Term:
        return s.held[1]

    return m


LOCKSERV = ModelDefinition(
    name="lockserv",
    doc="a lock server",
    build=build,
    variants=(
        Variant("shipped", "checks the lock", shipped=True,
                expected={"MUTEX": Status.PROVED, "HELD_MEANS_TAKEN": Status.PROVED,
                          "FEW_GRANTS": Status.VIOLATED}),
        Variant("no_free_check", "grants blindly", {"check_free": False},
                expected={"MUTEX": Status.VIOLATED}),
        Variant("leak_frame", "unlock writes outside its frame", {"leak_frame": True}),
    ),
    depth=6,
)
