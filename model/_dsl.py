"""The modelling layer: state variables, init, framed actions, named invariants, witnesses.

Theory of operation
-------------------
A :class:`Model` is written once, mypyvy-style: state variables over finite domains, one
``init``, one *framed* action per transition (guard + update, with the variables it
``modifies``), named safety invariants with the inductive strengthenings that support them, and a
reachability witness. Every function of a model (init, action, invariant, witness) receives an
operations object ``o`` first and builds its result only through ``o`` (``o.And``, ``o.If``,
``o.Eq`` …) and the ordinary ``+``/``-``/``<`` operators on integers.

Two interpretations share that code:

- **concretely** (:class:`ConcreteOps`), values are plain Python ``bool``/``int``/enum members and
  the model is an executable reference: :meth:`Model.initial_states`, :meth:`Model.enabled`,
  :meth:`Model.step`, :meth:`Model.check_invariants` (``conformance/`` replays implementation
  traces through them);
- **symbolically** (``model._z3.Z3Ops``), values are Z3 terms and the same functions build the
  transition relation that ``model._check`` unrolls (bounded model checking) and checks by
  induction, one (action, invariant) pair at a time.

Arrays are fixed-size maps over finite index sets (``over=(DIRS, OFFSETS)``); they are read with
``s.var[key]`` (a symbolic key becomes an ``If`` chain) and updated by returning a mapping of the
changed keys only. A variable an action updates without declaring it in ``modifies`` raises
:class:`FrameError`; everything an action does not update is unchanged.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from mypy_extensions import mypyc_attr

__sans_io__ = True

#: A value of the model: a Python ``bool``/``int``/enum member concretely, a Z3 term symbolically.
Term = Any


class ModelError(Exception):
    """The model definition itself is malformed (an unknown variable, a missing init value …)."""


class FrameError(ModelError):
    """An action updates a variable that its ``modifies`` frame does not list."""


class DomainError(ModelError):
    """A value lies outside its variable's finite domain."""


@mypyc_attr(native_class=False)  # mypyc: a built-in exception's subclass stays a Python class
class ActionNotEnabled(ValueError):  # noqa: N818 - reads as the condition it reports
    """:meth:`Model.step` was asked to take an action whose guard is false in that state."""


# --------------------------------------------------------------------------------------------
# Sorts and domains


@dataclass(frozen=True)
class BoolSort:
    """The booleans."""

    def values(self) -> tuple[Any, ...]:
        """Every value of the sort, in order."""
        return (False, True)

    def contains(self, value: object) -> bool:
        """Whether ``value`` belongs to the sort."""
        return isinstance(value, bool)

    def describe(self) -> str:
        """A short human name for reports."""
        return "bool"


@dataclass(frozen=True)
class IntSort:
    """The integers ``low ..= high`` (both inclusive)."""

    low: int
    high: int

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ModelError(f"empty integer range {self.low}..{self.high}")

    def values(self) -> tuple[Any, ...]:
        """Every value of the sort, in order."""
        return tuple(range(self.low, self.high + 1))

    def contains(self, value: object) -> bool:
        """Whether ``value`` belongs to the sort."""
        return (
            isinstance(value, int)
            and not isinstance(value, bool)
            and self.low <= value <= self.high
        )

    def describe(self) -> str:
        """A short human name for reports."""
        return f"int {self.low}..{self.high}"


@dataclass(frozen=True)
class EnumSort:
    """The members of a Python :class:`enum.Enum` (a state enum of the vocabulary)."""

    enum_type: type[enum.Enum]

    def values(self) -> tuple[Any, ...]:
        """Every value of the sort, in order."""
        return tuple(self.enum_type)

    def contains(self, value: object) -> bool:
        """Whether ``value`` belongs to the sort."""
        return isinstance(value, self.enum_type)

    def describe(self) -> str:
        """A short human name for reports."""
        return self.enum_type.__name__


Sort = BoolSort | IntSort | EnumSort


def Bool() -> BoolSort:  # noqa: N802 - a sort constructor, read like a type
    """The boolean sort."""
    return BoolSort()


def Int(low: int, high: int) -> IntSort:  # noqa: N802 - a sort constructor, read like a type
    """The bounded integer sort ``low ..= high``."""
    return IntSort(low, high)


def Enum(enum_type: type[enum.Enum]) -> EnumSort:  # noqa: N802 - a sort constructor
    """The sort of the members of ``enum_type``."""
    return EnumSort(enum_type)


