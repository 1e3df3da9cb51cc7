"""Recorded traces of seeds whose failure was the trace checker's, replayed through it.

A seed reaches a rare interleaving only as long as the simulator schedules exactly as it did;
any change to a pump's timing (the controller node's pump, for one) moves it elsewhere. The
replication events of the original runs are kept here (``data/*.jsonl.gz``, one
``TraceEvent.to_json`` line each), so the checker's fix stays tested whatever the simulator does:

* seed 1678 of ``logproof fuzz`` (NOT_ENABLED, no fault): a duplicate of a follower's earlier
  fetch overtook its later one at the leader; the abstraction must treat the overtaken request
  of the same incarnation as a stutter, not as a lower LEO (the checker before that fix refuses
  this recording).

The trace was recorded with the simulator of the day, its configuration in the test.
"""

from __future__ import annotations

import gzip
import itertools
from pathlib import Path

from conformance.replication_abstraction import abstractions
from conformance.trace_check import check_trace, parse_trace_line
from impl.trace import TraceEvent

DATA = Path(__file__).parent / "data"


def _load(name: str) -> list[TraceEvent]:
    with gzip.open(DATA / name, "rt", encoding="utf-8") as lines:
        return [parse_trace_line(line) for line in lines if line.strip()]


def test_seed_1678_an_overtaken_follower_fetch_is_a_stutter() -> None:
    """ClusterConfig(brokers=3, log_dirs=2, partitions=3, steps=95, fault_probability=0.0,
    segment_bytes=1048576, chunk_bytes=150), seed 1678, no faults."""
    trace = _load("seed_1678.jsonl.gz")
    fetches = [(int(str(e.fields["replica"])), int(str(e.fields["fetch_offset"])))
               for e in trace if e.event == "FOLLOWER_FETCH" and e.subject == "t-0@0"]
    assert any(later < earlier for (r1, earlier), (r2, later) in itertools.pairwise(fetches)
               if r1 == r2 == 1), "the recording lacks the overtaken fetch"
    verdict = check_trace(trace, abstractions())
    assert verdict.violation is None, verdict.violation.describe()
    assert verdict.events_checked > 0
