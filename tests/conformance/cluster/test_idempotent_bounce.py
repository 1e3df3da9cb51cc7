"""Simulator scenario: an idempotent producer across a leader -> follower -> leader bounce.

Two brokers, one partition, ``min.insync.replicas=1``, no admin workload (a preferred
replica election would move the leadership on its own). Broker 0 leads; its ZooKeeper session
expires at step 40 (the process keeps running) so broker 1 is elected and takes the producer's
next sequences while broker 0, registered again, follows it; at step 150 broker 1's session
expires and broker 0 leads again, without a restart. Its producer state must know the
sequences broker 1 took: the simulated producer's next batch must not be refused
OUT_OF_ORDER_SEQUENCE_NUMBER (the end-to-end check IDEMPOTENCE_CONTINUOUS). Every event is
replayed in the models. With the producer state kept across the bounce (the trio broker's
behaviour before the broker node) seeds 1 and 2 fail IDEMPOTENCE_CONTINUOUS.
"""

from __future__ import annotations

import pytest

from conformance.cluster_sim import ClusterConfig, ClusterFault, simulate

CONFIG = ClusterConfig(brokers=2, partitions=1, steps=260, fault_probability=0.0,
                       min_insync_replicas=1, admin=False)
BOUNCE = (ClusterFault(40, "session_expiry", 0, 20), ClusterFault(150, "session_expiry", 1, 20))


@pytest.mark.parametrize("seed", [1, 2])
def test_idempotent_producer_across_a_bounce_without_restart(seed: int) -> None:
    outcome = simulate(seed, CONFIG, BOUNCE, keep_trace=True)
    assert outcome.violation is None, outcome.violation
    assert outcome.trace_verdict.violation is None
    assert outcome.trace_verdict.events_unchecked == 0
    # broker 0's roles and the leader appends in each: led, followed, led again, no restart
    phases: list[list[object]] = []
    for event in outcome.trace:
        if event.machine != "replication":
            continue
        if event.subject == "t-0@0" and event.event in (
                "BECOME_LEADER", "BECOME_FOLLOWER", "CRASH", "RESTART"):
            phases.append([event.event, 0])
        elif event.event == "LEADER_APPEND" and phases:
            count = phases[-1][1]
            assert isinstance(count, int)
            phases[-1][1] = count + 1
    roles = [role for role, _ in phases]
    assert roles == ["BECOME_LEADER", "BECOME_FOLLOWER", "BECOME_LEADER"], roles
    assert all(count for _, count in phases), phases  # produced in every phase