#: A finite index or parameter domain: a sort, an enum class, or a sequence of hashable values.
Domain = Sort | type[enum.Enum] | Sequence[Hashable] | range


def domain_values(domain: Domain) -> tuple[Any, ...]:
    """The values of a finite domain, in order.

    Args:
        domain: a sort, an enum class, a ``range`` or a sequence of hashable values.

    Returns:
        The values as a tuple.

    Raises:
        ModelError: the domain is empty or holds duplicates.
    """
    values: tuple[Any, ...]
    if isinstance(domain, BoolSort | IntSort | EnumSort):
        values = domain.values()
    elif isinstance(domain, type) and issubclass(domain, enum.Enum):
        values = tuple(domain)
    else:
        values = tuple(domain)
    if not values:
        raise ModelError("a domain must not be empty")
    if len(set(values)) != len(values):
        raise ModelError(f"a domain holds duplicates: {values!r}")
    return values


# --------------------------------------------------------------------------------------------
# Values: arrays and states


class ArrayValue:
    """An immutable array over a finite index set, holding concrete values or Z3 terms.

    Keys are index values (a tuple of them for several dimensions). Reading with a symbolic key
    goes through the operations object, which builds an ``If`` chain over the finite keys.
    """

    __slots__ = ("_items", "_ops")

    def __init__(self, items: Mapping[Any, Term], ops: Ops) -> None:
        self._items: dict[Any, Term] = dict(items)
        self._ops = ops

    def __getitem__(self, key: Any) -> Term:
        if self._ops.is_symbolic_key(key):
            return self._ops.select(self, key)
        try:
            return self._items[key]
        except KeyError:
            raise KeyError(f"index {key!r} is outside the array's index set") from None

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def keys(self) -> tuple[Any, ...]:
        """The index set, in declaration order."""
        return tuple(self._items)

    def items(self) -> tuple[tuple[Any, Term], ...]:
        """``(key, value)`` pairs in index order."""
        return tuple(self._items.items())

    def values(self) -> tuple[Term, ...]:
        """The values in index order."""
        return tuple(self._items.values())

    def set(self, key: Any, value: Term) -> ArrayValue:
        """A copy with ``key`` (a concrete key) mapped to ``value``."""
        if key not in self._items:
            raise KeyError(f"index {key!r} is outside the array's index set")
        items = dict(self._items)
        items[key] = value
        return ArrayValue(items, self._ops)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArrayValue):
            return NotImplemented
        return self._ops.symbolic is False and other._ops.symbolic is False and (
            self._items == other._items
        )

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{key!r}: {value!r}" for key, value in self._items.items()) + "}"


@mypyc_attr(native_class=False)  # mypyc: attribute access by __getattr__ stays Python's
class State:
    """One state of a model: variable name → value (or :class:`ArrayValue`).

    Concrete states are immutable, comparable and hashable; read a variable as an attribute
    (``s.move_state``) or by name (``s["move_state"]``).
    """

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Term]) -> None:
        object.__setattr__(self, "_values", MappingProxyType(dict(values)))

    def __getattr__(self, name: str) -> Term:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"the model has no state variable {name!r}") from None

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("states are immutable; use replace()")

    def __getitem__(self, name: str) -> Term:
        return self._values[name]

    def names(self) -> tuple[str, ...]:
        """The variable names, in declaration order."""
        return tuple(self._values)

    def as_dict(self) -> dict[str, Term]:
        """The values as a fresh dictionary."""
        return dict(self._values)

    def replace(self, **changes: Term) -> State:
        """A copy with some variables replaced (no domain check; see :meth:`Model.validate`)."""
        unknown = set(changes) - set(self._values)
        if unknown:
            raise ModelError(f"unknown state variables {sorted(unknown)}")
        values = dict(self._values)
        values.update(changes)
        return State(values)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, State):
            return NotImplemented
        return dict(self._values) == dict(other._values)

    def __hash__(self) -> int:
        return hash(tuple(self._values.items()))

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={value!r}" for name, value in self._values.items())
        return f"State({inner})"


# --------------------------------------------------------------------------------------------
# Operations: the one interface both interpretations implement


