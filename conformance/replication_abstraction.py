"""The abstraction function from the replication trace to ``model.replication``.

Theory of operation
-------------------
The model is one partition on three replicas with two log slots and leader epochs 1..3, small
enough for Z3; a simulated run has thousands of offsets and dozens of elections. The abstraction
is therefore *state-based*: for every partition it keeps a **mirror** of what the events reported
(each replica's role, leader epoch, leader, log as runs of ``(epoch, end offset)``, LEO and HW,
the leader's ISR and the fetch offsets it recorded; ZooKeeper's leader, epoch and ISR as the
events revealed them; the committed prefix, i.e. the longest log a leader ever exposed below its
HW), and before each event it builds the model state from the mirror:

* **Replicas by order.** Brokers become model replicas 0, 1, 2, ... in order of the partition's
  ``replicas`` field when an event carries it, else in order of first appearance (the subject's
  broker, a leader, ISR members, a fetching replica). The model is proved on three replicas; a
  partition that has had more (a reassignment across four or more brokers: during one, old and
  new replicas are assigned together) is replayed in the same model definitions built over as
  many replicas (``model.replication.build``'s ``replicas`` flag), from its next event on.
* **Offsets by cuts.** Each event picks two cut offsets ``c1 < c2`` among the offsets that matter
  for it (an append's base and end, an HW's old and new value, a fetch offset and the leader's
  LEO, a truncation point and the committed length, ...). An offset ``p`` becomes 0 below
  ``c1``, 1 below ``c2`` and 2 from ``c2`` on; model slot 0 holds the epoch of the record at
  ``c1 - 1``, slot 1 that of the record at ``c2 - 1``. The map is monotone, so every ``<=``
  between offsets survives; the cuts are chosen so that the strict comparisons the event's
  action depends on survive too.
* **Epochs by rank.** The concrete leader epochs of the built state (ZooKeeper's, the replicas',
  the records' in both slots, the committed ones) are renumbered 1, 2, 3 in order; when there
  are more, those of the replicas the event is not about (leaders aside) map to the nearest
  kept epoch below them, then the oldest kept ones merge into rank 1 (an election keeps one
  rank free for the epoch it writes). A truncation (``TRUNCATE``, ``BECOME_FOLLOWER``) whose
  merge would give two different record epochs one rank (a log a replica kept from before a
  reassignment removed it looks like the log written since) is built instead at the cuts that
  need the fewest epochs: the last record kept and the first dropped. When they still merge
  two, a deposed leader the event is not about (its LeaderAndIsr not arrived yet) is shown
  OFFLINE, so that its epoch takes no rank (seed 4492).
* **A leaderless ISR.** ZooKeeper's ISR of a state without a leader leaves out a member that
  crashed since it last joined an ISR and came back short of the committed prefix, while another
  member holds that prefix: its registration lands before the controller's write that takes it
  out (KIP-966), and in that window the state still names it (seed 1337).

Then the event's model actions must be enabled and the model's **safety** invariants
(``LEADER_UNIQUE``, ``COMMITTED_DURABLE``, ``LOG_MATCHING``, ``NO_COMMITTED_LOSS``) must hold
after them; the model's lemmas (``WELL_FORMED``, ``VOUCHED``, ...) are proof aids about
model-only bookkeeping the mirror rebuilds approximately and are not checked here. Finally the
model's outcome must agree with what the implementation reported (the refinement check).

Events and the fields they must carry (subject ``"<topic>-<partition>@<broker>"``)
----------------------------------------------------------------------------------
* ``BECOME_LEADER`` (core ``decide_leader_and_isr``): ``leader_epoch``, ``isr``; optional
  ``replicas``, ``log_end_offset``, ``high_watermark`` (exact values instead of the mirror's).
  Model: ``become_leader(r)`` from a state where ZooKeeper's epoch is the one before
  ``leader_epoch`` and the old ISR members missing from ``isr`` are down; then
  ``become_follower`` for every follower whose ``BECOME_FOLLOWER`` of that epoch came first.
  The new ISR must be the one reported. A re-delivery of the same epoch is a stutter. A
  ``BECOME_LEADER`` overtaken by a later epoch (a follower heard of it first, or its broker's
  session expired while it was on the way) is replayed as an election from the ISR it carries
  (the mirror holds only ZooKeeper's later state), before the leaders of later epochs (shown
  OFFLINE) and what they committed (the committed prefix as it stood when the first later
  epoch was revealed).
* ``BECOME_FOLLOWER`` (core): ``leader_epoch``, ``isr``, ``leader``. Model:
  ``become_follower(r)`` once the leader leads in that epoch (until then it waits, see above).
  Without ``leader`` (or with leader -1) it is a stutter that only updates the mirror. One that
  arrives after a later epoch was revealed, while its leader still leads its epoch (deposed and
  not told yet), is replayed as ZooKeeper last held that epoch: the leader's ISR of it (not the
  one the request carries, which the leader may have shrunk since) and the committed prefix as
  it stood before any later epoch was revealed.
* ``LEADER_APPEND`` (shell): ``base_offset``, ``last_offset``, ``leader_epoch``. Model:
  ``leader_append(r)``.
* ``FOLLOWER_FETCH`` (shell, at the leader): ``replica``, ``fetch_offset``. Model:
  ``follower_fetch(f, delivered=True)``: the follower's LEO is the fetch offset and it receives
  the leader's whole log (a partial response shows as a lower offset at its next fetch). A
  request that reaches the leader after its sender crashed or moved to a later epoch was sent
  while it followed this leader in its epoch (the leader fences other epochs, KIP-320): it is
  replayed from that state as ``follower_fetch(f, delivered=False)``, or is a stutter when the
  leader already recorded a higher fetch offset from it. A request of the follower's current
  incarnation overtaken by a later one (the network duplicates and reorders) is a stutter: the
  leader keeps the highest fetch offset of an incarnation. (A ``leader_epoch`` field,
  the request's ``current_leader_epoch``, would let this be checked rather than assumed.)
  A delayed fetch asked again (``asked_again``: its read, from the offset already recorded) is
  the same ``follower_fetch``: it records nothing new and delivers what the leader holds at the
  read, which the fetch's first event could not (the leader had nothing to send then).
* ``HW_ADVANCE`` (shell): ``high_watermark``, ``isr``. Model: ``hw_advance(r)``, which must
  reach exactly the reported HW (an HW that goes back is not enabled).
* ``ISR_SHRINK`` / ``ISR_EXPAND`` (shell): ``isr``. Model: ``isr_shrink(f)`` / ``isr_expand(f)``
  per replica that left or joined. KIP-320 rule 4 is checked in Kafka's form: a joining
  follower's last fetch offset must reach the leader's HW and the start of the leader's epoch
  (the model's form, the HW reached the epoch start, then holds of the abstract state: both
  offsets are cut together).
* ``TRUNCATE`` (fetcher): ``log_end_offset``, ``truncated_to``; ``high_watermark`` under
  ``HIGH_WATERMARK``. Model: ``become_follower(r)`` replayed from the pre-truncation log (the
  model truncates as it becomes follower); the model's truncation point must be the reported one.
  A late follower's, against a deposed leader, is replayed as that epoch last stood, as its
  ``BECOME_FOLLOWER`` is.
  The OffsetForLeaderEpoch answer it reports (``leader_epoch_end``) corrects the mirror when it
  ends the follower's latest epoch below where the mirror's logs end it: a new leader's LEO the
  mirror inferred is cut there; a leader's reported LEO stands, and a follower outside the ISR
  that crashed holding records only assumed delivered holds, from the answer on, records of an
  epoch the leader ends there (the crash lost the fetched records and undid an unflushed
  truncation of its own).
  Policy ``LOG_START`` (a follower emptied and restarted at its leader's log start,
  ``log_start_offset``) is a stutter: the model has no log start; the follower holds the
  leader's committed prefix up to there.
* ``CRASH`` / ``RESTART``: no field. Model: ``crash(r)`` / ``restart(r)`` (a RESTART with no
  CRASH before it, of a replica its broker held no state for, is both).

An event without a field it needs is a stutter that updates what it can; :attr:`stutters`
counts them by reason, so a report shows what went unchecked, and :attr:`inferred` counts the
events replayed from a state the abstraction inferred (a late fetch request, an HW a lost
response may not have brought, a RESTART with no CRASH, a new leader's LEO or a crashed
follower's tail learnt from the OffsetForLeaderEpoch answer a TRUNCATE reports).

The abstraction checks against the model variant of the truncation policy it is given:
``LEADER_EPOCH`` (the shipped model) or ``HIGH_WATERMARK`` (``truncate_to_hw``, design V3's
rule). Checked against the shipped model, a truncation to the HW that drops records the leader
still has is a refinement mismatch; checked against ``truncate_to_hw``, one below the committed
offset breaks ``COMMITTED_DURABLE`` (or ``NO_COMMITTED_LOSS`` once such a replica leads).
A truncation that keeps records the leader lacks (KIP-101 without KIP-279's iteration,
KAFKA-6361) is a refinement mismatch at its TRUNCATE event.

Cost: the mirror update is proportional to the number of epoch runs in a log; model states are
cached by their abstract key and model answers memoized, so a long run evaluates the model only
for the few thousand distinct abstract states it meets.

This module is a sans-IO core.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

from conformance.trace_check import Abstraction, ExecutableModel, MemoizedModel, ModelAction
from impl.trace import TraceEvent, TraceValue

__sans_io__ = True

MACHINE = "replication"
#: Model bounds (``model.replication``).
#: the fewest replicas a model instance has (the proved bound)
_REPLICAS = 3
_SLOTS = 2
_MAX_EPOCH = 3
#: Policies and the model variant each is checked against.
POLICIES = {"LEADER_EPOCH": "shipped", "HIGH_WATERMARK": "truncate_to_hw"}

Runs = tuple[tuple[int, int], ...]  # (epoch, end offset), ends increasing


#: bound on the entries of each of the caches below (pure functions' caches: cleared when full)
_CACHE_MAX = 100_000
#: (runs, length) -> _prefix; (own, at, other, length) -> _splice: a follower fetching from an
#: idle leader, or the leader's log in every fetch, asks the same questions again and again
_PREFIXES: dict[tuple[Runs, int], Runs] = {}
_SPLICES: dict[tuple[Runs, int, Runs, int], Runs] = {}


def _prefix(runs: Runs, length: int) -> Runs:
    """The runs of the first ``length`` records (remembered)."""
    if not runs:
        return ()
    key = (runs, length)
    found = _PREFIXES.get(key)
    if found is None:
        if len(_PREFIXES) >= _CACHE_MAX:
            _PREFIXES.clear()
        found = _PREFIXES[key] = _prefix_of(runs, length)
    return found


def _prefix_of(runs: Runs, length: int) -> Runs:
    kept: list[tuple[int, int]] = []
    for epoch, end in runs:
        if end >= length:
            if not kept or kept[-1][1] < length:
                kept.append((epoch, length))
            break
        kept.append((epoch, end))
    return tuple(item for item in kept if item[1] > 0)


def _end(runs: Runs) -> int:
    return runs[-1][1] if runs else 0


def _splice(own: Runs, at: int, other: Runs, length: int) -> Runs:
    """``own`` up to ``at`` (filled from ``other`` where ``own`` is shorter), then ``other`` up
    to ``length`` (remembered)."""
    key = (own, at, other, length)
    found = _SPLICES.get(key)
    if found is None:
        if len(_SPLICES) >= _CACHE_MAX:
            _SPLICES.clear()
        found = _SPLICES[key] = _splice_of(own, at, other, length)
    return found


def _splice_of(own: Runs, at: int, other: Runs, length: int) -> Runs:
    head = _prefix(own, at)
    fallback = head[-1][0] if head else (other[0][0] if other else 0)
    if _end(head) < at:
        head = head + tuple(_between(other, _end(head), at, fallback))
    if length <= at:
        return _prefix(head, length)
    return _merge(head + tuple(_between(other, at, length, fallback)))


def _between(runs: Runs, start: int, stop: int, fallback: int) -> list[tuple[int, int]]:
    """The runs of ``runs`` between two offsets; past its end, records of epoch ``fallback``
    (or of its last epoch)."""
    out: list[tuple[int, int]] = []
    begin = 0
    for epoch, end in runs:
        if end > start and begin < stop:
            out.append((epoch, min(end, stop)))
        begin = end
    if _end(runs) < stop and stop > start:
        out.append((runs[-1][0] if runs else fallback, stop))
    return out


def _merge(runs: Sequence[tuple[int, int]]) -> Runs:
    merged: list[tuple[int, int]] = []
    for epoch, end in runs:
        if merged and merged[-1][0] == epoch:
            merged[-1] = (epoch, end)
        elif not merged or end > merged[-1][1]:
            merged.append((epoch, end))
    return tuple(merged)


def _epoch_at(runs: Runs, offset: int) -> int | None:
    """The epoch of the record at ``offset`` (None past the log end); scans from the end,
    where the offsets that matter are."""
    found: int | None = None
    for epoch, end in reversed(runs):
        if offset >= end:
            break
        found = epoch
    return found


def _common(a: Runs, b: Runs) -> int:
    """The length of the longest common prefix of two logs (records are (offset, epoch))."""
    length = 0
    ia = ib = 0
    while ia < len(a) and ib < len(b):
        ea, enda = a[ia]
        eb, endb = b[ib]
        if ea != eb:
            return length
        length = min(enda, endb)
        if enda == length:
            ia += 1
        if endb == length:
            ib += 1
    return length


@dataclass(slots=True)
class _Replica:
    role: str = "OFFLINE"
    epoch: int | None = None
    leader: int = -1
    runs: Runs = ()
    leo: int = 0
    hw: int = 0
    epoch_start: int = 0
    #: a leader's ``epoch_start`` (its LEO when it took office) was reported by its
    #: BECOME_LEADER's ``log_end_offset``, not inferred from fetch responses it may never have
    #: received
    epoch_start_exact: bool = False
    isr: tuple[int, ...] = ()
    remote: dict[int, int] = field(default_factory=dict)
    #: the follower's ``restarts`` when ``remote`` recorded its fetch offset
    remote_incarnation: dict[int, int] = field(default_factory=dict)
    #: RESTART events seen (a new incarnation: its leader forgets its old fetch offsets)
    restarts: int = 0
    #: the highest LEO at a CRASH since it last joined an ISR (a crash may lose an unflushed
    #: tail)
    crash_leo: int = -1
    #: the last LEO an event reported (the mirror's records past it came from fetch responses
    #: assumed delivered)
    reported_leo: int = 0
    #: where the mirror's log stops being what the replica holds: it crashed holding records
    #: only assumed delivered (the crash may have lost them, and undone an unflushed truncation
    #: that had dropped its own older records there); None once its log is cut below
    unsure_from: int | None = None
    #: ``hw`` was reported (HW_ADVANCE, a BECOME_* ``high_watermark``), not inferred from a
    #: fetch response that may have been lost
    hw_exact: bool = False
    live: bool = True
    #: BECOME_FOLLOWER seen before its leader's BECOME_LEADER of that epoch
    pending: bool = False

    def set_leo(self, leo: int, source: Runs = ()) -> None:
        """The LEO as reported; records past the known log come from ``source``."""
        if leo <= self.leo:
            self.runs = _prefix(self.runs, leo)
        else:
            self.runs = _splice(self.runs, self.leo, source, leo)
        self.leo = self.reported_leo = leo
        self.hw = min(self.hw, leo)
        if self.unsure_from is not None and leo <= self.unsure_from:
            self.unsure_from = None


@dataclass(slots=True)
class _Partition:
    brokers: list[int] = field(default_factory=list)
    replicas: dict[int, _Replica] = field(default_factory=dict)
    zk_leader: int = -1
    zk_epoch: int | None = None
    zk_isr: tuple[int, ...] = ()
    committed: Runs = ()
    committed_len: int = 0
    #: ZooKeeper epoch -> the committed prefix (runs, length) when the events first revealed
    #: that epoch: what had been committed before any leader of it or a later one took office
    committed_before: dict[int, tuple[Runs, int]] = field(default_factory=dict)
    #: repeated fetches that change nothing (a caught-up follower polling an idle leader) are
    #: most of a trace: their plans and states, until the mirror changes
    memo: dict[tuple[Any, ...], tuple[_Plan, Any]] = field(default_factory=dict)

    def reveal(self, leader: int, epoch: int, isr: tuple[int, ...]) -> None:
        """ZooKeeper's partition state as an event revealed it (its epoch or a later one)."""
        self.zk_leader, self.zk_epoch, self.zk_isr = leader, epoch, isr
        self.committed_before.setdefault(epoch, (self.committed, self.committed_len))

    def committed_until(self, epoch: int) -> tuple[Runs, int]:
        """The committed prefix as it stood before any epoch after ``epoch`` was revealed
        (the present one when none was)."""
        later = [e for e in self.committed_before if e > epoch]
        if not later:
            return self.committed, self.committed_len
        return self.committed_before[min(later)]

    def index(self, broker: int) -> int:
        if broker not in self.replicas:
            self.brokers.append(broker)
            self.replicas[broker] = _Replica()
        return self.brokers.index(broker)

    @property
    def width(self) -> int:
        """The replicas of the model instance this partition is replayed in."""
        return max(_REPLICAS, len(self.brokers))

    def replica(self, broker: int) -> _Replica:
        self.index(broker)
        return self.replicas[broker]


