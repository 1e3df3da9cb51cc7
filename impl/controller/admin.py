"""ZooKeeper-side helpers for brokers and administrators, over the Coordinator port.

Why: in ZooKeeper mode, administrators and brokers talk to the controller by writing znodes it
watches (``/brokers/topics``, ``/admin/delete_topics``, ``/admin/reassign_partitions``,
``/log_dir_event_notification``, ``/isr_change_notification``) and a leader updates its ISR in
the partition's state znode itself, conditional on the zkVersion it was given (design V3 §G, the
pre-IBP-2.7 ``ReplicationUtils.updateLeaderAndIsr``). These helpers write exactly Kafka's znodes
and JSON (:mod:`impl.controller.znodes`); they work with any :class:`Coordinator`, real or
simulated.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from impl.ports import CpuOffload, Rng

from .coordinator import (
    BadVersionError,
    Coordinator,
    CreateOp,
    NodeExistsError,
    NoNodeError,
    SetOp,
    SetResult,
    multi_error,
)
from .placement import ClusterView, PlacementSpec, ReplicaPlacer, TopicPartition, place_replicas
from .znodes import (
    BROKER_IDS_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    ISR_CHANGE_PREFIX,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    LOG_DIR_EVENT_PREFIX,
    PERSISTENT_PATHS,
    REASSIGN_PARTITIONS_PATH,
    TOPICS_PATH,
    BrokerRegistration,
    LeaderIsr,
    ListenerEndpoint,
    ReassignmentTarget,
    TopicAssignment,
    ZnodeFormatError,
    broker_path,
    colliding_topics,
    decode_broker,
    decode_partition_state,
    decode_reassignment,
    decode_topic,
    delete_topic_path,
    encode_broker,
    encode_isr_change,
    encode_log_dir_event,
    encode_partition_state,
    encode_reassignment,
    encode_topic,
    has_collision_chars,
    partition_state_path,
    topic_path,
    validate_replicas,
    validate_topic_name,
)


class AdminError(ValueError):
    """An administrative request the cluster's state does not allow (the caller's fault)."""


class TopicExistsError(AdminError):
    """The topic already exists."""


class TopicCollisionError(AdminError):
    """The name collides with an existing topic's (``a.b`` and ``a_b``): Kafka's
    InvalidTopicException."""


class UnknownTopicError(AdminError):
    """The topic does not exist."""


class ReassignmentInProgressError(AdminError):
    """``/admin/reassign_partitions`` already exists; Kafka allows one reassignment at a time."""


class BrokerIdInUseError(AdminError):
    """Another live session holds ``/brokers/ids/<id>``."""


class IsrUpdateFencedError(Exception):
    """The leader's cached zkVersion is stale: the controller or another leader wrote the state.

    The leader must stop changing the ISR and wait for the controller's next LeaderAndIsr.
    """


async def ensure_path(coordinator: Coordinator, path: str) -> None:
    """Create ``path`` and its missing ancestors as empty persistent nodes (idempotent)."""
    parts = [part for part in path.split("/") if part]
    current = ""
    for part in parts:
        current = f"{current}/{part}"
        with contextlib.suppress(NodeExistsError):
            await coordinator.create(current)


async def ensure_cluster_paths(coordinator: Coordinator) -> None:
    """Create Kafka's persistent top-level paths (``/brokers/ids``, ``/admin/…``, …)."""
    for path in PERSISTENT_PATHS:
        await ensure_path(coordinator, path)