@mypyc_attr(allow_interpreted_subclasses=True)  # mypyc: model._z3.Z3Ops is interpreted
class Ops:
    """The operations a model's functions build their terms with.

    Integers use Python's own ``+ - < <= == !=`` (they work on Z3 integer terms too); booleans
    and enums go through these methods, because Python's ``and``/``or``/``not`` and ``==``
    against an enum member cannot be overloaded for Z3 terms.
    """

    #: Whether terms are Z3 expressions (``True``) or Python values (``False``).
    symbolic: ClassVar[bool] = False

    def And(self, *terms: Term) -> Term:  # noqa: N802
        """Conjunction (``True`` when empty); a single iterable argument is expanded."""
        raise NotImplementedError

    def Or(self, *terms: Term) -> Term:  # noqa: N802
        """Disjunction (``False`` when empty); a single iterable argument is expanded."""
        raise NotImplementedError

    def Not(self, term: Term) -> Term:  # noqa: N802
        """Negation."""
        raise NotImplementedError

    def Implies(self, antecedent: Term, consequent: Term) -> Term:  # noqa: N802
        """Implication."""
        raise NotImplementedError

    def If(self, condition: Term, then: Term, otherwise: Term) -> Term:  # noqa: N802
        """If-then-else over values of one sort (also enum members and arrays)."""
        raise NotImplementedError

    def Eq(self, left: Term, right: Term) -> Term:  # noqa: N802
        """Equality, also between an enum-valued term and an enum member."""
        raise NotImplementedError

    def Distinct(self, *terms: Term) -> Term:  # noqa: N802
        """Pairwise distinct."""
        raise NotImplementedError

    def Ne(self, left: Term, right: Term) -> Term:  # noqa: N802
        """Disequality (``Not(Eq(left, right))``)."""
        return self.Not(self.Eq(left, right))

    def In(self, term: Term, options: Iterable[Any]) -> Term:  # noqa: N802
        """``term`` equals one of ``options``."""
        return self.Or(*[self.Eq(term, option) for option in options])

    def Sum(self, *terms: Term) -> Term:  # noqa: N802
        """Integer sum (``0`` when empty); a single iterable argument is expanded."""
        raise NotImplementedError

    def Count(self, *conditions: Term) -> Term:  # noqa: N802
        """How many of the boolean ``conditions`` hold, as an integer term."""
        items = _flatten(conditions)
        return self.Sum(*[self.If(condition, 1, 0) for condition in items])

    def Min(self, left: Term, right: Term) -> Term:  # noqa: N802
        """The smaller of two integers."""
        return self.If(left <= right, left, right)

    def Max(self, left: Term, right: Term) -> Term:  # noqa: N802
        """The larger of two integers."""
        return self.If(left >= right, left, right)

    def ForAll(self, domain: Domain, body: Callable[[Any], Term]) -> Term:  # noqa: N802
        """``body(v)`` for every ``v`` of a finite domain (expanded into a conjunction)."""
        return self.And(*[body(value) for value in domain_values(domain)])

    def Exists(self, domain: Domain, body: Callable[[Any], Term]) -> Term:  # noqa: N802
        """``body(v)`` for some ``v`` of a finite domain (expanded into a disjunction)."""
        return self.Or(*[body(value) for value in domain_values(domain)])

    def select(self, array: ArrayValue, key: Any) -> Term:
        """``array[key]`` for a key that may be symbolic."""
        raise NotImplementedError

    def store(self, array: ArrayValue, key: Any, value: Term) -> ArrayValue:
        """A copy of ``array`` with ``key`` (possibly symbolic) mapped to ``value``."""
        raise NotImplementedError

    def is_symbolic_key(self, key: Any) -> bool:
        """Whether ``key`` (or a component of a tuple key) is a symbolic term."""
        return False


def _flatten(terms: tuple[Term, ...]) -> list[Term]:
    if len(terms) == 1 and isinstance(terms[0], list | tuple | Iterator):
        return list(terms[0])
    return list(terms)


