"""Topic and broker configs as ZooKeeper-era Kafka defines, validates, stores and resolves them.

Definitions (:data:`TOPIC_CONFIGS`, :data:`BROKER_CONFIGS`) carry each key's type, default,
validation, documentation and, for topic keys, the broker keys that stand in for it (Kafka's
synonyms: ``retention.ms`` falls back to ``log.retention.ms``, ``log.retention.minutes`` and
``log.retention.hours``). A topic's effective value is resolved in Kafka's order:

1. ``/config/topics/<t>`` (``TOPIC_CONFIG``);
2. for each broker synonym in turn: ``/config/brokers/<id>`` (``DYNAMIC_BROKER_CONFIG``),
   ``/config/brokers/<default>`` (``DYNAMIC_DEFAULT_BROKER_CONFIG``), the broker's properties
   file (``STATIC_BROKER_CONFIG``);
3. Kafka's default (``DEFAULT_CONFIG``).

The same module encodes the znodes (``{"version":1,"config":{...}}``) and the change
notifications under ``/config/changes`` (``{"version":2,"entity_path":"topics/t"}``), validates
AlterConfigs and IncrementalAlterConfigs (SET, DELETE, APPEND, SUBTRACT) with an
:class:`InvalidConfigError` naming the key, and builds DescribeConfigs entries with their
source, read-only and sensitive flags and synonyms.

This module is a sans-IO core: the broker's ZooKeeper shell reads and writes the nodes.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from impl.storage.log_config import (
    CLEANUP_COMPACT,
    CLEANUP_DELETE,
    CREATE_TIME,
    LOG_APPEND_TIME,
    LogConfig,
)

__sans_io__ = True

CONFIG_ROOT: Final = "/config"
CHANGES_PATH: Final = "/config/changes"
CHANGE_PREFIX: Final = "config_change_"
#: The cluster-wide default broker entity (``/config/brokers/<default>``).
DEFAULT_BROKER: Final = "<default>"
#: Kafka purges change notifications older than this (15 minutes).
CHANGE_EXPIRY_MS: Final = 15 * 60_000
LONG_MAX: Final = 2**63 - 1
INT_MAX: Final = 2**31 - 1


class ConfigType(enum.IntEnum):
    """DescribeConfigs v3's ``config_type`` (KIP-569)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """DescribeConfigs v1+'s ``config_source``."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ResourceType(enum.IntEnum):
    """Config resource types of DescribeConfigs and (Incremental)AlterConfigs."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


class AlterOp(enum.IntEnum):
    """IncrementalAlterConfigs operations (KIP-339)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class InvalidConfigError(ValueError):
    """A config key or value that cannot be used; the message names the key (INVALID_CONFIG)."""


class InvalidRequestError(ValueError):
    """A malformed alteration: a key twice, a null value to SET (INVALID_REQUEST)."""


Validator = Callable[[str, str], object]


def _long(minimum: int = -LONG_MAX - 1, maximum: int = LONG_MAX) -> Validator:
    def check(key: str, text: str) -> int:
        try:
            number = int(text.strip())
        except ValueError:
            raise InvalidConfigError(
                f"Invalid value {text!r} for configuration {key}: not a number"
            ) from None
        if number < minimum:
            raise InvalidConfigError(
                f"Invalid value {number} for configuration {key}: must be at least {minimum}"
            )
        if number > maximum:
            raise InvalidConfigError(
                f"Invalid value {number} for configuration {key}: must be at most {maximum}"
            )
        return number

    return check


def _double(minimum: float, maximum: float) -> Validator:
    def check(key: str, text: str) -> float:
        try:
            number = float(text.strip())
        except ValueError:
            raise InvalidConfigError(
                f"Invalid value {text!r} for configuration {key}: not a number"
            ) from None
        if math.isnan(number) or not minimum <= number <= maximum:
            raise InvalidConfigError(
                f"Invalid value {text} for configuration {key}: must be in [{minimum},{maximum}]"
            )
        return number

    return check


