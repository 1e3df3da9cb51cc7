# ruff: noqa: F405  (the API keys come from impl.api_keys' star import)
"""The API keys and versions this broker implements, and the ones it advertises.

The advertised table keeps every minimum at or below aiokafka's maxima (Produce 7, Fetch 11,
ListOffsets 3, Metadata 5, CreateTopics 3, InitProducerId 0, FindCoordinator 1, JoinGroup 5,
SyncGroup 3, Heartbeat 1, LeaveGroup 1, OffsetCommit 3, OffsetFetch 3; OffsetCommit starts at
v2, kafka-python's lowest) and every maximum at a version whose
semantics the handlers implement: Fetch stops at 11 (v12 is flexible and v13 switches to topic
ids), Produce at 8, ListOffsets at 7 (max timestamp, KIP-734; v8 asks for tiered storage's
local log start). The admin APIs go to the newest version kio 0.6.2 has a schema for
(DescribeConfigs 4, AlterConfigs 2, IncrementalAlterConfigs 1 ...); kio encodes the tagged
fields of the flexible ones.

The controller-to-broker APIs (LeaderAndIsr 4, StopReplica 5, UpdateMetadata 6) and the
follower's OffsetForLeaderEpoch (23) are accepted at the one version the project's own brokers
send and are not advertised to clients: clients never need them (Metadata reports leader epoch
-1, so they skip offset validation), and kafka-python infers a broker release from the table.

This module is a sans-IO core.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

# Every API key (PRODUCE, FETCH, ...), re-exported: the broker's modules read them from here.
from impl.api_keys import *  # noqa: F403  # ruff's F405 is off for this file (below)

__sans_io__ = True


#: (min, max) per API key, as advertised in ApiVersions.
ADVERTISED: Final[Mapping[int, tuple[int, int]]] = MappingProxyType(
    {
        PRODUCE: (3, 8),
        FETCH: (4, 11),
        LIST_OFFSETS: (1, 7),
        METADATA: (0, 8),
        API_VERSIONS: (0, 3),
        CREATE_TOPICS: (2, 4),
        DELETE_TOPICS: (1, 3),
        INIT_PRODUCER_ID: (0, 1),
        ALTER_REPLICA_LOG_DIRS: (1, 2),
        DESCRIBE_LOG_DIRS: (1, 4),
        DESCRIBE_CONFIGS: (0, 4),
        ALTER_CONFIGS: (0, 2),
        INCREMENTAL_ALTER_CONFIGS: (0, 1),
        CREATE_PARTITIONS: (0, 3),
        DESCRIBE_CLUSTER: (0, 1),
        ALTER_PARTITION_REASSIGNMENTS: (0, 0),
        LIST_PARTITION_REASSIGNMENTS: (0, 0),
        SASL_HANDSHAKE: (0, 1),
        SASL_AUTHENTICATE: (0, 2),
        DESCRIBE_ACLS: (0, 3),
        CREATE_ACLS: (0, 3),
        DELETE_ACLS: (0, 3),
        DELETE_RECORDS: (0, 2),
        ELECT_LEADERS: (0, 2),
        CREATE_REPLICA_PLACEMENT: (0, 0),
        OFFSET_COMMIT: (2, 8),
        OFFSET_FETCH: (1, 7),
        FIND_COORDINATOR: (0, 4),
        JOIN_GROUP: (0, 7),
        HEARTBEAT: (0, 4),
        LEAVE_GROUP: (0, 5),
        SYNC_GROUP: (0, 5),
        DESCRIBE_GROUPS: (0, 5),
        LIST_GROUPS: (0, 4),
        DELETE_GROUPS: (0, 2),
        OFFSET_DELETE: (0, 0),
        DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
        ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    }
)

#: APIs kio has no schema for: the server hands their whole frame to a dedicated codec.
RAW_APIS: Final = frozenset({CREATE_REPLICA_PLACEMENT})

#: The versions the project's controller uses for the controller-to-broker APIs.
LEADER_AND_ISR_VERSION: Final = 4
STOP_REPLICA_VERSION: Final = 3
UPDATE_METADATA_VERSION: Final = 6
#: Followers ask their leader for an epoch's end offset (KIP-101/279) before fetching.
OFFSET_FOR_LEADER_EPOCH_VERSION: Final = 3

#: Everything the broker decodes: the advertised table plus the controller-to-broker APIs.
ACCEPTED: Final[Mapping[int, tuple[int, int]]] = MappingProxyType(
    {
        **ADVERTISED,
        LEADER_AND_ISR: (LEADER_AND_ISR_VERSION, LEADER_AND_ISR_VERSION),
        STOP_REPLICA: (STOP_REPLICA_VERSION, STOP_REPLICA_VERSION),
        UPDATE_METADATA: (UPDATE_METADATA_VERSION, UPDATE_METADATA_VERSION),
        OFFSET_FOR_LEADER_EPOCH: (OFFSET_FOR_LEADER_EPOCH_VERSION, OFFSET_FOR_LEADER_EPOCH_VERSION),
    }
)


def is_accepted(api_key: int, api_version: int) -> bool:
    """Whether the broker decodes (with kio) and answers (api_key, api_version)."""
    if api_key in RAW_APIS:
        return False
    versions = ACCEPTED.get(api_key)
    return versions is not None and versions[0] <= api_version <= versions[1]
