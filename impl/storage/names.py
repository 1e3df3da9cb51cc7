"""Names on disk: partition dirs (``topic-partition``, ``.move``, ``.delete``) and segment files.

This module is a sans-IO core.
"""

from __future__ import annotations

import enum
import re
from typing import NamedTuple

__sans_io__ = True

MOVE_SUFFIX = ".move"
DELETE_SUFFIX = ".delete"
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


class TopicPartition(NamedTuple):
    """A partition of a topic; ``str(tp)`` is its dir name ``topic-partition``."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class DirKind(enum.Enum):
    """What a partition dir is, from its suffix (KIP-113 §1)."""

    LIVE = ""  #: KIP-113 §1: ``topic-partition``, the served copy
    MOVE = MOVE_SUFFIX  #: KIP-113 §1: ``topic-partition.move``, a destination being filled
    DELETE = DELETE_SUFFIX  #: KIP-113 §1 step 6: ``topic-partition.delete``, awaiting deletion


def dir_name(tp: TopicPartition, kind: DirKind = DirKind.LIVE) -> str:
    """``topic-partition`` plus the kind's suffix."""
    return f"{tp}{kind.value}"


def parse_dir_name(name: str) -> tuple[TopicPartition, DirKind] | None:
    """The partition and kind a dir name denotes, or ``None`` for anything else."""
    kind = DirKind.LIVE
    for candidate in (DirKind.MOVE, DirKind.DELETE):
        if name.endswith(candidate.value):
            kind = candidate
            name = name[: -len(candidate.value)]
            break
    topic, dash, partition = name.rpartition("-")
    if not dash or not partition.isdigit() or not _TOPIC.match(topic):
        return None
    if partition != str(int(partition)):
        return None
    return TopicPartition(topic, int(partition)), kind


def segment_log_name(base_offset: int) -> str:
    """``<20-digit base offset>.log``, as Kafka names segments."""
    return f"{base_offset:020d}{LOG_SUFFIX}"


def segment_index_name(base_offset: int) -> str:
    """``<20-digit base offset>.index``."""
    return f"{base_offset:020d}{INDEX_SUFFIX}"


def segment_timeindex_name(base_offset: int) -> str:
    """``<20-digit base offset>.timeindex`` (Kafka's sparse time index)."""
    return f"{base_offset:020d}{TIMEINDEX_SUFFIX}"


def parse_segment_name(name: str) -> tuple[int, str] | None:
    """``(base offset, suffix)`` of a segment file name, or ``None``."""
    stem, dot, suffix = name.partition(".")
    if not dot or len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem), "." + suffix
