"""The cluster simulator's DeleteRecords client (an admin client, KIP-107).

Now and then (a stream of the seed of its own, ``records-admin``, so the workload's and the
faults' draws stay as they were) the admin asks the leader of a partition, as ZooKeeper's
partition state names it, to delete the records below an offset: the leader moves its log start
offset durably and answers once every ISR member's log start offset reached it (Kafka's
``DelayedDeleteRecords``) or with REQUEST_TIMED_OUT; followers follow the log start their
fetch answers carry, and one whose log ends below it starts afresh there (Kafka's
``truncateFullyAndStartAt``, a ``TRUNCATE`` event of policy ``LOG_START``).

Which offset, so that what the checkers know stays true:

* at most the consumer's position (it read below the HW: every later leader holds the offset,
  and the consumer never falls below a log start);
* at most the base offset of the producer's last acknowledged batch of the partition and of
  the prober's first batch, with no probe in flight (the idempotence state is rebuilt from the
  log: a producer's last batch must stay, or a retry would be appended twice).

The books forget what the request may delete as it is sent (:attr:`RecordsAdmin.deleted_below`;
the request may be lost or refused, the records may stay: the checks below it are only
dropped): NO_COMMITTED_LOSS, LOG_MATCHING and the final checks look at batches from that offset
on. One request in four asks far past the HW and must be refused (OFFSET_OUT_OF_RANGE): a
leader that took it would delete acknowledged records (NO_COMMITTED_LOSS).

This module is a sans-IO core.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from impl.broker.node import DeleteRecords, DeleteRecordsReply
from impl.storage.names import TopicPartition

from ._cluster_nodes import PRODUCE_TIMEOUT_MS

if TYPE_CHECKING:
    from conformance.rng import SimRng

    from .cluster_sim import ClusterWorld

__sans_io__ = True

#: The admin client's node id (in no network partition group: connected to every broker).
ADMIN_NODE: Final = 1002
#: The chance that a step sends a DeleteRecords.
DELETE_RECORDS_PROBABILITY: Final = 0.06
#: An offset past any HW of a run (the request must be refused).
PAST_THE_HW: Final = 1 << 40


class RecordsAdmin:
    """Sends DeleteRecords and keeps the offset below which the books forget batches.

    Args:
        world: the cluster.
        rng: the admin's stream.
    """

    def __init__(self, world: ClusterWorld, rng: SimRng) -> None:
        self.world = world
        self.rng = rng
        #: per partition: the highest offset asked to delete below (batches below are forgotten)
        self.deleted_below: dict[TopicPartition, int] = {}
        #: requests in flight: request id -> the offset asked
        self.asked: dict[int, int] = {}
        self._request_ids = 0
        self.sent = 0
        self.acknowledged = 0
        self.refused = 0

    def mark(self, tp: TopicPartition) -> int:
        """The offset below which ``tp``'s batches may have been deleted (0: none)."""
        return self.deleted_below.get(tp, 0)

    def operate(self) -> None:
        """One step: now and then, a DeleteRecords to a partition's leader."""
        world = self.world
        rng = self.rng
        if not world.config.delete_records or not rng.chance(DELETE_RECORDS_PROBABILITY):
            return
        tp = world.tps[rng.randrange(len(world.tps))]
        past = rng.randrange(4) == 0
        leader = world.leader_of(tp)
        if leader < 0:
            return
        if past:
            offset = PAST_THE_HW
        else:
            producer = world.producer
            base = producer.probe_base.get(tp)
            acked = world.acked[tp]
            if base is None or not acked or any(
                    probed == tp for _, probed in producer.probes.values()):
                return
            offset = min(world.consumer.position.get(tp, 0), acked[-1][0], base)
            if offset <= self.mark(tp):
                return
            self.deleted_below[tp] = offset
        self._request_ids += 1
        self.asked[self._request_ids] = offset
        self.sent += 1
        world.network.send(ADMIN_NODE, leader, DeleteRecords(
            ADMIN_NODE, self._request_ids, tp, offset, PRODUCE_TIMEOUT_MS))

    def on_reply(self, reply: object) -> None:
        """A DeleteRecords answer: one past the HW must have been refused."""
        if not isinstance(reply, DeleteRecordsReply):
            return
        offset = self.asked.pop(reply.request_id, None)
        if offset is None:
            return
        if reply.error != 0:
            self.refused += 1
            return
        self.acknowledged += 1
        if offset == PAST_THE_HW:
            self.world.violation("NO_COMMITTED_LOSS", (
                f"{reply.tp}: DeleteRecords below offset {offset}, past the HW, was accepted "
                f"(low watermark {reply.low_watermark}): acknowledged records deleted"))
        elif reply.low_watermark < offset:
            self.world.violation("NO_COMMITTED_LOSS", (
                f"{reply.tp}: DeleteRecords below offset {offset} answered the low watermark "
                f"{reply.low_watermark}"))


__all__ = ["ADMIN_NODE", "RecordsAdmin"]
