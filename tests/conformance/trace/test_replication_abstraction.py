"""The replication abstraction: real replication-core traces conform; tampered ones are refused.

The cluster below is a synchronous stand-in for the broker shells: three brokers host one
partition, a controller elects leaders from the ISR as the real controller does, and every
decision is taken by the replication core (``decide_leader_and_isr``, ``leader_high_watermark``,
``desired_isr``, ``with_isr``, ``follower_truncation_offset``); the events the shells emit
(LEADER_APPEND, FOLLOWER_FETCH, HW_ADVANCE, ISR_SHRINK/ISR_EXPAND, TRUNCATE; CRASH and RESTART as
the cluster simulator's brokers emit them) carry the fields the shells put in them. A seeded
workload produces, fetches (sometimes partially), lets followers lag out of the ISR, and kills
and restarts brokers.
"""

from __future__ import annotations

import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance import replication_abstraction as log_arithmetic
from conformance.cluster_sim import ClusterConfig, simulate
from conformance.replication_abstraction import abstractions, replication_abstraction
from conformance.trace_check import Abstraction, TraceChecker, check_trace
from impl.broker import replication as core
from impl.trace import ListTraceSink, TraceEvent

TOPIC, PARTITION = "t", 0
TP = f"{TOPIC}-{PARTITION}"
LAG_MS = 50


@dataclass
class _Broker:
    broker_id: int
    live: bool = True
    state: core.ReplicaState | None = None
    log: list[int] = field(default_factory=list)  # the leader epoch of each record
    hw: int = 0
    truncated: bool = True
    follower_leos: dict[int, int] = field(default_factory=dict)
    caught_up_ms: dict[int, int] = field(default_factory=dict)
    leo_at_fetch: dict[int, int] = field(default_factory=dict)


