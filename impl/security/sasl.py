"""SASL authentication (KIP-43, KIP-152), PLAIN and SCRAM-SHA-256/512 (KIP-84), sans-IO.

The server side is a small state machine per connection (:class:`SaslServer`): a SASL listener
starts in ``HANDSHAKE_REQUIRED``; SaslHandshake names a mechanism (an unknown one is answered
UNSUPPORTED_SASL_MECHANISM with the enabled list); tokens then arrive in SaslAuthenticate
requests (or, after a v0 handshake, as raw length-prefixed frames) until the mechanism succeeds
(``AUTHENTICATED``, principal ``User:<name>``) or fails (``FAILED``: the shell answers
SASL_AUTHENTICATION_FAILED and closes the connection). Only ApiVersions, SaslHandshake and
SaslAuthenticate are served before ``AUTHENTICATED``.

SCRAM is :mod:`scramp`'s (RFC 5802/7677); credentials are Kafka's ``ScramCredential``
(``salt=…,stored_key=…,server_key=…,iterations=…`` in ``/config/users/<user>``, KIP-84), looked
up through a callable so the shell decides where they come from. PLAIN checks the users of the
listener's JAAS configuration (``user_<name>="<password>"``, as Kafka's ``PlainLoginModule``).
Both fail with one message whether the user is unknown or the password wrong.

:class:`SaslClient` is the other side, for the broker's own connections (replica fetcher,
controller) and the command line.

This module is a sans-IO core.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import scramp

__sans_io__ = True

#: Kafka's SCRAM iteration bounds (``ScramMechanism``, KIP-554).
ITERATIONS_MIN: Final = 4096
ITERATIONS_MAX: Final = 16384
SCRAM_MECHANISMS: Final = ("SCRAM-SHA-256", "SCRAM-SHA-512")
_HASHES: Final = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}

# Error codes (Kafka's ``Errors``).
NONE: Final = 0
UNSUPPORTED_SASL_MECHANISM: Final = 33
ILLEGAL_SASL_STATE: Final = 34
SASL_AUTHENTICATION_FAILED: Final = 58

#: The message of every failed authentication (no hint whether the user exists).
FAILED_MESSAGE: Final = "Authentication failed: Invalid username or password"


class SaslState(enum.Enum):
    """A SASL connection's authentication state."""

    HANDSHAKE_REQUIRED = "handshake_required"  #: nothing but ApiVersions and SaslHandshake yet
    AUTHENTICATING = "authenticating"  #: a mechanism is chosen; tokens are exchanged
    AUTHENTICATED = "authenticated"  #: every API is served (subject to ACLs)
    FAILED = "failed"  #: answered SASL_AUTHENTICATION_FAILED; the connection closes


class CredentialError(ValueError):
    """A stored SCRAM credential or a password that Kafka's rules refuse."""


@dataclass(frozen=True)
class ScramCredential:
    """Kafka's ``ScramCredential``: what the broker keeps instead of the password."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        """Kafka's ``ScramCredentialUtils.credentialToString``."""
        def b64(value: bytes) -> str:
            return base64.b64encode(value).decode()

        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
                f"server_key={b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        """Parse :meth:`to_text`'s form (exactly its four fields).

        Raises:
            CredentialError: a missing or extra field, bad base64, an iteration count out of
                bounds.
        """
        fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        if set(fields) != {"salt", "stored_key", "server_key", "iterations"}:
            raise CredentialError(f"a SCRAM credential has exactly salt, stored_key, server_key "
                                  f"and iterations, got {sorted(fields)}")
        try:
            credential = cls(base64.b64decode(fields["salt"], validate=True),
                             base64.b64decode(fields["stored_key"], validate=True),
                             base64.b64decode(fields["server_key"], validate=True),
                             int(fields["iterations"]))
        except (ValueError, binascii.Error) as error:
            raise CredentialError(f"malformed SCRAM credential: {error}") from None
        if not ITERATIONS_MIN <= credential.iterations <= ITERATIONS_MAX:
            raise CredentialError(f"iterations must lie in [{ITERATIONS_MIN}, {ITERATIONS_MAX}]")
        return credential


def make_credential(mechanism: str, password: str, iterations: int = ITERATIONS_MIN,
                    salt: bytes | None = None) -> ScramCredential:
    """Salt and hash ``password`` for ``mechanism`` (``scramp``'s ``make_auth_info``).

    Raises:
        CredentialError: an unknown mechanism, an empty password, iterations out of bounds.
    """
    if mechanism not in SCRAM_MECHANISMS:
        raise CredentialError(f"unknown SCRAM mechanism {mechanism!r} "
                              f"(known: {', '.join(SCRAM_MECHANISMS)})")
    if not password:
        raise CredentialError("the password must not be empty")
    if not ITERATIONS_MIN <= iterations <= ITERATIONS_MAX:
        raise CredentialError(f"iterations must lie in [{ITERATIONS_MIN}, {ITERATIONS_MAX}]")
    made = scramp.ScramMechanism(mechanism).make_auth_info(password, iteration_count=iterations,
                                                          salt=salt)
    salt_bytes, stored_key, server_key, count = made
    return ScramCredential(bytes(salt_bytes), bytes(stored_key), bytes(server_key), int(count))


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's ``Hi(password, salt, iterations)``: what a client sends in
    AlterUserScramCredentials (KIP-554) instead of the password.

    Raises:
        CredentialError: an unknown mechanism.
    """
    if mechanism not in SCRAM_MECHANISMS:
        raise CredentialError(f"unknown SCRAM mechanism {mechanism!r}")
    return hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)


