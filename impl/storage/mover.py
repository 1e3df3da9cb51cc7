"""Copying a log into its ``.move`` mirror, chunk by chunk, byte for byte (KIP-113 §1.2 step 3).

The destination mirrors the source's segment layout: destination segment ``B`` is always a byte
prefix of source segment ``B``. A chunk copy extends the destination's last segment up to a batch
boundary taken from the source's sparse index (so the destination's LEO is known without reading
what was copied), or starts the next segment when the current one is complete. Bytes move with
:meth:`Disk.copy_range` (``copy_file_range``/``sendfile``): no user-space copy.

The functions are synchronous and run on the event loop between checkpoints, so no append,
truncation or retention interleaves with a chunk.
"""

from __future__ import annotations

from collections.abc import Callable

from impl.storage import record_batch as rb
from impl.storage.log import Log, bytes_changed


def align(source: Log, dest: Log) -> None:
    """Make ``dest`` a prefix-mirror of ``source`` again after retention or truncation.

    Resuming after a crash (KAFKA-9087) starts from the destination's own recovered position;
    this only drops what the source no longer has.
    """
    if dest.log_start_offset < source.log_start_offset:
        dest.delete_segments_below(source.log_start_offset)
    if dest.log_end_offset > source.log_end_offset:
        dest.truncate_to(source.log_end_offset)
    active = dest.active
    mirror = source.segment_with_base(active.base_offset)
    if (
        dest.log_start_offset != source.log_start_offset
        or mirror is None
        or active.size > mirror.size
    ):
        dest.truncate_fully(source.log_start_offset)


def verify_prefix(source: Log, dest: Log) -> bool:
    """Check, after a crash, that ``dest`` is still a byte prefix of ``source``; else empty it.

    Both logs were recovered independently: the source may have lost an unflushed tail that the
    destination kept, and new appends may since have reused those offsets with other records.
    Offsets alone cannot tell; the last batch header of each destination segment (which holds
    the batch's CRC) is compared with the source's bytes at the same position. Run before any
    append after startup. Returns whether the destination was kept.
    """
    align(source, dest)
    for segment in dest.segments:
        mirror = source.segment_with_base(segment.base_offset)
        if mirror is None or mirror.size < segment.size:
            break
        if segment.size == 0:
            continue
        last = dest.position_of(segment, segment.next_offset - 1)
        if last is None:
            break
        theirs = source.disk.read(mirror.log_path, last.position, rb.HEADER_SIZE)
        ours = dest.disk.read(segment.log_path, last.position, rb.HEADER_SIZE)
        if theirs != ours:
            break
    else:
        return True
    dest.truncate_fully(source.log_start_offset)
    return False


def copy_chunk(
    source: Log, dest: Log, max_bytes: int, admit: Callable[[int], None] | None = None
) -> int:
    """Copy up to about ``max_bytes`` from ``source`` into ``dest``; return the bytes copied.

    A chunk ends at a batch boundary: the largest one within ``max_bytes``, else the first one
    past it (a single batch, or ``log.index.interval.bytes``, may exceed ``max_bytes``). Returns 0
    only when a segment boundary was crossed or the destination has caught up (same LEO).
    ``admit(n)`` is called with the exact size right before the bytes move (the throttle).
    """
    align(source, dest)
    target_segment = dest.active
    mirror = source.segment_with_base(target_segment.base_offset)
    assert mirror is not None
    start = target_segment.size
    if start == mirror.size:
        if mirror is not source.active:
            following = source.segments[source.segments.index(mirror) + 1]
            dest.start_segment(following.base_offset)
        return 0
    end, next_offset = mirror.size, mirror.next_offset
    if end - start > max_bytes:
        boundaries = [entry for entry in mirror.index if start < entry[1] <= start + max_bytes]
        if not boundaries:
            boundaries = [entry for entry in mirror.index if entry[1] > start][:1]
        if boundaries:
            next_offset, end = boundaries[-1]
    if admit is not None:
        admit(end - start)
    copied = dest.disk.copy_range(mirror.log_path, start, end - start, target_segment.log_path)
    assert copied == end - start, (copied, start, end, mirror.log_path)
    entries = [entry for entry in mirror.index if start <= entry[1] < end and entry[1] > 0]
    dest.append_index_entries(target_segment, entries)
    bytes_changed()
    target_segment.size = end
    target_segment.next_offset = next_offset
    target_segment.max_timestamp = None
    last_entry_position = target_segment.index[-1][1] if target_segment.index else 0
    target_segment.bytes_since_index_entry = end - last_entry_position
    return copied


def copy_all(source: Log, dest: Log) -> int:
    """Copy until ``dest`` mirrors ``source`` exactly (same segments, same sizes)."""
    total = 0
    for _ in range(1_000_000):
        copied = copy_chunk(source, dest, 1 << 62)
        total += copied
        if copied == 0 and caught_up_exactly(source, dest):
            return total
    raise AssertionError("copy_all did not converge")


def caught_up_exactly(source: Log, dest: Log) -> bool:
    """Same segment bases and sizes (stricter than the offset check the machine uses)."""
    return [(s.base_offset, s.size) for s in source.segments] == [
        (s.base_offset, s.size) for s in dest.segments
    ]