@dataclass(slots=True)
class _Plan:
    """What one event means: the model actions and how to build the state they start from."""

    actions: tuple[ModelAction, ...] = ()
    cuts: tuple[int, int] = (1, 2)
    #: cuts to build with instead when ``cuts`` need more epochs than ranks and merging the
    #: oldest would give two different record epochs one rank (two logs that diverge would
    #: look alike, seed 11892); a truncation's only (``cuts`` once built with them)
    fallback_cuts: tuple[int, int] | None = None
    epoch_limit: int = _MAX_EPOCH
    #: concrete values for this event only: broker -> role / leo / hw, zk overrides, down brokers
    roles: dict[int, str] = field(default_factory=dict)
    leos: dict[int, int] = field(default_factory=dict)
    hws: dict[int, int] = field(default_factory=dict)
    isrs: dict[int, tuple[int, ...]] = field(default_factory=dict)
    epochs: dict[int, int] = field(default_factory=dict)
    leaders: dict[int, int] = field(default_factory=dict)
    zk: tuple[int, float, tuple[int, ...]] | None = None
    #: the committed prefix (runs, length) the state is built with, when not the present one
    committed: tuple[Runs, int] | None = None
    down: tuple[int, ...] = ()
    #: brokers up for this event (an ISR member the controller still counts, crashed or not)
    up: tuple[int, ...] = ()
    #: the brokers the event is about (empty: all); the epochs of the others (leaders aside)
    #: are the first merged when there are more epochs than ranks
    involved: tuple[int, ...] = ()
    #: checks after the actions: (what, variable, key, expected abstract value)
    expect: list[tuple[str, str, Any, Any]] = field(default_factory=list)
    commit: Any = None
    #: a follower fetch whose plan may be reused while the mirror does not change
    cacheable: bool = False
    #: set by ``commit``: the mirror did not change
    unchanged: bool = False
    #: the reported offset the ``expect`` entries without a value compare with (abstracted)
    reported_offset: int = 0

    def __init__(  # noqa: PLR0917 (the generated constructor's signature)
        self, actions: tuple[ModelAction, ...] = (), cuts: tuple[int, int] = (1, 2),
        fallback_cuts: tuple[int, int] | None = None, epoch_limit: int = _MAX_EPOCH,
        roles: dict[int, str] | None = None, leos: dict[int, int] | None = None,
        hws: dict[int, int] | None = None,
        isrs: dict[int, tuple[int, ...]] | None = None,
        epochs: dict[int, int] | None = None, leaders: dict[int, int] | None = None,
        zk: tuple[int, float, tuple[int, ...]] | None = None,
        committed: tuple[Runs, int] | None = None, down: tuple[int, ...] = (),
        up: tuple[int, ...] = (), involved: tuple[int, ...] = (),
        expect: list[tuple[str, str, Any, Any]] | None = None, commit: Any = None,
        cacheable: bool = False, unchanged: bool = False,
        reported_offset: int = 0
    ) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        self.actions = actions
        self.cuts = cuts
        self.fallback_cuts = fallback_cuts
        self.epoch_limit = epoch_limit
        self.roles = {} if roles is None else roles
        self.leos = {} if leos is None else leos
        self.hws = {} if hws is None else hws
        self.isrs = {} if isrs is None else isrs
        self.epochs = {} if epochs is None else epochs
        self.leaders = {} if leaders is None else leaders
        self.zk = zk
        self.committed = committed
        self.down = down
        self.up = up
        self.involved = involved
        self.expect = [] if expect is None else expect
        self.commit = commit
        self.cacheable = cacheable
        self.unchanged = unchanged
        self.reported_offset = reported_offset


