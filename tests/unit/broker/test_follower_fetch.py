"""The follower's hand-written Fetch v11 (:mod:`impl.broker.follower_fetch`) against kio: the
request is byte for byte what kio writes from the same values, and every response kio reads,
it reads to the same values; what kio refuses (a truncated frame, a count past the end), it
refuses too. Two differences, both deliberate: bytes after the response are refused (kio stops
where its counts end), and an error code kio does not know is read (a newer leader's)."""

from __future__ import annotations

import io
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from impl.broker import follower_fetch
from impl.broker._codec import (
    MalformedRequestError,
    _writer,
    decode_response,
    encode_request,
    load_request_schema,
    load_response_schema,
)
from impl.broker._kio_build import build
from impl.broker.fetch_response import FetchPartitionReply, encode_fetch_response

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
NAMES = st.text(st.characters(codec="utf-8"), max_size=12)
SETTINGS = settings(max_examples=200, suppress_health_check=list(HealthCheck), deadline=None)

POSITIONS = st.lists(st.builds(follower_fetch.FetchPosition, INT32, INT32, INT64, INT64, INT32),
                     max_size=4)
REQUEST_TOPICS = st.lists(st.tuples(NAMES, POSITIONS), max_size=3)


@SETTINGS
@given(correlation=INT32, client_id=NAMES, replica=INT32, wait=INT32, least=INT32, most=INT32,
       topics=REQUEST_TOPICS)
def test_the_request_is_what_kio_writes(correlation: int, client_id: str, replica: int,
                                        wait: int, least: int, most: int,
                                        topics: list[tuple[str, list[Any]]]) -> None:
    ours = follower_fetch.encode_request(correlation, client_id, replica_id=replica,
                                         max_wait_ms=wait, min_bytes=least, max_bytes=most,
                                         topics=topics)
    kio = encode_request(1, 11, correlation, client_id, build(load_request_schema(1, 11), {
        "replica_id": replica, "max_wait": wait, "min_bytes": least, "max_bytes": most,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": name, "partitions": [
            {"partition": p.partition, "current_leader_epoch": p.current_leader_epoch,
             "fetch_offset": p.fetch_offset, "log_start_offset": p.log_start_offset,
             "partition_max_bytes": p.partition_max_bytes} for p in positions]}
            for name, positions in topics],
        "forgotten_topics_data": [], "rack_id": ""}))
    assert ours == kio


#: kio reads only the error codes it knows (this broker's reader reads any: a newer leader's)
ERROR_CODES = st.sampled_from(sorted(int(code) for code in ErrorCode))
PARTITIONS = st.lists(st.fixed_dictionaries({
    "partition_index": INT32, "error_code": ERROR_CODES,
    "high_watermark": INT64, "last_stable_offset": INT64, "log_start_offset": INT64,
    "aborted_transactions": st.one_of(st.none(), st.lists(st.fixed_dictionaries({
        "producer_id": INT64, "first_offset": INT64}), max_size=2)),
    "preferred_read_replica": INT32,
    "records": st.one_of(st.none(), st.binary(max_size=64)),
}), max_size=3)
RESPONSES = st.fixed_dictionaries({
    "throttle_time": st.integers(0, 2**31 - 1), "error_code": ERROR_CODES,
    "session_id": INT32,
    "responses": st.lists(st.fixed_dictionaries({"topic": NAMES, "partitions": PARTITIONS}),
                          max_size=3),
})


def _kio_frame(correlation: int, data: dict[str, Any]) -> bytes:
    """A Fetch v11 response written by kio (without the size prefix)."""
    response_class = load_response_schema(1, 11)
    out = io.BytesIO()
    header_class = response_class.__header_schema__
    _writer(header_class)(out, header_class(correlation_id=correlation))
    _writer(response_class)(out, build(response_class, data))
    return out.getvalue()


def _as_kio_reads(frame: bytes) -> tuple[int, list[tuple[str, list[tuple[Any, ...]]]]]:
    correlation, body = decode_response(1, 11, frame)
    return correlation, [(topic.topic, [
        (int(p.partition_index), int(p.error_code), int(p.high_watermark),
         int(p.last_stable_offset), int(p.log_start_offset), bytes(p.records or b""))
        for p in topic.partitions]) for topic in body.responses]


