"""Delta debugging over a fault schedule: the smallest schedule that still fails.

Zeller and Hildebrandt's ``ddmin``: split the schedule into ``n`` chunks; keep a chunk alone or
the schedule without a chunk if that still fails; otherwise split finer; stop when no single
fault can be removed (a 1-minimal schedule). Deterministic: chunks are tried in order and the
predicate (a simulated run with the same seed) is deterministic, so the same failing run always
shrinks to the same schedule. The number of runs is bounded by ``runs_max``.

This module is a sans-IO core.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

__sans_io__ = True

T = TypeVar("T")


def ddmin(
    items: Sequence[T], fails: Callable[[Sequence[T]], bool], runs_max: int = 200
) -> tuple[list[T], int]:
    """Shrink ``items`` to a 1-minimal subsequence on which ``fails`` is still true.

    Args:
        items: the failing input (a fault schedule), in order.
        fails: whether a subsequence still fails; it must be deterministic.
        runs_max: at most this many calls of ``fails`` (the result is then smaller, not minimal).

    Returns:
        The shrunk subsequence (order kept) and how many times ``fails`` was called.
    """
    current = list(items)
    runs = 0
    if not current:
        return current, runs
    granularity = 2
    while len(current) >= 2 and runs < runs_max:
        chunks = _split(current, granularity)
        reduced = False
        for chunk in chunks:
            if runs >= runs_max:
                break
            runs += 1
            if fails(chunk):
                current, granularity, reduced = chunk, 2, True
                break
        if not reduced:
            for index in range(len(chunks)):
                if runs >= runs_max:
                    break
                complement = [x for other, c in enumerate(chunks) if other != index for x in c]
                runs += 1
                if fails(complement):
                    current, granularity, reduced = complement, max(granularity - 1, 2), True
                    break
        if not reduced:
            if granularity >= len(current):
                break
            granularity = min(len(current), granularity * 2)
    if len(current) == 1 and runs < runs_max:
        runs += 1
        if fails([]):
            current = []
    return current, runs


def _split(items: list[T], parts: int) -> list[list[T]]:
    size, extra = divmod(len(items), parts)
    chunks: list[list[T]] = []
    start = 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        if end > start:
            chunks.append(items[start:end])
        start = end
    return chunks