#: (name, parameters) -> the action: actions are values, and one object per action lets the
#: memoized model compute its key once
_ACTIONS: dict[tuple[str, tuple[tuple[str, Any], ...]], ModelAction] = {}


def _action(name: str, **params: int | bool) -> ModelAction:
    key = (name, tuple(params.items()))  # a parameter is always an int or always a bool
    found = _ACTIONS.get(key)
    if found is None:
        found = _ACTIONS[key] = ModelAction(name, params)
    return found


def _int(fields: Mapping[str, TraceValue], name: str) -> int | None:
    value = fields.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _ints(fields: Mapping[str, TraceValue], name: str) -> tuple[int, ...] | None:
    value = fields.get(name)
    if not isinstance(value, tuple):
        return None
    for item in value:  # (a plain loop: no generator for all(), a hot path of the checker)
        if not isinstance(item, int) or isinstance(item, bool):
            return None
    ints = cast("tuple[int, ...]", value)  # (every item checked above)
    return ints if type(ints) is tuple else tuple(ints)


#: A cut past every log (its slot holds no record of anyone).
_FAR: Final = 1 << 62


def _cuts(*positions: int) -> tuple[int, int]:
    """The first two distinct positive positions, in the order given, made increasing."""
    chosen: list[int] = []
    for position in positions:
        if position > 0 and position not in chosen:
            chosen.append(position)
        if len(chosen) == 2:
            break
    if not chosen:
        return (1, 2)
    if len(chosen) == 1:
        return (chosen[0], chosen[0] + 1)
    low, high = sorted(chosen)
    return (low, high)


