"""The broker answers DescribeLogDirs from the storage's walk in steps, letting other tasks of the
event loop run between them (a DescribeLogDirs of 32,000 partitions held the loop 0.57 s), and
asks the storage only for the partitions the request names."""

from __future__ import annotations

from typing import Any

import trio

from conformance.disk import SimDisk
from impl.broker import broker as broker_module
from impl.broker._handlers import YIELD_EVERY_ENTRIES
from impl.storage import LogManager, TopicPartition
from impl.storage import manager as manager_module
from tests.loop_turns import LoopTurns
from tests.unit.storage._support import DIR_A, DIR_B, ManualClock, config

PARTITIONS = 3_000


def _logs() -> LogManager:
    manager = LogManager.open(config(DIR_A, DIR_B), disk=SimDisk([DIR_A, DIR_B]),
                              clock=ManualClock())
    with manager.batched_checkpoints():
        for index in range(PARTITIONS):
            manager.create(TopicPartition("t", index), is_new=True)
    return manager


def _describe(logs: LogManager, topics: dict[str, set[int]] | None
              ) -> tuple[int, list[dict[str, Any]]]:
    """The answer, and how many times another task ran while it was made."""
    loop = LoopTurns()

    async def scenario() -> list[dict[str, Any]]:
        async with loop.counting():
            return await broker_module._StorageLogDirs(logs).describe_log_dirs(topics)

    results = trio.run(scenario)
    return loop.turns, results


def test_every_partition_is_described_with_the_loop_served_between_steps() -> None:
    ticks, results = _describe(_logs(), None)
    partitions = sorted((topic["name"], entry["partition_index"])
                        for result in results for topic in result["topics"]
                        for entry in topic["partitions"])
    assert partitions == [("t", index) for index in range(PARTITIONS)]
    walked = 2 * PARTITIONS  # both dirs walk every partition
    least = (walked // manager_module.DESCRIBE_PARTITIONS_PER_STEP
             + PARTITIONS // YIELD_EVERY_ENTRIES)
    assert ticks >= least - 2


def test_only_the_partitions_asked_for_are_described() -> None:
    ticks, results = _describe(_logs(), {"t": {5, 2999}, "other": {0}})
    described = {(result["log_dir"], topic["name"], entry["partition_index"])
                 for result in results for topic in result["topics"]
                 for entry in topic["partitions"]}
    assert {(name, index) for _, name, index in described} == {("t", 5), ("t", 2999)}
    assert ticks <= 1  # a walk of two partitions: no step to yield after
