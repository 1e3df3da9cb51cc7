"""Placement of new replicas across log dirs (fewest replicas, then fewest bytes, then config
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
    return min(DIRS, key=lambda d: (load[d][1], load[d][0], DIRS.index(d)))


def _place(manager: LogManager, *, batched: bool) -> dict[TopicPartition, str]:
    """Create 40 new partitions, in steps of 5 (``batched``) or one at a time; between them:
    after 10, empty (or cut to one record) every old partition outside the dir the last ones
    went to; after 20, delete
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
                if old.log_dir != winner:  # emptied, or cut to one record (a truncation
                    old.truncate_to(1 if old.log_end_offset > 2 else 0)  # within the log)
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


def _flip(change: str) -> tuple[str, str]:
    """Two dirs with a replica each more after a kept placement, A holding more bytes; then
    one kind of byte change makes A no heavier than B. Returns (the dir chosen next, the dir
    summing afresh chooses): with equal replica counts the bytes decide."""
    manager = LogManager.open(config(DIR_A, DIR_B, segment_bytes=200),
                              disk=SimDisk([DIR_A, DIR_B]), clock=ManualClock())
    heavy = manager.create(TopicPartition("p", 0), is_new=True)
    light = manager.create(TopicPartition("p", 1), is_new=True)
    assert (heavy.log_dir, light.log_dir) == (DIR_A, DIR_B)  # by count, then config order

    async def fill() -> None:
        for record in range(6):  # three segments of 180 bytes
            await heavy.append_as_leader(batch(record), 1)
        for record in range(2):  # 180 bytes
            await light.append_as_leader(batch(record), 1)

    run(fill)
    # the sums are made (B: fewer bytes) and kept by the next placement (A: fewer replicas)
    assert manager.create(TopicPartition("x", 0), is_new=True).log_dir == DIR_B
    assert manager.create(TopicPartition("x", 1), is_new=True).log_dir == DIR_A
    if change == "append":
        async def grow() -> None:
            for record in range(12):
                await light.append_as_leader(batch(record), 1)

        run(grow)
    elif change == "truncate_to":
        heavy.truncate_to(1)  # within the log: one batch left
    elif change == "truncate_fully":
        heavy.truncate_to(0)
    else:  # the two older segments deleted: 180 bytes left, as in B (a tie: config order)
        assert change == "delete_records"
        assert len(heavy.log.segments) == 3
        heavy.log.high_watermark = heavy.log_end_offset
        heavy.delete_records(heavy.log_end_offset)
    expected = _fresh_choice_of(manager, (DIR_A, DIR_B))
    return manager.create(TopicPartition("x", 2), is_new=True).log_dir, expected


def _fresh_choice_of(manager: LogManager, dirs: tuple[str, ...]) -> str:
    load = {log_dir: [0, 0] for log_dir in dirs}
    for tp in manager.partitions():
        partition = manager.get(tp)
        assert partition is not None
        load[partition.log.log_dir][0] += partition.log.size_in_bytes
        load[partition.log.log_dir][1] += 1
    return min(dirs, key=lambda d: (load[d][1], load[d][0], dirs.index(d)))


@pytest.mark.parametrize("change", ["append", "truncate_to", "truncate_fully", "delete_records"])
def test_a_byte_change_between_placements_decides_a_tie_of_replica_counts(change: str) -> None:
    chosen, expected = _flip(change)
    assert expected == DIR_A  # the change flipped the tie-break (kept sums would say B)
    assert chosen == expected


def test_a_burst_of_new_partitions_is_spread_by_replica_count_not_sent_to_the_lightest_dir(
) -> None:
    """Kafka's rule (``LogManager.nextLogDirs``): new replicas are empty, so placing by bytes
    first sent every one of a burst to the dir with the fewest bytes (the structured fuzz grew
    a topic to 32,767 partitions: 31,074 in one dir, 203 in the other)."""
    manager = _manager_with_data()  # nine replicas with data, three in each dir
    for index in range(30):
        manager.create(TopicPartition("burst", index), is_new=True)
    counts = dict.fromkeys(DIRS, 0)
    for tp in manager.partitions():
        partition = manager.get(tp)
        assert partition is not None
        counts[partition.log_dir] += 1
    assert counts == dict.fromkeys(DIRS, 13)
