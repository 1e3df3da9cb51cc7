"""Placement of new replicas across log dirs (fewest bytes, then fewest replicas, then config
order). The dirs' load is summed once and kept up to date by each placement while no log's bytes
change and no replica comes or goes otherwise, across steps of the broker node (which applies a
LeaderAndIsr one partition per step): n new partitions cost O(n), not O(n²), and each goes
exactly where summing afresh would put it."""

from __future__ import annotations

import pytest

from conformance.disk import SimDisk
from impl.storage import LogManager, TopicPartition
from impl.storage.log import Log

from ._support import DIR_A, DIR_B, DIR_C, ManualClock, batch, config, run

DIRS = (DIR_A, DIR_B, DIR_C)


def _manager_with_data() -> LogManager:
    manager = LogManager.open(config(*DIRS, segment_bytes=512), disk=SimDisk(list(DIRS)),
                              clock=ManualClock())

    async def fill() -> None:
        for index in range(9):
            partition = manager.create(TopicPartition("old", index), is_new=True)
            for record in range(1 + index % 4):
                await partition.append_as_leader(batch(record), 1)

    run(fill)
    return manager


def _fresh_choice(manager: LogManager) -> str:
    """The rule, summed afresh over every hosted log (the test's oracle)."""
    load = {log_dir: [0, 0] for log_dir in DIRS}
    for tp in manager.partitions():
        partition = manager.get(tp)
        assert partition is not None
        for log in (partition.log, partition.future):
            if log is not None:
                load[log.log_dir][0] += log.size_in_bytes
                load[log.log_dir][1] += 1
    return min(DIRS, key=lambda d: (load[d][0], load[d][1], DIRS.index(d)))


def _place(manager: LogManager, *, batched: bool) -> dict[TopicPartition, str]:
    """Create 40 new partitions, in steps of 5 (``batched``) or one at a time; between them:
    after 10, empty every old partition outside the dir the last ones went to; after 20, delete
    the old ones inside it; after 25, append to a new partition in each dir, most to one; after
    30, DeleteRecords on that one (each changes the dirs' load, and which dir wins). Each
    placement is checked against the oracle; returns the dir each new partition went to."""
    placed: dict[TopicPartition, str] = {}
    winner = ""

    def between(index: int) -> None:
        nonlocal winner
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
        if index < 25:
            return
        target = manager.get(TopicPartition("new", 3))
        assert target is not None
        if index == 25:  # 40 records on new-3, 15 on one new partition in each other dir
            growing = {target.log_dir: (target, 40)}
            for other_index in range(25):
                other = manager.get(TopicPartition("new", other_index))
                assert other is not None
                growing.setdefault(other.log_dir, (other, 15))

            async def grow() -> None:
                for partition, records in growing.values():
                    for record in range(records):
                        await partition.append_as_leader(batch(record), 1)

            run(grow)
        if index == 30:  # DeleteRecords drops new-3's segments: its dir is the lightest again
            target.log.high_watermark = target.log_end_offset
            target.delete_records(target.log_end_offset)

    def create(index: int) -> None:
        tp = TopicPartition("new", index)
        expected = _fresh_choice(manager)
        placed[tp] = manager.create(tp, is_new=True).log_dir
        assert placed[tp] == expected, (index, placed[tp], expected)

    for start in range(0, 40, 5):
        for index in range(start, start + 5):
            between(index)
        if batched:
            with manager.batched_checkpoints():
                for index in range(start, start + 5):
                    create(index)
        else:
            for index in range(start, start + 5):
                create(index)
    return placed


def test_placements_go_where_summing_afresh_would_put_them() -> None:
    one_by_one = _place(_manager_with_data(), batched=False)
    in_steps = _place(_manager_with_data(), batched=True)
    assert in_steps == one_by_one
    assert set(one_by_one.values()) == set(DIRS)  # the rule spread them (not vacuous)


def test_the_dirs_are_summed_once_while_no_log_changes(monkeypatch: pytest.MonkeyPatch) -> None:
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
        for index in range(100):
            manager.create(TopicPartition("many", index), is_new=True)
    for index in range(100):  # one step each, as the broker applies a LeaderAndIsr
        with manager.batched_checkpoints():
            manager.create(TopicPartition("more", index), is_new=True)
    assert visits[0] <= 9  # one sum over the hosted logs, then only the placements
    target = manager.get(TopicPartition("old", 0))
    assert target is not None

    async def append() -> None:
        await target.append_as_leader(batch(1), 1)

    run(append)  # a log's bytes changed: the next placement sums again
    visits[0] = 0
    manager.create(TopicPartition("after", 0), is_new=True)
    assert visits[0] >= 209
