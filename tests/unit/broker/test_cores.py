from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader

from impl.broker import controller_wire
from impl.broker._codec import decode_request, encode_request
from impl.broker.fetch_response import FetchPartitionReply, encode_fetch_response
from impl.broker.producer_state import (
    INVALID_PRODUCER_EPOCH,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    SEQUENCE_MAX,
    PartitionProducerState,
    SequenceVerdict,
)
from impl.broker.replication import (
    FENCED_LEADER_EPOCH,
    KAFKA_STORAGE_ERROR,
    NONE,
    STALE_BROKER_EPOCH,
    STALE_CONTROLLER_EPOCH,
    ControllerFence,
    PartitionAssignment,
    ReplicaRole,
    decide_leader_and_isr,
    decide_stop_replica,
    fetcher_broker_epoch,
    fetcher_client_id,
    leader_high_watermark,
)
from impl.broker.topic_names import topic_name_error
from impl.controller.requests import (
    BrokerEndpoint,
    ControllerResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from impl.controller.znodes import ListenerEndpoint
from impl.trace import ListTraceSink


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../etc", "x" * 250, "a b", "ü", None])
def test_bad_topic_names(name: str | None) -> None:
    assert topic_name_error(name) is not None


@pytest.mark.parametrize("name", ["a", "A-b_c.d", "x" * 249, "..."])
def test_good_topic_names(name: str) -> None:
    assert topic_name_error(name) is None


def test_sequences() -> None:
    state = PartitionProducerState()
    assert state.check(7, 0, 5, 3).verdict is SequenceVerdict.APPEND  # unknown producer
    state.record(7, 0, first_sequence=0, record_count=3, first_offset=10, last_offset=12)
    duplicate = state.check(7, 0, 0, 3)
    assert duplicate.verdict is SequenceVerdict.DUPLICATE
    assert duplicate.duplicate_of is not None
    assert duplicate.duplicate_of.first_offset == 10
    gap = state.check(7, 0, 4, 1)
    assert (gap.verdict, gap.error_code) == (SequenceVerdict.REJECT, OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert state.check(7, 0, 3, 2).verdict is SequenceVerdict.APPEND
    assert state.check(7, -1, 3, 1).error_code == INVALID_PRODUCER_EPOCH
    state.record(7, 1, first_sequence=0, record_count=1, first_offset=13, last_offset=13)
    assert state.check(7, 0, 3, 1).error_code == INVALID_PRODUCER_EPOCH
    assert state.check(7, 2, 1, 1).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert state.check(7, 2, 0, 1).verdict is SequenceVerdict.APPEND


def test_sequence_wraps() -> None:
    state = PartitionProducerState()
    state.record(
        1, 0, first_sequence=SEQUENCE_MAX - 1, record_count=2, first_offset=0, last_offset=1
    )
    assert state.check(1, 0, 0, 1).verdict is SequenceVerdict.APPEND
    assert state.check(1, 0, 1, 1).verdict is SequenceVerdict.REJECT


def _assignment(leader_epoch: int, *, partition_epoch: int = 0, is_new: bool = False,
                leader: int = 1) -> PartitionAssignment:
    return PartitionAssignment("t", 0, 1, leader, leader_epoch, (1,), partition_epoch, (1,),
                               is_new)


def test_controller_fence() -> None:
    fence = ControllerFence(1, broker_epoch=100)
    assert fence.check(0, 5, 100) == NONE
    assert fence.check(0, 4, 100) == STALE_CONTROLLER_EPOCH
    assert fence.check(0, 6, 99) == STALE_BROKER_EPOCH
    assert fence.controller_epoch == 5
    assert fence.check(0, 5, -1) == NONE


def test_leader_and_isr_decisions() -> None:
    sink = ListTraceSink()
    first = decide_leader_and_isr(1, None, _assignment(3), hosted=False, replica_offline=False,
                                  any_dir_offline=False, trace=sink)
    assert first.error_code == NONE
    assert first.create_log
    assert first.became_leader
    assert first.state is not None
    assert first.state.role is ReplicaRole.LEADER
    assert [event.event for event in sink] == ["BECOME_LEADER"]
    older = decide_leader_and_isr(1, first.state, _assignment(2), hosted=True,
                                  replica_offline=False, any_dir_offline=False)
    assert older.error_code == FENCED_LEADER_EPOCH
    same = decide_leader_and_isr(1, first.state, _assignment(3), hosted=True,
                                 replica_offline=False, any_dir_offline=False)
    assert (same.error_code, same.state) == (NONE, None)
    isr_change = decide_leader_and_isr(1, first.state, _assignment(3, partition_epoch=1),
                                       hosted=True, replica_offline=False, any_dir_offline=False)
    assert isr_change.state is not None
    assert not isr_change.became_leader
    offline = decide_leader_and_isr(1, first.state, _assignment(4), hosted=False,
                                    replica_offline=True, any_dir_offline=True)
    assert offline.error_code == KAFKA_STORAGE_ERROR
    missing = decide_leader_and_isr(1, None, _assignment(4), hosted=False,
                                    replica_offline=False, any_dir_offline=True)
    assert missing.error_code == KAFKA_STORAGE_ERROR
    new = decide_leader_and_isr(1, None, _assignment(4, is_new=True), hosted=False,
                                replica_offline=False, any_dir_offline=True)
    assert new.create_log
    follower = decide_leader_and_isr(1, first.state, _assignment(5, leader=2), hosted=True,
                                     replica_offline=False, any_dir_offline=False)
    assert follower.state is not None
    assert follower.state.role is ReplicaRole.FOLLOWER
    assert decide_stop_replica(first.state, 2, replica_offline=False) == FENCED_LEADER_EPOCH
    assert decide_stop_replica(first.state, -2, replica_offline=False) == NONE
    assert decide_stop_replica(first.state, 3, replica_offline=True) == KAFKA_STORAGE_ERROR


def test_high_watermark_is_min_isr_leo_and_monotonic() -> None:
    assert leader_high_watermark(0, 10, {2: 7, 3: 4}, [1, 2], 1) == 7
    assert leader_high_watermark(8, 10, {2: 7}, [1, 2], 1) == 8
    assert leader_high_watermark(0, 10, {}, [1], 1) == 10


REQUESTS = [
    LeaderAndIsrRequest(
        controller_id=1, controller_epoch=4, broker_epoch=77,
        partition_states=(
            LeaderAndIsrPartitionState("a", 0, 4, 1, 2, (1, 2), 5, (1, 2), is_new=True),
            LeaderAndIsrPartitionState("b", 3, 4, 2, 9, (2,), 1, (2, 1), adding_replicas=(1,)),
            LeaderAndIsrPartitionState("a", 1, 4, 1, 2, (1,), 0, (1,)),
        ),
        live_leaders=(BrokerEndpoint(1, "h", 9092), BrokerEndpoint(2, "g", 9093)),
    ),
    StopReplicaRequest(1, 4, 77, (StopReplicaPartition("a", 0, -2, True),
                                  StopReplicaPartition("c", 1, 3, False))),
    UpdateMetadataRequest(
        1, 4, 77,
        (BrokerEndpoint(1, "h", 9093, "r1", (
            ListenerEndpoint("INTERNAL", "SASL_SSL", "h", 9093),
            ListenerEndpoint("CLIENTS", "PLAINTEXT", "h.example", 9092),
            ListenerEndpoint("TLS", "SSL", "h", 9094),
            ListenerEndpoint("SASL", "SASL_PLAINTEXT", "h", 9095))),
         BrokerEndpoint(2, "g", 9093, None,
                        (ListenerEndpoint("PLAINTEXT", "PLAINTEXT", "g", 9093),))),
        (UpdateMetadataPartitionState("a", 0, 4, 1, 2, (1, 2), 5, (1, 2), (2,)),),
    ),
]


def _sorted(request: object) -> object:
    if isinstance(request, LeaderAndIsrRequest):
        key = sorted(request.partition_states, key=lambda s: (s.topic, s.partition))
        return (request.controller_id, request.broker_epoch, key, request.live_leaders)
    return request


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: type(r).__name__)
def test_controller_requests_roundtrip_on_the_wire(request_: object) -> None:
    api_key, version = controller_wire.api_of(request_)  # type: ignore[arg-type]
    body = controller_wire.request_to_wire(request_)  # type: ignore[arg-type]
    decoded = decode_request(encode_request(api_key, version, 9, "controller", body)[4:])
    back = controller_wire.request_from_wire(api_key, decoded.body)
    assert _sorted(back) == _sorted(request_)
    answer = ControllerResponse(11 if api_key == 6 else 0, {("a", 0): 56} if api_key != 6 else {})
    wire = controller_wire.response_to_wire(api_key, version, answer)
    assert controller_wire.response_from_wire(api_key, wire) == answer


@dataclass(frozen=True)
class _Slice:
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)


