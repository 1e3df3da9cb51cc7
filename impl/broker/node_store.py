"""The storage engine as a broker node's :class:`~impl.broker.node.NodeStore`.

Both runtimes (the trio broker and the cluster simulator) hand their node this adapter over
their :class:`~impl.storage.manager.LogManager`; only the form of fetched records differs:
:class:`LogManagerStore` returns bytes, the trio broker's subclass file slices (zero copy).
"""

from __future__ import annotations

from collections.abc import Iterable

from impl.storage import record_batch as rb
from impl.storage.manager import LogManager, PartitionLog
from impl.storage.names import TopicPartition


def read_whole_batches(partition: PartitionLog, offset: int, max_bytes: int,
                       max_offset: int | None = None) -> bytes:
    """Whole batches of ``partition`` from ``offset`` (at most ``max_bytes`` unless the first
    batch is larger, KIP-74)."""
    slices = partition.read(offset, max_bytes, max_offset)
    chunks = []
    for piece in slices:
        try:
            chunks.append(piece.read_all())
        finally:
            piece.close()
    return rb.whole_batches(b"".join(chunks))


class LogManagerStore:
    """:class:`~impl.broker.node.NodeStore` over a :class:`LogManager`."""

    def __init__(self, manager: LogManager) -> None:
        self.manager = manager

    def log(self, tp: TopicPartition) -> PartitionLog | None:
        """The online log of ``tp``, or None."""
        partition = self.manager.get(tp)
        if partition is None or partition.offline:
            return None
        return partition

    def is_offline(self, tp: TopicPartition) -> bool:
        """``tp``'s replica is on an offline dir."""
        manager = self.manager
        if tp in manager.offline_replicas:
            return True
        partition = manager.get(tp)
        return partition is not None and bool(partition.offline)

    def any_dir_offline(self) -> bool:
        """Some configured log dir is offline."""
        return bool(self.manager.offline_dirs)

    def offline_replicas(self) -> Iterable[TopicPartition]:
        """The replicas on offline dirs."""
        return self.manager.offline_replicas

    def hosted(self) -> Iterable[TopicPartition]:
        """Every replica with a log here."""
        return self.manager.partitions()

    def create(self, tp: TopicPartition, is_new: bool) -> None:
        """Create ``tp``'s log."""
        self.manager.create(tp, is_new)

    def delete(self, tp: TopicPartition) -> None:
        """Delete ``tp``'s log."""
        self.manager.delete(tp)

    def truncate(self, tp: TopicPartition, offset: int) -> None:
        """Remove ``tp``'s records at and after ``offset``."""
        partition = self.manager.get(tp)
        assert partition is not None
        partition.truncate_to(offset)

    def follow_log_start_offset(self, tp: TopicPartition, leader_log_start_offset: int) -> None:
        """Raise ``tp``'s log start offset towards its leader's (at most its own HW)."""
        partition = self.manager.get(tp)
        assert partition is not None
        partition.maybe_increment_log_start_offset(leader_log_start_offset)

    def delete_records(self, tp: TopicPartition, offset: int) -> None:
        """Make ``offset`` ``tp``'s log start offset, durably (the leader's DeleteRecords)."""
        partition = self.manager.get(tp)
        assert partition is not None
        partition.delete_records(offset)
    def truncate_fully(self, tp: TopicPartition, start_offset: int) -> None:
        """Empty ``tp``'s log and start it at ``start_offset``."""
        partition = self.manager.get(tp)
        assert partition is not None
        partition.truncate_fully_and_start_at(start_offset)

    def offset_for_timestamp(self, tp: TopicPartition, timestamp_ms: int
                             ) -> tuple[int, int] | None:
        """The first record of ``tp`` at or after ``timestamp_ms``."""
        partition = self.manager.get(tp)
        assert partition is not None
        return partition.offset_for_timestamp(timestamp_ms)

    def max_timestamp_record(self, tp: TopicPartition) -> tuple[int, int] | None:
        """The first record of ``tp`` stamped with its largest timestamp."""
        partition = self.manager.get(tp)
        assert partition is not None
        return partition.max_timestamp_record()

    def epoch_entries(self, tp: TopicPartition) -> list[tuple[int, int]]:
        """``tp``'s leader-epoch cache as ``(epoch, start offset)``."""
        partition = self.manager.get(tp)
        if partition is None:
            return []
        return [(entry.epoch, entry.start_offset) for entry in partition.log.epochs.entries]

    def epoch_start_offset(self, tp: TopicPartition, epoch: int) -> int:
        """Where leader epoch ``epoch`` starts in ``tp``'s log (its LEO if absent)."""
        partition = self.manager.get(tp)
        assert partition is not None
        return partition.log.epochs.start_offset_of(epoch, partition.log_end_offset)

    def read_bytes(self, tp: TopicPartition, offset: int, max_bytes: int) -> bytes:
        """Whole batches of ``tp`` from ``offset``."""
        partition = self.manager.get(tp)
        assert partition is not None
        return read_whole_batches(partition, offset, max_bytes)

    def read_records(self, tp: TopicPartition, offset: int, max_bytes: int,
                     max_offset: int | None) -> object:
        """Whole batches as bytes (the simulator's form)."""
        partition = self.manager.get(tp)
        assert partition is not None
        return read_whole_batches(partition, offset, max_bytes, max_offset)


__all__ = ["LogManagerStore", "read_whole_batches"]