def _boolean(key: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise InvalidConfigError(
            f"Invalid value {text!r} for configuration {key}: expected true or false"
        )
    return lowered == "true"


def _one_of(*choices: str) -> Validator:
    def check(key: str, text: str) -> str:
        if text.strip() not in choices:
            raise InvalidConfigError(
                f"Invalid value {text!r} for configuration {key}: "
                f"string must be one of: {', '.join(choices)}"
            )
        return text.strip()

    return check


def split_list(text: str) -> list[str]:
    """A LIST value's items (comma-separated, blanks dropped)."""
    return [item.strip() for item in text.split(",") if item.strip()]


def _list_of(*choices: str) -> Validator:
    def check(key: str, text: str) -> frozenset[str]:
        items = split_list(text)
        bad = [item for item in items if item not in choices]
        if bad:
            raise InvalidConfigError(
                f"Invalid value {text!r} for configuration {key}: "
                f"{bad[0]!r} is not one of: {', '.join(choices)}"
            )
        return frozenset(items)

    return check


def _throttled_replicas(key: str, text: str) -> tuple[str, ...]:
    """``*`` or ``partition:broker,...`` (KIP-73)."""
    items = split_list(text)
    if items == ["*"]:
        return ("*",)
    for item in items:
        partition, colon, broker = item.partition(":")
        if not colon or not partition.isdigit() or not broker.isdigit():
            raise InvalidConfigError(
                f"Invalid value {text!r} for configuration {key}: expected '*' or a list of "
                "partitionId:brokerId"
            )
    return tuple(items)


def _free_text(key: str, text: str) -> str:
    return text


@dataclass(frozen=True, slots=True)
class Synonym:
    """A broker key standing in for a topic key; integer values are multiplied by ``scale``."""

    name: str
    scale: int = 1


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One config key.

    Attributes:
        name: Kafka's key.
        type: its DescribeConfigs type.
        default: Kafka's default as text (None: no default, e.g. ``broker.id``).
        validate: parses text into a value or raises :class:`InvalidConfigError`.
        doc: the documentation DescribeConfigs v3 returns.
        synonyms: for a topic key, the broker keys it falls back to, highest precedence first.
        dynamic: for a broker key, whether ``/config/brokers/<id>|<default>`` may set it.
        sensitive: the value is never returned.
    """

    name: str
    type: ConfigType
    default: str | None
    validate: Validator
    doc: str
    synonyms: tuple[Synonym, ...] = ()
    dynamic: bool = False
    sensitive: bool = False


_WEEK_MS: Final = 604_800_000
_HOURS_MS: Final = 3_600_000
_MINUTES_MS: Final = 60_000


def _defs(*items: ConfigDef) -> Mapping[str, ConfigDef]:
    return MappingProxyType({item.name: item for item in items})


LEADER_THROTTLED_REPLICAS: Final = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS: Final = "follower.replication.throttled.replicas"
LEADER_THROTTLED_RATE: Final = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE: Final = "follower.replication.throttled.rate"
ALTER_LOG_DIRS_RATE: Final = "replica.alter.log.dirs.io.max.bytes.per.second"
ALTER_LOG_DIRS_RATE_KIP: Final = "intra.broker.throttled.rate"
ALTER_LOG_DIRS_THREADS: Final = "num.replica.alter.log.dirs.threads"

#: The topic-level configs (``/config/topics/<t>``).
TOPIC_CONFIGS: Final[Mapping[str, ConfigDef]] = _defs(
    ConfigDef("cleanup.policy", ConfigType.LIST, CLEANUP_DELETE,
              _list_of(CLEANUP_DELETE, CLEANUP_COMPACT),
              "delete: remove old segments by retention; compact: keep the latest value per key.",
              (Synonym("log.cleanup.policy"),)),
    ConfigDef("retention.ms", ConfigType.LONG, str(_WEEK_MS), _long(-1),
              "Delete segments whose newest record is older than this (-1: keep forever).",
              (Synonym("log.retention.ms"), Synonym("log.retention.minutes", _MINUTES_MS),
               Synonym("log.retention.hours", _HOURS_MS))),
    ConfigDef("retention.bytes", ConfigType.LONG, "-1", _long(),
              "Delete the oldest segments while a partition is larger (-1: no limit).",
              (Synonym("log.retention.bytes"),)),
    ConfigDef("segment.bytes", ConfigType.INT, "1073741824", _long(14, INT_MAX),
              "Roll the active segment at this size.", (Synonym("log.segment.bytes"),)),
    ConfigDef("segment.ms", ConfigType.LONG, str(_WEEK_MS), _long(1),
              "Roll a non-empty active segment this old.",
              (Synonym("log.roll.ms"), Synonym("log.roll.hours", _HOURS_MS))),
    ConfigDef("min.insync.replicas", ConfigType.INT, "1", _long(1, INT_MAX),
              "ISR members an acks=all produce needs.", (Synonym("min.insync.replicas"),)),
    ConfigDef("max.message.bytes", ConfigType.INT, "1048588", _long(0, INT_MAX),
              "Largest record batch accepted from producers.", (Synonym("message.max.bytes"),)),
    ConfigDef("unclean.leader.election.enable", ConfigType.BOOLEAN, "false", _boolean,
              "Elect a replica outside the ISR when no ISR member is alive (may lose data).",
              (Synonym("unclean.leader.election.enable"),)),
    ConfigDef("message.timestamp.type", ConfigType.STRING, CREATE_TIME,
              _one_of(CREATE_TIME, LOG_APPEND_TIME),
              "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's.",
              (Synonym("log.message.timestamp.type"),)),
    ConfigDef("min.cleanable.dirty.ratio", ConfigType.DOUBLE, "0.5", _double(0.0, 1.0),
              "Compact a log once this share of it lies beyond the cleaner point.",
              (Synonym("log.cleaner.min.cleanable.ratio"),)),
    ConfigDef("delete.retention.ms", ConfigType.LONG, "86400000", _long(0),
              "How long a compacted log keeps tombstones.",
              (Synonym("log.cleaner.delete.retention.ms"),)),
    ConfigDef(LEADER_THROTTLED_REPLICAS, ConfigType.LIST, "", _throttled_replicas,
              "Replicas whose leader side is throttled: partitionId:brokerId,... or *."),
    ConfigDef(FOLLOWER_THROTTLED_REPLICAS, ConfigType.LIST, "", _throttled_replicas,
              "Replicas whose follower side is throttled: partitionId:brokerId,... or *."),
)


def _static(name: str, kind: ConfigType, default: str | None, doc: str) -> ConfigDef:
    return ConfigDef(name, kind, default, _free_text, doc)


def _dynamic(name: str, kind: ConfigType, default: str | None, validate: Validator,
             doc: str) -> ConfigDef:
    return ConfigDef(name, kind, default, validate, doc, dynamic=True)


#: The broker-level configs: the dynamic ones (alterable in ``/config/brokers/<id>`` or
#: ``<default>``, live without a restart) and the static ones DescribeConfigs reports read-only.
BROKER_CONFIGS: Final[Mapping[str, ConfigDef]] = _defs(
    _dynamic("log.cleanup.policy", ConfigType.LIST, CLEANUP_DELETE,
             _list_of(CLEANUP_DELETE, CLEANUP_COMPACT), "Default cleanup.policy of topics."),
    _dynamic("log.retention.ms", ConfigType.LONG, None, _long(-1),
             "Default retention.ms of topics (overrides the minutes and hours keys)."),
    _dynamic("log.retention.minutes", ConfigType.INT, None, _long(-1, INT_MAX),
             "Default retention of topics in minutes."),
    _dynamic("log.retention.hours", ConfigType.INT, "168", _long(-1, INT_MAX),
             "Default retention of topics in hours."),
    _dynamic("log.retention.bytes", ConfigType.LONG, "-1", _long(), "Default retention.bytes."),
    _dynamic("log.segment.bytes", ConfigType.INT, "1073741824", _long(14, INT_MAX),
             "Default segment.bytes of topics."),
    _dynamic("log.roll.ms", ConfigType.LONG, None, _long(1), "Default segment.ms of topics."),
    _dynamic("log.roll.hours", ConfigType.INT, "168", _long(1, INT_MAX),
             "Default segment.ms of topics, in hours."),
    _dynamic("min.insync.replicas", ConfigType.INT, "1", _long(1, INT_MAX),
             "Default min.insync.replicas of topics."),
    _dynamic("message.max.bytes", ConfigType.INT, "1048588", _long(0, INT_MAX),
             "Default max.message.bytes of topics."),
    _dynamic("unclean.leader.election.enable", ConfigType.BOOLEAN, "false", _boolean,
             "Default unclean.leader.election.enable of topics."),
    _dynamic("log.message.timestamp.type", ConfigType.STRING, CREATE_TIME,
             _one_of(CREATE_TIME, LOG_APPEND_TIME), "Default message.timestamp.type of topics."),
    _dynamic("log.cleaner.min.cleanable.ratio", ConfigType.DOUBLE, "0.5", _double(0.0, 1.0),
             "Default min.cleanable.dirty.ratio of topics."),
    _dynamic("log.cleaner.delete.retention.ms", ConfigType.LONG, "86400000", _long(0),
             "Default delete.retention.ms of topics."),
    _dynamic(LEADER_THROTTLED_RATE, ConfigType.LONG, str(LONG_MAX), _long(0),
             "Bytes per second a leader sends to throttled followers (KIP-73)."),
    _dynamic(FOLLOWER_THROTTLED_RATE, ConfigType.LONG, str(LONG_MAX), _long(0),
             "Bytes per second a follower fetches for throttled replicas (KIP-73)."),
    _dynamic(ALTER_LOG_DIRS_RATE, ConfigType.LONG, str(LONG_MAX), _long(1),
             "Bytes per second all log-dir movers share (KIP-113)."),
    _dynamic(ALTER_LOG_DIRS_RATE_KIP, ConfigType.LONG, str(LONG_MAX), _long(1),
             "KIP-113's name for replica.alter.log.dirs.io.max.bytes.per.second."),
    _dynamic(ALTER_LOG_DIRS_THREADS, ConfigType.INT, None, _long(1, 1024),
             "Replicas moved between log dirs at once (default: one per log dir)."),
    _static("broker.id", ConfigType.INT, None, "This broker's id."),
    _static("listeners", ConfigType.STRING, None, "The listeners (PLAINTEXT://host:port)."),
    _static("advertised.listeners", ConfigType.STRING, None,
            "The listeners registered and given to clients (default: listeners)."),
    _static("advertised.host.name", ConfigType.STRING, None,
            "The host given to clients when advertised.listeners is not set."),
    _static("log.dirs", ConfigType.STRING, None, "The log dirs (JBOD)."),
    _static("zookeeper.connect", ConfigType.STRING, None, "ZooKeeper's connect string."),
    _static("zookeeper.session.timeout.ms", ConfigType.INT, "18000", "ZooKeeper session timeout."),
    _static("zookeeper.connection.timeout.ms", ConfigType.INT, None,
            "How long to wait for the first ZooKeeper connection (default: the session timeout)."),
    _static("default.replication.factor", ConfigType.INT, "1", "Replication factor of new topics."),
    _static("num.partitions", ConfigType.INT, "1", "Partitions of auto-created topics."),
    _static("log.index.interval.bytes", ConfigType.INT, "4096", "Bytes between index entries."),
    _static("broker.rack", ConfigType.STRING, None, "This broker's rack."),
    _static("socket.request.max.bytes", ConfigType.INT, "104857600", "Largest request."),
    _static("queued.max.request.bytes", ConfigType.LONG, "-1",
            "Memory all requests being received or handled share (-1: unbounded)."),
    _static("connections.max.idle.ms", ConfigType.LONG, "600000",
            "A connection receiving nothing for this long is closed."),
    _static("socket.request.read.timeout.ms", ConfigType.LONG, "30000",
            "A request must arrive whole within this time of its first byte."),
    _static("max.connections", ConfigType.INT, str(2**31 - 1), "Connections the broker accepts."),
    _static("max.connections.per.ip", ConfigType.INT, str(2**31 - 1),
            "Connections the broker accepts from one IP address."),
    _static("message.timestamp.difference.max.ms", ConfigType.LONG, str(LONG_MAX),
            "Largest distance between a CreateTime timestamp and the broker's clock."),
    _static("replica.lag.time.max.ms", ConfigType.LONG, "30000",
            "A follower not caught up for this long leaves the ISR."),
    _static("replica.fetch.backoff.ms", ConfigType.INT, "1000", "Follower backoff after errors."),
    _static("auto.create.topics.enable", ConfigType.BOOLEAN, "true",
            "Create a topic when a client asks Metadata for it."),
    _static("broker.replica.placer", ConfigType.STRING, "rack-aware", "KIP-879's replica placer."),
    _static("replica.truncation.policy", ConfigType.STRING, "leader_epoch",
            "How a follower truncates (KIP-101/279 leader epochs)."),
)

#: Sanity: every topic synonym is a broker key (the describe path relies on it).
assert all(s.name in BROKER_CONFIGS for d in TOPIC_CONFIGS.values() for s in d.synonyms)


# --- znodes -----------------------------------------------------------------------------------


def entity_path(resource: ResourceType, name: str) -> str:
    """``topics/<t>`` or ``brokers/<id>|<default>`` (the notification's ``entity_path``)."""
    kind = "topics" if resource is ResourceType.TOPIC else "brokers"
    return f"{kind}/{name}"


def config_znode(resource: ResourceType, name: str) -> str:
    """The entity's config znode: ``/config/topics/<t>`` or ``/config/brokers/<id>``."""
    return f"{CONFIG_ROOT}/{entity_path(resource, name)}"


def encode_entity(config: Mapping[str, str]) -> bytes:
    """Kafka's JSON for an entity's config znode."""
    return json.dumps({"version": 1, "config": dict(sorted(config.items()))}).encode()


def decode_entity(data: bytes | None) -> dict[str, str]:
    """The ``config`` map of an entity's znode (empty for a missing or empty node).

    Raises:
        InvalidConfigError: not JSON or no ``config`` object.
    """
    if not data:
        return {}
    try:
        value = json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InvalidConfigError(f"config node is not JSON: {error}") from None
    config = value.get("config", {}) if isinstance(value, dict) else None
    if not isinstance(config, dict):
        raise InvalidConfigError("config node has no 'config' object")
    return {str(key): str(item) for key, item in config.items()}


def encode_change(resource: ResourceType, name: str) -> bytes:
    """A v2 change notification for ``/config/changes/config_change_<seq>``."""
    return json.dumps({"version": 2, "entity_path": entity_path(resource, name)}).encode()


def decode_change(data: bytes) -> tuple[str, str]:
    """``(entity type, entity name)`` of a v1 or v2 change notification (``topics``, ``t``).

    Raises:
        InvalidConfigError: not a notification Kafka writes.
    """
    try:
        value = json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InvalidConfigError(f"config change is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise InvalidConfigError("config change is not a JSON object")
    if value.get("version") == 2 and isinstance(value.get("entity_path"), str):
        kind, slash, name = value["entity_path"].partition("/")
        if slash and name:
            return kind, name
    if value.get("version") == 1:
        kind, name = value.get("entity_type"), value.get("entity_name")
        if isinstance(kind, str) and isinstance(name, str):
            return kind, name
    raise InvalidConfigError(f"config change not understood: {value!r}")


# --- validation and alteration ----------------------------------------------------------------


def _definitions(resource: ResourceType) -> Mapping[str, ConfigDef]:
    return TOPIC_CONFIGS if resource is ResourceType.TOPIC else BROKER_CONFIGS


def validate(resource: ResourceType, config: Mapping[str, str]) -> dict[str, object]:
    """Check a complete dynamic config of a topic or broker entity; the parsed values.

    Raises:
        InvalidConfigError: an unknown key, a bad value, a broker key that is not dynamic.
    """
    definitions = _definitions(resource)
    parsed: dict[str, object] = {}
    for key, text in config.items():
        definition = definitions.get(key)
        if definition is None:
            raise InvalidConfigError(f"Unknown {_kind(resource)} config name: {key}")
        if resource is ResourceType.BROKER and not definition.dynamic:
            raise InvalidConfigError(f"Cannot update these configs dynamically: {key}")
        parsed[key] = definition.validate(key, text)
    return parsed


def _kind(resource: ResourceType) -> str:
    return "topic" if resource is ResourceType.TOPIC else "broker"


def validate_topic_creation(config: Mapping[str, str]) -> dict[str, str]:
    """CreateTopics' configs, checked; the map to store in ``/config/topics/<t>``."""
    validate(ResourceType.TOPIC, config)
    return dict(config)


def check_unique(keys: Iterable[str]) -> None:
    """Each key at most once in one resource's alteration.

    Raises:
        InvalidRequestError: a key repeated.
    """
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            raise InvalidRequestError(f"Error due to duplicate config keys: {key}")
        seen.add(key)


def alter(resource: ResourceType, new_config: Mapping[str, str | None]) -> dict[str, str]:
    """AlterConfigs: the whole new dynamic config (omitted keys revert), validated.

    Raises:
        InvalidConfigError, InvalidRequestError.
    """
    result: dict[str, str] = {}
    for key, value in new_config.items():
        if value is None:
            raise InvalidConfigError(f"Null value not supported for configuration {key}")
        result[key] = value
    validate(resource, result)
    return result


def incremental_alter(
    resource: ResourceType,
    current: Mapping[str, str],
    operations: Sequence[tuple[str, AlterOp, str | None]],
    effective: Callable[[str], str | None] | None = None,
) -> dict[str, str]:
    """IncrementalAlterConfigs (KIP-339): ``current`` with each ``(key, op, value)`` applied.

    Args:
        resource: topic or broker.
        current: the entity's dynamic config now.
        operations: SET, DELETE, APPEND, SUBTRACT; APPEND and SUBTRACT only on LIST keys.
        effective: a key's effective value when the entity does not set it (APPEND to a
            default list starts from the default, as Kafka does).

    Raises:
        InvalidConfigError: unknown key, bad value, a list operation on a non-list key.
        InvalidRequestError: a key twice, a null value for SET/APPEND/SUBTRACT.
    """
    check_unique(key for key, _, _ in operations)
    definitions = _definitions(resource)
    result = dict(current)
    for key, op, value in operations:
        definition = definitions.get(key)
        if definition is None:
            raise InvalidConfigError(f"Unknown {_kind(resource)} config name: {key}")
        if op is AlterOp.DELETE:
            result.pop(key, None)
            continue
        if value is None:
            raise InvalidRequestError(f"Null value not supported for: {key}")
        if op is AlterOp.SET:
            result[key] = value
            continue
        if definition.type is not ConfigType.LIST:
            raise InvalidConfigError(
                f"Config value append is not allowed for config key: {key}"
                if op is AlterOp.APPEND
                else f"Config value subtract is not allowed for config key: {key}"
            )
        base = result.get(key)
        if base is None:
            base = (effective(key) if effective is not None else None) or definition.default or ""
        items = split_list(base)
        if op is AlterOp.APPEND:
            items += [item for item in split_list(value) if item not in items]
        else:
            removed = set(split_list(value))
            items = [item for item in items if item not in removed]
        result[key] = ",".join(items)
    validate(resource, result)
    return result


# --- resolution -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerLayers:
    """A broker's config layers, highest precedence first after the topic's own.

    Attributes:
        dynamic: ``/config/brokers/<id>``.
        default: ``/config/brokers/<default>``.
        static: the properties the broker was started with.
    """

    dynamic: Mapping[str, str] = field(default_factory=dict)
    default: Mapping[str, str] = field(default_factory=dict)
    static: Mapping[str, str] = field(default_factory=dict)

    def lookup(self, key: str) -> tuple[str, ConfigSource] | None:
        """The broker key's value and where it came from; None if no layer sets it."""
        for layer, source in (
            (self.dynamic, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.static, ConfigSource.STATIC_BROKER_CONFIG),
        ):
            if key in layer:
                return layer[key], source
        return None

    def broker_value(self, key: str) -> str | None:
        """The effective text of a broker key (its layers, then its default)."""
        found = self.lookup(key)
        if found is not None:
            return found[0]
        definition = BROKER_CONFIGS.get(key)
        return definition.default if definition is not None else None


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    """One DescribeConfigs synonym: a name, its value and its source."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One DescribeConfigs entry."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    sensitive: bool
    type: ConfigType
    doc: str
    synonyms: tuple[ConfigSynonym, ...] = ()

    @property
    def is_default(self) -> bool:
        """DescribeConfigs v0's ``is_default``."""
        return self.source is ConfigSource.DEFAULT_CONFIG


def _scaled(text: str, scale: int) -> str:
    if scale == 1:
        return text
    try:
        number = int(text)
    except ValueError:
        return text
    return str(number * scale) if number >= 0 else str(number)


def _topic_synonyms(
    definition: ConfigDef, overrides: Mapping[str, str], layers: BrokerLayers
) -> list[ConfigSynonym]:
    """Every layer that sets ``definition``'s key, highest precedence first, then its default."""
    found: list[ConfigSynonym] = []
    if definition.name in overrides:
        found.append(
            ConfigSynonym(definition.name, overrides[definition.name], ConfigSource.TOPIC_CONFIG)
        )
    for synonym in definition.synonyms:
        for layer, source in (
            (layers.dynamic, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (layers.default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (layers.static, ConfigSource.STATIC_BROKER_CONFIG),
        ):
            if synonym.name in layer:
                found.append(ConfigSynonym(synonym.name, layer[synonym.name], source))
    default_name = definition.synonyms[0].name if definition.synonyms else definition.name
    found.append(ConfigSynonym(default_name, definition.default, ConfigSource.DEFAULT_CONFIG))
    return found


def _topic_value(definition: ConfigDef, synonym: ConfigSynonym) -> str | None:
    scale = next((s.scale for s in definition.synonyms if s.name == synonym.name), 1)
    if synonym.value is None:
        return None
    return _scaled(synonym.value, scale)


def topic_entry(
    key: str, overrides: Mapping[str, str], layers: BrokerLayers, *, with_synonyms: bool = False
) -> ConfigEntry:
    """DescribeConfigs' entry for a topic key: the effective value and its source."""
    definition = TOPIC_CONFIGS[key]
    synonyms = _topic_synonyms(definition, overrides, layers)
    winner = synonyms[0]
    return ConfigEntry(
        name=key,
        value=None if definition.sensitive else _topic_value(definition, winner),
        source=winner.source,
        read_only=False,
        sensitive=definition.sensitive,
        type=definition.type,
        doc=definition.doc,
        synonyms=tuple(synonyms) if with_synonyms else (),
    )


def describe_topic(
    overrides: Mapping[str, str],
    layers: BrokerLayers,
    keys: Iterable[str] | None = None,
    *,
    with_synonyms: bool = False,
) -> list[ConfigEntry]:
    """Every topic config (or only ``keys``; unknown keys are left out, as Kafka does)."""
    names = sorted(TOPIC_CONFIGS) if keys is None else [k for k in keys if k in TOPIC_CONFIGS]
    return [topic_entry(key, overrides, layers, with_synonyms=with_synonyms) for key in names]


def describe_broker(
    layers: BrokerLayers,
    keys: Iterable[str] | None = None,
    *,
    describing_default: bool = False,
    with_synonyms: bool = False,
) -> list[ConfigEntry]:
    """Every broker config (or only ``keys``).

    For ``<default>`` only the cluster-wide dynamic layer is reported (Kafka's behaviour);
    for a broker id every key with its effective value. Static keys are read-only.
    """
    names = sorted(BROKER_CONFIGS) if keys is None else [k for k in keys if k in BROKER_CONFIGS]
    entries: list[ConfigEntry] = []
    for key in names:
        definition = BROKER_CONFIGS[key]
        if describing_default:
            if key not in layers.default:
                continue
            synonyms = [ConfigSynonym(key, layers.default[key],
                                      ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
        else:
            synonyms = [
                ConfigSynonym(key, layer[key], source)
                for layer, source in (
                    (layers.dynamic, ConfigSource.DYNAMIC_BROKER_CONFIG),
                    (layers.default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                    (layers.static, ConfigSource.STATIC_BROKER_CONFIG),
                )
                if key in layer
            ]
            synonyms.append(ConfigSynonym(key, definition.default, ConfigSource.DEFAULT_CONFIG))
        winner = synonyms[0]
        entries.append(ConfigEntry(
            name=key,
            value=None if definition.sensitive else winner.value,
            source=winner.source,
            read_only=not definition.dynamic,
            sensitive=definition.sensitive,
            type=definition.type,
            doc=definition.doc,
            synonyms=tuple(synonyms) if with_synonyms else (),
        ))
    return entries


def effective_topic_config(overrides: Mapping[str, str], layers: BrokerLayers) -> dict[str, str]:
    """Every topic key's effective text value."""
    return {
        key: value
        for key in TOPIC_CONFIGS
        if (value := topic_entry(key, overrides, layers).value) is not None
    }


def log_config_of(overrides: Mapping[str, str], layers: BrokerLayers) -> LogConfig:
    """The typed :class:`LogConfig` of a topic; a bad stored value falls back to the next layer.

    A value in ZooKeeper that fails validation (written by hand, or by an older release)
    must not stop the broker: it is skipped, as if unset, in favour of the next layer.
    """
    values: dict[str, object] = {}
    for key, definition in TOPIC_CONFIGS.items():
        for synonym in _topic_synonyms(definition, overrides, layers):
            text = _topic_value(definition, synonym)
            if text is None:
                continue
            try:
                values[key] = definition.validate(key, text)
                break
            except InvalidConfigError:
                continue
    policy = values["cleanup.policy"]
    assert isinstance(policy, frozenset)
    return LogConfig(
        segment_bytes=_int_value(values["segment.bytes"]),
        segment_ms=_int_value(values["segment.ms"]),
        retention_ms=_int_value(values["retention.ms"]),
        retention_bytes=_int_value(values["retention.bytes"]),
        cleanup_policy=policy,
        min_cleanable_dirty_ratio=float(_float_value(values["min.cleanable.dirty.ratio"])),
        delete_retention_ms=_int_value(values["delete.retention.ms"]),
        max_message_bytes=_int_value(values["max.message.bytes"]),
        message_timestamp_type=str(values["message.timestamp.type"]),
        min_insync_replicas=_int_value(values["min.insync.replicas"]),
        unclean_leader_election_enable=bool(values["unclean.leader.election.enable"]),
    )


def _int_value(value: object) -> int:
    assert isinstance(value, int)
    return value


def _float_value(value: object) -> float:
    assert isinstance(value, (int, float))
    return float(value)


def throttled_replicas(text: str | None) -> frozenset[int] | None:
    """The broker ids a ``*.replication.throttled.replicas`` value names for one partition.

    Returns:
        None for ``*`` (every replica), else the set of ``partition:broker`` pairs encoded as
        ``partition << 32 | broker`` (see :func:`is_throttled`).
    """
    if not text:
        return frozenset()
    items = split_list(text)
    if items == ["*"]:
        return None
    pairs: set[int] = set()
    for item in items:
        partition, _, broker = item.partition(":")
        if partition.isdigit() and broker.isdigit():
            pairs.add(int(partition) << 32 | int(broker))
    return frozenset(pairs)


def is_throttled(text: str | None, partition: int, broker_id: int) -> bool:
    """Whether a throttled-replicas value covers ``partition`` on ``broker_id``."""
    pairs = throttled_replicas(text)
    return pairs is None or (partition << 32 | broker_id) in pairs


def broker_long(layers: BrokerLayers, key: str) -> int:
    """A dynamic broker key's effective integer (a bad stored value reads as the default)."""
    definition = BROKER_CONFIGS[key]
    for text in (layers.broker_value(key), definition.default):
        if text is None:
            continue
        try:
            value = definition.validate(key, text)
        except InvalidConfigError:
            continue
        assert isinstance(value, int)
        return value
    return LONG_MAX
