"""Counting how often another task gets a turn of the trio event loop while some work runs: the
tests' measure of whether the work yields (a count, not a time: no timed assertions)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio


class LoopTurns:
    """``turns``: how many times a ticking task ran since :meth:`counting` was entered."""

    def __init__(self) -> None:
        self.turns = 0

    @asynccontextmanager
    async def counting(self) -> AsyncIterator[None]:
        """Run a task that counts its turns for as long as the block runs."""
        done = False

        async def ticker() -> None:
            while not done:
                await trio.lowlevel.checkpoint()
                self.turns += 1

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ticker)
            await trio.lowlevel.checkpoint()
            self.turns = 0
            try:
                yield
            finally:
                done = True
