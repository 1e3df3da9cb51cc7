from __future__ import annotations

import io
import random
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from impl.broker import api_versions
from impl.broker._codec import (
    MalformedRequestError,
    UnsupportedRequestError,
    api_versions_fallback,
    decode_request,
    encode_request,
    encode_response,
    peek_head,
)
from impl.broker._framing import WHOLE_BODY_MAX_BYTES, FrameDecoder, FrameError, frame
from impl.broker._kio_build import build


def _frames(decoder: FrameDecoder) -> list[bytes]:
    out = []
    while (item := decoder.next_frame()) is not None:
        out.append(bytes(item))
    return out


def test_whole_and_byte_by_byte_agree() -> None:
    rng = random.Random(7)
    payloads = [rng.randbytes(rng.randrange(0, 300)) for _ in range(20)]
    payloads[7] = rng.randbytes(200_000)  # assembled in place (LARGE_FRAME_BYTES)
    stream = b"".join(frame(payload) for payload in payloads)
    whole = FrameDecoder(1_000_000)
    whole.feed(stream)
    assert _frames(whole) == payloads
    single = FrameDecoder(1_000_000)
    collected: list[bytes] = []
    index = 0
    while index < len(stream):
        direct = single.direct_buffer()
        if direct is not None:  # as the server does: receive straight into the frame
            count = min(len(direct), rng.randrange(1, 5000))
            direct[:count] = stream[index : index + count]
            single.direct_filled(count)
            index += count
        else:
            single.feed(stream[index : index + 1])
            index += 1
        collected.extend(_frames(single))
    assert collected == payloads


@pytest.mark.parametrize("size", [-1, 1001])
def test_refused_sizes_are_sticky(size: int) -> None:
    decoder = FrameDecoder(1000)
    decoder.feed(struct.pack(">i", size))
    for _ in range(2):
        with pytest.raises(FrameError):
            decoder.next_frame()


def test_api_versions_request_roundtrip_and_fallback() -> None:
    request_class = load_request_schema(18, 3)
    body = build(request_class, {"client_software_name": "t", "client_software_version": "1"})
    raw = encode_request(18, 3, 42, "client", body)
    decoded = decode_request(raw[4:])
    assert decoded.head.correlation_id == 42
    assert decoded.client_id == "client"
    assert decoded.body == body
    response = build(
        decoded.response_class,
        {
            "error_code": 0,
            "api_keys": [
                {"api_key": key, "min_version": low, "max_version": high}
                for key, (low, high) in api_versions.ADVERTISED.items()
            ],
            "throttle_time": 0,
        },
    )
    encoded = encode_response(decoded, response)
    assert struct.unpack_from(">i", encoded)[0] == len(encoded) - 4
    # ApiVersions v4 is not accepted: the fallback is a v0 body with error 35 and key 18's range.
    v4 = struct.pack(">hhi", 18, 4, 9) + b"\x00\x01x\x00"
    with pytest.raises(UnsupportedRequestError):
        decode_request(v4)
    fallback = api_versions_fallback(peek_head(v4))
    response_v0: type[Any] = load_response_schema(18, 0)
    parsed, _ = entity_reader(response_v0)(fallback, 8)
    assert struct.unpack_from(">i", fallback, 4)[0] == 9
    assert parsed.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in parsed.api_keys] == [(18, 0, 3)]


def test_trailing_and_truncated_bytes_are_malformed() -> None:
    request_class = load_request_schema(3, 8)
    body = build(
        request_class,
        {
            "topics": None,
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        },
    )
    raw = encode_request(3, 8, 1, "c", body)[4:]
    assert decode_request(raw).body == body
    with pytest.raises(MalformedRequestError):
        decode_request(raw + b"\x00")
    with pytest.raises(MalformedRequestError):
        decode_request(raw[:-1])
    with pytest.raises(MalformedRequestError):
        decode_request(raw[:5])
    with pytest.raises(UnsupportedRequestError):
        decode_request(struct.pack(">hhi", 999, 0, 1))