class ReplicationAbstraction:
    """Maps ``replication`` trace events onto ``model.replication``, one instance per partition.

    Args:
        model: the executable model (memoized), of the policy's variant.
        initial: the model's initial state (a template: every state is rebuilt per event).
        roles: the model's ``ReplicaRole`` enum.
        policy: ``LEADER_EPOCH`` or ``HIGH_WATERMARK``.
    """

    def __init__(self, model: ExecutableModel, initial: Any, roles: Any, policy: str) -> None:
        self._model = model
        self._initial = initial
        self._roles = roles
        self.policy = policy
        #: the width of ``_model`` / ``_initial`` (the instance of the event being checked)
        self._width = _REPLICAS
        #: width -> (model, initial state); wider instances are built when a partition needs one
        self._widths: dict[int, tuple[ExecutableModel, Any]] = {_REPLICAS: (model, initial)}
        self._partitions: dict[str, _Partition] = {}
        #: the partition and plan of the event being checked, and whether the plan came from
        #: the follower-fetch memo
        self._current: tuple[_Partition, _Plan, bool] | None = None
        #: subject -> its instance key, and the broker it names (a run has few subjects)
        self._instances: dict[str, str] = {}
        self._brokers: dict[str, int] = {}
        #: events checked as stutters for want of a field or of context, by reason
        self.stutters: Counter[str] = Counter()
        #: events replayed from a state partly inferred rather than reported, by reason
        self.inferred: Counter[str] = Counter()

    @property
    def machine(self) -> str:
        """``"replication"``."""
        return MACHINE

    @property
    def model(self) -> ExecutableModel:
        """The model events are replayed in."""
        return self._model

    def _use(self, width: int) -> None:
        """Replay the next event in the instance of ``width`` replicas (built once)."""
        found = self._widths.get(width)
        if found is None:
            model, initial, _ = shared_model(POLICIES[self.policy], width)
            found = self._widths[width] = (model, initial)
        self._model, self._initial = found
        self._width = width

    def instance_key(self, event: TraceEvent) -> str:
        """One model instance per partition: the subject without its ``@broker``."""
        subject = event.subject
        found = self._instances.get(subject)
        if found is None:
            found = self._instances[subject] = subject.rpartition("@")[0] or subject
        return found

    def initial_state(self, event: TraceEvent) -> Any:
        """The model's initial state (rebuilt before every event anyway)."""
        return self._initial

    # --- planning -----------------------------------------------------------------------------

    def pre_state(self, state: Any, event: TraceEvent) -> Any:
        """The model state abstracting the mirror before ``event`` (plans the event too)."""
        key = self.instance_key(event)
        part = self._partitions.get(key)
        if part is None:
            part = self._partitions[key] = _Partition()
        memo_key: tuple[Any, ...] | None = None
        if event.event == "FOLLOWER_FETCH":
            memo_key = (event.subject, tuple(event.fields.items()))
            hit = part.memo.get(memo_key)
            if hit is not None:
                if part.width != self._width:
                    self._use(part.width)
                self._current = (part, hit[0], True)
                return hit[1]
        known = len(part.brokers)
        plan = self._plan(part, event)
        if len(part.brokers) != known:
            part.memo.clear()
        if part.width != self._width:
            self._use(part.width)
        built = self._build(part, plan)
        if memo_key is not None and plan.cacheable:
            part.memo[memo_key] = (plan, built)
        self._current = (part, plan, False)
        return built

    def actions(self, state: Any, event: TraceEvent) -> Sequence[ModelAction]:
        """The model actions planned for ``event``."""
        assert self._current is not None
        return self._current[1].actions

    def mismatch(self, state: Any, event: TraceEvent) -> str | None:
        """Whether the model's outcome is the reported one; then the mirror takes the event."""
        assert self._current is not None
        part, plan, remembered = self._current
        self._current = None
        for what, variable, index, expected in plan.expect:
            value = state[variable]
            if index is not None:
                value = value[index]
            if value != expected:
                return f"{what}: the model has {value!r}, the implementation {expected!r}"
        if remembered:
            # A memo entry outlives only a commit that changed nothing (any change clears the
            # memo), and the mirror has not changed since: the commit would change nothing.
            return None
        if plan.commit is not None:
            plan.commit()
            if not plan.unchanged:
                part.memo.clear()
        return None

    def _stutter(self, reason: str, commit: Any = None) -> _Plan:
        self.stutters[reason] += 1
        return _Plan(commit=commit)

    def _plan(self, part: _Partition, event: TraceEvent) -> _Plan:
        broker = self._brokers.get(event.subject)
        if broker is None:
            try:
                broker = int(event.subject.rpartition("@")[2])
            except ValueError:
                raise ValueError(
                    f"replication subject {event.subject!r} names no broker"
                ) from None
            self._brokers[event.subject] = broker
        fields = event.fields
        replicas = _ints(fields, "replicas")
        if replicas is not None:
            for replica in replicas:
                part.index(replica)
        part.index(broker)
        name = event.event
        planner = _PLANNERS.get(name)
        if planner is None:
            raise ValueError(f"replication has no event {name}")
        return planner(self, part, broker, fields)

    # --- one planner per event ----------------------------------------------------------------

    def _become_leader(self, part: _Partition, r: int, fields: Mapping[str, TraceValue]) -> _Plan:
        epoch, isr = _int(fields, "leader_epoch"), _ints(fields, "isr")
        if epoch is None or isr is None:
            return self._stutter("BECOME_LEADER without leader_epoch or isr")
        for member in isr:
            part.index(member)
        me = part.replicas[r]
        leo = _int(fields, "log_end_offset")
        hw = _int(fields, "high_watermark")

        def adopt() -> None:
            if leo is not None:
                me.set_leo(leo)
            if hw is not None:
                me.hw, me.hw_exact = min(hw, me.leo), True

        if me.role == "LEADER" and me.epoch == epoch:
            def same() -> None:
                adopt()
                me.isr = isr
                if part.zk_epoch == epoch:
                    part.zk_isr = isr
            return self._stutter("BECOME_LEADER re-delivered in its epoch", same)
        first = part.zk_epoch is None
        # A LeaderAndIsr that arrives after ZooKeeper moved past its epoch (the controller's
        # request to this broker was delayed while a later one reached a follower) was an
        # election from the ISR it carries: the mirror knows only ZooKeeper's later ISR.
        late = part.zk_epoch is not None and part.zk_epoch > epoch
        old_isr = isr if first or late else part.zk_isr
        if late:
            self.inferred["BECOME_LEADER after a later epoch: elected from its own ISR"] += 1
        zk_before: float = (
            part.zk_epoch if part.zk_epoch is not None and part.zk_epoch < epoch else epoch - 0.5
        )
        pending = [b for b, replica in part.replicas.items()
                   if replica.pending and replica.leader == r and replica.epoch == epoch]
        # Replayed late, the election precedes the leaders of later epochs (a broker whose
        # session expired gets its delayed LeaderAndIsr after another led a later epoch): they
        # are its future, shown OFFLINE; what they do is checked at their own events.
        later = [b for b, replica in part.replicas.items()
                 if late and b != r and replica.role == "LEADER" and replica.epoch is not None
                 and replica.epoch > epoch]
        if later:
            self.inferred["BECOME_LEADER after a later epoch: its later leaders shown OFFLINE"] += 1
        # ... and precedes what they committed: its election is checked against the committed
        # prefix as it stood before any later epoch was revealed (seed 48: a broker whose
        # session expired took the lead of epoch 9 with its ISR after the leader of epoch 10,
        # alone in its ISR, had committed two records past its log).
        committed = part.committed_until(epoch) if late else (part.committed,
                                                              part.committed_len)
        plan = _Plan(
            actions=(*self._revived(me, part.index(r)), _action("become_leader", r=part.index(r)),
                     *(_action("become_follower", r=part.index(b)) for b in pending)),
            epoch_limit=_MAX_EPOCH - 1,
            zk=(part.zk_leader, zk_before, old_isr),
            down=tuple(b for b in old_isr if b not in isr and b != r),
            up=isr,
            roles=dict.fromkeys((*pending, *later), "OFFLINE"),
        )
        my_leo = leo if leo is not None else me.leo
        plan.leos[r] = my_leo
        if late:
            # The ISR it carries was ZooKeeper's when its epoch was written: a member that
            # crashed since (and lost an unflushed tail) still held its log then (seed 561).
            self._logs_before_crashes(part, plan, isr, r, my_leo)
        if hw is not None:
            plan.hws[r] = hw
        plan.committed = committed
        plan.cuts = _cuts(committed[1], my_leo)
        plan.expect.append(("new ISR", "zk_isr", None, self._isr_array(part, isr)))

        def commit() -> None:
            adopt()
            me.role, me.epoch, me.leader, me.isr = "LEADER", epoch, r, isr
            me.remote, me.remote_incarnation, me.pending = {}, {}, False
            me.epoch_start, me.epoch_start_exact = me.leo, leo is not None
            me.live = True
            if part.zk_epoch is None or epoch >= part.zk_epoch:
                part.reveal(r, epoch, isr)
            for b in pending:
                part.replicas[b].pending = False

        plan.commit = commit
        return plan

    def _become_follower(
        self, part: _Partition, f: int, fields: Mapping[str, TraceValue]
    ) -> _Plan:
        epoch, isr, leader = (_int(fields, "leader_epoch"), _ints(fields, "isr"),
                              _int(fields, "leader"))
        if epoch is None or isr is None:
            return self._stutter("BECOME_FOLLOWER without leader_epoch or isr")
        for member in isr:
            part.index(member)
        me = part.replicas[f]
        leo, hw = _int(fields, "log_end_offset"), _int(fields, "high_watermark")

        def follow(pending: bool, known_leader: int) -> None:
            if leo is not None:
                me.set_leo(leo)
            if hw is not None:
                me.hw, me.hw_exact = min(hw, me.leo), True
            me.role, me.epoch, me.leader, me.pending = "FOLLOWER", epoch, known_leader, pending
            me.live = True
            if part.zk_epoch is None or epoch > part.zk_epoch:
                part.reveal(known_leader, epoch, isr)

        if leader is None or leader < 0:
            return self._stutter("BECOME_FOLLOWER without a leader",
                                 lambda: follow(False, -1 if leader is None else leader))
        part.index(leader)
        if me.role == "FOLLOWER" and me.epoch == epoch and me.leader == leader:
            return self._stutter("BECOME_FOLLOWER re-delivered in its epoch")
        lead = part.replicas[leader]
        if not (lead.role == "LEADER" and lead.epoch == epoch):
            # The leader has not taken the role yet: the model's become_follower waits for it.
            return _Plan(commit=lambda: follow(True, leader))
        plan = _Plan(actions=(*self._revived(me, part.index(f)),
                              _action("become_follower", r=part.index(f))),
                     zk=(leader, epoch, part.zk_isr), involved=(f, leader))
        my_leo = leo if leo is not None else me.leo
        plan.leos[f] = my_leo
        my_hw = me.hw if hw is None else hw
        plan.hws[f] = my_hw
        # A LeaderAndIsr that arrives after ZooKeeper moved past its epoch (its broker was cut
        # off while a later one was written), to a follower of a leader still leading that
        # epoch (a deposed leader not told yet), is not replayed with the ISR it carries, which
        # that leader may have changed since (seed 67: it removed this follower, then committed
        # records the follower lacks).
        committed_len = self._as_epoch_last_stood(part, plan, epoch, leader,
                                                  "BECOME_FOLLOWER after a later epoch")
        point = self._truncation_point(me, lead, my_leo, my_hw)
        plan.cuts = self._truncation_cuts(point, committed_len, max(my_leo, lead.leo))
        plan.fallback_cuts = self._truncation_fallback(point, my_leo)
        plan.commit = lambda: follow(False, leader)
        return plan

    def _as_epoch_last_stood(self, part: _Partition, plan: _Plan, epoch: int, leader: int,
                             reason: str) -> int:
        """An event of a follower of ``leader``, which still leads ``epoch`` though ZooKeeper
        has moved past it (a deposed leader not told yet), is replayed as ZooKeeper last held
        that epoch: the leader's ISR (its writes of the epoch landed before it reported them)
        and the committed prefix as it stood before any later epoch was revealed, not the
        present one, which later leaders may have grown past the deposed leader's log (seed
        843). Returns the committed length the plan is built with."""
        if part.zk_epoch is None or part.zk_epoch <= epoch:
            return part.committed_len
        self.inferred[f"{reason}: as its epoch last stood"] += 1
        lead = part.replicas[leader]
        plan.zk = (leader, epoch, lead.isr)
        plan.committed = part.committed_until(epoch)
        self._logs_before_crashes(part, plan, lead.isr, leader, lead.leo)
        return plan.committed[1]

    @staticmethod
    def _logs_before_crashes(part: _Partition, plan: _Plan, isr: Sequence[int], leader: int,
                             leader_leo: int) -> None:
        """For an event replayed in an epoch ZooKeeper has moved past: each member of that
        epoch's ``isr`` (``leader`` aside, and the event's own broker, whose LEO the plan
        already holds) that crashed since and lost an unflushed tail still held its log up to
        the crash then (up to ``leader_leo``)."""
        for member in isr:
            then = part.replicas[member].crash_leo
            if member != leader and member not in plan.leos and then > part.replicas[member].leo:
                plan.leos[member] = min(then, leader_leo)

    def _revived(self, me: _Replica, index: int) -> tuple[ModelAction, ...]:
        """``restart`` when a LeaderAndIsr (or a new CRASH) reaches a replica last seen crashed:
        its broker restarted without it (its dir had failed, or it was no longer assigned
        there), so no RESTART was reported for it."""
        if me.live:
            return ()
        self.inferred["a replica its broker restarted without"] += 1
        return (_action("restart", r=index),)

    def _truncation_point(self, me: _Replica, lead: _Replica, leo: int, hw: int) -> int:
        if self.policy == "HIGH_WATERMARK":
            return min(leo, hw)
        return min(_common(_prefix(me.runs, leo), lead.runs), leo, lead.leo)

    @staticmethod
    def _truncation_cuts(point: int, committed: int, end: int) -> tuple[int, int]:
        if point > 0:
            return _cuts(point, committed if committed > point else end)
        return _cuts(committed, end)

    @staticmethod
    def _truncation_fallback(point: int, leo: int) -> tuple[int, int]:
        """Cuts for a truncation that need the fewest epochs: the last record kept and the
        first one dropped. A follower that keeps none needs only its first record, one that
        drops none only its last: the second cut then goes past every log, since the leader's
        records beyond would each add an epoch (seed 4036 of the campaign: a record of a
        deposed leader's epoch 4 against the new leader's epochs 5 and 6 merged into one rank
        with 5 when the second cut took the leader's record of epoch 6, and the model kept
        it). A committed length past the point still maps past it."""
        if 0 < point < leo:
            return _cuts(point, point + 1)
        return (max(point, 1), _FAR)

    def _truncate(self, part: _Partition, f: int, fields: Mapping[str, TraceValue]) -> _Plan:
        before, target = _int(fields, "log_end_offset"), _int(fields, "truncated_to")
        if before is None or target is None:
            return self._stutter("TRUNCATE without log_end_offset or truncated_to")
        me = part.replicas[f]
        hw = _int(fields, "high_watermark")
        start = _int(fields, "log_start_offset")
        if fields.get("policy") == "LOG_START" and start is not None:
            # Kafka's truncateFullyAndStartAt: below its leader's log start every record is
            # committed, so the follower holds the leader's prefix as far as the model sees it.
            leader = part.replicas.get(me.leader)

            def restart() -> None:
                # truncated fully first: whatever the mirror still held of the follower's
                # old log (a replica deleted and re-created by a reassignment) is gone
                me.set_leo(0)
                me.set_leo(start, leader.runs if leader else ())

            return self._stutter("a follower restarted at its leader's log start", restart)

        def cut() -> None:
            me.set_leo(before)
            me.set_leo(target)
            if hw is not None:
                me.hw = min(hw, target)

        leader = part.replicas.get(me.leader)
        if (me.role != "FOLLOWER" or me.pending or leader is None or leader.role != "LEADER"
                or leader.epoch != me.epoch or me.epoch is None):
            return self._stutter("TRUNCATE while its leader does not lead in its epoch", cut)
        self._learn_from_answer(part, f, leader, before, _int(fields, "leader_epoch_end"))
        my_hw = me.hw if hw is None else hw
        plan = _Plan(actions=(_action("become_follower", r=part.index(f)),),
                     zk=(me.leader, me.epoch, part.zk_isr), roles={f: "OFFLINE"},
                     leos={f: before}, hws={f: my_hw}, involved=(f, me.leader))
        # (the truncation of a late follower of a deposed leader: seed 843)
        committed_len = self._as_epoch_last_stood(part, plan, me.epoch, me.leader,
                                                  "TRUNCATE after a later epoch")
        plan.cuts = self._truncation_cuts(target, committed_len, before)
        plan.fallback_cuts = self._truncation_fallback(target, before)
        plan.commit = cut
        plan.expect.append(("truncation point", "leo", part.index(f), None))
        plan.reported_offset = target
        return plan

    def _learn_from_answer(self, part: _Partition, f: int, leader: _Replica, before: int,
                           end: int | None) -> None:
        """OffsetForLeaderEpoch's answer reveals the leader's log: where its records of the
        follower's latest epoch (or older) end. When the answer is below where the mirror's
        logs put that end, one of them is wrong.

        A new leader that has not appended yet, and whose LEO the mirror inferred (a response
        it never received), may have a shorter log: cut it there. A leader whose LEO its
        BECOME_LEADER reported is not cut; the follower's tail is what the mirror got wrong
        when the follower crashed since the mirror filled it from fetch responses and is
        outside the ISR (seed 8740): the crash may have lost the records a response was
        assumed to bring and undone an unflushed truncation, bringing back the follower's own
        older records. Its tail from the answer on is then records of an epoch the leader
        holds no further (the model truncates them, as the follower did). An ISR member, or a
        follower that did not crash, keeps the mirror's log: a truncation of records the
        leader holds is then refused."""
        me = part.replicas[f]
        mine = _epoch_at(_prefix(me.runs, before), before - 1)
        if end is None or end < 0 or mine is None or leader.leo != leader.epoch_start:
            return
        begin = 0
        known = leader.leo
        for epoch, stop in leader.runs:
            if epoch > mine:
                known = begin
                break
            begin = stop
        if not end < known:
            return
        if not leader.epoch_start_exact:
            if known == leader.leo:
                leader.set_leo(end)
                leader.epoch_start = end
                self.inferred["a new leader's LEO from OffsetForLeaderEpoch"] += 1
            return
        older = _epoch_at(leader.runs, end - 1) if end > 0 else None
        if (older is None or end >= before or me.unsure_from is None or me.unsure_from > end
                or f in part.zk_isr):
            return
        me.runs = _merge((*_prefix(me.runs, end), (older, before)))
        self.inferred["a crashed follower's tail from OffsetForLeaderEpoch"] += 1

    def _leader_append(self, part: _Partition, r: int, fields: Mapping[str, TraceValue]) -> _Plan:
        base, last = _int(fields, "base_offset"), _int(fields, "last_offset")
        epoch = _int(fields, "leader_epoch")
        me = part.replicas[r]
        if base is None or last is None or last < base:
            return self._stutter("LEADER_APPEND without base_offset or last_offset")
        epoch = me.epoch if epoch is None else epoch
        plan = _Plan(actions=(_action("leader_append", r=part.index(r)),),
                     leos={r: base}, cuts=_cuts(base, last + 1, last + 2), involved=(r,))
        plan.expect.append(("log end offset", "leo", part.index(r), None))
        plan.reported_offset = last + 1

        def commit() -> None:
            me.set_leo(base)
            me.runs = _merge((*me.runs, (epoch if epoch is not None else 0, last + 1)))
            me.leo = last + 1

        plan.commit = commit
        return plan

    def _follower_fetch(self, part: _Partition, r: int, fields: Mapping[str, TraceValue]) -> _Plan:
        f, offset = _int(fields, "replica"), _int(fields, "fetch_offset")
        if f is None or offset is None:
            return self._stutter("FOLLOWER_FETCH without replica or fetch_offset")
        part.index(f)
        lead, follower = part.replicas[r], part.replicas[f]
        # A request the network delayed reaches the leader after its sender crashed or moved to
        # a later epoch: it was sent while the sender followed this leader in its epoch (the
        # leader fences other epochs, KIP-320), so it is replayed from that state, with its
        # response lost (the sender has moved on).
        current = (follower.role == "FOLLOWER" and not follower.pending and follower.live
                   and follower.leader == r and follower.epoch == lead.epoch)
        recorded = lead.remote.get(f, -1)
        if current and offset < recorded and lead.remote_incarnation.get(f) == follower.restarts:
            # A duplicated or reordered request of this incarnation, overtaken by a later one:
            # the leader keeps the highest fetch offset it saw of an incarnation (a follower's
            # log only grows while it follows one leader epoch), and the follower answers only
            # its latest request, so it changes nothing (seed 1678).
            return self._stutter("FOLLOWER_FETCH overtaken by a later one of its incarnation")
        plan = _Plan(actions=(_action("follower_fetch", f=part.index(f), delivered=current),),
                     leos={f: offset}, involved=(r, f))
        if not current:
            if lead.epoch is None:
                return self._stutter("FOLLOWER_FETCH at a replica that never led")
            if offset <= lead.remote.get(f, -1):
                # The leader keeps the highest fetch offset it saw: an older one teaches it
                # nothing.
                return self._stutter("FOLLOWER_FETCH older than the leader's record of it")
            self.inferred["FOLLOWER_FETCH sent before its sender moved on"] += 1
            plan.roles[f] = "FOLLOWER"
            plan.epochs[f] = lead.epoch
            plan.leaders[f] = r
        plan.cuts = _cuts(offset, lead.leo, offset + 1)
        source = lead.runs

        def commit() -> None:
            before = (lead.remote.get(f), follower.leo, follower.hw, follower.runs,
                      follower.hw_exact, follower.reported_leo, follower.unsure_from)
            lead.remote[f] = offset
            lead.remote_incarnation[f] = follower.restarts
            if current:
                follower.set_leo(offset, source)
                follower.runs = _splice(follower.runs, offset, lead.runs, lead.leo)
                follower.leo = lead.leo
                follower.hw = min(lead.hw, lead.leo)
                follower.hw_exact = False
            plan.unchanged = before == (lead.remote.get(f), follower.leo, follower.hw,
                                        follower.runs, follower.hw_exact,
                                        follower.reported_leo, follower.unsure_from)

        plan.cacheable = current
        plan.commit = commit
        return plan

    def _hw_advance(self, part: _Partition, r: int, fields: Mapping[str, TraceValue]) -> _Plan:
        new = _int(fields, "high_watermark")
        if new is None:
            return self._stutter("HW_ADVANCE without high_watermark")
        me = part.replicas[r]
        isr = _ints(fields, "isr")
        old = me.hw
        if not me.hw_exact and old >= new > 0:
            # The HW it had as a follower came with a response that may have been lost: the
            # reported advance says it was lower.
            old = new - 1
            plan_hw: dict[int, int] = {r: old}
            self.inferred["HW_ADVANCE from an HW a lost response may not have brought"] += 1
        else:
            plan_hw = {}
        cuts = _cuts(old, new) if old > 0 else _cuts(new, me.leo, new + 1)
        plan = _Plan(actions=(_action("hw_advance", r=part.index(r)),), cuts=cuts,
                     hws=plan_hw, involved=(r,))
        if isr is not None:
            plan.isrs[r] = isr
        plan.expect.append(("high watermark", "hw", part.index(r), None))
        plan.reported_offset = new

        def commit() -> None:
            me.hw, me.hw_exact = new, True
            if isr is not None:
                me.isr = isr
            if new > part.committed_len:
                part.committed = _splice(part.committed, part.committed_len, me.runs, new)
                part.committed_len = new

        plan.commit = commit
        return plan

    def _isr_change(self, part: _Partition, r: int, fields: Mapping[str, TraceValue]) -> _Plan:
        isr = _ints(fields, "isr")
        if isr is None:
            return self._stutter("ISR change without isr")
        for member in isr:
            part.index(member)
        me = part.replicas[r]
        removed = [b for b in me.isr if b not in isr]
        added = [b for b in isr if b not in me.isr]

        def commit() -> None:
            me.isr = isr
            if part.zk_leader == r and part.zk_epoch == me.epoch:
                part.zk_isr = isr
            for b in added:  # back in an ISR: its log before its last crash no longer matters
                part.replicas[b].crash_leo = -1

        if not removed and not added:
            return self._stutter("ISR change that changes nothing", commit)
        actions = [_action("isr_shrink", f=part.index(b)) for b in removed]
        actions += [_action("isr_expand", f=part.index(b)) for b in added]
        hw = me.hw
        if added:
            remote = min(me.remote.get(b, -1) for b in added)
            start = me.epoch_start
            if remote >= max(hw, start):
                # Kafka's form of KIP-320 rule 4 holds (the follower reached both the HW and
                # the leader's epoch start, so it holds every record a leader may have
                # committed): HW and epoch start are one abstract offset, which satisfies the
                # model's form (the HW reached the epoch start).
                cuts = _cuts(max(hw, start) + 1, max(hw, start) + 2)
            elif remote < hw:
                cuts = _cuts(hw, start if start > hw else hw + 1)
            else:
                cuts = _cuts(hw, start)
        else:
            cuts = _cuts(part.committed_len, me.leo)
        plan = _Plan(actions=tuple(actions), cuts=cuts, involved=(r, *removed, *added))
        plan.expect.append(("new ISR", "zk_isr", None, self._isr_array(part, isr)))
        plan.commit = commit
        return plan

    def _crash(self, part: _Partition, r: int, fields: Mapping[str, TraceValue]) -> _Plan:
        me = part.replicas[r]

        def commit() -> None:
            me.live, me.role, me.pending = False, "OFFLINE", False
            me.crash_leo = max(me.crash_leo, me.leo)
            if me.leo > me.reported_leo:
                me.unsure_from = (me.reported_leo if me.unsure_from is None
                                  else min(me.unsure_from, me.reported_leo))

        # A CRASH of a replica last seen crashed: its broker restarted without reporting it
        # (its dir had failed) and crashed again (seed 15).
        revived = self._revived(me, part.index(r))
        return _Plan(actions=(*revived, _action("crash", r=part.index(r))), commit=commit)

    def _restart(self, part: _Partition, r: int, fields: Mapping[str, TraceValue]) -> _Plan:
        me = part.replicas[r]
        index = part.index(r)
        # A replica the broker held no state for when it crashed had no CRASH event: its
        # restart says the process died too.
        crashed = () if not me.live else (_action("crash", r=index),)
        if crashed:
            self.inferred["RESTART without CRASH"] += 1

        def commit() -> None:
            me.live, me.role, me.pending = True, "OFFLINE", False
            me.restarts += 1

        return _Plan(actions=(*crashed, _action("restart", r=index)), commit=commit)

    # --- building the model state -------------------------------------------------------------

    def _isr_array(self, part: _Partition, isr: Sequence[int]) -> Any:
        if part.width != self._width:
            self._use(part.width)
        template = self._initial.zk_isr
        values = [index < len(part.brokers) and part.brokers[index] in isr
                  for index in range(part.width)]
        return _array(template, "zk_isr", values)

    def _build(self, part: _Partition, plan: _Plan) -> Any:
        """The model state abstracting the mirror under ``plan`` (interned by its key).

        The hot path of the checker (every event that misses the follower-fetch memo): one pass
        over the replicas with the offset map inlined (unrolled for the usual three); the
        reference for what it computes is the definition of the key in the module docstring.
        """
        c1, c2 = plan.cuts
        zk = plan.zk
        zk_leader, zk_epoch, zk_isr = (
            zk if zk is not None else (part.zk_leader, part.zk_epoch, part.zk_isr)
        )
        brokers = part.brokers
        count = len(brokers)
        wide = count > _REPLICAS
        no_isr, no_remote = (_NO_ISR, _NO_REMOTE) if not wide else (
            (False,) * count, (-1,) * count)
        replicas = part.replicas
        roles, epochs_of, leaders_of = plan.roles, plan.epochs, plan.leaders
        leos_of, hws_of, isrs_of = plan.leos, plan.hws, plan.isrs
        involved, up, down = plan.involved, plan.up, plan.down
        rows: list[tuple[Any, ...]] = []
        epochs: set[float] = set()
        others: set[float] = set()
        #: the record epochs among ``epochs`` (the slots of the logs the event is about)
        records: set[float] = set()
        if zk_epoch is not None:
            epochs.add(zk_epoch)
        for index in range(count):
            broker = brokers[index]
            replica = replicas[broker]
            role = roles.get(broker)
            if role is None:
                role = "OFFLINE" if replica.pending else replica.role
            epoch = epochs_of.get(broker, replica.epoch) if epochs_of else replica.epoch
            followed = leaders_of.get(broker, replica.leader) if leaders_of else replica.leader
            own_leo = replica.leo
            leo = leos_of.get(broker, own_leo) if leos_of else own_leo
            runs = replica.runs
            if leo > own_leo:
                lead = replicas.get(followed)
                runs = _splice(runs, own_leo, lead.runs if lead else (), leo)
            hw = hws_of.get(broker, replica.hw) if hws_of else replica.hw
            hw = min(hw, leo)
            if leo < c1:
                abstract_leo = -1 if leo < 0 else 0
                slot0 = slot1 = None
            elif leo < c2:
                abstract_leo = 1
                slot0, slot1 = _epoch_at(runs, c1 - 1), None
            else:
                abstract_leo = 2
                slot0, slot1 = _epoch_at(runs, c1 - 1), _epoch_at(runs, c2 - 1)
            bucket = (epochs if not involved or broker in involved or role == "LEADER"
                      else others)
            if epoch is not None:
                bucket.add(epoch)
            if slot0 is not None:
                bucket.add(slot0)
                if bucket is epochs:
                    records.add(slot0)
            if slot1 is not None:
                bucket.add(slot1)
                if bucket is epochs:
                    records.add(slot1)
            if role == "LEADER":
                isr = isrs_of.get(broker, replica.isr) if isrs_of else replica.isr
                local = _flags(brokers, isr)
                fetched = replica.remote.get
                if wide:
                    remote = tuple(-1 if other == index else _off(fetched(brokers[other], -1),
                                                                  c1, c2)
                                   for other in range(count))
                else:
                    remote = (
                        -1 if index == 0 else _off(fetched(brokers[0], -1), c1, c2),
                        -1 if index == 1 or count < 2 else _off(fetched(brokers[1], -1), c1, c2),
                        -1 if index == 2 or count < 3 else _off(fetched(brokers[2], -1), c1, c2),
                    )
            else:
                local, remote = no_isr, no_remote
            start = replica.epoch_start
            start = min(start, leo)
            rows.append((role, epoch, brokers.index(followed) if followed in brokers else 0,
                         slot0, slot1, abstract_leo,
                         -1 if hw < 0 else (0 if hw < c1 else (1 if hw < c2 else 2)),
                         -1 if start < 0 else (0 if start < c1 else (1 if start < c2 else 2)),
                         local, remote, (replica.live or broker in up) and broker not in down))
        committed_runs, committed_concrete = (
            plan.committed if plan.committed is not None else (part.committed, part.committed_len))
        committed_len = _off(committed_concrete, c1, c2)
        committed0 = _epoch_at(committed_runs, c1 - 1) if committed_len >= 1 else None
        committed1 = _epoch_at(committed_runs, c2 - 1) if committed_len >= 2 else None
        if committed0 is not None:
            epochs.add(committed0)
            records.add(committed0)
        if committed1 is not None:
            epochs.add(committed1)
            records.add(committed1)
        rank = _ranks(epochs, others, plan.epoch_limit)
        if len(epochs) > plan.epoch_limit:
            fallback = plan.fallback_cuts
            merging = len({rank[epoch] for epoch in records}) < len(records)
            if fallback is not None and fallback != plan.cuts and merging:
                # Merged, two different record epochs would have one rank: records of
                # diverging logs would look alike (a log a replica kept from before it was
                # removed, against the log written since). The cuts that need fewest epochs
                # are tried instead (once: they are kept whatever they need, and are the
                # plan's fallback too from then on).
                self.inferred["a truncation built at its fewest-epoch cuts"] += 1
                plan.cuts = fallback
                return self._build(part, plan)
            stale = [brokers[index] for index, row in enumerate(rows)
                     if row[0] == "LEADER" and brokers[index] not in involved
                     and brokers[index] != zk_leader]
            if fallback is not None and merging and stale:
                # A truncation still merged at those cuts: a deposed leader the event is not
                # about (its LeaderAndIsr not arrived yet) holds a rank of its own, as every
                # leader does, and the oldest record epochs share one (seed 4492: a follower's
                # record of epoch 0, written in its own deposed leadership, looked like the
                # leader's of epoch 1, and the model kept it). It is shown OFFLINE instead, as a
                # stale leader of a merged epoch is: its epoch no longer takes a rank, and what
                # it may still do is checked at its own events, where it is involved (once:
                # none is left).
                self.inferred["a stale leader shown OFFLINE where record epochs merged"] += 1
                plan.roles = {**plan.roles, **dict.fromkeys(stale, "OFFLINE")}
                return self._build(part, plan)
            rows = self._demote_merged_leaders(rows, rank, brokers, keep=(*involved, zk_leader),
                                               blank=(no_isr, no_remote))
        ranked = tuple([
            (role, rank[epoch] or 1, leader, rank[slot0], rank[slot1], leo, hw, start, local,
             remote, live)
            for role, epoch, leader, slot0, slot1, leo, hw, start, local, remote, live in rows
        ])
        if count < _REPLICAS:
            ranked += _ABSENT_ROWS[count]
        key = (
            brokers.index(zk_leader) if zk_leader in brokers else -1,
            rank[zk_epoch] or 1,
            _flags(brokers, zk_isr),
            ranked,
            committed_len,
            rank[committed0],
            rank[committed1],
        )
        if plan.expect:
            plan.expect = [self._resolve(item, plan, c1, c2) for item in plan.expect]
        built = _STATES.get(key)
        if built is None:
            # keys that differ only where the state does not (an HW above the LEO) share one
            # state object, so the memoized model answers for it once
            state = self._state_of(key)
            built = _STATES[key] = _BY_VALUE.setdefault(state, state)
        return built

    def _demote_merged_leaders(
        self, rows: list[tuple[Any, ...]], rank: Mapping[float | None, int], brokers: list[int],
        *, keep: tuple[int, ...], blank: tuple[tuple[bool, ...], tuple[int, ...]],
    ) -> list[tuple[Any, ...]]:
        """When old epochs were merged into one rank, two stale leaders of different epochs
        would lead in one abstract epoch (a false LEADER_UNIQUE). A leader the event is not
        about and that is not ZooKeeper's (a replica deposed or removed by a reassignment whose
        LeaderAndIsr or StopReplica has not reached it) is then shown OFFLINE: what it may
        still do is checked at its own events, where it is involved. ``keep``: the brokers never
        demoted (the event's, ZooKeeper's leader); ``blank``: a non-leader's ISR and fetch
        offsets."""
        seen: dict[int, set[float]] = {}
        for row in rows:
            if row[0] == "LEADER":
                seen.setdefault(rank[row[1]], set()).add(row[1])
        clashing = {value for value, concrete in seen.items() if len(concrete) > 1}
        if not clashing:
            return rows
        out = []
        for index, row in enumerate(rows):
            if row[0] == "LEADER" and rank[row[1]] in clashing and brokers[index] not in keep:
                self.inferred["a stale leader shown OFFLINE where old epochs merged"] += 1
                out.append(("OFFLINE", *row[1:8], *blank, row[10]))
            else:
                out.append(row)
        return out

    @staticmethod
    def _resolve(item: tuple[str, str, Any, Any], plan: _Plan, c1: int,
                 c2: int) -> tuple[str, str, Any, Any]:
        what, variable, index, expected = item
        if expected is None:
            return (what, variable, index, _off(plan.reported_offset, c1, c2))
        return item

    def _state_of(self, key: tuple[Any, ...]) -> Any:
        zk_leader, zk_epoch, zk_isr, rows, committed_len, committed0, committed1 = key
        initial = self._initial
        role_of = {"LEADER": self._roles.LEADER, "FOLLOWER": self._roles.FOLLOWER}
        replicas = range(len(rows))
        log: dict[tuple[int, int], int] = {}
        local: dict[tuple[int, int], bool] = {}
        remote: dict[tuple[int, int], int] = {}
        for r, row in enumerate(rows):
            log[(r, 0)], log[(r, 1)] = row[3], row[4]
            for t in replicas:
                local[(r, t)] = bool(row[8][t])
                remote[(r, t)] = row[9][t]
        return initial.replace(
            zk_leader=zk_leader,
            zk_epoch=zk_epoch,
            zk_isr=_array(initial.zk_isr, "zk_isr", list(zk_isr)),
            live=_array(initial.live, "live", [row[10] for row in rows]),
            role=_array(initial.role, "role",
                        [role_of.get(row[0], self._roles.OFFLINE) for row in rows]),
            epoch=_array(initial.epoch, "epoch", [row[1] for row in rows]),
            leader=_array(initial.leader, "leader", [row[2] for row in rows]),
            log=_keyed(initial.log, log),
            leo=_array(initial.leo, "leo", [row[5] for row in rows]),
            hw=_array(initial.hw, "hw", [min(row[6], row[5]) for row in rows]),
            epoch_start=_array(initial.epoch_start, "epoch_start", [row[7] for row in rows]),
            local_isr=_keyed(initial.local_isr, local),
            remote_leo=_keyed(initial.remote_leo, remote),
            committed=_array(initial.committed, "committed", [committed0, committed1]),
            committed_len=committed_len,
        )


