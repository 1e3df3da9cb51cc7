"""Per-topic log configs take effect live: rolling, retention, cleanup.policy, max.message.bytes."""

from __future__ import annotations

import pytest

from conformance.disk import SimDisk
from impl.storage import LogConfig, LogManager, MessageTooLarge, OffsetOutOfRange
from impl.storage import record_batch as rb

from ._support import DIR_A, DIR_B, TP, ManualClock, batch, config, run


def _open(clock: ManualClock, **overrides: int) -> LogManager:
    return LogManager.open(config(**overrides), disk=SimDisk([DIR_A, DIR_B]), clock=clock)


def test_topic_config_overrides_broker_retention_and_roll_live() -> None:
    async def main() -> None:
        clock = ManualClock()
        manager = _open(clock, retention_ms=-1, retention_bytes=-1, segment_bytes=1 << 20)
        partition = manager.create(TP, is_new=True)
        for _ in range(40):
            await partition.append_as_leader(rb.build_batch([b"v"], timestamp_ms=clock.wall), 1)
        partition.high_watermark = partition.log_end_offset
        assert len(partition.log.segments) == 1
        # a smaller segment.bytes rolls on the next append, without reopening the log
        manager.set_log_config(TP.topic, LogConfig(segment_bytes=200, retention_ms=-1))
        for _ in range(10):
            await partition.append_as_leader(rb.build_batch([b"v"], timestamp_ms=clock.wall), 1)
        partition.high_watermark = partition.log_end_offset
        assert len(partition.log.segments) > 2
        clock.advance_ms(20_000)
        assert manager.enforce_retention() == 0  # retention.ms -1 keeps everything
        # compact-only topics are never trimmed by retention
        manager.set_log_config(TP.topic, LogConfig(segment_bytes=200, retention_ms=10_000,
                                                   cleanup_policy=frozenset({"compact"})))
        assert manager.enforce_retention() == 0
        manager.set_log_config(TP.topic, LogConfig(segment_bytes=200, retention_ms=10_000))
        assert manager.enforce_retention() > 0
        assert partition.log_start_offset > 0
        assert manager.log_config("other").retention_ms == -1

    run(main)


def test_topic_max_message_bytes_applies_to_produce() -> None:
    async def main() -> None:
        manager = _open(ManualClock())
        partition = manager.create(TP, is_new=True)
        big = rb.build_batch([b"x" * 600])
        await partition.append_as_leader(big, 1)
        manager.set_log_config(TP.topic, LogConfig(max_message_bytes=300))
        with pytest.raises(MessageTooLarge):
            await partition.append_as_leader(big, 1)

    run(main)


def test_delete_records_moves_the_log_start_offset_durably() -> None:
    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        manager = LogManager.open(config(), disk=disk, clock=ManualClock())
        partition = manager.create(TP, is_new=True)
        for i in range(40):
            await partition.append_as_leader(batch(i), 1)
        assert len(partition.log.segments) > 2
        first_segment_base = partition.log.segments[1].base_offset
        partition.high_watermark = first_segment_base + 4
        with pytest.raises(OffsetOutOfRange):
            partition.delete_records(first_segment_base + 5)  # above the HW
        assert partition.delete_records(first_segment_base + 3) == first_segment_base + 3
        assert partition.log_start_offset == first_segment_base + 3
        assert partition.log.segments[0].base_offset == first_segment_base  # whole ones only
        found = partition.offset_for_timestamp(0)
        assert found is not None
        assert found[0] == first_segment_base + 3
        with pytest.raises(OffsetOutOfRange):
            partition.read(first_segment_base + 2, 1000)
        for piece in partition.read(first_segment_base + 3, 1000):
            piece.close()
        assert partition.delete_records(5) == first_segment_base + 3  # never backwards
        manager.close()
        reopened = LogManager.open(config(), disk=disk, clock=ManualClock()).get(TP)
        assert reopened is not None
        assert reopened.log_start_offset == first_segment_base + 3
        # a follower follows its leader's log start offset, bounded by its own HW
        reopened.high_watermark = first_segment_base + 4
        reopened.maybe_increment_log_start_offset(first_segment_base + 8)
        assert reopened.log_start_offset == first_segment_base + 4

    run(main)


def test_log_append_time_restamps_batches() -> None:
    async def main() -> None:
        clock = ManualClock()
        disk = SimDisk([DIR_A, DIR_B])
        manager = LogManager.open(config(), disk=disk, clock=clock)
        partition = manager.create(TP, is_new=True)
        info = await partition.append_as_leader(batch(0), 1)
        assert info.append_time_ms == -1
        manager.set_log_config(TP.topic, LogConfig(message_timestamp_type="LogAppendTime"))
        info = await partition.append_as_leader(batch(1), 1)
        assert info.append_time_ms == clock.wall_ms()
        stored = partition.log.segments[-1]
        raw = disk.read(stored.log_path, 0, stored.size)
        headers = list(rb.iter_batches(raw))  # checks every CRC
        assert not headers[0].is_log_append_time
        assert headers[1].is_log_append_time
        assert headers[1].max_timestamp == clock.wall_ms()

    run(main)
