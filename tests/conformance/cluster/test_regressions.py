"""Swarm seeds of the cluster simulator that once failed the shipped configuration.

Each test replays its seed exactly as ``logproof conformance run --swarm`` draws it (3 brokers x 2
log dirs, 200 steps) and says what was wrong.
"""

from __future__ import annotations

import itertools

import pytest

from conformance.cluster_sim import ClusterConfig, parse_faults
from conformance.runner import replay, swarm_config


def test_seed_113_a_restarted_leader_truncates_its_unreplicated_epoch() -> None:
    """Seed 113 (LOG_MATCHING): broker 1 led t-1 in epoch 0, wrote offset 0 and crashed before
    any follower fetched it; broker 2 led epoch 1 from offset 0. Back as a follower, broker 1
    asked OffsetsForLeaderEpoch for epoch 0, older than every entry of the leader's cache
    (epoch 1 at 0). The storage cache answered (-1, -1), so the follower truncated nothing and
    appended the leader's offset 1 after its divergent offset 0. Kafka's
    ``LeaderEpochFileCache.endOffsetFor`` answers (0, 0): the follower truncates to 0 (KIP-101,
    KIP-279) before it fetches."""
    config = swarm_config(113, brokers=3, log_dirs=2, steps=200)
    result, outcome = replay(113, config)
    assert result.replay_command.startswith(
        "logproof conformance replay --seed 113 --brokers 3 --log-dirs 2 --partitions 2 "
        "--steps 200 --fault-probability 0.1 --chunk-bytes 150")
    assert not result.failed, result.message
    assert outcome.violation is None, outcome.violation
    truncations = [e.to_json() for e in outcome.trace
                   if e.event == "TRUNCATE" and e.subject == "t-1@1"]
    assert any('"leader_epoch_end":0' in t and '"truncated_to":0' in t for t in truncations), (
        truncations)


def test_seed_85_a_controller_back_from_a_crash_does_not_resend_its_stale_leadership() -> None:
    """Seed 85 (NO_COMMITTED_LOSS): broker 2 was the active controller and t-0's leader (epoch
    4, ISR 2, 0, 1). It crashed with acknowledged records [83,89) on every ISR member but unflushed
    on itself; brokers 0 and 1 were zombie controllers, fenced at their next write, so no
    controller handled the failure, and broker 2 registered again and won the next election. Its
    failover resent the state znode: broker 2 led epoch 4 again from offset 83, and its followers
    would have truncated to it. A live ISR member registered after the state znode's last write
    restarted unseen: the failover now fails it as a bounced broker (Kafka's KIP-380; KRaft's
    KIP-966 for a broker back from an unclean shutdown), and t-0 moves to broker 1 in epoch 5."""
    config = swarm_config(85, brokers=3, log_dirs=2, steps=200)
    result, outcome = replay(85, config)
    assert result.replay_command.startswith(
        "logproof conformance replay --seed 85 --brokers 3 --log-dirs 2 --partitions 1 "
        "--steps 200 --fault-probability 0.1 --segment-bytes 1048576 --chunk-bytes 150")
    assert not result.failed, result.message
    assert outcome.violation is None, outcome.violation
    events = [e.to_json() for e in outcome.trace]
    failover = next(i for i, e in enumerate(events)
                    if '"event":"CONTROLLER_ELECTED"' in e and '"broker":2,"epoch":6' in e)
    assert '"leader":1,"leader_epoch":5' in events[failover + 1], events[failover + 1]
    assert not any('"event":"BECOME_LEADER"' in e and '"leader":2,"leader_epoch":4' in e
                   for e in events[failover:]), "the stale state was resent"


def test_seed_1678_a_duplicated_follower_fetch_is_not_a_lower_log_end_offset() -> None:
    """Seed 1678 of ``logproof fuzz`` (NOT_ENABLED, no fault: only the network's duplication
    and reordering). Broker 1 fetched t-0 at 17, then a duplicate of its earlier fetch at 15
    reached the leader. The leader keeps the highest fetch offset of a follower's incarnation
    (its log only grows while it follows one epoch) and advanced the HW to 17; the replication
    abstraction had recorded 15 as the follower's LEO and refused the HW_ADVANCE. The checker
    was wrong: an overtaken request of the same incarnation is now a stutter."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=3, steps=95, fault_probability=0.0,
                           segment_bytes=1048576, chunk_bytes=150)
    result, outcome = replay(1678, config, [])
    assert not result.failed, result.message
    assert outcome.violation is None, outcome.violation
    fetches = [(int(str(e.fields["replica"])), int(str(e.fields["fetch_offset"])))
               for e in outcome.trace
               if e.event == "FOLLOWER_FETCH" and e.subject == "t-0@0"]
    assert any(later < earlier for (r1, earlier), (r2, later) in itertools.pairwise(fetches)
               if r1 == r2 == 1), "no overtaken fetch: the seed no longer reaches the case"


_SEED_561_FAULTS = ("50:controller_expiry:1:29,52:clean_restart:1:8,55:controller_expiry:1:9,"
                    "97:partition:2:24,108:reassign:0:42550,115:crash:0:3")


@pytest.mark.parametrize("faults", [_SEED_561_FAULTS, None], ids=["shrunk", "seed"])
def test_seed_561_a_late_leader_and_isr_names_an_isr_member_that_crashed_since(
        faults: str | None) -> None:
    """Seed 561 of ``logproof fuzz`` (COMMITTED_DURABLE). A reassignment made broker 2 leader
    of t-1 in epoch 2 (ISR 1, 2, 0) while broker 2 was cut off; broker 0 then crashed, lost its
    unflushed tail (23 -> 16, below the HW 21) and the controller removed it in epoch 3. Broker 2
    received epoch 2's LeaderAndIsr last. The implementation is right (its followers in epoch 3
    fence its epoch-2 fetch answers, so the stale ISR cannot commit anything); the replication
    abstraction replayed the late election from the mirror's current logs, where the crashed
    member already lacked committed records. A late election now sees the ISR members' logs as
    they were before a crash since."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=3, steps=126,
                           fault_probability=0.1, segment_bytes=600, chunk_bytes=65536)
    result, outcome = replay(561, config, None if faults is None else parse_faults(faults))
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