_Planner = Callable[
    [ReplicationAbstraction, _Partition, int, Mapping[str, TraceValue]], _Plan
]
_PLANNERS: dict[str, _Planner] = {
    "BECOME_LEADER": ReplicationAbstraction._become_leader,
    "BECOME_FOLLOWER": ReplicationAbstraction._become_follower,
    "LEADER_APPEND": ReplicationAbstraction._leader_append,
    "FOLLOWER_FETCH": ReplicationAbstraction._follower_fetch,
    "HW_ADVANCE": ReplicationAbstraction._hw_advance,
    "ISR_SHRINK": ReplicationAbstraction._isr_change,
    "ISR_EXPAND": ReplicationAbstraction._isr_change,
    "TRUNCATE": ReplicationAbstraction._truncate,
    "CRASH": ReplicationAbstraction._crash,
    "RESTART": ReplicationAbstraction._restart,
}

def _ranks(important: set[float], others: set[float], limit: int) -> dict[float | None, int]:
    """Epochs renumbered 1..``limit`` in order. When there are more, the values of the
    replicas the event is not about map to the nearest kept value below them, then the oldest
    kept values merge into rank 1."""
    rank: dict[float | None, int] = {None: 0}
    every = sorted(important | others)
    if len(every) <= limit:
        for position, value in enumerate(every):
            rank[value] = position + 1
        return rank
    ordered = sorted(important)
    drop = max(0, len(ordered) - limit)
    for position, value in enumerate(ordered):
        rank[value] = max(1, position + 1 - drop)
    for value in others:
        if value not in rank:
            below = [kept for kept in ordered if kept <= value]
            rank[value] = rank[below[-1]] if below else 1
    return rank


