"""KIP-879's multi-level rack-aware replica selector, for follower fetching (KIP-392).

KIP-879 "Public Interfaces": "a multi-level rack aware replica selector that is responsible
for selecting a replica to fetch from when consumers are using follower fetching". A consumer
sends its ``client.rack`` in Fetch (v11+); the leader answers with a preferred read replica.
Kafka's ``RackAwareReplicaSelector`` only knows equal racks; over multi-level racks the nearest
replica is the one whose rack shares the most levels with the client's (``/DC1/R2`` is nearer
to ``/DC1/R1`` than ``/DC2/R1`` is). Among the nearest: the leader if it is one of them
(no redirect), else the one with the highest log end offset, then the lowest broker id. A
client without a rack, whose rack is not a multi-level path, or that shares not even the top
level with any replica, is served by the leader.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._errors import PlacementError
from ._multi_level import RACK_SEPARATOR, parse_rack

__sans_io__ = True


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """A replica the leader may send a consumer to.

    Attributes:
        broker_id: the replica's broker.
        rack: the broker's ``broker.rack``, ``None`` when it has none.
        log_end_offset: the replica's log end offset as the leader knows it.
        is_leader: whether this is the partition's leader.
    """

    broker_id: int
    rack: str | None
    log_end_offset: int
    is_leader: bool = False


def rack_distance_levels(client_rack: str, replica_rack: str) -> int:
    """How many levels the two multi-level racks share from the root.

    Args:
        client_rack: e.g. ``/DC1/R1``.
        replica_rack: e.g. ``/DC1/R2``.

    Returns:
        The length of the common prefix of their levels (``/DC1/R1`` vs ``/DC1/R2``: 1).

    Raises:
        PlacementError: either rack is not a valid multi-level path.
    """
    client = parse_rack(client_rack)
    replica = parse_rack(replica_rack)
    shared = 0
    for client_level, replica_level in zip(client, replica, strict=False):
        if client_level != replica_level:
            break
        shared += 1
    return shared


def select_preferred_read_replica(
    client_rack: str | None, replicas: Sequence[ReplicaView]
) -> int | None:
    """The replica a consumer in ``client_rack`` should fetch from.

    Args:
        client_rack: the consumer's ``client.rack`` (empty or ``None`` for none).
        replicas: the eligible replicas (alive and caught up, as the leader judges), the
            leader among them.

    Returns:
        The chosen broker id, or ``None`` when the leader should serve (no usable client
        rack, no eligible replica sharing a level with the client, or the leader among the
        nearest).
    """
    if not client_rack or not client_rack.startswith(RACK_SEPARATOR) or not replicas:
        return None
    try:
        parse_rack(client_rack)
    except PlacementError:
        return None
    scored: list[tuple[int, ReplicaView]] = []
    for replica in replicas:
        if replica.rack is None or not replica.rack.startswith(RACK_SEPARATOR):
            continue
        try:
            scored.append((rack_distance_levels(client_rack, replica.rack), replica))
        except PlacementError:
            continue
    if not scored:
        return None
    best_levels = max(levels for levels, _ in scored)
    if best_levels == 0:
        return None
    nearest = [replica for levels, replica in scored if levels == best_levels]
    if any(replica.is_leader for replica in nearest):
        return None
    chosen = min(nearest, key=lambda replica: (-replica.log_end_offset, replica.broker_id))
    return chosen.broker_id
