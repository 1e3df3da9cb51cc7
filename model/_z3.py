"""The symbolic interpretation: the same model functions evaluated over Z3 terms.

Every scalar variable at a step becomes one Z3 constant named ``name@step``; an array becomes one
constant per key (``name[key]@step``), since index sets are small and finite. Integers and enum
members become bit-vectors (see :data:`INT_BITS`), so every query is finite-domain. An action
instance becomes the two-state formula ``guard ∧ ⋀ post.v = update(v) ∧ ⋀ post.w = pre.w`` for
every ``w`` outside the update: the frame.

A model whose integers are all small may declare a narrower width (``Model(int_bits=…)``): every
bit of every integer becomes SAT variables and adder/comparator circuits in every state of every
unrolling, so halving the width roughly halves the solving time. The width must leave headroom
for the model's arithmetic: every integer sort lies within half the signed range (so the sum or
difference of two values, or a value plus one, cannot wrap), and a Python constant that does not
fit raises :class:`ModelError` instead of wrapping silently. The action selector of an unrolled
step has its own unsigned width, enough for the number of action instances.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, ClassVar

import z3

from ._dsl import (
    CONCRETE,
    ActionInstance,
    ArrayValue,
    BoolSort,
    EnumSort,
    IntSort,
    Model,
    ModelError,
    Ops,
    State,
    Term,
    Var,
    _flatten,
)

__sans_io__ = True

#: The pinned seed of every solver (``smt.random_seed`` and ``sat.random_seed``).
SOLVER_SEED = 0

#: Integers are encoded as signed bit-vectors of this width: every sort is finite, so the
#: queries go to Z3's finite-domain engine (bit-blasting to SAT), which is far faster on these
#: models than the arithmetic core. Python's ``<``/``+`` on Z3 bit-vectors are the signed ones.
INT_BITS = 16
INT_MIN = -(2 ** (INT_BITS - 1))
INT_MAX = 2 ** (INT_BITS - 1) - 1
#: Enum members are encoded as their position, in unsigned bit-vectors of this width (a width
#: apart from integers', so that Z3 rejects comparing an enum with an integer).
ENUM_BITS = 8

_ENUM_SORTS: dict[type[enum.Enum], tuple[Any, dict[enum.Enum, Any], dict[str, enum.Enum]]] = {}


def pin_seeds(seed: int = SOLVER_SEED) -> None:
    """Pin Z3's global random seeds so that every run gives the same models and statistics."""
    z3.set_param("smt.random_seed", seed)
    z3.set_param("sat.random_seed", seed)


def fresh_context() -> None:
    """Start a new Z3 main context, so that a check does not depend on what ran before it.

    Pinned seeds make one run repeat, but Z3's answers also depend on the terms its context has
    seen (their identifiers order the search): a counterexample found after other checks in the
    same process could differ from the one found alone. Each variant's check therefore starts
    from a fresh context; terms built before it must not be mixed with terms built after.
    """
    z3.z3._main_ctx = None  # z3 exposes no other way to reset its main context


def new_solver(timeout_ms: int | None = None) -> Any:
    """A fresh finite-domain solver with pinned seeds (and a timeout when given)."""
    pin_seeds()
    solver = z3.SolverFor("QF_FD")
    solver.set("random_seed", SOLVER_SEED)
    if timeout_ms is not None:
        solver.set("timeout", timeout_ms)
    return solver


def enum_code(member: enum.Enum) -> int:
    """The code of an enum member: its position in its enum."""
    return list(type(member)).index(member)


def lift(value: Term, int_bits: int = INT_BITS) -> Term:
    """A Python constant as a Z3 term (enum members to enum constants); terms unchanged.

    Raises:
        ModelError: an integer constant does not fit ``int_bits`` signed bits.
    """
    if isinstance(value, enum.Enum):
        return z3.BitVecVal(enum_code(value), ENUM_BITS)
    if isinstance(value, bool):
        return z3.BoolVal(value)
    if isinstance(value, int):
        if not -(2 ** (int_bits - 1)) <= value < 2 ** (int_bits - 1):
            raise ModelError(f"the constant {value} does not fit {int_bits}-bit integers")
        return z3.BitVecVal(value, int_bits)
    return value


