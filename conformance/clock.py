"""A virtual clock, advanced only by the simulator.

Fault model: none of its own. Time never moves unless the simulator moves it, so a run cannot
depend on how fast the host is; the simulator injects *delays* by advancing the clock (a slow disk,
a late message, a throttle waiting for its window) and the cores see only the consequences through
:class:`impl.ports.Clock`. Recovery is never at stake: the clock is monotonic by construction
(:meth:`SimClock.advance_ns` rejects negative steps), which is the one property the cores rely on.

This module is a sans-IO core: it imports no I/O module and reads no real time.
"""

from __future__ import annotations

__sans_io__ = True

#: 2026-01-01T00:00:00Z, the wall-clock origin of every simulated run (record timestamps).
WALL_ORIGIN_MS = 1_767_225_600_000


class SimClock:
    """Simulated time behind the :class:`impl.ports.Clock` port.

    Args:
        start_ns: the initial monotonic reading.
        wall_origin_ms: the wall-clock reading when ``monotonic_ns() == start_ns``.
    """

    __slots__ = ("_now_ns", "_start_ns", "_wall_origin_ms")

    def __init__(self, start_ns: int = 0, wall_origin_ms: int = WALL_ORIGIN_MS) -> None:
        assert start_ns >= 0
        self._now_ns = start_ns
        self._start_ns = start_ns
        self._wall_origin_ms = wall_origin_ms

    def monotonic_ns(self) -> int:
        """Nanoseconds of simulated time; never decreases."""
        return self._now_ns

    def wall_ms(self) -> int:
        """Simulated milliseconds since the Unix epoch."""
        return self._wall_origin_ms + (self._now_ns - self._start_ns) // 1_000_000

    def advance_ns(self, delta_ns: int) -> int:
        """Move time forward by ``delta_ns``.

        Args:
            delta_ns: how far to move; zero is allowed.

        Returns:
            The new reading.

        Raises:
            ValueError: ``delta_ns`` is negative (time never runs backwards).
        """
        if delta_ns < 0:
            raise ValueError(f"the clock cannot move backwards (delta {delta_ns} ns)")
        self._now_ns += delta_ns
        return self._now_ns

    def advance_to_ns(self, deadline_ns: int) -> int:
        """Move time forward to ``deadline_ns`` if it is in the future; return the new reading."""
        self._now_ns = max(self._now_ns, deadline_ns)
        return self._now_ns
