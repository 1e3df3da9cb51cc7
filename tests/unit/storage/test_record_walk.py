"""The record walk compiled with mypyc behaves exactly as its source run by the interpreter.

``impl/storage/record_walk.py`` is imported compiled where ``make setup`` could build it; the
tests here load the same file's source as a second, interpreted module and compare the two on
valid records, on records with every field at the edge of its varint, and on random damage:
the same newest timestamp, or the same exception with the same message.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impl.storage import record_batch as rb
from impl.storage import record_walk
from impl.storage.errors import CorruptBatch, InvalidRecord

SOURCE = Path(record_walk.__file__).with_name("record_walk.py")
INT64_MAX = (1 << 63) - 1


def _interpreted() -> ModuleType:
    spec = importlib.util.spec_from_file_location("record_walk_interpreted", SOURCE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


INTERPRETED = _interpreted()


def _varint(value: int) -> bytes:
    """Zig-zag varint of any width (``value`` may overflow int64: damage on purpose)."""
    raw = (value << 1) ^ (value >> 80) if value < 0 else value << 1
    out = bytearray()
    while True:
        byte = raw & 0x7F
        raw >>= 7
        if raw:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
            headers: list[tuple[bytes, bytes | None]]) -> bytes:
    body = bytearray(b"\x00") + _varint(timestamp_delta) + _varint(offset_delta)
    for field in (key, value):
        body += _varint(-1) if field is None else _varint(len(field)) + field
    body += _varint(len(headers))
    for name, header_value in headers:
        body += _varint(len(name)) + name
        body += _varint(-1) if header_value is None else _varint(len(header_value)) + header_value
    return _varint(len(body)) + bytes(body)


def _outcome(module: ModuleType, data: bytes, count: int, base_timestamp: int,
             last_offset_delta: int | None = None, *, replicated: bool = False,
             start: int = 0) -> object:
    try:
        return module.walk_records(
            data, start, len(data), record_count=count, base_timestamp=base_timestamp,
            last_offset_delta=count - 1 if last_offset_delta is None else last_offset_delta,
            replicated=replicated)
    except (CorruptBatch, InvalidRecord) as error:
        return (type(error).__name__, str(error))


def _same(data: bytes, count: int, base_timestamp: int, last_offset_delta: int | None = None,
          *, replicated: bool = False) -> object:
    compiled = _outcome(record_walk, data, count, base_timestamp, last_offset_delta,
                        replicated=replicated)
    interpreted = _outcome(INTERPRETED, data, count, base_timestamp, last_offset_delta,
                           replicated=replicated)
    assert compiled == interpreted, (data.hex(), count, base_timestamp, replicated)
    return interpreted


_bytes_or_none = st.none() | st.binary(max_size=200)
_records = st.lists(
    st.tuples(
        st.integers(-(1 << 40), 1 << 40) | st.sampled_from([0, 63, 64, -65, (1 << 62), -(1 << 63)]),
        _bytes_or_none, _bytes_or_none,
        st.lists(st.tuples(st.binary(max_size=20), _bytes_or_none), max_size=3),
    ),
    min_size=1, max_size=20,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(records=_records,
       base_timestamp=st.integers(-(1 << 63), INT64_MAX) | st.just(1_700_000_000_000),
       damage=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=3),
       count_change=st.sampled_from([0, 0, 0, -1, 1]),
       gaps=st.lists(st.integers(0, 3), min_size=20, max_size=20),
       span_change=st.sampled_from([0, 0, -1, 1, 5]),
       replicated=st.booleans())
def test_compiled_and_interpreted_agree(records: list[tuple[int, bytes | None, bytes | None,
                                                         list[tuple[bytes, bytes | None]]]],
                                        base_timestamp: int, damage: list[tuple[int, int]],
                                        count_change: int, gaps: list[int], span_change: int,
                                        replicated: bool) -> None:
    # a replicated (cleaned) batch may skip offset deltas: rising, within the last delta
    deltas = list(range(len(records)))
    if replicated:
        deltas = [sum(gaps[:index + 1]) + index for index in range(len(records))]
    data = bytearray(b"".join(_record(offset, delta, key, value, headers)
                              for offset, (delta, key, value, headers) in zip(deltas, records,
                                                                              strict=True)))
    for position, byte in damage:
        data[position % len(data)] = byte
    _same(bytes(data), len(records) + count_change, base_timestamp, deltas[-1] + span_change,
          replicated=replicated)


def test_a_valid_batch_gives_its_newest_timestamp() -> None:
    values = [bytes([i]) * 1024 for i in range(50)]
    batch = rb.build_batch(values, timestamp_ms=1_700_000_000_000)
    header = rb.parse_header(batch)
    assert _outcome(record_walk, batch, header.record_count, header.base_timestamp,
                    start=rb.HEADER_SIZE) == (1_700_000_000_000, 1_700_000_000_000)
    deltas = range(-70, 70, 7)
    data = b"".join(_record(i, delta, None, b"v", []) for i, delta in enumerate(deltas))
    assert _same(data, 20, 5) == (5 + min(deltas), 5 + max(deltas))


@pytest.mark.parametrize(("data", "count", "base_timestamp", "expected"), [
    (_record(0, 0, None, b"v", []) + b"\x00", 1, 0, "InvalidRecord"),  # bytes after the records
    (_record(1, 0, None, b"v", []), 1, 0, "InvalidRecord"),  # offset delta out of sequence
    (_record(0, 1 << 70, None, b"v", []), 1, 0, "CorruptBatch"),  # an 11-byte varlong
    (_record(0, 1, None, b"v", []), 1, INT64_MAX, "InvalidRecord"),  # the timestamp overflows
    (_record(0, 0, None, b"v", []), 2, 0, "InvalidRecord"),  # fewer records than declared
    (b"\x7e" + b"\x00" * 10, 1, 0, "CorruptBatch"),  # a length past the batch
])
@pytest.mark.parametrize("replicated", [False, True])
def test_both_refuse_the_same_way(data: bytes, count: int, base_timestamp: int,
                                  expected: str, replicated: bool) -> None:
    outcome = _same(data, count, base_timestamp, replicated=replicated)
    assert isinstance(outcome, tuple)
    # a leader's batch that disagrees with its header is corrupt, not the client's mistake
    assert outcome[0] == ("CorruptBatch" if replicated else expected)


def test_a_replicated_batch_may_skip_offsets_within_its_span() -> None:
    data = b"".join(_record(offset, 0, None, b"v", []) for offset in (0, 2, 5))
    assert _same(data, 3, 10, 5, replicated=True) == (10, 10)
    assert _same(data, 3, 10, 4, replicated=True)[0] == "CorruptBatch"  # type: ignore[index]
    assert _same(data, 3, 10)[0] == "InvalidRecord"  # type: ignore[index]


def test_random_damage_of_a_real_batch() -> None:
    batch = rb.build_batch([bytes(range(256)) * 4] * 200, timestamp_ms=1_700_000_000_000)
    header = rb.parse_header(batch)
    generator = random.Random(19)
    for _ in range(300):
        data = bytearray(batch)
        for _ in range(generator.randint(1, 4)):
            data[generator.randrange(rb.HEADER_SIZE, len(data))] = generator.randrange(256)
        replicated = generator.random() < 0.5
        compiled = _outcome(record_walk, bytes(data[rb.HEADER_SIZE:]), header.record_count,
                            header.base_timestamp, replicated=replicated)
        interpreted = _outcome(INTERPRETED, bytes(data[rb.HEADER_SIZE:]), header.record_count,
                               header.base_timestamp, replicated=replicated)
        assert compiled == interpreted


def test_a_compiled_module_is_built_from_the_current_source() -> None:
    """A stale build would run old code while the source says otherwise: ``make setup``."""
    built = [path for path in SOURCE.parent.glob("record_walk.*") if path.suffix == ".so"]
    for path in built:
        assert path.stat().st_mtime >= SOURCE.stat().st_mtime, (
            f"{path.name} is older than record_walk.py: run make setup")
    assert bool(built) == record_walk.COMPILED
