"""ListOffsets' max timestamp (KIP-734) in the storage engine: the first record from the log
start stamped with the largest timestamp, by record and not by batch (KAFKA-16310), across
segments, from a log start inside a segment and inside a batch, after truncation and after a
reload; held to an oracle that reads every record."""

from __future__ import annotations

import random

import pytest

from conformance.disk import SimDisk
from impl.storage import LogManager, PartitionLog
from impl.storage import records as rec
from impl.storage.log_config import LogConfig

from ._support import DIR_A, DIR_B, TP, ManualClock, config, run


def _batch(timestamps: list[int]) -> bytes:
    records = [rec.Record(index, stamp, None, b"v%d" % index, ())
               for index, stamp in enumerate(timestamps)]
    return rec.encode_batch(records, base_offset=0, base_timestamp=timestamps[0])


def _oracle(partition: PartitionLog) -> tuple[int, int] | None:
    """Every record from the log start read: the first one stamped with the largest."""
    log = partition.log
    stamped: list[tuple[int, int]] = []
    for segment in log.segments:
        raw = log.disk.read(segment.log_path, 0, segment.size)
        position = 0
        while position < len(raw):
            size = int.from_bytes(raw[position + 8:position + 12], "big") + 12
            for record in rec.iter_records(raw[position:position + size]):
                if record.offset >= partition.log_start_offset and record.timestamp >= 0:
                    stamped.append((record.offset, record.timestamp))
            position += size
    if not stamped:
        return None
    newest = max(stamp for _, stamp in stamped)
    return next((offset, stamp) for offset, stamp in stamped if stamp == newest)


def test_an_empty_log_has_no_max_timestamp_record() -> None:
    manager = LogManager.open(config(), disk=SimDisk([DIR_A, DIR_B]), clock=ManualClock())
    assert manager.create(TP, is_new=True).max_timestamp_record() is None


def test_the_record_not_the_batch_and_the_first_of_equals() -> None:
    async def main() -> None:
        manager = LogManager.open(config(segment_bytes=1 << 20), disk=SimDisk([DIR_A, DIR_B]),
                                  clock=ManualClock())
        partition = manager.create(TP, is_new=True)
        await partition.append_as_leader(_batch([100, 700, 300]), 1)  # offsets 0-2
        await partition.append_as_leader(_batch([200, 700]), 1)  # offsets 3-4: a tie, later
        assert partition.max_timestamp_record() == (1, 700)
        await partition.append_as_leader(_batch([50, 60, 900, 10]), 1)  # offsets 5-8
        assert partition.max_timestamp_record() == (7, 900)

    run(main)


def test_a_log_start_inside_a_batch_leaves_its_deleted_records_out() -> None:
    """DeleteRecords inside a batch: the batch's header still names the newest of all its
    records, a deleted one among them; the answer is the newest from the log start."""

    async def main() -> None:
        manager = LogManager.open(config(segment_bytes=1 << 20), disk=SimDisk([DIR_A, DIR_B]),
                                  clock=ManualClock())
        partition = manager.create(TP, is_new=True)
        await partition.append_as_leader(_batch([100, 900, 200]), 1)  # offsets 0-2
        await partition.append_as_leader(_batch([300, 250]), 1)  # offsets 3-4
        partition.high_watermark = partition.log_end_offset
        assert partition.max_timestamp_record() == (1, 900)
        partition.delete_records(2)
        assert partition.max_timestamp_record() == (3, 300)
        partition.delete_records(4)
        assert partition.max_timestamp_record() == (4, 250)

    run(main)


def test_log_append_time_answers_the_first_record_of_the_newest_batch() -> None:
    async def main() -> None:
        clock = ManualClock()
        manager = LogManager.open(config(), disk=SimDisk([DIR_A, DIR_B]), clock=clock)
        manager.set_log_config(TP.topic, LogConfig(message_timestamp_type="LogAppendTime"))
        partition = manager.create(TP, is_new=True)
        await partition.append_as_leader(_batch([10, 20]), 1)  # offsets 0-1
        clock.advance_ms(5)
        await partition.append_as_leader(_batch([30, 40]), 1)  # offsets 2-3
        assert partition.max_timestamp_record() == (2, clock.wall_ms()) == _oracle(partition)

    run(main)


@pytest.mark.parametrize("seed", range(20))
def test_random_logs_agree_with_reading_every_record(seed: int) -> None:
    """Random batches (timestamps with ties, out of order inside a batch) over small
    segments; after each step, DeleteRecords inside a batch, truncation, and a reload, the
    answer is the oracle's."""
    rng = random.Random(seed)

    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        settings = config(segment_bytes=rng.choice((300, 600, 1 << 20)),
                          index_interval_bytes=rng.choice((1, 120, 4096)))
        manager = LogManager.open(settings, disk=disk, clock=ManualClock())
        partition = manager.create(TP, is_new=True)
        for _ in range(rng.randrange(5, 30)):
            stamps = [rng.randrange(0, 50) * 10 for _ in range(rng.randrange(1, 5))]
            await partition.append_as_leader(_batch(stamps), 1)
            assert partition.max_timestamp_record() == _oracle(partition)
        end = partition.log_end_offset
        partition.high_watermark = end
        partition.delete_records(rng.randrange(0, end + 1))
        assert partition.max_timestamp_record() == _oracle(partition)
        start = partition.log_start_offset
        if end > start + 1:
            partition.truncate_to(rng.randrange(start + 1, end))
            assert partition.max_timestamp_record() == _oracle(partition)
        answer = partition.max_timestamp_record()
        manager.close()
        reopened = LogManager.open(settings, disk=disk, clock=ManualClock())
        again = reopened.get(TP)
        assert again is not None
        assert again.max_timestamp_record() == answer == _oracle(again)

    run(main)
