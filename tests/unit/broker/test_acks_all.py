"""acks=all answers by the ISR when the HW passes the batch (Kafka's
``Partition.checkEnoughReplicasReachOffset``): a batch appended while the ISR met
``min.insync.replicas`` whose ISR then shrank below it is NOT_ENOUGH_REPLICAS_AFTER_APPEND (20),
not a success, even though the shrink moved the HW past it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

from conformance.disk import SimDisk
from impl.broker import replication
from impl.broker.node import REQUEST_TIMED_OUT
from impl.broker.replica_manager import ProduceResult, ReplicaManager
from impl.broker.replication import ReplicaRole, ReplicaState, acks_all_result
from impl.storage import LogManager, StorageConfig, TopicPartition
from impl.storage.compression import CODEC_GZIP
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


SECOND = TopicPartition("acked", 1)


def _two_partitions() -> tuple[LogManager, ReplicaManager]:
    """Two partitions led here, each with ISR (leader, follower) and min.insync 2."""
    logs = LogManager.open(StorageConfig(log_dirs=(DIR,)), disk=SimDisk([DIR]))
    replicas = ReplicaManager(LEADER, logs, min_insync_replicas=2, message_max_bytes=1 << 20)
    for tp in (TP, SECOND):
        logs.create(tp, True)
        replicas.states[tp] = ReplicaState(tp.topic, tp.partition, ReplicaRole.LEADER, LEADER,
                                           0, 0, (LEADER, FOLLOWER), (LEADER, FOLLOWER))
    return logs, replicas


def _leos(logs: LogManager) -> list[int]:
    ends = []
    for tp in (TP, SECOND):
        partition = logs.get(tp)
        assert partition is not None
        ends.append(partition.log_end_offset)
    return ends


def test_a_request_of_several_partitions_waits_for_all_of_them_at_once() -> None:
    """acks=all over two partitions: both are appended before either is acknowledged, and one
    follower round answers both (Kafka's one DelayedProduce per request). Waiting partition by
    partition, the second was appended only after the first's round: n rounds for n
    partitions."""
    results: list[list[ProduceResult]] = []

    async def main() -> None:
        logs, replicas = _two_partitions()

        async def produce() -> None:
            results.append(await replicas.produce_partitions(
                [(TP, build_batch([b"a", b"b"])), (SECOND, build_batch([b"c"]))], -1, 30_000))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce)
            await trio.testing.wait_all_tasks_blocked()
            assert not results, "acks=all waits for the follower"
            assert _leos(logs) == [2, 1], "both partitions are appended before the wait"
            replicas.record_follower_fetch(TP, FOLLOWER, 2)
            replicas.record_follower_fetch(SECOND, FOLLOWER, 1)
        logs.close()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert [(result.error_code, result.base_offset) for result in results[0]] == [
        (replication.NONE, 0), (replication.NONE, 0)]


def test_a_request_of_several_partitions_times_out_once() -> None:
    """No follower fetches: the request's partitions time out together, after the request's
    timeout (Kafka's one DelayedProduce), not one timeout after another (which answered a
    request of n partitions after n timeouts, past the client's own request timeout)."""
    finished: list[tuple[float, list[int]]] = []

    async def main() -> None:
        logs, replicas = _two_partitions()
        results = await replicas.produce_partitions(
            [(TP, build_batch([b"a"])), (SECOND, build_batch([b"b"]))], -1, 1_000)
        finished.append((trio.current_time(), [result.error_code for result in results]))
        logs.close()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    (seconds, codes), = finished
    assert codes == [REQUEST_TIMED_OUT] * 2
    assert 1.0 <= seconds < 1.5, seconds


def test_a_delayed_fetch_is_woken_once_every_partition_is_appended() -> None:
    """A follower's delayed fetch wakes after the request's last append, so its response
    carries every partition (Kafka completes delayed requests after the request's appends);
    woken at the first append, it carried that partition alone and the rest waited a round.
    Compressed batches are validated off the event loop, so other tasks run between the
    partitions' appends."""
    seen: list[list[int]] = []

    async def offload(function: Callable[..., Any], *args: Any) -> Any:
        await trio.lowlevel.checkpoint()  # as trio.to_thread.run_sync lets other tasks run
        return function(*args)

    async def main() -> None:
        logs, replicas = _two_partitions()
        logs.set_cpu_offload(offload)

        async def delayed_fetch() -> None:
            await replicas.wait_changed(trio.current_time() + 10, records_only=True)
            seen.append(_leos(logs))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(delayed_fetch)
            await trio.testing.wait_all_tasks_blocked()
            await replicas.produce_partitions(
                [(TP, build_batch([b"a", b"b"], compression=CODEC_GZIP)),
                 (SECOND, build_batch([b"c"], compression=CODEC_GZIP))], 1, 30_000)
        logs.close()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert seen == [[2, 1]]


def test_appended_partitions_are_answered_at_once_only_when_nothing_waits_for_acks() -> None:
    """``append_partitions`` returns after the appends: acks=1 is answered then (the handler
    answers at once); acks=all is not until the follower has the batch (the handler defers the
    answer and the connection reads on), and its results count the timeout from the append."""
    outcomes: list[tuple[str, bool, list[int]]] = []

    async def main() -> None:
        logs, replicas = _two_partitions()
        acks_1 = await replicas.append_partitions([(TP, build_batch([b"a"]))], 1, 30_000)
        outcomes.append(("acks=1", acks_1.answered(),
                         [result.error_code for result in await acks_1.results()]))
        acks_all = await replicas.append_partitions([(SECOND, build_batch([b"b"]))], -1, 30_000)
        answered_before = acks_all.answered()
        replicas.record_follower_fetch(SECOND, FOLLOWER, 1)
        outcomes.append(("acks=all", answered_before,
                         [result.error_code for result in await acks_all.results()]))
        started = trio.current_time()
        late = await replicas.append_partitions([(SECOND, build_batch([b"c"]))], -1, 1_000)
        await trio.sleep(0.6)  # the connection finishes deferred answers in their own time
        codes = [result.error_code for result in await late.results()]
        outcomes.append(("timed out", trio.current_time() - started < 1.5, codes))
        logs.close()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert outcomes == [("acks=1", True, [replication.NONE]),
                        ("acks=all", False, [replication.NONE]),
                        ("timed out", True, [REQUEST_TIMED_OUT])]