class Cluster:
    """Three brokers, one partition, the replication core deciding; events into ``sink``."""

    def __init__(self, seed: int, policy: core.TruncationPolicy, network: bool = False) -> None:
        self.rng = random.Random(seed)
        self.policy = policy
        #: fetch requests delayed and delivered late, responses lost, deaths noticed late
        self.network = network
        self.late: list[tuple[int, int, int, int]] = []
        self.unnoticed: set[int] = set()
        self.sink = ListTraceSink()
        self.brokers = {b: _Broker(b) for b in (0, 1, 2)}
        self.replicas = (0, 1, 2)
        self.leader = -1
        self.leader_epoch = -1
        self.isr: tuple[int, ...] = self.replicas
        self.partition_epoch = 0
        self.now_ms = 0
        #: the most OffsetForLeaderEpoch answers one truncation took
        self.truncation_rounds = 0
        self._elect()

    # --- the controller ---------------------------------------------------------------------

    def _elect(self) -> None:
        live_isr = tuple(r for r in self.isr
                         if self.brokers[r].live or r in self.unnoticed)
        if not live_isr:
            return
        self.leader = live_isr[0]
        self.isr = live_isr
        self.leader_epoch += 1
        self.partition_epoch += 1
        self._send()

    def _send(self, only: int | None = None) -> None:
        assignment = core.PartitionAssignment(
            TOPIC, PARTITION, 1, self.leader, self.leader_epoch, self.isr, self.partition_epoch,
            self.replicas, False,
        )
        for broker in sorted(self.brokers.values(), key=lambda b: b.broker_id):
            if not broker.live or (only is not None and broker.broker_id != only):
                continue
            decision = core.decide_leader_and_isr(
                broker.broker_id, broker.state, assignment, hosted=True, replica_offline=False,
                any_dir_offline=False, trace=self.sink,
            )
            if decision.state is None:
                continue
            broker.state = decision.state
            if decision.became_leader:
                broker.follower_leos, broker.leo_at_fetch = {}, {}
                broker.caught_up_ms = dict.fromkeys(decision.state.isr, self.now_ms)
            if decision.state.role is core.ReplicaRole.FOLLOWER:
                broker.truncated = False

    def _shell_event(self, broker: _Broker, name: str, **fields: object) -> None:
        role = broker.state.role.value if broker.state is not None else "NONE"
        self.sink.emit(TraceEvent.of("replication", name, f"{TP}@{broker.broker_id}", role,
                                     role, **fields))

    # --- the leader -------------------------------------------------------------------------

    def produce(self) -> None:
        leader = self.brokers[self.leader]
        if not leader.live or leader.state is None or leader.state.role is not (
                core.ReplicaRole.LEADER):
            return
        count = self.rng.randint(1, 3)
        base = len(leader.log)
        leader.log.extend([leader.state.leader_epoch] * count)
        self._shell_event(leader, "LEADER_APPEND", base_offset=base,
                          last_offset=base + count - 1, leader_epoch=leader.state.leader_epoch)
        self._advance_hw(leader)

    def _advance_hw(self, leader: _Broker) -> None:
        assert leader.state is not None
        new = core.leader_high_watermark(leader.hw, len(leader.log), leader.follower_leos,
                                         leader.state.isr, leader.broker_id)
        if new != leader.hw:
            leader.hw = new
            self._shell_event(leader, "HW_ADVANCE", high_watermark=new, isr=leader.state.isr)

    def _maybe_change_isr(self, leader: _Broker) -> None:
        assert leader.state is not None
        wanted = core.desired_isr(leader.state, leader.hw,
                                  follower_log_end_offsets=leader.follower_leos,
                                  last_caught_up_ms=leader.caught_up_ms, now_ms=self.now_ms,
                                  lag_time_max_ms=LAG_MS,
                                  leader_epoch_start_offset=self._epoch_start(leader))
        if set(wanted) == set(leader.state.isr):
            return
        old = leader.state.isr
        self.partition_epoch += 1
        self.isr = wanted
        leader.state = core.with_isr(leader.state, wanted, self.partition_epoch)
        self._shell_event(leader, "ISR_SHRINK" if len(wanted) < len(old) else "ISR_EXPAND",
                          isr=wanted, partition_epoch=self.partition_epoch)
        self._advance_hw(leader)

    # --- a follower -------------------------------------------------------------------------

    @staticmethod
    def _epoch_start(leader: _Broker) -> int:
        """The first offset of the leader's current epoch (its LEO until it appends)."""
        assert leader.state is not None
        return next((offset for offset, epoch in enumerate(leader.log)
                     if epoch == leader.state.leader_epoch), len(leader.log))

    @staticmethod
    def _epoch_answer(leader: _Broker, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: the largest epoch <= ``epoch`` the leader's log holds (-1: none)
        and the start of the first epoch above ``epoch`` (else the LEO)."""
        answered = max((e for e in leader.log if e <= epoch), default=-1)
        for offset, record_epoch in enumerate(leader.log):
            if record_epoch > epoch:
                return answered, offset
        return answered, len(leader.log)

    def _truncation(self, follower: _Broker, leader: _Broker) -> tuple[int, int | None, int]:
        """The fetcher's OffsetForLeaderEpoch exchange (KIP-279): the truncation point, the
        first answer's end offset and the number of answers."""
        before = len(follower.log)
        if not self.policy.asks_leader:
            step = core.follower_truncation_offset(self.policy, log_end_offset=before,
                                                   log_start_offset=0, high_watermark=follower.hw)
            return step.offset, None, 0
        epochs = [(e, i) for i, e in enumerate(follower.log) if i == 0 or follower.log[i - 1] != e]
        step = core.TruncationStep(before, follower.log[-1] if follower.log else None)
        first_end: int | None = None
        rounds = 0
        while step.ask_epoch is not None and rounds < core.MAX_TRUNCATION_ROUNDS:
            answered, end = self._epoch_answer(leader, step.ask_epoch)
            first_end = end if first_end is None else first_end
            rounds += 1
            step = core.follower_truncation_offset(
                self.policy, log_end_offset=step.offset, log_start_offset=0,
                high_watermark=follower.hw, leader_epoch_end_offset=end, leader_epoch=answered,
                epochs=epochs)
        return step.offset, first_end, rounds

    def fetch(self, follower_id: int) -> None:
        follower = self.brokers[follower_id]
        state = follower.state
        if not follower.live or state is None or state.role is not core.ReplicaRole.FOLLOWER:
            return
        leader = self.brokers[state.leader]
        if (not leader.live or leader.state is None or leader.state.role is not
                core.ReplicaRole.LEADER or leader.state.leader_epoch != state.leader_epoch):
            return
        if not follower.truncated:
            before = len(follower.log)
            target, end, rounds = self._truncation(follower, leader)
            self.truncation_rounds = max(self.truncation_rounds, rounds)
            if target < before:
                del follower.log[target:]
                fields: dict[str, object] = {"policy": self.policy.value,
                                             "log_end_offset": before, "truncated_to": target}
                if self.policy.asks_leader:
                    fields["leader_epoch_end"] = end
                    fields["rounds"] = rounds
                else:
                    fields["high_watermark"] = follower.hw
                self._shell_event(follower, "TRUNCATE", **fields)
            follower.hw = min(follower.hw, len(follower.log))
            follower.truncated = True
        offset = len(follower.log)
        if self.network and self.rng.random() < 0.15:
            self.late.append((follower_id, state.leader, state.leader_epoch, offset))
            return
        self._serve(follower_id, state.leader, state.leader_epoch, offset)

    def deliver_late(self) -> None:
        if self.late:
            self._serve(*self.late.pop(self.rng.randrange(len(self.late))))

    def _serve(self, follower_id: int, leader_id: int, epoch: int, offset: int) -> None:
        """The leader answers a fetch request (fenced unless it leads in the request's epoch);
        the response reaches the follower if it still waits for it."""
        leader = self.brokers[leader_id]
        if (not leader.live or leader.state is None or leader.state.role is not
                core.ReplicaRole.LEADER or leader.state.leader_epoch != epoch):
            return
        # the leader's ReplicaManager.record_follower_fetch
        if offset >= len(leader.log) or offset >= leader.leo_at_fetch.get(follower_id, 2**63):
            leader.caught_up_ms[follower_id] = self.now_ms
        leader.leo_at_fetch[follower_id] = len(leader.log)
        self._shell_event(leader, "FOLLOWER_FETCH", replica=follower_id, fetch_offset=offset)
        hw_sent = leader.hw
        if leader.follower_leos.get(follower_id, -1) < offset:
            leader.follower_leos[follower_id] = offset
            self._advance_hw(leader)
        self._maybe_change_isr(leader)
        follower = self.brokers[follower_id]
        waiting = follower.state
        if (not follower.live or waiting is None or waiting.role is not core.ReplicaRole.FOLLOWER
                or waiting.leader != leader_id or waiting.leader_epoch != epoch
                or not follower.truncated or len(follower.log) != offset):
            return
        if self.network and self.rng.random() < 0.1:
            return  # the response is lost
        # the response: up to the leader's LEO, sometimes cut short
        end = len(leader.log)
        if self.rng.random() < 0.2:
            end = self.rng.randint(offset, end)
        follower.log.extend(leader.log[offset:end])
        follower.hw = min(hw_sent, len(follower.log))

    # --- faults -----------------------------------------------------------------------------

    def kill(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        if not broker.live or sum(b.live for b in self.brokers.values()) <= 1:
            return
        if broker.state is not None:
            self._shell_event(broker, "CRASH")
        broker.live, broker.state = False, None
        if self.network and self.rng.random() < 0.5:
            self.unnoticed.add(broker_id)  # its session has not expired yet
            return
        self._notice(broker_id)

    def _notice(self, broker_id: int) -> None:
        """The controller learns that ``broker_id`` died."""
        self.unnoticed.discard(broker_id)
        if broker_id in self.isr or broker_id == self.leader:
            if broker_id == self.leader:
                self.isr = tuple(r for r in self.isr if r != broker_id) or self.isr
            self._elect()

    def restart(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        if broker.live:
            return
        if broker_id in self.unnoticed:
            self._notice(broker_id)
        broker.live = True
        self._shell_event(broker, "RESTART")
        if not any(self.brokers[r].live for r in self.isr if r != broker_id):
            self._elect()
        else:
            self._send(only=broker_id)

    def run(self, steps: int) -> list[TraceEvent]:
        for _ in range(steps):
            self.now_ms += self.rng.choice((1, 5, 20))
            roll = self.rng.random()
            if roll < 0.35:
                self.produce()
            elif roll < 0.85:
                self.fetch(self.rng.choice(self.replicas))
            elif roll < 0.9:
                leader = self.brokers[self.leader]
                if leader.live and leader.state is not None:
                    self._maybe_change_isr(leader)
            elif roll < 0.95:
                self.kill(self.rng.choice(self.replicas))
            else:
                self.restart(self.rng.choice(self.replicas))
            if self.network:
                if self.rng.random() < 0.1:
                    self.deliver_late()
                if self.unnoticed and self.rng.random() < 0.05:
                    self._notice(min(self.unnoticed))
        return list(self.sink)


def _trace(seed: int, steps: int = 300,
           policy: core.TruncationPolicy = core.TruncationPolicy.LEADER_EPOCH,
           network: bool = False) -> list[TraceEvent]:
    return Cluster(seed, policy, network).run(steps)


@pytest.mark.parametrize("seed", range(12))
def test_real_core_traces_conform(seed: int) -> None:
    events = _trace(seed)
    verdict = check_trace(events, abstractions())
    assert verdict.ok, verdict.violation.describe() if verdict.violation else ""
    assert verdict.events_checked == len(events)
    for action in ("become_leader", "become_follower", "leader_append", "follower_fetch",
                   "hw_advance", "crash", "restart"):
        assert verdict.actions.get(f"replication.{action}", 0) >= 1, (action, verdict.actions)


@pytest.mark.parametrize("seed", range(12))
def test_traces_with_late_requests_lost_responses_and_late_notice_conform(seed: int) -> None:
    """Fetch requests that reach the leader after their sender crashed or moved on, responses
    lost (the follower's HW lags what the trace showed it), and deaths the controller notices
    late (a crashed broker stays in the ISR it writes; its RESTART has no CRASH before it when
    it crashed again before any LeaderAndIsr)."""
    events = _trace(seed, network=True)
    abstraction = replication_abstraction()
    verdict = check_trace(events, [abstraction])
    assert verdict.ok, verdict.violation.describe() if verdict.violation else ""
    assert verdict.actions.get("replication.follower_fetch", 0) >= 1
    assert abstraction.stutters.keys() <= {"BECOME_FOLLOWER re-delivered in its epoch",
                                           "FOLLOWER_FETCH older than the leader's record of it",
                                           "FOLLOWER_FETCH overtaken by a later one of its "
                                           "incarnation"}


def test_the_network_schedule_reaches_what_the_abstraction_infers() -> None:
    inferred: Counter[str] = Counter()
    for seed in range(12):
        abstraction = replication_abstraction()
        check_trace(_trace(seed, network=True), [abstraction])
        inferred.update(abstraction.inferred)
    assert {"FOLLOWER_FETCH sent before its sender moved on",
            "RESTART without CRASH"} <= set(inferred), inferred


def test_isr_expansion_waits_for_the_leaders_epoch_start() -> None:
    """KIP-320 rule 4: a leader adds a follower to the ISR only once it reached both the HW and
    the start of the leader's own epoch. In this seed's trace a re-elected leader's HW lags its
    epoch start while a follower's LEO reaches the HW: an expansion there is refused by the
    model (the ``kip320_without_rule4`` model variant loses committed records so)."""
    events = _trace(21)
    verdict = check_trace(events, abstractions())
    assert verdict.ok, verdict.violation.describe() if verdict.violation else ""


def test_truncation_reaches_the_common_prefix() -> None:
    """KIP-279: a new follower truncates to the longest prefix it shares with the leader. When
    the leader never had the follower's latest epoch it answers the end of an older one; a
    single truncation there keeps records of the follower's own epoch the leader lacks
    (KAFKA-6361). In this seed's trace the follower truncates to the model's point."""
    events = _trace(3, steps=3000)
    verdict = check_trace(events, abstractions())
    assert verdict.ok, verdict.violation.describe() if verdict.violation else ""


def _index(events: list[TraceEvent], name: str, start: int = 0) -> int:
    return next(i for i in range(start, len(events)) if events[i].event == name)


def _with(event: TraceEvent, subject: str | None = None, **fields: object) -> TraceEvent:
    return TraceEvent.of(event.machine, event.event, subject or event.subject,
                         event.state_before, event.state_after,
                         **{**dict(event.fields), **fields})


def test_an_hw_that_goes_back_is_refused() -> None:
    events = _trace(0)
    pairs = [(i, j) for i, first in enumerate(events) if first.event == "HW_ADVANCE"
             and int(str(first.fields["high_watermark"])) > 1
             for j in [next((k for k in range(i + 1, len(events))
                             if events[k].subject == first.subject
                             and events[k].event in ("HW_ADVANCE", "BECOME_LEADER")), None)]
             if j is not None and events[j].event == "HW_ADVANCE"]
    first, second = pairs[0]
    lower = int(str(events[first].fields["high_watermark"])) - 1
    tampered = [*events[:second], _with(events[second], high_watermark=lower),
                *events[second + 1:]]
    violation = check_trace(tampered, abstractions(), "replay-cmd").violation
    assert violation is not None
    assert violation.index == second
    assert violation.kind == "not_enabled"
    assert violation.action.startswith("hw_advance(")
    assert "replay-cmd" in violation.describe()


def test_two_leaders_in_one_epoch_are_refused() -> None:
    events = _trace(0)
    index = _index(events, "BECOME_LEADER")
    elected = events[index]
    leader = int(elected.subject.rpartition("@")[2])
    isr = elected.fields["isr"]
    assert isinstance(isr, tuple)
    other = next(int(str(b)) for b in isr if b != leader)
    second = _with(elected, subject=f"{TP}@{other}", leader=other)
    tampered = [*events[: index + 1], second, *events[index + 1:]]
    violation = check_trace(tampered, abstractions()).violation
    assert violation is not None
    assert violation.index == index + 1
    assert (violation.kind, violation.invariant) == ("invariant", "LEADER_UNIQUE")


def test_a_fetch_past_the_leaders_log_end_is_refused() -> None:
    events = _trace(0)
    index = next(i for i, e in enumerate(events)
                 if e.event == "FOLLOWER_FETCH" and int(str(e.fields["fetch_offset"])) > 0)
    tampered = [*events[:index], _with(events[index], fetch_offset=10**6), *events[index + 1:]]
    violation = check_trace(tampered, abstractions()).violation
    assert violation is not None
    assert violation.index == index
    assert violation.kind == "not_enabled"
    assert violation.action.startswith("follower_fetch(")


def test_an_append_by_a_follower_is_refused() -> None:
    events = _trace(0)
    index = _index(events, "LEADER_APPEND")
    leader = int(events[index].subject.rpartition("@")[2])
    follower = next(b for b in (0, 1, 2) if b != leader)
    tampered = [*events[:index], _with(events[index], subject=f"{TP}@{follower}")]
    violation = check_trace(tampered, abstractions()).violation
    assert violation is not None
    assert violation.kind == "not_enabled"
    assert violation.action == f"leader_append(r={follower})"


def _high_watermark_loss() -> list[TraceEvent]:
    """A trace of the HIGH_WATERMARK policy in which a follower lost committed records."""
    for seed in range(40):
        events = _trace(seed, policy=core.TruncationPolicy.HIGH_WATERMARK)
        verdict = check_trace(events, abstractions("HIGH_WATERMARK"))
        if verdict.violation is not None and verdict.violation.kind == "invariant":
            return events
    raise AssertionError("no seed of 40 lost a committed record by truncating to the HW")


def test_truncation_to_the_hw_loses_committed_records() -> None:
    events = _high_watermark_loss()
    violation = check_trace(events, abstractions("HIGH_WATERMARK")).violation
    assert violation is not None
    assert violation.invariant in ("COMMITTED_DURABLE", "NO_COMMITTED_LOSS")
    assert violation.action.startswith("become_follower(")
    # Against the shipped model, a truncation to the HW is not the model's truncation.
    shipped = check_trace(events, abstractions()).violation
    assert shipped is not None
    assert shipped.kind in ("state_mismatch", "invariant", "not_enabled")
    assert events[shipped.index].event in ("TRUNCATE", "BECOME_FOLLOWER", "ISR_EXPAND")


def test_the_leader_epoch_policy_keeps_what_the_hw_policy_loses() -> None:
    for seed in range(12):
        events = _trace(seed)
        assert not any(e.event == "TRUNCATE" and e.fields.get("policy") == "HIGH_WATERMARK"
                       for e in events)
        assert check_trace(events, abstractions()).ok


def test_checking_is_deterministic_and_solver_free(monkeypatch: pytest.MonkeyPatch) -> None:
    z3 = sys.modules.get("z3")
    if z3 is not None:
        def refuse(*args: object, **kwargs: object) -> None:
            raise AssertionError("the trace checker called the solver")
        monkeypatch.setattr(z3.Solver, "check", refuse)
    events = _trace(0, steps=1500)
    checker = TraceChecker(abstractions())
    started = time.perf_counter()
    for event in events:
        assert checker.feed(event) is None
    elapsed = time.perf_counter() - started
    again = check_trace(events, abstractions())
    assert again == checker.verdict()
    assert elapsed >= 0  # measured for the report, never asserted
    assert replication_abstraction().stutters == {}


def _random_runs(rng: random.Random) -> tuple[tuple[int, int], ...]:
    runs: list[tuple[int, int]] = []
    end = 0
    for epoch in sorted(rng.sample(range(1, 9), rng.randint(0, 4))):
        end += rng.randint(1, 5)
        runs.append((epoch, end))
    return tuple(runs)


def test_remembered_log_arithmetic_answers_as_computed(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_prefix`` and ``_splice`` remember their answers (by value, cleared when full): the
    remembered answer is the computed one, also for equal runs held in other objects and past
    a clearing."""
    monkeypatch.setattr(log_arithmetic, "_CACHE_MAX", 16)
    rng = random.Random(7)
    for _ in range(2000):
        own, other = _random_runs(rng), _random_runs(rng)
        at, length = rng.randint(0, 20), rng.randint(0, 25)
        expected_prefix = log_arithmetic._prefix_of(own, at)
        expected_splice = log_arithmetic._splice_of(own, at, other, length)
        for _ in range(2):
            assert log_arithmetic._prefix(own, at) == expected_prefix
            assert log_arithmetic._prefix(tuple(pair for pair in own), at) == expected_prefix
            assert log_arithmetic._splice(own, at, other, length) == expected_splice
        assert len(log_arithmetic._PREFIXES) <= 16
        assert len(log_arithmetic._SPLICES) <= 16


def _mirror(abstraction: Any) -> list[Any]:
    return [
        (key, part.brokers[:], part.zk_leader, part.zk_epoch, part.zk_isr, part.committed,
         part.committed_len,
         [(b, r.role, r.epoch, r.leader, r.runs, r.leo, r.hw, r.epoch_start, r.isr,
           dict(r.remote), r.hw_exact, r.live, r.pending, r.reported_leo, r.unsure_from)
          for b, r in part.replicas.items()])
        for key, part in abstraction._partitions.items()
    ]


@pytest.mark.parametrize("seed", range(3))
def test_a_remembered_fetch_changes_nothing(seed: int) -> None:
    """A follower fetch replayed from the memo skips its commit: the commit would change
    nothing (a memo entry survives only a commit that changed nothing, and any change clears
    the memo). Simulated cluster runs, where idle followers poll."""
    remembered = Counter[bool]()

    def wrapped(config: ClusterConfig) -> list[Abstraction]:
        abstraction = replication_abstraction()
        mismatch = abstraction.mismatch

        def checked(state: Any, event: TraceEvent) -> str | None:
            assert abstraction._current is not None
            _, plan, from_memo = abstraction._current
            remembered[from_memo] += 1
            reason = mismatch(state, event)
            if from_memo:
                before = _mirror(abstraction)
                plan.commit()
                assert plan.unchanged
                assert _mirror(abstraction) == before
            return reason

        abstraction.mismatch = checked  # type: ignore[method-assign]
        return [abstraction]

    outcome = simulate(seed, ClusterConfig(steps=150, fault_probability=0.05),
                       abstractions=wrapped)
    assert outcome.trace_verdict.ok, outcome.trace_verdict
    assert remembered[True] > 0


def _scripted(*steps: tuple[str, int, dict[str, object]]) -> list[TraceEvent]:
    return [TraceEvent.of("replication", name, f"{TP}@{broker}", "NONE", "NONE", **fields)
            for name, broker, fields in steps]


def _crashed_follower_trace(crash: bool) -> list[TraceEvent]:
    """Broker 1 leads epoch 1, writes 0 (committed) and 1 (not), crashes; broker 0 leads
    epoch 2 from 1 and broker 1, back, truncates its own record 1 (OffsetForLeaderEpoch(1)
    answers 1). Broker 0 writes 1 in epoch 2 and broker 1 fetches from 1, its response assumed
    to bring it; with ``crash``, broker 1 crashes (its append, and its unflushed truncation,
    lost: its own record 1 of epoch 1 is back) before broker 0, committed up to 2 with broker
    2, leads epoch 3 from 2 without writing. Broker 1 follows it, asks for epoch 1 and is
    answered 1: it truncates to 1."""
    replicas = (0, 1, 2)

    def role(name: str, broker: int, epoch: int, leader: int, isr: tuple[int, ...],
             leo: int, hw: int) -> tuple[str, int, dict[str, object]]:
        return (name, broker, {"leader_epoch": epoch, "leader": leader, "isr": isr,
                               "replicas": replicas, "partition_epoch": epoch,
                               "log_end_offset": leo, "high_watermark": hw})

    def fetch(leader: int, follower: int, offset: int) -> tuple[str, int, dict[str, object]]:
        return ("FOLLOWER_FETCH", leader, {"replica": follower, "fetch_offset": offset})

    def append(leader: int, offset: int, epoch: int) -> tuple[str, int, dict[str, object]]:
        return ("LEADER_APPEND", leader, {"base_offset": offset, "last_offset": offset,
                                          "leader_epoch": epoch})

    def truncate(broker: int, before: int, to: int, end: int) -> tuple[str, int,
                                                                      dict[str, object]]:
        return ("TRUNCATE", broker, {"policy": "LEADER_EPOCH", "log_end_offset": before,
                                     "truncated_to": to, "leader_epoch_end": end, "rounds": 1})

    everyone = (0, 1, 2)
    steps = [
        role("BECOME_LEADER", 1, 1, 1, everyone, 0, 0),
        role("BECOME_FOLLOWER", 0, 1, 1, everyone, 0, 0),
        role("BECOME_FOLLOWER", 2, 1, 1, everyone, 0, 0),
        append(1, 0, 1), fetch(1, 0, 0), fetch(1, 2, 0), fetch(1, 0, 1), fetch(1, 2, 1),
        ("HW_ADVANCE", 1, {"high_watermark": 1, "isr": everyone}),
        append(1, 1, 1),
        ("CRASH", 1, {}),
        role("BECOME_LEADER", 0, 2, 0, (0, 2), 1, 1),
        role("BECOME_FOLLOWER", 2, 2, 0, (0, 2), 1, 1),
        ("RESTART", 1, {}),
        role("BECOME_FOLLOWER", 1, 2, 0, (0, 2), 2, 1),
        truncate(1, 2, 1, 1),
        fetch(0, 1, 1), append(0, 1, 2), fetch(0, 1, 1), fetch(0, 2, 1), fetch(0, 2, 2),
        ("HW_ADVANCE", 0, {"high_watermark": 2, "isr": (0, 2)}),
    ]
    if crash:
        steps.append(("CRASH", 1, {}))
    steps += [role("BECOME_LEADER", 0, 3, 0, (0, 2), 2, 2),
              role("BECOME_FOLLOWER", 2, 3, 0, (0, 2), 2, 2)]
    if crash:
        steps.append(("RESTART", 1, {}))
    steps += [role("BECOME_FOLLOWER", 1, 3, 0, (0, 2), 2, 1), truncate(1, 2, 1, 1)]
    return _scripted(*steps)


def test_a_crashed_follower_truncates_its_own_records_back_from_the_crash() -> None:
    """Seed 8740 of ``logproof fuzz``, a checker error: the mirror filled broker 1's log from a
    fetch response it assumed delivered (record 1 of epoch 2); the crash lost it and brought
    back broker 1's own record 1 of epoch 1, so the answer to its OffsetForLeaderEpoch (1,
    where the leader's epoch 1 ends) was below where the mirror put the end of epoch 2 (2). The
    abstraction cut the new leader's log there though its BECOME_LEADER had reported its LEO,
    and saw it without the committed record 1. A leader's reported LEO now stands, and the
    crashed follower, outside the ISR, holds a tail of an epoch the leader ends below it."""
    abstraction = replication_abstraction()
    verdict = check_trace(_crashed_follower_trace(crash=True), [abstraction])
    assert verdict.ok, verdict.violation.describe() if verdict.violation else ""
    assert abstraction.inferred["a crashed follower's tail from OffsetForLeaderEpoch"] == 1
    assert not abstraction.inferred["a new leader's LEO from OffsetForLeaderEpoch"]


def test_a_follower_that_did_not_crash_may_not_truncate_what_it_fetched() -> None:
    """The same answer to a follower that did not crash since it fetched record 1 of epoch 2:
    it held what the leader holds, and truncating it is not the model's truncation."""
    violation = check_trace(_crashed_follower_trace(crash=False), abstractions()).violation
    assert violation is not None
    assert violation.kind == "state_mismatch", violation.describe()
    assert violation.action.startswith("become_follower(")
