"""A batch whose ``maxTimestamp`` lies is rewritten to what its records say, as Kafka's
LogValidator does (``setMaxTimestamp``), and every record's timestamp is held to
``message.timestamp.difference.max.ms`` (issue 15).

Before: a CREATE_TIME batch whose header did not name its newest record's timestamp was refused
with INVALID_RECORD, where Kafka accepts it and stores the true maximum (and CRC); a producer
that sets the header carelessly lost its data. What the header says reaches clients through
ListOffsets by timestamp and through the time index (and retention), so each is checked here.
"""

from __future__ import annotations

import struct

import pytest

from conformance.disk import SimDisk
from impl.storage import LogManager
from impl.storage import record_batch as rb
from impl.storage import records as rec
from impl.storage.errors import InvalidTimestamp
from impl.storage.log_config import LogConfig

from ._support import DIR_A, DIR_B, TP, ManualClock, config, run


def _rewrite(data: bytes, **fields: int) -> bytes:
    """``data`` (one batch) with header fields replaced and its CRC recomputed."""
    names = ("attributes", "last_offset_delta", "base_timestamp", "max_timestamp",
             "producer_id", "producer_epoch", "base_sequence", "record_count")
    header = rb.parse_header(data)
    values = {name: getattr(header, name) for name in names} | fields
    body = bytearray(struct.pack(">hiqqqhii", *(values[name] for name in names)))
    body += data[rb.HEADER_SIZE:]
    length = len(body) + rb.ATTRIBUTES_OFFSET - rb.LOG_OVERHEAD
    return struct.pack(">qiibI", 0, length, -1, 2, rb.crc32c(body)) + bytes(body)


def _batch(timestamps: list[int], **fields: int) -> bytes:
    """Records stamped ``timestamps`` (relative to the first), header fields overridden."""
    records = [rec.Record(index, stamp, None, b"v%d" % index, ())
               for index, stamp in enumerate(timestamps)]
    batch = rec.encode_batch(records, base_offset=0, base_timestamp=timestamps[0])
    return _rewrite(batch, **fields) if fields else batch


def _stored_headers(manager: LogManager) -> list[rb.BatchHeader]:
    partition = manager.get(TP)
    assert partition is not None
    headers: list[rb.BatchHeader] = []
    for segment in partition.log.segments:
        raw = manager.disk.read(segment.log_path, 0, segment.size)
        headers += rb.iter_batches(raw)  # every CRC checked
    return headers


def test_a_lying_max_timestamp_is_rewritten_to_the_newest_record() -> None:
    async def main() -> None:
        manager = LogManager.open(config(), disk=SimDisk([DIR_A, DIR_B]), clock=ManualClock())
        partition = manager.create(TP, is_new=True)
        honest = _batch([100, 300, 200])
        await partition.append_as_leader(honest, 1)
        # a header claiming less than its records (the newest record would hide from
        # ListOffsets), then one claiming more (a segment would never expire)
        await partition.append_as_leader(_batch([400, 900, 500], max_timestamp=401), 1)
        await partition.append_as_leader(_batch([1000, 1100], max_timestamp=1 << 60), 1)
        # a client claiming LogAppendTime on a CreateTime topic: the type is the topic's
        await partition.append_as_leader(
            _batch([1200], attributes=0x08, max_timestamp=77), 1)
        headers = _stored_headers(manager)
        assert [h.max_timestamp for h in headers] == [300, 900, 1100, 1200]
        assert not any(h.is_log_append_time for h in headers)
        # the honest batch was stored as received (only offset and epoch, outside the CRC)
        partition_log = partition.log
        raw = manager.disk.read(partition_log.segments[0].log_path, 0, len(honest))
        assert raw[rb.PARTITION_LEADER_EPOCH_OFFSET + 4:] == honest[
            rb.PARTITION_LEADER_EPOCH_OFFSET + 4:]

    run(main)


def test_list_offsets_by_timestamp_and_the_time_index_see_the_true_maximum() -> None:
    async def main() -> None:
        manager = LogManager.open(config(index_interval_bytes=1), disk=SimDisk([DIR_A, DIR_B]),
                                  clock=ManualClock())
        partition = manager.create(TP, is_new=True)
        await partition.append_as_leader(_batch([10, 20]), 1)  # offsets 0, 1
        # offsets 2, 3: the header says 11, the newest record is 5000
        await partition.append_as_leader(_batch([11, 5000], max_timestamp=11), 1)
        await partition.append_as_leader(_batch([12, 13]), 1)  # offsets 4, 5
        # ListOffsets: the first record stamped at or after 4000 is offset 3, which a search
        # trusting the lie would skip (its batch "ends" at 11)
        assert partition.offset_for_timestamp(4000) == (3, 5000)
        assert partition.offset_for_timestamp(5001) is None
        # the time index: its entries carry the true bound (5000 before offset 4)
        segment = partition.log.segments[0]
        assert (5000, 4) in segment.time_index
        assert segment.max_timestamp == 5000
        # and a reload rebuilds the same answers from the stored headers
        manager.close()
        reopened = LogManager.open(config(index_interval_bytes=1), disk=manager.disk,
                                   clock=ManualClock())
        again = reopened.get(TP)
        assert again is not None
        assert again.offset_for_timestamp(4000) == (3, 5000)

    run(main)


def test_log_append_time_overrides_whatever_the_header_says() -> None:
    async def main() -> None:
        clock = ManualClock()
        manager = LogManager.open(config(), disk=SimDisk([DIR_A, DIR_B]), clock=clock)
        partition = manager.create(TP, is_new=True)
        manager.set_log_config(TP.topic, LogConfig(message_timestamp_type="LogAppendTime"))
        await partition.append_as_leader(_batch([10, 20], max_timestamp=-5), 1)
        (header,) = _stored_headers(manager)
        assert header.is_log_append_time
        assert header.max_timestamp == clock.wall_ms()
        assert partition.offset_for_timestamp(clock.wall_ms()) == (0, clock.wall_ms())

    run(main)


def test_every_record_is_held_to_the_timestamp_window() -> None:
    """``message.timestamp.difference.max.ms``: a header naming in-range timestamps does not
    let an out-of-range record in (the broker used to check only the header's)."""

    async def main() -> None:
        manager = LogManager.open(config(), disk=SimDisk([DIR_A, DIR_B]), clock=ManualClock())
        partition = manager.create(TP, is_new=True)
        window = (1000, 2000)
        await partition.append_as_leader(_batch([1000, 2000]), 1, window)
        hidden_new = _batch([1500, 9000], max_timestamp=1500)
        hidden_old = _batch([1500, 10])  # base 1500, a record older than the base
        before = partition.log_end_offset
        for lying in (hidden_new, hidden_old):
            with pytest.raises(InvalidTimestamp):
                await partition.append_as_leader(lying, 1, window)
        assert partition.log_end_offset == before
        # no window (the default): accepted, with the true maximum
        await partition.append_as_leader(hidden_new, 1, None)
        assert _stored_headers(manager)[-1].max_timestamp == 9000

    run(main)