async def register_broker(
    coordinator: Coordinator,
    broker_id: int,
    host: str,
    port: int,
    rack: str | None = None,
    *,
    timestamp_ms: int = 0,
    endpoints: Sequence[ListenerEndpoint] = (),
    clean_since_broker_epoch: int | None = None,
) -> int:
    """Register a live broker as the ephemeral ``/brokers/ids/<id>`` (KIP-380 broker epoch).

    Args:
        coordinator: the broker's own session (the node lives as long as it does).
        broker_id: ``broker.id``, non-negative.
        host, port: the first listener (the only one, PLAINTEXT, when ``endpoints`` is empty).
        rack: ``broker.rack`` or ``None``.
        timestamp_ms: registration time written into the znode.
        endpoints: every advertised listener, each registered with its name and protocol.
        clean_since_broker_epoch: the epoch of the incarnation since which every shutdown was
            clean, -1 after an unclean shutdown (KIP-966; spec/controller.md).

    Returns:
        The broker epoch: the czxid of the registration znode.

    Raises:
        BrokerIdInUseError: another session holds this broker id.
        AdminError: a negative broker id or port out of range.
    """
    if broker_id < 0:
        raise AdminError(f"broker id must be non-negative, not {broker_id}")
    if not 0 < port < 65536:
        raise AdminError(f"port out of range: {port}")
    await ensure_cluster_paths(coordinator)
    path = broker_path(broker_id)
    try:
        await coordinator.create(
            path, encode_broker(host, port, rack, timestamp_ms, endpoints,
                                clean_since_broker_epoch=clean_since_broker_epoch),
            ephemeral=True
        )
    except NodeExistsError:
        stat = await coordinator.exists(path)
        if stat is None or stat.ephemeral_owner != coordinator.session_id:
            raise BrokerIdInUseError(
                f"broker id {broker_id} is registered by another live session"
            ) from None
        return stat.czxid
    stat = await coordinator.exists(path)
    if stat is None or stat.ephemeral_owner != coordinator.session_id:
        raise BrokerIdInUseError(f"registration of broker {broker_id} vanished at once")
    return stat.czxid


async def read_live_brokers(coordinator: Coordinator) -> dict[int, BrokerRegistration]:
    """The registered brokers, by id (brokers that vanish while reading are left out)."""
    brokers: dict[int, BrokerRegistration] = {}
    for name in await coordinator.children(BROKER_IDS_PATH):
        if not name.isdigit():
            continue
        try:
            data, stat = await coordinator.get(broker_path(int(name)))
        except NoNodeError:
            continue
        brokers[int(name)] = decode_broker(int(name), data, stat.czxid)
    return brokers


#: A topic znode larger than this is decoded through the caller's offload; one naming more
#: partitions than :data:`OFFLOAD_TOPIC_PARTITIONS` is encoded through it. The JSON of 100,000
#: assignments (1.6 MB) took 0.51 s to decode and 0.31 s to encode on the event loop.
OFFLOAD_TOPIC_BYTES: Final = 32 * 1024
OFFLOAD_TOPIC_PARTITIONS: Final = 2_000


async def run_inline(function: Callable[..., Any], *args: Any) -> Any:
    """The default :data:`~impl.ports.CpuOffload`: ``function(*args)`` here (the simulator's,
    which has one thread)."""
    return function(*args)


async def _decode_topic(topic: str, data: bytes, offload: CpuOffload) -> TopicAssignment:
    if len(data) > OFFLOAD_TOPIC_BYTES:
        decoded: TopicAssignment = await offload(decode_topic, topic, data)
        return decoded
    return decode_topic(topic, data)


async def _encode_topic(assignment: TopicAssignment, offload: CpuOffload) -> bytes:
    if len(assignment.partitions) > OFFLOAD_TOPIC_PARTITIONS:
        encoded: bytes = await offload(encode_topic, assignment)
        return encoded
    return encode_topic(assignment)


async def read_topic(coordinator: Coordinator, topic: str, *,
                     offload: CpuOffload = run_inline) -> TopicAssignment:
    """A topic's replica assignment (a large znode decoded through ``offload``).

    Raises:
        UnknownTopicError: no such topic.
    """
    try:
        data, _stat = await coordinator.get(topic_path(topic))
    except NoNodeError:
        raise UnknownTopicError(f"unknown topic {topic!r}") from None
    return await _decode_topic(topic, data, offload)


