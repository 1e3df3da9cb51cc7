"""Trace checking: replay an implementation trace in the executable model.

Theory of operation
-------------------
The sans-IO cores emit an :class:`impl.trace.TraceEvent` at every transition. For each machine
we know how to check, an :class:`Abstraction` says three things:

* which model instance an event belongs to (by default one instance per ``subject``, e.g. one
  replica-move model per ``"t-0@1"``) and that instance's initial model state;
* which model actions, with which parameters, the event is: usually one, several when one
  implementation step is several model steps (a chunk copied many records), none when the event
  does not change the abstract state (a stutter step);
* optionally, the model state to replay the event from: state-based trace validation re-derives
  it from the values the implementation reported (:meth:`Abstraction.pre_state`), so a model with
  small bounded domains can check arbitrarily long traces;
* whether the model's state after the action agrees with what the implementation reported
  (``state_after`` and the event's fields), the refinement check.

:class:`TraceChecker` replays events one by one, in trace order: the action must be enabled in
the instance's current model state; the model steps; every invariant of the model must hold in
the new state; the abstraction must accept the new state. The first failure stops the replay
and is reported as a :class:`TraceViolation` naming the event index, the action, the invariant
(if one broke) and the command that reproduces the run. Events of machines without an
abstraction are counted as unchecked, so a report shows its coverage honestly.

The checker is online: the simulator feeds each event as it is emitted and stops the run at the
first violation, which keeps the failing trace short.

This module is a sans-IO core.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from impl.trace import TraceEvent, TraceValue

__sans_io__ = True


class ExecutableModel(Protocol):
    """What the checker needs of a model (``model._dsl.Model`` provides exactly this)."""

    @property
    def name(self) -> str:
        """The machine's name."""

    def enabled(self, state: Any, action: str, params: Mapping[str, Any] | None = None) -> bool:
        """Whether ``action(params)`` is enabled in ``state``."""

    def step(self, state: Any, action: str, params: Mapping[str, Any] | None = None) -> Any:
        """The successor of ``state`` under ``action(params)``."""

    def check_invariants(self, state: Any) -> list[str]:
        """The names of the invariants that ``state`` violates."""


#: an action without parameters (read-only, so every such action shares it)
NO_PARAMS: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ModelAction:
    """A model action with concrete parameters: what one trace event means in the model."""

    name: str
    params: Mapping[str, Any] = field(default_factory=lambda: NO_PARAMS)
    #: the parameters as a hashable key, filled in by :class:`MemoizedModel` on first use (an
    #: abstraction that reuses its actions pays for it once)
    memo_key: tuple[tuple[str, Any], ...] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __init__(self, name: str, params: Mapping[str, Any] = NO_PARAMS) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "memo_key", None)

    def label(self) -> str:
        """``name(key=value, …)`` for reports."""
        inner = ", ".join(f"{key}={_show(value)}" for key, value in self.params.items())
        return f"{self.name}({inner})"


class Abstraction(Protocol):
    """Maps one machine's trace events onto a model.

    ``machine`` is the trace machine name it handles (``"replica_move"``); ``model`` the
    executable model its events are replayed in.
    """

    @property
    def machine(self) -> str:
        """The trace machine name."""

    @property
    def model(self) -> ExecutableModel:
        """The executable model."""

    def instance_key(self, event: TraceEvent) -> str:
        """Which model instance ``event`` belongs to (usually ``event.subject``)."""

    def initial_state(self, event: TraceEvent) -> Any:
        """The model state of a new instance, before its first event ``event``."""

    def pre_state(self, state: Any, event: TraceEvent) -> Any:
        """The model state to replay ``event`` from (``state``: where the last event left it)."""

    def actions(self, state: Any, event: TraceEvent) -> Sequence[ModelAction]:
        """The model actions ``event`` is, in order (empty: a stutter step).

        Raises:
            ValueError: the event cannot be mapped (an unknown event name, a missing field).
        """

    def mismatch(self, state: Any, event: TraceEvent) -> str | None:
        """Why the model state after ``event`` disagrees with the implementation, or ``None``."""


