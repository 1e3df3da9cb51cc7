"""One broker: storage, the request server, ZooKeeper registration and the controller candidate.

Start-up order: open the log dirs (recovery), bind the listeners (so the controller can reach
this broker), register ``/brokers/ids/<id>`` (its czxid is the broker epoch that fences requests
meant for an older incarnation), then run the controller candidate, which — once elected — sends
LeaderAndIsr, StopReplica and UpdateMetadata to every broker, this one included, over the wire.

Stop (SIGTERM/SIGINT in ``logproof broker``, or :meth:`Broker.request_stop`): the server stops
accepting, every connection finishes the requests it has received and flushes, the controller
candidate and the ZooKeeper sessions end (the registration vanishes), and the log manager writes
its checkpoints.
"""

from __future__ import annotations

import functools
import logging
import random
import socket
from collections.abc import Callable
from typing import Any, Final

import trio

from impl.controller import ControllerService
from impl.controller import admin as zk_admin
from impl.controller._kazoo import KazooCoordinator
from impl.controller.coordinator import (
    Coordinator,
    CoordinatorClosedError,
    CoordinatorError,
    NoNodeError,
    SessionState,
    WatchEvent,
)
from impl.controller.placement import PlacementError, ReplicaPlacer, load_replica_placer
from impl.controller.requests import (
    ControllerRequest,
    ControllerResponse,
    LeaderAndIsrRequest,
    UpdateMetadataRequest,
)
from impl.controller.znodes import (
    CONTROLLER_PATH,
    ListenerEndpoint,
    ZnodeFormatError,
    decode_controller,
    topic_path,
)
from impl.ports import SeededRng
from impl.security.acl_apis import AclApis
from impl.security.acl_store import AclStore
from impl.security.authorizer import CLUSTER, AclOperation, Authorizer
from impl.security.client import AuthenticationError, open_stream
from impl.security.config import ClientSecurity, inter_broker_client
from impl.security.enforcement import RequestAuthorizer
from impl.security.listener import ServerSecurity
from impl.security.sasl import (
    CredentialError,
    ScramCredential,
    decode_user_config,
    user_config_path,
)
from impl.security.scram_apis import ScramApis
from impl.storage import Disk, LogDirDescription, LogManager, StorageConfig, TopicPartition
from impl.storage.cleaner_runner import CleanerConfig, LogCleanerRunner
from impl.storage.runtime import run_log_manager
from impl.trace import NullTraceSink, TraceSink

from . import api_versions, configs
from ._handlers import (
    YIELD_EVERY_ENTRIES,
    HandlerContext,
    RequestHandlers,
    metadata_brokers,
)
from ._handlers_admin import BackendError
from .config import WILDCARD_HOSTS, BrokerConfig, Listener, advertise, static_layer
from .config_store import ConfigStore, ReplicationQuotas, read_entity, write_entity
from .inter_broker import InterBrokerClient
from .metadata_cache import BrokerEndpoint, MetadataCache, PartitionMetadata
from .metrics import BrokerMetrics, BrokerStateView, observed
from .node import WriteIsr
from .producer_ids import ProducerIdAllocator
from .replica_fetcher import IO_TIMEOUT_SECONDS, ReplicaFetcher
from .replica_manager import ReplicaManager
from .server import ConnectionLimits, RawHandler, Response, Server

log = logging.getLogger(__name__)

NONE = 0
TOPIC_ALREADY_EXISTS = 36
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUEST = 42
UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_SERVER_ERROR = -1
NOT_CONTROLLER = 41
#: what a request that needs ZooKeeper is told before the broker's session is established
NOT_CONNECTED_YET = "the broker is not connected to ZooKeeper yet"



def storage_config(config: BrokerConfig) -> StorageConfig:
    """The storage engine's settings from the broker's."""
    return StorageConfig(
        log_dirs=config.log_dirs,
        broker_id=config.broker_id,
        segment_bytes=config.segment_bytes,
        roll_ms=config.segment_ms,
        retention_ms=config.retention_ms,
        retention_bytes=config.retention_bytes,
        retention_check_interval_ms=config.retention_check_interval_ms,
        message_max_bytes=config.message_max_bytes,
        index_interval_bytes=config.index_interval_bytes,
        checkpoint_interval_ms=config.checkpoint_interval_ms,
        intra_broker_throttled_rate=config.intra_broker_throttled_rate_bytes_per_second,
        num_replica_alter_log_dirs_threads=config.num_replica_alter_log_dirs_threads or None,
    )