async def read_partition_state(
    coordinator: Coordinator, topic: str, partition: int
) -> LeaderIsr | None:
    """A partition's leader, epoch and ISR with its zkVersion, or ``None`` before it is set."""
    try:
        data, stat = await coordinator.get(partition_state_path(topic, partition))
    except NoNodeError:
        return None
    return decode_partition_state(topic, partition, data, stat.version)


async def _cluster_view(coordinator: Coordinator, offload: CpuOffload) -> ClusterView:
    brokers = await read_live_brokers(coordinator)
    assignments: dict[TopicPartition, tuple[int, ...]] = {}
    for topic in await coordinator.children(TOPICS_PATH):
        try:
            assignment = await read_topic(coordinator, topic, offload=offload)
        except UnknownTopicError:
            continue
        for partition, replicas in assignment.partitions.items():
            assignments[TopicPartition(topic, partition)] = replicas
    return ClusterView.of({b.broker_id: b.rack for b in brokers.values()}, assignments)


async def check_topic_collision(coordinator: Coordinator, topic: str) -> None:
    """Raise :class:`TopicCollisionError` if ``topic`` collides with an existing topic (Kafka's
    ``AdminZkClient.validateTopicCreate``); no ZooKeeper read for a name without ``.``/``_``."""
    if not has_collision_chars(topic):
        return
    colliding = colliding_topics(topic, await coordinator.children(TOPICS_PATH))
    if colliding:
        raise TopicCollisionError(
            f"Topic '{topic}' collides with existing topics: {', '.join(colliding)}"
        )


async def create_topic(
    coordinator: Coordinator,
    topic: str,
    *,
    assignment: Mapping[int, Sequence[int]] | None = None,
    partition_count: int | None = None,
    replication_factor: int | None = None,
    placer: ReplicaPlacer | None = None,
    rng: Rng | None = None,
    offload: CpuOffload = run_inline,
) -> dict[int, tuple[int, ...]]:
    """Create a topic by writing ``/brokers/topics/<t>``; the controller then elects leaders.

    Give either an explicit ``assignment`` or ``partition_count``, ``replication_factor``,
    ``placer`` and ``rng`` (the placer sees the live brokers and their racks). A znode of many
    partitions is encoded through ``offload``.

    Returns:
        The assignment written: partition → replicas, preferred leader first.

    Raises:
        TopicExistsError: the topic exists.
        ZnodeFormatError: a bad topic name or replica list.
        AdminError: neither or both ways of assigning given.
        PlacementError: the placer cannot place the request.
    """
    validate_topic_name(topic)
    await check_topic_collision(coordinator, topic)
    if assignment is None:
        if partition_count is None or replication_factor is None or placer is None or rng is None:
            raise AdminError(
                "give an assignment, or partition_count, replication_factor, placer and rng"
            )
        spec = PlacementSpec(partition_count=partition_count, replication_factor=replication_factor)
        placed = place_replicas(placer, spec, await _cluster_view(coordinator, offload), rng=rng)
        assignment = dict(enumerate(placed))
    elif partition_count is not None or placer is not None:
        raise AdminError("give either an assignment or a placer, not both")
    partitions = {int(p): tuple(replicas) for p, replicas in assignment.items()}
    if sorted(partitions) != list(range(len(partitions))) or not partitions:
        raise ZnodeFormatError(f"partitions must be numbered 0..n-1, got {sorted(partitions)}")
    for partition, replicas in partitions.items():
        validate_replicas(replicas, f"{topic}-{partition}")
    await ensure_cluster_paths(coordinator)
    try:
        await coordinator.create(topic_path(topic),
                                 await _encode_topic(TopicAssignment(partitions), offload))
    except NodeExistsError:
        raise TopicExistsError(f"topic {topic!r} already exists") from None
    return partitions


