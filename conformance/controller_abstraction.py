"""The abstraction function from the controller trace to ``model.controller``.

Theory of operation
-------------------
The model has two controller candidates, three brokers, one partition and epochs up to 3; a
simulated cluster has several candidates, many partitions and dozens of elections. The
abstraction is *state-based*, with one model instance per cluster: it keeps a **mirror** of what
the events reported (each candidate's session, whether it acts as controller and the controller
epoch it holds; ZooKeeper's ``/controller`` owner and controller epoch; per partition the last
leader, leader epoch and zkVersion written) and before each event builds a model state that
holds only what the event is about:

* **Candidates by role.** The candidate the event is about is model candidate 0; model
  candidate 1 is ZooKeeper's ``/controller`` owner when that is another broker, else another
  candidate still acting as controller (a zombie), else the first other candidate seen.
* **Controller epochs by rank.** ZooKeeper's epoch and the two candidates' epochs are renumbered
  0..3 in order (an election keeps one rank free for the epoch it writes); ``/controller_epoch``'s
  version is its epoch, as ``EPOCH_VERSION_TRACKS`` states.
* **One partition at a time.** A partition-state write builds the partition from that
  partition's mirror: its previous leader is model broker 0 (leading in the previous epoch), the
  new leader model broker 1 (or 0 when it is the same broker; no leader, -1, is model broker 2),
  and the previous epoch, the new epoch and the one before it are renumbered in order, so a new
  epoch equal to the previous one gives two leaders in one epoch (``LEADER_UNIQUE``) and a lower
  one an epoch written lower (``EPOCHS_MONOTONIC``). The write checks the cached zkVersion in
  the model as in the implementation; the trace shows only writes that landed, so the cache is
  current.

The model's safety invariants (``CONTROLLER_FENCED``, ``EPOCHS_MONOTONIC``, ``LEADER_UNIQUE``) are
checked after every event; its lemmas are proof aids over model-only bookkeeping and are not.

Events and the fields they must carry
-------------------------------------
* Subject ``controller``: ``CONTROLLER_ELECTED`` (``epoch``, ``broker``): ``controller_elected``,
  preceded by ``session_expired`` of the previous ``/controller`` owner that never resigned (its
  ephemeral node had to vanish), by ``controller_resigned`` if the winner still acted as
  controller and by ``broker_started`` if its session was known to be gone. The epoch must be
  above every epoch ZooKeeper held; the active controller's own epoch again, while no later
  epoch exists, is the re-read of a revalidation after a connection loss, a stutter.
  ``SESSION_EXPIRED`` (``broker``): ``session_expired`` (unless
  already known) then ``controller_resigned``. ``CONTROLLER_RESIGNED`` (``broker``):
  ``controller_resigned``, after ``session_expired`` if ``/controller`` was still its own.
  ``ZK_WRITE_FENCED`` (``broker``): ``zk_write_fenced``, enabled only when a later controller
  epoch exists; when the trace has not shown one yet, ZooKeeper is taken to hold the next epoch
  with no owner the trace knows (only an election moves ``/controller_epoch``, and its winner
  may not have heard its reply yet: ``connection_loss``; counted in
  :attr:`ControllerAbstraction.fenced_before_winner`).
* Subject ``broker-<id>``: ``BROKER_FAILED`` is ``session_expired`` of a candidate whose session
  was live, ``BROKER_STARTED`` is ``broker_started`` of a candidate whose session was gone and
  that no longer acts as controller; other brokers' are stutters.
* Subject ``<topic>-<partition>`` with ``leader``, ``leader_epoch``, ``zk_version``,
  ``controller`` and ``controller_epoch`` (a partition-state write that landed: LEADER_ELECTED,
  ISR_CHANGED, BROKER_FAILED, ...): ``leader_elected(c, b)``. A write by a controller that does
  not hold ZooKeeper's controller epoch is not enabled (KAFKA-6082's zombie).
* Other events (topic creation and deletion, reassignment steps, an ISR change the controller
  only read, log-dir failures, a write without ``controller``) are stutters; :attr:`stutters`
  counts them by reason.

This module is a sans-IO core.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from conformance.trace_check import Abstraction, ExecutableModel, MemoizedModel, ModelAction
from impl.trace import TraceEvent, TraceValue

__sans_io__ = True

MACHINE = "controller"
_MAX_EPOCH = 3
_NONE = -1


@dataclass(slots=True)
class _Candidate:
    active: bool = False
    epoch: int = 0
    session: bool = True


@dataclass(slots=True)
class _Written:
    leader: int
    leader_epoch: int


@dataclass(slots=True)
class _Plan:
    actions: tuple[ModelAction, ...] = ()
    #: broker ids of model candidates 0 and 1
    pair: tuple[int, int | None] = (0, None)
    #: this event's candidate views: broker -> (active, epoch, session)
    views: dict[int, tuple[bool, int, bool]] = field(default_factory=dict)
    zk: tuple[int | None, int] | None = None
    election: bool = False
    partition: tuple[Any, ...] | None = None
    commit: Any = None
    problem: str | None = None


def _int(fields: Mapping[str, TraceValue], name: str) -> int | None:
    value = fields.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class ControllerAbstraction:
    """Maps ``controller`` trace events onto ``model.controller``, one instance per cluster.

    Args:
        model: the executable model (memoized).
        initial: the model's initial state (a template: every state is rebuilt per event).
    """

    def __init__(self, model: ExecutableModel, initial: Any) -> None:
        self._model = model
        self._initial = initial
        self._candidates: dict[int, _Candidate] = {}
        self._zk_controller: int | None = None
        self._zk_epoch = 0
        self._written: dict[str, _Written] = {}
        self._plan: _Plan | None = None
        #: events checked as stutters, by reason
        self.stutters: Counter[str] = Counter()
        #: fenced writes checked before the trace showed the term that fenced them
        self.fenced_before_winner = 0

    @property
    def machine(self) -> str:
        """``"controller"``."""
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
        return self._build(plan)

    def actions(self, state: Any, event: TraceEvent) -> Sequence[ModelAction]:
        """The model actions planned for ``event``."""
        assert self._plan is not None
        return self._plan.actions

    def mismatch(self, state: Any, event: TraceEvent) -> str | None:
        """Whether the event agrees with the mirror; then the mirror takes the event."""
        plan, self._plan = self._plan, None
        assert plan is not None
        if plan.problem is not None:
            return plan.problem
        if plan.commit is not None:
            plan.commit()
        return None

    # --- planning -----------------------------------------------------------------------------

    def _candidate(self, broker: int) -> _Candidate:
        return self._candidates.setdefault(broker, _Candidate())

    def _other(self, broker: int) -> int | None:
        owner = self._zk_controller
        if owner is not None and owner != broker:
            return owner
        acting = [(c.epoch, b) for b, c in self._candidates.items() if c.active and b != broker]
        if acting:
            return max(acting)[1]
        others = [b for b in self._candidates if b != broker]
        return others[0] if others else None

    def _stutter(self, reason: str, commit: Any = None) -> _Plan:
        self.stutters[reason] += 1
        return _Plan(commit=commit)

    def _planned(self, event: TraceEvent) -> _Plan:
        fields = event.fields
        subject = event.subject
        name = event.event
        if subject == "controller":
            broker = _int(fields, "broker")
            if broker is None:
                raise ValueError(f"controller event {name} has no broker")
            self._candidate(broker)
            planner = _CONTROLLER_EVENTS.get(name)
            if planner is None:
                raise ValueError(f"controller has no controller event {name}")
            return planner(self, broker, fields)
        if subject.startswith("broker-"):
            broker = _int(fields, "broker")
            if broker is None:
                return self._stutter(f"{name} without broker")
            if name == "BROKER_FAILED":
                return self._broker_failed(broker)
            if name == "BROKER_STARTED":
                return self._broker_started(broker)
            raise ValueError(f"controller has no broker event {name}")
        if "leader_epoch" in fields and "@" not in subject:
            return self._partition_write(subject, fields)
        return self._stutter(f"{name} (no partition-state write)")

    def _elected(self, c: int, fields: Mapping[str, TraceValue]) -> _Plan:
        epoch = _int(fields, "epoch")
        if epoch is None:
            return self._stutter("CONTROLLER_ELECTED without epoch")
        me = self._candidate(c)
        owner = self._zk_controller
        if me.active and epoch == me.epoch == self._zk_epoch:
            # the same term re-read after a reconnection (revalidated: ``/controller`` still its
            # session's, the epoch znode still at its version); no election happened (its
            # broker's registration may have expired meanwhile: a session of its own here)
            return self._stutter("CONTROLLER_ELECTED again in its own term (revalidated)")
        other = self._other(c)
        actions: list[ModelAction] = []
        views = self._views(c, other)
        zk_owner: int | None = owner
        if owner is not None and owner != c and other == owner:
            if self._candidates[owner].session:
                actions.append(ModelAction("session_expired", {"c": 1}))
            else:
                zk_owner = None
        elif owner == c:
            zk_owner = None
        if me.active:
            actions.append(ModelAction("controller_resigned", {"c": 0}))
        if not me.session:
            actions.append(ModelAction("broker_started", {"c": 0}))
        actions.append(ModelAction("controller_elected", {"c": 0}))
        plan = _Plan(actions=tuple(actions), pair=(c, other), views=views,
                     zk=(zk_owner, epoch - 1), election=True)
        if epoch <= self._zk_epoch:
            plan.problem = (f"controller {c} elected in epoch {epoch}, not above ZooKeeper's "
                            f"epoch {self._zk_epoch}")

        def commit() -> None:
            if owner is not None and owner != c:
                self._candidates[owner].session = False
            me.active, me.epoch, me.session = True, epoch, True
            self._zk_controller, self._zk_epoch = c, epoch

        plan.commit = commit
        return plan

    def _session_expired(self, c: int, fields: Mapping[str, TraceValue]) -> _Plan:
        me = self._candidates[c]
        actions = []
        if me.session:
            actions.append(ModelAction("session_expired", {"c": 0}))
        actions.append(ModelAction("controller_resigned", {"c": 0}))
        other = self._other(c)

        def commit() -> None:
            me.active, me.session = False, False
            if self._zk_controller == c:
                self._zk_controller = None

        return _Plan(actions=tuple(actions), pair=(c, other), views=self._views(c, other),
                     commit=commit)

    def _resigned(self, c: int, fields: Mapping[str, TraceValue]) -> _Plan:
        me = self._candidates[c]
        actions = []
        owned = self._zk_controller == c
        if owned:
            actions.append(ModelAction("session_expired", {"c": 0}))
        actions.append(ModelAction("controller_resigned", {"c": 0}))
        other = self._other(c)

        def commit() -> None:
            me.active = False
            if owned:
                me.session = False
                self._zk_controller = None

        return _Plan(actions=tuple(actions), pair=(c, other), views=self._views(c, other),
                     commit=commit)

    def _fenced(self, c: int, fields: Mapping[str, TraceValue]) -> _Plan:
        me = self._candidates[c]
        other = self._other(c)

        def commit() -> None:
            me.active = False

        plan = _Plan(actions=(ModelAction("zk_write_fenced", {"c": 0}),), pair=(c, other),
                     views=self._views(c, other), commit=commit)
        if self._zk_epoch <= me.epoch:
            # No later term in the trace yet, but ZooKeeper refused the epoch check: only an
            # election moves /controller_epoch, so a later term was won whose winner has not
            # heard of it (its election's reply lost with its connection; it takes the term
            # when it reads /controller again). Checked against ZooKeeper holding that term.
            self.fenced_before_winner += 1
            plan.zk = (None, me.epoch + 1)
        return plan

    def _broker_failed(self, broker: int) -> _Plan:
        me = self._candidates.get(broker)
        if me is None or not me.session:
            return self._stutter("BROKER_FAILED of a broker not known as a live candidate")
        other = self._other(broker)

        def commit() -> None:
            me.session = False
            if self._zk_controller == broker:
                self._zk_controller = None

        return _Plan(actions=(ModelAction("session_expired", {"c": 0}),), pair=(broker, other),
                     views=self._views(broker, other), commit=commit)

    def _broker_started(self, broker: int) -> _Plan:
        me = self._candidates.get(broker)
        if me is None or me.session or me.active:
            def reopened() -> None:
                if me is not None and not me.active:
                    me.session = True
            return self._stutter("BROKER_STARTED of a broker not known as a stopped candidate",
                                 reopened)
        other = self._other(broker)

        def commit() -> None:
            me.session = True

        return _Plan(actions=(ModelAction("broker_started", {"c": 0}),), pair=(broker, other),
                     views=self._views(broker, other), commit=commit)

    def _partition_write(self, subject: str, fields: Mapping[str, TraceValue]) -> _Plan:
        writer, leader = _int(fields, "controller"), _int(fields, "leader")
        epoch = _int(fields, "leader_epoch")
        if writer is None or leader is None or epoch is None:
            return self._stutter("partition-state write without controller, leader or epoch")
        me = self._candidate(writer)
        writer_epoch = _int(fields, "controller_epoch")
        other = self._other(writer)
        views = self._views(writer, other)
        if writer_epoch is not None:
            views[writer] = (me.active, writer_epoch, me.session)
        previous = self._written.get(subject)
        new_index = 2 if leader < 0 else (0 if previous and previous.leader == leader else 1)
        values = sorted({epoch - 1, epoch} | ({previous.leader_epoch} if previous else set()))
        rank = {value: index for index, value in enumerate(values)}
        partition = (
            0 if previous is not None and previous.leader >= 0 else _NONE,
            rank[previous.leader_epoch] if previous is not None else 0,
            previous is not None and previous.leader >= 0,
            rank[epoch - 1],
        )
        plan = _Plan(actions=(ModelAction("leader_elected", {"c": 0, "b": new_index}),),
                     pair=(writer, other), views=views, partition=partition)

        def commit() -> None:
            self._written[subject] = _Written(leader, epoch)

        plan.commit = commit
        return plan

    def _views(self, c: int, other: int | None) -> dict[int, tuple[bool, int, bool]]:
        views: dict[int, tuple[bool, int, bool]] = {}
        for broker in (c, other):
            if broker is not None:
                candidate = self._candidate(broker)
                views[broker] = (candidate.active, candidate.epoch, candidate.session)
        return views

    # --- building the model state -------------------------------------------------------------

    def _build(self, plan: _Plan) -> Any:
        c, other = plan.pair
        zk_owner, zk_epoch = plan.zk if plan.zk is not None else (
            self._zk_controller, self._zk_epoch)
        rows = [plan.views.get(c, (False, 0, True))]
        rows.append(plan.views[other] if other is not None and other in plan.views
                    else (False, 0, True))
        limit = _MAX_EPOCH if plan.election else _MAX_EPOCH + 1
        kept = sorted({zk_epoch, rows[0][1], rows[1][1]})[-limit:]

        def rank(value: int) -> int:
            below = [k for k in kept if k <= value]
            return len(below) - 1 if below else 0

        owner_index = (0 if zk_owner == c else 1 if zk_owner is not None and zk_owner == other
                       else _NONE)
        key = (owner_index, rank(zk_epoch),
               tuple((row[0], rank(row[1]), row[2]) for row in rows), plan.partition)
        built = _STATES.get(key)
        if built is None:
            built = _STATES[key] = self._state_of(key)
        return built

    def _state_of(self, key: tuple[Any, ...]) -> Any:
        owner, zk_epoch, rows, partition = key
        initial = self._initial
        zk_leader, zk_leader_epoch, previous_leads, cached = (
            partition if partition is not None else (0, 0, False, 0))
        return initial.replace(
            session=_array(initial.session, [row[2] for row in rows]),
            zk_controller=owner,
            zk_controller_epoch=zk_epoch,
            zk_epoch_version=zk_epoch,
            active=_array(initial.active, [row[0] for row in rows]),
            ctl_epoch=_array(initial.ctl_epoch, [row[1] for row in rows]),
            ctl_epoch_version=_array(initial.ctl_epoch_version, [row[1] for row in rows]),
            ctl_leader_epoch=_array(initial.ctl_leader_epoch, [cached, 0]),
            ctl_partition_version=_array(initial.ctl_partition_version, [0, 0]),
            zk_leader=zk_leader,
            zk_leader_epoch=zk_leader_epoch,
            zk_partition_version=0,
            zk_state_controller_epoch=0,
            broker_leader=_array(initial.broker_leader, [previous_leads, False, False]),
            broker_leader_epoch=_array(initial.broker_leader_epoch,
                                       [zk_leader_epoch if previous_leads else 0, 0, 0]),
            broker_controller_epoch=_array(initial.broker_controller_epoch, [0, 0, 0]),
            stale_write=False,
            max_leader_epoch=zk_leader_epoch,
        )


_CONTROLLER_EVENTS: dict[
    str, Callable[[ControllerAbstraction, int, Mapping[str, TraceValue]], _Plan]
] = {
    "CONTROLLER_ELECTED": ControllerAbstraction._elected,
    "SESSION_EXPIRED": ControllerAbstraction._session_expired,
    "CONTROLLER_RESIGNED": ControllerAbstraction._resigned,
    "ZK_WRITE_FENCED": ControllerAbstraction._fenced,
}

#: abstract key -> model state (a pure function's cache)
_STATES: dict[tuple[Any, ...], Any] = {}


def _array(template: Any, values: list[Any]) -> Any:
    array = template
    for index, value in enumerate(values):
        if array[index] != value:
            array = array.set(index, value)
    return array


class _SafetyOnly:
    """A model whose ``check_invariants`` reports only its safety invariants (not the lemmas)."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self._safety = [name for name, invariant in model.invariants.items()
                        if invariant.kind == "safety"]
        self.name: str = model.name

    def enabled(self, state: Any, action: str, params: Mapping[str, Any] | None = None) -> bool:
        return bool(self._model.enabled(state, action, params))

    def step(self, state: Any, action: str, params: Mapping[str, Any] | None = None) -> Any:
        return self._model.step(state, action, params)

    def check_invariants(self, state: Any) -> list[str]:
        return [name for name in self._safety if not self._model.holds(state, name)]


_SHARED: dict[str, tuple[MemoizedModel, Any]] = {}


def shared_model(variant: str = "shipped") -> tuple[MemoizedModel, Any]:
    """The controller model of ``variant`` (memoized, safety invariants only) and its initial
    state, built once per process (a pure function's cache)."""
    if variant not in _SHARED:
        from model import controller as model_module  # noqa: PLC0415 (optional layer)

        definition = model_module.MODELS[0]
        chosen = next(v for v in definition.variants if v.name == variant)
        model = definition.build(chosen)
        _SHARED[variant] = (MemoizedModel(_SafetyOnly(model)), model.initial_states()[0])
    return _SHARED[variant]


def controller_abstraction(variant: str = "shipped") -> ControllerAbstraction:
    """A fresh abstraction (its mirror is per run) checked against the model ``variant``."""
    model, initial = shared_model(variant)
    return ControllerAbstraction(model, initial)


def abstractions(variant: str = "shipped") -> list[Abstraction]:
    """The abstractions a simulated cluster run checks ``controller`` events with."""
    return [controller_abstraction(variant)]
