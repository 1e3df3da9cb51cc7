"""The simulated consumer's ListOffsets checks (READ_CONSISTENT): max timestamp (KIP-734) is
asked in a quarter of its asks by time once it has read batches, and a wrong answer is
reported."""

from __future__ import annotations

import pytest

from conformance.cluster_sim import ClusterConfig, ClusterWorld
from conformance.move_sim import ViolationFound
from impl.broker.node import MAX_TIMESTAMP, ListOffsetsCall, ListOffsetsReply
from impl.storage.names import TopicPartition

TP = TopicPartition("t", 0)


def _consumer_that_read(world: ClusterWorld) -> None:
    """Batches read: offsets 0-1 stamped up to 100, 2-3 up to 300, 4-5 up to 300 again."""
    world.consumer.timestamps[TP] = {0: (2, 100), 2: (4, 300), 4: (6, 300)}
    world.consumer.position[TP] = 6


def _answer(world: ClusterWorld, offset: int, timestamp: int) -> None:
    world.consumer.offsets_asked[7] = (MAX_TIMESTAMP, 6)
    world.consumer.on_list_offsets(ListOffsetsReply(7, TP, 0, offset, timestamp, 0))


def test_the_first_record_with_the_largest_timestamp_or_none_passes() -> None:
    world = ClusterWorld(0, ClusterConfig(), lambda _: None)
    _consumer_that_read(world)
    _answer(world, 3, 300)  # (the record stamped 300 in the batch at 2)
    _answer(world, -1, -1)  # (none: the record is not below the HW)
    _answer(world, 7, 400)  # (a newer record, past what was read)


@pytest.mark.parametrize(("offset", "timestamp", "why"), [
    (0, 100, "below the batch at 2 stamped 300"),  # a search by time for -3: the first record
    (5, 300, "past the batch at 2 stamped 300"),  # the last record with the largest
])
def test_a_wrong_max_timestamp_answer_is_reported(offset: int, timestamp: int, why: str) -> None:
    world = ClusterWorld(0, ClusterConfig(), lambda _: None)
    _consumer_that_read(world)
    with pytest.raises(ViolationFound) as found:
        _answer(world, offset, timestamp)
    assert found.value.invariant == "READ_CONSISTENT"
    assert found.value.message.startswith("t-0: ListOffsets max timestamp answered")
    assert why in found.value.message


def test_the_consumer_asks_for_the_max_timestamp_once_it_has_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    world = ClusterWorld(0, ClusterConfig(), lambda _: None)
    asked: list[int] = []

    def send(source: int, target: int, payload: object) -> None:
        assert isinstance(payload, ListOffsetsCall)
        asked.append(payload.timestamp)

    monkeypatch.setattr(world, "leader_of", lambda tp: 0)
    monkeypatch.setattr(world.network, "send", send)
    for choice in range(24):
        world.consumer.list_offsets(TP, choice)
    assert MAX_TIMESTAMP not in asked  # (nothing read yet)
    _consumer_that_read(world)
    asked.clear()
    for choice in range(24):
        world.consumer.list_offsets(TP, choice)
    assert asked.count(MAX_TIMESTAMP) == 2  # choices 11 and 23: a quarter of the 8 by time
    assert asked.count(-1) + asked.count(-2) == 16
