"""Kafka's API keys: the one list of them, read by the broker (``impl.broker.api_versions``,
the handlers) and by security (``impl.security.request_acls``, the SASL client).

It imports nothing, so both packages can read it without importing each other.

This module is a sans-IO core.
"""

from typing import Final as _Final

__sans_io__ = True

PRODUCE: _Final = 0
FETCH: _Final = 1
LIST_OFFSETS: _Final = 2
METADATA: _Final = 3
LEADER_AND_ISR: _Final = 4
STOP_REPLICA: _Final = 5
UPDATE_METADATA: _Final = 6
CONTROLLED_SHUTDOWN: _Final = 7
OFFSET_COMMIT: _Final = 8
OFFSET_FETCH: _Final = 9
FIND_COORDINATOR: _Final = 10
JOIN_GROUP: _Final = 11
HEARTBEAT: _Final = 12
LEAVE_GROUP: _Final = 13
SYNC_GROUP: _Final = 14
DESCRIBE_GROUPS: _Final = 15
LIST_GROUPS: _Final = 16
SASL_HANDSHAKE: _Final = 17
API_VERSIONS: _Final = 18
CREATE_TOPICS: _Final = 19
DELETE_TOPICS: _Final = 20
DELETE_RECORDS: _Final = 21
INIT_PRODUCER_ID: _Final = 22
OFFSET_FOR_LEADER_EPOCH: _Final = 23
DESCRIBE_ACLS: _Final = 29
CREATE_ACLS: _Final = 30
DELETE_ACLS: _Final = 31
DESCRIBE_CONFIGS: _Final = 32
ALTER_CONFIGS: _Final = 33
ALTER_REPLICA_LOG_DIRS: _Final = 34
DESCRIBE_LOG_DIRS: _Final = 35
SASL_AUTHENTICATE: _Final = 36
CREATE_PARTITIONS: _Final = 37
DELETE_GROUPS: _Final = 42
ELECT_LEADERS: _Final = 43
INCREMENTAL_ALTER_CONFIGS: _Final = 44
ALTER_PARTITION_REASSIGNMENTS: _Final = 45
LIST_PARTITION_REASSIGNMENTS: _Final = 46
OFFSET_DELETE: _Final = 47
DESCRIBE_USER_SCRAM_CREDENTIALS: _Final = 50
ALTER_USER_SCRAM_CREDENTIALS: _Final = 51
DESCRIBE_CLUSTER: _Final = 60
#: KIP-879's CreateReplicaPlacement, at the key the controller's codec uses (flexible v0; a
#: project key, not Kafka's).
CREATE_REPLICA_PLACEMENT: _Final = 10879
