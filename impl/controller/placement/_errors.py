"""The one error type of replica placement.

Blame: every :class:`PlacementError` is the caller's (a topic request, an operator's config, a
plugin's answer): the input cannot be placed as asked. Our own broken invariants are
``assert``s, never this type. Each error carries the Kafka error code a broker answers with, so
the CreateTopics, CreatePartitions and CreateReplicaPlacement handlers need no mapping table.
"""

from __future__ import annotations

__sans_io__ = True

#: Kafka's INVALID_PARTITIONS: the partition count or the start partition is not usable.
INVALID_PARTITIONS = 37
#: Kafka's INVALID_REPLICATION_FACTOR: zero, negative, or more than the usable brokers.
INVALID_REPLICATION_FACTOR = 38
#: Kafka's INVALID_REPLICA_ASSIGNMENT: the brokers, their racks or a plugin's answer are wrong.
INVALID_REPLICA_ASSIGNMENT = 39
#: Kafka's INVALID_CONFIG: ``broker.replica.placer`` names no placer.
INVALID_CONFIG = 40


class PlacementError(ValueError):
    """The replicas cannot be placed as asked; the message names the problem in one line.

    Attributes:
        error_code: the Kafka error code a broker answers with.
    """

    def __init__(self, message: str, error_code: int = INVALID_REPLICA_ASSIGNMENT) -> None:
        # One line whatever a plugin or a user put in it: the CLI and the wire print it as is.
        super().__init__(" ".join(message.split()))
        self.error_code = error_code