class ConcreteOps(Ops):
    """Operations over plain Python values: the executable interpretation."""

    symbolic: ClassVar[bool] = False

    def And(self, *terms: Term) -> Term:  # noqa: N802
        """Conjunction (``True`` when empty)."""
        return all(_as_bool(term) for term in _flatten(terms))

    def Or(self, *terms: Term) -> Term:  # noqa: N802
        """Disjunction (``False`` when empty)."""
        return any(_as_bool(term) for term in _flatten(terms))

    def Not(self, term: Term) -> Term:  # noqa: N802
        """Negation."""
        return not _as_bool(term)

    def Implies(self, antecedent: Term, consequent: Term) -> Term:  # noqa: N802
        """Implication."""
        return (not _as_bool(antecedent)) or _as_bool(consequent)

    def If(self, condition: Term, then: Term, otherwise: Term) -> Term:  # noqa: N802
        """If-then-else."""
        return then if _as_bool(condition) else otherwise

    def Eq(self, left: Term, right: Term) -> Term:  # noqa: N802
        """Equality."""
        return bool(left == right)

    def Distinct(self, *terms: Term) -> Term:  # noqa: N802
        """Pairwise distinct."""
        items = _flatten(terms)
        return len(set(items)) == len(items)

    def Sum(self, *terms: Term) -> Term:  # noqa: N802
        """Integer sum."""
        return int(sum(_flatten(terms)))

    def select(self, array: ArrayValue, key: Any) -> Term:
        """``array[key]``."""
        return array[key]

    def store(self, array: ArrayValue, key: Any, value: Term) -> ArrayValue:
        """A copy of ``array`` with ``key`` mapped to ``value``."""
        return array.set(key, value)


def _as_bool(term: Term) -> bool:
    if not isinstance(term, bool):
        raise ModelError(f"expected a boolean, got {term!r}")
    return term


CONCRETE = ConcreteOps()


# --------------------------------------------------------------------------------------------
# Declarations


@dataclass(frozen=True)
class Var:
    """A state variable: a scalar of ``sort``, or an array over the index domains ``over``."""

    name: str
    sort: Sort
    over: tuple[tuple[Any, ...], ...] = ()
    doc: str = ""

    @property
    def is_array(self) -> bool:
        """Whether the variable is an array."""
        return bool(self.over)

    def index_keys(self) -> tuple[Any, ...]:
        """The array's index set (a tuple per key when there are several dimensions)."""
        if len(self.over) == 1:
            return self.over[0]
        return tuple(itertools.product(*self.over))


@dataclass(frozen=True)
class Transition:
    """What an action returns: a guard and the new values of the variables it changes.

    ``update`` maps a variable name to its new value; for an array, to an :class:`ArrayValue`,
    to a mapping of only the changed keys, or to one value for every key. Variables not in
    ``update`` keep their value.
    """

    guard: Term
    update: Mapping[str, Term] = field(default_factory=dict)


ActionBody = Callable[..., Transition]
Predicate = Callable[..., Term]


@dataclass(frozen=True)
class Action:
    """A named, framed transition, parameterised over finite domains."""

    name: str
    body: ActionBody
    modifies: frozenset[str]
    params: tuple[tuple[str, tuple[Any, ...]], ...]
    doc: str

    def instances(self) -> tuple[ActionInstance, ...]:
        """One instance per combination of parameter values."""
        names = [name for name, _ in self.params]
        domains = [values for _, values in self.params]
        return tuple(
            ActionInstance(self, tuple(zip(names, combination, strict=True)))
            for combination in itertools.product(*domains)
        )


@dataclass(frozen=True)
class ActionInstance:
    """An action with every parameter fixed."""

    action: Action
    args: tuple[tuple[str, Any], ...]

    @property
    def label(self) -> str:
        """``name(p=v, …)`` as shown in counterexamples."""
        if not self.args:
            return self.action.name
        inner = ", ".join(f"{name}={_show(value)}" for name, value in self.args)
        return f"{self.action.name}({inner})"

    def call(self, ops: Ops, state: State) -> Transition:
        """Evaluate the action's body in ``state``."""
        result = self.action.body(ops, state, **dict(self.args))
        if not isinstance(result, Transition):
            raise ModelError(f"action {self.action.name} must return a Transition")
        return result


@dataclass(frozen=True)
class Invariant:
    """A named invariant: a ``safety`` property, or a ``lemma`` that strengthens others."""

    name: str
    body: Predicate
    kind: str
    supports: tuple[str, ...]
    doc: str


@dataclass(frozen=True)
class Witness:
    """A named interesting state that must be reachable (so no proof is vacuous)."""

    name: str
    body: Predicate
    doc: str


@dataclass(frozen=True)
class Init:
    """The initial states: one assignment per combination of parameter values."""

    body: Callable[..., Mapping[str, Term]]
    params: tuple[tuple[str, tuple[Any, ...]], ...]

    def instances(self) -> tuple[tuple[tuple[str, Any], ...], ...]:
        """Every combination of parameter values."""
        names = [name for name, _ in self.params]
        domains = [values for _, values in self.params]
        return tuple(
            tuple(zip(names, combination, strict=True))
            for combination in itertools.product(*domains)
        )


