"""Idempotent-producer state per partition: Kafka's ``ProducerStateManager`` sequence checks.

For each producer id the partition remembers the producer epoch and the metadata of its last
:data:`BATCHES_KEPT` appended batches (first/last sequence, first/last offset). A produce batch
with a producer id is checked before it is appended:

* an older epoch than the one recorded: INVALID_PRODUCER_EPOCH (47);
* a newer epoch: the sequence must restart at 0, else OUT_OF_ORDER_SEQUENCE_NUMBER (45);
* the same epoch and the same first and last sequence as a remembered batch: a retry of a batch
  already in the log, answered with that batch's offsets and nothing appended (KAFKA-5793);
* the same epoch: the first sequence must follow the last one (wrapping at 2**31-1), else
  OUT_OF_ORDER_SEQUENCE_NUMBER (45);
* an unknown producer (no state: new, or its batches expired): any sequence is accepted, as Kafka
  does, since the state may have been lost with the log's old segments.

The state is rebuilt from the batch headers of the log (:meth:`PartitionProducerState.replay`)
when a partition is loaded, so a restarted broker still rejects duplicates.

This module is a sans-IO core.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field
from typing import Final

__sans_io__ = True

BATCHES_KEPT: Final = 5
SEQUENCE_MAX: Final = 2**31 - 1
OUT_OF_ORDER_SEQUENCE_NUMBER: Final = 45
INVALID_PRODUCER_EPOCH: Final = 47


class SequenceVerdict(enum.Enum):
    """What to do with a batch."""

    APPEND = enum.auto()  #: new data in order: append it
    DUPLICATE = enum.auto()  #: a retry of a batch already appended: answer its offsets
    REJECT = enum.auto()  #: answer ``error_code``, append nothing


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """Sequence and offset range of one appended batch."""

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class SequenceCheck:
    """The verdict for one batch; ``duplicate_of`` is set for DUPLICATE."""

    verdict: SequenceVerdict
    error_code: int = 0
    duplicate_of: BatchMetadata | None = None


@dataclass(slots=True)
class _ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))


def last_sequence_of(first_sequence: int, record_count: int) -> int:
    """The last sequence of a batch (sequences wrap from 2**31-1 to 0)."""
    assert record_count > 0
    return (first_sequence + record_count - 1) % (SEQUENCE_MAX + 1)


def _next_sequence(sequence: int) -> int:
    return 0 if sequence == SEQUENCE_MAX else sequence + 1


class PartitionProducerState:
    """The idempotence state of one partition's log."""

    def __init__(self) -> None:
        self._producers: dict[int, _ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def check(
        self, producer_id: int, producer_epoch: int, first_sequence: int, record_count: int
    ) -> SequenceCheck:
        """Decide what to do with a batch from an idempotent producer (``producer_id >= 0``).

        Args:
            producer_id: the batch's producer id.
            producer_epoch: its producer epoch.
            first_sequence: its base sequence.
            record_count: its record count (> 0).

        Returns:
            APPEND, DUPLICATE (with the earlier batch's offsets) or REJECT (with an error code).
        """
        assert producer_id >= 0
        entry = self._producers.get(producer_id)
        if entry is None:
            return SequenceCheck(SequenceVerdict.APPEND)
        last_sequence = last_sequence_of(first_sequence, record_count)
        if producer_epoch < entry.epoch:
            return SequenceCheck(SequenceVerdict.REJECT, INVALID_PRODUCER_EPOCH)
        if producer_epoch > entry.epoch:
            if first_sequence != 0:
                return SequenceCheck(SequenceVerdict.REJECT, OUT_OF_ORDER_SEQUENCE_NUMBER)
            return SequenceCheck(SequenceVerdict.APPEND)
        for batch in entry.batches:
            if batch.first_sequence == first_sequence and batch.last_sequence == last_sequence:
                return SequenceCheck(SequenceVerdict.DUPLICATE, duplicate_of=batch)
        if not entry.batches:
            return SequenceCheck(SequenceVerdict.APPEND)
        if first_sequence != _next_sequence(entry.batches[-1].last_sequence):
            return SequenceCheck(SequenceVerdict.REJECT, OUT_OF_ORDER_SEQUENCE_NUMBER)
        return SequenceCheck(SequenceVerdict.APPEND)

    def record(
        self,
        producer_id: int,
        producer_epoch: int,
        *,
        first_sequence: int,
        record_count: int,
        first_offset: int,
        last_offset: int,
    ) -> None:
        """Remember a batch that was appended at [first_offset, last_offset].

        Called after a successful append (leader) and for every batch when replaying a log.
        """
        assert producer_id >= 0
        assert last_offset >= first_offset
        entry = self._producers.get(producer_id)
        if entry is None or producer_epoch > entry.epoch:
            entry = _ProducerEntry(producer_epoch)
            self._producers[producer_id] = entry
        elif producer_epoch < entry.epoch:
            return
        entry.batches.append(
            BatchMetadata(
                first_sequence,
                last_sequence_of(first_sequence, record_count),
                first_offset,
                last_offset,
            )
        )

    def replay(
        self,
        producer_id: int,
        producer_epoch: int,
        *,
        first_sequence: int,
        record_count: int,
        first_offset: int,
        last_offset: int,
    ) -> None:
        """Rebuild state from one batch header read back from the log (same as :meth:`record`,
        ignoring non-idempotent batches)."""
        if producer_id < 0 or first_sequence < 0:
            return
        self.record(
            producer_id,
            producer_epoch,
            first_sequence=first_sequence,
            record_count=record_count,
            first_offset=first_offset,
            last_offset=last_offset,
        )

