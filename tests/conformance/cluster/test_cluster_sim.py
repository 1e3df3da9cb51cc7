"""The cluster simulator: determinism, the shipped configuration, faults, replay."""

from __future__ import annotations

import dataclasses
import itertools
import pickle
from collections import Counter

import pytest

from conformance.cluster_sim import (
    FAULT_KINDS,
    ClusterConfig,
    ClusterFault,
    format_faults,
    parse_faults,
    plan_faults,
    simulate,
)
from conformance.runner import SWARM_ISR_SCAN_STEPS, replay, run_seed, swarm_config
from impl.broker.node import BrokerNode, Effect, FetchReply, IsrScan, Produce, Tick

CONFIG = ClusterConfig(steps=200)


def test_same_seed_same_trace_byte_for_byte() -> None:
    first = simulate(3, CONFIG, keep_trace=True)
    second = simulate(3, CONFIG, keep_trace=True)
    assert first.trace_digest == second.trace_digest
    assert [e.to_json() for e in first.trace] == [e.to_json() for e in second.trace]
    assert simulate(4, CONFIG).trace_digest != first.trace_digest


@pytest.mark.parametrize("seed", range(6))
def test_shipped_cluster_passes(seed: int) -> None:
    outcome = simulate(seed, ClusterConfig(steps=250, fault_probability=0.06))
    assert outcome.violation is None, outcome.violation
    assert outcome.acknowledged_batches > 0
    assert outcome.consumed_batches > 0
    assert outcome.controller_elections >= 1
    assert outcome.leader_elections >= outcome.config.partitions


def test_leader_crash_fails_over_and_keeps_every_acknowledged_batch() -> None:
    """Every broker crashes in turn (the healthy ones only: a crash loses unflushed data); the
    acknowledged batches are all read back once, in order, and elections happened."""
    faults = [ClusterFault(40, "crash", 0, 10), ClusterFault(90, "crash", 1, 10),
              ClusterFault(140, "crash", 2, 10)]
    outcome = simulate(7, CONFIG, faults)
    assert outcome.violation is None, outcome.violation
    assert outcome.restarts >= 2
    assert outcome.leader_elections > CONFIG.partitions
    assert outcome.acknowledged_batches > 10


def test_zombie_controller_is_fenced() -> None:
    faults = [ClusterFault(step, "controller_expiry", 0, 40) for step in (30, 80, 130)]
    outcome = simulate(2, CONFIG, faults, keep_trace=True)
    assert outcome.violation is None, outcome.violation
    events = {(e.machine, e.event) for e in outcome.trace}
    assert ("controller", "SESSION_EXPIRED") in events or (
        "controller", "ZK_WRITE_FENCED") in events
    assert outcome.controller_elections >= 2


def test_every_fault_kind_runs() -> None:
    faults = [ClusterFault(20 + 25 * index, kind, index % 3, 7)
              for index, kind in enumerate(FAULT_KINDS)]
    outcome = simulate(11, CONFIG, faults)
    assert outcome.violation is None, outcome.violation


def test_faults_round_trip_and_plan_is_seeded() -> None:
    planned = plan_faults(5, ClusterConfig(fault_probability=0.2))
    assert planned
    assert planned == plan_faults(5, ClusterConfig(fault_probability=0.2))
    assert parse_faults(format_faults(planned)) == planned
    with pytest.raises(ValueError, match="cluster fault spec"):
        ClusterFault.parse("3:meteor:0:0")


def test_session_expiries_are_drawn_from_a_stream_of_their_own() -> None:
    """The default plan draws ``session_expiry``; the other faults of the seed are the ones it
    had before session expiries were drawn (recorded then)."""
    planned = plan_faults(5, ClusterConfig(steps=100, fault_probability=0.1, storage_broker=False))
    assert [f.spec() for f in planned if f.kind == "session_expiry"] == [
        "4:session_expiry:2:14"]
    assert format_faults([f for f in planned if f.kind not in (
        "session_expiry", "connection_loss", "malformed_znode")]) == (
        "6:partition:2:9,37:reassign:2:37684,38:crash_last_copy:2:72,44:dir_failure:1:1,"
        "49:partition:0:35,53:crash:1:15,56:partition:2:21,63:crash_last_copy:1:213,"
        "73:crash_last_copy:1:66,92:crash_last_copy:2:216,98:partition:1:34")


def test_runner_runs_the_cluster_for_several_brokers() -> None:
    config = swarm_config(9, brokers=3, log_dirs=2, steps=120)
    assert isinstance(config, ClusterConfig)
    assert pickle.loads(pickle.dumps(config)) == config
    result = run_seed(9, config)
    assert pickle.loads(pickle.dumps(result)) == result
    assert not result.failed, result.message
    assert result.replay_command.startswith("logproof conformance replay --seed 9 --brokers 3")
    again, outcome = replay(9, config)
    assert again.trace_digest == result.trace_digest
    assert len(outcome.trace) == result.events


