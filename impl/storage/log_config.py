"""The effective configuration of one topic's logs, as Kafka's ``LogConfig``.

The broker resolves each topic's configuration (topic override, then the broker's dynamic
config, its cluster-wide default, its static properties, then Kafka's default: see
:mod:`impl.broker.configs`) into one :class:`LogConfig` and hands it to the storage engine with
:meth:`impl.storage.LogManager.set_log_config`. Storage code reads the effective value of a
topic with :meth:`impl.storage.LogManager.log_config` (or :attr:`impl.storage.log.Log.log_config`
for one log): rolling (``segment.*``), retention (``retention.*``), the log cleaner
(``cleanup.policy``, ``min.cleanable.dirty.ratio``, ``delete.retention.ms``), the produce path
(``max.message.bytes``, ``message.timestamp.type``, ``min.insync.replicas``) and the
controller's elections (``unclean.leader.election.enable``).

This module is a sans-IO core: plain data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__sans_io__ = True

CLEANUP_DELETE: Final = "delete"
CLEANUP_COMPACT: Final = "compact"
CREATE_TIME: Final = "CreateTime"
LOG_APPEND_TIME: Final = "LogAppendTime"


@dataclass(frozen=True, slots=True)
class LogConfig:
    """One topic's effective log settings (Kafka's topic-level key in each docstring).

    Attributes:
        segment_bytes: ``segment.bytes``: roll the active segment at this size.
        segment_ms: ``segment.ms``: roll a non-empty active segment this old.
        retention_ms: ``retention.ms``: delete segments whose newest record is older (-1: never).
        retention_bytes: ``retention.bytes``: delete oldest segments while larger (-1: no limit).
        cleanup_policy: ``cleanup.policy``: a subset of ``{"delete", "compact"}``.
        min_cleanable_dirty_ratio: ``min.cleanable.dirty.ratio``: clean a compacted log once
            this share of it lies beyond the cleaner point.
        delete_retention_ms: ``delete.retention.ms``: how long a compacted log keeps tombstones.
        max_message_bytes: ``max.message.bytes``: largest record batch accepted from producers.
        message_timestamp_type: ``message.timestamp.type``: ``CreateTime`` or ``LogAppendTime``.
        min_insync_replicas: ``min.insync.replicas``: ISR size an ``acks=all`` produce needs.
        unclean_leader_election_enable: ``unclean.leader.election.enable``: may the controller
            elect a replica outside the ISR when no ISR member is alive.
    """

    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    cleanup_policy: frozenset[str] = frozenset({CLEANUP_DELETE})
    min_cleanable_dirty_ratio: float = 0.5
    delete_retention_ms: int = 86_400_000
    max_message_bytes: int = 1_048_588
    message_timestamp_type: str = CREATE_TIME
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False

    def __post_init__(self) -> None:
        assert self.segment_bytes > 0
        assert self.segment_ms > 0
        assert self.cleanup_policy <= {CLEANUP_DELETE, CLEANUP_COMPACT}
        assert 0.0 <= self.min_cleanable_dirty_ratio <= 1.0
        assert self.message_timestamp_type in (CREATE_TIME, LOG_APPEND_TIME)

    @property
    def compact(self) -> bool:
        """Whether the log cleaner compacts this topic (``cleanup.policy`` has ``compact``)."""
        return CLEANUP_COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """Whether retention deletes old segments (``cleanup.policy`` has ``delete``)."""
        return CLEANUP_DELETE in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        """Whether the broker stamps batches with its own clock (``LogAppendTime``)."""
        return self.message_timestamp_type == LOG_APPEND_TIME


class TopicLogConfigs:
    """The effective :class:`LogConfig` of every topic, replaced whole when a config changes.

    Topics without their own entry use :attr:`default` (the broker-wide values). Readers call
    :meth:`of` each time they need a value, so a change applies to the next roll, retention
    pass, append or cleaning without reopening a log.
    """

    def __init__(self, default: LogConfig) -> None:
        self.default = default
        self._per_topic: dict[str, LogConfig] = {}

    def of(self, topic: str) -> LogConfig:
        """The effective config of ``topic``."""
        return self._per_topic.get(topic, self.default)

    def set(self, topic: str, config: LogConfig | None) -> None:
        """Give ``topic`` its own effective config (None: fall back to the default)."""
        if config is None:
            self._per_topic.pop(topic, None)
        else:
            self._per_topic[topic] = config

    def set_default(self, config: LogConfig) -> None:
        """Replace the broker-wide default."""
        self.default = config
