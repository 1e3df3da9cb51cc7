"""Invariant reports: the results of checking, as data that round-trips through JSON.

A :class:`Report` holds one :class:`VariantResult` per (model, variant) checked; each holds one
:class:`InvariantResult` per named invariant (status, depth, time, solver statistics and, for a
violation, the counterexample :class:`Trace`) and one :class:`WitnessResult` per reachability
witness. :meth:`VariantResult.problems` says why a variant does not meet its expectations: a
shipped invariant that fails, a known-bad variant that is not refuted, a status that differs from
its golden expectation, an unreachable witness, or a counterexample the concrete interpretation
does not replay.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._dsl import ArrayValue, State, Status, _text

__sans_io__ = True

#: Version of the JSON layout written by :meth:`Report.to_json`.
REPORT_FORMAT = 1

Json = Any


class ReportFormatError(ValueError):
    """A JSON document is not a logproof invariant report."""


def value_text(value: Any) -> str:
    """A concrete model value as report text (enum members by name)."""
    return _text(value)


def key_text(key: Any) -> str:
    """An array key as report text (``1`` or ``0,2``)."""
    parts = key if isinstance(key, tuple) else (key,)
    return ",".join(value_text(part) for part in parts)


def flatten_state(state: State) -> dict[str, str]:
    """A concrete state as ``{"var": text, "array[key]": text}`` in declaration order."""
    flat: dict[str, str] = {}
    for name in state.names():
        value = state[name]
        if isinstance(value, ArrayValue):
            for key, item in value.items():
                flat[f"{name}[{key_text(key)}]"] = value_text(item)
        else:
            flat[name] = value_text(value)
    return flat


@dataclass(frozen=True)
class TraceStep:
    """One state of a trace and the action that led to it (``None`` for the initial state).

    Attributes:
        index: 0 for the initial state.
        action: the action instance's label, ``requested(d=1)``.
        action_name: the action's name, ``requested``.
        args: its parameters as text.
        changes: ``(variable, before, after)`` for every variable (or array cell) it changed.
        state: the full state after the step, flattened to text.
    """

    index: int
    action: str | None
    action_name: str | None
    args: Mapping[str, str]
    changes: tuple[tuple[str, str, str], ...]
    state: Mapping[str, str]

    def to_json(self) -> Json:
        """A JSON-ready dictionary."""
        return {
            "index": self.index,
            "action": self.action,
            "action_name": self.action_name,
            "args": dict(self.args),
            "changes": [list(change) for change in self.changes],
            "state": dict(self.state),
        }

    @classmethod
    def from_json(cls, data: Json) -> TraceStep:
        """Read a step written by :meth:`to_json`."""
        return cls(
            index=int(data["index"]),
            action=data["action"],
            action_name=data["action_name"],
            args={str(k): str(v) for k, v in data["args"].items()},
            changes=tuple((str(a), str(b), str(c)) for a, b, c in data["changes"]),
            state={str(k): str(v) for k, v in data["state"].items()},
        )


@dataclass(frozen=True)
class Trace:
    """A run of the model from an initial state.

    Attributes:
        steps: the initial state, then one step per action.
        target: the invariant broken (or witness reached) in the last state.
        replayed: whether the concrete interpretation took the same steps to the same states
            and agreed on ``target`` in the last one.
    """

    steps: tuple[TraceStep, ...]
    target: str
    replayed: bool

    @property
    def length(self) -> int:
        """The number of actions."""
        return len(self.steps) - 1

    def to_json(self) -> Json:
        """A JSON-ready dictionary."""
        return {
            "target": self.target,
            "replayed": self.replayed,
            "steps": [step.to_json() for step in self.steps],
        }

    @classmethod
    def from_json(cls, data: Json) -> Trace:
        """Read a trace written by :meth:`to_json`."""
        return cls(
            steps=tuple(TraceStep.from_json(step) for step in data["steps"]),
            target=str(data["target"]),
            replayed=bool(data["replayed"]),
        )


def trace_from_states(
    states: list[State],
    instances: Sequence[tuple[str, str, Mapping[str, str]]],
    target: str,
    replayed: bool,
) -> Trace:
    """Build a :class:`Trace` from concrete states and the action instances between them.

    Args:
        states: ``n + 1`` concrete states.
        instances: ``n`` triples ``(label, action name, args as text)``.
        target: the invariant broken or witness reached at the end.
        replayed: whether the concrete interpretation agreed.

    Returns:
        The trace, with the changed variables of each step.
    """
    flat = [flatten_state(state) for state in states]
    steps = [TraceStep(0, None, None, {}, (), flat[0])]
    for index, (label, name, args) in enumerate(instances, start=1):
        before, after = flat[index - 1], flat[index]
        changes = tuple(
            (variable, before[variable], after[variable])
            for variable in after
            if before[variable] != after[variable]
        )
        steps.append(TraceStep(index, label, name, dict(args), changes, after))
    return Trace(tuple(steps), target, replayed)


@dataclass(frozen=True)
class InvariantResult:
    """The verdict on one invariant of one variant.

    Attributes:
        name: the invariant's name.
        kind: ``safety`` or ``lemma``.
        status: proved, holds (to ``depth``), violated, or unknown.
        depth: the bound checked (for a violation: the counterexample's length).
        seconds: time spent on this invariant (bounded checks and induction).
        statistics: solver statistics summed over its queries (``conflicts``, ``decisions`` …).
        counterexample: the violating trace, when violated.
        note: for ``holds``: which (invariant, action) pair stopped the induction proof.
        expected: the golden status, when the variant declares one.
        cti: for ``holds``: the counterexample to induction behind ``note`` (a state satisfying
            the invariant and its lemmas, and the action instance leading out of them); it need
            not be reachable, and says which lemma is missing.
    """

    name: str
    kind: str
    status: Status
    depth: int
    seconds: float
    statistics: Mapping[str, float]
    counterexample: Trace | None = None
    note: str = ""
    expected: Status | None = None
    cti: Trace | None = None

    @property
    def status_text(self) -> str:
        """``proved``, ``holds to depth K``, ``violated`` or ``unknown``."""
        if self.status is Status.HOLDS:
            return f"holds to depth {self.depth}"
        if self.status is Status.VIOLATED:
            return "violated"
        return str(self.status.value)

    def to_json(self) -> Json:
        """A JSON-ready dictionary."""
        return {
            "name": self.name,
            "kind": self.kind,
            "status": self.status.value,
            "depth": self.depth,
            "seconds": round(self.seconds, 4),
            "statistics": dict(self.statistics),
            "counterexample": None if self.counterexample is None
            else self.counterexample.to_json(),
            "note": self.note,
            "expected": None if self.expected is None else self.expected.value,
            "cti": None if self.cti is None else self.cti.to_json(),
        }

    @classmethod
    def from_json(cls, data: Json) -> InvariantResult:
        """Read a result written by :meth:`to_json`."""
        return cls(
            name=str(data["name"]),
            kind=str(data["kind"]),
            status=Status(data["status"]),
            depth=int(data["depth"]),
            seconds=float(data["seconds"]),
            statistics={str(k): float(v) for k, v in data["statistics"].items()},
            counterexample=None if data["counterexample"] is None
            else Trace.from_json(data["counterexample"]),
            note=str(data["note"]),
            expected=None if data["expected"] is None else Status(data["expected"]),
            cti=None if data.get("cti") is None else Trace.from_json(data["cti"]),
        )


@dataclass(frozen=True)
class WitnessResult:
    """Whether a named interesting state was reached within the bound, and how."""

    name: str
    reached: bool
    depth: int
    trace: Trace | None

    def to_json(self) -> Json:
        """A JSON-ready dictionary."""
        return {
            "name": self.name,
            "reached": self.reached,
            "depth": self.depth,
            "trace": None if self.trace is None else self.trace.to_json(),
        }

    @classmethod
    def from_json(cls, data: Json) -> WitnessResult:
        """Read a result written by :meth:`to_json`."""
        return cls(
            name=str(data["name"]),
            reached=bool(data["reached"]),
            depth=int(data["depth"]),
            trace=None if data["trace"] is None else Trace.from_json(data["trace"]),
        )


@dataclass(frozen=True)
class VariantResult:
    """Everything checked for one variant of one model."""

    model: str
    variant: str
    shipped: bool
    doc: str
    depth: int
    seconds: float
    invariants: tuple[InvariantResult, ...]
    witnesses: tuple[WitnessResult, ...]
    errors: tuple[str, ...] = ()

    def problems(self) -> list[str]:
        """Why this variant does not meet its expectations (empty when it does)."""
        found = list(self.errors)
        for witness in self.witnesses:
            if not witness.reached and self.shipped:
                found.append(f"witness {witness.name} is not reachable within depth "
                             f"{witness.depth}: the proofs may be vacuous")
            elif witness.trace is not None and not witness.trace.replayed:
                found.append(f"witness {witness.name}: the concrete model does not replay it")
        violated = False
        for result in self.invariants:
            if result.status is Status.VIOLATED:
                violated = True
                if result.counterexample is not None and not result.counterexample.replayed:
                    found.append(f"{result.name}: the concrete model does not replay the "
                                 "counterexample")
            if result.expected is not None:
                if result.status is not result.expected:
                    found.append(f"{result.name} is {result.status_text}, expected "
                                 f"{result.expected.value}")
            elif self.shipped and result.status in (Status.VIOLATED, Status.UNKNOWN):
                found.append(f"{result.name} is {result.status_text} in the shipped variant")
        if not self.shipped and not violated:
            found.append("known-bad variant is not refuted: no invariant is violated")
        return found

    @property
    def ok(self) -> bool:
        """Whether the variant meets its expectations."""
        return not self.problems()

    def result(self, invariant: str) -> InvariantResult:
        """The result for one invariant.

        Raises:
            KeyError: the variant has no such invariant.
        """
        for result in self.invariants:
            if result.name == invariant:
                return result
        raise KeyError(invariant)

    def to_json(self) -> Json:
        """A JSON-ready dictionary."""
        return {
            "model": self.model,
            "variant": self.variant,
            "shipped": self.shipped,
            "doc": self.doc,
            "depth": self.depth,
            "seconds": round(self.seconds, 4),
            "ok": self.ok,
            "problems": self.problems(),
            "invariants": [result.to_json() for result in self.invariants],
            "witnesses": [witness.to_json() for witness in self.witnesses],
            "errors": list(self.errors),
        }

    @classmethod
    def from_json(cls, data: Json) -> VariantResult:
        """Read a result written by :meth:`to_json`."""
        return cls(
            model=str(data["model"]),
            variant=str(data["variant"]),
            shipped=bool(data["shipped"]),
            doc=str(data["doc"]),
            depth=int(data["depth"]),
            seconds=float(data["seconds"]),
            invariants=tuple(InvariantResult.from_json(item) for item in data["invariants"]),
            witnesses=tuple(WitnessResult.from_json(item) for item in data["witnesses"]),
            errors=tuple(str(error) for error in data["errors"]),
        )


@dataclass(frozen=True)
class Report:
    """The results of one ``logproof check`` run."""

    results: tuple[VariantResult, ...]
    solver: str
    seed: int
    seconds: float
    meta: Mapping[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether every variant meets its expectations."""
        return all(result.ok for result in self.results)

    def to_json(self) -> Json:
        """A JSON-ready dictionary."""
        return {
            "format": REPORT_FORMAT,
            "tool": "logproof check",
            "solver": self.solver,
            "seed": self.seed,
            "seconds": round(self.seconds, 4),
            "ok": self.ok,
            "meta": dict(self.meta),
            "results": [result.to_json() for result in self.results],
        }

    def dumps(self) -> str:
        """The report as indented JSON text."""
        return json.dumps(self.to_json(), indent=2, sort_keys=False) + "\n"

    @classmethod
    def from_json(cls, data: Json) -> Report:
        """Read a report written by :meth:`to_json`.

        Raises:
            ReportFormatError: the document is not such a report.
        """
        if not isinstance(data, dict) or data.get("tool") != "logproof check":
            raise ReportFormatError("not a logproof check report")
        if data.get("format") != REPORT_FORMAT:
            raise ReportFormatError(f"unsupported report format {data.get('format')!r}")
        try:
            return cls(
                results=tuple(VariantResult.from_json(item) for item in data["results"]),
                solver=str(data["solver"]),
                seed=int(data["seed"]),
                seconds=float(data["seconds"]),
                meta={str(k): str(v) for k, v in data.get("meta", {}).items()},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ReportFormatError(f"malformed report: {error!r}") from error

    @classmethod
    def loads(cls, text: str) -> Report:
        """Parse report JSON text.

        Raises:
            ReportFormatError: the text is not JSON or not a report.
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ReportFormatError(f"not JSON: {error.msg} at line {error.lineno}") from error
        return cls.from_json(data)