#: (enabled, successor or ``None``, the invariants the successor violates)
Transition = tuple[bool, Any, tuple[str, ...]]


class MemoizedModel:
    """A model whose answers are remembered: a model is a pure function of (state, action), and
    an abstraction over small domains visits few distinct states, so replay costs a dictionary
    lookup per action after the first runs.

    Keys use the state's identity (hashing a model state is costly) and each entry keeps its
    state alive, so an identity is never reused while its entry exists; abstractions that build
    their states through a cache therefore hit on every repeat.

    Args:
        model: the model.
        entries_max: bound on remembered answers per kind; past it the cache is cleared.
    """

    def __init__(self, model: ExecutableModel, entries_max: int = 200_000) -> None:
        self._model = model
        #: a model that can step without a separate guard evaluation (``None`` when the
        #: action is not enabled) offers ``step_if_enabled``
        self._step_if_enabled: Any = getattr(model, "step_if_enabled", None)
        self._entries_max = entries_max
        self._enabled: dict[tuple[int, str, tuple[tuple[str, Any], ...]], tuple[Any, bool]] = {}
        self._step: dict[tuple[int, str, tuple[tuple[str, Any], ...]], tuple[Any, Any]] = {}
        self._invariants: dict[int, tuple[Any, tuple[str, ...]]] = {}
        self._transitions: dict[
            tuple[int, str, tuple[tuple[str, Any], ...]], tuple[Any, Transition]
        ] = {}
        #: successors by value: two equal successors of different states share one object, so
        #: their invariants are evaluated once
        self._successors: dict[Any, Any] = {}

    @property
    def name(self) -> str:
        """The model's name."""
        return self._model.name

    def _room(self, cache: dict[Any, Any]) -> None:
        if len(cache) >= self._entries_max:
            cache.clear()

    def enabled(self, state: Any, action: str, params: Mapping[str, Any] | None = None) -> bool:
        """As the model's, remembered."""
        key = (id(state), action, tuple(sorted((params or {}).items())))
        entry = self._enabled.get(key)
        if entry is None or entry[0] is not state:
            self._room(self._enabled)
            entry = self._enabled[key] = (state, self._model.enabled(state, action, params))
        return bool(entry[1])

    def step(self, state: Any, action: str, params: Mapping[str, Any] | None = None) -> Any:
        """As the model's, remembered."""
        key = (id(state), action, tuple(sorted((params or {}).items())))
        entry = self._step.get(key)
        if entry is None or entry[0] is not state:
            self._room(self._step)
            entry = self._step[key] = (state, self._model.step(state, action, params))
        return entry[1]

    def check_invariants(self, state: Any) -> list[str]:
        """As the model's, remembered."""
        return list(self._broken(state))

    def _broken(self, state: Any) -> tuple[str, ...]:
        entry = self._invariants.get(id(state))
        if entry is None or entry[0] is not state:
            self._room(self._invariants)
            entry = self._invariants[id(state)] = (
                state, tuple(self._model.check_invariants(state))
            )
        return entry[1]

    def transition(self, state: Any, action: ModelAction) -> Transition:
        """``action`` taken from ``state`` as the checker takes it, remembered in one lookup:
        whether it is enabled, then (if it is) the successor and the invariants it violates.
        The model answers exactly the questions :meth:`enabled`, :meth:`step` and
        :meth:`check_invariants` would, in that order."""
        params = action.memo_key
        if params is None:
            params = tuple(sorted(action.params.items()))
            object.__setattr__(action, "memo_key", params)
        key = (id(state), action.name, params)
        entry = self._transitions.get(key)
        if entry is None or entry[0] is not state:
            model = self._model
            if self._step_if_enabled is not None:
                successor = self._step_if_enabled(state, action.name, action.params)
                enabled = successor is not None
            else:
                enabled = model.enabled(state, action.name, action.params)
                if enabled:
                    successor = model.step(state, action.name, action.params)
            if enabled:
                successors = self._successors
                if len(successors) >= self._entries_max:
                    successors.clear()
                successor = successors.setdefault(successor, successor)
                outcome: Transition = (True, successor, self._broken(successor))
            else:
                outcome = (False, None, ())
            self._room(self._transitions)
            entry = self._transitions[key] = (state, outcome)
        return entry[1]