_NO_ISR = (False, False, False)
_NO_REMOTE = (-1, -1, -1)
#: the rows of the replicas a partition has not met yet, by how many it has met
_ABSENT_ROWS = tuple(
    tuple(("OFFLINE", 1, 0, 0, 0, 0, 0, 0, _NO_ISR, _NO_REMOTE, True)
          for _ in range(_REPLICAS - known))
    for known in range(_REPLICAS + 1)
)


def _off(offset: int, c1: int, c2: int) -> int:
    """An offset under the cuts ``c1 < c2`` (-1 stays -1: no offset)."""
    return -1 if offset < 0 else (0 if offset < c1 else (1 if offset < c2 else 2))


def _flags(brokers: list[int], members: Sequence[int]) -> tuple[bool, ...]:
    """Which model replicas are among ``members``."""
    count = len(brokers)
    if count > _REPLICAS:
        return tuple(broker in members for broker in brokers)
    return (count > 0 and brokers[0] in members, count > 1 and brokers[1] in members,
            count > 2 and brokers[2] in members)
#: abstract key -> model state; (variable, values) -> array (pure functions' caches)
_STATES: dict[tuple[Any, ...], Any] = {}
_ARRAYS: dict[tuple[str, tuple[Any, ...]], Any] = {}
_BY_VALUE: dict[Any, Any] = {}
#: (template identity, values) -> (template, array): the arrays indexed by replica pairs
_KEYED: dict[tuple[int, tuple[Any, ...]], tuple[Any, Any]] = {}


