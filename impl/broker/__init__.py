"""The broker: Kafka wire protocol on trio, request handlers, replication, admin client.

Public surface:

- :class:`Broker` (one broker: storage, server, ZooKeeper registration, controller candidate)
  with :class:`BrokerConfig`, :func:`load_config` and :class:`ConfigError`;
- :class:`AdminClient` (KIP-113's ``alter_replica_log_dirs``, ``describe_log_dirs``,
  ``describe_replica_log_dirs``, plus topic creation and deletion) speaking the wire protocol;
- :func:`run_demo` (the broker part of ``logproof demo``);
- the sans-IO cores: :mod:`impl.broker.replication` (controller fencing, leader epochs, HW,
  ISR), :mod:`impl.broker.producer_state` (idempotence), :mod:`impl.broker.topic_names`,
  :mod:`impl.broker.metadata_cache`, :mod:`impl.broker.fetch_response`,
  :mod:`impl.broker.controller_wire`, :mod:`impl.broker.log_dir_moves`,
  :mod:`impl.broker.api_versions`.
"""

from .admin import AdminClient as AdminClient
from .admin import AdminClientError as AdminClientError
from .admin import LogDirInfo as LogDirInfo
from .admin import ReplicaInfo as ReplicaInfo
from .admin import ReplicaLogDirInfo as ReplicaLogDirInfo
from .admin import TopicPartitionReplica as TopicPartitionReplica
from .broker import Broker as Broker
from .config import BrokerConfig as BrokerConfig
from .config import ConfigError as ConfigError
from .config import load_config as load_config
from .demo import run_demo as run_demo
from .demo_cluster import run_cluster_demo as run_cluster_demo

__all__ = [
    "AdminClient",
    "AdminClientError",
    "Broker",
    "BrokerConfig",
    "ConfigError",
    "LogDirInfo",
    "ReplicaInfo",
    "ReplicaLogDirInfo",
    "TopicPartitionReplica",
    "load_config",
    "run_cluster_demo",
    "run_demo",
]
