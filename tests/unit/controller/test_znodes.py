"""Kafka's znode formats: round trips, and clear errors for malformed data."""

from __future__ import annotations

import json

import pytest

from impl.controller.znodes import (
    ReassignmentTarget,
    TopicAssignment,
    ZnodeFormatError,
    decode_broker,
    decode_controller,
    decode_controller_epoch,
    decode_isr_change,
    decode_log_dir_event,
    decode_partition_state,
    decode_reassignment,
    decode_topic,
    encode_broker,
    encode_controller,
    encode_controller_epoch,
    encode_isr_change,
    encode_log_dir_event,
    encode_partition_state,
    encode_reassignment,
    encode_topic,
    validate_topic_name,
)


def test_round_trips() -> None:
    assert decode_controller(encode_controller(7, 123)) == 7
    assert decode_controller(b"7") == 7
    assert decode_controller_epoch(encode_controller_epoch(42)) == 42
    broker = decode_broker(3, encode_broker("h", 9092, "r1", 5), epoch=99)
    assert (broker.host, broker.port, broker.rack, broker.epoch) == ("h", 9092, "r1", 99)
    assignment = TopicAssignment({0: (1, 2), 1: (2, 1)}, {0: (2,)}, {0: (0,)})
    decoded = decode_topic("t", encode_topic(assignment))
    assert dict(decoded.partitions) == {0: (1, 2), 1: (2, 1)}
    assert dict(decoded.adding_replicas) == {0: (2,)}
    assert dict(decoded.removing_replicas) == {0: (0,)}
    state = decode_partition_state("t", 0, encode_partition_state(1, 4, [1, 2], 3), 8)
    assert (state.leader, state.leader_epoch, state.isr, state.controller_epoch,
            state.zk_version) == (1, 4, (1, 2), 3, 8)
    targets = (ReassignmentTarget("t", 0, (1, 2), ("any", "/d")), ReassignmentTarget("t", 1, (2,)))
    assert decode_reassignment(encode_reassignment(targets)) == targets
    assert targets[0].log_dir_of(2) == "/d"
    assert targets[0].log_dir_of(1) is None
    assert decode_isr_change(encode_isr_change([("t", 3)])) == (("t", 3),)
    assert decode_log_dir_event(encode_log_dir_event(5)) == 5


def test_partition_state_bytes_are_kafkas_json() -> None:
    data = encode_partition_state(1, 4, [1, 2], 3)
    assert json.loads(data) == {"controller_epoch": 3, "isr": [1, 2], "leader": 1,
                                "leader_epoch": 4, "version": 1}
    assert data == json.dumps(json.loads(data), sort_keys=True,
                              separators=(",", ":")).encode()
    data = encode_partition_state(1, 4, [1, 2], 3, [40, -1])
    assert json.loads(data) == {"controller_epoch": 3, "isr": [1, 2], "leader": 1,
                                "leader_epoch": 4, "version": 1, "isr_broker_epochs": [40, -1]}
    assert data == json.dumps(json.loads(data), sort_keys=True,
                              separators=(",", ":")).encode()
    state = decode_partition_state("t", 0, data, 8)
    assert state.isr_broker_epochs == (40, -1)
    assert (state.vouched_epoch(1), state.vouched_epoch(2), state.vouched_epoch(3)) == (
        40, None, None)
    assert decode_partition_state("t", 0, encode_partition_state(1, 4, [1], 3), 8
                                  ).isr_broker_epochs is None


@pytest.mark.parametrize(
    ("decode", "data"),
    [
        (decode_controller, b"{not json"),
        (decode_controller_epoch, b"-1"),
        (decode_controller_epoch, b"one"),
        (lambda d: decode_topic("t", d), b'{"partitions":{"0":[1],"2":[1]}}'),
        (lambda d: decode_topic("t", d), b'{"partitions":{"0":[1,1]}}'),
        (lambda d: decode_topic("t", d), b'{"partitions":{"0":[]}}'),
        (lambda d: decode_topic("t", d), b'{"partitions":{"x":[1]}}'),
        (lambda d: decode_topic("t", d), b'{"partitions":{"0":["1"]}}'),
        (lambda d: decode_partition_state("t", 0, d, 0), b'{"leader":true,"isr":[]}'),
        (lambda d: decode_partition_state("t", 0, d, 0),
         b'{"leader":1,"leader_epoch":0,"isr":[1,2],"controller_epoch":1,'
         b'"isr_broker_epochs":[5]}'),
        (lambda d: decode_partition_state("t", 0, d, 0),
         b'{"leader":1,"leader_epoch":0,"isr":[1],"controller_epoch":1,'
         b'"isr_broker_epochs":[-2]}'),
        (lambda d: decode_partition_state("t", 0, d, 0),
         b'{"leader":1,"leader_epoch":0,"isr":[1],"controller_epoch":1,'
         b'"isr_broker_epochs":["5"]}'),
        (decode_reassignment, b'{"partitions":{}}'),
        (decode_reassignment,
         b'{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["a","b"]}]}'),
        (decode_reassignment,
         b'{"partitions":[{"topic":"t","partition":0,"replicas":[1]},'
         b'{"topic":"t","partition":0,"replicas":[2]}]}'),
        (decode_reassignment,
         b'{"partitions":[{"topic":"a/b","partition":0,"replicas":[1]}]}'),
        (decode_log_dir_event, b'{"broker":1,"event":2}'),
        (decode_isr_change, b'{"partitions":[{"partition":1}]}'),
        (lambda d: decode_broker(1, d, 0), b'{"port":1}'),
    ],
)
def test_malformed_data_is_rejected(decode: object, data: bytes) -> None:
    assert callable(decode)
    with pytest.raises(ZnodeFormatError):
        decode(data)


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "a b", "t/x", "ü"])
def test_invalid_topic_names(name: str) -> None:
    with pytest.raises(ZnodeFormatError):
        validate_topic_name(name)


def test_valid_topic_names() -> None:
    for name in ("a", "A-b_c.d", "a" * 249):
        validate_topic_name(name)
