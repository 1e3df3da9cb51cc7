"""KIP-73 replication quotas: which replicas are throttled, and when the rate is used up."""

from __future__ import annotations

from impl.broker.config_store import ReplicationQuotas


class _Clock:
    def __init__(self) -> None:
        self.now_ns = 0

    def __call__(self) -> int:
        return self.now_ns


def test_lists_name_partition_and_broker() -> None:
    quotas = ReplicationQuotas(2, _Clock())
    quotas.set_lists("t", "0:2,1:3", "*")
    assert quotas.leader_throttled("t", 0)
    assert not quotas.leader_throttled("t", 1)  # 1:3 is broker 3's
    assert quotas.follower_throttled("t", 7)
    assert not quotas.leader_throttled("u", 0)
    quotas.set_lists("t", "", "")
    assert not quotas.follower_throttled("t", 7)


def test_rate_is_used_up_and_refills() -> None:
    clock = _Clock()
    quotas = ReplicationQuotas(1, clock)
    assert not quotas.leader_exceeded()
    quotas.record_leader(10_000_000)  # unlimited: nothing is ever used up
    assert not quotas.leader_exceeded()
    quotas.set_rates(1000, 1000)
    quotas.record_leader(5000)
    assert quotas.leader_exceeded()
    assert not quotas.follower_exceeded()
    clock.now_ns += 4_000_000_000
    assert quotas.leader_exceeded()  # 4000 of the 5000 bytes paid back
    clock.now_ns += 1_000_000_000
    assert not quotas.leader_exceeded()
    quotas.record_follower(2000)
    assert quotas.follower_exceeded()