@pytest.mark.parametrize("version", [4, 5, 7, 11])
def test_hand_written_fetch_response_parses_with_kio(version: int) -> None:
    replies = [
        FetchPartitionReply(0, 0, 10, 10, 0, (_Slice(b"abc"), _Slice(b"defg"))),
        FetchPartitionReply(1, 1, -1, -1, -1),
    ]
    pieces = encode_fetch_response(version, 77, [("topic", replies)], session_id=0)
    raw = b"".join(p if isinstance(p, bytes) else p.data for p in pieces)  # type: ignore[attr-defined]
    assert struct.unpack_from(">i", raw)[0] == len(raw) - 4
    response_class: type[Any] = load_response_schema(1, version)
    header, size = entity_reader(response_class.__header_schema__)(raw[4:], 0)
    body, used = entity_reader(response_class)(raw[4:], size)
    assert header.correlation_id == 77
    assert size + used == len(raw) - 4
    partitions = body.responses[0].partitions
    assert partitions[0].records == b"abcdefg"
    assert partitions[0].high_watermark == 10
    assert partitions[1].error_code == 1


def test_whole_batches_drops_a_partial_tail() -> None:
    from impl.storage.record_batch import build_batch, whole_batches

    first = build_batch([b"a", b"b"])
    second = build_batch([b"c"], base_offset=2)
    assert whole_batches(first + second) == first + second
    assert whole_batches(first + second[:-1]) == first
    assert whole_batches(first[:30]) == b""


