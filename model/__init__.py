"""Executable models of logproof's state machines, checked with Z3 (bounded and by induction).

Usage guide
-----------
A model is written once, mypyvy-style, and read two ways: concretely (plain Python values; the
reference that ``conformance/`` replays implementation traces through) and symbolically (Z3 terms;
bounded model checking and induction proofs). Every model function receives an operations object
``o`` first and combines booleans and enums only through it: ``o.And``, ``o.Or``, ``o.Not``,
``o.Implies``, ``o.If``, ``o.Eq``/``o.Ne``/``o.In`` (enum members compare only this way),
``o.Distinct``, ``o.Count``, ``o.Sum``, ``o.Min``/``o.Max``, ``o.ForAll``/``o.Exists`` over a finite
domain, ``o.select``/``o.store`` (arrays with a symbolic key). Integers use ``+ - < <= ==``.
Never branch in Python on a state value (``if s.x:``): it is a Z3 term in the symbolic reading.
Branching on the *variant's flags* is fine: they are constants.

A worked example (a lock server; the known-bad variant grants without checking the lock)::

    from model import Bool, Model, ModelDefinition, Status, Transition, Variant

    NODES = range(2)

    def build(variant: Variant) -> Model:
        m = Model("lockserv", "one lock, granted to at most one node")
        m.var("held", Bool(), over=[NODES], doc="node n holds the lock")
        m.var("server_free", Bool(), doc="the server has the lock")

        @m.init()
        def init(o):
            return {"held": False, "server_free": True}   # an array: one value for every key

        @m.action(modifies=["held", "server_free"], params={"n": NODES})
        def lock(o, s, n):
            guard = s.server_free if variant.flags.get("check_free", True) else True
            return Transition(guard, {"held": {n: True}, "server_free": False})

        @m.action(modifies=["held", "server_free"], params={"n": NODES})
        def unlock(o, s, n):
            return Transition(s.held[n], {"held": {n: False}, "server_free": True})

        @m.invariant("MUTEX", supports=["HELD_MEANS_TAKEN"])
        def mutex(o, s):
            return o.Not(o.And(s.held[0], s.held[1]))

        @m.lemma("HELD_MEANS_TAKEN", supports=["MUTEX"])
        def held_means_taken(o, s):
            return o.ForAll(NODES, lambda n: o.Implies(s.held[n], o.Not(s.server_free)))

        @m.witness("LOCKED")
        def locked(o, s):
            return s.held[1]

        return m

    MODELS = (
        ModelDefinition(
            "lockserv", "a lock server", build,
            (Variant("shipped", "checks the lock", shipped=True,
                     expected={"MUTEX": Status.PROVED}),
             Variant("no_free_check", "grants blindly", {"check_free": False},
                     expected={"MUTEX": Status.VIOLATED})),
            depth=4),
    )

Then ``check_variant(MODELS[0], "no_free_check")`` returns a :class:`VariantResult` whose
``MUTEX`` result is ``violated`` with the trace ``lock(n=0)``, ``lock(n=1)``; the shipped variant
is ``proved`` (``MUTEX`` and its lemma are preserved by every action, pair by pair) and the
witness ``LOCKED`` is reachable. Concretely::

    m = MODELS[0].model()                  # the shipped variant's Model
    [s0] = m.initial_states()
    s1 = m.step(s0, "lock", {"n": 1})      # raises ActionNotEnabled when the guard is false
    m.enabled(s1, "lock", {"n": 0})        # False
    m.check_invariants(s1)                 # [] (names of violated invariants)

Rules of the layer:

- **Framing.** ``modifies`` lists what an action may change; updating anything else raises
  :class:`FrameError` (concretely at the step, symbolically when the relation is built).
  Everything not updated is unchanged. An array is updated with a mapping of the changed keys.
- **Parameters** range over finite domains and expand into one instance per value; the
  counterexample names the instance (``lock(n=1)``).
- **Invariants** are ``safety`` (``@m.invariant``) or ``lemma`` (``@m.lemma``, a strengthening);
  ``supports`` names the lemmas that make an invariant inductive. Status: ``proved`` (the
  invariant and its supports are preserved by every action), ``holds to depth K`` (no
  counterexample within K steps, not shown inductive: the note names the failing pair) or
  ``violated`` (with the shortest counterexample, replayed concretely).
- **Witnesses** (``@m.witness``) must be reachable within the depth, so no proof is vacuous.
- **Variants**: ``build(variant)`` reads ``variant.flags``; the shipped variant must violate
  nothing, a known-bad one must violate something, and each declares golden ``expected``
  statuses.
- **Registration**: a module ``model/<name>.py`` with a module-level ``MODELS`` tuple is found by
  :func:`model.registry.discover`; nothing else to edit.
- Model modules are sans-IO: declare ``__sans_io__ = True``; no ``os``/``time``/``pathlib``.
"""

from ._check import check_definitions as check_definitions
from ._check import check_variant as check_variant
from ._dsl import ActionInstance as ActionInstance
from ._dsl import ActionNotEnabled as ActionNotEnabled
from ._dsl import ArrayValue as ArrayValue
from ._dsl import Bool as Bool
from ._dsl import ConcreteOps as ConcreteOps
from ._dsl import DomainError as DomainError
from ._dsl import Enum as Enum
from ._dsl import FrameError as FrameError
from ._dsl import Int as Int
from ._dsl import Model as Model
from ._dsl import ModelDefinition as ModelDefinition
from ._dsl import ModelError as ModelError
from ._dsl import Ops as Ops
from ._dsl import State as State
from ._dsl import Status as Status
from ._dsl import Term as Term
from ._dsl import Transition as Transition
from ._dsl import Variant as Variant
from ._dsl import domain_values as domain_values
from ._report import InvariantResult as InvariantResult
from ._report import Report as Report
from ._report import ReportFormatError as ReportFormatError
from ._report import Trace as Trace
from ._report import TraceStep as TraceStep
from ._report import VariantResult as VariantResult
from ._report import WitnessResult as WitnessResult
from ._z3 import Encoding as Encoding
from ._z3 import Z3Ops as Z3Ops

__sans_io__ = True

__all__ = [
    "ActionInstance",
    "ActionNotEnabled",
    "ArrayValue",
    "Bool",
    "ConcreteOps",
    "DomainError",
    "Encoding",
    "Enum",
    "FrameError",
    "Int",
    "InvariantResult",
    "Model",
    "ModelDefinition",
    "ModelError",
    "Ops",
    "Report",
    "ReportFormatError",
    "State",
    "Status",
    "Term",
    "Trace",
    "TraceStep",
    "Transition",
    "Variant",
    "VariantResult",
    "WitnessResult",
    "Z3Ops",
    "check_definitions",
    "check_variant",
    "domain_values",
]