def _array(template: Any, name: str, values: list[Any]) -> Any:
    key = (name, tuple(values))
    found = _ARRAYS.get(key)
    if found is None:
        found = template
        for index, value in enumerate(values):
            found = found.set(index, value)
        _ARRAYS[key] = found
    return found


def _keyed(template: Any, values: Mapping[Any, Any]) -> Any:
    key = (id(template), tuple(values.items()))
    found = _KEYED.get(key)
    if found is None or found[0] is not template:
        array = template
        for index, value in values.items():
            if array[index] != value:
                array = array.set(index, value)
        found = _KEYED[key] = (template, array)
    return found[1]


class _SafetyOnly:
    """A model whose ``check_invariants`` reports only its safety invariants (not the lemmas)."""

    def __init__(self, model: Any) -> None:
        from model._dsl import ActionNotEnabled  # noqa: PLC0415 (optional layer)

        self._model = model
        self._safety = [(name, invariant) for name, invariant in model.invariants.items()
                        if invariant.kind == "safety"]
        self._not_enabled = ActionNotEnabled
        self.name: str = model.name

    def enabled(self, state: Any, action: str, params: Mapping[str, Any] | None = None) -> bool:
        return bool(self._model.enabled(state, action, params))

    def step(self, state: Any, action: str, params: Mapping[str, Any] | None = None) -> Any:
        return self._model.step(state, action, params)

    def step_if_enabled(
        self, state: Any, action: str, params: Mapping[str, Any] | None = None
    ) -> Any:
        """The successor, or ``None`` when the action is not enabled: the model's ``step``
        evaluates the guard itself, so a memo miss evaluates it once instead of twice."""
        try:
            return self._model.step(state, action, params)
        except self._not_enabled:
            return None

    def check_invariants(self, state: Any) -> list[str]:
        return [name for name, _ in self._safety if not self._model.holds(state, name)]


