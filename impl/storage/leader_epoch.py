"""The leader-epoch cache: which leader epoch started at which offset (KIP-101, KIP-279).

Persisted per partition as ``leader-epoch-checkpoint`` (Kafka's text format: version ``0``, the
entry count, then ``<epoch> <start offset>`` per line). Followers ask the leader
``end_offset_for_epoch`` (OffsetsForLeaderEpoch) and truncate there instead of to their HW; a
leader adds a follower to the ISR only once it reached ``start_offset_of`` its current epoch
(KIP-320).

This module is a sans-IO core.
"""

from __future__ import annotations

from dataclasses import dataclass

__sans_io__ = True

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """Leader epoch ``epoch`` wrote its first record at ``start_offset``."""

    epoch: int
    start_offset: int

    def __init__(self, epoch: int, start_offset: int) -> None:
        # (written out: CONTRIBUTING.md, "Dataclasses on hot paths")
        object.__setattr__(self, "epoch", epoch)
        object.__setattr__(self, "start_offset", start_offset)


class LeaderEpochCache:
    """Ordered ``(epoch, start offset)`` entries, both strictly increasing."""

    def __init__(self, entries: list[EpochEntry] | None = None) -> None:
        self._entries: list[EpochEntry] = list(entries or [])
        self._check()

    def _check(self) -> None:
        for earlier, later in zip(self._entries, self._entries[1:], strict=False):
            assert earlier.epoch < later.epoch, self._entries
            assert earlier.start_offset <= later.start_offset, self._entries

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        """A snapshot of the entries."""
        return tuple(self._entries)

    def copy(self) -> LeaderEpochCache:
        """An independent copy (carried to the destination log by a move: KAFKA-15608)."""
        return LeaderEpochCache(self._entries)

    @property
    def latest_epoch(self) -> int:
        """The newest epoch, or -1."""
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns whether the cache changed.

        As Kafka's ``LeaderEpochFileCache.assign``, the entries starting at or after
        ``start_offset`` are dropped first: they hold no record below it (truncated away, or an
        epoch this replica recorded on becoming leader and wrote nothing in before it followed a
        leader whose log holds an older epoch's records there). They are dropped whatever
        follows: also when the entry left below is of ``epoch`` itself (the replica had followed
        that epoch's records before leading the empty epoch: seed 4498). Then an epoch not
        newer than the entry left, which starts below ``start_offset``, adds nothing (its
        records continue that entry's epoch, or are a stale append: records of a later epoch
        come first in this log).
        """
        if epoch < 0:
            return False
        entries = self._entries
        if entries and entries[-1].epoch == epoch and entries[-1].start_offset <= start_offset:
            return False
        kept = len(entries)
        while kept and entries[kept - 1].start_offset >= start_offset:
            kept -= 1
        changed = kept < len(entries)
        del entries[kept:]
        if not entries or entries[-1].epoch < epoch:
            entries.append(EpochEntry(epoch, start_offset))
            changed = True
        self._check()
        return changed

    def end_offset_for_epoch(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """KIP-279: the largest epoch <= ``epoch`` and the offset where it ended.

        Returns:
            ``(epoch, end offset)``: for the latest epoch the end offset is the LEO; for an older
            one, the start offset of the next larger epoch. An ``epoch`` older than every entry
            answers ``(epoch, first entry's start offset)``, as Kafka's
            ``LeaderEpochFileCache.endOffsetFor`` does: nothing of that epoch is in this log, so
            a follower holding it must truncate to where this log's first epoch starts (a former
            leader's unreplicated records, written in an epoch the new leader never held).
            ``(-1, -1)`` for an undefined (negative) ``epoch`` or an empty cache.
        """
        if not self._entries or epoch < 0:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch < self._entries[0].epoch:
            return epoch, self._entries[0].start_offset
        if epoch >= self._entries[-1].epoch:
            return self._entries[-1].epoch, log_end_offset
        for index, entry in enumerate(self._entries):
            following = self._entries[index + 1]
            if entry.epoch <= epoch < following.epoch:
                return entry.epoch, following.start_offset
        raise AssertionError("unreachable: epoch within the cache's range")

    def start_offset_of(self, epoch: int, log_end_offset: int) -> int:
        """The first offset of ``epoch`` (KIP-320 rule 4 asks it of the leader's current epoch).

        Returns:
            Its entry's start offset; ``log_end_offset`` when every entry is older (the epoch
            has not been recorded yet: it starts at the LEO); -1 when a later epoch started
            without it.
        """
        for entry in self._entries:
            if entry.epoch == epoch:
                return entry.start_offset
            if entry.epoch > epoch:
                return UNDEFINED_OFFSET
        return log_end_offset

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop entries starting at or after ``end_offset`` (the log was truncated to it)."""
        before = len(self._entries)
        self._entries = [e for e in self._entries if e.start_offset < end_offset]
        return len(self._entries) != before

    def truncate_from_start(self, start_offset: int) -> bool:
        """Drop entries wholly below ``start_offset``; the last one below moves up to it."""
        kept = [e for e in self._entries if e.start_offset >= start_offset]
        below = [e for e in self._entries if e.start_offset < start_offset]
        if below and (not kept or kept[0].start_offset > start_offset):
            kept.insert(0, EpochEntry(below[-1].epoch, start_offset))
        changed = kept != self._entries
        self._entries = kept
        return changed

    def to_text(self) -> str:
        """Kafka's ``leader-epoch-checkpoint`` text."""
        lines = ["0", str(len(self._entries))]
        lines += [f"{e.epoch} {e.start_offset}" for e in self._entries]
        return "\n".join(lines) + "\n"

    @staticmethod
    def from_text(text: str) -> LeaderEpochCache:
        """Parse Kafka's ``leader-epoch-checkpoint`` text.

        Raises:
            ValueError: malformed file.
        """
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) < 2 or lines[0].strip() != "0":
            raise ValueError("leader-epoch-checkpoint: bad header")
        count = int(lines[1])
        if count != len(lines) - 2:
            raise ValueError("leader-epoch-checkpoint: wrong entry count")
        entries = []
        for line in lines[2:]:
            epoch, offset = line.split()
            entries.append(EpochEntry(int(epoch), int(offset)))
        return LeaderEpochCache(entries)
