"""The abstraction function from the log cleaner's trace to ``model.log_cleaner``.

Theory of operation
-------------------
The model's log has three offsets; an implementation's log has thousands. The abstraction is
state-based, like the move abstraction: before each ``log_cleaner`` event it rebuilds a model
state from what the event reports, in which the implementation's log is three representative
records by role: offset 0 an old record of key 0 in the clean part, offset 1 a later record of
key 0 in the dirty part (so a cleaning must remove offset 0 and keep offset 1), offset 2 a record
of key 1 in the active segment. The cleaner point is model offset 1 and the active segment's base
model offset 2.

What is checked, per event:

* the event is an enabled model action from the machine state the implementation reports before
  it (``state_before``), and the model reaches the state it reports after it (``state_after``);
* the model's invariants (COMPACTION_KEEPS_LATEST, COMPACTION_OFFSETS_STABLE) hold after it;
* the fields agree with the model's guards: a cleaning's range starts at or past its log start
  and ends at or before the active segment's base (``first_uncleanable <= active_base``: the active
  segment is never cleaned), and a finished cleaning's point lies in ``(first_dirty,
  first_uncleanable]``. A range reaching into the active segment is abstracted to a map end past
  the model's active base, which the model then refuses (COMPACTION_OFFSETS_STABLE).

Events the model's control part does not describe are stutters: a pause of an idle or paused
partition, a resume that leaves it paused (pauses are counted). A failed cleaning
(``CLEANING_FAILED``) installs nothing: it is the model's abort of a stale snapshot.

This module is a sans-IO core.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conformance.trace_check import ExecutableModel, MemoizedModel, ModelAction
from impl.trace import TraceEvent

__sans_io__ = True

_ACTIONS = {
    "CLEANING_STARTED": ("cleaning_started",),
    "SEGMENTS_REPLACED": ("segments_replaced",),
    "CLEANING_ABORTED": ("cleaning_aborted",),
    "CLEANING_FAILED": ("cleaning_aborted", "cleaning_paused", "cleaning_resumed"),
}


def _int(event: TraceEvent, name: str) -> int:
    value = event.fields.get(name)
    if not isinstance(value, int):
        raise ValueError(f"{event.event} without an integer field {name!r}")
    return value


class CleanerAbstraction:
    """Maps ``log_cleaner`` trace events onto ``model.log_cleaner`` (shipped variant)."""

    def __init__(self, variant: str | None = None) -> None:
        from model.log_cleaner import MODELS  # noqa: PLC0415 (the model is loaded on demand)

        self._model = MemoizedModel(MODELS[0].model(variant))
        self._definition = MODELS[0]

    @property
    def machine(self) -> str:
        """The trace machine name."""
        return "log_cleaner"

    @property
    def model(self) -> ExecutableModel:
        """The executable model."""
        return self._model

    def instance_key(self, event: TraceEvent) -> str:
        """One model instance per partition."""
        return event.subject

    def _state(self, machine_state: str, *, stale: bool, map_end: int) -> Any:
        from model.log_cleaner import CleanerState  # noqa: PLC0415

        model = self._definition.model()
        (initial,) = model.initial_states()
        cleaning = machine_state == "CLEANING"
        return initial.replace(
            leo=3, key=model_array(initial, "key", {0: 0, 1: 0, 2: 1}),
            present=model_array(initial, "present", {0: True, 1: True, 2: True}),
            active_base=2, point=1, state=CleanerState[machine_state],
            stale=stale and cleaning, map_end=map_end if cleaning else 0,
            map_latest=model_array(initial, "map_latest",
                                   {0: 1 if cleaning and map_end >= 2 else -1, 1: -1}),
        )

    def initial_state(self, event: TraceEvent) -> Any:
        """An idle partition."""
        return self._state("IDLE", stale=False, map_end=0)

    def pre_state(self, state: Any, event: TraceEvent) -> Any:
        """The model state rebuilt from the event's ``state_before`` and fields."""
        stale = event.event in ("CLEANING_ABORTED", "CLEANING_FAILED")
        map_end = 2
        if event.event == "CLEANING_STARTED":
            return self._state(event.state_before, stale=False, map_end=0)
        if event.event == "SEGMENTS_REPLACED":
            point = _int(event, "cleaner_point")
            first_dirty = _int(event, "first_dirty")
            first_uncleanable = _int(event, "first_uncleanable")
            if not first_dirty < point <= first_uncleanable:
                map_end = 3  # past the range the cleaning was allowed: refused by the model
        return self._state(event.state_before, stale=stale, map_end=map_end)

    def actions(self, state: Any, event: TraceEvent) -> Sequence[ModelAction]:
        """The model actions of one event (empty: a stutter)."""
        if event.event == "CLEANING_STARTED":
            if _int(event, "first_uncleanable") > _int(event, "active_base"):
                raise ValueError(
                    f"cleaning range ends at {_int(event, 'first_uncleanable')}, inside the "
                    f"active segment (base {_int(event, 'active_base')})"
                )
            if _int(event, "first_dirty") > _int(event, "first_uncleanable"):
                raise ValueError("cleaning range starts after it ends")
        if event.event == "CLEANING_PAUSED":
            return (ModelAction("cleaning_paused"),) if event.state_before == "ABORTED" else ()
        if event.event == "CLEANING_RESUMED":
            return (ModelAction("cleaning_resumed"),) if event.state_after == "IDLE" else ()
        names = _ACTIONS.get(event.event)
        if names is None:
            raise ValueError(f"unknown log_cleaner event {event.event}")
        if event.event == "CLEANING_FAILED" and event.state_before == "ABORTED":
            names = ("cleaning_paused",)
        return tuple(ModelAction(name) for name in names)

    def mismatch(self, state: Any, event: TraceEvent) -> str | None:
        """The model's machine state must be the implementation's."""
        reached = state.state.name
        if reached != event.state_after:
            return f"the model is {reached} after {event.event}, the implementation " \
                   f"{event.state_after}"
        return None


def model_array(state: Any, name: str, values: dict[Any, Any]) -> Any:
    """``state``'s array ``name`` with ``values`` stored."""
    array = state[name]
    for key, value in values.items():
        array = array.set(key, value)
    return array
