"""Producer ids for InitProducerId, allocated in blocks through ZooKeeper as Kafka does.

``/latest_producer_id_block`` holds ``{"version":1,"broker":id,"block_start":"N",
"block_end":"M"}``; a broker claims the next block of :data:`BLOCK_SIZE` ids with a write
conditional on the node's version, retrying on a conflict, so no two brokers — and no two
incarnations of one broker — ever hand out the same producer id.
"""

from __future__ import annotations

import json
from typing import Final

import trio

from impl.controller.coordinator import BadVersionError, Coordinator, NodeExistsError, NoNodeError

PATH: Final = "/latest_producer_id_block"
BLOCK_SIZE: Final = 1000
CLAIM_ATTEMPTS_MAX: Final = 100


class ProducerIdExhaustedError(Exception):
    """No block could be claimed (ZooKeeper contention beyond the retry bound)."""


def _encode(broker_id: int, start: int, end: int) -> bytes:
    return json.dumps(
        {"version": 1, "broker": broker_id, "block_start": str(start), "block_end": str(end)}
    ).encode()


def _decode_end(data: bytes) -> int:
    value = json.loads(data.decode())
    return int(value["block_end"])


class ProducerIdAllocator:
    """Hands out producer ids from blocks claimed in ZooKeeper.

    Args:
        coordinator: the broker's ZooKeeper session.
        broker_id: written into the claimed block.
    """

    def __init__(self, coordinator: Coordinator, broker_id: int) -> None:
        self._coordinator = coordinator
        self._broker_id = broker_id
        self._next = 0
        self._end = -1
        self._lock = trio.Lock()

    async def _claim(self) -> None:
        for _ in range(CLAIM_ATTEMPTS_MAX):
            try:
                data, stat = await self._coordinator.get(PATH)
            except NoNodeError:
                try:
                    await self._coordinator.create(PATH, _encode(self._broker_id, 0,
                                                                 BLOCK_SIZE - 1))
                except NodeExistsError:
                    continue
                self._next, self._end = 0, BLOCK_SIZE - 1
                return
            start = _decode_end(data) + 1
            end = start + BLOCK_SIZE - 1
            try:
                await self._coordinator.set(
                    PATH, _encode(self._broker_id, start, end), version=stat.version
                )
            except BadVersionError:
                continue
            self._next, self._end = start, end
            return
        raise ProducerIdExhaustedError("could not claim a producer id block")

    async def allocate(self) -> int:
        """The next unused producer id."""
        async with self._lock:
            if self._next > self._end:
                await self._claim()
            producer_id = self._next
            self._next += 1
            return producer_id