def cleaner_config(config: BrokerConfig) -> CleanerConfig:
    """The log cleaner's settings from the broker's (``log.cleaner.*``)."""
    return CleanerConfig(
        enable=config.log_cleaner_enable,
        threads=config.log_cleaner_threads,
        io_max_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
        dedupe_buffer_bytes=config.log_cleaner_dedupe_buffer_size,
        backoff_ms=config.log_cleaner_backoff_ms,
    )


class _ZooKeeperTopicAdmin:
    """CreateTopics/DeleteTopics by writing ZooKeeper; the controller does the rest."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def create_topic(
        self,
        topic: str,
        partition_count: int,
        replication_factor: int,
        assignment: dict[int, tuple[int, ...]] | None,
        validate_only: bool,
        *,
        topic_configs: dict[str, str] | None = None,
    ) -> tuple[int, str | None]:
        coordinator = self._broker.coordinator
        if coordinator is None:
            # the listeners are bound before the ZooKeeper session (the controller must reach
            # this broker): a request in between is answered as a broker that cannot act as
            # the controller answers, a retriable NOT_CONTROLLER (it was an assertion: the
            # connection closed as on a bug, and a client's set-up failed)
            return NOT_CONTROLLER, NOT_CONNECTED_YET
        try:
            if await coordinator.exists(topic_path(topic)) is not None:
                return TOPIC_ALREADY_EXISTS, f"topic {topic!r} already exists"
            await zk_admin.check_topic_collision(coordinator, topic)
            if validate_only:
                return NONE, None
            # Kafka writes /config/topics/<t> (even empty) before the topic, so no broker
            # creates the topic's logs without its configs, and the notice clears whatever a
            # broker still holds for an earlier topic of the same name.
            await write_entity(coordinator, configs.ResourceType.TOPIC, topic,
                               lambda current: dict(topic_configs or {}))
            seed = self._broker.rng.getrandbits(63)
            if assignment is not None:
                await zk_admin.create_topic(coordinator, topic, assignment=assignment,
                                            offload=trio.to_thread.run_sync)
            else:
                await zk_admin.create_topic(
                    coordinator,
                    topic,
                    partition_count=partition_count,
                    replication_factor=replication_factor,
                    placer=load_replica_placer(self._broker.config.replica_placer,
                                               SeededRng(seed)),
                    rng=SeededRng(seed),
                    offload=trio.to_thread.run_sync,
                )
        except zk_admin.TopicExistsError as error:
            return TOPIC_ALREADY_EXISTS, str(error)
        except zk_admin.TopicCollisionError as error:
            return INVALID_TOPIC_EXCEPTION, str(error)
        except PlacementError as error:
            return error.error_code, str(error)
        except (ZnodeFormatError, zk_admin.AdminError) as error:
            return INVALID_REQUEST, str(error)
        except CoordinatorError as error:
            log.warning("creating topic %s: ZooKeeper error %r", topic, error)
            return UNKNOWN_SERVER_ERROR, f"ZooKeeper: {error!r}"
        return NONE, None

    async def delete_topic(self, topic: str) -> int:
        coordinator = self._broker.coordinator
        if coordinator is None:
            return NOT_CONTROLLER  # (as in create_topic)
        try:
            await zk_admin.delete_topic(coordinator, topic)
        except (zk_admin.UnknownTopicError, NoNodeError):
            return UNKNOWN_TOPIC_OR_PARTITION
        except CoordinatorError as error:
            log.warning("deleting topic %s: ZooKeeper error %r", topic, error)
            return UNKNOWN_SERVER_ERROR
        return NONE


class _ZooKeeperConfigs:
    """``/config`` for the config handlers (:class:`~impl.broker._handlers_admin.ConfigBackend`)."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def _coordinator(self) -> KazooCoordinator:
        coordinator = self._broker.coordinator
        if coordinator is None:
            raise BackendError("not connected to ZooKeeper yet")
        return coordinator

    def layers(self) -> configs.BrokerLayers:
        store = self._broker.config_store
        if store is None:
            return configs.BrokerLayers(static=static_layer(self._broker.config))
        return store.layers

    def coordinator(self) -> KazooCoordinator:
        return self._coordinator()

    def placer(self) -> tuple[ReplicaPlacer, SeededRng]:
        seed = self._broker.rng.getrandbits(63)
        return (load_replica_placer(self._broker.config.replica_placer, SeededRng(seed)),
                SeededRng(seed))

    async def elect_unclean(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        controller = self._broker.controller
        if controller is None:
            return dict.fromkeys(partitions, NOT_CONTROLLER)
        return await controller.elect_unclean(partitions)

    async def topic_exists(self, topic: str) -> bool:
        try:
            return await self._coordinator().exists(topic_path(topic)) is not None
        except CoordinatorError as error:
            raise BackendError(f"ZooKeeper: {error!r}") from None

    async def read(self, resource: configs.ResourceType, name: str) -> dict[str, str]:
        try:
            return await read_entity(self._coordinator(), resource, name)
        except CoordinatorError as error:
            raise BackendError(f"ZooKeeper: {error!r}") from None

    async def write(
        self,
        resource: configs.ResourceType,
        name: str,
        update: Callable[[dict[str, str]], dict[str, str]],
    ) -> dict[str, str]:
        try:
            return await write_entity(self._coordinator(), resource, name, update)
        except CoordinatorError as error:
            raise BackendError(f"ZooKeeper: {error!r}") from None


class _ZooKeeperRegistry:
    """``/brokers/ids`` and ``/controller`` for the handlers when the metadata cache lags."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def registered_brokers(self) -> list[BrokerEndpoint] | None:
        coordinator = self._broker.coordinator
        if coordinator is None:
            return None
        try:
            registered = await zk_admin.read_live_brokers(coordinator)
        except (CoordinatorError, ZnodeFormatError) as error:
            log.info("reading /brokers/ids: %r", error)
            return None
        return [BrokerEndpoint(r.broker_id, r.host, r.port, r.rack, r.endpoints)
                for _, r in sorted(registered.items())]

    async def controller_id(self) -> int:
        coordinator = self._broker.coordinator
        if coordinator is None:
            return -1
        try:
            data, _stat = await coordinator.get(CONTROLLER_PATH)
            return decode_controller(data)
        except NoNodeError:
            return -1
        except (CoordinatorError, ZnodeFormatError) as error:
            log.info("reading /controller: %r", error)
            return -1


class _StorageLogDirs:
    """The KIP-113 operations answered from the log manager."""

    def __init__(self, logs: LogManager) -> None:
        self._logs = logs

    async def describe_log_dirs(
        self, topics: dict[str, set[int]] | None
    ) -> list[dict[str, Any]]:
        """The storage's description (only of the partitions asked for), a checkpoint after
        every step of its walk and every ``YIELD_EVERY_ENTRIES`` entries built: a
        DescribeLogDirs of 32,000 partitions held the event loop for 0.57 s, and one of three
        partitions as long."""
        wanted = None if topics is None else [
            TopicPartition(name, partition)
            for name, partitions in topics.items() for partition in partitions]
        steps = self._logs.describe_steps(wanted)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                descriptions: list[LogDirDescription] = done.value
                break
            await trio.lowlevel.checkpoint()
        results: list[dict[str, Any]] = []
        built = 0
        for description in descriptions:
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for replica in description.replicas:
                built += 1
                if not built % YIELD_EVERY_ENTRIES:
                    await trio.lowlevel.checkpoint()
                by_topic.setdefault(replica.tp.topic, []).append(
                    {
                        "partition_index": replica.tp.partition,
                        "partition_size": replica.size_bytes,
                        "offset_lag": replica.offset_lag,
                        "is_future_key": replica.is_temporary,
                    }
                )
            results.append(
                {
                    "error_code": int(description.error_code),
                    "log_dir": description.path,
                    "topics": [
                        {"name": name, "partitions": partitions}
                        for name, partitions in sorted(by_topic.items())
                    ],
                    "total_bytes": description.total_bytes,
                    "usable_bytes": description.usable_bytes,
                }
            )
        return results

    def alter_replica_log_dir(self, tp: TopicPartition, log_dir: str) -> int:
        return int(self._logs.alter_replica_log_dir(tp, log_dir))


#: The pause before a log-dir failure notice that ZooKeeper refused is written again.
DIR_FAILURE_RETRY_SECONDS: Final = 0.5


async def report_dir_failures(coordinator_of: Callable[[], Coordinator | None], broker_id: int,
                              failed_dirs: list[str]) -> None:
    """Tell the controller of each failed log dir in ``failed_dirs`` (KIP-112's
    ``/log_dir_event_notification``), taking each off the list once written. A write that fails
    (a lost connection, an expired session) is tried again after
    ``DIR_FAILURE_RETRY_SECONDS``, as Kafka's ZooKeeper client retries, so a failed dir is
    never left unreported; the notice may then land twice, which the controller's handling
    (re-sending LeaderAndIsr for the broker's replicas) makes harmless. Without a coordinator
    (the broker is stopping) the notices are dropped."""
    while failed_dirs:
        log_dir = failed_dirs[0]
        log.error("log dir %s failed; telling the controller", log_dir)
        coordinator = coordinator_of()
        if coordinator is None:
            failed_dirs.pop(0)
            continue
        try:
            await zk_admin.notify_log_dir_failure(coordinator, broker_id)
        except CoordinatorError as error:
            log.warning("cannot notify the failure of log dir %s yet: %r", log_dir, error)
            await trio.sleep(DIR_FAILURE_RETRY_SECONDS)
            continue
        failed_dirs.pop(0)


class Broker:
    """One broker process's worth of state.

    Args:
        config: the parsed configuration.
        run_controller: run the controller candidate (the controller engineer's
            ``ControllerService``); False only when something else plays the controller (tests
            that send controller requests themselves).
        trace: where the cores' trace events go.
        rng_seed: seeds topic placement.
        disk: the storage engine's Disk port (default: the real file system).
    """

    def __init__(
        self,
        config: BrokerConfig,
        *,
        run_controller: bool = True,
        trace: TraceSink | None = None,
        rng_seed: int | None = None,
        disk: Disk | None = None,
    ) -> None:
        self.config = config
        self.trace: TraceSink = trace if trace is not None else NullTraceSink()
        self.rng = random.Random(rng_seed)
        self.run_controller = run_controller
        self.disk = disk
        self.controller: ControllerService | None = None
        self.metadata = MetadataCache()
        self.logs: LogManager | None = None
        #: the log cleaner (compacted topics), once serving
        self.cleaner: LogCleanerRunner | None = None
        self.replicas: ReplicaManager | None = None
        self.config_store: ConfigStore | None = None
        self.server: Server | None = None
        self.coordinator: KazooCoordinator | None = None
        self.controller_coordinator: KazooCoordinator | None = None
        security = config.security
        #: how this broker connects to the others (None: PLAINTEXT)
        self.client_security: ClientSecurity | None = (
            inter_broker_client(security) if security is not None and security.secured else None)
        self.inter_broker = InterBrokerClient(f"controller-{config.broker_id}", self._endpoint_of,
                                              self._connect)
        self.broker_epoch = -1
        #: the broker epoch since which every shutdown was clean, once registered (KIP-966)
        self.clean_since_epoch = -1
        self.port = config.port
        #: listener name → bound port, once serving
        self.server_ports: dict[str, int] = {}
        #: this machine's host name, advertised for a listener bound to every interface
        #: (looked up at start-up when one is)
        self.host_name = "localhost"
        self._stop = trio.Event()
        self._stopped = trio.Event()
        self._failed_dirs: list[str] = []
        self._dir_failed = trio.Event()
        self._controller_scope = trio.CancelScope()
        self._nursery: trio.Nursery | None = None
        self.quotas: ReplicationQuotas | None = None
        #: the Prometheus counters and collector; served on ``metrics.port`` when set
        self.metrics = BrokerMetrics(BrokerStateView(self))
        #: the port ``/metrics`` is served on once serving (None: ``metrics.port`` unset)
        self.metrics_port: int | None = None
        #: endpoints of registered brokers not yet in the metadata cache (the controller's view)
        self._live_brokers: dict[int, tuple[str, int]] = {}
        #: the ACLs (``authorizer.class.name`` set) kept current from ZooKeeper, else None
        self.acls: AclStore | None = None
        self.authorization: RequestAuthorizer | None = None
        if security is not None and security.authorizer_enabled:
            authorizer = Authorizer(security.super_users,
                                    security.allow_everyone_if_no_acl_found)
            self.acls = AclStore(None, authorizer)
            self.authorization = RequestAuthorizer(authorizer)

    @property
    def bootstrap(self) -> str:
        """``host:port`` of this broker's first listener as advertised (its first listener
        when that one is not advertised)."""
        first = self.config.listeners[0]
        for listener in self.advertised_listeners():
            if listener.name == first.name:
                return f"{listener.host}:{listener.port}"
        host = self.host_name if first.host in WILDCARD_HOSTS else first.host
        return f"{host}:{self.port}"

    def request_stop(self) -> None:
        """Ask :meth:`serve` to stop gracefully (safe to call from the trio thread)."""
        self._stop.set()

    async def wait_stopped(self) -> None:
        """Wait until :meth:`serve` has finished stopping."""
        await self._stopped.wait()

    @property
    def inter_broker_listener(self) -> str:
        """``inter.broker.listener.name`` (default: the first listener, PLAINTEXT)."""
        security = self.config.security
        return (security.inter_broker_listener if security is not None
                else self.config.listeners[0].name)

    def advertised_listeners(self) -> tuple[Listener, ...]:
        """``advertised.listeners`` (default ``listeners``) with bound ports and the host name
        filled in (:func:`impl.broker.config.advertise`)."""
        ports = self.server_ports or {self.config.listeners[0].name: self.port}
        return advertise(self.config, ports, self.host_name)

    def advertised_endpoints(self) -> tuple[ListenerEndpoint, ...]:
        """Every advertised listener with its security protocol, the inter-broker listener
        first (its endpoint is also the registration's ``host:port`` and the one the
        controller hands out as a leader's address)."""
        security = self.config.security
        endpoints = [
            ListenerEndpoint(listener.name,
                             (security.listener(listener.name).protocol.value
                              if security is not None else "PLAINTEXT"),
                             listener.host, listener.port)
            for listener in self.advertised_listeners()
        ]
        endpoints.sort(key=lambda endpoint: endpoint.listener != self.inter_broker_listener)
        return tuple(endpoints)

    def _endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        """Where to reach ``broker_id``: its endpoint on the inter-broker listener."""
        if broker_id == self.config.broker_id:
            own = self.advertised_endpoints()[0]
            return own.host, own.port
        broker = self.metadata.broker(broker_id)
        if broker is not None:
            for endpoint in broker.listeners:
                if endpoint.listener == self.inter_broker_listener:
                    return endpoint.host, endpoint.port
            if not broker.listeners:
                return broker.host, broker.port
        return self._live_brokers.get(broker_id)

    async def _connect(self, host: str, port: int) -> trio.abc.Stream:
        """A connection to another broker over the inter-broker listener's protocol.

        Raises:
            ConnectionError: TLS or SASL refused (an OSError, as a refused connection).
        """
        try:
            return await open_stream(host, port, self.client_security)
        except AuthenticationError as error:
            raise ConnectionError(f"authenticating to {host}:{port}: {error}") from error

    async def _read_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        """The SCRAM credential of ``user`` in ``/config/users/<user>`` (None: none)."""
        if self.coordinator is None or not user or "/" in user:
            return None
        try:
            data, _ = await self.coordinator.get(user_config_path(user))
            text = decode_user_config(data).get(mechanism)
            return ScramCredential.from_text(text) if text is not None else None
        except NoNodeError:
            return None
        except (CoordinatorError, CredentialError, ValueError) as error:
            log.warning("reading the credentials of %s: %s", user, error)
            return None

    def _on_controller_request(self, request: ControllerRequest) -> None:
        if isinstance(request, LeaderAndIsrRequest):
            for leader in request.live_leaders:
                self._live_brokers[leader.broker_id] = (leader.host, leader.port)

    def _on_update_metadata(self, request: UpdateMetadataRequest) -> None:
        self.metadata.update(
            request.controller_id,
            metadata_brokers(request.live_brokers),
            [
                PartitionMetadata(
                    state.topic,
                    state.partition,
                    state.leader,
                    state.leader_epoch,
                    state.isr,
                    state.replicas,
                    state.offline_replicas,
                )
                for state in request.partition_states
            ],
        )

    def _on_dir_failure(self, log_dir: str) -> None:
        self._failed_dirs.append(log_dir)
        replicas = self.replicas
        if replicas is None:
            self._dir_failed.set()
            return
        replicas.mark_dir_offline()

    async def _report_dir_failures(self) -> None:
        while True:
            await self._dir_failed.wait()
            self._dir_failed = trio.Event()
            await report_dir_failures(lambda: self.coordinator, self.config.broker_id,
                                      self._failed_dirs)

    async def send_controller_request(
        self, broker_id: int, request: ControllerRequest
    ) -> ControllerResponse:
        """The controller's send callback: every request goes over the wire.

        The endpoint of a broker not yet in this broker's metadata cache is read from its
        registration in ZooKeeper.
        """
        if self._endpoint_of(broker_id) is None and self.coordinator is not None:
            for registration in (await zk_admin.read_live_brokers(self.coordinator)).values():
                endpoint = (registration.endpoint(self.inter_broker_listener)
                            or registration.endpoints[0])
                self._live_brokers[registration.broker_id] = (endpoint.host, endpoint.port)
        return await self.inter_broker.send(broker_id, request)

    async def _register(self) -> None:
        """Register (again, after a session expiry) in ``/brokers/ids``.

        The clean-since epoch (KIP-966, spec/controller.md "Unclean shutdowns") is the
        clean-shutdown markers' at the first registration, else this registration's own epoch
        (this start followed an unclean shutdown: the clean run begins here); a re-registration
        of the same process keeps it (the process lost nothing).
        """
        coordinator = self.coordinator
        assert coordinator is not None
        endpoints = self.advertised_endpoints()
        assert self.logs is not None
        if self.broker_epoch < 0:
            self.clean_since_epoch = self.logs.clean_since_broker_epoch
        since = self.clean_since_epoch
        epoch = await zk_admin.register_broker(
            coordinator,
            self.config.broker_id,
            endpoints[0].host,
            endpoints[0].port,
            self.config.rack,
            timestamp_ms=int(trio.current_time() * 1000),
            endpoints=endpoints,
            clean_since_broker_epoch=since,
        )
        self.broker_epoch = epoch
        if self.clean_since_epoch < 0:
            self.clean_since_epoch = epoch
        assert self.replicas is not None
        if epoch > self.replicas.fence.broker_epoch:
            self.replicas.fence.register(epoch)

    async def _ensure_chroot(self) -> None:
        """Create the ``zookeeper.connect`` chroot if it is missing, as Kafka does."""
        hosts, slash, chroot = self.config.zookeeper_connect.partition("/")
        if not slash or not chroot.strip("/"):
            return
        coordinator = await KazooCoordinator.connect(
            hosts, session_timeout_ms=self.config.zookeeper_session_timeout_ms,
            connect_timeout_s=self.config.zookeeper_connect_timeout_s,
        )
        try:
            await zk_admin.ensure_path(coordinator, "/" + chroot.strip("/"))
        finally:
            await coordinator.close()

    async def _load_configs(self) -> None:
        """Read ``/config`` (arming the watches) and apply it."""
        coordinator, store = self.coordinator, self.config_store
        assert coordinator is not None
        assert store is not None
        try:
            await store.load(coordinator)
        except CoordinatorError as error:
            log.warning("reading /config: %r", error)

    async def _load_acls(self, changed_root: str | None) -> None:
        """Reload the ACLs: every pattern (None) or those a change notification names."""
        if self.acls is None:
            return
        try:
            if changed_root is None:
                await self.acls.load()
            else:
                await self.acls.on_watch(changed_root)
        except CoordinatorError as error:
            log.warning("reading the ACLs: %r", error)

    async def _watch_session(self) -> None:
        coordinator = self.coordinator
        assert coordinator is not None
        expired = False
        store = self.config_store
        assert store is not None
        while True:
            try:
                event = await coordinator.next_event()
            except CoordinatorClosedError:
                return
            if isinstance(event, WatchEvent):
                if event.path in store.watched_paths:
                    try:
                        await store.on_watch(coordinator, event.path)
                    except CoordinatorError as error:
                        log.warning("reading /config after a change: %r", error)
                elif self.acls is not None and self.acls.owns(event.path):
                    await self._load_acls(event.path)
                continue
            if event.state is SessionState.EXPIRED:
                expired = True
            elif event.state is SessionState.CONNECTED:
                if expired:
                    expired = False
                    try:
                        await self._register()
                        log.info("re-registered after session expiry, epoch %d",
                                 self.broker_epoch)
                    except (CoordinatorError, zk_admin.AdminError) as error:
                        log.error("re-registration failed: %r", error)
                await self._load_configs()  # watches were dropped with the connection
                await self._load_acls(None)
            elif event.state is SessionState.CLOSED:
                return

    async def serve(self, *, task_status: trio.TaskStatus[Broker] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        """Run until :meth:`request_stop`; reports itself once registered.

        Raises:
            OSError: a listener cannot bind.
            CoordinatorError: ZooKeeper cannot be reached at start-up.
            zk_admin.BrokerIdInUseError: another live broker has this id.
        """
        config = self.config
        logs = LogManager.open(storage_config(config), disk=self.disk, trace=self.trace,
                               on_dir_failure=self._on_dir_failure)
        self.logs = logs
        replicas = ReplicaManager(
            config.broker_id,
            logs,
            min_insync_replicas=config.min_insync_replicas,
            message_max_bytes=config.message_max_bytes,
            timestamp_difference_max_ms=config.message_timestamp_difference_max_ms,
            trace=self.trace,
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            fetch_backoff_ms=config.replica_fetch_backoff_ms,
            truncation_policy=config.replica_truncation_policy,
            request_retry_ms=int(IO_TIMEOUT_SECONDS * 1000),
        )
        replicas.min_insync_of = lambda topic: logs.log_config(topic).min_insync_replicas
        self.replicas = replicas
        self.quotas = ReplicationQuotas(config.broker_id, logs.clock.monotonic_ns)
        self.config_store = ConfigStore(config.broker_id, static_layer(config), logs,
                                        self.quotas, replicas.notify)
        fetcher = ReplicaFetcher(config.broker_id, replicas, self._endpoint_of,
                                 connect=self._connect)
        replicas.fetcher = fetcher
        replicas.node.quotas = self.quotas
        replicas.isr_updater = self._schedule_isr_update
        replicas.dir_failure_reporter = self._dir_failed.set
        handlers = RequestHandlers(
            HandlerContext(
                config=config,
                metadata=self.metadata,
                replicas=replicas,
                topic_admin=_ZooKeeperTopicAdmin(self),
                log_dirs=_StorageLogDirs(logs),
                allocate_producer_id=self._allocate_producer_id,
                on_update_metadata=self._on_update_metadata,
                on_controller_request=self._on_controller_request,
                registry=_ZooKeeperRegistry(self),
                config_backend=_ZooKeeperConfigs(self),
                quotas=self.quotas,
                authorization=self.authorization,
                acl_apis=AclApis(self.acls),
                scram_apis=ScramApis(lambda: self.coordinator),
            )
        )
        server = Server(
            observed(handlers, self.metrics),
            config.socket_request_max_bytes,
            raw_handlers={api_versions.CREATE_REPLICA_PLACEMENT: self._placement_handler(handlers)},
            security=(ServerSecurity(config.security, self._read_credential)
                      if config.security is not None and config.security.secured else None),
            limits=ConnectionLimits(
                max_connections=config.max_connections,
                max_connections_per_ip=config.max_connections_per_ip,
                connections_max_idle_ms=config.connections_max_idle_ms,
                request_read_timeout_ms=config.socket_request_read_timeout_ms,
                queued_max_request_bytes=config.queued_max_request_bytes,
            ),
        )
        self.server = server
        try:
            async with trio.open_nursery() as nursery:
                ports = await nursery.start(
                    functools.partial(server.serve,
                                      [(listener.host, listener.port)
                                       for listener in config.listeners],
                                      names=[listener.name for listener in config.listeners]),
                )
                self.port = config.port or ports[0]
                self.server_ports = {listener.name: port for listener, port
                                     in zip(config.listeners, ports, strict=True)}
                if any(listener.host in WILDCARD_HOSTS for listener
                       in config.advertised_listeners or config.listeners):
                    self.host_name = await trio.to_thread.run_sync(socket.getfqdn)
                if config.metrics_port:
                    self.metrics_port = self.metrics.start(config.metrics_port,
                                                           config.listeners[0].host)
                advertised = self.advertised_endpoints()
                handlers.context.own_endpoints.update(
                    (endpoint.listener, (endpoint.host, endpoint.port))
                    for endpoint in advertised)
                self.metadata.add_brokers(
                    [BrokerEndpoint(config.broker_id, advertised[0].host, advertised[0].port,
                                    config.rack, advertised)]
                )
                run_log_manager(logs, nursery)
                self.cleaner = LogCleanerRunner(logs, cleaner_config(config))
                nursery.start_soon(self.cleaner.run)
                await self._ensure_chroot()
                self._nursery = nursery
                await nursery.start(fetcher.run)
                nursery.start_soon(self._check_isr_periodically)
                await nursery.start(handlers.groups.service.run)
                self.coordinator = await KazooCoordinator.connect(
                    config.zookeeper_connect,
                    session_timeout_ms=config.zookeeper_session_timeout_ms,
                    connect_timeout_s=config.zookeeper_connect_timeout_s,
                )
                self._producer_ids = ProducerIdAllocator(self.coordinator, config.broker_id)
                await self._register()
                await self._load_configs()
                if self.acls is not None:
                    self.acls.coordinator = self.coordinator
                    await self.acls.load()
                nursery.start_soon(self._watch_session)
                nursery.start_soon(self._report_dir_failures)
                if self.run_controller:
                    self.controller_coordinator = await KazooCoordinator.connect(
                        config.zookeeper_connect,
                        session_timeout_ms=config.zookeeper_session_timeout_ms,
                        connect_timeout_s=config.zookeeper_connect_timeout_s,
                    )
                    self.controller = ControllerService(
                        trace_sink=self.trace,
                        unclean_leader_election=configs.log_config_of(
                            {}, configs.BrokerLayers(static=static_layer(config))
                        ).unclean_leader_election_enable,
                    )
                    await nursery.start(self._run_controller)
                log.info("broker %d serving on %s (epoch %d)", config.broker_id, self.bootstrap,
                         self.broker_epoch)
                task_status.started(self)
                await self._stop.wait()
                await self._shutdown(nursery)
        finally:
            self.metrics.stop()  # also when start-up failed after the endpoint was up
            self._stopped.set()

    def _placement_handler(self, handlers: RequestHandlers) -> RawHandler:
        """CreateReplicaPlacement (a raw API) behind its ACL: DESCRIBE on the cluster (a
        denial closes the connection: the raw codec has no error answer)."""
        async def handle(frame: bytes) -> Response | None:
            if self.authorization is not None and not self.authorization.allowed(
                    AclOperation.DESCRIBE, CLUSTER):
                raise ValueError("CreateReplicaPlacement: DESCRIBE on the cluster is not "
                                 "authorized")
            return await handlers.create_replica_placement(frame)
        return handle

    async def _run_controller(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        assert self.controller is not None
        assert self.controller_coordinator is not None
        with self._controller_scope:
            await self.controller.run(
                self.controller_coordinator,
                self.config.broker_id,
                self.send_controller_request,
                task_status=task_status,
            )

    async def _shutdown(self, nursery: trio.Nursery) -> None:
        with trio.CancelScope(shield=True):
            assert self.server is not None
            self._controller_scope.cancel()
            if self.replicas is not None:
                self.replicas.stopping = True
                self.replicas.notify()
            await self.server.drain()
            await self.inter_broker.aclose()
            for coordinator in (self.controller_coordinator, self.coordinator):
                if coordinator is not None:
                    try:
                        await coordinator.close()
                    except CoordinatorError as error:
                        log.warning("closing ZooKeeper session: %r", error)
            if self.cleaner is not None:
                self.cleaner.close()
            if self.logs is not None:
                # a clean shutdown: the markers name this incarnation (KIP-966)
                self.logs.close(clean_since_epoch=self.clean_since_epoch)
            await trio.to_thread.run_sync(self.metrics.stop)
        nursery.cancel_scope.cancel()

    def _schedule_isr_update(self, write: WriteIsr) -> None:
        nursery = self._nursery
        replicas = self.replicas
        if nursery is None or replicas is None or self.coordinator is None:
            if replicas is not None:
                replicas.isr_written(write.tp, write.isr, None)
            return
        nursery.start_soon(self._update_isr, write)

    async def _update_isr(self, write: WriteIsr) -> None:
        """Carry out the node's ISR write (conditional on the partition's zkVersion) and report
        its outcome."""
        replicas = self.replicas
        coordinator = self.coordinator
        assert replicas is not None
        assert coordinator is not None
        tp = write.tp
        try:
            version: int | None = await zk_admin.update_isr(
                coordinator, tp.topic, tp.partition, leader=write.leader,
                leader_epoch=write.leader_epoch, isr=write.isr,
                controller_epoch=write.controller_epoch, zk_version=write.partition_epoch,
                isr_broker_epochs=write.isr_broker_epochs or None,
            )
            log.info("%s ISR %s -> %s", tp, list(write.previous_isr), list(write.isr))
            self.metrics.record_isr_change(write.previous_isr, write.isr)
        except zk_admin.IsrUpdateFencedError:
            log.info("ISR update of %s fenced; waiting for the controller", tp)
            version = None
        except (CoordinatorError, zk_admin.AdminError) as error:
            log.warning("ISR update of %s failed: %r", tp, error)
            version = None
        replicas.isr_written(tp, write.isr, version)

    async def _check_isr_periodically(self) -> None:
        interval = max(self.config.replica_lag_time_max_ms / 2000.0, 0.05)
        while True:
            await trio.sleep(interval)
            if self.replicas is not None:
                await self.replicas.check_isr_all()

    async def _allocate_producer_id(self) -> int:
        return await self._producer_ids.allocate()

    _producer_ids: ProducerIdAllocator
