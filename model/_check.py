"""The checker: bounded model checking, induction per (action, invariant) pair, reachability.

Theory of operation
-------------------
For one variant of one model, :func:`check_variant`

1. **unrolls** the transition relation (``init(s0) ∧ T(s0, s1) ∧ … ∧ T(sK-1, sK)``, ``T`` the
   disjunction of every action instance, a selector ``act@i`` naming the instance taken) on one
   incremental solver and asks at each depth ``i``, for every invariant not yet violated, whether
   ``¬inv(si)`` is satisfiable, and for every witness not yet reached whether ``witness(si)`` is:
   the first gives the shortest counterexample, the second shows the model is not vacuous;
2. for each invariant never violated, tries an **induction proof**: with ``I`` the invariant
   together with the lemmas it names (transitively), for every member ``J`` of ``I`` and every
   action ``A`` it asks whether ``I(s) ∧ A(s, s') ∧ ¬J(s')`` is satisfiable, one (action,
   invariant) pair per query, so a failure reads "J is not preserved by action A";
3. checks that no action leaves a variable's domain (a malformed model, reported as an error);
4. **replays** every trace it produced through the concrete interpretation (``Model.step``) and
   records whether the concrete run takes the same steps to the same states and agrees on the
   broken invariant (or the reached witness), so the two interpretations cannot drift apart.

Solvers are created with pinned seeds, so a run repeats exactly. Time is read through an injected
``clock`` (this module does no I/O).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import z3

from ._dsl import (
    ActionInstance,
    ActionNotEnabled,
    ModelDefinition,
    ModelError,
    State,
    Status,
    Variant,
)
from ._report import (
    InvariantResult,
    Report,
    Trace,
    VariantResult,
    WitnessResult,
    trace_from_states,
    value_text,
)
from ._z3 import SOLVER_SEED, Encoding, new_solver

__sans_io__ = True

Clock = Callable[[], float]

#: Solver statistics kept in reports (summed over the queries of one invariant).
STATISTICS_KEPT = ("conflicts", "decisions", "propagations", "rlimit count")

#: Per-query solver timeout; a query that runs out yields status ``unknown``.
QUERY_TIMEOUT_MS = 120_000


def _no_clock() -> float:
    return 0.0


@dataclass
class _Account:
    seconds: float = 0.0
    statistics: dict[str, float] = field(default_factory=dict)

    def add(self, solver: Any, seconds: float) -> None:
        self.seconds += seconds
        statistics = solver.statistics()
        present = set(statistics.keys())
        for key in STATISTICS_KEPT:
            if key in present:
                value = float(statistics.get_key_value(key))
                self.statistics[key] = self.statistics.get(key, 0.0) + value
        self.statistics["queries"] = self.statistics.get("queries", 0.0) + 1.0


class _Checker:
    def __init__(
        self, definition: ModelDefinition, variant: Variant, depth: int, clock: Clock
    ) -> None:
        self.definition = definition
        self.variant = variant
        self.depth = depth
        self.clock = clock
        self.model = definition.build(variant)
        self.encoding = Encoding(self.model)
        self.instances = self.encoding.instances
        self.accounts = {name: _Account() for name in self.model.invariants}
        self.errors: list[str] = []

    def _timed_check(self, solver: Any, account: _Account | None) -> Any:
        start = self.clock()
        outcome = solver.check()
        if account is not None:
            account.add(solver, self.clock() - start)
        return outcome

    # -- bounded model checking ----------------------------------------------------------

    def bounded(
        self,
    ) -> tuple[dict[str, Trace | None], dict[str, bool], dict[str, Trace | None]]:
        model = self.model
        solver = new_solver(QUERY_TIMEOUT_MS)
        states = [self.encoding.state("0")]
        selectors: list[Any] = []
        solver.add(self.encoding.domain(states[0]), self.encoding.init(states[0]))
        violations: dict[str, Trace | None] = {}
        unknown: dict[str, bool] = {}
        reached: dict[str, Trace | None] = {}
        pending = list(model.invariants)
        witnesses = list(model.witnesses)
        for step in range(self.depth + 1):
            current = states[step]
            for name in list(pending):
                solver.push()
                solver.add(z3.Not(self.encoding.invariant(name, current)))
                outcome = self._timed_check(solver, self.accounts[name])
                if outcome == z3.sat:
                    violations[name] = self._trace(solver.model(), states, selectors, name)
                    pending.remove(name)
                elif outcome == z3.unknown:
                    unknown[name] = True
                    pending.remove(name)
                solver.pop()
            for name in list(witnesses):
                solver.push()
                solver.add(self.encoding.witness(name, current))
                if self._timed_check(solver, None) == z3.sat:
                    reached[name] = self._trace(solver.model(), states, selectors, name)
                    witnesses.remove(name)
                solver.pop()
            if step == self.depth or (not pending and not witnesses):
                break
            successor = self.encoding.state(str(step + 1))
            selector = z3.Int(f"act@{step}")
            solver.add(self.encoding.domain(successor))
            solver.add(selector >= 0, selector < len(self.instances))
            for index, instance in enumerate(self.instances):
                solver.add(
                    z3.Implies(
                        selector == index,
                        self.encoding.transition(instance, current, successor),
                    )
                )
            states.append(successor)
            selectors.append(selector)
        for name in witnesses:
            reached[name] = None
        return violations, unknown, reached

    def _trace(
        self, solution: Any, states: list[State], selectors: list[Any], target: str
    ) -> Trace:
        concrete = [self.encoding.decode(solution, state) for state in states]
        taken: list[ActionInstance] = []
        for selector in selectors:
            index = solution.eval(selector, model_completion=True).as_long()
            taken.append(self.instances[index])
        return self._replayed_trace(concrete, taken, target)

    def _replayed_trace(
        self, concrete: list[State], taken: list[ActionInstance], target: str
    ) -> Trace:
        replayed = self._replays(concrete, taken, target)
        labels = [
            (
                instance.label,
                instance.action.name,
                {name: value_text(value) for name, value in instance.args},
            )
            for instance in taken
        ]
        return trace_from_states(concrete, labels, target, replayed)

    def _replays(self, concrete: list[State], taken: list[ActionInstance], target: str) -> bool:
        model = self.model
        if concrete[0] not in model.initial_states():
            self.errors.append(f"{target}: the trace starts outside the concrete initial states")
            return False
        state = concrete[0]
        for position, instance in enumerate(taken):
            try:
                state = model.step_instance(state, instance)
            except (ActionNotEnabled, ModelError) as error:
                self.errors.append(f"{target}: step {position + 1} ({instance.label}) does not "
                                   f"replay concretely: {error}")
                return False
            if state != concrete[position + 1]:
                self.errors.append(f"{target}: step {position + 1} ({instance.label}) reaches "
                                   "a different state concretely")
                return False
        broken = target in model.invariants and not model.holds(state, target)
        reached = target in model.witnesses and model.holds(state, target)
        if not (broken or reached):
            self.errors.append(f"{target}: the concrete model disagrees on the last state")
            return False
        return True

    # -- induction -----------------------------------------------------------------------

    def preserved(
        self, assumption: tuple[str, ...], member: str, action: str, account: _Account
    ) -> tuple[Any, str]:
        solver = new_solver(QUERY_TIMEOUT_MS)
        pre = self.encoding.state("pre")
        post = self.encoding.state("post")
        solver.add(self.encoding.domain(pre))
        for name in assumption:
            solver.add(self.encoding.invariant(name, pre))
        instances = [i for i in self.instances if i.action.name == action]
        solver.add(
            z3.Or(*[self.encoding.transition(instance, pre, post) for instance in instances])
        )
        solver.add(z3.Not(self.encoding.invariant(member, post)))
        outcome = self._timed_check(solver, account)
        if outcome != z3.sat:
            return outcome, ""
        solution = solver.model()
        label = action
        for instance in instances:
            formula = self.encoding.transition(instance, pre, post)
            if z3.is_true(solution.eval(formula, model_completion=True)):
                label = instance.label
                break
        return outcome, label

    def induction(self, candidates: list[str]) -> dict[str, tuple[Status, str]]:
        verdicts: dict[str, tuple[Status, str]] = {}
        cache: dict[tuple[tuple[str, ...], str, str], tuple[Any, str]] = {}
        for name in candidates:
            closure = self.model.support_closure(name)
            failed = [member for member in closure if member not in candidates]
            if failed:
                verdicts[name] = (Status.HOLDS, f"relies on {', '.join(failed)}, which is "
                                  "violated or unknown")
                continue
            verdict = (Status.PROVED, "")
            for member in closure:
                for action in self.model.actions:
                    key = (closure, member, action)
                    if key not in cache:
                        cache[key] = self.preserved(closure, member, action,
                                                    self.accounts[name])
                    outcome, label = cache[key]
                    if outcome == z3.sat:
                        verdict = (Status.HOLDS, f"{member} is not preserved by action "
                                   f"{label} (not inductive)")
                        break
                    if outcome == z3.unknown:
                        verdict = (Status.HOLDS, f"induction for {member} under action "
                                   f"{action} timed out")
                        break
                if verdict[0] is not Status.PROVED:
                    break
            verdicts[name] = verdict
        return verdicts

    def domains(self) -> None:
        for action in self.model.actions:
            solver = new_solver(QUERY_TIMEOUT_MS)
            pre = self.encoding.state("pre")
            post = self.encoding.state("post")
            solver.add(self.encoding.domain(pre))
            instances = [i for i in self.instances if i.action.name == action]
            solver.add(
                z3.Or(*[self.encoding.transition(instance, pre, post) for instance in instances])
            )
            solver.add(z3.Not(self.encoding.domain(post)))
            if solver.check() == z3.sat:
                self.errors.append(f"action {action} can leave a variable's domain")

    # -- the whole check -----------------------------------------------------------------

    def run(self) -> VariantResult:
        start = self.clock()
        model = self.model
        violations, unknown, reached = self.bounded()
        candidates = [
            name for name in model.invariants if name not in violations and name not in unknown
        ]
        verdicts = self.induction(candidates)
        self.domains()
        results: list[InvariantResult] = []
        for name, invariant in model.invariants.items():
            account = self.accounts[name]
            expected = self.variant.expected.get(name)
            if name in violations:
                trace = violations[name]
                assert trace is not None
                results.append(InvariantResult(
                    name, invariant.kind, Status.VIOLATED, trace.length, account.seconds,
                    account.statistics, trace, "", expected))
            elif name in unknown:
                results.append(InvariantResult(
                    name, invariant.kind, Status.UNKNOWN, self.depth, account.seconds,
                    account.statistics, None, "the solver timed out", expected))
            else:
                status, note = verdicts[name]
                results.append(InvariantResult(
                    name, invariant.kind, status, self.depth, account.seconds,
                    account.statistics, None, note, expected))
        unknown_expectations = set(self.variant.expected) - set(model.invariants)
        for name in sorted(unknown_expectations):
            self.errors.append(f"the variant expects a status for unknown invariant {name}")
        witnesses = tuple(
            WitnessResult(name, trace is not None,
                          trace.length if trace is not None else self.depth, trace)
            for name, trace in reached.items()
        )
        if not model.witnesses:
            self.errors.append("the model declares no reachability witness")
        return VariantResult(
            model=self.definition.name,
            variant=self.variant.name,
            shipped=self.variant.shipped,
            doc=self.variant.doc,
            depth=self.depth,
            seconds=self.clock() - start,
            invariants=tuple(results),
            witnesses=witnesses,
            errors=tuple(self.errors),
        )


def check_variant(
    definition: ModelDefinition,
    variant: Variant | str | None = None,
    depth: int | None = None,
    clock: Clock | None = None,
) -> VariantResult:
    """Check one variant of a model: BMC to ``depth``, induction per pair, witnesses, replay.

    Args:
        definition: the model definition.
        variant: the variant or its name (the shipped one by default).
        depth: the bound (the definition's default depth when ``None``).
        clock: a monotonic clock in seconds, for the timings in the result.

    Returns:
        The result, with a counterexample for every violated invariant.

    Raises:
        ValueError: ``depth`` is below 1.
        KeyError: no such variant.
    """
    chosen = (
        definition.shipped if variant is None
        else definition.variant(variant) if isinstance(variant, str) else variant
    )
    bound = definition.depth if depth is None else depth
    if bound < 1:
        raise ValueError(f"depth must be at least 1, not {bound}")
    checker = _Checker(definition, chosen, bound, clock or _no_clock)
    try:
        return checker.run()
    except ModelError as error:
        return VariantResult(
            model=definition.name, variant=chosen.name, shipped=chosen.shipped, doc=chosen.doc,
            depth=bound, seconds=0.0, invariants=(), witnesses=(),
            errors=(f"malformed model: {error}",),
        )


def check_definitions(
    definitions: list[ModelDefinition],
    variant: str | None = None,
    depth: int | None = None,
    clock: Clock | None = None,
    meta: Mapping[str, str] | None = None,
) -> Report:
    """Check every variant of every definition (or only ``variant``) and gather a report.

    Args:
        definitions: the models to check.
        variant: only this variant of each model, when given.
        depth: the bound for every model (each model's default when ``None``).
        clock: a monotonic clock in seconds.
        meta: free-form text fields stored in the report.

    Returns:
        The report.

    Raises:
        ValueError: ``depth`` is below 1.
        KeyError: a model has no variant called ``variant``.
    """
    tick = clock or _no_clock
    start = tick()
    results: list[VariantResult] = []
    for definition in definitions:
        variants = definition.variants if variant is None else (definition.variant(variant),)
        for chosen in variants:
            results.append(check_variant(definition, chosen, depth, tick))
    return Report(
        results=tuple(results),
        solver=f"z3 {z3.get_version_string()}",
        seed=SOLVER_SEED,
        seconds=tick() - start,
        meta=dict(meta or {}),
    )
