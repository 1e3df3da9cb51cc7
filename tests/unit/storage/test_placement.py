"""Placement of new replicas across log dirs (fewest bytes, then fewest replicas, then config
order): within one step of the broker node (``batched_checkpoints``) the dirs' load is summed once
and kept up to date by each placement, so a LeaderAndIsr of n new partitions costs O(n), not
O(n²), and places every partition exactly where placing them one by one would."""

from __future__ import annotations

import pytest

from conformance.disk import SimDisk
from impl.storage import LogManager, TopicPartition
from impl.storage.log import Log

from ._support import DIR_A, DIR_B, DIR_C, ManualClock, batch, config, run

DIRS = (DIR_A, DIR_B, DIR_C)


def _manager_with_data() -> LogManager:
    manager = LogManager.open(config(*DIRS, segment_bytes=1 << 20), disk=SimDisk(list(DIRS)),
                              clock=ManualClock())

    async def fill() -> None:
        for index in range(9):
            partition = manager.create(TopicPartition("old", index), is_new=True)
            for record in range(1 + index % 4):
                await partition.append_as_leader(batch(record), 1)

    run(fill)
    return manager


def _place(manager: LogManager, *, batched: bool) -> dict[TopicPartition, str]:
    """Create 30 new partitions; after 10, empty every old partition outside the dir the last
    ones went to, after 20 delete the old ones inside it (both change the dirs' load inside
    the step, and which dir wins); the dir each new partition went to."""

    def work() -> dict[TopicPartition, str]:
        placed: dict[TopicPartition, str] = {}
        winner = ""
        for index in range(30):
            if index == 10:
                winner = placed[TopicPartition("new", 9)]
                for old_index in range(9):
                    old = manager.get(TopicPartition("old", old_index))
                    assert old is not None
                    if old.log_dir != winner:
                        old.truncate_to(0)
            if index == 20:
                for old_index in range(9):
                    old = manager.get(TopicPartition("old", old_index))
                    if old is not None and old.log_dir == winner:
                        manager.delete(TopicPartition("old", old_index))
            tp = TopicPartition("new", index)
            placed[tp] = manager.create(tp, is_new=True).log_dir
        return placed

    if batched:
        with manager.batched_checkpoints():
            return work()
    return work()


def test_a_step_places_partitions_where_one_by_one_placement_would() -> None:
    one_by_one = _place(_manager_with_data(), batched=False)
    in_one_step = _place(_manager_with_data(), batched=True)
    assert in_one_step == one_by_one
    assert set(one_by_one.values()) == set(DIRS)  # the rule spread them (not vacuous)


def test_a_step_sums_the_dirs_once(monkeypatch: pytest.MonkeyPatch) -> None:
    manager = _manager_with_data()
    visits = [0]
    size: property = Log.__dict__["size_in_bytes"]

    def counted(log: Log) -> int:
        visits[0] += 1
        assert size.fget is not None
        result: int = size.fget(log)
        return result

    monkeypatch.setattr(Log, "size_in_bytes", property(counted))
    with manager.batched_checkpoints():
        for index in range(200):
            manager.create(TopicPartition("many", index), is_new=True)
    assert visits[0] <= 9  # one sum over the hosted logs, then only the placements
    visits[0] = 0
    for index in range(20):  # outside a step each placement sums afresh
        manager.create(TopicPartition("more", index), is_new=True)
    assert visits[0] >= 20 * 209
