"""Request decoding and response encoding with kio, and the ApiVersions error fallback.

Decisions (the trio shell only carries them out):

* a frame shorter than the fixed header prefix, a count or length larger than the bytes that
  remain (checked by :mod:`._wire_scan` before kio allocates anything), a body kio cannot parse,
  or trailing bytes after the body is :class:`MalformedRequestError`: Kafka closes the connection
  on an unparsable request;
* an API key or version the broker does not accept is :class:`UnsupportedRequestError`, also closed,
  except ApiVersions, which is answered in the v0 format with ``UNSUPPORTED_VERSION`` (35) and,
  for request version 3 or higher, the ApiVersions range itself (KIP-511), so a client can retry
  at a version the broker speaks.

This module is a sans-IO core.
"""

from __future__ import annotations

import functools
import io
import struct
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Final

from kio import index as _kio_index
from kio.serial import entity_reader, entity_writer

from . import _hot_requests, api_versions
from ._framing import frame
from ._kio_build import build, nested_entity_class, null_field, null_field_steps
from ._sliced_decode import decode_entity_steps
from ._wire_fields import FieldError
from ._wire_scan import ScanError, scan

__sans_io__ = True

_HEAD: Final = struct.Struct(">hhi")
UNSUPPORTED_VERSION: Final = 35


@functools.cache
def load_request_schema(api_key: int, api_version: int) -> type[Any]:
    """kio's request class (cached: kio resolves it by dynamic import on every call)."""
    request_class: type[Any] = _kio_index.load_request_schema(api_key, api_version)
    return request_class


@functools.cache
def load_response_schema(api_key: int, api_version: int) -> type[Any]:
    """kio's response class (cached)."""
    response_class: type[Any] = _kio_index.load_response_schema(api_key, api_version)
    return response_class


_readers: dict[type[Any], Callable[[Any, int], tuple[Any, int]]] = {}
_writers: dict[type[Any], Callable[[Any, Any], None]] = {}


def _reader(entity_class: type[Any]) -> Callable[[Any, int], tuple[Any, int]]:
    reader = _readers.get(entity_class)
    if reader is None:
        reader = _readers[entity_class] = entity_reader(entity_class)
    return reader


def _writer(entity_class: type[Any]) -> Callable[[Any, Any], None]:
    writer = _writers.get(entity_class)
    if writer is None:
        writer = _writers[entity_class] = entity_writer(entity_class)
    return writer


class MalformedRequestError(Exception):
    """The client sent bytes that are not a request; the connection must be closed."""


class UnsupportedRequestError(Exception):
    """An API key or version the broker does not implement (not ApiVersions)."""


@dataclass(frozen=True, slots=True)
class RequestHead:
    """The fixed prefix every request header starts with."""

    api_key: int
    api_version: int
    correlation_id: int


@dataclass(frozen=True, slots=True)
class DecodedRequest:
    """A parsed request: its head, client id, kio body, and the schema to answer with."""

    head: RequestHead
    client_id: str | None
    body: Any
    response_class: type[Any]

    @property
    def api_key(self) -> int:
        """The request's API key."""
        return self.head.api_key

    @property
    def api_version(self) -> int:
        """The request's API version."""
        return self.head.api_version


def peek_head(frame_bytes: bytes | memoryview) -> RequestHead:
    """The (api key, version, correlation id) prefix of a request frame.

    Raises:
        MalformedRequestError: the frame is shorter than 8 bytes.
    """
    if len(frame_bytes) < _HEAD.size:
        raise MalformedRequestError(f"request frame of {len(frame_bytes)} bytes has no header")
    api_key, api_version, correlation_id = _HEAD.unpack_from(frame_bytes, 0)
    return RequestHead(api_key, api_version, correlation_id)


def decode_request(frame_bytes: bytes | memoryview) -> DecodedRequest:
    """Decode one request frame (without its size prefix).

    Args:
        frame_bytes: the frame body, read-only (kio refuses writable buffers).

    Returns:
        The decoded request.

    Raises:
        MalformedRequestError: unparsable bytes or trailing garbage.
        UnsupportedRequestError: an API key or version outside :data:`api_versions.ACCEPTED`
            (ApiVersions included: the caller answers it with :func:`api_versions_fallback`).
    """
    assert isinstance(frame_bytes, bytes) or frame_bytes.readonly
    head = peek_head(frame_bytes)
    if not api_versions.is_accepted(head.api_key, head.api_version):
        raise UnsupportedRequestError(f"api key {head.api_key} version {head.api_version}")
    response_class = load_response_schema(head.api_key, head.api_version)
    if _hot_requests.handles(head.api_key, head.api_version):
        # the two requests of every application: read by hand, the same checks
        try:
            _, client_id, hot_body = _hot_requests.decode(head.api_key, head.api_version,
                                                         frame_bytes)
        except FieldError as error:
            raise MalformedRequestError(f"api key {head.api_key}: {error}") from None
        return DecodedRequest(head, client_id, hot_body, response_class)
    return decode_with_kio(frame_bytes, head)


