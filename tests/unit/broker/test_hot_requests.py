"""Produce v3-v8 and Fetch v4-v11 read by hand (:mod:`impl.broker._hot_requests`) against kio's
generic path (:func:`impl.broker._codec.decode_with_kio`): every frame kio reads, they read to
the same values; every frame kio refuses (truncated, a count past the end, a null where none
is allowed, bytes left over), they refuse."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from impl.broker import api_versions
from impl.broker._codec import (
    MalformedRequestError,
    decode_request,
    decode_with_kio,
    encode_request,
    load_request_schema,
    peek_head,
)
from impl.broker._kio_build import build

INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
NAMES = st.text(st.characters(codec="utf-8"), max_size=10)
SETTINGS = settings(max_examples=300, suppress_health_check=list(HealthCheck), deadline=None)

PRODUCES = st.fixed_dictionaries({
    "transactional_id": st.one_of(st.none(), NAMES), "acks": INT16,
    "timeout": INT32,
    "topic_data": st.lists(st.fixed_dictionaries({
        "name": NAMES,
        "partition_data": st.lists(st.fixed_dictionaries({
            "index": INT32, "records": st.one_of(st.none(), st.binary(max_size=40))}),
            max_size=3)}), max_size=3),
})
FETCHES = st.fixed_dictionaries({
    "replica_id": INT32, "max_wait": INT32, "min_bytes": INT32,
    "max_bytes": INT32, "isolation_level": st.integers(0, 1), "session_id": INT32,
    "session_epoch": INT32,
    "topics": st.lists(st.fixed_dictionaries({
        "topic": NAMES,
        "partitions": st.lists(st.fixed_dictionaries({
            "partition": INT32, "current_leader_epoch": INT32, "fetch_offset": INT64,
            "log_start_offset": INT64, "partition_max_bytes": INT32}), max_size=3)}),
        max_size=3),
    "forgotten_topics_data": st.lists(st.fixed_dictionaries({
        "topic": NAMES, "partitions": st.lists(INT32, max_size=3)}), max_size=2),
    "rack_id": NAMES,
})
REQUESTS = st.one_of(
    st.tuples(st.just(api_versions.PRODUCE), st.integers(3, 8), PRODUCES),
    st.tuples(st.just(api_versions.FETCH), st.integers(4, 11), FETCHES))


def _frame(api_key: int, version: int, data: dict[str, Any], client_id: str | None) -> bytes:
    """A request as a client writes it (kio), without its size prefix; fields the version
    lacks are dropped."""
    request_class = load_request_schema(api_key, version)
    names = set(request_class.__dataclass_fields__)
    kept = {key: value for key, value in data.items() if key in names}
    if api_key == api_versions.FETCH:
        kept["topics"] = [{"topic": topic["topic"], "partitions": [
            {key: value for key, value in partition.items()
             if key in ("partition", "fetch_offset", "partition_max_bytes")
             or (key == "current_leader_epoch" and version >= 9)
             or (key == "log_start_offset" and version >= 5)}
            for partition in topic["partitions"]]} for topic in data["topics"]]
    framed = encode_request(api_key, version, 7, client_id or "", build(request_class, kept))
    return framed[4:]


def _values(body: Any) -> Any:
    """Everything the handlers read of a body, kio's or ours, as plain values."""
    if hasattr(body, "topic_data"):
        return ("produce", body.transactional_id, int(body.acks), body.timeout,
                [(str(topic.name), [(int(p.index), None if p.records is None
                                     else bytes(p.records)) for p in topic.partition_data])
                 for topic in body.topic_data])
    return ("fetch", int(body.replica_id), body.max_wait, int(body.min_bytes),
            int(body.max_bytes), int(body.isolation_level),
            int(getattr(body, "session_id", 0)), int(getattr(body, "session_epoch", -1)),
            [(str(topic.topic), [(int(p.partition), int(getattr(p, "current_leader_epoch", -1)),
                                  int(p.fetch_offset), int(getattr(p, "log_start_offset", -1)),
                                  int(p.partition_max_bytes)) for p in topic.partitions])
             for topic in body.topics],
            [(str(topic.topic), [int(i) for i in topic.partitions])
             for topic in getattr(body, "forgotten_topics_data", ())],
            str(getattr(body, "rack_id", "")))


def _kio_reads(frame: bytes) -> Any:
    request = decode_with_kio(frame, peek_head(frame))
    return request.client_id, _values(request.body)


def _we_read(frame: bytes) -> Any:
    request = decode_request(frame)
    return request.client_id, _values(request.body)


@SETTINGS
@given(request=REQUESTS, client_id=st.one_of(st.none(), NAMES))
def test_a_request_reads_as_kio_reads_it(request: tuple[int, int, dict[str, Any]],
                                         client_id: str | None) -> None:
    frame = _frame(*request, client_id=client_id)
    assert type(decode_request(frame).body).__module__ == "impl.broker._hot_requests"
    assert _we_read(frame) == _kio_reads(frame)


@SETTINGS
@given(request=REQUESTS, cut=st.integers(1, 10_000))
def test_a_truncated_or_padded_request_is_refused(request: tuple[int, int, dict[str, Any]],
                                                  cut: int) -> None:
    frame = _frame(*request, client_id="c")
    short = frame[:max(len(frame) - cut, 8)]
    if short != frame:
        with pytest.raises(MalformedRequestError):
            decode_request(short)
    with pytest.raises(MalformedRequestError):
        decode_request(frame + b"\x00")


@SETTINGS
@given(request=REQUESTS, where=st.integers(8, 10_000), byte=st.integers(0, 255))
def test_a_damaged_request_reads_as_kio_reads_it_or_is_refused_by_both(
        request: tuple[int, int, dict[str, Any]], where: int, byte: int) -> None:
    frame = bytearray(_frame(*request, client_id="c"))
    if len(frame) <= 8:
        return
    frame[8 + where % (len(frame) - 8)] = byte  # (the head stays: the same API and version)
    damaged = bytes(frame)
    try:
        expected = _kio_reads(damaged)
    except MalformedRequestError:
        with pytest.raises(MalformedRequestError):
            decode_request(damaged)
        return
    assert _we_read(damaged) == expected


@pytest.mark.parametrize("count", [-1, -2, 2**31 - 1])
def test_a_null_or_impossible_array_is_refused_as_kio_refuses_it(count: int) -> None:
    """The topics array of a Produce and of a Fetch announced null (-1), negative, or longer
    than the frame."""
    produce = bytearray(_frame(api_versions.PRODUCE, 8, {
        "transactional_id": None, "acks": 1, "timeout": 1000, "topic_data": []}, "c"))
    fetch = bytearray(_frame(api_versions.FETCH, 11, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 100,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [],
        "forgotten_topics_data": [], "rack_id": ""}, "c"))
    # the topics count: after the header (10 + len("c")), a null transactional id, acks and
    # timeout (8 bytes); after the header and 29 bytes of fixed fields for Fetch v11
    for frame, at in ((produce, 11 + 8), (fetch, 11 + 29)):
        frame[at:at + 4] = count.to_bytes(4, "big", signed=True)
        with pytest.raises(MalformedRequestError):
            _kio_reads(bytes(frame))
        with pytest.raises(MalformedRequestError):
            decode_request(bytes(frame))
