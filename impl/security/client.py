"""Client connections with TLS and SASL: the broker's own (replica fetcher, controller) and the
command line's.

:func:`open_stream` (trio) and :func:`open_socket` (blocking, for the admin client) connect,
wrap the connection in TLS when the protocol says so (Python's :mod:`ssl`; trio's
``SSLStream``), then run the SASL exchange of KIP-152 (SaslHandshake v1, then SaslAuthenticate
v1 until the mechanism completes) with :class:`~impl.security.sasl.SaslClient`. A refused
authentication raises :class:`AuthenticationError` with the broker's message.
"""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Awaitable, Callable
from typing import Any, Final

import trio

from impl.api_keys import SASL_AUTHENTICATE, SASL_HANDSHAKE
from impl.broker._codec import decode_response, encode_request, load_request_schema
from impl.broker._kio_build import build

from .config import ClientSecurity, SecurityProtocol
from .sasl import CredentialError, SaslClient

SASL_VERSION: Final = 1
#: The largest SASL response accepted while authenticating.
SASL_RESPONSE_MAX_BYTES: Final = 1 << 20
HANDSHAKE_TIMEOUT_SECONDS: Final = 10.0
CLIENT_ID: Final = "logproof-sasl"


class AuthenticationError(Exception):
    """The broker refused the TLS handshake or the SASL authentication."""


def client_ssl_context(security: ClientSecurity) -> ssl.SSLContext:
    """A client TLS context: the truststore (default: the system's), the client certificate
    when one is configured, hostname checking per ``ssl.endpoint.identification.algorithm``."""
    context = ssl.create_default_context(cafile=security.cafile)
    context.check_hostname = security.check_hostname
    if security.certfile:
        context.load_cert_chain(security.certfile, security.keyfile, security.key_password)
    return context


def _request(api_key: int, correlation_id: int, data: dict[str, Any]) -> bytes:
    request_class: type[Any] = load_request_schema(api_key, SASL_VERSION)
    return encode_request(api_key, SASL_VERSION, correlation_id, CLIENT_ID,
                          build(request_class, data))


async def _sasl_exchange(
    security: ClientSecurity, roundtrip: Callable[[int, int, bytes], Awaitable[Any]]
) -> None:
    """Handshake and authenticate through ``roundtrip(api_key, correlation_id, frame)``.

    Raises:
        AuthenticationError: the mechanism is not enabled, or authentication failed.
    """
    assert security.username is not None
    assert security.password is not None
    handshake = await roundtrip(SASL_HANDSHAKE, 1, _request(
        SASL_HANDSHAKE, 1, {"mechanism": security.mechanism}))
    if int(handshake.error_code) != 0:
        raise AuthenticationError(
            f"the broker does not enable {security.mechanism} (enabled: "
            f"{', '.join(handshake.mechanisms)})")
    client = SaslClient(security.mechanism, security.username, security.password)
    token: bytes | None = client.first_token()
    correlation_id = 2
    while token is not None:
        answer = await roundtrip(SASL_AUTHENTICATE, correlation_id, _request(
            SASL_AUTHENTICATE, correlation_id, {"auth_bytes": token}))
        correlation_id += 1
        if int(answer.error_code) != 0:
            raise AuthenticationError(answer.error_message or "SASL authentication failed")
        try:
            token = client.next_token(bytes(answer.auth_bytes))
        except CredentialError as error:
            raise AuthenticationError(str(error)) from None


def _decode(api_key: int, correlation_id: int, payload: bytes) -> Any:
    received, response = decode_response(api_key, SASL_VERSION, payload)
    if received != correlation_id:
        raise AuthenticationError("the broker answered another request while authenticating")
    return response


async def open_stream(host: str, port: int, security: ClientSecurity | None) -> trio.abc.Stream:
    """A trio stream to ``host:port``, secured and authenticated per ``security``.

    Raises:
        OSError: the connection failed.
        AuthenticationError: TLS or SASL refused.
    """
    tcp = await trio.open_tcp_stream(host, port)
    if security is None or security.protocol is SecurityProtocol.PLAINTEXT:
        return tcp
    stream: trio.abc.Stream = tcp
    try:
        with trio.fail_after(HANDSHAKE_TIMEOUT_SECONDS):
            if security.protocol.uses_tls:
                tls = trio.SSLStream(tcp, client_ssl_context(security), server_hostname=host)
                try:
                    await tls.do_handshake()
                except trio.BrokenResourceError as error:
                    raise AuthenticationError(f"TLS handshake with {host}:{port} failed: "
                                              f"{error.__cause__ or error}") from None
                stream = tls
            if security.protocol.uses_sasl:
                buffer = bytearray()

                async def roundtrip(api_key: int, correlation_id: int, frame: bytes) -> Any:
                    await stream.send_all(frame)
                    while True:
                        if len(buffer) >= 4:
                            (size,) = struct.unpack(">i", buffer[:4])
                            if not 4 <= size <= SASL_RESPONSE_MAX_BYTES:
                                raise AuthenticationError(f"bad response size {size}")
                            if len(buffer) >= 4 + size:
                                payload = bytes(buffer[4:4 + size])
                                del buffer[:4 + size]
                                return _decode(api_key, correlation_id, payload)
                        data = await stream.receive_some(65536)
                        if not data:
                            raise AuthenticationError(
                                f"{host}:{port} closed the connection while authenticating")
                        buffer.extend(data)

                await _sasl_exchange(security, roundtrip)
    except BaseException:
        with trio.CancelScope(shield=True):
            await stream.aclose()
        raise
    return stream


def open_socket(host: str, port: int, security: ClientSecurity | None,
                timeout_seconds: float) -> socket.socket:
    """A blocking socket to ``host:port``, secured and authenticated per ``security``.

    Raises:
        OSError: the connection failed.
        AuthenticationError: TLS or SASL refused.
    """
    sock = socket.create_connection((host, port), timeout=timeout_seconds)
    if security is None or security.protocol is SecurityProtocol.PLAINTEXT:
        return sock
    try:
        if security.protocol.uses_tls:
            sock = client_ssl_context(security).wrap_socket(
                sock, server_hostname=host, do_handshake_on_connect=False)
            try:
                sock.do_handshake()
            except ssl.SSLError as error:
                raise AuthenticationError(
                    f"TLS handshake with {host}:{port} failed: {error}") from None
        if security.protocol.uses_sasl:
            def receive_exact(count: int) -> bytes:
                chunks = bytearray()
                while len(chunks) < count:
                    chunk = sock.recv(count - len(chunks))
                    if not chunk:
                        raise AuthenticationError(
                            f"{host}:{port} closed the connection while authenticating")
                    chunks.extend(chunk)
                return bytes(chunks)

            async def roundtrip(api_key: int, correlation_id: int, frame: bytes) -> Any:
                sock.sendall(frame)
                (size,) = struct.unpack(">i", receive_exact(4))
                if not 4 <= size <= SASL_RESPONSE_MAX_BYTES:
                    raise AuthenticationError(f"bad response size {size}")
                return _decode(api_key, correlation_id, receive_exact(size))

            _run_blocking(_sasl_exchange(security, roundtrip))
    except BaseException:
        sock.close()
        raise
    return sock


def _run_blocking(coroutine: Awaitable[None]) -> None:
    """Drive a coroutine that never suspends (its I/O is blocking) to completion."""
    iterator = coroutine.__await__()
    try:
        next(iterator)
    except StopIteration:
        return
    raise AssertionError("a blocking SASL exchange suspended")
