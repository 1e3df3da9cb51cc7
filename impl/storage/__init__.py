"""The storage engine: log format, segments, log dirs (JBOD), replica moves, recovery, disk failure.

The broker uses this facade only:

* :class:`LogManager` — ``LogManager.open(StorageConfig(log_dirs=(...), ...))`` loads every log
  dir, recovers from a crash (KIP-113 §3) and takes unreadable dirs offline (KIP-112). Then
  ``impl.storage.runtime.run_log_manager(manager, nursery)`` starts movers, ``.delete``
  removal, periodic flush/checkpoints and retention (the manager itself has no event loop: a
  simulator drives the same ``mover_slots()``/``mover_action()``); ``manager.close()`` writes
  checkpoints. Per partition: ``get(tp)``,
  ``create(tp, is_new)``, ``delete(tp)``; admin: ``describe()`` (DescribeLogDirs),
  ``alter_replica_log_dir(tp, dir) -> ErrorCode`` (AlterReplicaLogDirs),
  ``replica_dir_info(tp)`` (DescribeReplicaLogDirs, move progress for ``reassign --verify``),
  ``move_state(tp)``, ``offline_dirs``, ``offline_replicas``, ``set_dir_failure_callback``,
  ``set_throttle_rate`` (``intra.broker.throttled.rate``), ``set_mover_count``
  (``num.replica.alter.log.dirs.threads``); per-topic configs: ``log_config(topic)`` (the
  effective :class:`LogConfig`: ``segment.*``, ``retention.*``, ``cleanup.policy``,
  ``min.cleanable.dirty.ratio``, ``delete.retention.ms``, ``max.message.bytes`` ...),
  ``set_log_config(topic, config)``, ``set_default_log_config(config)``.
* :class:`PartitionLog` — ``log_start_offset``, ``log_end_offset``, settable
  ``high_watermark``, ``await append_as_leader(records, leader_epoch)`` and
  ``await append_as_follower(records)`` (both return :class:`AppendInfo`),
  ``read(fetch_offset, max_bytes, max_offset)`` returning :class:`FileSlice` objects (each owns
  a duplicated descriptor, valid across segment deletion and move swaps; the caller closes it;
  ``os.sendfile(sock, s.fileno(), s.position, s.size)``), ``truncate_to(offset)``,
  ``assign_epoch(epoch, start_offset)``, ``end_offset_for_epoch(epoch)`` (KIP-279),
  ``offset_for_timestamp(ts_ms)``.
* :mod:`impl.storage.record_batch` — ``validate_client_records`` for Produce validation, and
  ``build_batch`` for tests.
* Errors (:mod:`impl.storage.errors`) carry the Kafka ``error_code`` to answer with.

The :class:`Disk` port (``impl/storage/disk.py``) is what a simulated disk implements.
"""

from impl.storage.config import UNLIMITED_RATE, StorageConfig
from impl.storage.disk import Disk, DiskUsage, FileSlice
from impl.storage.errors import (
    CorruptBatch,
    ErrorCode,
    InvalidRecord,
    LogDirOffline,
    MessageTooLarge,
    OffsetOutOfRange,
    RecordBatchError,
    ReplicaNotAvailable,
    StorageError,
)
from impl.storage.log_config import LogConfig
from impl.storage.log_dir_failure import LogDirEvent, LogDirState, ReplicaStorageState
from impl.storage.manager import (
    AppendInfo,
    DirFailureCallback,
    LogDirDescription,
    LogManager,
    PartitionLog,
    ReplicaDescription,
    ReplicaDirInfo,
)
from impl.storage.move_recovery import RecoveryRule
from impl.storage.names import TopicPartition
from impl.storage.replica_move import Move, MoveEvent, MoveState

__all__ = [
    "UNLIMITED_RATE",
    "AppendInfo",
    "CorruptBatch",
    "DirFailureCallback",
    "Disk",
    "DiskUsage",
    "ErrorCode",
    "FileSlice",
    "InvalidRecord",
    "LogConfig",
    "LogDirDescription",
    "LogDirEvent",
    "LogDirOffline",
    "LogDirState",
    "LogManager",
    "MessageTooLarge",
    "Move",
    "MoveEvent",
    "MoveState",
    "OffsetOutOfRange",
    "PartitionLog",
    "RecordBatchError",
    "RecoveryRule",
    "ReplicaDescription",
    "ReplicaDirInfo",
    "ReplicaNotAvailable",
    "ReplicaStorageState",
    "StorageConfig",
    "StorageError",
    "TopicPartition",
]