def _connective(make: Any, items: list[Any]) -> Any:
    """``make`` (``Z3_mk_and`` or ``Z3_mk_or``) over Boolean terms of one context, through
    Z3's C API: the same term ``z3.And``/``z3.Or`` build, without their per-argument sort
    coercion, which costs more than the solving on models of a few hundred variables (the
    authorizer's invariants are conjunctions over every request and binding). ``None`` when an
    item is not a Boolean term of the first item's context (the caller then takes z3py's way,
    with its checks and errors)."""
    context = items[0].ctx if isinstance(items[0], z3.BoolRef) else None
    if context is None:
        return None
    array = (z3.Ast * len(items))()
    for position, item in enumerate(items):
        if not isinstance(item, z3.BoolRef) or item.ctx is not context:
            return None
        array[position] = item.as_ast()
    return z3.BoolRef(make(context.ref(), len(items), array), context)


def conjunction(items: list[Any]) -> Any:
    """``z3.And(*items)`` (``True`` when empty), built directly for Boolean terms."""
    if not items:
        return z3.BoolVal(True)
    built = _connective(z3.Z3_mk_and, items)
    return z3.And(*items) if built is None else built


def disjunction(items: list[Any]) -> Any:
    """``z3.Or(*items)`` (``False`` when empty), built directly for Boolean terms."""
    if not items:
        return z3.BoolVal(False)
    built = _connective(z3.Z3_mk_or, items)
    return z3.Or(*items) if built is None else built


def equality(left: Any, right: Any) -> Any:
    """``left == right`` over two terms; built directly when both are Boolean or both
    bit-vectors (Z3 itself rejects bit-vectors of different widths), else by z3py."""
    if (isinstance(left, z3.BoolRef) and isinstance(right, z3.BoolRef)) or (
            isinstance(left, z3.BitVecRef) and isinstance(right, z3.BitVecRef)):
        if type(right) is not type(left) and isinstance(right, type(left)):
            # Python's ``==`` asks the right operand first when its class is a subclass (a
            # numeral against a constant): keep that order, so the terms, and with them the
            # solver's choices and the golden counterexamples, stay those of z3py's ``==``.
            left, right = right, left
        context = left.ctx
        if right.ctx is context:
            return z3.BoolRef(z3.Z3_mk_eq(context.ref(), left.as_ast(), right.as_ast()),
                              context)
    return left == right


def same_term(left: Any, right: Any) -> bool:
    """Whether two terms of one context are the same term: Z3 shares equal terms, so this is
    the identity of their nodes (what ``z3.eq`` asks the C API)."""
    return bool(left.ctx is right.ctx and left.as_ast().value == right.as_ast().value)


def int_const(name: str, int_bits: int = INT_BITS) -> Any:
    """A fresh integer-valued constant (a signed bit-vector)."""
    return z3.BitVec(name, int_bits)


class Z3Ops(Ops):
    """Operations building Z3 terms: the symbolic interpretation, integers ``int_bits`` wide."""

    symbolic: ClassVar[bool] = True

    def __init__(self, int_bits: int = INT_BITS) -> None:
        self.int_bits = int_bits

    def lift(self, value: Term) -> Term:
        """A Python constant as a Z3 term of this width; terms unchanged."""
        return lift(value, self.int_bits)

    def And(self, *terms: Term) -> Term:  # noqa: N802
        """Conjunction."""
        return conjunction([self.lift(term) for term in _flatten(terms)])

    def Or(self, *terms: Term) -> Term:  # noqa: N802
        """Disjunction."""
        return disjunction([self.lift(term) for term in _flatten(terms)])

    def Not(self, term: Term) -> Term:  # noqa: N802
        """Negation."""
        return z3.Not(self.lift(term))

    def Implies(self, antecedent: Term, consequent: Term) -> Term:  # noqa: N802
        """Implication."""
        return z3.Implies(self.lift(antecedent), self.lift(consequent))

    def If(self, condition: Term, then: Term, otherwise: Term) -> Term:  # noqa: N802
        """If-then-else; over arrays it is taken key by key."""
        if isinstance(then, ArrayValue) or isinstance(otherwise, ArrayValue):
            if not (isinstance(then, ArrayValue) and isinstance(otherwise, ArrayValue)):
                raise ModelError("If over an array needs two arrays")
            return ArrayValue(
                {key: self.If(condition, then[key], otherwise[key]) for key in then},
                self,
            )
        if isinstance(condition, bool):
            return then if condition else otherwise
        return z3.If(self.lift(condition), self.lift(then), self.lift(otherwise))

    def Eq(self, left: Term, right: Term) -> Term:  # noqa: N802
        """Equality."""
        if not z3.is_expr(left) and not z3.is_expr(right):
            return z3.BoolVal(left == right)
        return equality(self.lift(left), self.lift(right))

    def Distinct(self, *terms: Term) -> Term:  # noqa: N802
        """Pairwise distinct."""
        items = [self.lift(term) for term in _flatten(terms)]
        return z3.Distinct(*items) if len(items) > 1 else z3.BoolVal(True)

    def Sum(self, *terms: Term) -> Term:  # noqa: N802
        """Integer sum."""
        items = [self.lift(term) for term in _flatten(terms)]
        return z3.Sum(*items) if items else z3.BitVecVal(0, self.int_bits)

    def is_symbolic_key(self, key: Any) -> bool:
        """Whether the key or a component of it is a Z3 term."""
        if isinstance(key, tuple):
            return any(z3.is_expr(part) for part in key)
        return bool(z3.is_expr(key))

    def _key_matches(self, candidate: Any, key: Any) -> Term:
        if isinstance(key, tuple):
            return self.And(*[self.Eq(part, wanted) for part, wanted in zip(
                candidate, key, strict=True)])
        return self.Eq(candidate, key)

    def select(self, array: ArrayValue, key: Any) -> Term:
        """``array[key]`` as an ``If`` chain over the finite index set."""
        items = array.items()
        result = items[-1][1]
        for candidate, value in reversed(items[:-1]):
            result = self.If(self._key_matches(candidate, key), value, result)
        return result

    def store(self, array: ArrayValue, key: Any, value: Term) -> ArrayValue:
        """``array`` with ``key`` mapped to ``value``, key by key."""
        if not self.is_symbolic_key(key):
            return array.set(key, value)
        return ArrayValue(
            {
                candidate: self.If(self._key_matches(candidate, key), value, old)
                for candidate, old in array.items()
            },
            self,
        )


