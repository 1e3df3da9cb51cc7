"""Typed trace events emitted by the sans-IO cores at every transition.

Why: ``conformance/`` replays a trace in the executable model from ``model/``; each event must be
an enabled model action and every invariant must hold after it. A trace event therefore names the
machine, the event (an enum member name, identical in ``spec/``, ``model/`` and ``impl/``), the
subject the machine is about (``"t-0@1"`` for a partition on broker 1, ``"dir:/data/a"`` …) and
the state before and after, plus whatever fields the abstraction function needs.

This module is a sans-IO core: it imports neither trio, kazoo nor ``os``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _encode_str
from types import MappingProxyType
from typing import Protocol

__sans_io__ = True

TraceValue = str | int | bool | None | tuple["TraceValue", ...]

#: an event without fields (read-only, so every such event shares it)
NO_FIELDS: Mapping[str, TraceValue] = MappingProxyType({})


def freeze_fields(fields: Mapping[str, object]) -> Mapping[str, TraceValue]:
    """``fields`` as :meth:`TraceEvent.of` stores them (immutable values, a read-only view)."""
    frozen: dict[str, TraceValue] = {}
    for key, value in fields.items():
        # Plain ints and strings (nearly every field) are already frozen: no call for them.
        if type(value) is int or type(value) is str:
            frozen[key] = value
        else:
            frozen[key] = _freeze_value(value)
    return MappingProxyType(frozen)


def _freeze_value(value: object) -> TraceValue:
    if value is None or isinstance(value, str | int | bool):
        return value
    if isinstance(value, list | tuple | frozenset | set):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return tuple(_freeze_value(item) for item in items)
    raise TypeError(f"trace field values must be str, int, bool, None or sequences, not {value!r}")


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One transition of one machine.

    Attributes:
        machine: the machine's name, e.g. ``"replica_move"``, ``"log_dir"``, ``"replication"``,
            ``"controller"``.
        event: the event's enum member name, e.g. ``"CAUGHT_UP"``.
        subject: what the machine instance is about, e.g. ``"t-0@1"``.
        state_before: the state's enum member name before the transition.
        state_after: the state's enum member name after it.
        fields: extra values the model's abstraction function reads (offsets, epochs, dirs).
    """

    machine: str
    event: str
    subject: str
    state_before: str
    state_after: str
    fields: Mapping[str, TraceValue] = field(default_factory=lambda: NO_FIELDS)

    def __init__(  # noqa: PLR0917 (the generated constructor's signature)
        self, machine: str, event: str, subject: str, state_before: str,
        state_after: str, fields: Mapping[str, TraceValue] = NO_FIELDS
    ) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "machine", machine)
        object.__setattr__(self, "event", event)
        object.__setattr__(self, "subject", subject)
        object.__setattr__(self, "state_before", state_before)
        object.__setattr__(self, "state_after", state_after)
        object.__setattr__(self, "fields", fields)

    @staticmethod
    def of(
        machine: str,
        event: str,
        subject: str,
        state_before: str,
        state_after: str,
        **fields: object,
    ) -> TraceEvent:
        """Build an event, freezing ``fields`` into immutable values."""
        return TraceEvent(machine, event, subject, state_before, state_after,
                          freeze_fields(fields))

    def to_json(self) -> str:
        """One line of JSON with sorted keys: the byte-stable form used for trace digests.

        The line is exactly ``json.dumps`` of the event with sorted keys and compact separators;
        it is assembled by hand (the simulators digest every event, and the generic encoder
        is a tenth of a cluster run) and falls back to ``json.dumps`` for any value outside
        :data:`TraceValue`.
        """
        machine, event, subject = self.machine, self.event, self.subject
        before, after = self.state_before, self.state_after
        if not (type(machine) is str and type(event) is str and type(subject) is str
                and type(before) is str and type(after) is str):
            return self._to_json_generic()
        # The line's head and tail repeat (a few states, events and subjects): encoded once.
        head_key = (after, before, event)
        head = _HEADS.get(head_key)
        if head is None:
            head = (f'{{"after":{_encode_str(after)},"before":{_encode_str(before)},'
                    f'"event":{_encode_str(event)},"fields":')
            if len(_HEADS) < _CACHE_MAX:
                _HEADS[head_key] = head
        tail_key = (machine, subject)
        tail = _TAILS.get(tail_key)
        if tail is None:
            tail = f',"machine":{_encode_str(machine)},"subject":{_encode_str(subject)}}}'
            if len(_TAILS) < _CACHE_MAX:
                _TAILS[tail_key] = tail
        fields = self.fields
        if not fields:
            return f"{head}{{}}{tail}"
        parts = []
        for key in sorted(fields):
            if type(key) is not str:
                return self._to_json_generic()
            value = fields[key]
            kind = type(value)
            if kind is int:
                encoded: str | None = int.__repr__(value)
            elif kind is str:
                encoded = _encode_str(value)  # type: ignore[arg-type]
            else:
                encoded = _json_value(value)
                if encoded is None:
                    return self._to_json_generic()
            parts.append(f"{_encode_str(key)}:{encoded}")
        return f"{head}{{{','.join(parts)}}}{tail}"

    def _to_json_generic(self) -> str:
        return json.dumps(
            {
                "machine": self.machine,
                "event": self.event,
                "subject": self.subject,
                "before": self.state_before,
                "after": self.state_after,
                "fields": dict(self.fields),
            },
            sort_keys=True,
            separators=(",", ":"),
        )


#: Encoded heads (``{"after":…,"fields":``) and tails (``,"machine":…}``) of JSON lines.
_HEADS: dict[tuple[str, str, str], str] = {}
_TAILS: dict[tuple[str, str], str] = {}
_CACHE_MAX = 100_000


def _json_value(value: object) -> str | None:
    """``json.dumps`` of one :data:`TraceValue`, or ``None`` for anything else."""
    kind = type(value)
    if kind is int:
        return int.__repr__(value)
    if isinstance(value, str) and kind is str:
        return _encode_str(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if isinstance(value, tuple) and kind is tuple:
        items = []
        for item in value:
            encoded = _json_value(item)
            if encoded is None:
                return None
            items.append(encoded)
        return "[" + ",".join(items) + "]"
    return None


class TraceSink(Protocol):
    """Where cores send trace events; the shells choose the sink."""

    def emit(self, event: TraceEvent) -> None:
        """Record one event."""


class NullTraceSink:
    """Drops every event (production default when nobody listens)."""

    def emit(self, event: TraceEvent) -> None:
        """Drop ``event``."""


class ListTraceSink:
    """Keeps every event in order, with a bound so a runaway run cannot eat memory."""

    def __init__(self, events_max: int = 10_000_000) -> None:
        self.events: list[TraceEvent] = []
        self._events_max = events_max

    def emit(self, event: TraceEvent) -> None:
        """Append ``event``; raises OverflowError past the bound."""
        if len(self.events) >= self._events_max:
            raise OverflowError(f"trace longer than {self._events_max} events")
        self.events.append(event)

    def __iter__(self) -> Iterator[TraceEvent]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)
