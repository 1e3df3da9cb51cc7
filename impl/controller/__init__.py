"""The controller side: ZooKeeper (embedded server, adapter), controller logic, placement.

Public surface:

- the Coordinator port (:class:`Coordinator`, its ops, results, events and errors) and its real
  adapter :class:`KazooCoordinator` (kazoo, bridged into trio);
- the controller-to-broker requests (:class:`LeaderAndIsrRequest`, :class:`StopReplicaRequest`,
  :class:`UpdateMetadataRequest`) and :class:`ControllerResponse`;
- :class:`ControllerService`, the controller (election, fencing, failover, broker failure,
  topics, log-dir failure, reassignment) run inside each broker with the broker's ``send``; its
  sans-IO core :class:`Controller` and the machine's names (:class:`ControllerEvent`,
  :class:`PartitionState`, :class:`ReplicaState`, :class:`ReassignmentPhase`);
- the znode formats (:mod:`impl.controller.znodes`);
- the ZooKeeper-side helpers of brokers and administrators (:func:`register_broker`,
  :func:`create_topic`, :func:`delete_topic`, :func:`add_partitions`,
  :func:`reassign_partitions`, :func:`notify_log_dir_failure`, :func:`update_isr`).
"""

from ._kazoo import KazooCoordinator as KazooCoordinator
from ._kazoo import expire_session as expire_session
from ._service import ControllerService as ControllerService
from ._service import SendFunction as SendFunction
from ._zookeeper_server import EmbeddedZooKeeper as EmbeddedZooKeeper
from ._zookeeper_server import ZooKeeperUnavailableError as ZooKeeperUnavailableError
from ._zookeeper_server import find_free_loopback_port as find_free_loopback_port
from ._zookeeper_server import four_letter_word as four_letter_word
from .admin import AdminError as AdminError
from .admin import BrokerIdInUseError as BrokerIdInUseError
from .admin import IsrUpdateFencedError as IsrUpdateFencedError
from .admin import ReassignmentInProgressError as ReassignmentInProgressError
from .admin import TopicExistsError as TopicExistsError
from .admin import UnknownTopicError as UnknownTopicError
from .admin import add_partitions as add_partitions
from .admin import create_topic as create_topic
from .admin import delete_topic as delete_topic
from .admin import ensure_cluster_paths as ensure_cluster_paths
from .admin import notify_log_dir_failure as notify_log_dir_failure
from .admin import read_live_brokers as read_live_brokers
from .admin import read_partition_state as read_partition_state
from .admin import read_topic as read_topic
from .admin import reassign_partitions as reassign_partitions
from .admin import register_broker as register_broker
from .admin import update_isr as update_isr
from .controller import Controller as Controller
from .controller import ControllerConfig as ControllerConfig
from .controller import ControllerEvent as ControllerEvent
from .controller import PartitionState as PartitionState
from .controller import ReplicaState as ReplicaState
from .coordinator import ANY_VERSION as ANY_VERSION
from .coordinator import BadArgumentsError as BadArgumentsError
from .coordinator import BadVersionError as BadVersionError
from .coordinator import CheckOp as CheckOp
from .coordinator import CheckResult as CheckResult
from .coordinator import ConnectionLossError as ConnectionLossError
from .coordinator import Coordinator as Coordinator
from .coordinator import CoordinatorClosedError as CoordinatorClosedError
from .coordinator import CoordinatorError as CoordinatorError
from .coordinator import CoordinatorEvent as CoordinatorEvent
from .coordinator import CreateOp as CreateOp
from .coordinator import CreateResult as CreateResult
from .coordinator import DeleteOp as DeleteOp
from .coordinator import DeleteResult as DeleteResult
from .coordinator import NoChildrenForEphemeralsError as NoChildrenForEphemeralsError
from .coordinator import NodeExistsError as NodeExistsError
from .coordinator import NodeStat as NodeStat
from .coordinator import NoNodeError as NoNodeError
from .coordinator import NotEmptyError as NotEmptyError
from .coordinator import Op as Op
from .coordinator import OpResult as OpResult
from .coordinator import RolledBackError as RolledBackError
from .coordinator import SessionEvent as SessionEvent
from .coordinator import SessionExpiredError as SessionExpiredError
from .coordinator import SessionState as SessionState
from .coordinator import SetOp as SetOp
from .coordinator import SetResult as SetResult
from .coordinator import WatchEvent as WatchEvent
from .coordinator import WatchEventType as WatchEventType
from .coordinator import WatchKind as WatchKind
from .reassignment import ReassignmentPhase as ReassignmentPhase
from .requests import ERROR_KAFKA_STORAGE_ERROR as ERROR_KAFKA_STORAGE_ERROR
from .requests import ERROR_NONE as ERROR_NONE
from .requests import ERROR_STALE_BROKER_EPOCH as ERROR_STALE_BROKER_EPOCH
from .requests import ERROR_STALE_CONTROLLER_EPOCH as ERROR_STALE_CONTROLLER_EPOCH
from .requests import NO_LEADER as NO_LEADER
from .requests import BrokerEndpoint as BrokerEndpoint
from .requests import ControllerRequest as ControllerRequest
from .requests import ControllerResponse as ControllerResponse
from .requests import LeaderAndIsrPartitionState as LeaderAndIsrPartitionState
from .requests import LeaderAndIsrRequest as LeaderAndIsrRequest
from .requests import StopReplicaPartition as StopReplicaPartition
from .requests import StopReplicaRequest as StopReplicaRequest
from .requests import UpdateMetadataPartitionState as UpdateMetadataPartitionState
from .requests import UpdateMetadataRequest as UpdateMetadataRequest
from .znodes import BrokerRegistration as BrokerRegistration
from .znodes import LeaderIsr as LeaderIsr
from .znodes import ListenerEndpoint as ListenerEndpoint
from .znodes import ReassignmentTarget as ReassignmentTarget
from .znodes import TopicAssignment as TopicAssignment
from .znodes import ZnodeFormatError as ZnodeFormatError

