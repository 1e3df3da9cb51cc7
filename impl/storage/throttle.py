"""The intra-broker move throttle: one token bucket shared by all movers (KIP-113 "Broker Config").

``intra.broker.throttled.rate`` bytes per second are shared by every mover. A mover asks before
copying a chunk; it may go when the bucket is not in debt, and its chunk puts the bucket into debt
that refills at the rate. The bucket may save up at most ``burst_bytes`` of credit, which the log
manager sets to one chunk for every mover but one, so that the late wake-ups of an event loop
do not cost throughput. Hence THROTTLE_BOUND: in any window of W seconds, the bytes admitted are
at most ``rate * W`` + ``burst_bytes`` + the last chunk admitted, i.e. ``rate * W`` plus one
chunk per mover.

Pure: time is passed in (nanoseconds from a :class:`~impl.ports.Clock`).

This module is a sans-IO core.
"""

from __future__ import annotations

from impl.storage.config import UNLIMITED_RATE

__sans_io__ = True

_NS_PER_SECOND = 1_000_000_000


class TokenBucket:
    """Bytes-per-second admission control with debt and a bounded credit."""

    def __init__(self, rate_bytes_per_second: int, now_ns: int, burst_bytes: int = 0) -> None:
        assert rate_bytes_per_second > 0
        assert burst_bytes >= 0
        self._rate = rate_bytes_per_second
        self._burst_scaled = burst_bytes * _NS_PER_SECOND
        #: tokens in byte-nanoseconds-per-second units (bytes * 1e9) to stay in integers
        self._tokens_scaled = 0
        self._updated_ns = now_ns

    @property
    def rate_bytes_per_second(self) -> int:
        """The configured rate."""
        return self._rate

    @property
    def unlimited(self) -> bool:
        """Whether the rate is the unlimited default."""
        return self._rate >= UNLIMITED_RATE

    def _refill(self, now_ns: int) -> None:
        elapsed = max(0, now_ns - self._updated_ns)
        self._updated_ns = max(self._updated_ns, now_ns)
        if self._tokens_scaled < self._burst_scaled:
            self._tokens_scaled = min(
                self._burst_scaled, self._tokens_scaled + elapsed * self._rate
            )

    def set_burst(self, burst_bytes: int, now_ns: int) -> None:
        """Change how much credit may be saved up (one chunk per mover but one)."""
        assert burst_bytes >= 0
        self._refill(now_ns)
        self._burst_scaled = burst_bytes * _NS_PER_SECOND
        self._tokens_scaled = min(self._tokens_scaled, self._burst_scaled)

    def set_rate(self, rate_bytes_per_second: int, now_ns: int) -> None:
        """Change the rate while movers run; debt accrued so far is kept."""
        assert rate_bytes_per_second > 0
        self._refill(now_ns)
        self._rate = rate_bytes_per_second

    def wait_ns(self, now_ns: int) -> int:
        """Nanoseconds until a mover may copy (0: now)."""
        if self.unlimited:
            return 0
        self._refill(now_ns)
        if self._tokens_scaled >= 0:
            return 0
        return -(self._tokens_scaled // self._rate)

    def admit(self, byte_count: int, now_ns: int) -> None:
        """Charge ``byte_count`` bytes; call only when :meth:`wait_ns` returned 0."""
        if self.unlimited:
            return
        self._refill(now_ns)
        assert self._tokens_scaled >= 0, "admit while the bucket is in debt"
        self._tokens_scaled -= byte_count * _NS_PER_SECOND

    def charge(self, byte_count: int, now_ns: int) -> None:
        """Charge bytes already moved, in debt or not (the final catch-up under the lock)."""
        if self.unlimited:
            return
        self._refill(now_ns)
        self._tokens_scaled -= byte_count * _NS_PER_SECOND
