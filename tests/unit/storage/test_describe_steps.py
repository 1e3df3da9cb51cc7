"""DescribeLogDirs in steps: the storage walks the partitions asked for (all, or only those
named), sorted once, yielding every ``DESCRIBE_PARTITIONS_PER_STEP`` partitions, and its
description is the one made in one go. A DescribeLogDirs of 32,000 partitions held the broker's
event loop for 0.57 s, one naming three partitions as long."""

from __future__ import annotations

import pytest

from conformance.disk import SimDisk
from impl.storage import LogManager, TopicPartition
from impl.storage import manager as manager_module
from impl.storage.errors import ErrorCode
from impl.storage.log import Log

from ._support import DIR_A, DIR_B, ManualClock, batch, config, run

PARTITIONS = 1_300


def _manager() -> tuple[LogManager, SimDisk]:
    disk = SimDisk([DIR_A, DIR_B])
    manager = LogManager.open(config(DIR_A, DIR_B), disk=disk, clock=ManualClock())
    with manager.batched_checkpoints():
        for index in range(PARTITIONS):
            manager.create(TopicPartition("t", index), is_new=True)
    first = manager.get(TopicPartition("t", 0))
    assert first is not None

    async def fill() -> None:
        for record in range(5):
            await first.append_as_leader(batch(record), 1)

    run(fill)
    manager.alter_replica_log_dir(TopicPartition("t", 0), DIR_B)  # a future replica in B
    return manager, disk


def _drive(manager: LogManager, partitions: list[TopicPartition] | None = None
           ) -> tuple[int, list[manager_module.LogDirDescription]]:
    steps = manager.describe_steps(partitions)
    yields = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            described: list[manager_module.LogDirDescription] = done.value
            return yields, described
        yields += 1


def test_the_walk_yields_every_step_and_describes_what_one_go_describes() -> None:
    manager, _ = _manager()
    yields, described = _drive(manager)
    # two dirs walk 1,300 partitions each: 2,600 walked, a yield every 512
    assert yields == 2 * PARTITIONS // manager_module.DESCRIBE_PARTITIONS_PER_STEP
    assert described == manager.describe()
    by_dir = {d.path: d for d in described}
    assert [r.is_temporary for r in by_dir[DIR_B].replicas if r.tp.partition == 0] == [True]
    assert sum(len(d.replicas) for d in described) == PARTITIONS + 1
    listed = [r.tp for d in described for r in d.replicas if not r.is_temporary]
    assert sorted(listed) == [TopicPartition("t", i) for i in range(PARTITIONS)]
    for description in described:  # each dir's replicas in partition order
        tps = [r.tp for r in description.replicas]
        assert tps == sorted(tps)


def test_asked_for_some_partitions_the_walk_visits_only_those(
        monkeypatch: pytest.MonkeyPatch) -> None:
    manager, _ = _manager()
    visited: list[TopicPartition] = []
    size: property = Log.__dict__["size_in_bytes"]

    def counted(log: Log) -> int:
        visited.append(log.tp)
        assert size.fget is not None
        result: int = size.fget(log)
        return result

    monkeypatch.setattr(Log, "size_in_bytes", property(counted))
    asked = [TopicPartition("t", 7), TopicPartition("t", 0), TopicPartition("nope", 1),
             TopicPartition("t", 7)]
    yields, described = _drive(manager, asked)
    assert yields == 0
    assert sorted(visited) == [TopicPartition("t", 0), TopicPartition("t", 0),
                               TopicPartition("t", 7)]  # t-0 twice: its log and its future
    assert {(d.path, r.tp, r.is_temporary) for d in described for r in d.replicas} == {
        (manager.get(TopicPartition("t", 7)).log_dir,  # type: ignore[union-attr]
         TopicPartition("t", 7), False),
        (DIR_A, TopicPartition("t", 0), False), (DIR_B, TopicPartition("t", 0), True)}


def test_a_dir_that_fails_during_the_walk_is_described_offline() -> None:
    manager, disk = _manager()
    steps = manager.describe_steps()
    next(steps)  # the walk of DIR_A is under way
    disk.fail_dir(DIR_A)
    described: list[manager_module.LogDirDescription] = []
    for _ in range(2 * PARTITIONS):
        try:
            next(steps)
        except StopIteration as done:
            described = done.value
            break
    by_dir = {d.path: d for d in described}
    assert (by_dir[DIR_A].online, by_dir[DIR_A].error_code, by_dir[DIR_A].replicas) == (
        False, ErrorCode.KAFKA_STORAGE_ERROR, ())
    assert DIR_A in manager.offline_dirs
    # the partitions of the failed dir are offline, and so are not listed in B's walk either
    assert all(r.tp != TopicPartition("t", 0) for r in by_dir[DIR_B].replicas)
