"""Record batches are validated against the records they hold before any byte reaches the log,
and a log never holds what its index cannot address (issue 15, defect 1).

Before: a CRC-valid batch claiming 2^31-1 records while holding one was accepted, the LEO jumped
by 2^31, the next index entry's relative offset overflowed an int32 after the segment bytes were
written, and the partition (then the broker, at start-up) could not load again.
"""

from __future__ import annotations

import struct

import pytest

from conformance.disk import SimDisk
from impl.storage import LogManager, TopicPartition
from impl.storage import compression as codecs
from impl.storage import record_batch as rb
from impl.storage.errors import CorruptBatch, InvalidRecord
from impl.storage.log import MAX_RELATIVE, Log, StorageEnv
from impl.storage.names import DirKind, dir_name

from ._support import DIR_A, DIR_B, TP, ManualClock, batch, config, log_bytes, run

MAX_BYTES = 1 << 20


def _rewrite(
    data: bytes, *, fields: dict[str, int] | None = None, records: bytes | None = None
) -> bytes:
    """``data`` (one batch) with header fields and/or the records replaced, CRC recomputed."""
    names = ("attributes", "last_offset_delta", "base_timestamp", "max_timestamp",
             "producer_id", "producer_epoch", "base_sequence", "record_count")
    header = rb.parse_header(data)
    values = {name: getattr(header, name) for name in names} | (fields or {})
    body = bytearray(struct.pack(">hiqqqhii", *(values[name] for name in names)))
    body += data[rb.HEADER_SIZE:] if records is None else records
    crc = rb.crc32c(body)
    length = len(body) + rb.ATTRIBUTES_OFFSET - rb.LOG_OVERHEAD
    return struct.pack(">qiibI", 0, length, -1, 2, crc) + bytes(body)


def _records_of(data: bytes) -> bytes:
    return data[rb.HEADER_SIZE:]


def test_a_batch_claiming_more_records_than_it_holds_is_refused() -> None:
    one = rb.build_batch([b"v"], timestamp_ms=5)
    claims = {"record_count": MAX_RELATIVE, "last_offset_delta": MAX_RELATIVE - 1}
    lying = _rewrite(one, fields=claims)
    with pytest.raises(InvalidRecord, match="holds 1"):
        rb.validate_client_records(lying, MAX_BYTES)


def test_a_last_offset_delta_other_than_count_minus_one_is_refused() -> None:
    """Three records whose header spans 1001 offsets would move the log end offset by 1001."""
    three = rb.build_batch([b"a", b"b", b"c"], timestamp_ms=5)
    wide = _rewrite(three, fields={"last_offset_delta": 1000})
    with pytest.raises(InvalidRecord, match="last offset delta 1000"):
        rb.validate_client_records(wide, MAX_BYTES)


def test_records_must_match_the_header() -> None:
    three = rb.build_batch([b"a", b"b", b"c"], timestamp_ms=5)
    two = rb.build_batch([b"a", b"b"], timestamp_ms=5)
    fewer = _rewrite(three, fields={"record_count": 2, "last_offset_delta": 1})
    with pytest.raises(InvalidRecord, match="after the 2 records"):
        rb.validate_client_records(fewer, MAX_BYTES)
    # offset deltas 0, 0: the second record of ``two`` moved to delta 0
    first, second = _records_of(rb.build_batch([b"a"], timestamp_ms=5)), None
    second = _records_of(rb.build_batch([b"b"], timestamp_ms=5))
    out_of_order = _rewrite(two, records=first + second)
    with pytest.raises(InvalidRecord, match="offset delta 0"):
        rb.validate_client_records(out_of_order, MAX_BYTES)
    # a lying max timestamp is not refused: the leader rewrites it (test_max_timestamp.py)
    (lying_max,) = rb.validate_client_batches(_rewrite(two, fields={"max_timestamp": 1 << 60}),
                                              MAX_BYTES)
    assert lying_max.newest_timestamp_ms == 5
    cut = _rewrite(two, records=_records_of(two)[:-1])
    with pytest.raises(CorruptBatch):
        rb.validate_client_records(cut, MAX_BYTES)
    huge_key = _rewrite(two, records=b"\x0e\x00\x00\x00\xfe\xff\xff\xff\x0f" + b"\x00" * 5)
    with pytest.raises(CorruptBatch):
        rb.validate_client_records(_rewrite(huge_key, fields={"record_count": 1,
                                                              "last_offset_delta": 0}), MAX_BYTES)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_are_inflated_and_checked(codec: int) -> None:
    good = rb.build_batch([b"x" * 300, None, b"y"], timestamp_ms=9, compression=codec)
    (header,) = rb.validate_client_records(good, MAX_BYTES)
    assert header.compression == codec
    assert header.record_count == 3
    garbage = _rewrite(good, records=bytes(range(200)))
    with pytest.raises(CorruptBatch):
        rb.validate_client_records(garbage, MAX_BYTES)
    lying = _rewrite(good, fields={"record_count": 4, "last_offset_delta": 3})
    with pytest.raises(InvalidRecord):
        rb.validate_client_records(lying, MAX_BYTES)


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_a_decompression_bomb_is_refused(codec: int) -> None:
    inflated = b"\x00" * (codecs.MAX_UNCOMPRESSED_BATCH_BYTES + 1)
    bomb = _rewrite(rb.build_batch([b"v"], compression=codec),
                    records=codecs.compress(codec, inflated))
    assert len(bomb) < MAX_BYTES
    with pytest.raises(CorruptBatch, match="inflate"):
        rb.validate_client_records(bomb, MAX_BYTES)