def decode_with_kio(frame_bytes: bytes | memoryview, head: RequestHead) -> DecodedRequest:
    """:func:`decode_request` through kio's generic reader, whatever the API (the hand-read
    requests are checked against it)."""
    request_class = load_request_schema(head.api_key, head.api_version)
    response_class = load_response_schema(head.api_key, head.api_version)
    try:
        # every count and length is checked against the bytes that remain before kio, which
        # preallocates arrays of the announced size, sees the frame
        header_end = scan(request_class.__header_schema__, frame_bytes, 0)
        body_end = scan(request_class, frame_bytes, header_end)
    except ScanError as error:
        raise MalformedRequestError(f"api key {head.api_key}: {error}") from None
    if body_end != len(frame_bytes):
        if not _tolerated_trailer(head.api_key, frame_bytes, body_end):
            trailing = len(frame_bytes) - body_end
            raise MalformedRequestError(f"{trailing} trailing bytes after the request")
        frame_bytes = frame_bytes[:body_end]
    try:
        header, header_size = _reader(request_class.__header_schema__)(frame_bytes, 0)
        body, body_size = _reader(request_class)(frame_bytes, header_size)
    except Exception as error:  # kio raises several types (ValueError, native errors)
        raise MalformedRequestError(f"cannot decode api key {head.api_key}: {error!r}") from None
    if header_size + body_size != len(frame_bytes):
        raise MalformedRequestError(
            f"{len(frame_bytes) - header_size - body_size} trailing bytes after the request"
        )
    missing = null_field(body)
    if missing is not None:
        raise MalformedRequestError(f"api key {head.api_key}: null in non-nullable {missing}")
    return DecodedRequest(head, header.client_id, body, response_class)


def _tolerated_trailer(api_key: int, frame_bytes: bytes | memoryview, body_end: int) -> bool:
    """librdkafka (2.x) ends an AlterUserScramCredentials request with a second, empty
    tagged-field section (one zero byte); Kafka, which does not check for bytes left after a
    request, accepts it, so this one byte is accepted too. Any other trailer is malformed."""
    return (api_key == api_versions.ALTER_USER_SCRAM_CREDENTIALS
            and len(frame_bytes) == body_end + 1 and frame_bytes[body_end] == 0)


def decode_request_steps(frame_bytes: bytes | memoryview) -> Generator[None, None, DecodedRequest]:
    """:func:`decode_request` in bounded slices, for a large frame: a generator that yields
    between slices (the shell lets other clients run there) and returns the request.

    The body is walked by :mod:`._sliced_decode` (every count checked against the bytes that
    remain as the walk reaches it; kio decodes bounded runs), a large Metadata v0-v8 by
    :func:`_decode_metadata_steps`; the result equals :func:`decode_request`'s.

    Raises:
        MalformedRequestError, UnsupportedRequestError: as :func:`decode_request`.
    """
    assert isinstance(frame_bytes, bytes) or frame_bytes.readonly
    head = peek_head(frame_bytes)
    if not api_versions.is_accepted(head.api_key, head.api_version):
        raise UnsupportedRequestError(f"api key {head.api_key} version {head.api_version}")
    request_class = load_request_schema(head.api_key, head.api_version)
    response_class = load_response_schema(head.api_key, head.api_version)
    try:
        header_end = scan(request_class.__header_schema__, frame_bytes, 0)
        header, header_size = _reader(request_class.__header_schema__)(frame_bytes, 0)
        if header_size != header_end:
            raise ScanError(f"header of {header_size} bytes, scanned {header_end}")
        if (
            head.api_key == api_versions.METADATA
            and head.api_version <= _METADATA_PYTHON_MAX_VERSION
        ):
            body = yield from _decode_metadata_steps(
                frame_bytes, header_end, request_class, head.api_version)
            return DecodedRequest(head, header.client_id, body, response_class)
        body, body_end = yield from decode_entity_steps(request_class, frame_bytes, header_end)
    except ScanError as error:
        raise MalformedRequestError(f"api key {head.api_key}: {error}") from None
    except MalformedRequestError:
        raise
    except Exception as error:  # kio raises several types (ValueError, native errors)
        raise MalformedRequestError(f"cannot decode api key {head.api_key}: {error!r}") from None
    if body_end != len(frame_bytes) and not _tolerated_trailer(
        head.api_key, frame_bytes, body_end
    ):
        trailing = len(frame_bytes) - body_end
        raise MalformedRequestError(f"{trailing} trailing bytes after the request")
    missing = yield from null_field_steps(body)
    if missing is not None:
        raise MalformedRequestError(f"api key {head.api_key}: null in non-nullable {missing}")
    return DecodedRequest(head, header.client_id, body, response_class)


#: A large Metadata request (v0-v8) is decoded in Python, names de-duplicated as they are read
#: (Kafka collects them in a set too): a million repeated names become one entity, not a million.
_METADATA_PYTHON_MAX_VERSION: Final = 8
_METADATA_NAMES_PER_YIELD: Final = 256
_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")