@dataclass(frozen=True, slots=True)
class TraceViolation:
    """The first event a model refused.

    Attributes:
        index: the event's position in the trace (0-based).
        event: the event, as its one-line JSON.
        machine: the event's machine.
        subject: the model instance it was replayed in.
        action: the model action's label, or ``""`` when the event could not be mapped.
        kind: ``"unmapped"``, ``"not_enabled"``, ``"invariant"`` or ``"state_mismatch"``.
        invariant: the first violated invariant's name (for ``kind == "invariant"``), else ``""``.
        message: one line of explanation.
        replay_command: how to reproduce the run.
    """

    index: int
    event: str
    machine: str
    subject: str
    action: str
    kind: str
    invariant: str
    message: str
    replay_command: str

    def describe(self) -> str:
        """A readable multi-line report."""
        lines = [
            f"trace event #{self.index} ({self.machine} {self.subject}) refused by the model:",
            f"  event:  {self.event}",
            f"  action: {self.action or '-'}",
            f"  {self.kind}: {self.invariant + ': ' if self.invariant else ''}{self.message}",
        ]
        if self.replay_command:
            lines.append(f"  replay: {self.replay_command}")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class TraceVerdict:
    """The result of checking one trace.

    Attributes:
        events_checked: events replayed in a model (stutters included).
        events_unchecked: events of machines without an abstraction.
        actions: how many times each model action was taken.
        violation: the first violation, or ``None`` if the whole trace conforms.
    """

    events_checked: int
    events_unchecked: int
    actions: Mapping[str, int]
    violation: TraceViolation | None

    @property
    def ok(self) -> bool:
        """Whether the trace conforms."""
        return self.violation is None


