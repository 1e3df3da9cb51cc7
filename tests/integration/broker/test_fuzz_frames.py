"""Invariant: no byte sequence a client sends crashes the broker or changes stored data.

Each malformed input (random bytes, truncated frames, lying length prefixes, unknown API keys,
oversized frames, valid requests with bytes flipped — AlterReplicaLogDirs naming a path with
``..`` among them) gets response frames and/or a closed connection: never a hang after the
client half-closes, never a handler crash (``Server.internal_errors`` stays 0). Afterwards the
partition's log is byte-identical and nothing was created beside the log dirs. Delivering a
case all at once and in small pieces gives the same bytes back.

Seeded: ``FUZZ_SEED`` and the case index decide every input.
"""

from __future__ import annotations

import contextlib
import random
import socket
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from impl.broker._codec import encode_request
from impl.broker._kio_build import build
from impl.storage import TopicPartition
from impl.storage.record_batch import build_batch

from ._harness import RunningBroker

pytestmark = pytest.mark.integration

FUZZ_SEED = 20261122
CASES_DEFAULT = 200
CASES_SLOW = 5000
RECEIVE_TIMEOUT_SECONDS = 10.0


def _request(api_key: int, version: int, data: dict[str, object]) -> bytes:
    from kio.index import load_request_schema

    request_class = load_request_schema(api_key, version)
    return encode_request(api_key, version, 7, "fuzz", build(request_class, data))


def _valid_requests(log_dir: str) -> list[bytes]:
    batch = build_batch([b"fuzz-value"], timestamp_ms=1)
    escape = f"{log_dir}/../../{Path(log_dir).name}"
    return [
        _request(34, 1, {"dirs": [{"path": escape, "topics": [{"name": "fz",
                                                               "partitions": [0]}]}]}),
        _request(35, 2, {"topics": [{"topic": "fz", "partitions": [0, 1]}]}),
        _request(18, 3, {"client_software_name": "f", "client_software_version": "1"}),
        _request(18, 0, {}),
        _request(3, 8, {"topics": [{"name": "fz"}], "allow_auto_topic_creation": False,
                        "include_cluster_authorized_operations": False,
                        "include_topic_authorized_operations": False}),
        _request(1, 11, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                         "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                         "topics": [{"topic": "fz", "partitions": [
                             {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                              "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                         "forgotten_topics_data": [], "rack_id": ""}),
        _request(2, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "fz", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                           "timestamp": -1}]}]}),
        _request(35, 1, {"topics": None}),
        # a produce to a topic this broker does not have: flipped bytes must not make it land
        _request(0, 8, {"transactional_id": None, "acks": 1, "timeout": 1000, "topic_data": [
            {"name": "QQQQQQQQ", "partition_data": [{"index": 0, "records": batch}]}]}),
    ]


def _case(rng: random.Random, valid: list[bytes], max_request_bytes: int) -> bytes:
    kind = rng.randrange(7)
    if kind == 0:  # random bytes
        return rng.randbytes(rng.randrange(0, 200))
    if kind == 1:  # a valid frame truncated, with an honest prefix for the cut body
        body = rng.choice(valid)[4:]
        cut = body[: rng.randrange(0, len(body))]
        return struct.pack(">i", len(cut)) + cut
    if kind == 2:  # lying length prefix
        frame = rng.choice(valid)
        lie = max(0, len(frame) - 4 + rng.choice([-9, -3, -1, 1, 2, 50, 4000]))
        return struct.pack(">i", lie) + frame[4:]
    if kind == 3:  # unknown API key or version
        api_key = rng.choice([rng.randrange(-5, 200), 10879, 32767, -32768])
        version = rng.randrange(-3, 40)
        return struct.pack(">ihhi", 8, api_key, version, rng.randrange(2**31)) + b""
    if kind == 4:  # oversized or negative size prefix
        size = rng.choice([max_request_bytes + 1, 2**31 - 1, -1, -(2**31)])
        return struct.pack(">i", size) + rng.randbytes(16)
    if kind == 5:  # valid frame with a few bytes flipped (framing kept)
        flipped = bytearray(rng.choice(valid))
        for _ in range(rng.randrange(1, 4)):
            position = rng.randrange(4, len(flipped))
            flipped[position] ^= 1 << rng.randrange(8)
        return bytes(flipped)
    # several valid frames followed by garbage
    frames = b"".join(rng.choice(valid) for _ in range(rng.randrange(1, 4)))
    return frames + rng.randbytes(rng.randrange(0, 12))


def _exchange(bootstrap: str, payload: bytes, pieces: Callable[[bytes], list[bytes]]) -> bytes:
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=RECEIVE_TIMEOUT_SECONDS) as sock:
        for piece in pieces(payload):
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)
        received = bytearray()
        while True:
            try:
                chunk = sock.recv(1 << 16)
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
        return bytes(received)


def _log_bytes(broker: RunningBroker, tp: TopicPartition) -> tuple[int, bytes]:
    def read() -> tuple[int, bytes]:
        logs = broker.broker.logs
        assert logs is not None
        partition = logs.get(tp)
        assert partition is not None
        slices = partition.read(0, 1 << 30, None)
        try:
            return partition.log_end_offset, b"".join(piece.read_all() for piece in slices)
        finally:
            for piece in slices:
                piece.close()

    return broker.call_sync(read)


def _run(broker: RunningBroker, cases: int) -> None:
    from kafka import KafkaProducer

    assert broker.become_leader("fz")[0].error_code == 0
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for index in range(20):
        producer.send("fz", value=b"stored-%d" % index, partition=0).get(timeout=30)
    producer.close()
    tp = TopicPartition("fz", 0)
    before = _log_bytes(broker, tp)
    assert before[0] == 20
    valid = _valid_requests(broker.log_dirs[0])
    root = Path(broker.log_dirs[0]).parent
    entries_before = sorted(p.name for p in root.iterdir())
    limit = broker.config.socket_request_max_bytes
    for index in range(cases):
        rng = random.Random(FUZZ_SEED * 1_000_003 + index)
        payload = _case(rng, valid, limit)
        whole = _exchange(broker.bootstrap, payload, lambda data: [data])
        step = rng.randrange(1, 8)

        def pieces(data: bytes, step: int = step) -> list[bytes]:
            return [data[i : i + step] for i in range(0, len(data), step)]

        split = _exchange(broker.bootstrap, payload, pieces)
        assert whole == split, f"case {index}: whole and split delivery differ"
        assert broker.broker.server is not None
        assert broker.broker.server.internal_errors == 0, f"case {index} crashed a handler"
    assert _log_bytes(broker, tp) == before
    assert sorted(p.name for p in root.iterdir()) == entries_before  # nothing created outside
    answer = _exchange(broker.bootstrap, valid[1], lambda data: [data])
    assert len(answer) > 8
    assert struct.unpack_from(">i", answer, 4)[0] == 7


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_fuzzed_frames_never_crash_or_change_data(broker: RunningBroker) -> None:
    _run(broker, CASES_DEFAULT)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_fuzzed_frames_campaign(broker: RunningBroker) -> None:
    _run(broker, CASES_SLOW)
