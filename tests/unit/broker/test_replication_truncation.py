"""``replica.truncation.policy``: where a new follower truncates, and how the config is parsed."""

from __future__ import annotations

import pytest

from impl.broker.config import ConfigError, load_config
from impl.broker.replication import TruncationPolicy, follower_truncation_offset

BASE = "broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs=/data/d0\nzookeeper.connect=zk\n"


def test_high_watermark_policy_truncates_to_the_followers_own_hw() -> None:
    # KIP-101 scenario 1: the follower has offsets 0..1 but its HW still says 1
    target = follower_truncation_offset(TruncationPolicy.HIGH_WATERMARK, log_end_offset=2,
                                        log_start_offset=0, high_watermark=1,
                                        leader_epoch_end_offset=2).offset
    assert target == 1


def test_leader_epoch_policy_keeps_what_the_leaders_epoch_covers() -> None:
    target = follower_truncation_offset(TruncationPolicy.LEADER_EPOCH, log_end_offset=2,
                                        log_start_offset=0, high_watermark=1,
                                        leader_epoch_end_offset=2).offset
    assert target == 2


def test_leader_epoch_policy_drops_a_divergent_suffix() -> None:
    target = follower_truncation_offset(TruncationPolicy.LEADER_EPOCH, log_end_offset=15,
                                        log_start_offset=0, high_watermark=10,
                                        leader_epoch_end_offset=10).offset
    assert target == 10


@pytest.mark.parametrize("end", [None, -1])
def test_leader_epoch_policy_without_an_answer_truncates_nothing(end: int | None) -> None:
    target = follower_truncation_offset(TruncationPolicy.LEADER_EPOCH, log_end_offset=7,
                                        log_start_offset=0, high_watermark=3,
                                        leader_epoch_end_offset=end).offset
    assert target == 7


@pytest.mark.parametrize("policy", list(TruncationPolicy))
def test_never_below_the_log_start_nor_above_the_leo(policy: TruncationPolicy) -> None:
    low = follower_truncation_offset(policy, log_end_offset=9, log_start_offset=5,
                                     high_watermark=2, leader_epoch_end_offset=2).offset
    high = follower_truncation_offset(policy, log_end_offset=9, log_start_offset=5,
                                      high_watermark=9, leader_epoch_end_offset=20).offset
    assert (low, high) == (5, 9)


def test_only_the_leader_epoch_policy_asks_the_leader() -> None:
    assert TruncationPolicy.LEADER_EPOCH.asks_leader
    assert not TruncationPolicy.HIGH_WATERMARK.asks_leader


def test_config_defaults_to_leader_epoch() -> None:
    assert load_config(BASE).replica_truncation_policy is TruncationPolicy.LEADER_EPOCH


@pytest.mark.parametrize(("text", "policy"), [
    ("leader_epoch", TruncationPolicy.LEADER_EPOCH),
    ("high_watermark", TruncationPolicy.HIGH_WATERMARK),
    ("HIGH_WATERMARK", TruncationPolicy.HIGH_WATERMARK),
])
def test_config_parses_the_policy(text: str, policy: TruncationPolicy) -> None:
    config = load_config(BASE, [f"replica.truncation.policy={text}"])
    assert config.replica_truncation_policy is policy


def test_config_refuses_an_unknown_policy_in_one_line() -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(BASE, ["replica.truncation.policy=hw"])
    message = str(raised.value)
    assert "\n" not in message
    assert "replica.truncation.policy" in message
    assert "high_watermark" in message