def test_unknown_codec_is_refused() -> None:
    with pytest.raises(CorruptBatch, match="codec 5"):
        rb.validate_client_records(_rewrite(batch(1), fields={"attributes": 5}), MAX_BYTES)


def _replica_batch(base_offset: int) -> tuple[bytes, list[rb.BatchHeader]]:
    records = bytearray(rb.build_batch([b"r"], timestamp_ms=1))
    headers = rb.validate_replica_records(bytes(records), 0)
    rb.assign_offsets(records, headers, base_offset, 0)
    return bytes(records), rb.validate_replica_records(bytes(records), base_offset)


def test_segment_rolls_before_a_relative_offset_overflows() -> None:
    disk = SimDisk([DIR_A])
    env = StorageEnv(disk, config(DIR_A, segment_bytes=1 << 20), ManualClock())
    log = Log.create(env, DIR_A, TP, DirKind.LIVE)
    for base in (0, 1, MAX_RELATIVE + 7, MAX_RELATIVE + 8):
        records, headers = _replica_batch(base)
        log.append(records, headers)
    assert [s.base_offset for s in log.segments] == [0, MAX_RELATIVE + 7]
    before = log_bytes(disk, DIR_A)
    reloaded = Log.load(env, DIR_A, TP, DirKind.LIVE)
    assert reloaded.log_end_offset == MAX_RELATIVE + 9
    assert log_bytes(disk, DIR_A) == before


def test_a_failed_append_leaves_the_log_byte_identical() -> None:
    disk = SimDisk([DIR_A])
    env = StorageEnv(disk, config(DIR_A, index_interval_bytes=1), ManualClock())
    log = Log.create(env, DIR_A, TP, DirKind.LIVE)
    for base in (0, 1):
        log.append(*_replica_batch(base))
    path = f"{DIR_A}/{dir_name(TP)}"
    before = {name: disk.read(f"{path}/{name}", 0, 1 << 20) for name in disk.list_dir(path)}
    real_append = disk.append

    def failing_index_append(file: str, data: bytes) -> int:
        if file.endswith(".index"):
            raise AssertionError("index write failed")
        return real_append(file, data)

    disk.append = failing_index_append  # type: ignore[method-assign,assignment]
    with pytest.raises(AssertionError, match="index write failed"):
        log.append(*_replica_batch(2))
    disk.append = real_append  # type: ignore[method-assign]
    after = {name: disk.read(f"{path}/{name}", 0, 1 << 20) for name in disk.list_dir(path)}
    assert after == before
    log.append(*_replica_batch(2))  # and the log goes on
    assert log.log_end_offset == 3


def test_a_log_written_past_the_index_range_loads_and_the_broker_starts() -> None:
    """A segment holding a batch whose offset no index entry can address (as the lying batch
    left it) is cut at that batch on load instead of failing start-up; a log that cannot be
    loaded at all takes only its own partition offline."""
    disk = SimDisk([DIR_A, DIR_B])
    other = TopicPartition("other", 0)

    async def fill() -> None:
        manager = LogManager.open(config(DIR_A, DIR_B), disk=disk, clock=ManualClock())
        for tp in (TP, other):
            partition = manager.create(tp, is_new=True)
            await partition.append_as_leader(batch(0), 1)
        manager.close()

    run(fill)
    segment = f"{DIR_A}/{dir_name(TP)}/{0:020d}.log"
    if not disk.exists(segment):
        segment = f"{DIR_B}/{dir_name(TP)}/{0:020d}.log"
    far, _ = _replica_batch(MAX_RELATIVE + 100)
    disk.append(segment, far)
    disk.fsync(segment)
    manager = LogManager.open(config(DIR_A, DIR_B), disk=disk, clock=ManualClock())
    partition = manager.get(TP)
    assert partition is not None
    assert partition.log_end_offset == 2
    assert not manager.offline_dirs

    # a log whose load fails for any other reason: only that partition is offline
    original = Log.load

    def load(env: StorageEnv, log_dir: str, tp: TopicPartition, kind: DirKind, **kw: int) -> Log:
        if tp == TP:
            raise ValueError("unreadable leader-epoch checkpoint")
        return original(env, log_dir, tp, kind, **kw)

    Log.load = load  # type: ignore[method-assign]
    try:
        manager = LogManager.open(config(DIR_A, DIR_B), disk=disk, clock=ManualClock())
    finally:
        Log.load = original  # type: ignore[method-assign]
    assert TP in manager.offline_replicas
    assert manager.get(other) is not None
    assert not manager.offline_dirs
