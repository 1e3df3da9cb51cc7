"""Replica placement (KIP-879): the pluggable :class:`ReplicaPlacer` interface, Kafka's two
built-in assignments, the multi-level rack-aware placer, and the ``PLACEMENT_SPREAD`` check.

The controller calls :func:`place_replicas` with the placer :func:`load_replica_placer` built
from ``broker.replica.placer``; everything here is sans-IO (the wire client is
:mod:`impl.controller.placement.client`).
"""

from ._driver import BROKER_RACK_CONFIG as BROKER_RACK_CONFIG
from ._driver import BROKER_REPLICA_PLACER_CONFIG as BROKER_REPLICA_PLACER_CONFIG
from ._driver import BUILT_IN_PLACERS as BUILT_IN_PLACERS
from ._driver import DEFAULT_REPLICA_PLACER as DEFAULT_REPLICA_PLACER
from ._driver import load_replica_placer as load_replica_placer
from ._driver import place_replicas as place_replicas
from ._driver import placer_name as placer_name
from ._driver import propose_reassignment as propose_reassignment
from ._errors import INVALID_CONFIG as INVALID_CONFIG
from ._errors import INVALID_PARTITIONS as INVALID_PARTITIONS
from ._errors import INVALID_REPLICA_ASSIGNMENT as INVALID_REPLICA_ASSIGNMENT
from ._errors import INVALID_REPLICATION_FACTOR as INVALID_REPLICATION_FACTOR
from ._errors import PlacementError as PlacementError
from ._kafka import RACK_AWARE as RACK_AWARE
from ._kafka import RACK_UNAWARE as RACK_UNAWARE
from ._kafka import RackAwarePlacer as RackAwarePlacer
from ._kafka import RackUnawarePlacer as RackUnawarePlacer
from ._kafka import follower_index as follower_index
from ._kafka import rack_alternated_brokers as rack_alternated_brokers
from ._kafka import rack_aware_assignment as rack_aware_assignment
from ._kafka import rack_unaware_assignment as rack_unaware_assignment
from ._multi_level import MULTI_LEVEL as MULTI_LEVEL
from ._multi_level import MultiLevelRackPlacer as MultiLevelRackPlacer
from ._multi_level import PlacementEvent as PlacementEvent
from ._multi_level import PlacementState as PlacementState
from ._multi_level import RackNode as RackNode
from ._multi_level import RackTree as RackTree
from ._multi_level import RingWalk as RingWalk
from ._multi_level import build_rack_tree as build_rack_tree
from ._multi_level import parse_rack as parse_rack
from ._multi_level import rack_name as rack_name
from ._protocol import (
    CREATE_REPLICA_PLACEMENT_API_KEY as CREATE_REPLICA_PLACEMENT_API_KEY,
)
from ._protocol import (
    CREATE_REPLICA_PLACEMENT_MAX_VERSION as CREATE_REPLICA_PLACEMENT_MAX_VERSION,
)
from ._protocol import (
    CREATE_REPLICA_PLACEMENT_MIN_VERSION as CREATE_REPLICA_PLACEMENT_MIN_VERSION,
)
from ._protocol import (
    CREATE_REPLICA_PLACEMENT_REQUEST_HEADER_VERSION,
    CREATE_REPLICA_PLACEMENT_RESPONSE_HEADER_VERSION,
)
from ._protocol import CreateReplicaPlacementRequest as CreateReplicaPlacementRequest
from ._protocol import CreateReplicaPlacementResponse as CreateReplicaPlacementResponse
from ._protocol import PartitionPlacement as PartitionPlacement
from ._protocol import PlacementWireError as PlacementWireError
from ._protocol import RequestHeader as RequestHeader
from ._protocol import (
    answer_create_replica_placement as answer_create_replica_placement,
)
from ._protocol import (
    decode_create_replica_placement_request as decode_create_replica_placement_request,
)
from ._protocol import (
    decode_create_replica_placement_response as decode_create_replica_placement_response,
)
from ._protocol import (
    encode_create_replica_placement_request as encode_create_replica_placement_request,
)
from ._protocol import (
    encode_create_replica_placement_response as encode_create_replica_placement_response,
)
from ._protocol import encode_request_header as encode_request_header
from ._protocol import handle_create_replica_placement as handle_create_replica_placement
from ._protocol import parse_request_payload as parse_request_payload
from ._protocol import parse_response_payload as parse_response_payload
from ._protocol import request_frame as request_frame
from ._protocol import response_frame as response_frame
from ._selector import ReplicaView as ReplicaView
from ._selector import rack_distance_levels as rack_distance_levels
from ._selector import select_preferred_read_replica as select_preferred_read_replica
from ._spread import PLACEMENT_SPREAD as PLACEMENT_SPREAD
from ._spread import SpreadViolation as SpreadViolation
from ._spread import check_placement_spread as check_placement_spread
from ._spread import placement_spread_holds as placement_spread_holds
from ._spread import placement_spread_violations as placement_spread_violations
from ._types import Assignment as Assignment
from ._types import BrokerInfo as BrokerInfo
from ._types import ClusterView as ClusterView
from ._types import PlacementSpec as PlacementSpec
from ._types import ReplicaPlacer as ReplicaPlacer
from ._types import TopicPartition as TopicPartition
from ._validate import PARTITION_COUNT_MAX as PARTITION_COUNT_MAX
from ._validate import REPLICATION_FACTOR_MAX as REPLICATION_FACTOR_MAX
from ._validate import usable_brokers as usable_brokers
from ._validate import validate_assignment as validate_assignment

