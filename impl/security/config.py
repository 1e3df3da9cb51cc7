"""The broker's security settings, with Kafka's names: listeners' protocols, TLS, SASL, ACLs.

Parsed from the broker's properties (``impl.broker.config`` hands every key of :data:`KEYS`, and
every ``listener.name.<listener>.…`` key, to :func:`parse`):

- ``listener.security.protocol.map`` (``NAME:PROTOCOL,…``; default: each of PLAINTEXT, SSL,
  SASL_PLAINTEXT, SASL_SSL maps to itself), ``inter.broker.listener.name`` (or
  ``security.inter.broker.protocol``; default the first listener);
- TLS: ``ssl.keystore.location`` (a PEM file with the private key and the certificate chain;
  ``ssl.keystore.type=PEM``), ``ssl.key.password``, ``ssl.truststore.location`` (PEM CA
  certificates), ``ssl.client.auth`` (``none``, ``requested``, ``required``),
  ``ssl.endpoint.identification.algorithm`` (``https`` or empty, for the broker as a client);
- SASL: ``sasl.enabled.mechanisms`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; default GSSAPI in
  Kafka, here SCRAM-SHA-512), ``sasl.mechanism.inter.broker.protocol``, ``sasl.jaas.config``
  (the broker's own credentials as a client: ``username="…" password="…"``; PLAIN users as
  ``user_<name>="<password>"``, as Kafka's ``PlainLoginModule``), ``sasl.server.max.receive.size``;
- ACLs: ``authorizer.class.name`` (any of Kafka's AclAuthorizer names enables the authorizer),
  ``super.users``, ``allow.everyone.if.no.acl.found``.

A ``listener.name.<listener lower case>.<key>`` (or ``….<mechanism lower case>.<key>``) setting
overrides ``<key>`` for that listener, as in Kafka.

This module is a sans-IO core.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from .authorizer import parse_super_users

__sans_io__ = True


class SecurityConfigError(ValueError):
    """A security setting the broker cannot use (one line naming the key)."""


class SecurityProtocol(enum.Enum):
    """Kafka's security protocols."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        """SSL and SASL_SSL."""
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        """SASL_PLAINTEXT and SASL_SSL."""
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


class ClientAuth(enum.Enum):
    """``ssl.client.auth``."""

    NONE = "none"
    REQUESTED = "requested"
    REQUIRED = "required"


#: The SASL mechanisms the broker implements.
MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: Kafka's class names of the ZooKeeper ACL authorizer.
AUTHORIZER_CLASSES: Final = frozenset({
    "kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer",
    "logproof.AclAuthorizer",
})
#: Kafka's ``sasl.server.max.receive.size`` default.
SASL_MAX_RECEIVE_BYTES_DEFAULT: Final = 524_288

#: The keys this module reads (besides ``listener.name.*``).
KEYS: Final = frozenset({
    "listener.security.protocol.map", "inter.broker.listener.name",
    "security.inter.broker.protocol",
    "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password",
    "ssl.client.auth", "ssl.endpoint.identification.algorithm", "ssl.principal.mapping.rules",
    "ssl.protocol", "ssl.enabled.protocols",
    "sasl.enabled.mechanisms", "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config",
    "sasl.server.max.receive.size",
    "authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found",
})
LISTENER_PREFIX: Final = "listener.name."


def is_security_key(key: str) -> bool:
    """Whether :func:`parse` reads ``key``."""
    return key in KEYS or key.startswith(LISTENER_PREFIX)


@dataclass(frozen=True)
class JaasConfig:
    """What logproof reads of a ``sasl.jaas.config`` value."""

    username: str | None = None
    password: str | None = None
    #: PLAIN users the broker accepts (``user_<name>="<password>"``)
    plain_users: Mapping[str, str] = field(default_factory=dict)


_JAAS_OPTION = re.compile(r'([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*"((?:[^"\\]|\\.)*)"')


