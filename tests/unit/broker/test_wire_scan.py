"""The frame pre-scan: it agrees with kio on every valid entity, and no count or length a client
announces makes the decoder allocate more than the frame holds (on the codec alone, kio aborted
the process on a 23-byte DescribeLogDirs v2 request announcing 2^32 topics)."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import Records

from impl.broker import api_versions
from impl.broker._codec import (
    MalformedRequestError,
    decode_request,
    encode_request,
    load_request_schema,
    load_response_schema,
)
from impl.broker._wire_scan import ScanError, scan

st.register_type_strategy(Records, st.binary(max_size=40).map(Records))

#: issue 15's reproduction: DescribeLogDirs v2 whose compact ``topics`` count is uvarint 2^32-1
ABORTING_FRAME = bytes.fromhex("0023000200000001000272700" "0ffffffff0f00")


def _classes() -> list[type[Any]]:
    classes: list[type[Any]] = []
    for key, (low, high) in sorted(api_versions.ACCEPTED.items()):
        if key in api_versions.RAW_APIS:
            continue
        for version in range(low, high + 1):
            request_class = load_request_schema(key, version)
            classes += [request_class, load_response_schema(key, version),
                        request_class.__header_schema__]
    return classes


@pytest.mark.parametrize("entity_class", _classes(), ids=lambda cls: cls.__module__[18:])
def test_scan_agrees_with_kio(entity_class: type[Any]) -> None:
    @settings(max_examples=5, suppress_health_check=list(HealthCheck), deadline=None,
              database=None, derandomize=True)
    @given(st.from_type(entity_class))
    def check(entity: Any) -> None:
        out = io.BytesIO()
        entity_writer(entity_class)(out, entity)
        data = out.getvalue()
        _, size = entity_reader(entity_class)(data, 0)
        assert scan(entity_class, data, 0) == size == len(data)
        for cut in range(min(len(data), 200)):  # a proper prefix is refused, never over-read
            with pytest.raises(ScanError):
                scan(entity_class, data[:cut], 0)

    check()


def test_the_23_byte_request_is_refused() -> None:
    """In a child process: before the pre-scan, this aborted the interpreter (SIGABRT)."""
    script = textwrap.dedent(
        f"""
        from impl.broker._codec import MalformedRequestError, decode_request
        try:
            decode_request(bytes.fromhex("{ABORTING_FRAME.hex()}"))
        except MalformedRequestError as error:
            print(error)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert "only 1 bytes remain" in result.stdout
    with pytest.raises(MalformedRequestError, match="only 1 bytes remain"):
        decode_request(ABORTING_FRAME)


def _examples(entity_class: type[Any], count: int) -> list[Any]:
    collected: list[Any] = []

    @settings(max_examples=count, suppress_health_check=list(HealthCheck), deadline=None,
              database=None, derandomize=True)
    @given(st.from_type(entity_class))
    def collect(entity: Any) -> None:
        collected.append(entity)

    collect()
    return collected


def _request_frames() -> list[bytes]:
    """A few valid frames of every accepted request version (arrays non-empty when possible)."""
    frames: list[bytes] = [ABORTING_FRAME]
    for key, (low, high) in sorted(api_versions.ACCEPTED.items()):
        if key in api_versions.RAW_APIS:
            continue
        for version in range(low, high + 1):
            request_class = load_request_schema(key, version)
            for entity in _examples(request_class, 2):
                frames.append(encode_request(key, version, 1, "c", entity)[4:])
    return frames


def test_huge_counts_anywhere_never_abort() -> None:
    """Every request version, with a huge uvarint or int32 written over every offset, decoded in
    a child process (an allocation failure aborts rather than raises): each is decoded or
    refused with :class:`MalformedRequestError`, and the child exits normally."""
    frames = _request_frames()
    script = textwrap.dedent(
        """
        import sys
        from impl.broker._codec import MalformedRequestError, decode_request
        cases = 0
        for line in sys.stdin:
            frame = bytes.fromhex(line.strip())
            for position in range(8, min(len(frame), 300)):
                for lie in (b"\\xff\\xff\\xff\\xff\\x0f", b"\\x7f\\xff\\xff\\xff", b"\\x80"):
                    mutated = frame[:position] + lie + frame[position + len(lie):]
                    try:
                        decode_request(mutated)
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


@pytest.mark.parametrize("version", [1, 4, 8])
def test_a_large_metadata_request_is_decoded_with_unique_names(version: int) -> None:
    """Large Metadata requests are decoded without kio (whose native reader holds the GIL for a
    million names), in slices: same fields as kio's, each topic once, bad names refused."""
    from impl.broker._codec import decode_request_steps
    from impl.broker._kio_build import build
    from impl.broker._sliced_decode import run_to_completion

    def decode_large(frame: bytes) -> Any:
        return run_to_completion(decode_request_steps(frame))

    request_class = load_request_schema(3, version)
    names = ["fz", "a.b", "é", "fz"] * 30_000
    data = {"topics": [{"name": name} for name in names], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": True,
            "include_topic_authorized_operations": False}
    frame = encode_request(3, version, 4, "client", build(request_class, data))[4:]
    reference = entity_reader(request_class)(frame, entity_reader(
        request_class.__header_schema__)(frame, 0)[1])[0]
    decoded = decode_large(frame)
    assert decoded.client_id == "client"
    assert [topic.name for topic in decoded.body.topics] == ["fz", "a.b", "é"]
    for flag in ("allow_auto_topic_creation", "include_cluster_authorized_operations",
                 "include_topic_authorized_operations"):
        assert getattr(decoded.body, flag, None) == getattr(reference, flag, None)
    bad = bytearray(frame)
    position = bytes(bad).index("é".encode())
    bad[position : position + 2] = b"\xff\xfe"
    with pytest.raises(MalformedRequestError, match="UTF-8"):
        decode_large(bytes(bad))
    with pytest.raises(MalformedRequestError, match="trailing"):
        decode_large(frame + b"\x00")
