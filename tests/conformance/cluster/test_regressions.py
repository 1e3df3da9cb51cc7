"""Swarm seeds of the cluster simulator that once failed the shipped configuration.

Each test replays its seed exactly as ``logproof conformance run --swarm`` draws it (3 brokers x 2
log dirs, 200 steps) and says what was wrong. A seed reaches its interleaving only while the
simulator schedules as it did: since the simulator runs the controller node's own pump, seed 113's
case is reached by seed 112, seed 85's is scripted through the controller node in
``tests/conformance/coordinator/test_controller_back_from_a_crash.py``, and seed 1678's recorded
trace is replayed in ``tests/conformance/trace/test_recorded_traces.py``.
"""

from __future__ import annotations

import itertools

import pytest

from conformance.cluster_sim import ClusterConfig
from conformance.runner import replay, swarm_config


def test_seed_112_a_restarted_leader_truncates_its_unreplicated_epoch() -> None:
    """Found as seed 113 (LOG_MATCHING), reached by seed 112 since the simulator runs the
    controller node's own pump: broker 1 led t-1 in epoch 0, wrote offsets 0-2 and crashed
    before any follower fetched them; broker 2 led epoch 1 from offset 0. Back as a follower,
    broker 1 asked OffsetsForLeaderEpoch for epoch 0, older than every entry of the leader's
    cache (epoch 1 at 0). The storage cache answered (-1, -1), so the follower truncated nothing
    and appended the leader's offsets after its divergent ones. Kafka's
    ``LeaderEpochFileCache.endOffsetFor`` answers (0, 0): the follower truncates to 0 (KIP-101,
    KIP-279) before it fetches."""
    config = swarm_config(112, brokers=3, log_dirs=2, steps=200)
    result, outcome = replay(112, config)
    assert result.replay_command.startswith(
        "logproof conformance replay --seed 112 --brokers 3 --log-dirs 2 --partitions 2 "
        "--steps 200 --fault-probability 0.02")
    assert not result.failed, result.message
    assert outcome.violation is None, outcome.violation
    truncations = [e.to_json() for e in outcome.trace
                   if e.event == "TRUNCATE" and e.subject == "t-1@1"]
    assert any('"leader_epoch_end":0' in t and '"truncated_to":0' in t for t in truncations), (
        truncations)


def test_seed_561_a_late_leader_and_isr_names_an_isr_member_that_crashed_since() -> None:
    """Seed 561 of ``logproof fuzz`` (COMMITTED_DURABLE). A reassignment made broker 2 leader
    of t-1 in epoch 2 (ISR 1, 2, 0) while broker 2 was cut off; broker 0 then crashed, lost its
    unflushed tail (23 -> 16, below the HW 21) and the controller removed it in epoch 3. Broker 2
    received epoch 2's LeaderAndIsr last. The implementation is right (its followers in epoch 3
    fence its epoch-2 fetch answers, so the stale ISR cannot commit anything); the replication
    abstraction replayed the late election from the mirror's current logs, where the crashed
    member already lacked committed records. A late election now sees the ISR members' logs as
    they were before a crash since. (The seed's own fault plan still reaches the case; its shrunk
    schedule stopped reaching it when the simulator began running the controller node's pump.)"""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=3, steps=126,
                           fault_probability=0.1, segment_bytes=600, chunk_bytes=65536)
    result, outcome = replay(561, config)
    assert not result.failed, result.message
    assert outcome.violation is None, outcome.violation
    events = [e.to_json() for e in outcome.trace if e.subject.startswith("t-1@")]
    late = [i for i, e in enumerate(events) if '"event":"BECOME_LEADER"' in e
            and any('"event":"BECOME_FOLLOWER"' in f and '"leader_epoch":' in f
                    and _epoch(f) > _epoch(e) for f in events[:i])]
    assert late, "no late BECOME_LEADER: the seed no longer reaches the case"


def _epoch(event_json: str) -> int:
    value = event_json.split('"leader_epoch":')[1]
    return int(value.split(",", maxsplit=1)[0].split("}", maxsplit=1)[0])


@pytest.mark.parametrize(("seed", "brokers"), [
    pytest.param(12, 4, marks=pytest.mark.slow), (32, 4),
    pytest.param(7, 6, marks=pytest.mark.slow),
])
def test_clusters_of_more_than_three_brokers_replay_in_the_models(seed: int, brokers: int) -> None:
    """Reassignments across four or more brokers give a partition more than three replicas over
    a run (old and new ones together during a reassignment): the replication model, proved on
    three, is built over as many for the trace checker (the model replay used to refuse a
    fourth replica). Seed 12 (4 brokers): a LeaderAndIsr reached a replica its broker had
    restarted without (its dir had failed). Seed 32 (4 brokers): a replica deleted and created
    again starts a fresh move machine. Seed 7 (6 brokers): stale leaders of several old epochs,
    merged into one abstract epoch, are not two leaders of one epoch."""
    config = ClusterConfig(brokers=brokers, log_dirs=2, partitions=2, steps=300,
                           fault_probability=0.1, storage_broker=False)
    result, outcome = replay(seed, config)
    assert not result.failed, result.message
    verdict = outcome.trace_verdict
    assert verdict.actions.get("replication.become_leader", 0) > 0
    assert verdict.events_unchecked < verdict.events_checked / 20, verdict
    wide = [e.subject for e in outcome.trace if e.machine == "replication"
            and len(set(_ints(e.fields.get("replicas")))) > 3]
    assert wide, "no partition had more than three replicas: the seed no longer reaches it"


def _ints(value: object) -> list[int]:
    return [item for item in value if isinstance(item, int)] if isinstance(value, tuple) else []


def test_seed_15_a_replica_crashes_twice_across_a_restart_it_was_not_part_of() -> None:
    """Seed 15 of the default configuration (NOT_ENABLED): broker 1's dir holding t-1 failed;
    the broker crashed, restarted without t-1 (no RESTART reported for it) and crashed again,
    reporting a second CRASH of t-1. The model's crash needs a live replica: the replication
    abstraction now infers the restart it was not told of."""
    result, outcome = replay(15, ClusterConfig(storage_broker=False))
    assert not result.failed, result.message
    crashes = [e.event for e in outcome.trace
               if e.subject == "t-1@1" and e.event in ("CRASH", "RESTART")]
    assert any(a == b == "CRASH" for a, b in itertools.pairwise(crashes)), crashes
