"""Contracts of the clock and randomness ports, run against the real and the simulated ones.

Written once as functions taking a factory (as the ``Disk`` contract in
:mod:`conformance.disk_contract`): ``check_clock`` holds for :class:`impl.ports.SystemClock` and
:class:`conformance.clock.SimClock`, ``check_rng`` for :class:`impl.ports.SeededRng` and
:class:`conformance.rng.SimRng`. A test never waits for real time to pass, so the clock contract
checks what every reading must satisfy, not how fast time runs.

This module is a sans-IO core.
"""

from __future__ import annotations

from collections.abc import Callable

from impl.ports import Clock, Rng

__sans_io__ = True

#: 2020-01-01T00:00:00Z: any wall clock a broker runs with reads later than this.
_WALL_FLOOR_MS = 1_577_836_800_000


def check_clock(make: Callable[[], Clock], readings: int = 1000) -> None:
    """Monotonic readings never decrease; wall readings are milliseconds since the epoch.

    Args:
        make: a fresh clock.
        readings: how many consecutive readings to compare.
    """
    clock = make()
    previous_ns = clock.monotonic_ns()
    previous_ms = clock.wall_ms()
    assert previous_ns >= 0
    assert previous_ms > _WALL_FLOOR_MS, previous_ms
    for _ in range(readings):
        now_ns = clock.monotonic_ns()
        assert now_ns >= previous_ns, (previous_ns, now_ns)
        previous_ns = now_ns
    assert isinstance(clock.wall_ms(), int)


def check_rng(make: Callable[[int], Rng], draws: int = 2000) -> None:
    """Draws stay in range, cover it, and the same seed repeats the same draws.

    Args:
        make: a generator seeded with the given seed.
        draws: how many draws of each kind.
    """
    rng = make(7)
    values = [rng.randrange(10) for _ in range(draws)]
    assert set(values) == set(range(10)), "randrange must cover its range"
    floats = [rng.random() for _ in range(draws)]
    assert all(0.0 <= value < 1.0 for value in floats)
    assert 0.4 < sum(floats) / draws < 0.6
    items = ("a", "b", "c")
    assert {rng.choice(items) for _ in range(draws)} == set(items)
    first, second = make(11), make(11)
    assert [first.randrange(1 << 30) for _ in range(50)] == [
        second.randrange(1 << 30) for _ in range(50)
    ]
    assert make(12).randrange(1 << 30) != make(13).randrange(1 << 30)
