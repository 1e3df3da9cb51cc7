"""The clock and rng contracts against the real and the simulated ports."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from conformance import SimClock, SimRng
from conformance.port_contracts import check_clock, check_rng
from impl.ports import Clock, Rng, SeededRng, SystemClock


@pytest.mark.parametrize("make", [SystemClock, SimClock], ids=["system", "simulated"])
def test_clock_contract(make: Callable[[], Clock]) -> None:
    check_clock(make)


@pytest.mark.parametrize("make", [SeededRng, SimRng], ids=["seeded", "simulated"])
def test_rng_contract(make: Callable[[int], Rng]) -> None:
    check_rng(make)


def test_simulated_rng_draws_what_the_real_one_draws() -> None:
    real, fake = SeededRng(99), SimRng(99)
    assert [real.randrange(1000) for _ in range(100)] == [fake.randrange(1000) for _ in range(100)]
    assert real.random() == fake.random()


def test_a_clock_that_runs_backwards_breaks_the_contract() -> None:
    class Backwards:
        def __init__(self) -> None:
            self.now_ns = 10

        def monotonic_ns(self) -> int:
            self.now_ns -= 1
            return self.now_ns

        def wall_ms(self) -> int:
            return 1_767_225_600_000

    with pytest.raises(AssertionError):
        check_clock(Backwards)
