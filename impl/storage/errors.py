"""Storage errors, by blame, each carrying the Kafka error code a broker answers with.

* The client sent something invalid: :class:`InvalidRecord` (87), :class:`MessageTooLarge` (10),
  :class:`InvalidTimestamp` (32),
  :class:`CorruptBatch` (2) when raised while validating a produce request.
* The disk is bad: :class:`CorruptBatch` when raised while reading or recovering a segment,
  :class:`LogDirOffline` (KAFKA_STORAGE_ERROR, 56).
* The request names something we do not have: :class:`OffsetOutOfRange` (1).
* Our own invariant broke: ``assert`` (never one of these).

This module is a sans-IO core.
"""

from __future__ import annotations

import enum

__sans_io__ = True


class ErrorCode(enum.IntEnum):
    """The Kafka protocol error codes the storage engine produces (``Errors.java``)."""

    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    NOT_LEADER_OR_FOLLOWER = 6
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    INVALID_RECORD = 87


class StorageError(Exception):
    """Base of the storage errors; ``error_code`` is what the broker puts in its response."""

    error_code: ErrorCode = ErrorCode.KAFKA_STORAGE_ERROR


class RecordBatchError(StorageError):
    """A record batch failed validation; the log is left untouched."""


class CorruptBatch(RecordBatchError):  # noqa: N818 (names from STYLE.md and Kafka)
    """CORRUPT_MESSAGE (2): bad CRC, batch shorter than its header, truncated, or unknown magic."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class InvalidRecord(RecordBatchError):  # noqa: N818 (names from STYLE.md and Kafka)
    """INVALID_RECORD (87): a well-formed batch a client may not send (non-zero base offset,
    record count inconsistent with the offset delta, a control batch, magic v0/v1 on produce)."""

    error_code = ErrorCode.INVALID_RECORD


class MessageTooLarge(RecordBatchError):  # noqa: N818 (names from STYLE.md and Kafka)
    """MESSAGE_TOO_LARGE (10): a batch larger than ``message.max.bytes``."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


class InvalidTimestamp(RecordBatchError):  # noqa: N818 (names from STYLE.md and Kafka)
    """INVALID_TIMESTAMP (32): a CREATE_TIME record stamped further from the broker's clock than
    ``message.timestamp.difference.max.ms``."""

    error_code = ErrorCode.INVALID_TIMESTAMP


class OffsetOutOfRange(StorageError):  # noqa: N818 (names from STYLE.md and Kafka)
    """OFFSET_OUT_OF_RANGE (1): the fetch offset is outside [log start offset, LEO]."""

    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class LogDirOffline(StorageError):  # noqa: N818 (names from STYLE.md and Kafka)
    """KAFKA_STORAGE_ERROR (56): the replica's log dir failed (KIP-112); the replica is offline."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR

    def __init__(self, log_dir: str, message: str = "") -> None:
        super().__init__(message or f"log dir {log_dir} is offline")
        self.log_dir = log_dir


class AppendNotWanted(StorageError):  # noqa: N818 (names from STYLE.md and Kafka)
    """NOT_LEADER_OR_FOLLOWER (6): the append's guard, asked holding the partition lock, said
    the replica changed role while the append waited (nothing was written)."""

    error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class ReplicaNotAvailable(StorageError):  # noqa: N818 (names from STYLE.md and Kafka)
    """REPLICA_NOT_AVAILABLE (9): this broker hosts no log for the partition (or it is offline
    and may not be recreated, KAFKA-16234)."""

    error_code = ErrorCode.REPLICA_NOT_AVAILABLE