async def add_partitions(
    coordinator: Coordinator,
    topic: str,
    partition_count: int,
    *,
    assignment: Mapping[int, Sequence[int]] | None = None,
    placer: ReplicaPlacer | None = None,
    rng: Rng | None = None,
    offload: CpuOffload = run_inline,
) -> dict[int, tuple[int, ...]]:
    """Grow a topic to ``partition_count`` partitions (design V3 ``on_partitions_add``).

    The new partitions' replicas come from ``assignment`` (new partition → replicas) or from the
    placer with the topic's replication factor. The topic znode is rewritten conditionally on
    the version read, so a concurrent change is never overwritten. A large znode is decoded and
    encoded through ``offload``.

    Returns:
        The new partitions' assignment.

    Raises:
        UnknownTopicError, AdminError (not growing, or no way to assign), ZnodeFormatError,
        PlacementError, BadVersionError (the topic changed meanwhile; retry),
        ReassignmentInProgressError (a partition of the topic is being reassigned).
    """
    try:
        data, stat = await coordinator.get(topic_path(topic))
    except NoNodeError:
        raise UnknownTopicError(f"unknown topic {topic!r}") from None
    current = await _decode_topic(topic, data, offload)
    if current.adding_replicas or current.removing_replicas:
        # The controller rewrites the topic znode as a reassignment advances; Kafka refuses
        # partition addition meanwhile too.
        raise ReassignmentInProgressError(f"topic {topic!r} has a reassignment in progress")
    start = len(current.partitions)
    if partition_count <= start:
        raise AdminError(
            f"topic {topic!r} has {start} partitions; cannot grow to {partition_count}"
        )
    if assignment is None:
        if placer is None or rng is None:
            raise AdminError("give an assignment, or a placer and rng")
        replication_factor = len(current.partitions[0])
        spec = PlacementSpec(
            partition_count=partition_count - start,
            replication_factor=replication_factor,
            start_partition_id=start,
            topic=topic,
        )
        placed = place_replicas(placer, spec, await _cluster_view(coordinator, offload), rng=rng)
        assignment = {start + index: replicas for index, replicas in enumerate(placed)}
    added = {int(p): tuple(r) for p, r in assignment.items()}
    if sorted(added) != list(range(start, partition_count)):
        raise ZnodeFormatError(
            f"new partitions must be numbered {start}..{partition_count - 1}, got {sorted(added)}"
        )
    for partition, replicas in added.items():
        validate_replicas(replicas, f"{topic}-{partition}")
    merged = TopicAssignment(
        {**current.partitions, **added}, current.adding_replicas, current.removing_replicas
    )
    await coordinator.set(topic_path(topic), await _encode_topic(merged, offload),
                          version=stat.version)
    return added


async def delete_topic(coordinator: Coordinator, topic: str) -> None:
    """Ask the controller to delete a topic (``/admin/delete_topics/<t>``).

    Raises:
        UnknownTopicError: the topic does not exist.
    """
    validate_topic_name(topic)
    if await coordinator.exists(topic_path(topic)) is None:
        raise UnknownTopicError(f"unknown topic {topic!r}")
    await ensure_cluster_paths(coordinator)
    with contextlib.suppress(NodeExistsError):  # already marked for deletion
        await coordinator.create(delete_topic_path(topic))


async def reassign_partitions(
    coordinator: Coordinator, targets: Sequence[ReassignmentTarget]
) -> None:
    """Start a reassignment by creating ``/admin/reassign_partitions`` (KIP-113 ``log_dirs``).

    Raises:
        ReassignmentInProgressError: a reassignment is already running.
        UnknownTopicError: a partition does not exist.
        ZnodeFormatError: bad replica lists or log dirs, or a partition listed twice.
    """
    if not targets:
        raise AdminError("a reassignment needs at least one partition")
    encoded = encode_reassignment(targets)
    decode_reassignment(encoded)  # the same validation the controller applies
    read: dict[str, TopicAssignment] = {}
    for target in targets:
        current = read.get(target.topic)
        if current is None:
            # (each topic decoded once: a reassignment of many partitions of one large topic
            # decoded its znode again for each of them)
            current = read[target.topic] = await read_topic(coordinator, target.topic)
        if target.partition not in current.partitions:
            raise UnknownTopicError(f"unknown partition {target.topic}-{target.partition}")
    await ensure_cluster_paths(coordinator)
    try:
        await coordinator.create(REASSIGN_PARTITIONS_PATH, encoded)
    except NodeExistsError:
        raise ReassignmentInProgressError("a partition reassignment is in progress") from None