def test_desired_isr_shrinks_laggards_and_expands_caught_up() -> None:
    from impl.broker.replication import ReplicaState, desired_isr

    state = ReplicaState("t", 0, ReplicaRole.LEADER, 1, 3, 0, (1, 2), (1, 2, 3))
    kept = desired_isr(state, 10, follower_log_end_offsets={2: 10, 3: 4},
                       last_caught_up_ms={2: 900}, now_ms=1000, lag_time_max_ms=500,
                       leader_epoch_start_offset=0)
    assert kept == (1, 2)
    expanded = desired_isr(state, 10, follower_log_end_offsets={2: 10, 3: 10},
                           last_caught_up_ms={2: 900}, now_ms=1000, lag_time_max_ms=500,
                           leader_epoch_start_offset=0)
    assert expanded == (1, 2, 3)
    shrunk = desired_isr(state, 10, follower_log_end_offsets={2: 8},
                         last_caught_up_ms={2: 100}, now_ms=1000, lag_time_max_ms=500,
                         leader_epoch_start_offset=0)
    assert shrunk == (1,)


def test_timestamp_error() -> None:
    from impl.broker.replication import INVALID_TIMESTAMP, timestamp_error

    assert timestamp_error(1000, 1500, log_append_time=False, now_ms=2000,
                           difference_max_ms=1000) == NONE
    assert timestamp_error(500, 1500, log_append_time=False, now_ms=2000,
                           difference_max_ms=1000) == INVALID_TIMESTAMP
    assert timestamp_error(1000, 9000, log_append_time=False, now_ms=2000,
                           difference_max_ms=1000) == INVALID_TIMESTAMP
    assert timestamp_error(0, 0, log_append_time=True, now_ms=2000,
                           difference_max_ms=1) == NONE


def test_a_followers_fetch_names_its_broker_epoch_in_its_client_id() -> None:
    """KIP-903's ReplicaEpoch has no field in Fetch v11: the follower's client id carries it,
    and anything else reads as unknown (-1), never as another broker's epoch."""
    assert fetcher_client_id(3, -1) == "replica-fetcher-3"
    assert fetcher_broker_epoch(fetcher_client_id(3, 4294967301), 3) == 4294967301
    for client_id, replica in ((fetcher_client_id(3, 7), 4), ("replica-fetcher-3", 3),
                               (None, 3), ("replica-fetcher-3-epoch-x", 3),
                               ("replica-fetcher-3-epoch--5", 3), ("rdkafka", 3),
                               ("replica-fetcher-3-epoch-" + "9" * 30, 3)):
        assert fetcher_broker_epoch(client_id, replica) == -1, client_id
