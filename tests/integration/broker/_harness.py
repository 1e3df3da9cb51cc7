"""An in-process broker on a background thread, for integration tests with blocking clients.

The broker runs its own ``trio.run`` on a thread; tests talk to it with real clients on
loopback and reach into it with :meth:`RunningBroker.call` (runs an async function on the
broker's trio loop). Until a controller candidate runs in the broker, :meth:`become_leader`
plays the controller: it sends LeaderAndIsr and UpdateMetadata over the wire, as a controller
would.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import trio

from impl.broker.broker import Broker
from impl.broker.config import load_config
from impl.controller.requests import (
    BrokerEndpoint,
    ControllerResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from impl.storage import Disk
from impl.trace import TraceSink

T = TypeVar("T")
START_TIMEOUT_SECONDS = 30.0


class RunningBroker:
    """A broker serving on 127.0.0.1 with ``dirs`` log dirs under ``root``."""

    def __init__(
        self,
        zk_connect: str,
        root: Path,
        *,
        broker_id: int = 1,
        dirs: int = 2,
        overrides: Sequence[str] = (),
        run_controller: bool = False,
        trace: TraceSink | None = None,
        disk: Disk | None = None,
    ) -> None:
        self.log_dirs = [str(root / f"d{index}") for index in range(dirs)]
        for log_dir in self.log_dirs:
            Path(log_dir).mkdir(parents=True, exist_ok=True)
        text = (
            f"broker.id={broker_id}\nlisteners=PLAINTEXT://127.0.0.1:0\n"
            f"log.dirs={','.join(self.log_dirs)}\nzookeeper.connect={zk_connect}\n"
        )
        self.config = load_config(text, overrides)
        self.broker = Broker(self.config, run_controller=run_controller, rng_seed=1,
                             trace=trace, disk=disk)
        self._token: trio.lowlevel.TrioToken | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="broker", daemon=True)
        self.controller_epoch = 1

    def _main(self) -> None:
        async def run() -> None:
            self._token = trio.lowlevel.current_trio_token()
            async with trio.open_nursery() as nursery:
                await nursery.start(self.broker.serve)
                self._started.set()

        try:
            trio.run(run)
        except BaseException as error:  # reported to the test thread
            self._error = error
        finally:
            self._started.set()

    def start(self) -> RunningBroker:
        """Start and wait (bounded) until the broker is registered and serving."""
        self._thread.start()
        if not self._started.wait(START_TIMEOUT_SECONDS):
            raise TimeoutError("broker did not start")
        if self._error is not None:
            raise RuntimeError("broker failed to start") from self._error
        return self

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:port``."""
        return self.broker.bootstrap

    def call(self, function: Callable[[], Awaitable[T]]) -> T:
        """Run an async function on the broker's trio loop and return its result."""
        assert self._token is not None
        return trio.from_thread.run(function, trio_token=self._token)

    def call_sync(self, function: Callable[[], T]) -> T:
        """Run a sync function on the broker's trio thread."""
        assert self._token is not None
        return trio.from_thread.run_sync(function, trio_token=self._token)

    def stop(self) -> None:
        """Graceful stop; waits (bounded) for the thread."""
        if self._thread.is_alive() and self._token is not None:
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(self.broker.request_stop, trio_token=self._token)
        self._thread.join(START_TIMEOUT_SECONDS)
        assert not self._thread.is_alive(), "broker did not stop"
        if self._error is not None:
            raise RuntimeError("broker failed") from self._error

    def become_leader(
        self, topic: str, partitions: int = 1, *, leader_epoch: int = 0
    ) -> tuple[ControllerResponse, ControllerResponse]:
        """Play the controller: make this broker leader of ``topic``'s partitions."""
        broker = self.broker
        # what a controller reads from /brokers/ids: every advertised listener
        advertised = broker.advertised_endpoints()
        endpoint = BrokerEndpoint(self.config.broker_id, advertised[0].host,
                                  advertised[0].port, self.config.rack, advertised)
        me = self.config.broker_id
        leader_and_isr = LeaderAndIsrRequest(
            controller_id=me,
            controller_epoch=self.controller_epoch,
            broker_epoch=broker.broker_epoch,
            partition_states=tuple(
                LeaderAndIsrPartitionState(topic, p, self.controller_epoch, me, leader_epoch,
                                           (me,), 0, (me,), is_new=True)
                for p in range(partitions)
            ),
            live_leaders=(endpoint,),
        )
        update = UpdateMetadataRequest(
            controller_id=me,
            controller_epoch=self.controller_epoch,
            broker_epoch=broker.broker_epoch,
            live_brokers=(endpoint,),
            partition_states=tuple(
                UpdateMetadataPartitionState(topic, p, self.controller_epoch, me, leader_epoch,
                                             (me,), 0, (me,), ())
                for p in range(partitions)
            ),
        )

        async def send() -> tuple[ControllerResponse, ControllerResponse]:
            first = await broker.inter_broker.send(me, leader_and_isr)
            second = await broker.inter_broker.send(me, update)
            return first, second

        return self.call(send)

    def send(self, request: Any) -> ControllerResponse:
        """Send one controller request to this broker over the wire."""
        broker = self.broker

        async def send() -> ControllerResponse:
            return await broker.inter_broker.send(self.config.broker_id, request)

        return self.call(send)
