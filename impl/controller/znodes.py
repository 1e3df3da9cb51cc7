"""ZooKeeper paths and znode formats, as Apache Kafka's ZooKeeper mode writes them.

Why: the layout is Kafka's (``kafka.zk.ZkData``), so the JSON is Kafka's JSON; encoding and
decoding live here once, and every decoder rejects malformed data with :class:`ZnodeFormatError`
(the peer's or the operator's fault) instead of guessing.

This module is sans-IO.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__sans_io__ = True

CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
TOPIC_CONFIGS_PATH = "/config/topics"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
#: Kafka's ``LogDirEventNotificationHandler.LogDirFailureEvent``.
LOG_DIR_FAILURE_EVENT = 1

#: Persistent paths every cluster has; created (idempotently) by whoever starts first.
PERSISTENT_PATHS = (
    BROKERS_PATH,
    BROKER_IDS_PATH,
    TOPICS_PATH,
    ADMIN_PATH,
    DELETE_TOPICS_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
)

_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
TOPIC_NAME_LENGTH_MAX = 249


class ZnodeFormatError(ValueError):
    """A znode's data (or an admin request) is not in the expected format."""


def validate_topic_name(topic: str) -> None:
    """Kafka's topic name rule.

    Raises:
        ZnodeFormatError: empty, ``.``/``..``, longer than 249, or outside ``[a-zA-Z0-9._-]``.
    """
    if not topic or topic in (".", "..") or len(topic) > TOPIC_NAME_LENGTH_MAX:
        raise ZnodeFormatError(f"invalid topic name {topic!r}")
    if not set(topic) <= _TOPIC_CHARS:
        raise ZnodeFormatError(f"topic name {topic!r} has characters outside [a-zA-Z0-9._-]")


def has_collision_chars(topic: str) -> bool:
    """Whether ``topic`` holds ``.`` or ``_``, which metric names do not tell apart."""
    return "." in topic or "_" in topic


def colliding_topics(topic: str, existing: Iterable[str]) -> list[str]:
    """The existing topics ``topic`` collides with (Kafka's ``Topic.hasCollision``): another name
    equal to it once every ``.`` is read as ``_`` (``a.b`` and ``a_b`` share metric names, so
    Kafka refuses the second with InvalidTopicException).

    Returns:
        The colliding names, sorted (empty: no collision).
    """
    if not has_collision_chars(topic):
        return []
    key = topic.replace(".", "_")
    return sorted(other for other in existing
                  if other != topic and other.replace(".", "_") == key)


def broker_path(broker_id: int) -> str:
    """``/brokers/ids/<id>``."""
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    """``/brokers/topics/<t>``."""
    return f"{TOPICS_PATH}/{topic}"


