"""Storage configuration, one field per Kafka broker setting (named in each docstring).

This module is a sans-IO core.
"""

from __future__ import annotations

from dataclasses import dataclass

__sans_io__ = True

UNLIMITED_RATE = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class StorageConfig:
    """The storage engine's settings.

    Attributes:
        log_dirs: ``log.dirs``: absolute paths, one per disk (JBOD).
        broker_id: ``broker.id``, written to each dir's ``meta.properties``.
        segment_bytes: ``log.segment.bytes``: roll the active segment at this size.
        roll_ms: ``log.roll.ms``: roll a non-empty active segment this old.
        retention_ms: ``log.retention.ms``: delete segments whose newest record is older
            (-1: keep forever).
        retention_bytes: ``log.retention.bytes``: delete oldest segments while the log is larger
            (-1: no limit).
        message_max_bytes: ``message.max.bytes``: largest batch accepted.
        index_interval_bytes: ``log.index.interval.bytes``: bytes between sparse index entries.
        intra_broker_throttled_rate: ``intra.broker.throttled.rate`` (KIP-113; Kafka ships it as
            ``replica.alter.log.dirs.io.max.bytes.per.second``): bytes per second shared by all
            movers; the default is unlimited.
        num_replica_alter_log_dirs_threads: ``num.replica.alter.log.dirs.threads``: concurrent
            movers; ``None`` means the number of log dirs (KIP-113's default).
        move_chunk_bytes: bytes a mover copies between throttle checks and event-loop yields.
        file_delete_delay_ms: ``file.delete.delay.ms``: wait before removing a ``.delete`` dir.
        flush_interval_ms: ``log.flush.scheduler.interval.ms``: how often logs are fsynced and the
            recovery-point checkpoint written by :meth:`LogManager.run`.
        checkpoint_interval_ms: ``replica.high.watermark.checkpoint.interval.ms``.
        retention_check_interval_ms: ``log.retention.check.interval.ms``.
    """

    log_dirs: tuple[str, ...]
    broker_id: int = 0
    segment_bytes: int = 1 << 30
    roll_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    message_max_bytes: int = 1_048_588
    index_interval_bytes: int = 4096
    intra_broker_throttled_rate: int = UNLIMITED_RATE
    num_replica_alter_log_dirs_threads: int | None = None
    move_chunk_bytes: int = 8 << 20
    file_delete_delay_ms: int = 0
    flush_interval_ms: int = 1000
    checkpoint_interval_ms: int = 5000
    retention_check_interval_ms: int = 300_000

    def __post_init__(self) -> None:
        assert self.log_dirs, "log.dirs must name at least one dir"
        assert all(d.startswith("/") for d in self.log_dirs), "log.dirs must be absolute"
        assert len(set(self.log_dirs)) == len(self.log_dirs), "log.dirs has duplicates"
        assert self.segment_bytes > 0
        assert self.move_chunk_bytes > 0

    @property
    def mover_count(self) -> int:
        """``num.replica.alter.log.dirs.threads`` with KIP-113's default applied."""
        if self.num_replica_alter_log_dirs_threads is None:
            return len(self.log_dirs)
        return self.num_replica_alter_log_dirs_threads