__all__ = [
    "ANY_VERSION",
    "ERROR_KAFKA_STORAGE_ERROR",
    "ERROR_NONE",
    "ERROR_STALE_BROKER_EPOCH",
    "ERROR_STALE_CONTROLLER_EPOCH",
    "NO_LEADER",
    "AdminError",
    "BadArgumentsError",
    "BadVersionError",
    "BrokerEndpoint",
    "BrokerIdInUseError",
    "BrokerRegistration",
    "CheckOp",
    "CheckResult",
    "ConnectionLossError",
    "Controller",
    "ControllerConfig",
    "ControllerEvent",
    "ControllerRequest",
    "ControllerResponse",
    "ControllerService",
    "Coordinator",
    "CoordinatorClosedError",
    "CoordinatorError",
    "CoordinatorEvent",
    "CreateOp",
    "CreateResult",
    "DeleteOp",
    "DeleteResult",
    "EmbeddedZooKeeper",
    "IsrUpdateFencedError",
    "KazooCoordinator",
    "LeaderAndIsrPartitionState",
    "LeaderAndIsrRequest",
    "LeaderIsr",
    "ListenerEndpoint",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeExistsError",
    "NodeStat",
    "NotEmptyError",
    "Op",
    "OpResult",
    "PartitionState",
    "ReassignmentInProgressError",
    "ReassignmentPhase",
    "ReassignmentTarget",
    "ReplicaState",
    "RolledBackError",
    "SendFunction",
    "SessionEvent",
    "SessionExpiredError",
    "SessionState",
    "SetOp",
    "SetResult",
    "StopReplicaPartition",
    "StopReplicaRequest",
    "TopicAssignment",
    "TopicExistsError",
    "UnknownTopicError",
    "UpdateMetadataPartitionState",
    "UpdateMetadataRequest",
    "WatchEvent",
    "WatchEventType",
    "WatchKind",
    "ZnodeFormatError",
    "ZooKeeperUnavailableError",
    "add_partitions",
    "create_topic",
    "delete_topic",
    "ensure_cluster_paths",
    "expire_session",
    "find_free_loopback_port",
    "four_letter_word",
    "notify_log_dir_failure",
    "read_live_brokers",
    "read_partition_state",
    "read_topic",
    "reassign_partitions",
    "register_broker",
    "update_isr",
]
