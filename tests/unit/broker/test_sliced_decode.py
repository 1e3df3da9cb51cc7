"""Large frames are decoded in bounded slices that agree with kio's own decoding (issue 15,
fairness).

Before: a large frame was decoded by kio's native reader in one call holding the GIL (in a worker
thread, which did not help): a 12 MB ListOffsets stalled every other client for 370 ms. Now
:func:`decode_request_steps` yields between pieces of at most ``SLICE_BYTES``; these tests force
tiny slices so that every request version goes through runs, single elements decoded field by
field, and tagged fields, and compare the result with kio's one-call path (:func:`decode_with_kio`).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest
from kio.index import load_request_schema

from impl.broker import _sliced_decode, api_versions
from impl.broker._codec import (
    DecodedRequest,
    MalformedRequestError,
    UnsupportedRequestError,
    decode_request,
    decode_request_steps,
    decode_with_kio,
    encode_request,
    peek_head,
)
from impl.broker._kio_build import build
from impl.broker._sliced_decode import run_to_completion

from .test_wire_scan import _request_frames


def _unique_metadata(request: DecodedRequest) -> Any:
    """A Metadata v0-v8 body as the sliced path answers it: repeated names once."""
    if request.api_key != api_versions.METADATA or request.api_version > 8:
        return request.body
    topics = request.body.topics
    if topics is None:
        return request.body
    seen = list(dict.fromkeys(topic.name for topic in topics))
    return [seen, *(getattr(request.body, name) for name in type(request.body).__slots__
                    if name != "topics")]


def _kio(frame: bytes) -> DecodedRequest:
    """The one-call path through kio's reader (the hand-read Produce and Fetch included: the
    sliced path reads them with kio)."""
    head = peek_head(frame)
    if not api_versions.is_accepted(head.api_key, head.api_version):
        raise UnsupportedRequestError(f"api key {head.api_key} version {head.api_version}")
    return decode_with_kio(frame, head)


def _sliced(frame: bytes) -> DecodedRequest:
    steps = decode_request_steps(frame)
    result: DecodedRequest = run_to_completion(steps)
    return result


@pytest.fixture
def tiny_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_sliced_decode, "SLICE_BYTES", 12)
    monkeypatch.setattr(_sliced_decode, "SCAN_ELEMENTS_PER_YIELD", 1)


@pytest.mark.usefixtures("tiny_slices")
def test_sliced_decoding_equals_kio_on_every_request_version() -> None:
    frames = _request_frames()
    assert len(frames) > 100
    for frame in frames:
        try:
            expected = _kio(frame)
        except (MalformedRequestError, UnsupportedRequestError) as error:
            with pytest.raises(type(error)):
                _sliced(frame)
            continue
        got = _sliced(frame)
        assert got.head == expected.head
        assert got.client_id == expected.client_id
        assert got.response_class is expected.response_class
        assert _unique_metadata(got) == _unique_metadata(expected), frame.hex()


@pytest.mark.usefixtures("tiny_slices")
def test_truncated_and_lying_frames_are_refused_alike() -> None:
    """Every proper prefix and a lying count at every offset: refused (or decoded) as the
    one-call path does, never over-read."""
    for frame in _request_frames()[:60]:
        for cut in range(8, min(len(frame), 120)):
            mutated = frame[:cut]
            for variant in (mutated, frame[:cut] + b"\x7f\xff\xff\xff" + frame[cut + 4:]):
                try:
                    expected: object = _unique_metadata(_kio(variant))
                except (MalformedRequestError, UnsupportedRequestError) as error:
                    expected = type(error)
                try:
                    got: object = _unique_metadata(_sliced(variant))
                except (MalformedRequestError, UnsupportedRequestError) as error:
                    got = type(error)
                assert got == expected, (frame.hex(), cut)


def test_huge_counts_never_abort_the_sliced_decoder() -> None:
    """In a child process (an allocation failure aborts rather than raises)."""
    frames = _request_frames()
    script = textwrap.dedent(
        """
        import sys
        from impl.broker._codec import MalformedRequestError, decode_request_steps
        from impl.broker._sliced_decode import run_to_completion
        cases = 0
        for line in sys.stdin:
            frame = bytes.fromhex(line.strip())
            for position in range(8, min(len(frame), 200)):
                for lie in (b"\\xff\\xff\\xff\\xff\\x0f", b"\\x7f\\xff\\xff\\xff", b"\\x80"):
                    mutated = frame[:position] + lie + frame[position + len(lie):]
                    try:
                        run_to_completion(decode_request_steps(mutated))
                    except MalformedRequestError:
                        pass
                    cases += 1
        print(cases)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            input="\n".join(frame.hex() for frame in frames), timeout=600,
                            check=False)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert int(result.stdout) > 1000


def test_a_large_request_is_decoded_in_many_bounded_slices() -> None:
    """ListOffsets v1 naming 100,000 partitions (1.2 MB): the decoder yields at least once per
    ``SLICE_BYTES`` of entries, and the result is kio's."""
    data = {"replica_id": -1, "topics": [{"name": "t", "partitions": [
        {"partition_index": index, "timestamp": -1} for index in range(100_000)]}]}
    frame = encode_request(2, 1, 7, "c", build(load_request_schema(2, 1), data))[4:]
    steps = decode_request_steps(frame)
    yields = 0
    while True:
        try:
            next(steps)
            yields += 1
        except StopIteration as done:
            request = done.value
            break
    assert yields >= len(frame) // _sliced_decode.SLICE_BYTES
    assert request.body == decode_request(frame).body


def test_a_large_metadata_request_names_each_topic_once() -> None:
    data = {"topics": [{"name": "a"}, {"name": "b"}] * 50_000}
    frame = encode_request(3, 1, 7, "c", build(load_request_schema(3, 1), data))[4:]
    request = _sliced(frame)
    assert [topic.name for topic in request.body.topics] == ["a", "b"]