def test_kafka_python_requests_decode() -> None:
    kafka_protocol = pytest.importorskip("kafka.protocol.metadata")
    request = kafka_protocol.MetadataRequest[8](
        topics=None,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    request.with_header(correlation_id=5, client_id="kp")
    raw = request.encode(version=8, header=True, framed=True)
    decoded = decode_request(bytes(raw[4:]))
    assert decoded.api_key == 3
    assert decoded.body.topics is None
    out = io.BytesIO()
    entity_writer(type(decoded.body))(out, decoded.body)
    assert out.getvalue() == bytes(raw[4 + (len(raw) - 4 - len(out.getvalue())) :])


@given(
    payloads=st.lists(st.binary(max_size=200), max_size=8),
    large=st.integers(min_value=0, max_value=3),
    cuts=st.lists(st.integers(min_value=1, max_value=70_000), min_size=1, max_size=20),
    part_first=st.booleans(),
)
@settings(max_examples=25, deadline=None, derandomize=True)
def test_any_chunking_gives_the_same_frames(
    payloads: list[bytes], large: int, cuts: list[int], part_first: bool
) -> None:
    payloads = [*payloads, *(bytes([index]) * 66_000 for index in range(large))]
    stream = b"".join(frame(payload) for payload in payloads)
    decoder = FrameDecoder(1_000_000)
    collected: list[bytes] = []
    position = 0
    index = 0
    offers = 0
    while position < len(stream):
        size = cuts[index % len(cuts)]
        index += 1
        if decoder.prefix_first and index % 3:  # as the server asks after a large frame
            decoder.feed(stream[position : position + 4])
            position += 4
            collected.extend(_frames(decoder))
            continue
        whole = decoder.whole_body_size()
        if whole is not None and index % 3:
            # the whole body (as the server's receive with a low-water mark), or a part
            offers += 1
            part = (offers % 2 == 1) == part_first
            count = min(min(size, whole // 2) if part else whole, len(stream) - position)
            decoder.feed_body(stream[position : position + count])
            position += count
            collected.extend(_frames(decoder))
            continue
        direct = decoder.direct_buffer()
        if direct is not None and index % 2:
            count = min(size, len(direct), len(stream) - position)
            direct[:count] = stream[position : position + count]
            decoder.direct_filled(count)
        else:
            count = size
            decoder.feed(stream[position : position + count])
        position += count
        collected.extend(_frames(decoder))
    assert collected == payloads
    assert decoder.buffered_bytes == 0


def _prefix_first(decoder: FrameDecoder) -> bool:
    """(read through a call: mypy would narrow the property across the test's steps)"""
    return decoder.prefix_first


def test_a_body_received_whole_is_the_frame_and_a_part_of_it_is_kept() -> None:
    """A large frame whose size prefix alone has arrived may get its body in one piece: that
    ``bytes`` is the frame, not a copy; the next size prefix is then asked for alone. A first
    part of the body is kept as any received bytes are (the rest may come directly)."""
    body = bytes(range(256)) * 400
    decoder = FrameDecoder(1_000_000)
    assert not _prefix_first(decoder)
    decoder.feed(struct.pack(">i", len(body)))
    assert decoder.next_frame() is None
    assert decoder.whole_body_size() == len(body)
    assert decoder.missing_bytes == len(body)
    decoder.feed_body(body)
    assert decoder.whole_body_size() is None
    assert decoder.buffered_bytes == len(body)
    assert decoder.next_frame() is body
    assert _prefix_first(decoder)
    assert decoder.buffered_bytes == 0

    decoder.feed(struct.pack(">i", len(body)))
    assert not _prefix_first(decoder)
    assert decoder.next_frame() is None
    decoder.feed_body(body[:1000])
    assert decoder.whole_body_size() is None
    assert decoder.next_frame() is None
    direct = decoder.direct_buffer()
    assert direct is not None
    direct[: len(body) - 1000] = body[1000:]
    decoder.direct_filled(len(body) - 1000)
    assert bytes(decoder.next_frame() or b"") == body

    # not offered: a small frame, one beyond the most received whole, one with body bytes
    decoder.feed(frame(b"small"))
    assert decoder.next_frame() == b"small"
    assert not _prefix_first(decoder)
    for announced, extra in ((1000, b""), (WHOLE_BODY_MAX_BYTES + 1, b""), (len(body), b"x")):
        other = FrameDecoder(WHOLE_BODY_MAX_BYTES + 1)
        other.feed(struct.pack(">i", announced) + extra)
        assert other.next_frame() is None
        assert other.whole_body_size() is None


def test_a_lowered_limit_refuses_from_the_size_prefix() -> None:
    """``limit`` (a SASL listener before authentication) refuses a frame as soon as its size
    prefix is read, naming the setting, before any byte of the body is buffered; raised again,
    the same size is accepted."""
    decoder = FrameDecoder(100_000)
    decoder.limit(1000, "sasl.server.max.receive.size")
    decoder.feed(struct.pack(">i", 70_000))
    with pytest.raises(FrameError, match=r"sasl\.server\.max\.receive\.size"):
        decoder.next_frame()
    assert decoder.buffered_bytes == 4
    accepted = FrameDecoder(100_000)
    accepted.limit(1000, "sasl.server.max.receive.size")
    accepted.feed(struct.pack(">i", 3) + b"abc")
    assert accepted.next_frame() == b"abc"
    accepted.limit(100_000, "socket.request.max.bytes")
    accepted.feed(struct.pack(">i", 70_000) + b"x" * 70_000)
    assert bytes(accepted.next_frame() or b"") == b"x" * 70_000
