"""The controller abstraction: real controller-core traces conform; tampered ones are refused.

The real controller core runs through the synchronous driver over the simulated ZooKeeper: four
brokers, a topic of four partitions with three replicas each, and a seeded schedule of broker
deaths and restarts, ISR changes written by leaders, controller session expiries (the old
controller reconnecting as a zombie that still believes in its epoch), zombie writes (fenced by
ZooKeeper) and zombies learning that the controller moved. The drivers' traces are merged in
the order their events happened.
"""

from __future__ import annotations

import random
import sys
import time

import pytest

from conformance._coordinator_driver import ControllerDriver
from conformance.controller_abstraction import abstractions, controller_abstraction
from conformance.coordinator import SimulatedZooKeeper
from conformance.trace_check import check_trace
from impl.controller.controller import BrokersRead, ControllerMoved, SessionExpired
from impl.controller.coordinator import CreateOp, SetOp
from impl.controller.znodes import (
    ISR_CHANGE_NOTIFICATION_PATH,
    ISR_CHANGE_PREFIX,
    TopicAssignment,
    broker_path,
    decode_partition_state,
    encode_broker,
    encode_isr_change,
    encode_partition_state,
    encode_topic,
    partition_state_path,
    topic_path,
)
from impl.trace import TraceEvent

BROKERS = (0, 1, 2, 3)
PARTITIONS = 4
TOPIC = "c"
ASSIGNMENT = {p: tuple((p + k) % len(BROKERS) for k in range(3)) for p in range(PARTITIONS)}