class TraceChecker:
    """Replays trace events, as they come, in the models of their machines.

    Args:
        abstractions: one per machine to check; events of other machines are counted only.
        replay_command: printed with a violation (``logproof conformance replay --seed N``).
    """

    def __init__(self, abstractions: Sequence[Abstraction], replay_command: str = "") -> None:
        self._abstractions: dict[str, Abstraction] = {}
        for abstraction in abstractions:
            assert abstraction.machine not in self._abstractions, abstraction.machine
            self._abstractions[abstraction.machine] = abstraction
        self._replay_command = replay_command
        self._states: dict[tuple[str, str], Any] = {}
        self._index = 0
        self._checked = 0
        self._unchecked = 0
        #: (machine, model action) -> times taken; labelled ``machine.action`` by the verdict
        self._actions: Counter[tuple[str, str]] = Counter()
        self.violation: TraceViolation | None = None

    @property
    def machines(self) -> tuple[str, ...]:
        """The machines this checker replays."""
        return tuple(sorted(self._abstractions))

    def state_of(self, machine: str, instance: str) -> Any:
        """The current model state of one instance (``None`` before its first event)."""
        return self._states.get((machine, instance))

    def feed(self, event: TraceEvent) -> TraceViolation | None:
        """Replay one event.

        Args:
            event: the next event of the trace.

        Returns:
            The violation if this event (or an earlier one) was refused, else ``None``. After a
            violation, later events are ignored.
        """
        if self.violation is not None:
            return self.violation
        index = self._index
        self._index += 1
        abstraction = self._abstractions.get(event.machine)
        if abstraction is None:
            self._unchecked += 1
            return None
        self._checked += 1
        key = (event.machine, abstraction.instance_key(event))
        state = self._states.get(key)
        if state is None:
            state = abstraction.initial_state(event)
        state = abstraction.pre_state(state, event)
        try:
            actions = abstraction.actions(state, event)
        except ValueError as error:
            return self._fail(
                index, event, subject=key[1], action="", kind="unmapped", invariant="",
                message=str(error),
            )
        model = abstraction.model
        memoized = model.transition if isinstance(model, MemoizedModel) else None
        last: ModelAction | None = None
        counts = self._actions
        for action in actions:
            last = action
            if memoized is not None:
                enabled, successor, broken = memoized(state, action)
            else:
                enabled = model.enabled(state, action.name, action.params)
                if enabled:
                    successor = model.step(state, action.name, action.params)
                    broken = tuple(model.check_invariants(successor))
            if not enabled:
                label = action.label()
                return self._fail(
                    index, event, subject=key[1], action=label, kind="not_enabled",
                    invariant="", message=f"{label} is not enabled in {state!r}",
                )
            state = successor
            counts[event.machine, action.name] += 1
            if broken:
                label = action.label()
                return self._fail(
                    index, event, subject=key[1], action=label, kind="invariant",
                    invariant=broken[0], message=f"violated after {label} in {state!r}",
                )
        reason = abstraction.mismatch(state, event)
        if reason is not None:
            return self._fail(
                index, event, subject=key[1], action="" if last is None else last.label(),
                kind="state_mismatch", invariant="", message=reason,
            )
        self._states[key] = state
        return None

    def _fail(
        self,
        index: int,
        event: TraceEvent,
        *,
        subject: str,
        action: str,
        kind: str,
        invariant: str,
        message: str,
    ) -> TraceViolation:
        self.violation = TraceViolation(
            index=index,
            event=event.to_json(),
            machine=event.machine,
            subject=subject,
            action=action,
            kind=kind,
            invariant=invariant,
            message=message,
            replay_command=self._replay_command,
        )
        return self.violation

    def verdict(self) -> TraceVerdict:
        """The verdict on everything fed so far."""
        counts: Counter[str] = Counter()
        for (machine, name), count in self._actions.items():
            counts[f"{machine}.{name}"] += count
        return TraceVerdict(
            events_checked=self._checked,
            events_unchecked=self._unchecked,
            actions=MappingProxyType(dict(sorted(counts.items()))),
            violation=self.violation,
        )


def check_trace(
    events: Iterable[TraceEvent], abstractions: Sequence[Abstraction], replay_command: str = ""
) -> TraceVerdict:
    """Replay a whole trace; stop at the first violation.

    Args:
        events: the trace, in emission order.
        abstractions: one per machine to check.
        replay_command: printed with a violation.

    Returns:
        The verdict.
    """
    checker = TraceChecker(abstractions, replay_command)
    for event in events:
        if checker.feed(event) is not None:
            break
    return checker.verdict()


def parse_trace_line(line: str) -> TraceEvent:
    """The inverse of :meth:`impl.trace.TraceEvent.to_json`.

    Raises:
        ValueError: the line is not a trace event.
    """
    try:
        data = json.loads(line)
        fields: dict[str, Any] = data["fields"]
        return TraceEvent.of(
            str(data["machine"]),
            str(data["event"]),
            str(data["subject"]),
            str(data["before"]),
            str(data["after"]),
            **{key: _thaw(value) for key, value in fields.items()},
        )
    except (KeyError, TypeError, json.JSONDecodeError) as error:
        raise ValueError(f"not a trace event: {line[:120]!r}") from error


def _thaw(value: Any) -> TraceValue:
    if isinstance(value, list):
        return tuple(_thaw(item) for item in value)
    assert value is None or isinstance(value, str | int | bool), value
    return value


def _show(value: object) -> str:
    name = getattr(value, "name", None)
    return name if isinstance(name, str) else repr(value)