def test_replication_and_controller_events_replay_in_their_models_by_default() -> None:
    outcome = simulate(0, ClusterConfig(steps=120))
    assert outcome.config.model_machines == ("replication", "controller")
    assert outcome.violation is None, outcome.violation
    assert outcome.trace_verdict.events_checked > 0.9 * outcome.events
    assert any(name.startswith("replication.") for name in outcome.trace_verdict.actions)
    assert any(name.startswith("controller.") for name in outcome.trace_verdict.actions)
    assert simulate(0, ClusterConfig(steps=120, model_machines=())).trace_verdict.events_checked < (
        0.5 * outcome.events)


def test_a_follower_fetch_that_finds_nothing_waits_and_is_asked_again() -> None:
    """The leaders park a follower's fetch that found nothing (impl/broker/purgatory.py) and ask
    it again when an append wakes it or its deadline passes: the read of an asked-again fetch
    (a second FOLLOWER_FETCH, ``asked_again``) follows an arrival's from the same offset (not
    always the latest's: a fetch sent again after the retry interval may arrive after the
    first was parked and after the first's answer moved the follower on), and some of them
    bring records (the next fetch of that follower starts higher)."""
    outcome = simulate(5, ClusterConfig(steps=200, fault_probability=0.0), keep_trace=True)
    assert outcome.violation is None, outcome.violation
    arrived: dict[tuple[str, object], set[int]] = {}
    answered_late: dict[tuple[str, object], object] = {}
    asked_again = delivered = 0
    for event in outcome.trace:
        if event.machine != "replication" or event.event != "FOLLOWER_FETCH":
            continue
        fields = dict(event.fields)
        key, offset = (event.subject, fields["replica"]), fields["fetch_offset"]
        assert isinstance(offset, int)
        if fields.get("asked_again"):
            asked_again += 1
            assert offset in arrived.get(key, ()), (event, arrived.get(key))
            answered_late[key] = offset
            continue
        late = answered_late.get(key)
        if isinstance(late, int) and offset != late:
            # (a fetch from the late read's offset: one sent again before its answer came)
            del answered_late[key]
            if offset > late:
                delivered += 1  # the follower's next fetch starts past what the late read found
        arrived.setdefault(key, set()).add(offset)
    assert asked_again > 100
    assert delivered > 10, (asked_again, delivered)
    # (each answered after waiting: every read of one is traced, answered or parked again)
    assert 100 < outcome.delayed_fetches <= asked_again


def test_an_isr_scan_in_steps_goes_on_between_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    """With one partition a step, a broker's periodic ISR scan goes on over several pumps (the
    trio broker's other tasks run between its steps; here messages arrive between them): the
    run passes every check, some scans take several steps with other inputs stepped between
    them, and the replay command names the step."""
    inputs: list[tuple[int, str, bool]] = []
    step = BrokerNode.step

    def recording(node: BrokerNode, event: object) -> list[Effect]:
        effects = step(node, event)
        inputs.append((node.id, type(event).__name__, node.isr_scan_pending))
        return effects

    monkeypatch.setattr(BrokerNode, "step", recording)
    config = ClusterConfig(steps=150, partitions=3, isr_scan_step_partitions=1)
    outcome = simulate(2, config)
    assert outcome.violation is None, outcome.violation
    steps = Counter(name for _, name, _ in inputs)
    assert steps[IsrScan.__name__] > 0
    # what a broker stepped while its scan was open: messages from other nodes among them
    # (a scan stepped to its end within one pump sees only what its own tick set off)
    interleaved: Counter[str] = Counter()
    for broker in {node for node, _, _ in inputs}:
        own = [(name, pending) for node, name, pending in inputs if node == broker]
        for (_, pending), (after, _) in itertools.pairwise(own):
            if pending and after not in (IsrScan.__name__, Tick.__name__):
                interleaved[after] += 1
    assert interleaved[FetchReply.__name__] > 0
    assert interleaved[Produce.__name__] > 0
    result = run_seed(2, config)
    assert "--isr-scan-step 1" in result.replay_command
    assert "--isr-scan-step" not in run_seed(2, ClusterConfig(steps=20)).replay_command


def test_the_isr_scan_step_is_drawn_from_a_stream_of_its_own() -> None:
    """A swarm seed draws its ISR scan step apart: its other settings are the ones it had
    before the step was drawn (seed 9, recorded then), and the seeds take every step."""
    config = swarm_config(9, brokers=3, log_dirs=2, steps=120)
    assert isinstance(config, ClusterConfig)
    shipped_step = ClusterConfig().isr_scan_step_partitions
    assert dataclasses.replace(config, isr_scan_step_partitions=shipped_step) == (
        ClusterConfig(partitions=1, steps=120, fault_probability=0.0, segment_bytes=2048,
                      chunk_bytes=150))
    drawn = set()
    for seed in range(30):
        seeded = swarm_config(seed, brokers=3, log_dirs=2, steps=120)
        assert isinstance(seeded, ClusterConfig)
        drawn.add(seeded.isr_scan_step_partitions)
    assert drawn == set(SWARM_ISR_SCAN_STEPS)