_SHARED: dict[tuple[str, int], tuple[MemoizedModel, Any, Any]] = {}


def shared_model(variant: str = "shipped",
                 replicas: int = _REPLICAS) -> tuple[MemoizedModel, Any, Any]:
    """The replication model of ``variant`` over ``replicas`` replicas (memoized, safety
    invariants only), its initial state and its ``ReplicaRole`` enum, built once per process (a
    pure function's cache)."""
    key = (variant, replicas)
    if key not in _SHARED:
        from dataclasses import replace  # noqa: PLC0415 (with the optional layer)

        from model import replication as model_module  # noqa: PLC0415 (optional layer)

        definition = model_module.MODELS[0]
        chosen = next(v for v in definition.variants if v.name == variant)
        if replicas != _REPLICAS:
            chosen = replace(chosen, flags={**chosen.flags, "replicas": replicas})
        model = definition.build(chosen)
        _SHARED[key] = (MemoizedModel(_SafetyOnly(model)), model.initial_states()[0],
                        model_module.ReplicaRole)
    return _SHARED[key]


def replication_abstraction(policy: str = "LEADER_EPOCH") -> ReplicationAbstraction:
    """A fresh abstraction (its mirror is per run) checked against the policy's model variant.

    Raises:
        KeyError: an unknown policy.
    """
    model, initial, roles = shared_model(POLICIES[policy])
    return ReplicationAbstraction(model, initial, roles, policy)


def abstractions(policy: str = "LEADER_EPOCH") -> list[Abstraction]:
    """The abstractions a simulated cluster run checks ``replication`` events with."""
    return [replication_abstraction(policy)]
