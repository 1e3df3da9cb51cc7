"""The checker: bounded model checking, induction per (action, invariant) pair, reachability.

Theory of operation
-------------------
For one variant of one model, :func:`check_variant`

1. tries an **induction proof** of every invariant: with ``I`` the invariant together with the
   lemmas it names (transitively), it asks whether some initial state breaks a member of ``I``,
   then, for every member ``J`` and every action ``A``, whether ``I(s) ∧ A(s, s') ∧ ¬J(s')`` is
   satisfiable, one (action, invariant) pair per query, so a failure reads "J is not preserved by
   action A" and comes with the counterexample to induction;
2. **unrolls** the transition relation for the invariants not proved and for the witnesses
   (``init(s0) ∧ T(s0, s1) ∧ … ∧ T(sK-1, sK)``, ``T`` selecting one action instance per step
   through ``act@i``) on one incremental solver, and asks at each depth ``i`` whether some
   pending invariant fails in ``si`` (the shortest counterexample) and whether some witness holds
   there (the model is not vacuous);
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
from ._z3 import SOLVER_SEED, Encoding, disjunction, fresh_context, new_solver

__sans_io__ = True

Clock = Callable[[], float]

#: Solver statistics kept in reports (summed over the queries of one invariant).
STATISTICS_KEPT = ("sat conflicts", "sat decisions", "sat propagations 2ary",
                   "sat propagations nary", "conflicts", "decisions", "rlimit count")

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


class _SplitAccount(_Account):
    """Charges a query shared by several invariants to each of them in equal parts."""

    def __init__(self, accounts: list[_Account]) -> None:
        super().__init__()
        self.accounts = accounts

    def add(self, solver: Any, seconds: float) -> None:
        share = 1.0 / len(self.accounts)
        statistics = solver.statistics()
        present = set(statistics.keys())
        for account in self.accounts:
            account.seconds += seconds * share
            for key in STATISTICS_KEPT:
                if key in present:
                    value = float(statistics.get_key_value(key)) * share
                    account.statistics[key] = account.statistics.get(key, 0.0) + value
            account.statistics["queries"] = account.statistics.get("queries", 0.0) + share


class _Checker:
    def __init__(
        self,
        definition: ModelDefinition,
        variant: Variant,
        depth: int,
        clock: Clock,
        only: tuple[str, ...] | None = None,
    ) -> None:
        self.definition = definition
        self.variant = variant
        self.depth = depth
        self.clock = clock
        self.only = only
        self.model = definition.build(variant)
        fresh_context()
        self.encoding = Encoding(self.model)
        self.instances = self.encoding.instances
        self.accounts = {name: _Account() for name in self.model.invariants}
        self.pre = self.encoding.state("pre")
        self.post = self.encoding.state("post")
        self._terms: dict[tuple[str, str], Any] = {}
        self._transitions: dict[str, list[Any]] = {}
        self.errors: list[str] = []
        self._literals = 0

    def _timed_check(self, solver: Any, account: _Account | None) -> Any:
        start = self.clock()
        outcome = solver.check()
        if account is not None:
            account.add(solver, self.clock() - start)
        return outcome

    def _query(self, solver: Any, formula: Any, account: _Account | None) -> tuple[Any, Any]:
        """Check ``formula`` on top of the solver's assertions, without keeping it.

        A fresh literal guards the formula and is assumed for this one check, then asserted
        false: cheaper than push/pop on the finite-domain engine, which would re-encode.

        Returns:
            The outcome and, for ``sat``, the model.
        """
        self._literals += 1
        literal = z3.Bool(f"query!{self._literals}")
        solver.add(z3.Implies(literal, formula))
        start = self.clock()
        outcome = solver.check(literal)
        if account is not None:
            account.add(solver, self.clock() - start)
        solution = solver.model() if outcome == z3.sat else None
        solver.add(z3.Not(literal))
        return outcome, solution

    # -- bounded model checking ----------------------------------------------------------

    def bounded(
        self, targets: list[str]
    ) -> tuple[dict[str, Trace | None], dict[str, bool], dict[str, Trace | None]]:
        model = self.model
        solver = new_solver(QUERY_TIMEOUT_MS)
        states = [self.encoding.state("0")]
        selectors: list[Any] = []
        solver.add(self.encoding.domain(states[0]), self.encoding.init(states[0]))
        violations: dict[str, Trace | None] = {}
        unknown: dict[str, bool] = {}
        reached: dict[str, Trace | None] = {}
        pending = list(targets)
        witnesses = list(model.witnesses) if self.only is None else []
        for step in range(self.depth + 1):
            current = states[step]
            self._violations_at(solver, states, selectors, pending, violations, unknown)
            self._witnesses_at(solver, states, selectors, witnesses, reached)
            if step == self.depth or (not pending and not witnesses):
                break
            successor = self.encoding.state(str(step + 1))
            selector = self.encoding.selector(f"act@{step}")
            solver.add(*self.encoding.step(current, successor, selector))
            states.append(successor)
            selectors.append(selector)
        for name in witnesses:
            reached[name] = None
        return violations, unknown, reached

    def _violations_at(  # noqa: PLR0917 - private; the BMC loop's own state, passed along
        self,
        solver: Any,
        states: list[State],
        selectors: list[Any],
        pending: list[str],
        violations: dict[str, Trace | None],
        unknown: dict[str, bool],
    ) -> None:
        """Find every pending invariant violated in the last state: one query while none is
        (the common, expensive, unsatisfiable case), then one per invariant found."""
        current = states[-1]
        while pending:
            terms = {name: self.encoding.invariant(name, current) for name in pending}
            outcome, solution = self._query(
                solver, disjunction([z3.Not(term) for term in terms.values()]),
                self._shared_account(pending))
            if outcome == z3.unsat:
                return
            if outcome == z3.unknown:
                for name in pending:
                    unknown[name] = True
                pending.clear()
                return
            broken = [name for name, term in terms.items()
                      if z3.is_false(solution.eval(term, model_completion=True))]
            name = broken[0]
            outcome, solution = self._query(solver, z3.Not(terms[name]), self.accounts[name])
            if outcome == z3.sat:
                violations[name] = self._trace(solution, states, selectors, name)
            else:
                unknown[name] = True
            pending.remove(name)

    def _shared_account(self, names: list[str]) -> _Account:
        return _SplitAccount([self.accounts[name] for name in names])

    def _witnesses_at(
        self,
        solver: Any,
        states: list[State],
        selectors: list[Any],
        witnesses: list[str],
        reached: dict[str, Trace | None],
    ) -> None:
        current = states[-1]
        if not witnesses:
            return
        terms = {name: self.encoding.witness(name, current) for name in witnesses}
        outcome, solution = self._query(solver, disjunction(list(terms.values())), None)
        if outcome == z3.sat:
            for name, term in terms.items():
                if z3.is_true(solution.eval(term, model_completion=True)):
                    reached[name] = self._trace(solution, states, selectors, name)
                    witnesses.remove(name)
        if witnesses and len(witnesses) < len(terms):
            self._witnesses_at(solver, states, selectors, witnesses, reached)

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

    def _at(self, name: str, which: str) -> Any:
        """Invariant ``name`` over the pre- or post-state (built once)."""
        key = (name, which)
        if key not in self._terms:
            state = self.pre if which == "pre" else self.post
            self._terms[key] = self.encoding.invariant(name, state)
        return self._terms[key]

    def _domain_pre(self) -> Any:
        key = ("", "domain")
        if key not in self._terms:
            self._terms[key] = self.encoding.domain(self.pre)
        return self._terms[key]

    def _action(self, action: str) -> tuple[list[ActionInstance], list[Any]]:
        """The instances of ``action`` and their two-state formulas (built once)."""
        instances = [i for i in self.instances if i.action.name == action]
        if action not in self._transitions:
            self._transitions[action] = [
                self.encoding.transition(instance, self.pre, self.post)
                for instance in instances
            ]
        return instances, self._transitions[action]

    def initiation(self, member: str, account: _Account) -> Any:
        """Whether some initial state violates ``member`` (``sat``) or none does."""
        solver = new_solver(QUERY_TIMEOUT_MS)
        state = self.encoding.state("init")
        solver.add(self.encoding.domain(state), self.encoding.init(state))
        solver.add(z3.Not(self.encoding.invariant(member, state)))
        return self._timed_check(solver, account)

    def preserved(
        self, assumption: tuple[str, ...], action: str, account: _Account
    ) -> dict[str, tuple[Any, str, Trace | None]]:
        """Which members of ``assumption`` ``action`` preserves from any state satisfying all
        of them: one query for all (the usual, unsatisfiable case), then one per member.

        Returns:
            For each member, the solver's outcome and, for ``sat``, the instance's label and
            the counterexample to induction (a pre-state satisfying every assumed invariant and
            the post-state breaking the member; not necessarily reachable).
        """
        solver = new_solver(QUERY_TIMEOUT_MS)
        solver.add(self._domain_pre())
        for name in assumption:
            solver.add(self._at(name, "pre"))
        instances, formulas = self._action(action)
        solver.add(disjunction(formulas))
        after = {name: self._at(name, "post") for name in assumption}
        outcome, _ = self._query(solver, disjunction([z3.Not(term) for term in after.values()]),
                                 account)
        if outcome == z3.unsat:
            return dict.fromkeys(assumption, (z3.unsat, "", None))
        results: dict[str, tuple[Any, str, Trace | None]] = {}
        for name in assumption:
            outcome, solution = self._query(solver, z3.Not(after[name]), account)
            if outcome == z3.sat:
                label, cti = self._cti(solution, instances, formulas, name)
                results[name] = (outcome, label, cti)
            else:
                results[name] = (outcome, "", None)
        return results

    def _cti(
        self, solution: Any, instances: list[ActionInstance], formulas: list[Any], member: str
    ) -> tuple[str, Trace]:
        taken = instances[0]
        for instance, formula in zip(instances, formulas, strict=True):
            if z3.is_true(solution.eval(formula, model_completion=True)):
                taken = instance
                break
        states = [self.encoding.decode(solution, self.pre),
                  self.encoding.decode(solution, self.post)]
        try:
            agrees = (self.model.step_instance(states[0], taken) == states[1]
                      and not self.model.holds(states[1], member))
        except (ActionNotEnabled, ModelError):
            agrees = False
        if not agrees:
            self.errors.append(f"{member}/{taken.label}: the concrete model disagrees with the "
                               "counterexample to induction")
        args = {name: value_text(value) for name, value in taken.args}
        cti = trace_from_states(states, [(taken.label, taken.action.name, args)], member, agrees)
        return taken.label, cti

    def induction(
        self, candidates: list[str]
    ) -> dict[str, tuple[Status, str, Trace | None]]:
        """Try to prove each candidate with its supporting lemmas, one (member, action) pair
        per verdict; the first failing pair explains why a candidate is not proved."""
        verdicts: dict[str, tuple[Status, str, Trace | None]] = {}
        closures = {name: self.model.support_closure(name) for name in candidates}
        owners: dict[tuple[str, ...], list[str]] = {}
        for name, closure in closures.items():
            owners.setdefault(closure, []).append(name)
        cache: dict[tuple[tuple[str, ...], str], dict[str, tuple[Any, str, Trace | None]]] = {}
        initial: dict[str, Any] = {}
        for name in candidates:
            closure = closures[name]
            account = self._shared_account(owners[closure])
            verdict: tuple[Status, str, Trace | None] = (Status.PROVED, "", None)
            for member in closure:
                if member not in initial:
                    initial[member] = self.initiation(member, account)
                if initial[member] != z3.unsat:
                    verdict = (Status.HOLDS, f"{member} does not hold initially", None)
                    break
            for action in self.model.actions if verdict[0] is Status.PROVED else ():
                key = (closure, action)
                if key not in cache:
                    cache[key] = self.preserved(closure, action, account)
                for member in closure:
                    outcome, label, cti = cache[key][member]
                    if outcome == z3.sat:
                        verdict = (Status.HOLDS, f"{member} is not preserved by action "
                                   f"{label} (not inductive)", cti)
                        break
                    if outcome == z3.unknown:
                        verdict = (Status.HOLDS, f"induction for {member} under action "
                                   f"{action} timed out", None)
                        break
                if verdict[0] is not Status.PROVED:
                    break
            verdicts[name] = verdict
        return verdicts

    def domains(self, proved: list[str]) -> None:
        """Check that no action leaves a variable's domain from a state satisfying the proved
        invariants (an over-approximation of the reachable states)."""
        for action in self.model.actions:
            solver = new_solver(QUERY_TIMEOUT_MS)
            solver.add(self._domain_pre())
            for name in proved:
                solver.add(self._at(name, "pre"))
            solver.add(disjunction(self._action(action)[1]))
            solver.add(z3.Not(self.encoding.domain(self.post)))
            if solver.check() == z3.sat:
                self.errors.append(f"action {action} can leave a variable's domain")

    # -- the whole check -----------------------------------------------------------------

    def run(self) -> VariantResult:
        start = self.clock()
        model = self.model
        unknown_names = sorted(set(self.only or ()) - set(model.invariants))
        if unknown_names:
            raise KeyError(f"model {model.name} has no invariant {', '.join(unknown_names)}")
        chosen = {name: invariant for name, invariant in model.invariants.items()
                  if self.only is None or name in self.only}
        verdicts = self.induction(list(chosen))
        unproved = [name for name, verdict in verdicts.items()
                    if verdict[0] is not Status.PROVED]
        violations, unknown, reached = self.bounded(unproved)
        if self.variant.shipped and self.only is None:
            # A known-bad variant's lemmas fail, so the over-approximation would be too coarse;
            # its traces are still replayed concretely, which checks every domain on them.
            self.domains([name for name in model.invariants if name not in unproved])
        results: list[InvariantResult] = []
        for name, invariant in chosen.items():
            account = self.accounts[name]
            expected = self.variant.expected_at(name, self.depth)
            status, note, cti = verdicts[name]
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
                results.append(InvariantResult(
                    name, invariant.kind, status, self.depth, account.seconds,
                    account.statistics, None, note, expected, cti))
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
        unknown_beyond = set(self.variant.beyond) - set(model.invariants)
        for name in sorted(unknown_beyond):
            self.errors.append(f"the variant expects a counterexample for unknown invariant "
                               f"{name}")
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
    only: tuple[str, ...] | None = None,
) -> VariantResult:
    """Check one variant of a model: BMC to ``depth``, induction per pair, witnesses, replay.

    Args:
        definition: the model definition.
        variant: the variant or its name (the shipped one by default).
        depth: the bound (the variant's, else the definition's, default when ``None``).
        clock: a monotonic clock in seconds, for the timings in the result.
        only: a targeted search: check only these invariants (induction with their lemmas,
            then BMC for them alone), without the witnesses and the domain check; the result
            lists only them. For a known counterexample past the variant's depth
            (``Variant.beyond``), which a full check to that depth would spend its time on
            every other invariant to find.

    Returns:
        The result, with a counterexample for every violated invariant.

    Raises:
        ValueError: ``depth`` is below 1.
        KeyError: no such variant, or ``only`` names an invariant the model does not have.
    """
    chosen = (
        definition.shipped if variant is None
        else definition.variant(variant) if isinstance(variant, str) else variant
    )
    bound = (chosen.depth or definition.depth) if depth is None else depth
    if bound < 1:
        raise ValueError(f"depth must be at least 1, not {bound}")
    checker = _Checker(definition, chosen, bound, clock or _no_clock,
                       None if only is None else tuple(only))
    try:
        return checker.run()
    except ModelError as error:
        return VariantResult(
            model=definition.name, variant=chosen.name, shipped=chosen.shipped, doc=chosen.doc,
            depth=bound, seconds=0.0, invariants=(), witnesses=(),
            errors=(f"malformed model: {error}",),
        )


def check_definitions(  # noqa: PLR0917 - the command's options, passed along
    definitions: list[ModelDefinition],
    variant: str | None = None,
    depth: int | None = None,
    clock: Clock | None = None,
    meta: Mapping[str, str] | None = None,
    only: tuple[str, ...] | None = None,
) -> Report:
    """Check every variant of every definition (or only ``variant``) and gather a report.

    Args:
        definitions: the models to check.
        variant: only this variant of each model, when given.
        depth: the bound for every model (each model's default when ``None``).
        clock: a monotonic clock in seconds.
        meta: free-form text fields stored in the report.
        only: a targeted search of these invariants (see :func:`check_variant`).

    Returns:
        The report.

    Raises:
        ValueError: ``depth`` is below 1.
        KeyError: a model has no variant called ``variant``, or no invariant named in ``only``.
    """
    tick = clock or _no_clock
    start = tick()
    results: list[VariantResult] = []
    for definition in definitions:
        variants = definition.variants if variant is None else (definition.variant(variant),)
        for chosen in variants:
            results.append(check_variant(definition, chosen, depth, tick, only))
    return Report(
        results=tuple(results),
        solver=f"z3 {z3.get_version_string()}",
        seed=SOLVER_SEED,
        seconds=tick() - start,
        meta=dict(meta or {}),
    )
