"""An ElectLeaders answer of many partitions is built and encoded off the event loop.

The structured wire fuzz (seed 20261129) sent ElectLeaders for every partition of a
32,767-partition topic again and again: building and encoding the answer held the broker's event
loop for 0.3-0.5 s each time. Beyond ``ENCODE_OFF_LOOP_ENTRIES`` partitions it is built in a
worker thread."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from impl.broker import api_versions
from impl.broker._codec import load_request_schema
from impl.broker._handlers import ENCODE_OFF_LOOP_ENTRIES
from impl.broker._handlers_admin import AdminHandlers
from impl.broker._kio_build import build
from impl.broker.admin import AdminClient

from ._harness import RunningBroker

pytestmark = pytest.mark.integration

UNKNOWN_TOPIC_OR_PARTITION = 3


def test_a_large_election_answer_is_built_in_a_worker_thread(
        broker: RunningBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    answered_on: list[bool] = []
    answer = AdminHandlers._answer

    def spy(self: AdminHandlers, request: Any, data: Any) -> bytes:
        if "replica_election_results" in data:
            answered_on.append(threading.current_thread().name == "broker")
        return answer(self, request, data)

    monkeypatch.setattr(AdminHandlers, "_answer", spy)
    with AdminClient(broker.bootstrap) as admin:
        for count in (3, ENCODE_OFF_LOOP_ENTRIES + 1):
            request = build(load_request_schema(api_versions.ELECT_LEADERS, 1), {
                "election_type": 0, "timeout": 5_000,
                "topic_partitions": [{"topic": "nowhere", "partitions": list(range(count))}],
            })
            response = admin._any().call(api_versions.ELECT_LEADERS, 1, request)
            results = [(result.topic, int(p.partition_id), int(p.error_code))
                       for result in response.replica_election_results
                       for p in result.partition_result]
            assert results == [("nowhere", p, UNKNOWN_TOPIC_OR_PARTITION)
                               for p in range(count)]
    # the small answer on the broker's event loop thread ("broker"), the large one off it
    assert answered_on == [True, False]
