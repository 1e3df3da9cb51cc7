"""Regression seeds of the broker node in the cluster simulator.

Seed 16 at fault probability 0.05: broker 1's dir holding t-1 failed, the broker crashed and
restarted without that dir; a LeaderAndIsr for t-1 was refused KAFKA_STORAGE_ERROR and the
node recorded the replica OFFLINE (as Kafka marks a partition on an offline dir; the
simulator's former broker kept no state for it). At the next crash the node traced CRASH for
that replica, which the trace had not seen restart: the model refused it (NOT_ENABLED) until
the replication abstraction learned to infer the restart it was not told of (seed 15 of
``test_regressions.py``, the same shape).
"""

from __future__ import annotations

from conformance.cluster_sim import ClusterConfig, simulate


def test_seed_16_no_crash_event_for_a_replica_only_known_offline() -> None:
    outcome = simulate(16, ClusterConfig(fault_probability=0.05))
    assert outcome.violation is None, outcome.violation
