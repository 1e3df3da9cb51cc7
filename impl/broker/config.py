"""Broker configuration: Kafka-style properties plus command-line overrides.

The broker reads a ``.properties`` file (``key=value`` or ``key: value`` lines, ``#`` and ``!``
comments, as Kafka does) and applies ``--override key=value`` on top. Every key is parsed into a
typed field of :class:`BrokerConfig`; an unknown key or a bad value raises :class:`ConfigError`
with one line naming the key, so the command line can print it and exit non-zero.

This module is a sans-IO core: it parses text; the caller reads the file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from impl.security import config as security_config

from . import configs
from .replication import TruncationPolicy

__sans_io__ = True

#: Kafka's default for ``socket.request.max.bytes`` (100 MiB).
SOCKET_REQUEST_MAX_BYTES_DEFAULT: Final = 104_857_600
#: Kafka's default for ``message.max.bytes``.
MESSAGE_MAX_BYTES_DEFAULT: Final = 1_048_588
#: ``intra.broker.throttled.rate`` defaults to MAX_LONG (no throttle), as in KIP-113.
THROTTLE_UNLIMITED: Final = 2**63 - 1


class ConfigError(ValueError):
    """A configuration key or value the broker cannot use (one line, names the key)."""


@dataclass(frozen=True, slots=True)
class Listener:
    """One ``listeners`` entry: ``NAME://host:port`` (the name's security protocol comes from
    ``listener.security.protocol.map``, :mod:`impl.security.config`)."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Every setting the broker uses, typed, with Kafka's names in the docstrings.

    Attributes:
        broker_id: ``broker.id``.
        listeners: ``listeners``: what the broker binds (an empty host binds every interface).
        advertised_listeners: ``advertised.listeners``: what is registered in ZooKeeper and
            given to clients, per listener name (empty: ``listeners``); see :func:`advertise`.
        advertised_host: ``advertised.host.name`` (Kafka's deprecated key): the host advertised
            for every listener when ``advertised.listeners`` is not set.
        log_dirs: ``log.dirs`` (comma-separated absolute paths; ``log.dir`` accepted too).
        zookeeper_connect: ``zookeeper.connect`` (``host:port[,host:port][/chroot]``).
        zookeeper_session_timeout_ms: ``zookeeper.session.timeout.ms``.
        zookeeper_connection_timeout_ms: ``zookeeper.connection.timeout.ms``: how long the
            broker waits for its first ZooKeeper connection; default (0) the session timeout,
            as in Kafka.
        intra_broker_throttled_rate_bytes_per_second: ``intra.broker.throttled.rate`` (KIP-113).
        num_replica_alter_log_dirs_threads: ``num.replica.alter.log.dirs.threads``; default the
            number of log dirs.
        min_insync_replicas: ``min.insync.replicas``.
        default_replication_factor: ``default.replication.factor``.
        num_partitions: ``num.partitions``.
        segment_bytes: ``log.segment.bytes``.
        segment_ms: ``log.roll.ms`` (``log.roll.hours`` accepted too).
        retention_ms: ``log.retention.ms`` (``-1`` keeps everything; ``.hours``/``.minutes`` too).
        retention_bytes: ``log.retention.bytes`` (``-1`` unlimited).
        retention_check_interval_ms: ``log.retention.check.interval.ms``: how often retention
            runs.
        index_interval_bytes: ``log.index.interval.bytes``.
        checkpoint_interval_ms: ``replica.high.watermark.checkpoint.interval.ms``: every dir's
            HW checkpoint is rewritten this often (which also finds a dir that failed idle).
        log_cleaner_enable: ``log.cleaner.enable``: compact ``cleanup.policy=compact`` topics.
        log_cleaner_threads: ``log.cleaner.threads``: partitions cleaned at once.
        log_cleaner_io_max_bytes_per_second: ``log.cleaner.io.max.bytes.per.second``.
        log_cleaner_dedupe_buffer_size: ``log.cleaner.dedupe.buffer.size``: offset-map memory.
        log_cleaner_backoff_ms: ``log.cleaner.backoff.ms``: pause when nothing is dirty enough.
        rack: ``broker.rack``.
        socket_request_max_bytes: ``socket.request.max.bytes``.
        queued_max_request_bytes: ``queued.max.request.bytes``: memory all requests being
            received or handled share (-1 unbounded, Kafka's default).
        connections_max_idle_ms: ``connections.max.idle.ms``.
        socket_request_read_timeout_ms: ``socket.request.read.timeout.ms`` (not a Kafka key): a
            request must arrive whole within this time of its first byte (slowloris).
        max_connections: ``max.connections``.
        max_connections_per_ip: ``max.connections.per.ip``.
        message_max_bytes: ``message.max.bytes``.
        message_timestamp_difference_max_ms: ``message.timestamp.difference.max.ms``: a batch
            with CREATE_TIME timestamps further than this from the broker's clock is refused.
        replica_lag_time_max_ms: ``replica.lag.time.max.ms``.
        replica_fetch_backoff_ms: ``replica.fetch.backoff.ms``: how long a follower waits
            before it asks or fetches again a partition its leader answered with an error.
        auto_create_topics_enable: ``auto.create.topics.enable`` (true, as in Kafka: a Metadata
            request that allows it creates an unknown topic with the broker defaults).
        cluster_id: reported in Metadata.
        replica_placer: ``broker.replica.placer`` (KIP-879): the placer CreateTopics uses.
        replica_truncation_policy: ``replica.truncation.policy``: ``leader_epoch`` (default,
            KIP-101/279) or ``high_watermark`` (the design V3 text, which KIP-101 shows to lose
            acknowledged records).
        offsets_topic_num_partitions: ``offsets.topic.num.partitions``.
        offsets_topic_replication_factor: ``offsets.topic.replication.factor`` (capped at the
            number of live brokers when the topic is created).
        offsets_commit_timeout_ms: ``offsets.commit.timeout.ms``: how long a group or offset
            append waits for acks=all.
        offsets_retention_ms: ``offsets.retention.minutes`` (in milliseconds).
        offsets_retention_check_interval_ms: ``offsets.retention.check.interval.ms``.
        offset_metadata_max_bytes: ``offset.metadata.max.bytes``.
        group_initial_rebalance_delay_ms: ``group.initial.rebalance.delay.ms``.
        group_min_session_timeout_ms: ``group.min.session.timeout.ms``.
        group_max_session_timeout_ms: ``group.max.session.timeout.ms``.
        group_max_size: ``group.max.size``.
        metrics_port: ``metrics.port`` (not a Kafka key: Kafka exports JMX): the port of the
            Prometheus ``/metrics`` endpoint on the first listener's host; 0 (default): off.
    """

    broker_id: int
    listeners: tuple[Listener, ...]
    log_dirs: tuple[str, ...]
    zookeeper_connect: str
    advertised_listeners: tuple[Listener, ...] = ()
    advertised_host: str = ""
    zookeeper_session_timeout_ms: int = 18_000
    zookeeper_connection_timeout_ms: int = 0
    intra_broker_throttled_rate_bytes_per_second: int = THROTTLE_UNLIMITED
    num_replica_alter_log_dirs_threads: int = 0
    min_insync_replicas: int = 1
    default_replication_factor: int = 1
    num_partitions: int = 1
    segment_bytes: int = 1_073_741_824
    segment_ms: int = 7 * 24 * 3_600_000
    retention_ms: int = 7 * 24 * 3_600_000
    retention_bytes: int = -1
    retention_check_interval_ms: int = 300_000
    index_interval_bytes: int = 4096
    checkpoint_interval_ms: int = 5000
    log_cleaner_enable: bool = True
    log_cleaner_threads: int = 1
    log_cleaner_io_max_bytes_per_second: int = (1 << 63) - 1
    log_cleaner_dedupe_buffer_size: int = 128 << 20
    log_cleaner_backoff_ms: int = 15_000
    rack: str | None = None
    socket_request_max_bytes: int = SOCKET_REQUEST_MAX_BYTES_DEFAULT
    queued_max_request_bytes: int = -1
    connections_max_idle_ms: int = 600_000
    socket_request_read_timeout_ms: int = 30_000
    max_connections: int = 2**31 - 1
    max_connections_per_ip: int = 2**31 - 1
    message_max_bytes: int = MESSAGE_MAX_BYTES_DEFAULT
    message_timestamp_difference_max_ms: int = 2**63 - 1
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_backoff_ms: int = 1000
    auto_create_topics_enable: bool = True
    cluster_id: str = "logproof"
    replica_placer: str = "rack-aware"
    replica_truncation_policy: TruncationPolicy = TruncationPolicy.LEADER_EPOCH
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_commit_timeout_ms: int = 5000
    offsets_retention_ms: int = 7 * 24 * 3_600_000
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    metrics_port: int = 0
    extra: Mapping[str, str] = field(default_factory=dict)
    #: listeners' protocols, TLS, SASL and ACL settings (None: every listener PLAINTEXT)
    security: security_config.SecurityConfig | None = None
    #: every property as given (file plus overrides): the static layer of config resolution
    #: (``STATIC_BROKER_CONFIG`` in DescribeConfigs, see :mod:`impl.broker.configs`)
    properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def port(self) -> int:
        """The first listener's configured port (0: chosen when it binds; what clients are
        told is :func:`advertise`'s)."""
        return self.listeners[0].port

    @property
    def zookeeper_connect_timeout_s(self) -> float:
        """``zookeeper.connection.timeout.ms`` (default: the session timeout) in seconds."""
        timeout_ms = self.zookeeper_connection_timeout_ms or self.zookeeper_session_timeout_ms
        return timeout_ms / 1000

    @property
    def mover_threads(self) -> int:
        """``num.replica.alter.log.dirs.threads`` with Kafka's default (one per log dir)."""
        return self.num_replica_alter_log_dirs_threads or len(self.log_dirs)


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java-properties text into a dict (later keys win).

    Args:
        text: the file's contents.

    Returns:
        ``{key: value}`` with surrounding whitespace stripped.

    Raises:
        ConfigError: a non-comment line without ``=`` or ``:``.
    """
    properties: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        separators = [index for index in (line.find("="), line.find(":")) if index > 0]
        if not separators:
            raise ConfigError(f"line {number}: expected key=value, got {line!r}")
        cut = min(separators)
        properties[line[:cut].strip()] = line[cut + 1 :].strip()
    return properties


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    """Parse ``key=value`` command-line overrides.

    Raises:
        ConfigError: an override without ``=`` or with an empty key.
    """
    result: dict[str, str] = {}
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override must be key=value, not {override!r}")
        result[key.strip()] = value.strip()
    return result


def _int(key: str, value: str, minimum: int | None = None, maximum: int | None = None) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{key}: expected an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ConfigError(f"{key}: must be at least {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ConfigError(f"{key}: must be at most {maximum}, got {number}")
    return number


def _bool(key: str, value: str) -> bool:
    lowered = value.lower()
    if lowered not in {"true", "false"}:
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    return lowered == "true"


#: Hosts that bind every interface: never an address a client can connect to.
WILDCARD_HOSTS: Final = frozenset({"", "0.0.0.0", "::"})


def parse_listeners(value: str, key: str = "listeners") -> tuple[Listener, ...]:
    """Parse ``listeners`` or ``advertised.listeners`` (``NAME://host:port[,…]``).

    An empty host binds every interface (``0.0.0.0``) in ``listeners`` and stands for this
    machine's host name in ``advertised.listeners``, as in Kafka.

    Raises:
        ConfigError: an entry that is not ``NAME://host:port``, a name used twice, or (in
            ``advertised.listeners``) the non-routable ``0.0.0.0``.
    """
    advertised = key == "advertised.listeners"
    listeners: list[Listener] = []
    for entry in (item.strip() for item in value.split(",")):
        if not entry:
            continue
        name, sep, address = entry.partition("://")
        host, colon, port_text = address.rpartition(":")
        if not sep or not colon:
            raise ConfigError(f"{key}: expected NAME://host:port, got {entry!r}")
        if not name.replace("_", "").isalnum() or not name[0].isalpha():
            raise ConfigError(f"{key}: bad listener name {name!r}")
        if any(listener.name == name.upper() for listener in listeners):
            raise ConfigError(f"{key}: listener {name.upper()} is listed twice")
        port = _int(key, port_text, 0, 65535)
        host = host.strip("[]")
        if advertised and host in WILDCARD_HOSTS - {""}:
            raise ConfigError(f"{key}: cannot use the non-routable meta-address {host} "
                              f"({entry!r}); use a routable host or address")
        listeners.append(Listener(name.upper(), host if advertised else host or "0.0.0.0",
                                  port))
    if not listeners:
        raise ConfigError(f"{key}: at least one listener is required")
    return tuple(listeners)


def advertise(config: BrokerConfig, bound_ports: Mapping[str, int],
              host_name: str) -> tuple[Listener, ...]:
    """The listeners this broker registers and gives to clients, as Kafka derives them.

    ``advertised.listeners`` when set (in its order), else ``listeners`` (the host
    ``advertised.host.name`` when set). A listener advertised with port 0 is advertised at the
    port its listener bound; a host that is empty or binds every interface is advertised as
    ``host_name`` (Kafka's canonical host name of the machine).

    Args:
        config: the broker's configuration.
        bound_ports: listener name → the port it is bound to (once serving).
        host_name: this machine's host name.
    """
    if config.advertised_listeners:
        chosen = config.advertised_listeners
    else:
        chosen = tuple(Listener(item.name, config.advertised_host or item.host, item.port)
                       for item in config.listeners)
    return tuple(
        Listener(item.name,
                 host_name if item.host in WILDCARD_HOSTS else item.host,
                 item.port or bound_ports.get(item.name, 0))
        for item in chosen)


def _log_dirs(value: str) -> tuple[str, ...]:
    dirs = tuple(item.strip() for item in value.split(",") if item.strip())
    if not dirs:
        raise ConfigError("log.dirs: at least one log dir is required")
    for path in dirs:
        if not path.startswith("/"):
            raise ConfigError(f"log.dirs: {path!r} is not an absolute path")
        if any(part == ".." for part in path.split("/")):
            raise ConfigError(f"log.dirs: {path!r} contains '..'")
    normalised = tuple(path.rstrip("/") or "/" for path in dirs)
    if len(set(normalised)) != len(normalised):
        raise ConfigError("log.dirs: a log dir is listed twice")
    return normalised


def _truncation_policy(key: str, value: str) -> TruncationPolicy:
    names = {policy.value.lower(): policy for policy in TruncationPolicy}
    policy = names.get(value.strip().lower())
    if policy is None:
        raise ConfigError(f"{key}: {value!r} is not one of {', '.join(sorted(names))}")
    return policy


_HOURS_MS: Final = 3_600_000
_MINUTES_MS: Final = 60_000

# key → (field name, parser)
_PARSERS: Final[dict[str, tuple[str, Callable[[str, str], object]]]] = {
    "broker.id": ("broker_id", lambda k, v: _int(k, v, 0, 2**31 - 1)),
    "listeners": ("listeners", lambda k, v: parse_listeners(v)),
    "advertised.listeners": ("advertised_listeners", lambda k, v: parse_listeners(v, k)),
    "advertised.host.name": ("advertised_host", lambda k, v: v),
    "log.dirs": ("log_dirs", lambda k, v: _log_dirs(v)),
    "log.dir": ("log_dirs", lambda k, v: _log_dirs(v)),
    "zookeeper.connect": ("zookeeper_connect", lambda k, v: v),
    "zookeeper.session.timeout.ms": (
        "zookeeper_session_timeout_ms",
        lambda k, v: _int(k, v, 1000, 2**31 - 1),
    ),
    "intra.broker.throttled.rate": (
        "intra_broker_throttled_rate_bytes_per_second",
        lambda k, v: _int(k, v, 1, THROTTLE_UNLIMITED),
    ),
    "replica.alter.log.dirs.io.max.bytes.per.second": (
        "intra_broker_throttled_rate_bytes_per_second",
        lambda k, v: _int(k, v, 1, THROTTLE_UNLIMITED),
    ),
    "num.replica.alter.log.dirs.threads": (
        "num_replica_alter_log_dirs_threads",
        lambda k, v: _int(k, v, 1, 1024),
    ),
    "min.insync.replicas": ("min_insync_replicas", lambda k, v: _int(k, v, 1, 2**31 - 1)),
    "default.replication.factor": (
        "default_replication_factor",
        lambda k, v: _int(k, v, 1, 2**15 - 1),
    ),
    "num.partitions": ("num_partitions", lambda k, v: _int(k, v, 1, 2**31 - 1)),
    "log.segment.bytes": ("segment_bytes", lambda k, v: _int(k, v, 14, 2**31 - 1)),
    "log.roll.ms": ("segment_ms", lambda k, v: _int(k, v, 1, 2**63 - 1)),
    "log.roll.hours": ("segment_ms", lambda k, v: _int(k, v, 1, 2**31 - 1) * _HOURS_MS),
    "log.retention.ms": ("retention_ms", lambda k, v: _int(k, v, -1, 2**63 - 1)),
    "log.retention.minutes": (
        "retention_ms",
        lambda k, v: _int(k, v, -1, 2**31 - 1) * _MINUTES_MS,
    ),
    "log.retention.hours": (
        "retention_ms",
        lambda k, v: _int(k, v, -1, 2**31 - 1) * _HOURS_MS,
    ),
    "log.retention.bytes": ("retention_bytes", lambda k, v: _int(k, v, -1, 2**63 - 1)),
    "log.retention.check.interval.ms": (
        "retention_check_interval_ms",
        lambda k, v: _int(k, v, 1, 2**63 - 1),
    ),
    "log.index.interval.bytes": ("index_interval_bytes", lambda k, v: _int(k, v, 0, 2**31 - 1)),
    "log.cleaner.enable": ("log_cleaner_enable", _bool),
    "log.cleaner.threads": ("log_cleaner_threads", lambda k, v: _int(k, v, 1, 1024)),
    "log.cleaner.io.max.bytes.per.second": (
        "log_cleaner_io_max_bytes_per_second",
        lambda k, v: _int(k, v, 1, 2**63 - 1),
    ),
    "log.cleaner.dedupe.buffer.size": (
        "log_cleaner_dedupe_buffer_size",
        lambda k, v: _int(k, v, 1 << 10, 2**63 - 1),
    ),
    "log.cleaner.backoff.ms": ("log_cleaner_backoff_ms", lambda k, v: _int(k, v, 0, 2**63 - 1)),
    "replica.high.watermark.checkpoint.interval.ms": (
        "checkpoint_interval_ms",
        lambda k, v: _int(k, v, 1, 2**31 - 1),
    ),
    "broker.rack": ("rack", lambda k, v: v or None),
    "socket.request.max.bytes": (
        "socket_request_max_bytes",
        lambda k, v: _int(k, v, 64, 2**31 - 1),
    ),
    "queued.max.request.bytes": (
        "queued_max_request_bytes",
        lambda k, v: _nonzero(k, _int(k, v, -1, 2**63 - 1)),
    ),
    "zookeeper.connection.timeout.ms": (
        "zookeeper_connection_timeout_ms",
        lambda k, v: _int(k, v, 1, 2**31 - 1),
    ),
    "connections.max.idle.ms": ("connections_max_idle_ms", lambda k, v: _int(k, v, 1, 2**63 - 1)),
    "socket.request.read.timeout.ms": (
        "socket_request_read_timeout_ms",
        lambda k, v: _int(k, v, 1, 2**63 - 1),
    ),
    "max.connections": ("max_connections", lambda k, v: _int(k, v, 0, 2**31 - 1)),
    "max.connections.per.ip": ("max_connections_per_ip", lambda k, v: _int(k, v, 0, 2**31 - 1)),
    "message.max.bytes": ("message_max_bytes", lambda k, v: _int(k, v, 64, 2**31 - 1)),
    "message.timestamp.difference.max.ms": (
        "message_timestamp_difference_max_ms",
        lambda k, v: _int(k, v, 0, 2**63 - 1),
    ),
    "replica.lag.time.max.ms": ("replica_lag_time_max_ms", lambda k, v: _int(k, v, 1, 2**31 - 1)),
    "replica.fetch.backoff.ms": (
        "replica_fetch_backoff_ms",
        lambda k, v: _int(k, v, 0, 2**31 - 1),
    ),
    "auto.create.topics.enable": ("auto_create_topics_enable", _bool),
    "cluster.id": ("cluster_id", lambda k, v: v),
    "broker.replica.placer": ("replica_placer", lambda k, v: v),
    "replica.truncation.policy": ("replica_truncation_policy", _truncation_policy),
    "offsets.topic.num.partitions": (
        "offsets_topic_num_partitions", lambda k, v: _int(k, v, 1, 100_000)),
    "offsets.topic.replication.factor": (
        "offsets_topic_replication_factor", lambda k, v: _int(k, v, 1, 2**15 - 1)),
    "offsets.commit.timeout.ms": (
        "offsets_commit_timeout_ms", lambda k, v: _int(k, v, 1, 2**31 - 1)),
    "offsets.retention.minutes": (
        "offsets_retention_ms", lambda k, v: _int(k, v, 1, 2**31 - 1) * _MINUTES_MS),
    "offsets.retention.check.interval.ms": (
        "offsets_retention_check_interval_ms", lambda k, v: _int(k, v, 1, 2**63 - 1)),
    "offset.metadata.max.bytes": (
        "offset_metadata_max_bytes", lambda k, v: _int(k, v, 0, 2**31 - 1)),
    "group.initial.rebalance.delay.ms": (
        "group_initial_rebalance_delay_ms", lambda k, v: _int(k, v, 0, 2**31 - 1)),
    "group.min.session.timeout.ms": (
        "group_min_session_timeout_ms", lambda k, v: _int(k, v, 0, 2**31 - 1)),
    "group.max.session.timeout.ms": (
        "group_max_session_timeout_ms", lambda k, v: _int(k, v, 0, 2**31 - 1)),
    "group.max.size": ("group_max_size", lambda k, v: _int(k, v, 1, 2**31 - 1)),
    "metrics.port": ("metrics_port", lambda k, v: _int(k, v, 0, 65535)),
}

#: Keys Kafka users commonly set that this broker accepts and ignores (kept in ``extra``):
#: thread-pool and buffer sizes that have no meaning on trio, the settings of the transaction state
#: topic (no transactions yet), ``controlled.shutdown.enable`` (a stopping broker
#: leaves leadership to the controller's broker-failure handling), and
#: ``log.flush.interval.messages`` (the storage engine flushes on its own schedule).
_ACCEPTED_IGNORED: Final = frozenset(
    {
        "controlled.shutdown.enable",
        "log.flush.interval.messages",
        "num.network.threads",
        "num.io.threads",
        "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes",
        "num.recovery.threads.per.data.dir",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
    }
)


def _nonzero(key: str, value: int) -> int:
    if value == 0:
        raise ConfigError(f"{key}: must be positive or -1 (unbounded)")
    return value


def build_config(properties: Mapping[str, str]) -> BrokerConfig:
    """Build a :class:`BrokerConfig` from properties (file values with overrides applied).

    Args:
        properties: ``{kafka key: text value}``.

    Returns:
        The typed configuration.

    Raises:
        ConfigError: an unknown key, a bad value, or a missing required key (``broker.id``,
            ``listeners``, ``log.dirs``, ``zookeeper.connect``).
    """
    values: dict[str, object] = {}
    extra: dict[str, str] = {}
    for key, text in properties.items():
        if key in _ACCEPTED_IGNORED:
            extra[key] = text
            continue
        if security_config.is_security_key(key):
            continue
        if key not in _PARSERS:
            definition = configs.BROKER_CONFIGS.get(key)
            if definition is None or not definition.dynamic:
                raise ConfigError(f"unknown config key {key!r}")
            try:
                definition.validate(key, text)
            except configs.InvalidConfigError as error:
                raise ConfigError(str(error)) from None
            continue
        name, parser = _PARSERS[key]
        values[name] = parser(key, text)
    for required, name in (
        ("broker.id", "broker_id"),
        ("listeners", "listeners"),
        ("log.dirs", "log_dirs"),
        ("zookeeper.connect", "zookeeper_connect"),
    ):
        if name not in values:
            raise ConfigError(f"missing required config key {required!r}")
    if not str(values["zookeeper_connect"]).strip():
        raise ConfigError("zookeeper.connect: must not be empty")
    listeners = values["listeners"]
    assert isinstance(listeners, tuple)
    try:
        security = security_config.parse(properties, [item.name for item in listeners])
    except security_config.SecurityConfigError as error:
        raise ConfigError(str(error)) from None
    advertised = values.get("advertised_listeners", ())
    assert isinstance(advertised, tuple)
    names = {item.name for item in listeners}
    for item in advertised:
        if item.name not in names:
            raise ConfigError(f"advertised.listeners: listener {item.name} is not one of "
                              f"listeners ({', '.join(sorted(names))})")
    if advertised and security.inter_broker_listener not in {item.name for item in advertised}:
        raise ConfigError(f"inter.broker.listener.name: {security.inter_broker_listener} must "
                          "be one of advertised.listeners")
    return BrokerConfig(extra=extra, properties=dict(properties), security=security,
                        **values)  # type: ignore[arg-type]


def load_config(text: str, overrides: Iterable[str] = ()) -> BrokerConfig:
    """Parse a properties file's text and apply ``key=value`` overrides.

    Raises:
        ConfigError: see :func:`build_config`.
    """
    properties = parse_properties(text)
    properties.update(parse_overrides(overrides))
    return build_config(properties)


#: Typed fields that stand for a config-core broker key, with the keys that set them.
_STATIC_FIELDS: Final = (
    ("min.insync.replicas", ("min.insync.replicas",), "min_insync_replicas"),
    ("message.max.bytes", ("message.max.bytes",), "message_max_bytes"),
    ("log.segment.bytes", ("log.segment.bytes",), "segment_bytes"),
    ("log.roll.ms", ("log.roll.ms", "log.roll.hours"), "segment_ms"),
    ("log.retention.ms", ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
     "retention_ms"),
    ("log.retention.bytes", ("log.retention.bytes",), "retention_bytes"),
    ("replica.alter.log.dirs.io.max.bytes.per.second",
     ("replica.alter.log.dirs.io.max.bytes.per.second", "intra.broker.throttled.rate"),
     "intra_broker_throttled_rate_bytes_per_second"),
    ("num.replica.alter.log.dirs.threads", ("num.replica.alter.log.dirs.threads",),
     "num_replica_alter_log_dirs_threads"),
)


def static_layer(config: BrokerConfig) -> dict[str, str]:
    """The broker's static config layer: its properties, plus typed fields set in code.

    A :class:`BrokerConfig` built by hand (tests, the demo) has no properties; its fields
    that differ from the defaults are reported under their Kafka keys.
    """
    layer = dict(config.properties)
    defaults = BrokerConfig(0, (), (), "")
    for key, keys, name in _STATIC_FIELDS:
        value = getattr(config, name)
        if value != getattr(defaults, name) and not any(k in layer for k in keys):
            layer[key] = str(value)
    if not any(k in layer for k in ("log.dirs", "log.dir")) and config.log_dirs:
        layer["log.dirs"] = ",".join(config.log_dirs)
    layer.setdefault("broker.id", str(config.broker_id))
    return layer
