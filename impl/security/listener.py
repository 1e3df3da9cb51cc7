"""The server side of a secured listener: TLS, the principal, and SASL before anything else.

One :class:`ConnectionGuard` per connection, created by the server for the listener the
connection arrived on:

- TLS listeners (SSL, SASL_SSL) wrap the connection in trio's ``SSLStream`` with the listener's
  server certificate; with ``ssl.client.auth`` requested or required the client certificate's
  subject becomes the principal (``User:CN=…,OU=…``, RFC 2253 form, Kafka's DEFAULT mapping);
  without one the principal is ``User:ANONYMOUS``. A client that does not speak TLS fails the
  handshake and is closed;
- SASL listeners (SASL_PLAINTEXT, SASL_SSL) serve only ApiVersions, SaslHandshake and
  SaslAuthenticate until :class:`~impl.security.sasl.SaslServer` reaches AUTHENTICATED; any other
  request closes the connection; a failure is answered SASL_AUTHENTICATION_FAILED and closes it.
  A v0 SaslHandshake is followed by raw length-prefixed tokens (Kafka's original framing);
  a frame announcing more than ``sasl.server.max.receive.size`` before authentication closes the
  connection as soon as its size prefix is read (nothing more is read or allocated).

SCRAM credentials are read from ZooKeeper (``/config/users/<user>``) when a client's first SCRAM
message names its user, so a credential added or changed with ``logproof users`` takes effect at
the next login.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import trio
from cryptography import x509

from impl.broker._codec import DecodedRequest, encode_response
from impl.broker._framing import frame
from impl.broker._kio_build import build

from .config import ClientAuth, ListenerSecurity, SecurityConfig
from .request_acls import PRE_AUTHENTICATION_APIS, SASL_AUTHENTICATE, SASL_HANDSHAKE
from .sasl import ILLEGAL_SASL_STATE, NONE, SaslServer, SaslState, ScramCredential
from .session import ANONYMOUS, Session

log = logging.getLogger(__name__)

#: How long a client may take to complete the TLS handshake.
TLS_HANDSHAKE_TIMEOUT_SECONDS: Final = 10.0

#: ``(mechanism, user)`` → the stored SCRAM credential, read from ZooKeeper.
CredentialReader = Callable[[str, str], Awaitable[ScramCredential | None]]


def server_ssl_context(listener: ListenerSecurity) -> ssl.SSLContext:
    """The listener's TLS context: its keystore (PEM: key and chain), its truststore for client
    certificates, and ``ssl.client.auth``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    assert listener.keystore_location is not None
    context.load_cert_chain(listener.keystore_location, None, listener.key_password)
    if listener.truststore_location:
        context.load_verify_locations(cafile=listener.truststore_location)
    context.verify_mode = {
        ClientAuth.NONE: ssl.CERT_NONE,
        ClientAuth.REQUESTED: ssl.CERT_OPTIONAL,
        ClientAuth.REQUIRED: ssl.CERT_REQUIRED,
    }[listener.client_auth]
    return context


def certificate_principal(der: bytes | None) -> str:
    """``User:`` plus the certificate subject in RFC 2253 form (no certificate: ANONYMOUS)."""
    if not der:
        return ANONYMOUS
    subject = x509.load_der_x509_certificate(der).subject
    return f"User:{subject.rfc4514_string()}"


#: the SASL APIs: a listener's guard answers them; where none serves SASL they are refused
SASL_APIS: Final = frozenset({SASL_HANDSHAKE, SASL_AUTHENTICATE})


@dataclass(frozen=True)
class Verdict:
    """What the server does with one frame: answer (bytes), and whether to close after."""

    response: bytes | None
    close: bool = False


class ServerSecurity:
    """The per-listener settings and shared state the server's connections need.

    Args:
        config: the broker's security settings.
        read_credential: reads a SCRAM credential from ZooKeeper.
    """

    def __init__(self, config: SecurityConfig, read_credential: CredentialReader) -> None:
        self.config = config
        self.read_credential = read_credential
        self._contexts = {name: server_ssl_context(listener)
                          for name, listener in config.listeners.items()
                          if listener.protocol.uses_tls}
        self.failed_authentications = 0

    def guard(self, listener_name: str, peer_host: str) -> ConnectionGuard:
        """A new connection's guard."""
        listener = self.config.listener(listener_name)
        return ConnectionGuard(self, listener, self._contexts.get(listener.name), peer_host)


