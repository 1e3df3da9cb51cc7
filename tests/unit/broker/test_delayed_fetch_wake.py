"""A delayed fetch waits in :meth:`ReplicaManager.wait_changed`: a consumer's is woken by a HW
move, a follower's (``records_only``) only by new records or a log change, as Kafka's
DelayedFetch completes a follower's fetch on the leader's LEO, not on the HW the other followers
move (each such wake re-asked the node for nothing new)."""

from __future__ import annotations

import trio
import trio.testing

from conformance.disk import SimDisk
from impl.broker.replica_manager import ReplicaManager
from impl.broker.replication import ReplicaRole, ReplicaState
from impl.storage import LogManager, StorageConfig, TopicPartition
from impl.storage.record_batch import build_batch

DIR = "/data/a"
TP = TopicPartition("woken", 0)
LEADER, FOLLOWER = 1, 2


def test_a_lone_hw_move_wakes_consumers_not_followers() -> None:
    woken: list[str] = []

    async def main() -> None:
        logs = LogManager.open(StorageConfig(log_dirs=(DIR,)), disk=SimDisk([DIR]))
        logs.create(TP, True)
        replicas = ReplicaManager(LEADER, logs, min_insync_replicas=1,
                                  message_max_bytes=1 << 20)
        replicas.states[TP] = ReplicaState(TP.topic, TP.partition, ReplicaRole.LEADER, LEADER,
                                           0, 0, (LEADER, FOLLOWER), (LEADER, FOLLOWER))
        result = await replicas.produce(TP, build_batch([b"a", b"b"]), 1, 30_000)
        assert result.error_code == 0
        deadline = trio.current_time() + 3600

        async def wait(name: str, records_only: bool) -> None:
            await replicas.wait_changed(deadline, records_only=records_only)
            woken.append(f"{name}@{trio.current_time() < deadline}")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait, "consumer", False)
            nursery.start_soon(wait, "follower", True)
            await trio.testing.wait_all_tasks_blocked()
            # the follower fetches past both records: the HW moves 0 -> 2, nothing else
            replicas.record_follower_fetch(TP, FOLLOWER, 2)
            await trio.testing.wait_all_tasks_blocked()
            assert woken == ["consumer@True"]
            # new records wake the follower's fetch
            await replicas.produce(TP, build_batch([b"c"]), 1, 30_000)
            await trio.testing.wait_all_tasks_blocked()
            assert woken == ["consumer@True", "follower@True"]
        logs.close()

    trio.run(main, clock=trio.testing.MockClock())


OTHER = TopicPartition("woken", 1)


def test_a_delayed_fetch_is_woken_by_its_own_partitions_only() -> None:
    """Kafka's purgatory watches a delayed fetch by its partitions: an append to another
    partition (a follower append, another leader's partition) does not re-evaluate it, while a
    waiter naming no partitions (a metadata wait) still wakes on any change."""
    woken: list[str] = []

    async def main() -> None:
        logs = LogManager.open(StorageConfig(log_dirs=(DIR,)), disk=SimDisk([DIR]))
        replicas = ReplicaManager(LEADER, logs, min_insync_replicas=1,
                                  message_max_bytes=1 << 20)
        for tp in (TP, OTHER):
            logs.create(tp, True)
            replicas.states[tp] = ReplicaState(tp.topic, tp.partition, ReplicaRole.LEADER,
                                               LEADER, 0, 0, (LEADER, FOLLOWER),
                                               (LEADER, FOLLOWER))
        deadline = trio.current_time() + 3600

        async def wait(name: str, records_only: bool,
                       partitions: list[TopicPartition] | None) -> None:
            await replicas.wait_changed(deadline, records_only=records_only,
                                        partitions=partitions)
            woken.append(f"{name}@{trio.current_time() < deadline}")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait, "follower-of-tp", True, [TP])
            nursery.start_soon(wait, "consumer-of-tp", False, [TP])
            nursery.start_soon(wait, "anything", False, None)
            await trio.testing.wait_all_tasks_blocked()
            result = await replicas.produce(OTHER, build_batch([b"x"]), 1, 30_000)
            assert result.error_code == 0
            await trio.testing.wait_all_tasks_blocked()
            assert woken == ["anything@True"]
            # the other partition's HW moves: still nothing for the watchers of TP
            replicas.record_follower_fetch(OTHER, FOLLOWER, 1)
            await trio.testing.wait_all_tasks_blocked()
            assert woken == ["anything@True"]
            await replicas.produce(TP, build_batch([b"y"]), 1, 30_000)
            await trio.testing.wait_all_tasks_blocked()
            assert sorted(woken) == ["anything@True", "consumer-of-tp@True",
                                     "follower-of-tp@True"]
        assert replicas.waiting_fetches() == 0
        logs.close()

    trio.run(main, clock=trio.testing.MockClock())


def test_a_change_to_everything_wakes_every_delayed_fetch() -> None:
    """A notify naming no partitions (a LeaderAndIsr's role change, UpdateMetadata, the
    broker stopping) wakes the delayed fetches of every partition; one naming partitions
    wakes only theirs, and a consumer's on a HW move of its own."""
    woken: list[str] = []

    async def main() -> None:
        logs = LogManager.open(StorageConfig(log_dirs=(DIR,)), disk=SimDisk([DIR]))
        replicas = ReplicaManager(LEADER, logs, min_insync_replicas=1,
                                  message_max_bytes=1 << 20)
        deadline = trio.current_time() + 3600

        async def wait(name: str, records_only: bool, partitions: list[TopicPartition]) -> None:
            await replicas.wait_changed(deadline, records_only=records_only,
                                        partitions=partitions)
            woken.append(name)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait, "follower", True, [TP])
            nursery.start_soon(wait, "consumer", False, [OTHER])
            await trio.testing.wait_all_tasks_blocked()
            replicas.notify(records=False, partitions=[TP])  # a HW move: not a follower's
            await trio.testing.wait_all_tasks_blocked()
            assert woken == []
            replicas.notify(records=False, partitions=[OTHER])
            await trio.testing.wait_all_tasks_blocked()
            assert woken == ["consumer"]
            replicas.notify()
            await trio.testing.wait_all_tasks_blocked()
            assert woken == ["consumer", "follower"]
        assert replicas.waiting_fetches() == 0
        logs.close()

    trio.run(main, clock=trio.testing.MockClock())
