"""The replication core and its model in lockstep (Hypothesis ``RuleBasedStateMachine``).

Each rule is one model action of ``model.replication`` (shipped variant, run concretely); where
the replication core (:mod:`impl.broker.replication`) decides the same step, it decides from the
model's state and must agree with the model:

* ``become_leader`` / ``become_follower``: ``decide_leader_and_isr`` accepts the LeaderAndIsr
  the model's election writes and takes the model's role and leader epoch; where the model
  refuses ``become_follower`` because the replica already holds that epoch, the core treats the
  request as an idempotent re-delivery (no new state);
* ``hw_advance``: ``leader_high_watermark`` over the leader's ISR and the follower LEOs it
  recorded reaches exactly the model's new HW, and stays put where the model refuses;
* ``isr_expand``: where the model lets a follower join, ``desired_isr`` (given the leader's
  epoch start, KIP-320 rule 4) includes it.

The truncation point is not compared here (the OffsetForLeaderEpoch rounds need the leader's log,
which the model keeps as two slots); ``tests/conformance/trace/test_replication_abstraction.py``
compares it. After every step the replica roles and epochs the core holds equal the model's, and
the model's invariants hold.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from impl.broker import replication as core
from impl.broker.replication import PartitionAssignment, ReplicaRole, ReplicaState

model_module = pytest.importorskip("model.replication")

MODEL = model_module.MODELS[0].model()
REPLICAS = tuple(model_module.REPLICAS)
replicas = st.sampled_from(REPLICAS)


class ReplicationMachine(RuleBasedStateMachine):
    """The model's state, and the replica states the core decided, stepped together."""

    def __init__(self) -> None:
        super().__init__()
        self.state: Any = MODEL.initial_states()[0]
        self.replicas: dict[int, ReplicaState | None] = {
            r: self._initial(r) for r in REPLICAS
        }

    def _initial(self, r: int) -> ReplicaState:
        s = self.state
        return ReplicaState("t", 0, ReplicaRole(s.role[r].value), s.zk_leader, s.epoch[r],
                            s.zk_epoch, self._zk_isr(), REPLICAS)

    # --- helpers ---------------------------------------------------------------------------

    def _enabled(self, action: str, **params: Any) -> bool:
        return bool(MODEL.enabled(self.state, action, params))

    def _step(self, action: str, **params: Any) -> None:
        self.state = MODEL.step(self.state, action, params)

    def _can(self, action: str, name: str = "r", **extra: Any) -> list[int]:
        return [x for x in REPLICAS if self._enabled(action, **{name: x}, **extra)]

    def _zk_isr(self) -> tuple[int, ...]:
        return tuple(t for t in REPLICAS if self.state.zk_isr[t])

    def _assignment(self) -> PartitionAssignment:
        s = self.state
        # The partition epoch (zkVersion) moves with every election in the model.
        return PartitionAssignment("t", 0, 1, s.zk_leader, s.zk_epoch, self._zk_isr(), s.zk_epoch,
                                   REPLICAS, False)

    def decide(self, r: int) -> core.LeaderAndIsrDecision:
        """The core under test (a subclass may substitute a broken one)."""
        return core.decide_leader_and_isr(r, self.replicas[r], self._assignment(), hosted=True,
                                          replica_offline=False, any_dir_offline=False)

    def high_watermark(self, r: int) -> int:
        """The core's HW for leader ``r`` from the model's view of its followers."""
        s = self.state
        isr = [r] + [t for t in REPLICAS if t != r and s.local_isr[(r, t)]]
        followers = {t: s.remote_leo[(r, t)] for t in REPLICAS if t != r}
        return core.leader_high_watermark(s.hw[r], s.leo[r], followers, isr, r)

    # --- elections -------------------------------------------------------------------------

    @precondition(lambda self: bool(self._can("become_leader")))
    @rule(data=st.data())
    def elect(self, data: st.DataObject) -> None:
        self.become_leader(data.draw(st.sampled_from(self._can("become_leader"))))

    @rule(r=replicas)
    def become_leader(self, r: int) -> None:
        if not self._enabled("become_leader", r=r):
            return
        self._step("become_leader", r=r)
        decision = self.decide(r)
        assert decision.error_code == core.NONE, decision
        assert decision.state is not None
        assert decision.state.role is ReplicaRole.LEADER
        assert decision.became_leader
        self.replicas[r] = decision.state

    @precondition(lambda self: bool(self._can("become_follower")))
    @rule(data=st.data())
    def follow(self, data: st.DataObject) -> None:
        self.become_follower(data.draw(st.sampled_from(self._can("become_follower"))))

    @rule(r=replicas)
    def become_follower(self, r: int) -> None:
        s = self.state
        if not s.live[r] or s.zk_leader in (-1, r):
            return
        if self._enabled("become_follower", r=r):
            self._step("become_follower", r=r)
            decision = self.decide(r)
            assert decision.error_code == core.NONE, decision
            assert decision.state is not None, "the model moves on, the core did not"
            assert decision.state.role is ReplicaRole.FOLLOWER
            assert decision.state.leader == self.state.zk_leader
            self.replicas[r] = decision.state
        elif s.epoch[r] == s.zk_epoch and s.role[r].value != "OFFLINE":
            decision = self.decide(r)
            assert decision.error_code == core.NONE
            assert decision.state is None, "a re-delivered LeaderAndIsr changed the replica"

    # --- the log and the HW ----------------------------------------------------------------

    @precondition(lambda self: bool(self._can("leader_append")))
    @rule(data=st.data())
    def append(self, data: st.DataObject) -> None:
        self.leader_append(data.draw(st.sampled_from(self._can("leader_append"))))

    @precondition(lambda self: bool(self._can("follower_fetch", "f", delivered=True)))
    @rule(data=st.data())
    def fetch(self, data: st.DataObject) -> None:
        self.follower_fetch(data.draw(st.sampled_from(self._can("follower_fetch", "f",
                                                                 delivered=True))), True)

    @precondition(lambda self: bool(self._can("hw_advance")))
    @rule(data=st.data())
    def advance(self, data: st.DataObject) -> None:
        self.hw_advance(data.draw(st.sampled_from(self._can("hw_advance"))))

    @precondition(lambda self: bool(self._can("isr_expand", "f")))
    @rule(data=st.data())
    def expand(self, data: st.DataObject) -> None:
        self.isr_expand(data.draw(st.sampled_from(self._can("isr_expand", "f"))))

    @rule(r=replicas)
    def leader_append(self, r: int) -> None:
        if self._enabled("leader_append", r=r):
            self._step("leader_append", r=r)

    @rule(f=replicas, delivered=st.booleans())
    def follower_fetch(self, f: int, delivered: bool) -> None:
        if self._enabled("follower_fetch", f=f, delivered=delivered):
            self._step("follower_fetch", f=f, delivered=delivered)

    @rule(r=replicas)
    def hw_advance(self, r: int) -> None:
        s = self.state
        if s.role[r].value != "LEADER":
            return
        decided = self.high_watermark(r)
        if self._enabled("hw_advance", r=r):
            self._step("hw_advance", r=r)
            assert decided == self.state.hw[r], (decided, self.state.hw[r])
        else:
            assert decided == s.hw[r], "the core moves the HW where the model does not"

    # --- the ISR ---------------------------------------------------------------------------

    @rule(f=replicas)
    def isr_expand(self, f: int) -> None:
        if not self._enabled("isr_expand", f=f):
            return
        s = self.state
        leader = s.zk_leader
        mine = self.replicas[leader]
        assert mine is not None
        local = (leader, *(t for t in REPLICAS if t != leader and s.local_isr[(leader, t)]))
        wanted = core.desired_isr(
            ReplicaState("t", 0, ReplicaRole.LEADER, leader, s.epoch[leader], s.zk_epoch,
                         local, REPLICAS),
            s.hw[leader],
            follower_log_end_offsets={t: s.remote_leo[(leader, t)] for t in REPLICAS},
            last_caught_up_ms=dict.fromkeys(REPLICAS, 0), now_ms=0, lag_time_max_ms=1,
            leader_epoch_start_offset=s.epoch_start[leader],
        )
        assert f in wanted, (f, wanted)
        self._step("isr_expand", f=f)

    @rule(f=replicas)
    def isr_shrink(self, f: int) -> None:
        if self._enabled("isr_shrink", f=f):
            self._step("isr_shrink", f=f)

    # --- crashes ---------------------------------------------------------------------------

    @rule(r=replicas)
    def crash(self, r: int) -> None:
        if self._enabled("crash", r=r):
            self._step("crash", r=r)
            self.replicas[r] = None  # the process's memory is gone

    @rule(r=replicas)
    def restart(self, r: int) -> None:
        if self._enabled("restart", r=r):
            self._step("restart", r=r)

    # --- agreement -------------------------------------------------------------------------

    @invariant()
    def roles_and_epochs_agree(self) -> None:
        s = self.state
        for r in REPLICAS:
            mine = self.replicas[r]
            if mine is None:
                assert s.role[r].value == "OFFLINE", (r, s.role[r])
                continue
            assert mine.role.value == s.role[r].value, (r, mine.role, s.role[r])
            assert mine.leader_epoch == s.epoch[r], (r, mine.leader_epoch, s.epoch[r])

    @invariant()
    def model_invariants_hold(self) -> None:
        assert MODEL.check_invariants(self.state) == []