def _as_we_read(frame: bytes) -> tuple[int, list[tuple[str, list[tuple[Any, ...]]]]]:
    answer = follower_fetch.decode_response(frame)
    return answer.correlation_id, [(name, [tuple(p) for p in partitions])
                                   for name, partitions in answer.topics]


@SETTINGS
@given(correlation=INT32, data=RESPONSES)
def test_a_response_reads_as_kio_reads_it(correlation: int, data: dict[str, Any]) -> None:
    frame = _kio_frame(correlation, data)
    assert _as_we_read(frame) == _as_kio_reads(frame)
    answer = follower_fetch.decode_response(frame)
    assert (answer.throttle_time_ms, answer.error_code, answer.session_id) == (
        data["throttle_time"], data["error_code"], data["session_id"])


class _Slice:
    def __init__(self, data: bytes) -> None:
        self.data = data

    @property
    def size(self) -> int:
        return len(self.data)


def test_the_leaders_own_response_reads_back() -> None:
    """What this broker's leader side writes (:mod:`impl.broker.fetch_response`)."""
    replies = [FetchPartitionReply(0, 0, 10, 10, 0, (_Slice(b"abc"), _Slice(b"de"))),
               FetchPartitionReply(3, 6, -1, -1, -1)]
    pieces = encode_fetch_response(11, 77, [("t", replies), ("u", [])])
    frame = b"".join(piece if isinstance(piece, bytes) else piece.data  # type: ignore[attr-defined]
                     for piece in pieces)[4:]
    answer = follower_fetch.decode_response(frame)
    assert answer.correlation_id == 77
    assert answer.topics == [
        ("t", [follower_fetch.FetchedPartition(0, 0, 10, 10, 0, b"abcde"),
               follower_fetch.FetchedPartition(3, 6, -1, -1, -1, b"")]),
        ("u", [])]


@SETTINGS
@given(correlation=INT32, data=RESPONSES, cut=st.integers(1, 10_000))
def test_a_truncated_response_is_refused(correlation: int, data: dict[str, Any],
                                         cut: int) -> None:
    frame = _kio_frame(correlation, data)
    short = frame[:max(len(frame) - cut, 0)]
    with pytest.raises(MalformedRequestError):
        follower_fetch.decode_response(short)
    with pytest.raises(MalformedRequestError):
        follower_fetch.decode_response(frame + b"\x00")


@SETTINGS
@given(correlation=INT32, data=RESPONSES, where=st.integers(0, 10_000), byte=st.integers(0, 255))
def test_a_damaged_response_reads_as_kio_reads_it_or_is_refused_by_both(
        correlation: int, data: dict[str, Any], where: int, byte: int) -> None:
    frame = bytearray(_kio_frame(correlation, data))
    frame[where % len(frame)] = byte
    damaged = bytes(frame)
    try:
        expected = _as_kio_reads(damaged)
    except MalformedRequestError:
        try:
            answer = follower_fetch.decode_response(damaged)
        except MalformedRequestError:
            return
        # the one refusal of kio's that is not ours: an error code it does not know
        known = {int(code) for code in ErrorCode}
        codes = {answer.error_code} | {partition.error_code for _, partitions in answer.topics
                                       for partition in partitions}
        assert codes - known, f"kio refuses {damaged.hex()}, we read {answer}"
        return
    try:
        ours = _as_we_read(damaged)
    except MalformedRequestError as error:
        refusal = str(error)
    else:
        assert ours == expected
        return
    # the one refusal of ours that is not kio's: bytes after the response (kio stops where its
    # counts end)
    assert "bytes after the response" in refusal, refusal


def test_counts_past_the_end_are_refused_before_anything_is_allocated() -> None:
    head = struct.pack(">iihi", 1, 0, 0, 0)
    for frame in (head + struct.pack(">i", 2**31 - 1),
                  head + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t"
                  + struct.pack(">i", 2**31 - 1),
                  head + struct.pack(">i", -2)):
        with pytest.raises(MalformedRequestError):
            follower_fetch.decode_response(frame)
