"""The abstraction function from the group coordinator's trace to ``model.group_coordinator``.

Theory of operation
-------------------
The model has one group of two members over two partitions, coordinated through one offsets
partition that two brokers replicate, with generations up to 3 and offsets up to 2; a simulated
cluster has several brokers hosting coordinators, several groups and offsets partitions, and
long runs. The abstraction is *state-based*, with one model instance per cluster: it keeps a
**mirror** of what the events reported and, before each event, builds the model state that
holds only what the event is about:

* **Brokers by role.** The broker that emitted the event (every event carries ``broker``) is
  model broker 0, and its load state of the group's offsets partition is the one its own
  ``COORDINATOR_ELECTED`` / ``LOAD_COMPLETED`` / ``COORDINATOR_RESIGNED`` events left in the
  mirror; model broker 1 stands for the other replicas.
* **Members by role.** The member an event is about is model member 0.
* **Generations by rank.** A commit's generation is renumbered against the group's generation
  when it was accepted: equal (1 and 1), older (0 against 1) or newer (2 against 1).
* **Offsets by comparison.** The mirror holds, per group and partition, the last acknowledged
  commit (``OFFSET_COMMITTED``). An ``OFFSET_FETCHED`` answer older than it (or missing) is a
  cache behind the acknowledged commit (model ``cache_offset`` 0 against ``acked`` 1).

Events and their model actions
------------------------------
* ``COORDINATOR_ELECTED`` (subject ``__consumer_offsets-<p>@<b>``): ``coordinator_elected(0)``;
  ``LOAD_COMPLETED``: ``load_completed(0)``, enabled only if the broker was loading;
  ``COORDINATOR_RESIGNED``: a stutter that unloads the broker in the mirror (the model resigns
  the old leader inside the new leader's election).
* ``MEMBER_JOINED``: ``member_joined(0)`` (a static member's replacement in the same
  generation is a stutter); ``JOIN_COMPLETED``: ``join_completed``; ``SYNC_COMPLETED``:
  ``sync_completed(0, 0)``; ``ASSIGNMENT_RECEIVED``: ``assignment_received(0)``;
  ``MEMBER_LEFT`` and ``SESSION_EXPIRED``: ``member_left(0)`` / ``session_expired(0)``; each in
  the group state the event reports, served by broker 0 as loaded as the mirror says.
* ``OFFSET_COMMITTED``: ``offset_committed(0, 0, 0)`` with the member's generation ranked
  against the group's at acceptance, in the group state then (a commit without a member, the
  admin form, is a stutter that still updates the mirror).
* ``OFFSET_FETCHED``: ``offset_fetched(0, 0)``; a stutter when the broker is a deposed
  coordinator that has not heard of it (loaded, and another broker's ``COORDINATOR_ELECTED`` of
  the partition carries a later ``leader_epoch`` than its own): its session expired and the
  controller sends it nothing until it registers again, and it serves its cache as Kafka's
  does (the cluster simulator does not judge that answer either).
* ``GROUP_DELETED`` and ``OFFSETS_EXPIRED`` forget the group's acknowledged commits.

The model's safety invariants (GROUP_ASSIGNMENT_EXCLUSIVE, GROUP_COMMIT_FENCED,
OFFSETS_DURABLE, COORDINATOR_LOADED) are checked after every event; its lemmas are proof aids
and are not. What one coordinator's events cannot show (which partitions members own, offsets
surviving a failover) the cluster simulator checks end to end under the same names.

This module is a sans-IO core.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from impl.broker import group_records
from impl.trace import TraceEvent, TraceValue

from .controller_abstraction import _SafetyOnly
from .trace_check import Abstraction, ExecutableModel, MemoizedModel, ModelAction

__sans_io__ = True

MACHINE = "group_coordinator"
OFFSETS_PREFIX = "__consumer_offsets-"


def _int(fields: Mapping[str, TraceValue], name: str) -> int | None:
    value = fields.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class _Plan:
    actions: tuple[ModelAction, ...] = ()
    state: Any = None
    commit: Callable[[], None] | None = None


class GroupAbstraction:
    """Maps ``group_coordinator`` trace events onto ``model.group_coordinator``.

    Args:
        model: the executable model (memoized, safety invariants only).
        initial: the model's initial state (a template: every state is rebuilt per event).
        offsets_partitions: the partitions of ``__consumer_offsets`` (a group's partition).
    """

    def __init__(self, model: ExecutableModel, initial: Any, offsets_partitions: int) -> None:
        self._model = model
        self._initial = initial
        self._partitions = offsets_partitions
        module = _model_module()
        self._G = module.GroupState
        self._C = module.CoordinatorState
        #: (offsets partition, broker) -> its load state, as its own events reported
        self._loaded: dict[tuple[int, int], Any] = {}
        #: (offsets partition, broker) -> the leader epoch of its last COORDINATOR_ELECTED, and
        #: offsets partition -> the highest of any broker
        self._load_epochs: dict[tuple[int, int], int] = {}
        self._elected_epochs: dict[int, int] = {}
        #: (group, topic, partition) -> the last acknowledged commit
        self._acked: dict[tuple[str, str, int], int] = {}
        self._plan: _Plan | None = None
        #: events checked as stutters, by reason
        self.stutters: Counter[str] = Counter()

    @property
    def machine(self) -> str:
        """``"group_coordinator"``."""
        return MACHINE

    @property
    def model(self) -> ExecutableModel:
        """The model events are replayed in."""
        return self._model

    def instance_key(self, event: TraceEvent) -> str:
        """One model instance per cluster."""
        return "cluster"

    def initial_state(self, event: TraceEvent) -> Any:
        """The model's initial state (rebuilt before every event anyway)."""
        return self._initial

    def pre_state(self, state: Any, event: TraceEvent) -> Any:
        """The model state abstracting the mirror before ``event`` (plans the event too)."""
        plan = self._plan = self._planned(event)
        return plan.state if plan.state is not None else state

    def actions(self, state: Any, event: TraceEvent) -> Sequence[ModelAction]:
        """The model actions planned for ``event``."""
        assert self._plan is not None
        return self._plan.actions

    def mismatch(self, state: Any, event: TraceEvent) -> str | None:
        """The mirror takes the event (the model's verdict was the check)."""
        plan, self._plan = self._plan, None
        assert plan is not None
        if plan.commit is not None:
            plan.commit()
        return None

    # --- planning -----------------------------------------------------------------------------

    def _stutter(self, reason: str, commit: Callable[[], None] | None = None) -> _Plan:
        self.stutters[reason] += 1
        return _Plan(commit=commit)

    def _planned(self, event: TraceEvent) -> _Plan:
        fields = event.fields
        name = event.event
        subject = event.subject
        if subject.startswith(OFFSETS_PREFIX):
            partition_text, _, broker_text = subject[len(OFFSETS_PREFIX):].partition("@")
            return self._partition_event(name, int(partition_text), int(broker_text), fields)
        broker = _int(fields, "broker")
        if broker is None:
            raise ValueError(f"group event {name} of {subject} has no broker")
        group = subject
        loaded = self._loaded.get(
            (group_records.partition_for(group, self._partitions), broker), self._C.UNLOADED)
        before = self._group_state(event.state_before)
        if name == "MEMBER_JOINED":
            if "replaced" in fields:
                return self._stutter("static member replaced in its generation")
            return self._act(self._state(loaded, before), "member_joined", n=0)
        if name == "JOIN_COMPLETED":
            members = _int(fields, "members") or 0
            state = self._state(loaded, before, member=members > 0, joined=members > 0)
            return self._act(state, "join_completed")
        if name == "SYNC_COMPLETED":
            return self._act(self._state(loaded, before, member=True, generation=1),
                             "sync_completed", a0=0, a1=0)
        if name == "ASSIGNMENT_RECEIVED":
            return self._act(self._state(loaded, before, member=True, generation=1,
                                         assigned=True), "assignment_received", n=0)
        if name in ("MEMBER_LEFT", "SESSION_EXPIRED"):
            return self._act(self._state(loaded, before, member=True), name.lower(), n=0)
        if name == "OFFSET_COMMITTED":
            return self._committed(group, loaded, fields)
        if name == "OFFSET_FETCHED":
            partition = group_records.partition_for(group, self._partitions)
            own = self._load_epochs.get((partition, broker))
            if loaded == self._C.LOADED and own is not None and own < self._elected_epochs.get(
                    partition, -1):
                # Deposed (another broker was elected coordinator in a later leader epoch)
                # and not told yet (its session expired: the controller sends it nothing until
                # it registers again): it serves its cache, as Kafka's does.
                return self._stutter("OffsetFetch answered by a deposed coordinator")
            return self._fetched(group, loaded, fields)
        if name in ("GROUP_DELETED", "OFFSETS_EXPIRED"):
            def forget() -> None:
                for key in [k for k in self._acked if k[0] == group]:
                    del self._acked[key]
            return self._stutter(name, forget)
        raise ValueError(f"unknown group coordinator event {name}")

    def _partition_event(self, name: str, partition: int, broker: int,
                         fields: Mapping[str, TraceValue]) -> _Plan:
        key = (partition, broker)
        states = self._C
        if name == "COORDINATOR_ELECTED":
            state = self._initial.replace(
                leader=1, coordinator=self._pair(self._initial.coordinator, states.UNLOADED,
                                                 states.LOADED))

            epoch = _int(fields, "leader_epoch")

            def loading() -> None:
                self._loaded[key] = states.LOADING
                if epoch is not None:
                    self._load_epochs[key] = epoch
                    self._elected_epochs[partition] = max(
                        epoch, self._elected_epochs.get(partition, -1))
            return _Plan((ModelAction("coordinator_elected", {"b": 0}),), state, loading)
        if name == "LOAD_COMPLETED":
            state = self._initial.replace(
                leader=0, state=self._G.DEAD,
                coordinator=self._pair(self._initial.coordinator,
                                       self._loaded.get(key, states.UNLOADED), states.UNLOADED))

            def loaded() -> None:
                self._loaded[key] = states.LOADED
            return _Plan((ModelAction("load_completed", {"b": 0}),), state, loaded)
        if name == "COORDINATOR_RESIGNED":
            def unloaded() -> None:
                self._loaded[key] = states.UNLOADED
            return self._stutter("resigned (in the model, part of the next election)", unloaded)
        raise ValueError(f"unknown group coordinator event {name}")

    def _committed(self, group: str, loaded: Any, fields: Mapping[str, TraceValue]) -> _Plan:
        offsets = _offsets(fields)

        def record() -> None:
            for topic, partition, offset in offsets:
                self._acked[(group, topic, partition)] = offset
        member = fields.get("member")
        generation = _int(fields, "generation")
        at_acceptance = _int(fields, "group_generation")
        if not member and (generation is None or generation < 0):
            return self._stutter("a commit without a member (the admin form)", record)
        if generation is None or at_acceptance is None:
            raise ValueError("OFFSET_COMMITTED without generation and group_generation")
        rank = 1 if generation == at_acceptance else 0 if generation < at_acceptance else 2
        accepted_in = fields.get("accepted_in")
        state = self._state(loaded, self._group_state(
            accepted_in if isinstance(accepted_in, str) else "STABLE"), member=True,
            generation=1, member_generation=rank)
        return _Plan((ModelAction("offset_committed", {"b": 0, "n": 0, "p": 0}),), state,
                     record)

    def _fetched(self, group: str, loaded: Any, fields: Mapping[str, TraceValue]) -> _Plan:
        answered = {(topic, partition): offset for topic, partition, offset in _offsets(fields)}
        acked = [(key[1:], value) for key, value in self._acked.items() if key[0] == group]
        behind = any(answered.get(slot, -1) < value for slot, value in acked)
        initial = self._initial
        held = 1 if acked else 0
        state = self._state(loaded, self._G.STABLE).replace(
            acked=initial.acked.set(0, held),
            log_offset=initial.log_offset.set((0, 0), held).set((1, 0), held),
            cache_offset=initial.cache_offset.set((0, 0), 0 if behind else held))
        return _Plan((ModelAction("offset_fetched", {"b": 0, "p": 0}),), state)

    # --- building model states ----------------------------------------------------------------

    def _group_state(self, name: str) -> Any:
        try:
            return self._G[name]
        except KeyError:
            raise ValueError(f"unknown group state {name}") from None

    @staticmethod
    def _pair(template: Any, first: Any, second: Any) -> Any:
        return template.set(0, first).set(1, second)

    def _state(self, loaded: Any, group_state: Any, *, member: bool = False,
               joined: bool = False, generation: int = 1, member_generation: int | None = None,
               assigned: bool = False) -> Any:
        """Broker 0 leads with load state ``loaded``; the group in ``group_state`` at
        ``generation``; member 0 as given; everything persisted is of that generation."""
        initial = self._initial
        mine = generation if member_generation is None else member_generation
        state = initial.replace(
            leader=0,
            coordinator=self._pair(initial.coordinator, loaded, self._C.UNLOADED),
            state=group_state, generation=generation,
            member=initial.member.set(0, member),
            joined=initial.joined.set(0, joined),
            member_generation=initial.member_generation.set(0, mine),
            assigned_generation=generation if assigned else max(0, generation - 1),
            log_generation=self._pair(initial.log_generation,
                                      generation if assigned else max(0, generation - 1),
                                      generation if assigned else max(0, generation - 1)),
        )
        if assigned:
            state = state.replace(log_member=initial.log_member.set((0, 0), True)
                                  .set((1, 0), True))
        return state

    def _act(self, state: Any, action: str, **params: int) -> _Plan:
        return _Plan((ModelAction(action, params),), state)


def _offsets(fields: Mapping[str, TraceValue]) -> list[tuple[str, int, int]]:
    found: list[tuple[str, int, int]] = []
    raw = fields.get("offsets")
    if isinstance(raw, (tuple, list)):
        for item in raw:
            if isinstance(item, (tuple, list)) and len(item) == 3:
                topic, partition, offset = item
                if isinstance(topic, str) and isinstance(partition, int) and \
                        isinstance(offset, int):
                    found.append((topic, partition, offset))
    return found


def _model_module() -> Any:
    from model import group_coordinator as module  # noqa: PLC0415 (optional layer)
    return module


_SHARED: dict[str, tuple[MemoizedModel, Any]] = {}


def shared_model(variant: str = "shipped") -> tuple[MemoizedModel, Any]:
    """The group coordinator model of ``variant`` (memoized, safety invariants only) and its
    initial state, built once per process (a pure function's cache)."""
    if variant not in _SHARED:
        definition = _model_module().MODELS[0]
        chosen = next(v for v in definition.variants if v.name == variant)
        model = definition.build(chosen)
        _SHARED[variant] = (MemoizedModel(_SafetyOnly(model)), model.initial_states()[0])
    return _SHARED[variant]


def abstractions(offsets_partitions: int, variant: str = "shipped") -> list[Abstraction]:
    """The abstraction a simulated cluster run checks ``group_coordinator`` events with."""
    model, initial = shared_model(variant)
    return [GroupAbstraction(model, initial, offsets_partitions)]