def _show(value: Any) -> str:
    if isinstance(value, enum.Enum):
        return value.name
    return repr(value) if isinstance(value, str) else str(value)


def _text(value: Any) -> str:
    """A value as report text (must agree with ``model._report.value_text``)."""
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _params(params: Mapping[str, Domain] | None) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if not params:
        return ()
    return tuple((name, domain_values(domain)) for name, domain in params.items())


# --------------------------------------------------------------------------------------------
# The model


class Model:
    """A state machine written once and interpreted concretely or symbolically.

    Args:
        name: the machine's name in the vocabulary (``"replica_move"``).
        doc: one paragraph on what the model abstracts and where it comes from.
        int_bits: the width of integers in the symbolic interpretation, when every integer of
            the model is small (``None``: the default width of ``model._z3``). Every integer sort
            must lie within half the signed range, so that a sum or a difference of two values
            cannot wrap; narrower integers make every query cheaper.

    Declare variables with :meth:`var`, then decorate ``init``, the actions, the invariants and
    the witness (see the package docstring of :mod:`model` for a worked example).
    """

    def __init__(self, name: str, doc: str = "", int_bits: int | None = None) -> None:
        if int_bits is not None and int_bits < 2:
            raise ModelError(f"int_bits must be at least 2, not {int_bits}")
        self.name = name
        self.doc = doc
        self.int_bits = int_bits
        self.variables: dict[str, Var] = {}
        self.actions: dict[str, Action] = {}
        self.invariants: dict[str, Invariant] = {}
        self.witnesses: dict[str, Witness] = {}
        self._init: Init | None = None
        #: array variable -> its index set (what :meth:`validate` compares every array with)
        self._index_sets: dict[str, frozenset[Any]] = {}

    # -- declarations --------------------------------------------------------------------

    def var(
        self, name: str, sort: Sort, over: Sequence[Domain] = (), doc: str = ""
    ) -> Var:
        """Declare a state variable.

        Args:
            name: the variable's name (an identifier).
            sort: its values' sort (:func:`Bool`, :func:`Int`, :func:`Enum`).
            over: index domains for an array variable (one per dimension); empty for a scalar.
            doc: what the variable stands for.

        Returns:
            The declaration.

        Raises:
            ModelError: the name is taken or not an identifier.
        """
        if not name.isidentifier() or name in self.variables:
            raise ModelError(f"bad or duplicate variable name {name!r}")
        variable = Var(name, sort, tuple(domain_values(domain) for domain in over), doc)
        self.variables[name] = variable
        return variable

    def init(
        self, params: Mapping[str, Domain] | None = None
    ) -> Callable[[Callable[..., Mapping[str, Term]]], Callable[..., Mapping[str, Term]]]:
        """Decorate the function giving the initial values of every variable.

        The function takes ``(o, **params)`` and returns ``{name: value}``; an array's value is
        one value for every key, a mapping of every key, or an :class:`ArrayValue`. With
        ``params`` there is one initial state per combination of values.
        """

        def decorate(
            body: Callable[..., Mapping[str, Term]],
        ) -> Callable[..., Mapping[str, Term]]:
            if self._init is not None:
                raise ModelError(f"model {self.name} already has an init")
            self._init = Init(body, _params(params))
            return body

        return decorate

    def action(
        self,
        modifies: Iterable[str],
        params: Mapping[str, Domain] | None = None,
        name: str | None = None,
    ) -> Callable[[ActionBody], ActionBody]:
        """Decorate a transition ``(o, s, **params) -> Transition``.

        Args:
            modifies: the frame: the only variables the action may change.
            params: parameter name → finite domain; the action is expanded per value.
            name: the action's name (defaults to the function's name: the lower-case event name
                of the vocabulary).

        Returns:
            The decorator (it returns the function unchanged).
        """

        def decorate(body: ActionBody) -> ActionBody:
            action_name = name or body.__name__
            frame = frozenset(modifies)
            unknown = frame - set(self.variables)
            if unknown:
                raise ModelError(f"action {action_name} modifies unknown {sorted(unknown)}")
            if action_name in self.actions:
                raise ModelError(f"duplicate action {action_name}")
            self.actions[action_name] = Action(
                action_name, body, frame, _params(params), (body.__doc__ or "").strip()
            )
            return body

        return decorate

    def invariant(
        self, name: str, supports: Sequence[str] = ()
    ) -> Callable[[Predicate], Predicate]:
        """Decorate a named safety property ``(o, s) -> bool term``.

        Args:
            name: the invariant's name in the vocabulary (``MOVE_NO_LOSS``).
            supports: names of the lemmas that make it inductive together with it.
        """
        return self._add_invariant(name, "safety", supports)

    def lemma(
        self, name: str, supports: Sequence[str] = ()
    ) -> Callable[[Predicate], Predicate]:
        """Decorate a supporting inductive strengthening (checked like a safety property)."""
        return self._add_invariant(name, "lemma", supports)

    def _add_invariant(
        self, name: str, kind: str, supports: Sequence[str]
    ) -> Callable[[Predicate], Predicate]:
        def decorate(body: Predicate) -> Predicate:
            if name in self.invariants:
                raise ModelError(f"duplicate invariant {name}")
            self.invariants[name] = Invariant(
                name, body, kind, tuple(supports), (body.__doc__ or "").strip()
            )
            return body

        return decorate

    def witness(self, name: str) -> Callable[[Predicate], Predicate]:
        """Decorate a named interesting state that must be reachable."""

        def decorate(body: Predicate) -> Predicate:
            self.witnesses[name] = Witness(name, body, (body.__doc__ or "").strip())
            return body

        return decorate

    # -- structure -----------------------------------------------------------------------

    @property
    def init_decl(self) -> Init:
        """The init declaration."""
        if self._init is None:
            raise ModelError(f"model {self.name} has no init")
        return self._init

    def instances(self) -> tuple[ActionInstance, ...]:
        """Every action instance, in declaration order."""
        return tuple(
            instance for action in self.actions.values() for instance in action.instances()
        )

    def support_closure(self, name: str) -> tuple[str, ...]:
        """The invariant and every lemma it transitively relies on, in declaration order.

        Raises:
            ModelError: a support names no invariant of the model.
        """
        seen: set[str] = set()
        pending = [name]
        while pending:
            current = pending.pop()
            if current in seen:
                continue
            if current not in self.invariants:
                raise ModelError(f"{name} is supported by unknown invariant {current}")
            seen.add(current)
            pending.extend(self.invariants[current].supports)
        return tuple(other for other in self.invariants if other in seen)

    def resolve_update(
        self, ops: Ops, state: State, instance: ActionInstance, transition: Transition
    ) -> dict[str, Term]:
        """The full post-state values of an action, enforcing its frame.

        Raises:
            FrameError: the update touches a variable outside ``modifies``.
            ModelError: the update names an unknown variable or array key.
        """
        action = instance.action
        post: dict[str, Term] = {}
        for name, variable in self.variables.items():
            if name not in transition.update:
                post[name] = state[name]
                continue
            if name not in action.modifies:
                raise FrameError(
                    f"action {action.name} updates {name} but its frame is "
                    f"{sorted(action.modifies)}"
                )
            value = transition.update[name]
            if variable.is_array:
                old: ArrayValue = state[name]
                if isinstance(value, ArrayValue):
                    post[name] = value
                elif isinstance(value, Mapping):
                    items = dict(old.items())
                    for key, item in value.items():
                        if key not in items:
                            raise ModelError(f"{name}[{key!r}] is outside its index set")
                        items[key] = item
                    post[name] = ArrayValue(items, ops)
                else:
                    post[name] = ArrayValue(dict.fromkeys(old.keys(), value), ops)
            else:
                post[name] = value
        unknown = set(transition.update) - set(self.variables)
        if unknown:
            raise ModelError(f"action {action.name} updates unknown {sorted(unknown)}")
        return post

    def initial_values(self, ops: Ops, args: tuple[tuple[str, Any], ...]) -> dict[str, Term]:
        """The full initial assignment for one init instance, arrays expanded.

        Raises:
            ModelError: a variable has no initial value.
        """
        given = self.init_decl.body(ops, **dict(args))
        values: dict[str, Term] = {}
        for name, variable in self.variables.items():
            if name not in given:
                raise ModelError(f"init of {self.name} gives no value for {name}")
            value = given[name]
            if variable.is_array:
                if isinstance(value, ArrayValue):
                    values[name] = value
                elif isinstance(value, Mapping):
                    if set(value) != set(variable.index_keys()):
                        raise ModelError(f"init of {name} must give every key")
                    values[name] = ArrayValue({k: value[k] for k in variable.index_keys()}, ops)
                else:
                    values[name] = ArrayValue(dict.fromkeys(variable.index_keys(), value), ops)
            else:
                values[name] = value
        extra = set(given) - set(self.variables)
        if extra:
            raise ModelError(f"init of {self.name} sets unknown {sorted(extra)}")
        return values

    # -- the concrete interpretation -----------------------------------------------------

    def validate(self, state: State) -> None:
        """Check that every value lies in its variable's domain.

        Raises:
            DomainError: naming the first variable (and key) out of its domain.
        """
        index_sets = self._index_sets
        for name, variable in self.variables.items():
            value = state[name]
            if variable.over:
                keys = index_sets.get(name)
                if keys is None:
                    keys = index_sets[name] = frozenset(variable.index_keys())
                if not isinstance(value, ArrayValue) or value._items.keys() != keys:
                    raise DomainError(f"{name} is not an array over its index set")
                contains = variable.sort.contains
                for key, item in value._items.items():
                    if not contains(item):
                        raise DomainError(f"{name}[{_show(key)}] = {item!r} is outside "
                                          f"{variable.sort.describe()}")
            elif not variable.sort.contains(value):
                raise DomainError(f"{name} = {value!r} is outside {variable.sort.describe()}")

    def initial_states(self) -> list[State]:
        """Every initial state, concretely.

        Raises:
            DomainError: an initial value lies outside its domain.
        """
        states: list[State] = []
        for args in self.init_decl.instances():
            state = State(self.initial_values(CONCRETE, args))
            self.validate(state)
            if state not in states:
                states.append(state)
        return states

    def instance(self, action: str, params: Mapping[str, Any] | None = None) -> ActionInstance:
        """The instance of ``action`` with ``params``.

        Raises:
            KeyError: no such action, or the parameters do not match its declaration.
        """
        if action not in self.actions:
            raise KeyError(f"model {self.name} has no action {action!r}")
        declared = self.actions[action]
        given = dict(params or {})
        names = [name for name, _ in declared.params]
        if set(given) != set(names):
            raise KeyError(f"action {action} takes parameters {names}, got {sorted(given)}")
        for name, values in declared.params:
            if given[name] not in values:
                raise KeyError(f"{action}: {name}={given[name]!r} is outside its domain")
        return ActionInstance(declared, tuple((name, given[name]) for name in names))

    def parse_args(self, action: str, args_text: Mapping[str, str]) -> dict[str, Any]:
        """Parameter values of ``action`` from their report text (``{"d": "1"}`` → ``{"d": 1}``).

        Raises:
            KeyError: unknown action, parameter, or a text naming no value of its domain.
        """
        if action not in self.actions:
            raise KeyError(f"model {self.name} has no action {action!r}")
        domains = dict(self.actions[action].params)
        values: dict[str, Any] = {}
        for name, text in args_text.items():
            if name not in domains:
                raise KeyError(f"action {action} has no parameter {name!r}")
            matches = [value for value in domains[name] if _text(value) == text]
            if len(matches) != 1:
                raise KeyError(f"{action}: {name}={text!r} names no value of its domain")
            values[name] = matches[0]
        return values

    def enabled(
        self, state: State, action: str, params: Mapping[str, Any] | None = None
    ) -> bool:
        """Whether the guard of ``action(params)`` holds in ``state``.

        Raises:
            KeyError: unknown action or bad parameters.
        """
        instance = self.instance(action, params)
        return bool(_as_bool(instance.call(CONCRETE, state).guard))

    def step(
        self, state: State, action: str, params: Mapping[str, Any] | None = None
    ) -> State:
        """Take ``action(params)`` from ``state``.

        Returns:
            The successor state.

        Raises:
            ActionNotEnabled: the guard is false.
            FrameError: the action changed a variable outside its frame.
            DomainError: the successor leaves a variable's domain.
            KeyError: unknown action or bad parameters.
        """
        return self.step_instance(state, self.instance(action, params))

    def step_instance(self, state: State, instance: ActionInstance) -> State:
        """Take one action instance (see :meth:`step`)."""
        transition = instance.call(CONCRETE, state)
        if not _as_bool(transition.guard):
            raise ActionNotEnabled(f"{instance.label} is not enabled in {state!r}")
        successor = State(self.resolve_update(CONCRETE, state, instance, transition))
        self.validate(successor)
        return successor

    def successors(self, state: State) -> list[tuple[ActionInstance, State]]:
        """Every enabled action instance and the state it leads to."""
        result: list[tuple[ActionInstance, State]] = []
        for instance in self.instances():
            transition = instance.call(CONCRETE, state)
            if _as_bool(transition.guard):
                result.append((instance, self.step_instance(state, instance)))
        return result

    def check_invariants(self, state: State) -> list[str]:
        """The names of the invariants (safety and lemmas) violated in ``state``."""
        return [
            name
            for name, invariant in self.invariants.items()
            if not _as_bool(invariant.body(CONCRETE, state))
        ]

    def holds(self, state: State, name: str) -> bool:
        """Whether invariant or witness ``name`` holds in ``state``.

        Raises:
            KeyError: no invariant or witness has that name.
        """
        if name in self.invariants:
            return bool(_as_bool(self.invariants[name].body(CONCRETE, state)))
        if name in self.witnesses:
            return bool(_as_bool(self.witnesses[name].body(CONCRETE, state)))
        raise KeyError(f"model {self.name} has no invariant or witness {name!r}")


