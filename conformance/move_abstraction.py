"""The abstraction function from the replica-move core's trace to ``model.replica_move``.

Theory of operation
-------------------
The model is bounded (three dirs, at most two records per copy) so that Z3 can prove it; an
implementation run appends thousands of records. The abstraction is therefore *state-based*:
before each ``replica_move`` event it rebuilds the model state from what the implementation last
reported for that partition (the previous event's fields) and checks the event's model actions
from there; the invariants are checked after them, and the control state the model reaches
(machine state, ``dest_durable``, ``source_renamed``, ``dest_renamed``) must be the one the
implementation reports.

* **Dirs by role.** The served dir is model dir 0, the move's destination dir 1, any third dir
  (a redirect's new destination, a ``tp.delete`` still queued) dir 2; with more than three log
  dirs a queued ``tp.delete`` that finds no free model dir is left out of the abstraction.
* **Lengths by relation.** A copy's length is abstracted to 0 (empty), 1 (behind the source) or
  2 (as long as the source, or the source itself when non-empty). A chunk that copies many
  records is as many ``chunk_copied`` steps as the abstract length grows; appends to the source
  while the lock is free are absorbed (the source stays 2, the destination falls back to
  "behind"); an append while the mover holds the lock is the model's ``source_appended``, which
  the model does not allow then. A truncation (``SOURCE_TRUNCATED``, which cuts ``tp.move`` too) is
  as many ``source_truncated`` steps as it takes the abstract lengths to the reported relation:
  to an empty source, or to a copy that was behind and is now as long as the source; a cut that
  leaves the relation as it was is a stutter.
* **Durability.** Appends are durable in the model; the implementation's durability is checked
  end to end by the simulator (crash and compare), not here.

The model keeps one entry per dir; the implementation may create ``tp.move`` next to a queued
``tp.delete`` (a move back to a dir whose old copy is not deleted yet). The queued ``tp.delete``
is then left out of the abstraction for that request.

Events the model does not describe (``PLACEMENT_RECORDED``, ``REPLICA_CREATED``) are stutters,
and so is ``DIR_FAILED``: its trace fields do not say which dir failed (the end-to-end checks
cover dir failures; see the report on the fields the trace would need).

This module is a sans-IO core.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from conformance.trace_check import Abstraction, ExecutableModel, MemoizedModel, ModelAction
from impl.trace import TraceEvent, TraceValue

__sans_io__ = True

_LOCKED = ("SWAPPING",)
_STUTTERS = ("PLACEMENT_RECORDED", "REPLICA_CREATED", "DIR_FAILED")
#: Pending placement (a replica not hosted yet) is outside the model.
_UNMODELLED_STATES = ("PENDING_PLACEMENT",)
_SIMPLE = {
    "LOCK_ACQUIRED": "lock_acquired",
    "DEST_DURABLE": "dest_durable",
    "SOURCE_RENAMED": "source_renamed",
    "DEST_RENAMED": "dest_renamed",
    "LOG_SWAPPED": "log_swapped",
    "CANCEL_REQUESTED": "cancel_requested",
}


@dataclass(frozen=True, slots=True)
class _Reported:
    """What the implementation last reported for one partition."""

    state: str
    source_dir: str | None
    dest_dir: str | None
    source_leo: int
    dest_leo: int
    dest_durable: bool
    source_renamed: bool
    dest_renamed: bool
    #: a ``tp.delete`` queued on this dir (after a swap, until DELETE_COMPLETED or a crash)
    delete_dir: str | None

    def __init__(  # noqa: PLR0917 (the generated constructor's signature)
        self, state: str, source_dir: str | None, dest_dir: str | None, source_leo: int,
        dest_leo: int, dest_durable: bool, source_renamed: bool, dest_renamed: bool,
        delete_dir: str | None
    ) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "state", state)
        object.__setattr__(self, "source_dir", source_dir)
        object.__setattr__(self, "dest_dir", dest_dir)
        object.__setattr__(self, "source_leo", source_leo)
        object.__setattr__(self, "dest_leo", dest_leo)
        object.__setattr__(self, "dest_durable", dest_durable)
        object.__setattr__(self, "source_renamed", source_renamed)
        object.__setattr__(self, "dest_renamed", dest_renamed)
        object.__setattr__(self, "delete_dir", delete_dir)


def _text(value: TraceValue) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: TraceValue) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _reported(event: TraceEvent, delete_dir: str | None) -> _Reported:
    fields = event.fields
    return _Reported(
        state=event.state_after,
        source_dir=_text(fields.get("source_dir")),
        dest_dir=_text(fields.get("dest_dir")),
        source_leo=_number(fields.get("source_leo")),
        dest_leo=_number(fields.get("dest_leo")),
        dest_durable=fields.get("dest_durable") is True,
        source_renamed=fields.get("source_renamed") is True,
        dest_renamed=fields.get("dest_renamed") is True,
        delete_dir=delete_dir,
    )


def _length(copy_leo: int, source_leo: int) -> int:
    if copy_leo <= 0:
        return 0
    return 2 if copy_leo >= source_leo else 1


class MoveAbstraction:
    """Replays ``replica_move`` events in :mod:`model.replica_move` (see the module docstring).

    Args:
        model: the executable model (the shipped variant: the spec the implementation follows).
        model_module: the module defining it (for its enums and dirs).
        initial: the model's initial state (the template every abstract state is built from).
    """

    machine = "replica_move"

    def __init__(self, model: ExecutableModel, model_module: Any, initial: Any) -> None:
        self._model = model
        self._states = model_module.MoveState
        self._kinds = model_module.DirKind
        self._initial = initial
        self._last: dict[str, _Reported] = {}
        self._roles: dict[str, dict[str, int]] = {}

    @property
    def model(self) -> ExecutableModel:
        """The model events are replayed in."""
        return self._model

    def instance_key(self, event: TraceEvent) -> str:
        """One model instance per partition and broker (the event's subject)."""
        return event.subject

    def initial_state(self, event: TraceEvent) -> Any:
        """The model's initial state (rebuilt before every event anyway)."""
        return self._initial

    # --- the abstraction function ------------------------------------------------------------

    def _previous(self, event: TraceEvent) -> _Reported:
        last = self._last.get(event.subject)
        if last is not None and not (event.state_before == "NONE" and last.state != "NONE"):
            return last
        # First event, or the machine starts afresh: the replica was deleted (StopReplica, a
        # reassignment moving it away) and created again since, which the move trace does not
        # show; what the event reports is all there is.
        fields = event.fields
        return _Reported(
            state=event.state_before,
            source_dir=_text(fields.get("source_dir")),
            dest_dir=None,
            source_leo=_number(fields.get("source_leo")),
            dest_leo=0,
            dest_durable=False,
            source_renamed=False,
            dest_renamed=False,
            delete_dir=None,
        )

    def _role_map(self, previous: _Reported, event: TraceEvent) -> dict[str, int]:
        roles: dict[str, int] = {}
        source = previous.source_dir or _text(event.fields.get("source_dir"))
        if source is not None:
            roles[source] = 0
        destination = previous.dest_dir
        if event.event == "REQUESTED":
            destination = _text(event.fields.get("dest_dir"))
        if destination is not None and destination not in roles:
            roles[destination] = 1
        for candidate in (_text(event.fields.get("dest_dir")), previous.delete_dir):
            free = [index for index in (1, 2) if index not in roles.values()]
            if candidate is not None and candidate not in roles and free:
                roles[candidate] = free[0]
        return roles

    def pre_state(self, state: Any, event: TraceEvent) -> Any:
        """The model state abstracting what the implementation reported before ``event``."""
        previous = self._previous(event)
        if previous.state in _UNMODELLED_STATES:
            previous = replace(previous, state="NONE")
        roles = self._role_map(previous, event)
        self._roles[event.subject] = roles
        kinds = self._kinds
        source_leo = self._source_leo(previous, event)
        source_length = 2 if source_leo > 0 else 0
        entry = [kinds.ABSENT, kinds.ABSENT, kinds.ABSENT]
        log_end = [0, 0, 0]
        durable_end = [0, 0, 0]
        entry[0] = kinds.DELETE if previous.source_renamed else kinds.LIVE
        log_end[0] = durable_end[0] = source_length
        moving = previous.state in ("COPYING", "CAUGHT_UP", "SWAPPING")
        if moving and previous.dest_dir is not None:
            dest = roles[previous.dest_dir]
            entry[dest] = kinds.LIVE if previous.dest_renamed else kinds.MOVE
            log_end[dest] = _length(previous.dest_leo, source_leo)
            durable_end[dest] = log_end[dest] if previous.dest_durable else 0
        delete_pending = [False, False, False]
        targeted = event.event in ("REQUESTED", "REDIRECTED") and (
            _text(event.fields.get("dest_dir")) == previous.delete_dir
        )
        if previous.delete_dir is not None and previous.delete_dir in roles and not targeted:
            deleted = roles[previous.delete_dir]
            if entry[deleted] is kinds.ABSENT:
                entry[deleted] = kinds.DELETE
                log_end[deleted] = durable_end[deleted] = source_length
                delete_pending[deleted] = True
        key = (
            previous.state, roles.get(previous.dest_dir or "", 1), previous.dest_durable,
            previous.source_renamed, previous.dest_renamed, tuple(entry), tuple(log_end),
            tuple(durable_end), tuple(delete_pending), source_length,
        )
        built = _STATE_CACHE.get(key)
        if built is None:
            built = _STATE_CACHE[key] = self._build(key)
        return built

    def _build(self, key: tuple[Any, ...]) -> Any:
        """The model state of an abstract key (see :meth:`pre_state`)."""
        (state_name, dest_index, dest_durable, source_renamed, dest_renamed, entry, log_end,
         durable_end, delete_pending, source_length) = key
        initial = self._initial
        return initial.replace(
            running=True,
            move_state=self._states[state_name],
            source_dir=0,
            dest_dir=dest_index,
            lock_held=state_name in _LOCKED,
            dest_durable=dest_durable,
            source_renamed=source_renamed,
            dest_renamed=dest_renamed,
            partition_online=True,
            entry=_array(initial.entry, list(entry)),
            entry_durable=_array(initial.entry_durable, list(entry)),
            log_end=_array(initial.log_end, list(log_end)),
            log_durable_end=_array(initial.log_durable_end, list(durable_end)),
            delete_pending=_array(initial.delete_pending, list(delete_pending)),
            acked_end=source_length,
        )

    @staticmethod
    def _source_leo(previous: _Reported, event: TraceEvent) -> int:
        """The source LEO before ``event``: growth the event reveals is absorbed unless the
        mover held the lock throughout. LOCK_ACQUIRED reports no LEO, so growth first seen at
        FINAL_CATCH_UP may have happened before the lock was taken: absorbed too."""
        reported = _number(event.fields.get("source_leo"))
        if previous.state not in _LOCKED or event.event == "FINAL_CATCH_UP":
            return max(previous.source_leo, reported)
        return previous.source_leo

    def actions(self, state: Any, event: TraceEvent) -> Sequence[ModelAction]:
        """The model actions of ``event`` from the abstracted ``state``.

        Raises:
            ValueError: an event the vocabulary does not name.
        """
        name = event.event
        previous = self._previous(event)
        if _UNMODELLED_STATES[0] in (event.state_before, event.state_after):
            self._remember(event, previous)
            return ()
        roles = self._roles[event.subject]
        actions: list[ModelAction] = []
        reported_source = _number(event.fields.get("source_leo"))
        source_leo = self._source_leo(previous, event)
        if reported_source > source_leo:
            actions.append(ModelAction("source_appended"))
        if name == "REQUESTED":
            destination = _text(event.fields.get("dest_dir"))
            actions.append(ModelAction("requested", {"d": roles.get(destination or "", 1)}))
        elif name in ("CHUNK_COPIED", "CAUGHT_UP"):
            before = _length(previous.dest_leo, source_leo)
            after = _length(_number(event.fields.get("dest_leo")), source_leo)
            actions.extend(ModelAction("chunk_copied") for _ in range(max(0, after - before)))
            if name == "CAUGHT_UP":
                actions.append(ModelAction("caught_up"))
        elif name == "SOURCE_TRUNCATED":
            cuts = _cuts(_length(previous.dest_leo, source_leo), 2 if source_leo > 0 else 0,
                         _number(event.fields.get("dest_leo")), reported_source)
            actions.extend(ModelAction("source_truncated") for _ in range(cuts))
        elif name == "FINAL_CATCH_UP":
            if _length(previous.dest_leo, source_leo) < (2 if source_leo > 0 else 0):
                actions.append(ModelAction("final_catch_up"))
        elif name in _SIMPLE:
            actions.append(ModelAction(_SIMPLE[name]))
        elif name == "REDIRECTED":
            destination = _text(event.fields.get("dest_dir"))
            actions.append(ModelAction("redirected", {"d": roles.get(destination or "", 2)}))
        elif name == "DELETE_COMPLETED":
            if previous.delete_dir is not None and previous.delete_dir in roles:
                actions.append(
                    ModelAction("delete_completed", {"d": roles[previous.delete_dir]})
                )
        elif name == "CRASHED":
            actions.append(ModelAction("crashed", {"renames_kept": True}))
        elif name not in _STUTTERS:
            raise ValueError(f"replica_move has no event {name}")
        self._remember(event, previous)
        return actions

    def _remember(self, event: TraceEvent, previous: _Reported) -> None:
        delete_dir = previous.delete_dir
        if event.event == "LOG_SWAPPED":
            delete_dir = previous.source_dir
        elif event.event in ("DELETE_COMPLETED", "CRASHED"):
            delete_dir = None
        self._last[event.subject] = _reported(event, delete_dir)

    def mismatch(self, state: Any, event: TraceEvent) -> str | None:
        """Whether the model's control state after the event is the one reported."""
        if event.event in _STUTTERS or _UNMODELLED_STATES[0] in (
            event.state_before, event.state_after
        ):
            return None
        reported = self._last[event.subject]
        model_state = state.move_state.name
        if model_state != event.state_after:
            return f"the model is in {model_state}, the implementation in {event.state_after}"
        if event.event == "CRASHED":
            return None
        for flag in ("dest_durable", "source_renamed", "dest_renamed"):
            if bool(state[flag]) != getattr(reported, flag):
                return f"{flag}: model {state[flag]}, implementation {getattr(reported, flag)}"
        return None


def _cuts(dest_length: int, source_length: int, dest_leo: int, source_leo: int) -> int:
    """How many ``source_truncated`` steps take the abstract lengths (``dest_length`` of
    ``source_length``) to what a truncation reported (``dest_leo``, ``source_leo``)."""
    if source_leo <= 0:
        return source_length  # down to an empty source (and copy)
    if dest_leo >= source_leo and 0 < dest_length < source_length:
        return source_length - dest_length  # the copy was behind; the cut made them equal
    return 0


def _array(template: Any, values: list[Any]) -> Any:
    array = template
    for index, value in enumerate(values):
        array = array.set(index, value)
    return array


def move_abstractions(config: object) -> Sequence[Abstraction]:
    """The abstractions a simulated move run is checked with.

    Args:
        config: the run's config (every variant is checked against the shipped model: the spec).

    Returns:
        The ``replica_move`` abstraction (and ``log_cleaner``'s when the run has compacted
        partitions); none when the model package lacks the move model.
    """
    shared = _shared_model()
    if shared is None:
        return ()
    model, model_module, initial = shared
    abstraction: Abstraction = MoveAbstraction(model, model_module, initial)
    if getattr(config, "compacted", 0):
        # the log cleaner runs on the compacted partitions: its events replay in its model
        from conformance.cleaner_abstraction import CleanerAbstraction  # noqa: PLC0415

        return (abstraction, CleanerAbstraction())
    return (abstraction,)


_SHARED: list[tuple[MemoizedModel, Any, Any]] = []
#: abstract key -> model state (a pure function's cache, shared by every run of the process)
_STATE_CACHE: dict[tuple[Any, ...], Any] = {}


def _shared_model() -> tuple[MemoizedModel, Any, Any] | None:
    """The shipped move model, built once per process and memoized (a pure function's cache:
    no run can observe another through it)."""
    if not _SHARED:
        try:
            from model import replica_move as model_module  # noqa: PLC0415 (optional layer)
        except ImportError:
            return None
        model = model_module.MODELS[0].model()
        _SHARED.append((MemoizedModel(model), model_module, model.initial_states()[0]))
    return _SHARED[0]