class Cluster:
    """Controller candidates over one simulated ZooKeeper; ``trace`` holds every event."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.server = SimulatedZooKeeper()
        self.trace: list[TraceEvent] = []
        self.next_id = 100
        self.controller = self._candidate()
        assert self.controller.elect()
        self._drain(self.controller)
        self.zombies: list[ControllerDriver] = []
        self.admin = self.server.open_session(60_000)
        self.sessions: dict[int, int] = {}
        for broker_id in BROKERS:
            self._register(broker_id)
        self._run(self.controller, self.controller.brokers_changed)
        self.server.multi(self.admin, [CreateOp(topic_path(TOPIC), encode_topic(
            TopicAssignment(ASSIGNMENT)))])
        self._run(self.controller, self.controller.topics_changed)

    def _candidate(self) -> ControllerDriver:
        driver = ControllerDriver(self.server, self.next_id, partitions_per_write_max=2)
        self.next_id += 1
        return driver

    def _drain(self, driver: ControllerDriver) -> None:
        self.trace.extend(driver.traces)
        driver.traces.clear()

    def _run(self, driver: ControllerDriver, call: object, *args: object) -> None:
        assert callable(call)
        call(*args)
        self._drain(driver)

    def _register(self, broker_id: int) -> None:
        session = self.server.open_session(60_000)
        self.sessions[broker_id] = session
        self.server.multi(session, [CreateOp(
            broker_path(broker_id), encode_broker("127.0.0.1", 9000 + broker_id, None, 0),
            ephemeral=True)])

    # --- steps --------------------------------------------------------------------------------

    def kill(self) -> None:
        live = sorted(self.sessions)
        if len(live) <= 1:
            return
        broker_id = self.rng.choice(live)
        self.server.close_session(self.sessions.pop(broker_id))
        self._run(self.controller, self.controller.brokers_changed)

    def start(self) -> None:
        dead = [b for b in BROKERS if b not in self.sessions]
        if dead:
            self._register(self.rng.choice(dead))
            self._run(self.controller, self.controller.brokers_changed)

    def leader_changes_isr(self) -> None:
        partition = self.rng.randrange(PARTITIONS)
        path = partition_state_path(TOPIC, partition)
        data, stat = self.server.get(self.admin, path, False)
        state = decode_partition_state(TOPIC, partition, data, stat.version)
        if state.leader not in self.sessions:
            return
        if len(state.isr) > 1 and self.rng.random() < 0.5:
            isr = [r for r in state.isr if r != state.isr[-1] or r == state.leader]
        else:
            missing = [r for r in ASSIGNMENT[partition]
                       if r not in state.isr and r in self.sessions]
            if not missing:
                return
            isr = [*state.isr, missing[0]]
        self.server.multi(self.admin, [
            SetOp(path, encode_partition_state(state.leader, state.leader_epoch, isr,
                                               state.controller_epoch), stat.version),
            CreateOp(f"{ISR_CHANGE_NOTIFICATION_PATH}/{ISR_CHANGE_PREFIX}",
                     encode_isr_change([(TOPIC, partition)]), sequential=True),
        ])
        self._run(self.controller, self.controller.isr_changed)

    def controller_session_expires(self) -> None:
        old = self.controller
        self.server.expire_session(old.session_id)
        old.session_id = self.server.open_session(60_000)
        self.zombies.append(old)
        self.controller = self._candidate()
        assert self.controller.elect()
        self._drain(self.controller)
        self._run(self.controller, self.controller.brokers_changed)

    def zombie_acts(self) -> None:
        zombies = [z for z in self.zombies if z.core.active]
        if not zombies:
            return
        zombie = self.rng.choice(zombies)
        brokers = dict(zombie.core.live_brokers)
        if brokers:
            brokers.pop(self.rng.choice(sorted(brokers)))
        self._run(zombie, zombie.run, BrokersRead(brokers))

    def zombie_learns(self) -> None:
        zombies = [z for z in self.zombies if z.core.active]
        if zombies:
            zombie = self.rng.choice(zombies)
            news = ControllerMoved() if self.rng.random() < 0.5 else SessionExpired()
            self._run(zombie, zombie.run, news)

    def run(self, steps: int) -> list[TraceEvent]:
        actions = [(self.kill, 3), (self.start, 3), (self.leader_changes_isr, 4),
                   (self.controller_session_expires, 1), (self.zombie_acts, 2),
                   (self.zombie_learns, 1)]
        population = [action for action, weight in actions for _ in range(weight)]
        for _ in range(steps):
            self.rng.choice(population)()
        return self.trace


def _trace(seed: int, steps: int = 40) -> list[TraceEvent]:
    return Cluster(seed).run(steps)


def _first(events: list[TraceEvent], predicate: object) -> int:
    assert callable(predicate)
    return next(index for index, event in enumerate(events) if predicate(event))


def _with(event: TraceEvent, **fields: object) -> TraceEvent:
    return TraceEvent.of(event.machine, event.event, event.subject, event.state_before,
                         event.state_after, **{**dict(event.fields), **fields})


def _is_write(event: TraceEvent) -> bool:
    return event.machine == "controller" and "leader_epoch" in event.fields


@pytest.mark.parametrize("seed", range(10))
def test_real_core_traces_conform(seed: int) -> None:
    events = _trace(seed)
    abstraction = controller_abstraction()
    verdict = check_trace(events, [abstraction])
    assert verdict.ok, verdict.violation.describe() if verdict.violation else ""
    assert verdict.actions.get("controller.controller_elected", 0) >= 1
    assert verdict.actions.get("controller.leader_elected", 0) >= 1
    # every partition-state write carries its writer: none was left unchecked
    assert "partition-state write without controller, leader or epoch" not in (
        abstraction.stutters), abstraction.stutters


def test_the_schedule_reaches_zombies_and_fenced_writes() -> None:
    actions: dict[str, int] = {}
    for seed in range(10):
        verdict = check_trace(_trace(seed), abstractions())
        for name, count in verdict.actions.items():
            actions[name] = actions.get(name, 0) + count
    for name in ("controller_elected", "session_expired", "controller_resigned",
                 "zk_write_fenced", "leader_elected"):
        assert actions.get(f"controller.{name}", 0) >= 1, (name, actions)


def _failover_trace() -> tuple[list[TraceEvent], int]:
    """A trace with a second election, and the index of its CONTROLLER_ELECTED."""
    for seed in range(30):
        events = _trace(seed)
        elections = [i for i, e in enumerate(events) if e.event == "CONTROLLER_ELECTED"]
        if len(elections) >= 2 and any(_is_write(e) for e in events[: elections[1]]):
            return events, elections[1]
    raise AssertionError("no schedule of 30 seeds had a controller failover")


def test_a_write_by_a_fenced_controller_is_refused() -> None:
    events, second = _failover_trace()
    old_write = next(e for e in reversed(events[:second]) if _is_write(e))
    zombie_write = _with(old_write, leader_epoch=int(str(old_write.fields["leader_epoch"])) + 5)
    tampered = [*events[: second + 1], zombie_write, *events[second + 1:]]
    violation = check_trace(tampered, abstractions(), "replay-cmd").violation
    assert violation is not None
    assert violation.index == second + 1
    assert violation.kind == "not_enabled"
    assert violation.action.startswith("leader_elected(c=0")
    assert "replay-cmd" in violation.describe()


def test_the_no_epoch_check_model_names_controller_fenced() -> None:
    events, second = _failover_trace()
    old_write = next(e for e in reversed(events[:second]) if _is_write(e))
    zombie_write = _with(old_write, leader_epoch=int(str(old_write.fields["leader_epoch"])) + 5)
    tampered = [*events[: second + 1], zombie_write]
    violation = check_trace(tampered, abstractions("no_controller_epoch_check")).violation
    assert violation is not None
    assert (violation.kind, violation.invariant) == ("invariant", "CONTROLLER_FENCED")


def test_two_leaders_in_one_epoch_are_refused() -> None:
    events = _trace(0)
    index = _first(events, _is_write)
    write = events[index]
    leader = int(str(write.fields["leader"]))
    other = next(b for b in BROKERS if b != leader)
    tampered = [*events[: index + 1], _with(write, leader=other), *events[index + 1:]]
    violation = check_trace(tampered, abstractions()).violation
    assert violation is not None
    assert violation.index == index + 1
    assert (violation.kind, violation.invariant) == ("invariant", "LEADER_UNIQUE")


def test_a_leader_epoch_written_lower_is_refused() -> None:
    events = _trace(0)
    index = _first(events, _is_write)
    write = events[index]
    lower = _with(write, leader_epoch=int(str(write.fields["leader_epoch"])) - 2)
    tampered = [*events[: index + 1], lower]
    violation = check_trace(tampered, abstractions()).violation
    assert violation is not None
    assert (violation.kind, violation.invariant) == ("invariant", "EPOCHS_MONOTONIC")


def test_an_election_that_does_not_raise_the_epoch_is_refused() -> None:
    events, second = _failover_trace()
    first = events[_first(events, lambda e: e.event == "CONTROLLER_ELECTED")]
    stale = _with(events[second], epoch=int(str(first.fields["epoch"])))
    violation = check_trace([*events[:second], stale], abstractions()).violation
    assert violation is not None
    # ZooKeeper's epoch before the election would be below the one the old controller holds
    assert (violation.kind, violation.invariant) == ("invariant", "EPOCHS_MONOTONIC")


def test_a_fenced_write_without_a_newer_controller_is_refused() -> None:
    events = _trace(0)
    elected = events[_first(events, lambda e: e.event == "CONTROLLER_ELECTED")]
    fenced = TraceEvent.of("controller", "ZK_WRITE_FENCED", "controller", "ACTIVE", "INACTIVE",
                           **dict(elected.fields))
    violation = check_trace([*events, fenced], abstractions()).violation
    assert violation is not None
    assert violation.action == "zk_write_fenced(c=0)"
    assert violation.kind == "not_enabled"


def test_checking_is_deterministic_and_solver_free(monkeypatch: pytest.MonkeyPatch) -> None:
    z3 = sys.modules.get("z3")
    if z3 is not None:
        def refuse(*args: object, **kwargs: object) -> None:
            raise AssertionError("the trace checker called the solver")
        monkeypatch.setattr(z3.Solver, "check", refuse)
    events = [event for seed in range(4) for event in _trace(seed)]
    first = check_trace(events, abstractions())
    started = time.perf_counter()
    second = check_trace(events, abstractions())
    elapsed = time.perf_counter() - started
    assert first == second
    assert elapsed >= 0  # measured for the report, never asserted
