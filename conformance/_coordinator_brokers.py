"""Recording broker transports for controller tests and the failover benchmark.

Fault model: a fake broker answers every controller request at once and records it; it can be made
unreachable (its ``send`` raises, as a refused connection does) and can report
KAFKA_STORAGE_ERROR for chosen partitions, as a broker whose log dir failed does (KIP-112). It
keeps no log and never truncates: it only shows what the controller asked of whom, in order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import trio

from impl.controller.requests import (
    ERROR_KAFKA_STORAGE_ERROR,
    ControllerRequest,
    ControllerResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)

TP = tuple[str, int]

#: Bound on recorded requests.
REQUESTS_MAX = 1_000_000


@dataclass(frozen=True, slots=True)
class Delivery:
    """One request as a broker received it, with the receive time (``trio.current_time()``)."""

    broker_id: int
    request: ControllerRequest
    time_s: float


class BrokerUnreachableError(ConnectionError):
    """The fake broker is down."""


class RecordingBrokers:
    """Fake brokers behind one ``send(broker_id, request)`` (see the module's fault model)."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self.unreachable: set[int] = set()
        self.storage_errors: dict[int, set[TP]] = {}
        self._changed = trio.Event()

    async def send(self, broker_id: int, request: ControllerRequest) -> ControllerResponse:
        """Record ``request`` and answer it.

        Raises:
            BrokerUnreachableError: the broker was made unreachable.
        """
        await trio.lowlevel.checkpoint()
        if broker_id in self.unreachable:
            raise BrokerUnreachableError(f"broker {broker_id} is unreachable")
        assert len(self.deliveries) < REQUESTS_MAX
        self.deliveries.append(Delivery(broker_id, request, trio.current_time()))
        self._changed.set()
        self._changed = trio.Event()
        errors: dict[TP, int] = {}
        if isinstance(request, LeaderAndIsrRequest):
            failed = self.storage_errors.get(broker_id, set())
            for state in request.partition_states:
                if (state.topic, state.partition) in failed:
                    errors[(state.topic, state.partition)] = ERROR_KAFKA_STORAGE_ERROR
        return ControllerResponse(0, errors)

    def requests_to(self, broker_id: int, kind: type[ControllerRequest] | None = None
                    ) -> list[ControllerRequest]:
        """Requests delivered to ``broker_id`` (of one kind if given), in order."""
        return [d.request for d in self.deliveries
                if d.broker_id == broker_id and (kind is None or isinstance(d.request, kind))]

    def leader_and_isr_states(self, broker_id: int) -> list[LeaderAndIsrPartitionState]:
        """Every LeaderAndIsr partition state delivered to ``broker_id``, in order."""
        return [state for request in self.requests_to(broker_id, LeaderAndIsrRequest)
                if isinstance(request, LeaderAndIsrRequest)
                for state in request.partition_states]

    def latest_state(self, broker_id: int, tp: TP) -> LeaderAndIsrPartitionState | None:
        """The last LeaderAndIsr state of ``tp`` delivered to ``broker_id``."""
        found = None
        for state in self.leader_and_isr_states(broker_id):
            if (state.topic, state.partition) == tp:
                found = state
        return found

    def stop_replicas(self, broker_id: int) -> list[tuple[TP, bool]]:
        """``(tp, delete)`` of every StopReplica partition delivered to ``broker_id``."""
        return [((p.topic, p.partition), p.delete_partition)
                for request in self.requests_to(broker_id, StopReplicaRequest)
                if isinstance(request, StopReplicaRequest) for p in request.partitions]

    def update_metadata(self, broker_id: int) -> list[UpdateMetadataRequest]:
        """UpdateMetadata requests delivered to ``broker_id``."""
        return [r for r in self.requests_to(broker_id, UpdateMetadataRequest)
                if isinstance(r, UpdateMetadataRequest)]

    async def wait_for(self, condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
        """Wait (bounded) until ``condition()`` holds, re-checking after each delivery.

        Raises:
            trio.TooSlowError: not within ``timeout_s``.
        """
        with trio.fail_after(timeout_s):
            while not condition():
                await self._changed.wait()
