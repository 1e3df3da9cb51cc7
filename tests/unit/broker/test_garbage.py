"""Full garbage collections are paced away from large requests (issue 15, fairness): CPython's
own trigger paused the broker 100-675 ms per million-entry request in ``bench.abuse``."""

from __future__ import annotations

import gc

import pytest
import trio
import trio.testing

from impl.broker import garbage


def test_cpython_no_longer_starts_full_collections() -> None:
    before = gc.get_threshold()
    try:
        garbage.take_over_full_collections()
        young, middle, full = gc.get_threshold()
        assert (young, middle) == before[:2]
        assert full >= 1 << 30
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_full_collections_wait_for_no_large_request(monkeypatch: pytest.MonkeyPatch) -> None:
    collected: list[float] = []

    def collect(*_: int) -> int:
        collected.append(trio.current_time())
        return 0

    monkeypatch.setattr(gc, "collect", collect)
    in_flight = [1]

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(garbage.collect_when_quiet, lambda: in_flight[0])
            await trio.sleep(garbage.FULL_COLLECTION_INTERVAL_SECONDS * 3)
            assert collected == []  # a large request was in flight all along
            in_flight[0] = 0
            await trio.sleep(2)
            assert len(collected) == 1  # collected once it was quiet
            in_flight[0] = 1
            await trio.sleep(garbage.FULL_COLLECTION_DEADLINE_SECONDS + 2)
            assert len(collected) == 2  # and at the deadline, in flight or not
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