# --------------------------------------------------------------------------------------------
# Definitions, variants, expectations


class Status(enum.Enum):
    """The verdict on one invariant of one variant."""

    PROVED = "proved"  #: inductive (with its lemmas): holds in every reachable state
    HOLDS = "holds"  #: no violation up to the bounded depth; not shown inductive
    VIOLATED = "violated"  #: a counterexample trace reaches a state that breaks it
    UNKNOWN = "unknown"  #: the solver gave up (timeout)


@dataclass(frozen=True)
class Variant:
    """One configuration of a model definition.

    Attributes:
        name: ``"shipped"`` for what the implementation does; a short slug for a known-bad one.
        doc: what the variant changes and which bug it reproduces.
        flags: the parameters ``build`` reads (e.g. ``{"lock_final_catch_up": False}``).
        shipped: whether this is the variant the implementation follows.
        expected: golden status per invariant; invariants left out must not be violated in a
            shipped variant and are unconstrained in a known-bad one.
        depth: this variant's bounded-checking depth, when it differs from the definition's
            (a known-bad variant needs only enough depth for its counterexamples).
        beyond: known counterexamples longer than the variant's depth: invariant → length. A
            full check at the variant's depth reports such an invariant as its ``expected``
            status; a check to at least that length expects it violated. They are searched on
            their own (``check_variant(…, only=(name,), depth=length)``): by the slow tests and
            by ``bench.check``.
    """

    name: str
    doc: str
    flags: Mapping[str, Any] = field(default_factory=dict)
    shipped: bool = False
    expected: Mapping[str, Status] = field(default_factory=dict)
    depth: int | None = None
    beyond: Mapping[str, int] = field(default_factory=dict)

    def expected_at(self, name: str, depth: int) -> Status | None:
        """The expected status of invariant ``name`` when checked to ``depth``."""
        if name in self.beyond and depth >= self.beyond[name]:
            return Status.VIOLATED
        return self.expected.get(name)


