"""ZooKeeper writes and reads behind the admin APIs (CreatePartitions, KIP-455 reassignments,
ElectLeaders).

As ZooKeeper-era Kafka, the broker answering an admin request never decides placement or
leadership itself: it writes the znodes the controller watches and reads back what the
controller wrote.

* CreatePartitions rewrites ``/brokers/topics/<t>`` with the new partitions, placed by the
  cluster's replica placer (KIP-879) unless the request names the replicas
  (:func:`impl.controller.admin.add_partitions`, conditional on the znode's version).
* AlterPartitionReassignments adds its targets to ``/admin/reassign_partitions`` (creating it,
  or merging into the one in progress, conditionally); ListPartitionReassignments reports the
  partitions whose ``/brokers/topics/<t>`` carries adding/removing replicas, and those still
  waiting in ``/admin/reassign_partitions``.
* ElectLeaders (preferred) creates ``/admin/preferred_replica_election``; the controller elects
  each partition's first replica where it is alive and in the ISR, then deletes the node.

This module is a shell: it carries bytes between the port and the cores' decoders.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

import trio

from impl.controller import admin as zk_admin
from impl.controller.coordinator import (
    BadVersionError,
    Coordinator,
    NodeExistsError,
    NoNodeError,
)
from impl.controller.placement import PlacementError, ReplicaPlacer
from impl.controller.znodes import (
    PREFERRED_REPLICA_ELECTION_PATH,
    REASSIGN_PARTITIONS_PATH,
    TOPICS_PATH,
    ReassignmentTarget,
    TopicAssignment,
    ZnodeFormatError,
    decode_reassignment,
    decode_topic,
    encode_preferred_election,
    encode_reassignment,
    topic_path,
)
from impl.ports import Rng

NONE: Final = 0
UNKNOWN_TOPIC_OR_PARTITION: Final = 3
INVALID_PARTITIONS: Final = 37
INVALID_REPLICA_ASSIGNMENT: Final = 39
INVALID_REQUEST: Final = 42
REASSIGNMENT_IN_PROGRESS: Final = 60
NO_REASSIGNMENT_IN_PROGRESS: Final = 85
_WRITE_ATTEMPTS: Final = 50
_ELECTION_RETRY_SECONDS: Final = 0.05


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    """One partition being reassigned (KIP-455's ``OngoingPartitionReassignment``)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


async def create_partitions(
    coordinator: Coordinator,
    topic: str,
    count: int,
    assignment: Mapping[int, tuple[int, ...]] | None,
    *,
    placer: ReplicaPlacer,
    rng: Rng,
    live_brokers: Iterable[int],
    validate_only: bool,
) -> tuple[int, str | None]:
    """Grow ``topic`` to ``count`` partitions; (error code, message).

    ``assignment`` lists the new partitions' replicas in order (as CreatePartitions sends them).
    """
    try:
        current = await zk_admin.read_topic(coordinator, topic, offload=trio.to_thread.run_sync)
    except (zk_admin.UnknownTopicError, NoNodeError):
        return UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {topic!r}"
    start = len(current.partitions)
    if count <= start:
        return INVALID_PARTITIONS, (
            f"Topic currently has {start} partitions, which is higher than or equal to the "
            f"requested {count}"
        )
    if assignment is not None:
        live = set(live_brokers)
        if len(assignment) != count - start:
            return INVALID_REPLICA_ASSIGNMENT, (
                f"Increasing the number of partitions by {count - start} but "
                f"{len(assignment)} assignments provided"
            )
        factor = len(current.partitions[0])
        for replicas in assignment.values():
            if len(replicas) != factor:
                return INVALID_REPLICA_ASSIGNMENT, (
                    f"Inconsistent replication factor: {len(replicas)} instead of {factor}")
            if len(set(replicas)) != len(replicas):
                return INVALID_REPLICA_ASSIGNMENT, "duplicate brokers in an assignment"
            if not set(replicas) <= live:
                return INVALID_REPLICA_ASSIGNMENT, (
                    f"unknown broker(s) in the assignment: {sorted(set(replicas) - live)}")
    if validate_only:
        return NONE, None
    try:
        await zk_admin.add_partitions(
            coordinator, topic, count,
            assignment=None if assignment is None else {
                start + index: replicas for index, replicas in enumerate(assignment.values())},
            placer=None if assignment is not None else placer,
            rng=None if assignment is not None else rng,
            offload=trio.to_thread.run_sync,
        )
    except zk_admin.ReassignmentInProgressError as error:
        return REASSIGNMENT_IN_PROGRESS, str(error)
    except PlacementError as error:
        return error.error_code, str(error)
    except (zk_admin.AdminError, ZnodeFormatError) as error:
        return INVALID_REQUEST, str(error)
    except BadVersionError:
        return INVALID_REQUEST, f"topic {topic!r} changed meanwhile; retry"
    return NONE, None


async def _read_node(coordinator: Coordinator) -> tuple[dict[tuple[str, int], ReassignmentTarget],
                                                        int | None]:
    try:
        data, stat = await coordinator.get(REASSIGN_PARTITIONS_PATH)
    except NoNodeError:
        return {}, None
    try:
        targets = decode_reassignment(data)
    except ZnodeFormatError:
        targets = ()
    return {(t.topic, t.partition): t for t in targets}, stat.version


async def _topics(coordinator: Coordinator, names: Iterable[str]) -> dict[str, TopicAssignment]:
    found: dict[str, TopicAssignment] = {}
    for name in names:
        try:
            data, _ = await coordinator.get(topic_path(name))
        except NoNodeError:
            continue
        try:
            found[name] = decode_topic(name, data)
        except ZnodeFormatError:
            continue
    return found


async def list_reassignments(
    coordinator: Coordinator, wanted: Mapping[str, Iterable[int]] | None
) -> dict[tuple[str, int], OngoingReassignment]:
    """Partitions being reassigned (all, or only those in ``wanted``: topic → partitions)."""
    pending, _ = await _read_node(coordinator)
    names = (list(wanted) if wanted is not None
             else await coordinator.children(TOPICS_PATH))
    topics = await _topics(coordinator, names)
    result: dict[tuple[str, int], OngoingReassignment] = {}
    for name, assignment in topics.items():
        partitions = (set(wanted[name]) if wanted is not None
                      else set(assignment.partitions))
        for partition in sorted(partitions & set(assignment.partitions)):
            replicas = assignment.partitions[partition]
            adding = assignment.adding_replicas.get(partition, ())
            removing = assignment.removing_replicas.get(partition, ())
            target = pending.get((name, partition))
            if not adding and not removing and target is not None:
                # requested, not yet started by the controller
                adding = tuple(r for r in target.replicas if r not in replicas)
                removing = tuple(r for r in replicas if r not in target.replicas)
                replicas = tuple(dict.fromkeys((*target.replicas, *replicas)))
            if adding or removing or target is not None:
                result[(name, partition)] = OngoingReassignment(replicas, adding, removing)
    return result


async def alter_reassignments(
    coordinator: Coordinator,
    requested: Mapping[tuple[str, int], tuple[int, ...] | None],
    live_brokers: Iterable[int],
) -> dict[tuple[str, int], tuple[int, str | None]]:
    """KIP-455 AlterPartitionReassignments through ``/admin/reassign_partitions``.

    A target is added to the node (created or merged, conditionally on its version). ``None``
    cancels (KIP-455): the partition's entry is withdrawn from the node. One the controller has
    not started is simply dropped; one it has started (the topic znode lists adding or removing
    replicas) is reverted by the controller, which takes the original replicas as the target,
    stops and deletes the adding replicas and writes that target back into the node until the
    revert completes. A cancel finding nothing to withdraw (no entry, or the revert of an
    earlier cancel) answers NO_REASSIGNMENT_IN_PROGRESS. A new target for a partition already
    being reassigned answers REASSIGNMENT_IN_PROGRESS (cancel it first).

    Returns:
        (topic, partition) → (error code, message).
    """
    live = set(live_brokers)
    topics = await _topics(coordinator, {topic for topic, _ in requested})
    results: dict[tuple[str, int], tuple[int, str | None]] = {}
    accepted: dict[tuple[str, int], tuple[int, ...] | None] = {}
    for (topic, partition), replicas in requested.items():
        assignment = topics.get(topic)
        if assignment is None or partition not in assignment.partitions:
            results[(topic, partition)] = (UNKNOWN_TOPIC_OR_PARTITION,
                                           f"unknown partition {topic}-{partition}")
            continue
        if replicas is not None:
            if not replicas or len(set(replicas)) != len(replicas):
                results[(topic, partition)] = (INVALID_REPLICA_ASSIGNMENT,
                                               "empty or duplicate replica list")
                continue
            if not set(replicas) <= live:
                results[(topic, partition)] = (
                    INVALID_REPLICA_ASSIGNMENT,
                    f"broker(s) {sorted(set(replicas) - live)} are not alive")
                continue
        accepted[(topic, partition)] = replicas
    for _ in range(_WRITE_ATTEMPTS):
        pending, version = await _read_node(coordinator)
        merged = dict(pending)
        outcome: dict[tuple[str, int], tuple[int, str | None]] = {}
        for tp, replicas in accepted.items():
            assignment = topics[tp[0]]
            adding = assignment.adding_replicas.get(tp[1], ())
            started = bool(adding or assignment.removing_replicas.get(tp[1]))
            if replicas is None:
                original = tuple(r for r in assignment.partitions[tp[1]] if r not in adding)
                entry = merged.get(tp)
                if entry is not None and not (started and tuple(entry.replicas) == original):
                    del merged[tp]  # the controller drops it, or reverts it if started
                    outcome[tp] = (NONE, None)
                else:
                    outcome[tp] = (NO_REASSIGNMENT_IN_PROGRESS,
                                   f"no reassignment of {tp[0]}-{tp[1]} is in progress"
                                   + (" (a cancelled one is being reverted)" if started else ""))
                continue
            if started or tp in merged:
                outcome[tp] = (REASSIGNMENT_IN_PROGRESS,
                               f"{tp[0]}-{tp[1]} is already being reassigned")
                continue
            if tuple(replicas) == assignment.partitions[tp[1]]:
                outcome[tp] = (NONE, None)  # already there: nothing to do
                continue
            merged[tp] = ReassignmentTarget(tp[0], tp[1], tuple(replicas))
            outcome[tp] = (NONE, None)
        try:
            if merged == pending:
                pass
            elif not merged:
                await coordinator.delete(REASSIGN_PARTITIONS_PATH, version=version or 0)
            elif version is None:
                await zk_admin.ensure_cluster_paths(coordinator)
                await coordinator.create(REASSIGN_PARTITIONS_PATH,
                                         encode_reassignment(list(merged.values())))
            else:
                await coordinator.set(REASSIGN_PARTITIONS_PATH,
                                      encode_reassignment(list(merged.values())), version=version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue  # the controller or another admin wrote meanwhile: merge again
        results.update(outcome)
        return results
    for tp in accepted:
        results[tp] = (INVALID_REQUEST, "too many concurrent writers of "
                       f"{REASSIGN_PARTITIONS_PATH}; retry")
    return results


class ElectionBusyError(Exception):
    """``/admin/preferred_replica_election`` stayed occupied for the whole timeout."""


async def request_preferred_election(
    coordinator: Coordinator, partitions: Iterable[tuple[str, int]], timeout_seconds: float
) -> None:
    """Create ``/admin/preferred_replica_election`` for ``partitions``; the controller elects
    and deletes it. An election already pending is waited out (bounded), as Kafka's tool does.

    Raises:
        ElectionBusyError: the node did not go away within ``timeout_seconds``.
    """
    data = encode_preferred_election(list(partitions))
    deadline = trio.current_time() + max(timeout_seconds, 1.0)
    while True:
        try:
            await zk_admin.ensure_cluster_paths(coordinator)
            await coordinator.create(PREFERRED_REPLICA_ELECTION_PATH, data)
            return
        except NodeExistsError:
            if trio.current_time() >= deadline:
                raise ElectionBusyError(
                    "a preferred replica election is already in progress") from None
            await trio.sleep(_ELECTION_RETRY_SECONDS)  # a retry pace while another finishes