def partitions_path(topic: str) -> str:
    """``/brokers/topics/<t>/partitions``."""
    return f"{TOPICS_PATH}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    """``/brokers/topics/<t>/partitions/<p>``."""
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    """``/brokers/topics/<t>/partitions/<p>/state``."""
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}/state"


def delete_topic_path(topic: str) -> str:
    """``/admin/delete_topics/<t>``."""
    return f"{DELETE_TOPICS_PATH}/{topic}"


def _loads(data: bytes, what: str) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ZnodeFormatError(f"{what}: not JSON: {data[:200]!r}") from error
    except RecursionError:  # e.g. 100,000 nested ``[``: deeper than the parser goes
        raise ZnodeFormatError(f"{what}: JSON nested too deeply") from None


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode("utf-8")


def _int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ZnodeFormatError(f"{what}: expected an integer, got {value!r}")
    return value


def _int_list(value: object, what: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise ZnodeFormatError(f"{what}: expected a list of integers, got {value!r}")
    return tuple(_int(item, what) for item in value)


def _dict(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ZnodeFormatError(f"{what}: expected an object, got {value!r}")
    return value


# --- /controller and /controller_epoch -------------------------------------------------------


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    """``/controller`` data: ``{"version":1,"brokerid":id,"timestamp":"ms"}``."""
    return _dumps({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes) -> int:
    """The controller's broker id from ``/controller`` data (also accepts a bare integer).

    Raises:
        ZnodeFormatError: malformed data.
    """
    value = _loads(data, CONTROLLER_PATH)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return _int(_dict(value, CONTROLLER_PATH).get("brokerid"), "/controller brokerid")


def encode_controller_epoch(epoch: int) -> bytes:
    """``/controller_epoch`` data: the epoch as ASCII digits."""
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    """Parse ``/controller_epoch``.

    Raises:
        ZnodeFormatError: not a non-negative integer.
    """
    text = data.decode("ascii", "replace").strip()
    if not text.isdigit():
        raise ZnodeFormatError(f"/controller_epoch is not an integer: {data[:50]!r}")
    return int(text)


# --- /brokers/ids/<id> ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListenerEndpoint:
    """One advertised listener of a broker: ``NAME://host:port`` and the name's protocol."""

    listener: str
    security_protocol: str
    host: str
    port: int

    @property
    def text(self) -> str:
        """``NAME://host:port`` as in the registration's ``endpoints``."""
        return f"{self.listener}://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A live broker as registered in ``/brokers/ids/<id>``; ``epoch`` is the znode's czxid.

    ``host``/``port`` is the first advertised listener; ``endpoints`` every listener (a
    registration in the old single-endpoint form has one PLAINTEXT endpoint).

    ``clean_since_epoch`` is the field ``clean_since_broker_epoch`` (spec/controller.md
    "Unclean shutdowns"; KIP-966's PreviousBrokerEpoch extended to a run of clean restarts):
    the broker epoch of the incarnation since which every shutdown was clean, -1 after an
    unclean shutdown, ``None`` when the broker does not report it (a registration by Kafka).
    """

    broker_id: int
    host: str
    port: int
    rack: str | None
    epoch: int
    endpoints: tuple[ListenerEndpoint, ...] = ()
    clean_since_epoch: int | None = None

    def endpoint(self, listener: str) -> ListenerEndpoint | None:
        """The endpoint on ``listener``, or None when the broker does not have it."""
        for endpoint in self.endpoints:
            if endpoint.listener == listener:
                return endpoint
        return None


def encode_broker(host: str, port: int, rack: str | None, timestamp_ms: int,
                  endpoints: Sequence[ListenerEndpoint] = (), *,
                  clean_since_broker_epoch: int | None = None) -> bytes:
    """Kafka's version-5 broker registration JSON.

    ``endpoints`` are every advertised listener (default: one PLAINTEXT listener at
    ``host:port``); the legacy ``host``/``port`` fields name the PLAINTEXT listener, or are
    null/-1 when there is none, as Kafka writes them. ``clean_since_broker_epoch`` (this
    project's field, after KIP-966's PreviousBrokerEpoch: the epoch of the incarnation since
    which every shutdown was clean, -1 after an unclean one) is written when given.
    """
    listed = tuple(endpoints) or (ListenerEndpoint("PLAINTEXT", "PLAINTEXT", host, port),)
    plaintext = next((e for e in listed if e.security_protocol == "PLAINTEXT"), None)
    value: dict[str, object] = {
        "version": 5,
        "host": plaintext.host if plaintext is not None else None,
        "port": plaintext.port if plaintext is not None else -1,
        "jmx_port": -1,
        "timestamp": str(timestamp_ms),
        "endpoints": [e.text for e in listed],
        "listener_security_protocol_map": {e.listener: e.security_protocol for e in listed},
        "features": {},
        "rack": rack,
    }
    if clean_since_broker_epoch is not None:
        value["clean_since_broker_epoch"] = clean_since_broker_epoch
    return _dumps(value)


def _endpoint(text: object, protocols: Mapping[str, object], where: str) -> ListenerEndpoint:
    """Parse one ``NAME://host:port`` of ``endpoints``."""
    if not isinstance(text, str) or "://" not in text:
        raise ZnodeFormatError(f"{where}: bad endpoint {text!r}")
    name, _, address = text.partition("://")
    host, _, port_text = address.rpartition(":")
    if not name or not port_text.isdigit() or not 0 <= int(port_text) < 65536:
        raise ZnodeFormatError(f"{where}: bad endpoint {text!r}")
    protocol = protocols.get(name, name)
    if not isinstance(protocol, str):
        raise ZnodeFormatError(f"{where}: bad security protocol of {name!r}")
    return ListenerEndpoint(name, protocol, host.strip("[]"), int(port_text))


def decode_broker(broker_id: int, data: bytes, epoch: int) -> BrokerRegistration:
    """Parse ``/brokers/ids/<id>`` (versions 1 to 5: ``host``/``port`` only, or
    ``endpoints`` with an optional ``listener_security_protocol_map``).

    Raises:
        ZnodeFormatError: malformed data.
    """
    where = broker_path(broker_id)
    value = _dict(_loads(data, where), where)
    raw_map = value.get("listener_security_protocol_map") or {}
    if not isinstance(raw_map, dict):
        raise ZnodeFormatError(f"{where}: listener_security_protocol_map must be an object")
    raw_endpoints = value.get("endpoints") or []
    if not isinstance(raw_endpoints, list):
        raise ZnodeFormatError(f"{where}: endpoints must be a list")
    endpoints = tuple(_endpoint(text, raw_map, where) for text in raw_endpoints)
    if not endpoints:
        host = value.get("host")
        if not isinstance(host, str):
            raise ZnodeFormatError(f"{where}: no host")
        endpoints = (ListenerEndpoint("PLAINTEXT", "PLAINTEXT", host,
                                      _int(value.get("port"), "broker port")),)
    rack = value.get("rack")
    if rack is not None and not isinstance(rack, str):
        raise ZnodeFormatError(f"{where}: rack must be a string")
    previous = value.get("clean_since_broker_epoch")
    if previous is not None:
        previous = _int(previous, f"{where}: clean_since_broker_epoch")
        if previous < -1:
            raise ZnodeFormatError(f"{where}: clean_since_broker_epoch {previous} below -1")
    first = endpoints[0]
    return BrokerRegistration(broker_id, first.host, first.port, rack, epoch, endpoints,
                              previous)


# --- /brokers/topics/<t> ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """``/brokers/topics/<t>``: replicas per partition, and a reassignment's adding/removing."""

    partitions: Mapping[int, tuple[int, ...]]
    adding_replicas: Mapping[int, tuple[int, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    removing_replicas: Mapping[int, tuple[int, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )


def validate_replicas(replicas: Sequence[int], what: str) -> None:
    """A replica list is non-empty, of non-negative ids, without duplicates.

    Raises:
        ZnodeFormatError: otherwise.
    """
    if not replicas:
        raise ZnodeFormatError(f"{what}: empty replica list")
    if any(replica < 0 for replica in replicas):
        raise ZnodeFormatError(f"{what}: negative broker id in {list(replicas)}")
    if len(set(replicas)) != len(replicas):
        raise ZnodeFormatError(f"{what}: duplicate broker in {list(replicas)}")


def encode_topic(assignment: TopicAssignment) -> bytes:
    """Kafka's version-2 topic JSON."""
    def keyed(mapping: Mapping[int, tuple[int, ...]]) -> dict[str, list[int]]:
        return {str(p): list(r) for p, r in sorted(mapping.items())}

    return _dumps(
        {
            "version": 2,
            "partitions": keyed(assignment.partitions),
            "adding_replicas": keyed(assignment.adding_replicas),
            "removing_replicas": keyed(assignment.removing_replicas),
        }
    )


def _partition_map(value: object, what: str) -> Mapping[int, tuple[int, ...]]:
    if value is None:
        return MappingProxyType({})
    result: dict[int, tuple[int, ...]] = {}
    for key, replicas in _dict(value, what).items():
        if not key.isdigit():
            raise ZnodeFormatError(f"{what}: partition id {key!r} is not a number")
        result[int(key)] = _int_list(replicas, what)
    return MappingProxyType(result)


def decode_topic(topic: str, data: bytes) -> TopicAssignment:
    """Parse ``/brokers/topics/<t>``.

    Raises:
        ZnodeFormatError: malformed data, partitions not numbered 0..n-1, or bad replica lists.
    """
    what = topic_path(topic)
    value = _dict(_loads(data, what), what)
    partitions = _partition_map(value.get("partitions"), what)
    if sorted(partitions) != list(range(len(partitions))):
        raise ZnodeFormatError(f"{what}: partitions are not numbered 0..n-1: {sorted(partitions)}")
    for partition, replicas in partitions.items():
        validate_replicas(replicas, f"{what} partition {partition}")
    return TopicAssignment(
        partitions,
        _partition_map(value.get("adding_replicas"), what),
        _partition_map(value.get("removing_replicas"), what),
    )


# --- /brokers/topics/<t>/partitions/<p>/state -------------------------------------------------


@dataclass(frozen=True, slots=True)
class LeaderIsr:
    """A partition's state znode plus its zkVersion (the partition epoch).

    ``mzxid`` is the zxid of the znode's last write when the state was read (-1 for a state the
    controller built): a broker whose registration (czxid, its broker epoch) is newer restarted
    after that write.

    ``isr_broker_epochs`` (KIP-903's ISR with broker epochs, field ``isr_broker_epochs``) names,
    for each ISR member in order, the incarnation (broker epoch) the state's writer vouches for:
    the registration a controller read, or the incarnation whose fetches a leader saw in sync;
    -1 for a member the writer knows no incarnation of. None for a state without the field
    (written by a broker that does not record them): then ``mzxid`` is all a failover has.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int
    mzxid: int = field(default=-1, compare=False)
    isr_broker_epochs: tuple[int, ...] | None = field(default=None, compare=False)

    def __init__(  # noqa: PLR0917 (the generated constructor's signature)
        self, leader: int, leader_epoch: int, isr: tuple[int, ...], controller_epoch: int,
        zk_version: int, mzxid: int = -1, isr_broker_epochs: tuple[int, ...] | None = None
    ) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "leader", leader)
        object.__setattr__(self, "leader_epoch", leader_epoch)
        object.__setattr__(self, "isr", isr)
        object.__setattr__(self, "controller_epoch", controller_epoch)
        object.__setattr__(self, "zk_version", zk_version)
        object.__setattr__(self, "mzxid", mzxid)
        object.__setattr__(self, "isr_broker_epochs", isr_broker_epochs)

    def vouched_epoch(self, broker_id: int) -> int | None:
        """The incarnation of ISR member ``broker_id`` this state vouches for (None: the state
        records none for it)."""
        epochs = self.isr_broker_epochs
        if epochs is None or broker_id not in self.isr:
            return None
        epoch = epochs[self.isr.index(broker_id)]
        return epoch if epoch >= 0 else None


def encode_partition_state(leader: int, leader_epoch: int, isr: Sequence[int],
                           controller_epoch: int,
                           isr_broker_epochs: Sequence[int] | None = None) -> bytes:
    """Kafka's partition state JSON (keys sorted, no spaces: the same bytes as ``_dumps``),
    plus ``isr_broker_epochs`` when given (one per ISR member, see :class:`LeaderIsr`).

    Formatted directly: a failover writes thousands of these at once.
    """
    isr_text = ",".join(str(int(replica)) for replica in isr)
    epochs_text = ""
    if isr_broker_epochs is not None:
        assert len(isr_broker_epochs) == len(isr), (isr, isr_broker_epochs)
        epochs_text = ',"isr_broker_epochs":[' + ",".join(
            str(int(epoch)) for epoch in isr_broker_epochs) + "]"
    return (
        f'{{"controller_epoch":{int(controller_epoch)},"isr":[{isr_text}]{epochs_text},'
        f'"leader":{int(leader)},"leader_epoch":{int(leader_epoch)},"version":1}}'
    ).encode("ascii")


def decode_partition_state(topic: str, partition: int, data: bytes, zk_version: int,
                           mzxid: int = -1) -> LeaderIsr:
    """Parse a partition state znode (``mzxid``: its stat's, see :class:`LeaderIsr`).

    Raises:
        ZnodeFormatError: malformed data (an ``isr_broker_epochs`` not one epoch of at least
            -1 per ISR member included).
    """
    what = partition_state_path(topic, partition)
    value = _dict(_loads(data, what), what)
    isr = _int_list(value.get("isr"), f"{what} isr")
    epochs: tuple[int, ...] | None = None
    if value.get("isr_broker_epochs") is not None:
        epochs = _int_list(value["isr_broker_epochs"], f"{what} isr_broker_epochs")
        if len(epochs) != len(isr) or any(epoch < -1 for epoch in epochs):
            raise ZnodeFormatError(
                f"{what}: isr_broker_epochs {list(epochs)} must name one epoch (at least -1) "
                f"per ISR member {list(isr)}")
    return LeaderIsr(
        _int(value.get("leader"), f"{what} leader"),
        _int(value.get("leader_epoch"), f"{what} leader_epoch"),
        isr,
        _int(value.get("controller_epoch"), f"{what} controller_epoch"),
        zk_version,
        mzxid,
        epochs,
    )


def topic_config_path(topic: str) -> str:
    """``/config/topics/<t>``: the topic's configs (written at creation, removed with it)."""
    return f"{TOPIC_CONFIGS_PATH}/{topic}"


# --- /admin/preferred_replica_election ---------------------------------------------------------


def encode_preferred_election(partitions: Sequence[tuple[str, int]]) -> bytes:
    """Kafka's ``/admin/preferred_replica_election`` JSON."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": partition} for topic, partition in sorted(partitions)
    ]}).encode()


def decode_preferred_election(data: bytes) -> tuple[tuple[str, int], ...]:
    """The partitions of ``/admin/preferred_replica_election``.

    Raises:
        ZnodeFormatError: not Kafka's JSON.
    """
    what = PREFERRED_REPLICA_ELECTION_PATH
    try:
        value = json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ZnodeFormatError(f"{what}: not JSON: {error}") from None
    items = value.get("partitions") if isinstance(value, dict) else None
    if not isinstance(items, list):
        raise ZnodeFormatError(f"{what}: no 'partitions' list")
    found: list[tuple[str, int]] = []
    for item in items:
        if (not isinstance(item, dict) or not isinstance(item.get("topic"), str)
                or not isinstance(item.get("partition"), int)
                or isinstance(item.get("partition"), bool)):
            raise ZnodeFormatError(f"{what}: bad entry {item!r}")
        found.append((item["topic"], item["partition"]))
    return tuple(found)


# --- /admin/reassign_partitions ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReassignmentTarget:
    """One partition's target replicas (RAR) and optional log dir per replica (``"any"``=none)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    log_dirs: tuple[str, ...] | None = None

    def log_dir_of(self, broker_id: int) -> str | None:
        """The requested log dir on ``broker_id``, or ``None`` for none/``any``."""
        if self.log_dirs is None or broker_id not in self.replicas:
            return None
        log_dir = self.log_dirs[self.replicas.index(broker_id)]
        return None if log_dir == "any" else log_dir


def encode_reassignment(targets: Sequence[ReassignmentTarget]) -> bytes:
    """Kafka's ``/admin/reassign_partitions`` JSON (``log_dirs`` as in KIP-113)."""
    partitions: list[dict[str, object]] = []
    for target in targets:
        entry: dict[str, object] = {
            "topic": target.topic,
            "partition": target.partition,
            "replicas": list(target.replicas),
        }
        if target.log_dirs is not None:
            entry["log_dirs"] = list(target.log_dirs)
        partitions.append(entry)
    return _dumps({"version": 1, "partitions": partitions})


def decode_reassignment(data: bytes) -> tuple[ReassignmentTarget, ...]:
    """Parse ``/admin/reassign_partitions``.

    Raises:
        ZnodeFormatError: malformed JSON, duplicate partitions, bad replica lists, or
            ``log_dirs`` of another length than ``replicas``.
    """
    what = REASSIGN_PARTITIONS_PATH
    value = _dict(_loads(data, what), what)
    entries = value.get("partitions")
    if not isinstance(entries, list):
        raise ZnodeFormatError(f"{what}: 'partitions' must be a list")
    targets: list[ReassignmentTarget] = []
    seen: set[tuple[str, int]] = set()
    for raw in entries:
        entry = _dict(raw, what)
        topic = entry.get("topic")
        if not isinstance(topic, str):
            raise ZnodeFormatError(f"{what}: entry without a topic: {entry!r}")
        validate_topic_name(topic)
        partition = _int(entry.get("partition"), f"{what} partition")
        replicas = _int_list(entry.get("replicas"), f"{what} replicas")
        validate_replicas(replicas, f"{what} {topic}-{partition}")
        if (topic, partition) in seen:
            raise ZnodeFormatError(f"{what}: {topic}-{partition} listed twice")
        seen.add((topic, partition))
        log_dirs_raw = entry.get("log_dirs")
        log_dirs: tuple[str, ...] | None = None
        if log_dirs_raw is not None:
            if not isinstance(log_dirs_raw, list) or not all(
                isinstance(item, str) and item for item in log_dirs_raw
            ):
                raise ZnodeFormatError(f"{what}: log_dirs must be a list of non-empty strings")
            if len(log_dirs_raw) != len(replicas):
                raise ZnodeFormatError(
                    f"{what}: {topic}-{partition} has {len(log_dirs_raw)} log_dirs "
                    f"for {len(replicas)} replicas"
                )
            log_dirs = tuple(log_dirs_raw)
        targets.append(ReassignmentTarget(topic, partition, replicas, log_dirs))
    return tuple(targets)


# --- notifications ----------------------------------------------------------------------------


def encode_isr_change(partitions: Sequence[tuple[str, int]]) -> bytes:
    """``/isr_change_notification/isr_change_<seq>`` data."""
    return _dumps(
        {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}
    )


def decode_isr_change(data: bytes) -> tuple[tuple[str, int], ...]:
    """Parse an ISR change notification.

    Raises:
        ZnodeFormatError: malformed data.
    """
    value = _dict(_loads(data, ISR_CHANGE_NOTIFICATION_PATH), ISR_CHANGE_NOTIFICATION_PATH)
    entries = value.get("partitions")
    if not isinstance(entries, list):
        raise ZnodeFormatError(f"{ISR_CHANGE_NOTIFICATION_PATH}: 'partitions' must be a list")
    result: list[tuple[str, int]] = []
    for raw in entries:
        entry = _dict(raw, ISR_CHANGE_NOTIFICATION_PATH)
        topic = entry.get("topic")
        if not isinstance(topic, str):
            raise ZnodeFormatError(f"{ISR_CHANGE_NOTIFICATION_PATH}: entry without a topic")
        result.append((topic, _int(entry.get("partition"), "isr change partition")))
    return tuple(result)


def encode_log_dir_event(broker_id: int) -> bytes:
    """``/log_dir_event_notification/log_dir_event_<seq>`` data."""
    return _dumps({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes) -> int:
    """The broker id of a log dir failure notification.

    Raises:
        ZnodeFormatError: malformed data or another event type.
    """
    what = LOG_DIR_EVENT_NOTIFICATION_PATH
    value = _dict(_loads(data, what), what)
    if value.get("event", LOG_DIR_FAILURE_EVENT) != LOG_DIR_FAILURE_EVENT:
        raise ZnodeFormatError(f"{what}: unknown event {value.get('event')!r}")
    return _int(value.get("broker"), f"{what} broker")
