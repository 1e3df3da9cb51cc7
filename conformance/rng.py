"""Seeded randomness with named sub-streams, so one seed decides a whole simulated run.

Why sub-streams: if every component drew from one generator, adding a single draw in the network
would shift every later draw of the disk and the workload, and a seed that found a bug yesterday
would replay a different run today. Each component therefore asks for ``rng.stream("network")``,
``rng.stream("disk").stream("crash")``, … whose seeds are derived from the parent seed and the name
alone (BLAKE2b, stable across Python versions and processes; never ``hash()``, which is salted).

Fault model: none; the generator is the *source* of every fault decision elsewhere.

This module is a sans-IO core.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from typing import TypeVar

__sans_io__ = True

T = TypeVar("T")


def derive_seed(seed: int, name: str) -> int:
    """The seed of sub-stream ``name`` of a generator seeded with ``seed``.

    Args:
        seed: the parent seed (any integer, negative ones included).
        name: the sub-stream's name; equal names give equal streams.

    Returns:
        A 64-bit non-negative integer.
    """
    digest = hashlib.blake2b(f"{seed}/{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


class SimRng:
    """A seeded :class:`impl.ports.Rng` whose :meth:`stream` gives independent named generators.

    Args:
        seed: the seed; the same seed gives the same draws, always.
    """

    __slots__ = ("_bits", "_draw", "_random", "seed")

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._random = random.Random(seed)
        # Bound once: the simulators draw hundreds of thousands of times per run.
        self._draw = self._random.random
        self._bits: Callable[[int], int] = self._random.getrandbits

    def _below(self, stop: int) -> int:
        """A uniform integer in ``[0, stop)`` for an int ``stop > 0``: the draws of
        ``random.Random``'s own ``_randbelow`` (behind its ``randrange``, ``randint``, ``choice``
        and ``shuffle``), written here so that the compiled simulator draws without entering the
        interpreter (tests/conformance/ports/test_clock_rng_network.py compares the two)."""
        bits = stop.bit_length()
        drawn = self._bits(bits)
        while drawn >= stop:
            drawn = self._bits(bits)
        return drawn

    def stream(self, name: str) -> SimRng:
        """A generator independent of this one and of every other name.

        Args:
            name: the component's name, e.g. ``"network"`` or ``"workload"``.

        Returns:
            A fresh generator; calling ``stream(name)`` twice returns two generators that draw
            the same sequence.
        """
        return SimRng(derive_seed(self.seed, name))

    def randrange(self, stop: int) -> int:
        """A uniform integer in ``[0, stop)``."""
        if type(stop) is int and stop > 0:
            return self._below(stop)
        return self._random.randrange(stop)

    def randint(self, low: int, high: int) -> int:
        """A uniform integer in ``[low, high]``."""
        if type(low) is int and type(high) is int and high >= low:
            return low + self._below(high - low + 1)
        return self._random.randint(low, high)

    def random(self) -> float:
        """A uniform float in ``[0, 1)``."""
        return self._random.random()

    def chance(self, probability: float) -> bool:
        """True with ``probability`` (0 never draws true, 1 always)."""
        if probability <= 0.0:
            return False
        if probability >= 1.0:
            return True
        return self._draw() < probability

    def choice(self, items: Sequence[T]) -> T:
        """One element of a non-empty sequence."""
        if not len(items):
            return self._random.choice(items)  # (its IndexError)
        return items[self._below(len(items))]

    def shuffle(self, items: list[T]) -> None:
        """Shuffle ``items`` in place."""
        for index in range(len(items) - 1, 0, -1):
            other = self._below(index + 1)
            items[index], items[other] = items[other], items[index]