def parse_jaas(key: str, text: str) -> JaasConfig:
    """Parse ``<LoginModule> required username="…" password="…" user_alice="…";``.

    Raises:
        SecurityConfigError: no login module, or not ended by ``;``.
    """
    body = text.strip()
    if not body.endswith(";") or " " not in body:
        raise SecurityConfigError(
            f"{key}: expected '<LoginModule> required key=\"value\" ...;', got {text!r}")
    options = {name: value.replace('\\"', '"').replace("\\\\", "\\")
               for name, value in _JAAS_OPTION.findall(body)}
    users = {name[len("user_"):]: value for name, value in options.items()
             if name.startswith("user_")}
    return JaasConfig(options.get("username"), options.get("password"), users)


@dataclass(frozen=True)
class ListenerSecurity:
    """One listener's protocol and its effective TLS and SASL settings."""

    name: str
    protocol: SecurityProtocol
    keystore_location: str | None = None
    key_password: str | None = None
    truststore_location: str | None = None
    client_auth: ClientAuth = ClientAuth.NONE
    mechanisms: tuple[str, ...] = ("SCRAM-SHA-512",)
    jaas: JaasConfig = field(default_factory=JaasConfig)
    #: per-mechanism JAAS overrides (``listener.name.<l>.<mechanism>.sasl.jaas.config``)
    mechanism_jaas: Mapping[str, JaasConfig] = field(default_factory=dict)

    def jaas_for(self, mechanism: str) -> JaasConfig:
        """The JAAS settings of ``mechanism`` on this listener."""
        return self.mechanism_jaas.get(mechanism, self.jaas)


@dataclass(frozen=True)
class SecurityConfig:
    """Every security setting, per listener where Kafka allows it."""

    listeners: Mapping[str, ListenerSecurity]
    inter_broker_listener: str
    inter_broker_mechanism: str = "SCRAM-SHA-512"
    endpoint_identification: bool = True
    authorizer_enabled: bool = False
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    sasl_max_receive_bytes: int = SASL_MAX_RECEIVE_BYTES_DEFAULT

    def listener(self, name: str) -> ListenerSecurity:
        """The settings of listener ``name``."""
        return self.listeners[name]

    @property
    def inter_broker(self) -> ListenerSecurity:
        """The listener brokers and the controller use to talk to each other."""
        return self.listeners[self.inter_broker_listener]

    @property
    def secured(self) -> bool:
        """Whether any listener uses TLS or SASL."""
        return any(item.protocol is not SecurityProtocol.PLAINTEXT
                   for item in self.listeners.values())


def _protocol(key: str, text: str) -> SecurityProtocol:
    try:
        return SecurityProtocol(text.strip().upper())
    except ValueError:
        known = ", ".join(p.value for p in SecurityProtocol)
        raise SecurityConfigError(f"{key}: unknown security protocol {text!r} "
                                  f"(known: {known})") from None


