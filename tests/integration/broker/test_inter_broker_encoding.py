"""A controller request naming many partitions is built and encoded off the event loop.

The structured wire fuzz (seed 20261129) grew a topic to 32,767 partitions: the controller's
LeaderAndIsr and UpdateMetadata of 20,000-odd partitions each took the broker's event loop for
0.7 s to build and encode, every time it was sent, and a client's ApiVersions waited as long. A
request naming more than ``ENCODE_OFF_LOOP_PARTITIONS`` partitions is now encoded in a worker
thread, to the same bytes; and the broker receiving one converts it, and encodes its answer, in a
worker thread too (``ENCODE_OFF_LOOP_ENTRIES``)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from impl.broker import controller_wire, inter_broker
from impl.broker._codec import encode_request
from impl.broker._handlers import ENCODE_OFF_LOOP_ENTRIES
from impl.controller.requests import (
    BrokerEndpoint,
    ControllerRequest,
    ControllerResponse,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)

from ._harness import RunningBroker

pytestmark = pytest.mark.integration


def _update(broker: RunningBroker, topic: str, partitions: int) -> UpdateMetadataRequest:
    me = broker.config.broker_id
    advertised = broker.broker.advertised_endpoints()
    endpoint = BrokerEndpoint(me, advertised[0].host, advertised[0].port, broker.config.rack,
                              advertised)
    return UpdateMetadataRequest(
        controller_id=me, controller_epoch=broker.controller_epoch,
        broker_epoch=broker.broker.broker_epoch, live_brokers=(endpoint,),
        partition_states=tuple(
            UpdateMetadataPartitionState(topic, p, broker.controller_epoch, me, 0, (me,), 0,
                                         (me,), ())
            for p in range(partitions)))


def test_a_large_request_is_encoded_in_a_worker_thread_to_the_same_bytes(
        broker: RunningBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    encoded_on: list[tuple[int, bool]] = []
    encode = inter_broker.encode

    def spy(request: ControllerRequest, correlation_id: int,
            client_id: str) -> bytes:
        frame = encode(request, correlation_id, client_id)
        encoded_on.append((inter_broker.partitions_named(request),
                           threading.current_thread().name == "broker"))
        return frame

    monkeypatch.setattr(inter_broker, "encode", spy)
    large = inter_broker.ENCODE_OFF_LOOP_PARTITIONS + 1
    assert broker.send(_update(broker, "small", 3)).error_code == 0
    assert broker.send(_update(broker, "large", large)).error_code == 0
    # the small one on the broker's event loop thread ("broker"), the large one in a worker
    assert encoded_on == [(3, True), (large, False)]

    def partitions() -> int:
        return len(broker.broker.metadata.partitions("large"))

    assert broker.call_sync(partitions) == large
    request = _update(broker, "large", large)
    api_key, version = controller_wire.api_of(request)
    assert encode(request, 7, "c") == encode_request(
        api_key, version, 7, "c", controller_wire.request_to_wire(request))


def test_the_broker_converts_a_large_request_and_encodes_its_answer_in_a_worker_thread(
        broker: RunningBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    """The receiving side: turning a decoded UpdateMetadata of 20,000 partitions into the
    request dataclass, and encoding the answer, took 0.15 s each of the event loop."""
    on_loop: list[tuple[str, bool]] = []
    request_from_wire = controller_wire.request_from_wire
    response_to_wire = controller_wire.response_to_wire

    def spy_request(api_key: int, body: Any) -> ControllerRequest:
        on_loop.append(("request", threading.current_thread().name == "broker"))
        return request_from_wire(api_key, body)

    def spy_response(api_key: int, version: int, response: ControllerResponse) -> Any:
        on_loop.append(("response", threading.current_thread().name == "broker"))
        return response_to_wire(api_key, version, response)

    monkeypatch.setattr(controller_wire, "request_from_wire", spy_request)
    monkeypatch.setattr(controller_wire, "response_to_wire", spy_response)
    assert broker.send(_update(broker, "small", 3)).error_code == 0
    assert on_loop == [("request", True), ("response", True)]
    on_loop.clear()
    large = ENCODE_OFF_LOOP_ENTRIES + 1
    assert broker.send(_update(broker, "large", large)).error_code == 0
    assert on_loop == [("request", False), ("response", False)]

    def partitions() -> int:
        return len(broker.broker.metadata.partitions("large"))

    assert broker.call_sync(partitions) == large
