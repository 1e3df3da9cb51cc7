"""The log cleaner inside the storage simulator (``SimConfig.compacted``): the real cleaner,
advanced one pace at a time by the seed, races appends, HW moves, truncations above the HW,
KIP-113 moves, crashes and disk faults on compacted partitions; its trace replays in
``model/log_cleaner.py`` and the partitions read back satisfy COMPACTION_KEEPS_LATEST and
COMPACTION_OFFSETS_STABLE. A planted cleaner whose range reaches the active segment is caught.
Replay a seed: ``logproof conformance replay --seed N --brokers 1 --compacted 2 ...``."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest

from conformance.cleaner_sim import check_compacted, read_records
from conformance.move_abstraction import move_abstractions
from conformance.move_sim import SimConfig, simulate
from impl.storage import record_batch as rb
from impl.storage.errors import CorruptBatch

CONFIG = SimConfig(partitions=3, compacted=2, steps=300, segment_bytes=600)


@pytest.fixture(autouse=True)
def _quiet() -> None:
    logging.getLogger("impl").setLevel(logging.CRITICAL)


def test_the_cleaner_races_the_storage_workload_and_replays_in_its_model() -> None:
    actions: dict[str, int] = {}
    for seed in range(8):
        outcome = simulate(seed, CONFIG, abstractions=move_abstractions)
        assert outcome.violation is None, (seed, outcome.violation)
        for name, count in outcome.trace_verdict.actions.items():
            actions[name] = actions.get(name, 0) + count
    # the cleaner did clean, and some cleanings lost their race (the guard aborted them)
    assert actions.get("log_cleaner.segments_replaced", 0) >= 10, actions
    assert actions.get("log_cleaner.cleaning_aborted", 0) >= 1, actions


@pytest.mark.parametrize("seed", range(3))
def test_a_planted_cleaning_of_the_active_segment_is_caught(seed: int) -> None:
    planted = SimConfig(partitions=3, compacted=2, steps=300, segment_bytes=600,
                        variant="clean_active_segment")
    outcome = simulate(seed, planted, abstractions=move_abstractions)
    assert outcome.violation is not None
    assert outcome.violation.kind == "trace"
    assert "active segment" in outcome.violation.message
    assert "--compacted 2" in outcome.violation.message  # the replay command


def test_without_compacted_partitions_a_run_is_unchanged() -> None:
    """The cleaner's stream is its own: a run without compacted partitions is the one it was
    (same trace), and one with them draws the same workload."""
    plain = simulate(5, SimConfig(steps=120), abstractions=move_abstractions)
    again = simulate(5, SimConfig(steps=120, compacted=0), abstractions=move_abstractions)
    assert plain.trace_digest == again.trace_digest
    assert plain.violation is None


def test_the_end_to_end_check_refuses_a_lost_latest_and_a_rewritten_record() -> None:
    acknowledged = {0: (b"a", b"1"), 1: (b"b", b"1"), 2: (b"a", b"2"), 3: (b"b", b"2")}
    cleaned = {2: (b"a", b"2"), 3: (b"b", b"2")}
    assert check_compacted(cleaned, acknowledged, point=4) is None
    lost = {3: (b"b", b"2")}
    assert check_compacted(lost, acknowledged, point=4) == (
        "COMPACTION_KEEPS_LATEST",
        "the latest record of b'a' below the cleaner point 4 (offset 2) is gone")
    dirty_gone = {2: (b"a", b"2")}
    verdict = check_compacted(dirty_gone, acknowledged, point=3)
    assert verdict is not None
    assert verdict[0] == "COMPACTION_OFFSETS_STABLE"
    rewritten = {2: (b"a", b"x"), 3: (b"b", b"2")}
    verdict = check_compacted(rewritten, acknowledged, point=4)
    assert verdict is not None
    assert verdict[0] == "COMPACTION_OFFSETS_STABLE"


@dataclass
class _Slice:
    data: bytes

    def read_all(self) -> bytes:
        return self.data

    def close(self) -> None:
        pass


@dataclass
class _Stored:
    """What a partition's read returns: stored bytes, as they are."""

    data: bytes
    log_start_offset: int = 0
    log_end_offset: int = 2

    def read(self, offset: int, max_bytes: int) -> list[_Slice]:
        assert offset == 0
        return [_Slice(self.data[:max_bytes])]


def test_a_read_back_refuses_a_batch_its_crc_does_not_cover() -> None:
    """A compacted partition's records are read back through each batch's CRC, as a consumer
    checking CRCs reads them: a changed value byte parses as a record but is refused (the
    storage broker reports READ_CONSISTENT; the record walk alone returned the wrong value)."""
    batch = rb.build_batch([b"v0", b"v1"], keys=[b"k", b"k"])
    assert read_records(_Stored(batch)) == {0: (b"k", b"v0"), 1: (b"k", b"v1")}  # type: ignore[arg-type]
    assert batch[-3:] == b"v1\x00"  # the last record: its value, then no headers
    flipped = batch[:-2] + b"2" + batch[-1:]  # b"v2": the same length, a record that parses
    with pytest.raises(CorruptBatch, match="CRC-32C"):
        read_records(_Stored(flipped))  # type: ignore[arg-type]
