"""Swarm seeds of the cluster simulator that once failed the shipped configuration.

Each test replays its seed exactly as ``logproof conformance run --swarm`` draws it (3 brokers x 2
log dirs, 200 steps) and says what was wrong.
"""

from __future__ import annotations

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
