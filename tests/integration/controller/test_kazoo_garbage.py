"""KazooCoordinator leaves no reference cycle behind for a failed call (a read of a missing
znode is routine: the controller reads optional znodes for every new topic), since the broker
defers full collections (``impl.broker.garbage``) and cycles would pile up until one."""

from __future__ import annotations

import gc

import pytest
import trio

from impl.controller import KazooCoordinator
from impl.controller.coordinator import NoNodeError

pytestmark = pytest.mark.integration


def test_failed_reads_leave_no_cycles(zk_chroot: str) -> None:
    async def scenario() -> list[object]:
        coordinator = await KazooCoordinator.connect(zk_chroot)
        try:
            with pytest.raises(NoNodeError):  # the first call's one-off objects
                await coordinator.get("/missing")
            gc.collect()
            gc.set_debug(gc.DEBUG_SAVEALL)
            try:
                for _ in range(20):
                    with pytest.raises(NoNodeError):
                        await coordinator.get("/missing")
                gc.collect()
                return [item for item in gc.garbage
                        if type(item).__name__ in ("AsyncResult", "NoNodeError")]
            finally:
                gc.set_debug(0)
                gc.garbage.clear()
        finally:
            await coordinator.close()

    assert trio.run(scenario) == []