class ConnectionGuard:
    """One connection's security state (see the module docstring)."""

    def __init__(self, owner: ServerSecurity, listener: ListenerSecurity,
                 context: ssl.SSLContext | None, peer_host: str) -> None:
        self.owner = owner
        self.listener = listener
        self.context = context
        self.peer_host = peer_host
        self.principal = ANONYMOUS
        self.sasl: SaslServer | None = None
        self._raw_tokens = False
        self._credential: ScramCredential | None = None
        if listener.protocol.uses_sasl:
            plain_users = listener.jaas_for("PLAIN").plain_users
            self.sasl = SaslServer(listener.mechanisms, self._lookup, plain_users)

    @property
    def session(self) -> Session:
        """The connection's current session."""
        return Session(self.principal, self.peer_host, self.listener.name)

    @property
    def uses_tls(self) -> bool:
        """Whether the connection is wrapped in TLS (no zero-copy sends then)."""
        return self.context is not None

    @property
    def authenticated(self) -> bool:
        """Whether every API may be served."""
        return self.sasl is None or self.sasl.state is SaslState.AUTHENTICATED

    async def wrap(self, stream: trio.SocketStream) -> trio.abc.Stream | None:
        """The TLS handshake (None: it failed, the connection is to be closed)."""
        if self.context is None:
            return stream
        tls = trio.SSLStream(stream, self.context, server_side=True)
        try:
            with trio.fail_after(TLS_HANDSHAKE_TIMEOUT_SECONDS):
                await tls.do_handshake()
        except (trio.BrokenResourceError, trio.TooSlowError) as error:
            log.info("TLS handshake with %s on %s failed: %s", self.peer_host,
                     self.listener.name, error.__cause__ or error)
            return None
        self.principal = certificate_principal(tls.getpeercert(binary_form=True))
        return tls

    def _lookup(self, mechanism: str, user: str) -> ScramCredential | None:
        return self._credential

    def raw_token_expected(self) -> bool:
        """Whether the next frame is a raw SASL token (after a v0 SaslHandshake)."""
        return self._raw_tokens

    async def raw_token(self, token: bytes) -> Verdict:
        """A raw SASL token after a v0 handshake: the raw answer (framed), or close."""
        assert self.sasl is not None
        await self._prefetch(token)
        step = self.sasl.authenticate(token)
        if step.error_code != NONE:
            self._failed(step.error_message)
            return Verdict(None, close=True)
        if self.sasl.state is SaslState.AUTHENTICATED:
            self._raw_tokens = False
            self._authenticated()
        return Verdict(frame(step.token))

    def receive_limit(self) -> int | None:
        """The largest frame read now: ``sasl.server.max.receive.size`` until the client has
        authenticated (None: ``socket.request.max.bytes`` alone)."""
        return None if self.authenticated else self.owner.config.sasl_max_receive_bytes

    def admits(self, api_key: int) -> bool:
        """Whether a request with ``api_key`` may be served now."""
        return self.authenticated or api_key in PRE_AUTHENTICATION_APIS

    def intercepts(self, api_key: int) -> bool:
        """Whether the guard answers this request itself (the SASL APIs)."""
        return api_key in SASL_APIS

    async def answer(self, request: DecodedRequest) -> Verdict:
        """SaslHandshake or SaslAuthenticate."""
        if request.api_key == SASL_HANDSHAKE:
            return self._handshake(request)
        return await self._authenticate(request)

    def _handshake(self, request: DecodedRequest) -> Verdict:
        if self.sasl is None:
            return sasl_refused(request)
        enabled = list(self.listener.mechanisms)
        code = self.sasl.handshake(str(request.body.mechanism))
        data = {"error_code": code, "mechanisms": enabled}
        if code == NONE and request.api_version == 0:
            self._raw_tokens = True
        return Verdict(self._encode(request, data), close=code != NONE)

    async def _authenticate(self, request: DecodedRequest) -> Verdict:
        if self.sasl is None or self._raw_tokens:
            return sasl_refused(request)
        token = bytes(request.body.auth_bytes)
        await self._prefetch(token)
        step = self.sasl.authenticate(token)
        data: dict[str, Any] = {"error_code": step.error_code,
                                "error_message": step.error_message,
                                "auth_bytes": step.token, "session_lifetime": 0}
        if step.error_code != NONE:
            self._failed(step.error_message)
            return Verdict(self._encode(request, data), close=True)
        if self.sasl.state is SaslState.AUTHENTICATED:
            self._authenticated()
        return Verdict(self._encode(request, data))

    async def _prefetch(self, token: bytes) -> None:
        """Read the SCRAM credential the client-first message names (once per connection)."""
        assert self.sasl is not None
        mechanism = self.sasl.mechanism
        if mechanism is None or mechanism == "PLAIN" or self._credential is not None:
            return
        user = scram_user(token)
        if user is not None:
            self._credential = await self.owner.read_credential(mechanism, user)

    def _authenticated(self) -> None:
        assert self.sasl is not None
        assert self.sasl.principal is not None
        self.principal = self.sasl.principal
        log.debug("%s authenticated as %s on %s with %s", self.peer_host, self.principal,
                 self.listener.name, self.sasl.mechanism)

    def _failed(self, message: str | None) -> None:
        self.owner.failed_authentications += 1
        reason = self.sasl.failure if self.sasl is not None else None
        log.warning("authentication of %s on %s failed: %s (%s)", self.peer_host,
                    self.listener.name, message, reason or "bad credentials")

    @staticmethod
    def _encode(request: DecodedRequest, data: Mapping[str, Any]) -> bytes:
        return encode_response(request, build(request.response_class, dict(data)))


def sasl_refused(request: DecodedRequest) -> Verdict:
    """SaslHandshake or SaslAuthenticate where no SASL exchange is expected (a listener without
    SASL, or raw tokens after a v0 handshake): ILLEGAL_SASL_STATE, as Kafka answers, then the
    connection is closed."""
    if request.api_key == SASL_HANDSHAKE:
        data: dict[str, Any] = {"error_code": ILLEGAL_SASL_STATE, "mechanisms": []}
    else:
        data = {"error_code": ILLEGAL_SASL_STATE, "auth_bytes": b"", "session_lifetime": 0,
                "error_message": "SaslAuthenticate is not expected here"}
    return Verdict(ConnectionGuard._encode(request, data), close=True)


def scram_user(token: bytes) -> str | None:
    """The user a SCRAM client-first message names (``n,,n=<user>,r=…``), unescaped."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        return None
    for part in text.split(","):
        if part.startswith("n=") and len(part) > 2:
            return part[2:].replace("=2C", ",").replace("=3D", "=")
    return None

