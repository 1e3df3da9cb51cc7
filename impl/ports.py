"""The clock, randomness and CPU-offload ports shared by every core.

The disk port lives in :mod:`impl.storage` and the coordinator (ZooKeeper) port in
:mod:`impl.controller`, next to the code that owns their semantics. The real runtime implements
these with the system clock and :class:`random.Random`; the simulator in ``conformance/`` with a
virtual clock and a seeded generator, so one seed decides a whole simulated run.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

#: ``offload(function, *args)``: runs ``function(*args)`` away from the caller's event loop
#: (the trio runtime lends ``trio.to_thread.run_sync``; the simulator, with one thread, runs
#: the work where it is).
CpuOffload = Callable[..., Awaitable[Any]]


class Clock(Protocol):
    """Monotonic time, in the units named by each method."""

    def monotonic_ns(self) -> int:
        """Nanoseconds since an arbitrary origin; never decreases."""

    def wall_ms(self) -> int:
        """Milliseconds since the Unix epoch (record timestamps, retention)."""


class Rng(Protocol):
    """Randomness; every simulated draw comes from one seeded generator."""

    def randrange(self, stop: int) -> int:
        """A uniform integer in ``[0, stop)``."""

    def random(self) -> float:
        """A uniform float in ``[0, 1)``."""

    def choice(self, items: Sequence[T]) -> T:
        """One element of a non-empty sequence."""


class SystemClock:
    """The real clock."""

    def monotonic_ns(self) -> int:
        """``time.monotonic_ns()``."""
        return time.monotonic_ns()

    def wall_ms(self) -> int:
        """``time.time_ns() // 1_000_000``."""
        return time.time_ns() // 1_000_000


class SeededRng:
    """A :class:`random.Random` behind the :class:`Rng` port; ``seed=None`` draws from the OS."""

    def __init__(self, seed: int | None = None) -> None:
        self._random = random.Random(seed)

    def randrange(self, stop: int) -> int:
        """A uniform integer in ``[0, stop)``."""
        return self._random.randrange(stop)

    def random(self) -> float:
        """A uniform float in ``[0, 1)``."""
        return self._random.random()

    def choice(self, items: Sequence[T]) -> T:
        """One element of a non-empty sequence."""
        return self._random.choice(items)