@dataclass(frozen=True)
class ModelDefinition:
    """A model plus its variants, as listed in a module's ``MODELS``.

    Attributes:
        name: the model's name (``replica_move``).
        doc: one line for reports.
        build: builds the :class:`Model` for a variant (reads ``variant.flags``).
        variants: the shipped variant first, then the known-bad ones.
        depth: the default bounded-model-checking depth.
        source: where the machine comes from (``"KIP-113 §2"``).
    """

    name: str
    doc: str
    build: Callable[[Variant], Model]
    variants: tuple[Variant, ...]
    depth: int
    source: str = ""

    def variant(self, name: str) -> Variant:
        """The variant called ``name``.

        Raises:
            KeyError: there is none.
        """
        for variant in self.variants:
            if variant.name == name:
                return variant
        raise KeyError(f"model {self.name} has no variant {name!r}")

    @property
    def shipped(self) -> Variant:
        """The shipped variant.

        Raises:
            ModelError: the definition has none.
        """
        for variant in self.variants:
            if variant.shipped:
                return variant
        raise ModelError(f"model {self.name} has no shipped variant")

    def model(self, variant: str | None = None) -> Model:
        """Build the model of a variant (the shipped one by default)."""
        chosen = self.shipped if variant is None else self.variant(variant)
        return self.build(chosen)
