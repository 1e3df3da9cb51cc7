"""The ZooKeeper shell of the config core: reads, writes and watches ``/config``.

Writers (the admin handlers) store an entity's whole dynamic config in ``/config/topics/<t>``
or ``/config/brokers/<id>|<default>`` and then announce it with a persistent sequential
``/config/changes/config_change_<seq>`` holding ``{"version":2,"entity_path":...}``, as
ZooKeeper-era Kafka's ``AdminZkClient.changeConfigs`` does.

Every broker runs one :class:`ConfigStore`: it loads every topic's overrides and its broker
layers at start-up, watches ``/config/changes`` (and, for tools that write a broker's node
without a notice, the broker's own and the default node) and, on each new notice, re-reads the
named entity and applies the result: each topic's :class:`~impl.storage.LogConfig` to the
storage engine, the KIP-113 mover throttle and thread count, and the KIP-73 replication rates
and throttled-replica lists (:class:`ReplicationQuotas`). Decisions (validation, resolution
order, the formats) live in :mod:`impl.broker.configs`; this module only carries bytes.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Final

import trio

from impl.controller import admin as zk_admin
from impl.controller.coordinator import (
    BadVersionError,
    Coordinator,
    CoordinatorError,
    NodeExistsError,
    NoNodeError,
)
from impl.storage import LogManager
from impl.storage.throttle import TokenBucket

from . import configs
from .configs import BrokerLayers, ResourceType

log = logging.getLogger(__name__)

#: Notices kept under ``/config/changes`` (older ones are purged by writers). Kafka purges by
#: age (15 minutes); the port exposes no creation time, so the bound is a count.
CHANGES_KEPT: Final = 100
_WRITE_ATTEMPTS: Final = 50


async def read_entity(
    coordinator: Coordinator, resource: ResourceType, name: str, *, watch: bool = False
) -> dict[str, str]:
    """An entity's stored dynamic config (empty when it has no node).

    Raises:
        CoordinatorError, configs.InvalidConfigError (the node is not Kafka's JSON).
    """
    try:
        data, _ = await coordinator.get(configs.config_znode(resource, name), watch=watch)
    except NoNodeError:
        if watch:
            await coordinator.exists(configs.config_znode(resource, name), watch=True)
        return {}
    return configs.decode_entity(data)


async def write_entity(
    coordinator: Coordinator,
    resource: ResourceType,
    name: str,
    update: Callable[[dict[str, str]], dict[str, str]],
) -> dict[str, str]:
    """Read-modify-write an entity's config, then announce it under ``/config/changes``.

    Args:
        update: the new config from the current one (may raise to abort; nothing is written).

    Returns:
        The config written.

    Raises:
        CoordinatorError; whatever ``update`` raises.
    """
    path = configs.config_znode(resource, name)
    for _ in range(_WRITE_ATTEMPTS):
        try:
            data, stat = await coordinator.get(path)
            current, version = configs.decode_entity(data), stat.version
        except NoNodeError:
            current, version = {}, None
        new = update(dict(current))
        encoded = configs.encode_entity(new)
        try:
            if version is None:
                await zk_admin.ensure_path(coordinator, path.rsplit("/", 1)[0])
                await coordinator.create(path, encoded)
            else:
                await coordinator.set(path, encoded, version=version)
        except (NodeExistsError, BadVersionError, NoNodeError):
            continue  # a concurrent writer: read again
        await announce(coordinator, resource, name)
        return new
    raise CoordinatorError(f"could not update {path}: too many concurrent writers")


async def announce(coordinator: Coordinator, resource: ResourceType, name: str) -> None:
    """Create the change notice for an entity and purge the oldest notices beyond the bound."""
    await zk_admin.ensure_path(coordinator, configs.CHANGES_PATH)
    await coordinator.create(
        f"{configs.CHANGES_PATH}/{configs.CHANGE_PREFIX}",
        configs.encode_change(resource, name),
        sequential=True,
    )
    children = sorted(
        child for child in await coordinator.children(configs.CHANGES_PATH)
        if child.startswith(configs.CHANGE_PREFIX)
    )
    for child in children[:-CHANGES_KEPT]:
        with contextlib.suppress(NoNodeError):
            await coordinator.delete(f"{configs.CHANGES_PATH}/{child}")


async def delete_topic_config(coordinator: Coordinator, topic: str) -> None:
    """Remove ``/config/topics/<t>`` (the topic is gone) and announce it."""
    try:
        await coordinator.delete(configs.config_znode(ResourceType.TOPIC, topic))
    except NoNodeError:
        return
    await announce(coordinator, ResourceType.TOPIC, topic)


class ReplicationQuotas:
    """KIP-73's replication throttles: a leader and a follower byte rate, and the replica lists.

    A replica is throttled on the leader side when ``leader.replication.throttled.replicas``
    of its topic names ``partition:<this broker>`` (or ``*``), on the follower side likewise
    with ``follower.replication.throttled.replicas``. As in Kafka, a throttled replica that is
    in the ISR is never held back, and a rate of ``Long.MAX`` means no throttle.
    """

    def __init__(self, broker_id: int, now_ns: Callable[[], int]) -> None:
        self.broker_id = broker_id
        self._now_ns = now_ns
        self._lists: dict[str, tuple[str, str]] = {}
        self.leader = TokenBucket(configs.LONG_MAX, now_ns())
        self.follower = TokenBucket(configs.LONG_MAX, now_ns())

    def set_rates(self, leader_bytes_per_second: int, follower_bytes_per_second: int) -> None:
        """Apply new rates live (0 is treated as 1 byte per second: fully throttled)."""
        now = self._now_ns()
        self.leader.set_rate(max(1, leader_bytes_per_second), now)
        self.follower.set_rate(max(1, follower_bytes_per_second), now)

    def set_lists(self, topic: str, leader_list: str, follower_list: str) -> None:
        """A topic's throttled-replica lists (empty strings: none)."""
        if leader_list or follower_list:
            self._lists[topic] = (leader_list, follower_list)
        else:
            self._lists.pop(topic, None)

    def leader_throttled(self, topic: str, partition: int) -> bool:
        """Whether this broker, as leader, throttles what it sends for the partition."""
        lists = self._lists.get(topic)
        return lists is not None and configs.is_throttled(lists[0], partition, self.broker_id)

    def follower_throttled(self, topic: str, partition: int) -> bool:
        """Whether this broker, as follower, throttles what it fetches for the partition."""
        lists = self._lists.get(topic)
        return lists is not None and configs.is_throttled(lists[1], partition, self.broker_id)

    def leader_exceeded(self) -> bool:
        """Whether the leader's quota is used up for now."""
        return self.leader.wait_ns(self._now_ns()) > 0

    def follower_exceeded(self) -> bool:
        """Whether the follower's quota is used up for now."""
        return self.follower.wait_ns(self._now_ns()) > 0

    def record_leader(self, byte_count: int) -> None:
        """Charge bytes sent to throttled followers."""
        if byte_count > 0 and not self.leader_exceeded():
            self.leader.admit(byte_count, self._now_ns())

    def record_follower(self, byte_count: int) -> None:
        """Charge bytes fetched for throttled replicas."""
        if byte_count > 0 and not self.follower_exceeded():
            self.follower.admit(byte_count, self._now_ns())


class ConfigStore:
    """One broker's view of ``/config``, kept current through ``/config/changes``.

    Args:
        broker_id: this broker.
        static: the properties the broker was started with.
        logs: the storage engine the topic configs and the mover throttle apply to.
        quotas: the KIP-73 replication throttles to keep current.
        on_change: called after every applied change (the replica manager re-reads configs).
    """

    def __init__(
        self,
        broker_id: int,
        static: Mapping[str, str],
        logs: LogManager,
        quotas: ReplicationQuotas,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.static = dict(static)
        self.logs = logs
        self.quotas = quotas
        self.on_change = on_change
        self.dynamic: dict[str, str] = {}
        self.default: dict[str, str] = {}
        self.topics: dict[str, dict[str, str]] = {}
        self._last_change = ""
        self._applied_topics: set[str] = set()
        self._lock = trio.Lock()
        self.apply()

    @property
    def layers(self) -> BrokerLayers:
        """This broker's layers (its node, the default node, its properties)."""
        return BrokerLayers(self.dynamic, self.default, self.static)

    @property
    def watched_paths(self) -> frozenset[str]:
        """The znodes whose watch events :meth:`on_watch` handles."""
        return frozenset({
            configs.CHANGES_PATH,
            configs.config_znode(ResourceType.BROKER, str(self.broker_id)),
            configs.config_znode(ResourceType.BROKER, configs.DEFAULT_BROKER),
        })

    def topic_overrides(self, topic: str) -> dict[str, str]:
        """The topic's own configs as last read."""
        return dict(self.topics.get(topic, {}))

    async def load(self, coordinator: Coordinator) -> None:
        """Read everything (arming the watches) and apply it; at start-up and reconnection."""
        async with self._lock:
            await zk_admin.ensure_path(coordinator, configs.CHANGES_PATH)
            await zk_admin.ensure_path(coordinator, f"{configs.CONFIG_ROOT}/topics")
            await zk_admin.ensure_path(coordinator, f"{configs.CONFIG_ROOT}/brokers")
            changes = await coordinator.children(configs.CHANGES_PATH, watch=True)
            self._last_change = max(changes, default="")
            await self._read_brokers(coordinator)
            topics: dict[str, dict[str, str]] = {}
            for topic in await coordinator.children(f"{configs.CONFIG_ROOT}/topics"):
                config = await self._read_quietly(coordinator, ResourceType.TOPIC, topic)
                if config:
                    topics[topic] = config
            self.topics = topics
            self.apply()

    async def _read_quietly(
        self, coordinator: Coordinator, resource: ResourceType, name: str, watch: bool = False
    ) -> dict[str, str]:
        try:
            return await read_entity(coordinator, resource, name, watch=watch)
        except configs.InvalidConfigError as error:
            log.error("ignoring %s: %s", configs.config_znode(resource, name), error)
            return {}

    async def _read_brokers(self, coordinator: Coordinator) -> None:
        self.dynamic = await self._read_quietly(
            coordinator, ResourceType.BROKER, str(self.broker_id), watch=True)
        self.default = await self._read_quietly(
            coordinator, ResourceType.BROKER, configs.DEFAULT_BROKER, watch=True)

    async def on_watch(self, coordinator: Coordinator, path: str) -> None:
        """A watch fired on one of :attr:`watched_paths`: process what changed."""
        async with self._lock:
            if path != configs.CHANGES_PATH:
                await self._read_brokers(coordinator)
                self.apply()
                return
            changes = sorted(await coordinator.children(configs.CHANGES_PATH, watch=True))
            for change in changes:
                if change <= self._last_change or not change.startswith(configs.CHANGE_PREFIX):
                    continue
                self._last_change = change
                try:
                    data, _ = await coordinator.get(f"{configs.CHANGES_PATH}/{change}")
                    kind, name = configs.decode_change(data)
                except NoNodeError:
                    continue  # purged meanwhile; a later notice or reload covers it
                except configs.InvalidConfigError as error:
                    log.error("ignoring config change %s: %s", change, error)
                    continue
                if kind == "topics":
                    config = await self._read_quietly(coordinator, ResourceType.TOPIC, name)
                    if config:
                        self.topics[name] = config
                    else:
                        self.topics.pop(name, None)
                elif kind == "brokers" and name in (str(self.broker_id), configs.DEFAULT_BROKER):
                    await self._read_brokers(coordinator)
            self.apply()

    def apply(self) -> None:
        """Push the current configs into storage, the movers and the replication quotas."""
        layers = self.layers
        self.logs.set_default_log_config(configs.log_config_of({}, layers))
        for topic in self._applied_topics | set(self.topics):
            overrides = self.topics.get(topic)
            self.logs.set_log_config(
                topic, None if not overrides else configs.log_config_of(overrides, layers))
            overrides = overrides or {}
            self.quotas.set_lists(topic, overrides.get(configs.LEADER_THROTTLED_REPLICAS, ""),
                                  overrides.get(configs.FOLLOWER_THROTTLED_REPLICAS, ""))
        rate_key = (configs.ALTER_LOG_DIRS_RATE
                    if layers.lookup(configs.ALTER_LOG_DIRS_RATE) is not None
                    else configs.ALTER_LOG_DIRS_RATE_KIP)
        rate = configs.broker_long(layers, rate_key)
        if rate != self.logs.throttle_rate:
            log.info("log-dir move throttle: %d bytes/s", rate)
            self.logs.set_throttle_rate(rate)
        threads_text = layers.broker_value(configs.ALTER_LOG_DIRS_THREADS)
        threads = int(threads_text) if threads_text and threads_text.isdigit() else 0
        self.logs.set_mover_count(threads if threads >= 1 else len(self.logs.log_dirs))
        self.quotas.set_rates(configs.broker_long(layers, configs.LEADER_THROTTLED_RATE),
                              configs.broker_long(layers, configs.FOLLOWER_THROTTLED_RATE))
        self._applied_topics = set(self.topics)
        if self.on_change is not None:
            self.on_change()