def parse_protocol_map(text: str) -> dict[str, SecurityProtocol]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL[,…]``.

    Raises:
        SecurityConfigError: a malformed entry or unknown protocol.
    """
    key = "listener.security.protocol.map"
    found: dict[str, SecurityProtocol] = {}
    for entry in (item.strip() for item in text.split(",")):
        if not entry:
            continue
        name, sep, protocol = entry.partition(":")
        if not sep or not name.strip():
            raise SecurityConfigError(f"{key}: expected NAME:PROTOCOL, got {entry!r}")
        found[name.strip().upper()] = _protocol(key, protocol)
    return found


def _bool(key: str, text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise SecurityConfigError(f"{key}: expected true or false, got {text!r}")
    return value == "true"


def _mechanisms(key: str, text: str) -> tuple[str, ...]:
    found = tuple(item.strip().upper() for item in text.split(",") if item.strip())
    unknown = [item for item in found if item not in MECHANISMS]
    if unknown:
        raise SecurityConfigError(f"{key}: unsupported SASL mechanism {unknown[0]!r} "
                                  f"(supported: {', '.join(MECHANISMS)})")
    if not found:
        raise SecurityConfigError(f"{key}: at least one mechanism is required")
    return found


def parse(properties: Mapping[str, str], listener_names: Sequence[str]) -> SecurityConfig:
    """The security settings of a broker whose ``listeners`` have ``listener_names``.

    Raises:
        SecurityConfigError: a bad value, a listener with no protocol, an SSL listener without
            a keystore, an inter-broker listener that is not one of ``listeners``.
    """
    protocols = {p.value: p for p in SecurityProtocol}
    protocols.update(parse_protocol_map(properties.get("listener.security.protocol.map", "")))

    def get(listener: str, name: str, mechanism: str | None = None) -> str | None:
        prefix = f"{LISTENER_PREFIX}{listener.lower()}."
        if mechanism is not None:
            value = properties.get(f"{prefix}{mechanism.lower()}.{name}")
            if value is not None:
                return value
        return properties.get(prefix + name, properties.get(name))

    listeners: dict[str, ListenerSecurity] = {}
    for name in listener_names:
        protocol = protocols.get(name.upper())
        if protocol is None:
            raise SecurityConfigError(
                f"listeners: listener {name!r} has no entry in listener.security.protocol.map")
        keystore = get(name, "ssl.keystore.location")
        if protocol.uses_tls and not keystore:
            raise SecurityConfigError(
                f"ssl.keystore.location: listener {name} ({protocol.value}) needs a keystore")
        for store_key in ("ssl.keystore.type", "ssl.truststore.type"):
            store_type = get(name, store_key)
            if store_type is not None and store_type.strip().upper() != "PEM":
                raise SecurityConfigError(f"{store_key}: only PEM stores are supported")
        client_auth_text = (get(name, "ssl.client.auth") or "none").strip().lower()
        try:
            client_auth = ClientAuth(client_auth_text)
        except ValueError:
            raise SecurityConfigError(
                f"ssl.client.auth: expected none, requested or required, got "
                f"{client_auth_text!r}") from None
        mechanisms = _mechanisms("sasl.enabled.mechanisms",
                                 get(name, "sasl.enabled.mechanisms") or "SCRAM-SHA-512")
        jaas_text = get(name, "sasl.jaas.config")
        jaas = parse_jaas("sasl.jaas.config", jaas_text) if jaas_text else JaasConfig()
        per_mechanism = {}
        for mechanism in mechanisms:
            text = properties.get(f"{LISTENER_PREFIX}{name.lower()}.{mechanism.lower()}."
                                  "sasl.jaas.config")
            if text:
                per_mechanism[mechanism] = parse_jaas("sasl.jaas.config", text)
        listeners[name.upper()] = ListenerSecurity(
            name.upper(), protocol, keystore, get(name, "ssl.key.password"),
            get(name, "ssl.truststore.location"), client_auth, mechanisms, jaas, per_mechanism)
    inter = properties.get("inter.broker.listener.name")
    if inter is None and "security.inter.broker.protocol" in properties:
        wanted = _protocol("security.inter.broker.protocol",
                           properties["security.inter.broker.protocol"])
        matching = [item.name for item in listeners.values() if item.protocol is wanted]
        if not matching:
            raise SecurityConfigError(
                f"security.inter.broker.protocol: no listener uses {wanted.value}")
        inter = matching[0]
    inter = (inter or listener_names[0]).strip().upper()
    if inter not in listeners:
        raise SecurityConfigError(
            f"inter.broker.listener.name: {inter!r} is not one of the listeners")
    inter_mechanism = (properties.get("sasl.mechanism.inter.broker.protocol")
                       or "SCRAM-SHA-512").strip().upper()
    if inter_mechanism not in MECHANISMS:
        raise SecurityConfigError(
            f"sasl.mechanism.inter.broker.protocol: unsupported mechanism {inter_mechanism!r}")
    authorizer = (properties.get("authorizer.class.name") or "").strip()
    if authorizer and authorizer not in AUTHORIZER_CLASSES:
        raise SecurityConfigError(
            f"authorizer.class.name: unsupported authorizer {authorizer!r} "
            f"(supported: {', '.join(sorted(AUTHORIZER_CLASSES))})")
    rules = (properties.get("ssl.principal.mapping.rules") or "DEFAULT").strip()
    if rules != "DEFAULT":
        raise SecurityConfigError("ssl.principal.mapping.rules: only DEFAULT is supported")
    max_receive_text = properties.get("sasl.server.max.receive.size",
                                      str(SASL_MAX_RECEIVE_BYTES_DEFAULT))
    try:
        max_receive = int(max_receive_text)
    except ValueError:
        raise SecurityConfigError(
            f"sasl.server.max.receive.size: {max_receive_text!r} is not an integer") from None
    if max_receive < 64:
        raise SecurityConfigError("sasl.server.max.receive.size: must be at least 64")
    return SecurityConfig(
        listeners=listeners,
        inter_broker_listener=inter,
        inter_broker_mechanism=inter_mechanism,
        endpoint_identification=(properties.get("ssl.endpoint.identification.algorithm",
                                                "https").strip().lower() == "https"),
        authorizer_enabled=bool(authorizer),
        super_users=parse_super_users(properties.get("super.users", "")),
        allow_everyone_if_no_acl_found=_bool(
            "allow.everyone.if.no.acl.found",
            properties.get("allow.everyone.if.no.acl.found", "false")),
        sasl_max_receive_bytes=max_receive,
    )


# -------------------------------------------------------------------------------------------
# The client side: the broker's own connections and the command line


@dataclass(frozen=True)
class ClientSecurity:
    """How a client connects: protocol, TLS files, SASL mechanism and credentials."""

    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    mechanism: str = "SCRAM-SHA-512"
    username: str | None = None
    password: str | None = None
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    key_password: str | None = None
    check_hostname: bool = True


#: Client keys :func:`parse_client_properties` reads (Kafka's Java client names, plus
#: librdkafka's ``sasl.username``/``sasl.password`` and ``ssl.ca.location``/
#: ``ssl.certificate.location``/``ssl.key.location``).
CLIENT_KEYS: Final = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.jaas.config", "sasl.username",
    "sasl.password", "ssl.truststore.location", "ssl.truststore.type", "ssl.ca.location",
    "ssl.keystore.location", "ssl.keystore.type", "ssl.certificate.location",
    "ssl.key.location", "ssl.key.password", "ssl.keystore.password",
    "ssl.endpoint.identification.algorithm",
})


def parse_client_properties(properties: Mapping[str, str]) -> ClientSecurity:
    """A client's security from Kafka client properties (``--command-config``).

    Raises:
        SecurityConfigError: an unknown key or protocol, a SASL protocol without credentials.
    """
    unknown = sorted(set(properties) - CLIENT_KEYS)
    if unknown:
        raise SecurityConfigError(f"unknown client config key {unknown[0]!r}")
    protocol = _protocol("security.protocol", properties.get("security.protocol", "PLAINTEXT"))
    mechanism = properties.get("sasl.mechanism", "SCRAM-SHA-512").strip().upper()
    if mechanism not in MECHANISMS:
        raise SecurityConfigError(f"sasl.mechanism: unsupported mechanism {mechanism!r}")
    jaas_text = properties.get("sasl.jaas.config")
    jaas = parse_jaas("sasl.jaas.config", jaas_text) if jaas_text else JaasConfig()
    username = properties.get("sasl.username", jaas.username)
    password = properties.get("sasl.password", jaas.password)
    if protocol.uses_sasl and (not username or password is None):
        raise SecurityConfigError(
            f"security.protocol={protocol.value} needs sasl.jaas.config with username and "
            "password (or sasl.username and sasl.password)")
    keystore = properties.get("ssl.keystore.location")
    return ClientSecurity(
        protocol=protocol, mechanism=mechanism, username=username, password=password,
        cafile=properties.get("ssl.truststore.location", properties.get("ssl.ca.location")),
        certfile=properties.get("ssl.certificate.location", keystore),
        keyfile=properties.get("ssl.key.location", keystore),
        key_password=properties.get("ssl.key.password"),
        check_hostname=properties.get("ssl.endpoint.identification.algorithm",
                                      "https").strip().lower() == "https",
    )


def inter_broker_client(config: SecurityConfig) -> ClientSecurity:
    """How this broker connects to the others: the inter-broker listener's protocol, its
    keystore as the client certificate, its truststore, and the inter-broker mechanism's JAAS
    credentials."""
    listener = config.inter_broker
    jaas = listener.jaas_for(config.inter_broker_mechanism)
    return ClientSecurity(
        protocol=listener.protocol, mechanism=config.inter_broker_mechanism,
        username=jaas.username, password=jaas.password, cafile=listener.truststore_location,
        certfile=listener.keystore_location, keyfile=listener.keystore_location,
        key_password=listener.key_password, check_hostname=config.endpoint_identification,
    )