async def notify_log_dir_failure(coordinator: Coordinator, broker_id: int) -> str:
    """Tell the controller a log dir of ``broker_id`` failed (KIP-112).

    Creates the persistent sequential ``/log_dir_event_notification/log_dir_event_<seq>``.

    Returns:
        The created path.
    """
    await ensure_path(coordinator, LOG_DIR_EVENT_NOTIFICATION_PATH)
    return await coordinator.create(
        f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{LOG_DIR_EVENT_PREFIX}",
        encode_log_dir_event(broker_id),
        sequential=True,
    )


async def update_isr(
    coordinator: Coordinator,
    topic: str,
    partition: int,
    *,
    leader: int,
    leader_epoch: int,
    isr: Sequence[int],
    controller_epoch: int,
    zk_version: int,
    isr_broker_epochs: Sequence[int] | None = None,
) -> int:
    """The leader's conditional ISR update (design V3 ``maybe_change_ISR``).

    One ``multi`` sets the partition state conditional on ``zk_version`` (the version the leader
    cached from its last LeaderAndIsr or ISR update) and creates
    ``/isr_change_notification/isr_change_<seq>`` so the controller propagates the new ISR.

    Args:
        leader, leader_epoch, controller_epoch: unchanged from the leader's cached state.
        isr: the new ISR; must contain ``leader``.
        zk_version: the cached zkVersion.
        isr_broker_epochs: the incarnation of each member the leader vouches for (KIP-903;
            see :class:`~impl.controller.znodes.LeaderIsr`), or None to record none.

    Returns:
        The new zkVersion, to cache.

    Raises:
        IsrUpdateFencedError: the cached zkVersion is stale (a deposed leader's write).
        AdminError: ``isr`` without the leader, or with duplicates.
    """
    if leader not in isr or len(set(isr)) != len(isr):
        raise AdminError(f"ISR {list(isr)} must contain leader {leader} once, without duplicates")
    results = await coordinator.multi(
        [
            SetOp(
                partition_state_path(topic, partition),
                encode_partition_state(leader, leader_epoch, isr, controller_epoch,
                                       isr_broker_epochs),
                zk_version,
            ),
            CreateOp(
                f"{ISR_CHANGE_NOTIFICATION_PATH}/{ISR_CHANGE_PREFIX}",
                encode_isr_change([(topic, partition)]),
                sequential=True,
            ),
        ]
    )
    failure = multi_error(results)
    if failure is not None:
        index, error = failure
        if index == 0 and isinstance(error, BadVersionError | NoNodeError):
            raise IsrUpdateFencedError(
                f"cached zkVersion {zk_version} of {topic}-{partition} is stale"
            ) from error
        raise error
    set_result = results[0]
    assert isinstance(set_result, SetResult)
    return set_result.stat.version


__all__ = [
    "OFFLOAD_TOPIC_BYTES",
    "OFFLOAD_TOPIC_PARTITIONS",
    "AdminError",
    "BrokerIdInUseError",
    "IsrUpdateFencedError",
    "ReassignmentInProgressError",
    "TopicExistsError",
    "UnknownTopicError",
    "ZnodeFormatError",
    "add_partitions",
    "create_topic",
    "delete_topic",
    "ensure_cluster_paths",
    "ensure_path",
    "notify_log_dir_failure",
    "read_live_brokers",
    "read_partition_state",
    "read_topic",
    "reassign_partitions",
    "register_broker",
    "run_inline",
    "update_isr",
]
