"""acks=all answers by the ISR when the HW passes the batch (Kafka's
``Partition.checkEnoughReplicasReachOffset``): a batch appended while the ISR met
``min.insync.replicas`` whose ISR then shrank below it is NOT_ENOUGH_REPLICAS_AFTER_APPEND (20),
not a success, even though the shrink moved the HW past it.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from conformance.disk import SimDisk
from impl.broker import replication
from impl.broker.replica_manager import ProduceResult, ReplicaManager
from impl.broker.replication import ReplicaRole, ReplicaState, acks_all_result
from impl.storage import LogManager, StorageConfig, TopicPartition
from impl.storage.record_batch import build_batch

DIR = "/data/a"
TP = TopicPartition("acked", 0)
LEADER, FOLLOWER = 1, 2


@pytest.mark.parametrize(("high_watermark", "isr_size", "expected"), [
    (5, 2, None),  # the HW has not passed offset 5: wait
    (5, 1, None),  # nor here: the ISR is judged when it does
    (6, 2, replication.NONE),
    (6, 3, replication.NONE),
    (6, 1, replication.NOT_ENOUGH_REPLICAS_AFTER_APPEND),
])
def test_acks_all_result(high_watermark: int, isr_size: int, expected: int | None) -> None:
    assert acks_all_result(high_watermark, 5, isr_size, 2) == expected


def _produce_then(change: str) -> ProduceResult:
    """One acks=all produce on a leader whose ISR is (leader, follower), min.insync 2; while it
    waits, ``change`` happens: ``shrink`` (the follower leaves the ISR) or ``fetch`` (the
    follower fetches past the batch)."""
    results: list[ProduceResult] = []

    async def main() -> None:
        logs = LogManager.open(StorageConfig(log_dirs=(DIR,)), disk=SimDisk([DIR]))
        logs.create(TP, True)
        replicas = ReplicaManager(LEADER, logs, min_insync_replicas=2,
                                  message_max_bytes=1 << 20)
        replicas.states[TP] = ReplicaState(TP.topic, TP.partition, ReplicaRole.LEADER, LEADER,
                                           0, 0, (LEADER, FOLLOWER), (LEADER, FOLLOWER))

        async def produce() -> None:
            results.append(await replicas.produce(TP, build_batch([b"a", b"b"]), -1, 30_000))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce)
            await trio.testing.wait_all_tasks_blocked()
            assert not results, "acks=all waits for the follower"
            if change == "shrink":
                replicas.isr_changed(TP, (LEADER,), 1)
            else:
                replicas.record_follower_fetch(TP, FOLLOWER, 2)
        logs.close()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert len(results) == 1
    return results[0]


def test_acks_all_after_the_isr_shrank_below_min_insync_is_not_enough_replicas() -> None:
    result = _produce_then("shrink")
    assert result.error_code == replication.NOT_ENOUGH_REPLICAS_AFTER_APPEND, result


def test_acks_all_with_the_isr_intact_succeeds() -> None:
    result = _produce_then("fetch")
    assert result.error_code == replication.NONE, result
    assert result.base_offset == 0
