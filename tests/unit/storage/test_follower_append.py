"""A follower appends only batches that cannot overflow or corrupt its log, whatever its leader
sends (issue 15: a malicious or buggy leader).

Kafka's ``appendAsFollower`` checks CRCs, sizes and rising offsets, and rolls a segment before a
relative offset overflows. Before, this broker checked the CRC and the offsets only: a CRC-valid
batch claiming 2^31-1 records while holding one moved the follower's LEO by 2^31, a batch ending
past int64 was appended, and two batches 2^31 offsets apart in one fetch failed an assertion after
the segment had been rolled. Every refusal leaves the log byte-identical.
"""

from __future__ import annotations

import struct

import pytest

from conformance.disk import SimDisk
from impl.storage import LogManager
from impl.storage import record_batch as rb
from impl.storage import records as rec
from impl.storage.errors import CorruptBatch
from impl.storage.log import MAX_RELATIVE
from impl.storage.names import dir_name

from ._support import DIR_A, DIR_B, TP, ManualClock, config, run


def _replicated(base_offset: int, values: list[bytes], *, epoch: int = 3,
                **fields: int) -> bytes:
    """A leader's batch at ``base_offset`` (offsets assigned), header fields overridden, CRC
    recomputed (a lying leader computes valid CRCs)."""
    records = [rec.Record(base_offset + index, 10, None, value, ())
               for index, value in enumerate(values)]
    batch = rec.encode_batch(records, base_offset=base_offset, partition_leader_epoch=epoch)
    if not fields:
        return batch
    names = ("attributes", "last_offset_delta", "base_timestamp", "max_timestamp",
             "producer_id", "producer_epoch", "base_sequence", "record_count")
    header = rb.parse_header(batch)
    values_by_name = {name: getattr(header, name) for name in names} | fields
    body = bytearray(struct.pack(">hiqqqhii", *(values_by_name[name] for name in names)))
    body += batch[rb.HEADER_SIZE:]
    length = len(body) + rb.ATTRIBUTES_OFFSET - rb.LOG_OVERHEAD
    return struct.pack(">qiibI", base_offset, length, epoch, 2, rb.crc32c(body)) + bytes(body)


def _files(manager: LogManager) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for log_dir in (DIR_A, DIR_B):
        path = f"{log_dir}/{dir_name(TP)}"
        if manager.disk.exists(path):
            for name in manager.disk.list_dir(path):
                found[f"{path}/{name}"] = manager.disk.read(f"{path}/{name}", 0, 1 << 30)
    return found


@pytest.mark.parametrize(("why", "fields", "values"), [
    ("claims 2^31-1 records, holds one",
     {"record_count": MAX_RELATIVE, "last_offset_delta": MAX_RELATIVE - 1}, [b"a"]),
    ("claims more records than offsets", {"record_count": 3, "last_offset_delta": 1},
     [b"a", b"b"]),
    ("a negative record count", {"record_count": -1}, [b"a"]),
    ("claims fewer records than it holds", {"record_count": 1}, [b"a", b"b"]),
    ("an offset delta past lastOffsetDelta", {"last_offset_delta": 0, "record_count": 1},
     [b"a", b"b"]),
])
def test_a_lying_leader_batch_is_refused_and_the_log_is_untouched(
    why: str, fields: dict[str, int], values: list[bytes]
) -> None:
    async def main() -> None:
        manager = LogManager.open(config(), disk=SimDisk([DIR_A, DIR_B]), clock=ManualClock())
        partition = manager.create(TP, is_new=True)
        await partition.append_as_follower(_replicated(0, [b"x", b"y"]))
        before = _files(manager)
        with pytest.raises(CorruptBatch):
            await partition.append_as_follower(_replicated(2, values, **fields))
        assert _files(manager) == before, why
        assert partition.log_end_offset == 2
        await partition.append_as_follower(_replicated(2, [b"z"]))  # the log goes on
        assert partition.log_end_offset == 3

    run(main)


def test_a_batch_ending_past_int64_is_refused() -> None:
    async def main() -> None:
        manager = LogManager.open(config(), disk=SimDisk([DIR_A, DIR_B]), clock=ManualClock())
        partition = manager.create(TP, is_new=True)
        near_end = (1 << 63) - 2
        before = _files(manager)
        with pytest.raises(CorruptBatch, match="ends at offset"):
            await partition.append_as_follower(_replicated(near_end, [b"a", b"b"]))
        assert _files(manager) == before

    run(main)


def test_a_cleaned_batch_with_fewer_records_than_offsets_is_accepted() -> None:
    """Compaction keeps a batch's offset span with fewer records: a follower must take it."""

    async def main() -> None:
        manager = LogManager.open(config(), disk=SimDisk([DIR_A, DIR_B]), clock=ManualClock())
        partition = manager.create(TP, is_new=True)
        kept = [rec.Record(1, 10, b"k", b"v1", ()), rec.Record(4, 10, b"j", b"v4", ())]
        cleaned = rec.encode_batch(kept, base_offset=0, last_offset_delta=5,
                                   partition_leader_epoch=3)
        await partition.append_as_follower(cleaned)
        assert partition.log_end_offset == 6

    run(main)


def test_batches_further_apart_than_a_segment_addresses_roll_and_reload() -> None:
    """One fetch holding batches 2^31 offsets apart (a leader's offset gap) is appended in
    two segments; the log loads again with the same LEO."""

    async def main() -> None:
        disk = SimDisk([DIR_A, DIR_B])
        manager = LogManager.open(config(segment_bytes=1 << 20), disk=disk, clock=ManualClock())
        partition = manager.create(TP, is_new=True)
        far = MAX_RELATIVE + 10
        fetched = _replicated(0, [b"a"]) + _replicated(far, [b"b"])
        await partition.append_as_follower(fetched)
        assert [s.base_offset for s in partition.log.segments] == [0, far]
        assert partition.log_end_offset == far + 1
        manager.close()
        reopened = LogManager.open(config(segment_bytes=1 << 20), disk=disk, clock=ManualClock())
        again = reopened.get(TP)
        assert again is not None
        assert again.log_end_offset == far + 1

    run(main)
