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

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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

#: the public names and the modules they live in, imported on first use (PEP 562): importing a
#: sans-IO core of this package (the simulator imports several) must not import the server, trio,
#: kio and what kio imports (hypothesis, 0.2 s) with it
_LAZY = {
    "AdminClient": ".admin",
    "AdminClientError": ".admin",
    "LogDirInfo": ".admin",
    "ReplicaInfo": ".admin",
    "ReplicaLogDirInfo": ".admin",
    "TopicPartitionReplica": ".admin",
    "Broker": ".broker",
    "BrokerConfig": ".config",
    "ConfigError": ".config",
    "load_config": ".config",
    "run_demo": ".demo",
    "run_cluster_demo": ".demo_cluster",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


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
