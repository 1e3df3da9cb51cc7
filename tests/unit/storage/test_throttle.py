"""THROTTLE_BOUND on a virtual clock: bytes admitted in any window <= rate * window + one chunk
per mover; rate changes apply live; unlimited means never waiting."""

from __future__ import annotations

import heapq

import pytest

from impl.storage.config import UNLIMITED_RATE
from impl.storage.throttle import TokenBucket

NS = 1_000_000_000


def _simulate(
    rate: int,
    chunks: list[int],
    duration_s: float,
    rate_changes: dict[int, int] | None = None,
    jitter_ns: int = 1,
) -> list[tuple[int, int]]:
    """Movers (one per entry of ``chunks``) copying as fast as the bucket allows; returns the
    (time ns, bytes) of every admission."""
    bucket = TokenBucket(rate, 0, burst_bytes=(len(chunks) - 1) * min(chunks))
    admitted: list[tuple[int, int]] = []
    ready = [(0, mover) for mover in range(len(chunks))]
    heapq.heapify(ready)
    changes = sorted((rate_changes or {}).items())
    while ready:
        now, mover = heapq.heappop(ready)
        if now > duration_s * NS:
            break
        while changes and changes[0][0] <= now:
            bucket.set_rate(changes.pop(0)[1], now)
        wait = bucket.wait_ns(now)
        if wait:
            heapq.heappush(ready, (now + wait + (now * 104729 + mover) % jitter_ns, mover))
            continue
        bucket.admit(chunks[mover], now)
        admitted.append((now, chunks[mover]))
        # copying takes 1 µs, then the mover wakes up to 3 ms late (an event loop's jitter)
        heapq.heappush(ready, (now + 1_000 + (now * 7919 + mover) % jitter_ns, mover))
    return admitted


def _max_in_window(admitted: list[tuple[int, int]], window_ns: int) -> int:
    best, total, start = 0, 0, 0
    for end in range(len(admitted)):
        total += admitted[end][1]
        while admitted[end][0] - admitted[start][0] >= window_ns:
            total -= admitted[start][1]
            start += 1
        best = max(best, total)
    return best


@pytest.mark.parametrize("rate", [10_000, 1 << 20, 8 << 20])
@pytest.mark.parametrize("chunks", [[4096], [4096, 65536], [1 << 20, 1 << 20, 1 << 20]])
def test_throttle_bound_holds_in_every_window(rate: int, chunks: list[int]) -> None:
    for jitter_ns in (1, 3_000_000):
        admitted = _simulate(rate, chunks, duration_s=5, jitter_ns=jitter_ns)
        assert admitted
        for window_ns in (NS // 100, NS // 10, NS, 5 * NS):
            bound = rate * window_ns // NS + sum(chunks)
            assert _max_in_window(admitted, window_ns) <= bound
    # without wake-up jitter the rate is reached (within one chunk per mover over the run)
    admitted = _simulate(rate, chunks, duration_s=5)
    total = sum(size for _, size in admitted)
    assert total >= rate * 5 - sum(chunks) * 2


def test_rate_change_applies_live() -> None:
    admitted = _simulate(1 << 20, [65536, 65536], 10, rate_changes={5 * NS: 4 << 20})
    first = sum(n for t, n in admitted if t < 5 * NS)
    second = sum(n for t, n in admitted if t >= 5 * NS)
    assert abs(first - 5 * (1 << 20)) <= 2 * 65536
    assert abs(second - 5 * (4 << 20)) <= 3 * 65536


def test_unlimited_never_waits() -> None:
    bucket = TokenBucket(UNLIMITED_RATE, 0)
    for i in range(100):
        assert bucket.wait_ns(i) == 0
        bucket.admit(1 << 30, i)


def test_credit_is_bounded_by_the_burst() -> None:
    bucket = TokenBucket(1000, 0, burst_bytes=500)
    assert bucket.wait_ns(100 * NS) == 0
    bucket.admit(1500, 100 * NS)  # 500 of saved credit, 1000 of debt
    assert bucket.wait_ns(100 * NS) == NS


def test_idle_time_gives_no_burst() -> None:
    bucket = TokenBucket(1000, 0)
    bucket.admit(1000, 0)
    assert bucket.wait_ns(0) == NS
    assert bucket.wait_ns(100 * NS) == 0
    bucket.admit(5000, 100 * NS)
    assert bucket.wait_ns(100 * NS) == 5 * NS


def test_admit_in_debt_is_a_bug() -> None:
    bucket = TokenBucket(1000, 0)
    bucket.admit(10, 0)
    with pytest.raises(AssertionError):
        bucket.admit(10, 0)
