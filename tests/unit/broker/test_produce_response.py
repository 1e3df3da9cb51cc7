"""Produce responses written by hand (:mod:`impl.broker.produce_response`) are byte for byte
what kio writes from the same values, at every version the broker answers (3-8)."""

from __future__ import annotations

import datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from impl.broker import api_versions
from impl.broker._codec import DecodedRequest, RequestHead, encode_response, load_response_schema
from impl.broker._kio_build import build
from impl.broker.produce_response import (
    VERSION_MAX,
    VERSION_MIN,
    PartitionResult,
    encode_produce_response,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
RESULTS = st.builds(
    PartitionResult, INT32, st.sampled_from(sorted(int(code) for code in ErrorCode)), INT64,
    st.one_of(st.just(-1), st.integers(0, 2**41)), INT64,
    st.one_of(st.none(), st.text(st.characters(codec="utf-8"), max_size=20)))
TOPICS = st.lists(st.tuples(st.text(st.characters(codec="utf-8"), max_size=12),
                            st.lists(RESULTS, max_size=4)), max_size=3)


def _kio(version: int, correlation: int, topics: list[tuple[str, list[PartitionResult]]],
         throttle_ms: int) -> bytes:
    def partition(result: PartitionResult) -> dict[str, Any]:
        append_time = None if result.log_append_time_ms < 0 else datetime.datetime.fromtimestamp(
            result.log_append_time_ms / 1000.0, tz=datetime.UTC)
        return {"index": result.partition, "error_code": result.error_code,
                "base_offset": result.base_offset, "log_append_time": append_time,
                "log_start_offset": result.log_start_offset, "record_errors": [],
                "error_message": result.error_message}

    response_class = load_response_schema(api_versions.PRODUCE, version)
    request = DecodedRequest(RequestHead(api_versions.PRODUCE, version, correlation), "test",
                             None, response_class)
    return encode_response(request, build(response_class, {
        "responses": [{"name": name, "partition_responses": [partition(r) for r in results]}
                      for name, results in topics],
        "throttle_time": throttle_ms}))


@settings(max_examples=300, suppress_health_check=list(HealthCheck), deadline=None)
@given(version=st.integers(VERSION_MIN, VERSION_MAX), correlation=INT32, topics=TOPICS,
       throttle_ms=st.integers(0, 2**31 - 1))
def test_the_response_is_what_kio_writes(version: int, correlation: int,
                                         topics: list[tuple[str, list[PartitionResult]]],
                                         throttle_ms: int) -> None:
    ours = encode_produce_response(version, correlation, topics, throttle_ms)
    assert ours == _kio(version, correlation, topics, throttle_ms)
