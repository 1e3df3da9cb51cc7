"""A new leader rebuilds its idempotent producers from a log longer than one replay read.

Replay reads the log in pieces of ``REPLAY_READ_BYTES``; a piece ends at its size limit, in the
middle of a batch. Only whole batches are replayed and the next read starts at the cut batch, so
the rebuilt state knows every batch: the next sequence is accepted and a retried batch is a
duplicate of its original offsets.
"""

from __future__ import annotations

import trio

from conformance.disk import SimDisk
from impl.broker.producer_state import SequenceVerdict
from impl.broker.replica_manager import REPLAY_READ_BYTES, ReplicaManager
from impl.storage import LogManager, StorageConfig, TopicPartition
from impl.storage.record_batch import build_batch

DIR = "/data/a"
TP = TopicPartition("replayed", 0)
PRODUCER_ID = 7
RECORDS_PER_BATCH = 5
VALUE = b"v" * 3001  # batches of an odd size, so the read limit falls inside one


def test_replay_across_reads_cut_inside_a_batch() -> None:
    async def main() -> None:
        logs = LogManager.open(
            StorageConfig(log_dirs=(DIR,), segment_bytes=64 << 20), disk=SimDisk([DIR])
        )
        partition_log = logs.create(TP, True)
        batches = 0
        offsets: list[tuple[int, int]] = []
        while partition_log.size_in_bytes <= 3 * REPLAY_READ_BYTES:
            records = build_batch([VALUE] * RECORDS_PER_BATCH, producer_id=PRODUCER_ID,
                                  producer_epoch=0,
                                  base_sequence=batches * RECORDS_PER_BATCH)
            base, last, _ = await partition_log.append_as_leader(records, 0)
            offsets.append((base, last))
            batches += 1
        assert REPLAY_READ_BYTES % len(records) != 0
        replicas = ReplicaManager(1, logs, min_insync_replicas=1, message_max_bytes=1 << 20)
        state = replicas.producer_state(TP)
        following = state.check(PRODUCER_ID, 0, batches * RECORDS_PER_BATCH, RECORDS_PER_BATCH)
        assert following.verdict is SequenceVerdict.APPEND
        retried = state.check(PRODUCER_ID, 0, (batches - 1) * RECORDS_PER_BATCH,
                              RECORDS_PER_BATCH)
        assert retried.verdict is SequenceVerdict.DUPLICATE
        assert retried.duplicate_of is not None
        assert (retried.duplicate_of.first_offset,
                retried.duplicate_of.last_offset) == offsets[-1]
        logs.close()

    trio.run(main)