__sans_io__ = True

__all__ = [
    "BROKER_RACK_CONFIG",
    "BROKER_REPLICA_PLACER_CONFIG",
    "BUILT_IN_PLACERS",
    "CREATE_REPLICA_PLACEMENT_API_KEY",
    "CREATE_REPLICA_PLACEMENT_MAX_VERSION",
    "CREATE_REPLICA_PLACEMENT_MIN_VERSION",
    "CREATE_REPLICA_PLACEMENT_REQUEST_HEADER_VERSION",
    "CREATE_REPLICA_PLACEMENT_RESPONSE_HEADER_VERSION",
    "DEFAULT_REPLICA_PLACER",
    "INVALID_CONFIG",
    "INVALID_PARTITIONS",
    "INVALID_REPLICATION_FACTOR",
    "INVALID_REPLICA_ASSIGNMENT",
    "MULTI_LEVEL",
    "PARTITION_COUNT_MAX",
    "PLACEMENT_SPREAD",
    "RACK_AWARE",
    "RACK_UNAWARE",
    "REPLICATION_FACTOR_MAX",
    "Assignment",
    "BrokerInfo",
    "ClusterView",
    "CreateReplicaPlacementRequest",
    "CreateReplicaPlacementResponse",
    "MultiLevelRackPlacer",
    "PartitionPlacement",
    "PlacementError",
    "PlacementEvent",
    "PlacementSpec",
    "PlacementState",
    "PlacementWireError",
    "RackAwarePlacer",
    "RackNode",
    "RackTree",
    "RackUnawarePlacer",
    "ReplicaPlacer",
    "ReplicaView",
    "RequestHeader",
    "RingWalk",
    "SpreadViolation",
    "TopicPartition",
    "answer_create_replica_placement",
    "build_rack_tree",
    "check_placement_spread",
    "decode_create_replica_placement_request",
    "decode_create_replica_placement_response",
    "encode_create_replica_placement_request",
    "encode_create_replica_placement_response",
    "encode_request_header",
    "follower_index",
    "handle_create_replica_placement",
    "load_replica_placer",
    "parse_rack",
    "parse_request_payload",
    "parse_response_payload",
    "place_replicas",
    "placement_spread_holds",
    "placement_spread_violations",
    "placer_name",
    "propose_reassignment",
    "rack_alternated_brokers",
    "rack_aware_assignment",
    "rack_distance_levels",
    "rack_name",
    "rack_unaware_assignment",
    "request_frame",
    "response_frame",
    "select_preferred_read_replica",
    "usable_brokers",
    "validate_assignment",
]