ReplicationMachine.TestCase.settings = settings(
    derandomize=True,
    max_examples=40,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestReplicationMachine = ReplicationMachine.TestCase


class FollowerLeadsCore(ReplicationMachine):
    """A broken core: a LeaderAndIsr naming another leader makes the receiver lead too."""

    def decide(self, r: int) -> core.LeaderAndIsrDecision:
        assignment = self._assignment()
        broken = PartitionAssignment(assignment.topic, assignment.partition,
                                     assignment.controller_epoch, r, assignment.leader_epoch,
                                     assignment.isr, assignment.partition_epoch,
                                     assignment.replicas, assignment.is_new)
        return core.decide_leader_and_isr(r, self.replicas[r], broken, hosted=True,
                                          replica_offline=False, any_dir_offline=False)


def test_the_machine_catches_a_core_that_lets_a_follower_lead() -> None:
    machine = FollowerLeadsCore()
    machine.crash(1)
    machine.restart(1)
    with pytest.raises(AssertionError):
        machine.become_follower(1)


class LeaderLeoHighWatermark(ReplicationMachine):
    """A broken core: the HW follows the leader's LEO, ignoring the ISR."""

    def high_watermark(self, r: int) -> int:
        return int(self.state.leo[r])


def test_the_machine_catches_an_hw_that_ignores_the_isr() -> None:
    machine = LeaderLeoHighWatermark()
    machine.leader_append(0)
    with pytest.raises(AssertionError, match="moves the HW"):
        machine.hw_advance(0)


def test_the_shipped_core_agrees_on_a_commit() -> None:
    machine = ReplicationMachine()
    machine.leader_append(0)
    machine.follower_fetch(1, delivered=True)
    machine.follower_fetch(1, delivered=True)
    machine.hw_advance(0)
    assert machine.state.hw[0] == 1
    machine.roles_and_epochs_agree()