def _decode_metadata_steps(
    frame_bytes: bytes | memoryview, offset: int, request_class: type[Any], version: int
) -> Generator[None, None, Any]:
    """A Metadata v0-v8 body with unique topic names, every count and length checked against
    the bytes that remain; yields every :data:`_METADATA_NAMES_PER_YIELD` names."""
    end = len(frame_bytes)
    if offset + 4 > end:
        raise ScanError("frame ends inside a length")
    (count,) = _INT32.unpack_from(frame_bytes, offset)
    offset += 4
    if count < -1 or count > end - offset:
        raise ScanError(f"array of {count} elements announced, only {end - offset} remain")
    names: dict[str, None] | None = None if count == -1 else {}
    for index in range(max(count, 0)):
        if index % _METADATA_NAMES_PER_YIELD == _METADATA_NAMES_PER_YIELD - 1:
            yield
        if offset + 2 > end:
            raise ScanError("frame ends inside a length")
        (length,) = _INT16.unpack_from(frame_bytes, offset)
        offset += 2
        if length < 0:
            raise MalformedRequestError("api key 3: null in non-nullable topics.name")
        if length > end - offset:
            raise ScanError(f"string of {length} bytes, only {end - offset} remain")
        try:
            name = bytes(frame_bytes[offset : offset + length]).decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedRequestError("api key 3: topic name is not UTF-8") from None
        offset += length
        assert names is not None
        names[name] = None
    topics: list[Any] | None = None
    if names is not None:
        topic_class = nested_entity_class(request_class, "topics")
        topics = []
        for index, name in enumerate(names, 1):
            if index % _METADATA_NAMES_PER_YIELD == 0:
                yield
            topics.append(topic_class(name=name))
    data: dict[str, Any] = {
        "topics": topics,
        "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    flags = [] if version < 4 else ["allow_auto_topic_creation"]
    if version >= 8:
        flags += ["include_cluster_authorized_operations", "include_topic_authorized_operations"]
    for flag in flags:
        if offset >= end:
            raise ScanError("frame ends inside a field")
        data[flag] = frame_bytes[offset] != 0
        offset += 1
    if offset != len(frame_bytes):
        raise MalformedRequestError(f"{len(frame_bytes) - offset} trailing bytes after the request")
    return build(request_class, data)


def encode_response(request: DecodedRequest, body: Any) -> bytes:
    """The framed response (size prefix, response header, body) to ``request``.

    Args:
        request: the request being answered.
        body: an instance of ``request.response_class``.

    Returns:
        The bytes to write on the connection.
    """
    assert type(body) is request.response_class, (type(body), request.response_class)
    out = io.BytesIO()
    header_class = request.response_class.__header_schema__
    _writer(header_class)(out, header_class(correlation_id=request.head.correlation_id))
    _writer(request.response_class)(out, body)
    return frame(out.getvalue())


def api_versions_fallback(head: RequestHead) -> bytes:
    """The framed v0-format ApiVersions error answer to an ApiVersions version we lack.

    Args:
        head: the request's fixed header prefix (the rest need not be parsable).

    Returns:
        Response header v0 and an ApiVersions v0 body with error 35 and, for request version 3
        or higher, one entry giving the broker's ApiVersions range.
    """
    assert head.api_key == api_versions.API_VERSIONS
    entries = b""
    count = 0
    if head.api_version >= 3:
        low, high = api_versions.ADVERTISED[api_versions.API_VERSIONS]
        entries = struct.pack(">hhh", api_versions.API_VERSIONS, low, high)
        count = 1
    payload = struct.pack(">ihi", head.correlation_id, UNSUPPORTED_VERSION, count) + entries
    return frame(payload)


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str, body: Any
) -> bytes:
    """A framed request, for the broker's own clients (admin, inter-broker).

    Args:
        api_key: the API key.
        api_version: the version ``body``'s class belongs to.
        correlation_id: echoed by the server.
        client_id: the header's client id.
        body: an instance of ``load_request_schema(api_key, api_version)``.

    Returns:
        The bytes to send.
    """
    request_class = load_request_schema(api_key, api_version)
    assert type(body) is request_class
    out = io.BytesIO()
    header_class = request_class.__header_schema__
    _writer(header_class)(
        out,
        header_class(
            request_api_key=api_key,
            request_api_version=api_version,
            correlation_id=correlation_id,
            client_id=client_id,
        ),
    )
    _writer(request_class)(out, body)
    return frame(out.getvalue())


def decode_response(
    api_key: int, api_version: int, frame_bytes: bytes | memoryview
) -> tuple[int, Any]:
    """Decode a response frame body into (correlation id, kio response).

    Raises:
        MalformedRequestError: the bytes do not parse as that response.
    """
    response_class = load_response_schema(api_key, api_version)
    try:
        scan(response_class, frame_bytes, scan(response_class.__header_schema__, frame_bytes, 0))
        header, size = _reader(response_class.__header_schema__)(frame_bytes, 0)
        body, _ = _reader(response_class)(frame_bytes, size)
    except Exception as error:
        message = f"cannot decode response to api key {api_key}: {error!r}"
        raise MalformedRequestError(message) from None
    return header.correlation_id, body