SYMBOLIC = Z3Ops()


def _z3_sort(variable: Var, int_bits: int) -> Any:
    sort = variable.sort
    if isinstance(sort, BoolSort):
        return z3.BoolSort()
    if isinstance(sort, IntSort):
        half = 2 ** (int_bits - 2)
        if sort.low < -half or sort.high >= half:
            raise ModelError(f"{variable.name}: {sort.describe()} does not fit {int_bits}-bit "
                             "integers with room for their arithmetic")
        return z3.BitVecSort(int_bits)
    return z3.BitVecSort(ENUM_BITS)


def _in_domain(variable: Var, term: Any) -> Any:
    sort = variable.sort
    if isinstance(sort, IntSort):
        return z3.And(term >= sort.low, term <= sort.high)
    if isinstance(sort, EnumSort):
        return z3.ULT(term, len(sort.enum_type))
    return z3.BoolVal(True)


def _key_text(key: Any) -> str:
    parts = key if isinstance(key, tuple) else (key,)
    return ",".join(part.name if isinstance(part, enum.Enum) else str(part) for part in parts)


class Encoding:
    """The Z3 encoding of one model: states per step, init, actions, invariants, decoding."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.instances: tuple[ActionInstance, ...] = model.instances()
        self.int_bits: int = model.int_bits or INT_BITS
        self.ops = Z3Ops(self.int_bits)
        self.selector_bits = max(1, (len(self.instances) - 1).bit_length())
        self.sorts = {name: _z3_sort(variable, self.int_bits)
                      for name, variable in model.variables.items()}

    def lift(self, value: Term) -> Term:
        """A Python constant as a Z3 term of this encoding's width; terms unchanged."""
        return self.ops.lift(value)

    def selector(self, name: str) -> Any:
        """A fresh action selector: an unsigned bit-vector wide enough for every instance."""
        return z3.BitVec(name, self.selector_bits)

    def state(self, tag: str) -> State:
        """Fresh Z3 constants for every variable at step ``tag``."""
        values: dict[str, Term] = {}
        for name, variable in self.model.variables.items():
            sort = self.sorts[name]
            if variable.is_array:
                values[name] = ArrayValue(
                    {
                        key: z3.Const(f"{name}[{_key_text(key)}]@{tag}", sort)
                        for key in variable.index_keys()
                    },
                    self.ops,
                )
            else:
                values[name] = z3.Const(f"{name}@{tag}", sort)
        return State(values)

    def domain(self, state: State) -> Any:
        """Every integer variable of ``state`` within its bounds."""
        parts: list[Any] = []
        for name, variable in self.model.variables.items():
            if isinstance(variable.sort, BoolSort):
                continue
            value = state[name]
            terms = value.values() if isinstance(value, ArrayValue) else (value,)
            parts.extend(_in_domain(variable, term) for term in terms)
        return conjunction(parts)

    def equal(self, left: Mapping[str, Term], right: Mapping[str, Term]) -> Any:
        """Variable-wise equality of two assignments."""
        parts: list[Any] = []
        for name, variable in self.model.variables.items():
            if variable.is_array:
                left_array: ArrayValue = left[name]
                right_array: ArrayValue = right[name]
                parts.extend(
                    equality(self.lift(left_array[key]), self.lift(right_array[key]))
                    for key in variable.index_keys()
                )
            else:
                parts.append(equality(self.lift(left[name]), self.lift(right[name])))
        return conjunction(parts)

    def init(self, state: State) -> Any:
        """``state`` is one of the initial states."""
        options = [
            self.equal(state.as_dict(), self.model.initial_values(self.ops, args))
            for args in self.model.init_decl.instances()
        ]
        return disjunction(options)

    def transition(self, instance: ActionInstance, pre: State, post: State) -> Any:
        """The two-state formula of one action instance, frame included.

        Raises:
            FrameError: the action updates a variable outside its frame.
        """
        result = instance.call(self.ops, pre)
        values = self.model.resolve_update(self.ops, pre, instance, result)
        return conjunction([self.lift(result.guard), self.equal(post.as_dict(), values)])

    def step(self, pre: State, post: State, selector: Any) -> list[Any]:
        """The transition relation in functional form, for unrolling.

        ``selector`` (from :meth:`selector`) names the action instance taken; each post-state
        value is an ``If`` chain over only the instances that change it, so the frame costs
        nothing and the formula stays small.

        Raises:
            FrameError: an action updates a variable outside its frame.
        """
        constraints: list[Any] = []
        if len(self.instances) < 2 ** self.selector_bits:
            constraints.append(z3.ULT(selector, len(self.instances)))
        changes: dict[tuple[str, Any], list[tuple[int, Any]]] = {}
        for index, instance in enumerate(self.instances):
            result = instance.call(self.ops, pre)
            values = self.model.resolve_update(self.ops, pre, instance, result)
            constraints.append(z3.Implies(selector == index, self.lift(result.guard)))
            for name, variable in self.model.variables.items():
                if variable.is_array:
                    old_array: ArrayValue = pre[name]
                    new_array: ArrayValue = values[name]
                    for key in variable.index_keys():
                        _record_change(changes, (name, key), index, old_array[key],
                                       self.lift(new_array[key]))
                else:
                    _record_change(changes, (name, None), index, pre[name],
                                   self.lift(values[name]))
        for name, variable in self.model.variables.items():
            keys = variable.index_keys() if variable.is_array else (None,)
            for key in keys:
                old = pre[name][key] if variable.is_array else pre[name]
                target = post[name][key] if variable.is_array else post[name]
                value: Any = old
                for index, new in reversed(changes.get((name, key), [])):
                    value = z3.If(selector == index, new, value)
                constraints.append(equality(target, value))
        return constraints

    def guard(self, instance: ActionInstance, pre: State) -> Any:
        """The guard of one action instance."""
        return self.lift(instance.call(self.ops, pre).guard)

    def invariant(self, name: str, state: State) -> Any:
        """Invariant ``name`` over ``state``."""
        return self.lift(self.model.invariants[name].body(self.ops, state))

    def witness(self, name: str, state: State) -> Any:
        """Witness ``name`` over ``state``."""
        return self.lift(self.model.witnesses[name].body(self.ops, state))

    def decode(self, solution: Any, state: State) -> State:
        """The concrete state a Z3 model assigns to the constants of ``state``."""
        values: dict[str, Term] = {}
        for name, variable in self.model.variables.items():
            value = state[name]
            if variable.is_array:
                values[name] = ArrayValue(
                    {key: self._value(variable, solution, term) for key, term in value.items()},
                    CONCRETE,
                )
            else:
                values[name] = self._value(variable, solution, value)
        return State(values)

    @staticmethod
    def _value(variable: Var, solution: Any, term: Any) -> Term:
        evaluated = solution.eval(term, model_completion=True)
        sort = variable.sort
        if isinstance(sort, BoolSort):
            return bool(z3.is_true(evaluated))
        if isinstance(sort, IntSort):
            return int(evaluated.as_signed_long())
        assert isinstance(sort, EnumSort)
        return list(sort.enum_type)[evaluated.as_long()]


def _record_change(
    changes: dict[tuple[str, Any], list[tuple[int, Any]]],
    key: tuple[str, Any],
    index: int,
    old: Any,
    lifted: Any,
) -> None:
    if z3.is_expr(old) and z3.is_expr(lifted) and same_term(lifted, old):
        return
    changes.setdefault(key, []).append((index, lifted))