def credential_from_salted_password(mechanism: str, salt: bytes, salted: bytes,
                                    iterations: int) -> ScramCredential:
    """Kafka's ``ScramFormatter.generateCredential`` from a salted password (KIP-554):
    ``stored_key = H(HMAC(salted, "Client Key"))``, ``server_key = HMAC(salted, "Server Key")``
    (RFC 5802 section 3).

    Raises:
        CredentialError: an unknown mechanism.
    """
    if mechanism not in SCRAM_MECHANISMS:
        raise CredentialError(f"unknown SCRAM mechanism {mechanism!r}")
    name = _HASHES[mechanism]
    client_key = hmac.digest(salted, b"Client Key", name)
    stored_key = hashlib.new(name, client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", name)
    return ScramCredential(salt, stored_key, server_key, iterations)


# ``/config/users/<user>`` (Kafka's ``ConfigEntityName`` node for users)
USERS_CONFIG_ROOT: Final = "/config/users"
CONFIG_CHANGES_ROOT: Final = "/config/changes"
CONFIG_CHANGE_PREFIX: Final = "config_change_"


def user_config_path(user: str) -> str:
    """``/config/users/<user>``."""
    return f"{USERS_CONFIG_ROOT}/{user}"


def encode_user_config(config: Mapping[str, str]) -> bytes:
    """Kafka's JSON of an entity config: ``{"version":1,"config":{…}}``."""
    return json.dumps({"version": 1, "config": dict(sorted(config.items()))},
                      separators=(",", ":")).encode()


def decode_user_config(data: bytes) -> dict[str, str]:
    """The ``config`` map of a ``/config/users/<user>`` node (empty data: none).

    Raises:
        ValueError: not Kafka's JSON.
    """
    if not data:
        return {}
    document = json.loads(data)
    if not isinstance(document, dict) or not isinstance(document.get("config", {}), dict):
        raise ValueError(f"not an entity config: {document!r}")
    return {str(key): str(value) for key, value in document.get("config", {}).items()}


def encode_user_change(user: str) -> bytes:
    """The ``/config/changes/config_change_<seq>`` data of a change of ``user`` (version 2)."""
    return json.dumps({"version": 2, "entity_path": f"users/{user}"},
                      separators=(",", ":")).encode()


def changed_user(data: bytes) -> str | None:
    """The user a ``/config/changes`` notification names (None: another entity)."""
    try:
        document = json.loads(data)
    except ValueError:
        return None
    path = str(document.get("entity_path", "")) if isinstance(document, dict) else ""
    kind, _, name = path.partition("/")
    return name if kind == "users" and name else None


# -------------------------------------------------------------------------------------------
# The server side

#: ``(mechanism, user)`` → the stored credential (None: no such user).
CredentialLookup = Callable[[str, str], ScramCredential | None]


@dataclass(frozen=True)
class SaslStep:
    """What the shell answers to one token."""

    error_code: int
    error_message: str | None
    token: bytes


class SaslServer:
    """One connection's authentication.

    Args:
        mechanisms: the listener's ``sasl.enabled.mechanisms``.
        credentials: SCRAM credential lookup.
        plain_users: PLAIN users and passwords of the listener's JAAS configuration.
    """

    def __init__(self, mechanisms: Sequence[str], credentials: CredentialLookup,
                 plain_users: Mapping[str, str]) -> None:
        self.mechanisms = tuple(mechanisms)
        self.credentials = credentials
        self.plain_users = dict(plain_users)
        self.state = SaslState.HANDSHAKE_REQUIRED
        self.mechanism: str | None = None
        self.principal: str | None = None
        self._scram: scramp.ScramServer | None = None
        self._user: str | None = None
        #: why the last exchange failed (for the broker's log; never sent to the client)
        self.failure: str | None = None
        self._credential_in_use: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""

    def handshake(self, mechanism: str) -> int:
        """SaslHandshake: the error code (UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE)."""
        if self.state is not SaslState.HANDSHAKE_REQUIRED:
            self.state = SaslState.FAILED
            return ILLEGAL_SASL_STATE
        if mechanism not in self.mechanisms:
            return UNSUPPORTED_SASL_MECHANISM
        self.mechanism = mechanism
        self.state = SaslState.AUTHENTICATING
        return NONE

    def authenticate(self, token: bytes) -> SaslStep:
        """One client token: the answer, and the state it leaves (AUTHENTICATED or FAILED
        when the exchange ends)."""
        if self.state is not SaslState.AUTHENTICATING:
            self.state = SaslState.FAILED
            return SaslStep(ILLEGAL_SASL_STATE, "SaslAuthenticate before a SaslHandshake", b"")
        try:
            if self.mechanism == "PLAIN":
                return self._plain(token)
            return self._scram_step(token)
        except (scramp.ScramException, UnicodeDecodeError, ValueError, CredentialError,
                binascii.Error, KeyError) as error:
            self.failure = str(error)
            return self._fail()

    def _fail(self) -> SaslStep:
        self.state = SaslState.FAILED
        return SaslStep(SASL_AUTHENTICATION_FAILED, FAILED_MESSAGE, b"")

    def _succeed(self, user: str, token: bytes) -> SaslStep:
        self.state = SaslState.AUTHENTICATED
        self.principal = f"User:{user}"
        return SaslStep(NONE, None, token)

    def _plain(self, token: bytes) -> SaslStep:
        parts = token.decode("utf-8").split("\0")
        if len(parts) != 3:
            return self._fail()
        authzid, user, password = parts
        expected = self.plain_users.get(user)
        if authzid not in ("", user) or not user or expected is None:
            return self._fail()
        if not hmac.compare_digest(expected.encode(), password.encode()):
            return self._fail()
        return self._succeed(user, b"")

    def _scram_step(self, token: bytes) -> SaslStep:
        assert self.mechanism is not None
        message = token.decode("utf-8")
        if self._scram is None:
            mechanism = self.mechanism

            def auth_info(user: str) -> tuple[bytes, bytes, bytes, int]:
                credential = self.credentials(mechanism, _unescape(user))
                if credential is None:
                    raise CredentialError("unknown user")
                self._user = _unescape(user)
                self._credential_in_use = credential
                return (credential.salt, credential.stored_key, credential.server_key,
                        credential.iterations)

            self._scram = scramp.ScramMechanism(mechanism).make_server(auth_info)
            self._scram.set_client_first(message)
            self._client_first_bare = message.split(",", 2)[2]
            self._server_first = self._scram.get_server_first()
            return SaslStep(NONE, None, self._server_first.encode())
        assert self._user is not None
        lenient = self._lenient_final(message)
        if lenient is not None:
            return self._succeed(self._user, lenient.encode())
        self._scram.set_client_final(message)
        final = self._scram.get_server_final()
        return self._succeed(self._user, final.encode())

    def _lenient_final(self, message: str) -> str | None:
        """Kafka's ``ScramSaslServer`` accepts a client-final nonce that merely *ends with* the
        server nonce (librdkafka before 2.1 sends its client nonce in front of the whole server
        nonce); :mod:`scramp` demands equality. For such a message only, the proof is checked
        with RFC 5802's formulas over the message as sent; the server-final is returned (None:
        an ordinary message, left to :mod:`scramp`).

        Raises:
            CredentialError: the proof does not verify.
        """
        attributes = dict(part.split("=", 1) for part in message.split(",") if "=" in part)
        server_nonce = dict(part.split("=", 1) for part in self._server_first.split(","))["r"]
        nonce = attributes.get("r", "")
        if nonce == server_nonce or not nonce.endswith(server_nonce):
            return None
        credential = self._credential_in_use
        assert credential is not None
        digest = _HASHES[self.mechanism or ""]
        without_proof = message[:message.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.new(credential.stored_key, auth_message, digest).digest()
        proof = base64.b64decode(attributes.get("p", ""), validate=True)
        if len(proof) != len(signature):
            raise CredentialError("bad client proof")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(digest, client_key).digest(),
                                   credential.stored_key):
            raise CredentialError("bad client proof")
        server_signature = hmac.new(credential.server_key, auth_message, digest).digest()
        return "v=" + base64.b64encode(server_signature).decode()


def _unescape(name: str) -> str:
    """RFC 5802 ``saslname``: ``=2C`` is a comma, ``=3D`` an equals sign."""
    return name.replace("=2C", ",").replace("=3D", "=")


# -------------------------------------------------------------------------------------------
# The client side


class SaslClient:
    """The client's half of one mechanism: tokens to send, server tokens to check.

    Args:
        mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
        username: the user.
        password: its password.
    """

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self.username = username
        self.password = password
        self._scram: scramp.ScramClient | None = None
        self.complete = False

    def first_token(self) -> bytes:
        """The first token (PLAIN: the whole exchange)."""
        if self.mechanism == "PLAIN":
            self.complete = True
            return f"\0{self.username}\0{self.password}".encode()
        self._scram = scramp.ScramClient([self.mechanism], self.username, self.password)
        return str(self._scram.get_client_first()).encode()

    def next_token(self, server_token: bytes) -> bytes | None:
        """The answer to a server token (None: the exchange is complete).

        Raises:
            CredentialError: the server's token does not verify (a server that does not know
                the password).
        """
        if self.complete or self._scram is None:
            return None
        try:
            if self._scram.stage is None or int(self._scram.stage) < 2:
                self._scram.set_server_first(server_token.decode())
                return str(self._scram.get_client_final()).encode()
            self._scram.set_server_final(server_token.decode())
        except scramp.ScramException as error:
            raise CredentialError(f"SCRAM exchange failed: {error}") from None
        self.complete = True
        return None
