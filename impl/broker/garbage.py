"""Python's cyclic garbage collector, paced so that a full collection never lands on a large
request: no stop-the-world pause of hundreds of milliseconds for other clients.

Why: a full (generation 2) collection examines every tracked object and stops the event loop for
as long. CPython starts one on its own once the objects that survived young collections reach a
quarter of the long-lived ones, which a request naming a million partitions does several times
over (millions of entities and response entries): ``bench.abuse`` measured full collections of
100-675 ms in the broker while such requests ran, and a probe client's p99 followed. Young
collections stay automatic (each examines only the objects allocated since the last one); full
collections run from :func:`collect_when_quiet`, every :data:`FULL_COLLECTION_INTERVAL_SECONDS`
when no large request is being handled, and after :data:`FULL_COLLECTION_DEADLINE_SECONDS` in
any case (so cyclic garbage stays bounded even under a continuous attack). The objects alive
after start-up are frozen out of every collection (:func:`gc.freeze`).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Final

import trio

FULL_COLLECTION_INTERVAL_SECONDS: Final = 30.0
FULL_COLLECTION_DEADLINE_SECONDS: Final = 300.0
#: A generation-2 threshold no broker reaches (CPython's is 10 young-generation rounds).
_NEVER: Final = 1 << 30


def take_over_full_collections() -> None:
    """Freeze the start-up objects and stop CPython from starting full collections itself."""
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, _NEVER)


async def collect_when_quiet(large_requests_in_flight: Callable[[], int]) -> None:
    """Run full collections until cancelled: when no large request is in flight, at most every
    :data:`FULL_COLLECTION_INTERVAL_SECONDS`; at the latest every
    :data:`FULL_COLLECTION_DEADLINE_SECONDS`."""
    last = trio.current_time()
    while True:
        await trio.sleep(1.0)
        now = trio.current_time()
        due = now - last >= FULL_COLLECTION_INTERVAL_SECONDS
        overdue = now - last >= FULL_COLLECTION_DEADLINE_SECONDS
        if (due and large_requests_in_flight() == 0) or overdue:
            gc.collect()
            last = trio.current_time()
