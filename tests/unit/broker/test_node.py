"""The broker node's decisions, stepped directly over an in-memory store.

Each test drives :class:`impl.broker.node.BrokerNode` with inputs and checks the effects it
returns: the shells (trio, simulator) only carry these out, so this is where the replication
decisions are pinned down.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import pytest

from impl.broker.node import (
    Append,
    Appended,
    BrokerNode,
    EpochCall,
    EpochReply,
    FetchCall,
    FetchReply,
    IsrWritten,
    LeaderAndIsr,
    ListOffsetsCall,
    ListOffsetsReply,
    NodeConfig,
    Produce,
    ProduceReply,
    Reply,
    RoleChanged,
    Send,
    StopReplica,
    Tick,
    WriteIsr,
)
from impl.broker.replication import ReplicaRole
from impl.controller.requests import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaPartition,
    StopReplicaRequest,
)
from impl.storage import record_batch as rb
from impl.storage import records as rec
from impl.storage.names import TopicPartition
from impl.trace import ListTraceSink

TP = TopicPartition("t", 0)
PRODUCER_ID = 7


@dataclass
class MemLog:
    """A partition log in memory: whole batches with offsets and epochs assigned."""

    batches: list[bytes] = field(default_factory=list)
    epochs: list[tuple[int, int]] = field(default_factory=list)
    high_watermark: int = 0
    log_start_offset: int = 0

    @property
    def log_end_offset(self) -> int:
        return rb.parse_header(self.batches[-1]).next_offset if self.batches else self.start

    @property
    def latest_epoch(self) -> int:
        return self.epochs[-1][0] if self.epochs else -1

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        if not self.epochs or epoch > self.epochs[-1][0]:
            self.epochs.append((epoch, start_offset))

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        from impl.broker.replication import epoch_end_offset
        return epoch_end_offset(self.epochs, self.log_end_offset, epoch)

    def append(self, records: bytes, leader_epoch: int | None) -> tuple[int, int]:
        base = self.log_end_offset
        if leader_epoch is not None:
            buffer = bytearray(records)
            headers = rb.validate_client_records(buffer, 1 << 20)
            last = rb.assign_offsets(buffer, headers, base, leader_epoch)
            self.assign_epoch(leader_epoch, base)
            self.batches.append(bytes(buffer))
            return base, last
        last = base
        for header in rb.iter_batches(records):
            self.assign_epoch(header.partition_leader_epoch, header.base_offset)
            last = header.last_offset
        position = 0
        while position < len(records):
            length = int.from_bytes(records[position + 8:position + 12], "big") + 12
            self.batches.append(records[position:position + length])
            position += length
        return base, last

    def truncate_fully(self, offset: int) -> None:
        self.batches, self.epochs = [], []
        self.log_start_offset = self.high_watermark = self.start = offset

    start: int = 0

    def truncate(self, offset: int) -> None:
        self.batches = [b for b in self.batches if rb.parse_header(b).base_offset < offset]
        self.epochs = [(e, s) for e, s in self.epochs if s < offset]
        self.high_watermark = min(self.high_watermark, self.log_end_offset)


class MemStore:
    """:class:`impl.broker.node.NodeStore` in memory."""

    def __init__(self) -> None:
        self.logs: dict[TopicPartition, MemLog] = {}
        self.offline: set[TopicPartition] = set()

    def log(self, tp: TopicPartition) -> MemLog | None:
        return None if tp in self.offline else self.logs.get(tp)

    def is_offline(self, tp: TopicPartition) -> bool:
        return tp in self.offline

    def any_dir_offline(self) -> bool:
        return bool(self.offline)

    def offline_replicas(self) -> set[TopicPartition]:
        return self.offline

    def hosted(self) -> list[TopicPartition]:
        return list(self.logs)

    def create(self, tp: TopicPartition, is_new: bool) -> None:
        self.logs[tp] = MemLog()

    def delete(self, tp: TopicPartition) -> None:
        del self.logs[tp]

    def truncate(self, tp: TopicPartition, offset: int) -> None:
        self.logs[tp].truncate(offset)

    def follow_log_start_offset(self, tp: TopicPartition, leader_log_start_offset: int) -> None:
        log = self.logs[tp]
        log.log_start_offset = max(log.log_start_offset,
                                   min(leader_log_start_offset, log.high_watermark))

    def delete_records(self, tp: TopicPartition, offset: int) -> None:
        log = self.logs[tp]
        log.log_start_offset = max(log.log_start_offset, offset)
    def truncate_fully(self, tp: TopicPartition, start_offset: int) -> None:
        self.logs[tp].truncate_fully(start_offset)

    def offset_for_timestamp(self, tp: TopicPartition, timestamp_ms: int
                             ) -> tuple[int, int] | None:
        for data in self.logs[tp].batches:
            header = rb.parse_header(data)
            if header.max_timestamp >= timestamp_ms:
                return header.base_offset, header.max_timestamp
        return None

    def max_timestamp_record(self, tp: TopicPartition) -> tuple[int, int] | None:
        log = self.logs[tp]
        stamped = [(record.timestamp, record.offset) for data in log.batches
                   for record in rec.iter_records(data)
                   if record.offset >= log.log_start_offset and record.timestamp >= 0]
        if not stamped:
            return None
        newest = max(timestamp for timestamp, _ in stamped)
        return min(offset for timestamp, offset in stamped if timestamp == newest), newest

    def epoch_entries(self, tp: TopicPartition) -> list[tuple[int, int]]:
        return list(self.logs[tp].epochs)

    def epoch_start_offset(self, tp: TopicPartition, epoch: int) -> int:
        for entry, start in self.logs[tp].epochs:
            if entry == epoch:
                return start
        return self.logs[tp].log_end_offset

    def read_bytes(self, tp: TopicPartition, offset: int, max_bytes: int) -> bytes:
        return b"".join(b for b in self.logs[tp].batches
                        if rb.parse_header(b).next_offset > offset)

    def read_records(self, tp: TopicPartition, offset: int, max_bytes: int,
                     max_offset: int | None) -> object:
        return b"".join(b for b in self.logs[tp].batches
                        if rb.parse_header(b).next_offset > offset and (
                            max_offset is None or rb.parse_header(b).base_offset < max_offset))


class Harness:
    """One node, its store and a clock; carries out appends (completions stepped at once)."""

    def __init__(self, broker_id: int = 0, **config: Any) -> None:
        self.now = 1_000
        self.store = MemStore()
        self.trace = ListTraceSink()
        self.node = BrokerNode(NodeConfig(broker_id, **config), self.store, trace=self.trace,
                               clock_ms=lambda: self.now)
        self.node.register(10)
        self.controller_epoch = 1

    def step(self, event: object) -> list[Any]:
        """Step and carry out appends; returns every other effect (completions' too)."""
        effects: list[Any] = []
        for effect in self.node.step(event):
            if isinstance(effect, Append):
                log = self.store.logs[effect.tp]
                base, last = log.append(effect.records, effect.leader_epoch)
                effects.extend(self.step(Appended(effect.tp, effect.token, 0, base, last)))
            else:
                effects.append(effect)
        return effects

    def leader_and_isr(self, leader: int, epoch: int, isr: tuple[int, ...],
                       replicas: tuple[int, ...] = (0, 1, 2), zk_version: int = 0,
                       controller_epoch: int | None = None) -> list[Any]:
        state = LeaderAndIsrPartitionState(
            TP.topic, TP.partition, self.controller_epoch, leader, epoch, isr, zk_version,
            replicas, is_new=True)
        return self.step(LeaderAndIsr(99, 1, LeaderAndIsrRequest(
            99, controller_epoch if controller_epoch is not None else self.controller_epoch,
            10, (state,), ())))


def batch(sequence: int, count: int = 1, producer_epoch: int = 0,
          timestamp_ms: int = 0) -> bytes:
    return rb.build_batch([b"v%d" % (sequence + i) for i in range(count)],
                          producer_id=PRODUCER_ID, producer_epoch=producer_epoch,
                          base_sequence=sequence, timestamp_ms=timestamp_ms)


def produce_replies(effects: list[Any]) -> list[ProduceReply]:
    return [e.message for e in effects if isinstance(e, Reply)
            and isinstance(e.message, ProduceReply)]


def fetch_replies(effects: list[Any]) -> list[FetchReply]:
    return [e.message for e in effects if isinstance(e, Reply)
            and isinstance(e.message, FetchReply)]


def sent(h: Harness) -> Any:
    """The one request a tick sends."""
    (request,) = [e.message for e in h.step(Tick()) if isinstance(e, Send)]
    return request


def follower_fetch(h: Harness, replica: int, offset: int, epoch: int) -> list[Any]:
    return h.step(FetchCall(5, replica, 1, TP, offset, epoch))


def test_acks_all_waits_for_the_isr_then_answers() -> None:
    h = Harness(min_insync_replicas=2)
    h.leader_and_isr(0, 1, (0, 1))
    assert produce_replies(h.step(Produce(50, 1, TP, batch(0, 2), -1, 1_000))) == []
    # the follower fetches from 2: its LEO reaches the batch, the HW passes it
    replies = produce_replies(follower_fetch(h, 1, 2, 1))
    assert [(r.request_id, r.error, r.base_offset) for r in replies] == [(1, 0, 0)]
    assert h.store.logs[TP].high_watermark == 2


def test_not_enough_replicas_before_and_after_the_append() -> None:
    h = Harness(min_insync_replicas=2)
    h.leader_and_isr(0, 1, (0,))
    assert produce_replies(h.step(Produce(50, 1, TP, batch(0), -1, 1_000)))[0].error == 19
    h.leader_and_isr(0, 1, (0, 1), zk_version=1)
    assert produce_replies(h.step(Produce(50, 2, TP, batch(0), -1, 1_000))) == []
    # the ISR shrinks to the leader before the follower fetched: the HW passes the batch with
    # one copy, fewer than min.insync.replicas (Kafka's checkEnoughReplicasReachOffset)
    effects = h.step(IsrWritten(TP, (0,), 2))
    assert [r.error for r in produce_replies(effects)] == [20]


def test_acks_all_times_out_on_a_periodic_tick() -> None:
    h = Harness()
    h.leader_and_isr(0, 1, (0, 1))
    h.step(Produce(50, 1, TP, batch(0), -1, 30))
    h.now += 31
    assert [r.error for r in produce_replies(h.step(Tick()))] == [7]


def test_fetch_epoch_fence() -> None:
    h = Harness()
    h.leader_and_isr(0, 5, (0, 1))
    assert fetch_replies(follower_fetch(h, 1, 0, 4))[0].error == 74  # FENCED_LEADER_EPOCH
    assert fetch_replies(follower_fetch(h, 1, 0, 6))[0].error == 75  # UNKNOWN_LEADER_EPOCH
    assert fetch_replies(follower_fetch(h, 1, 0, 5))[0].error == 0
    assert fetch_replies(follower_fetch(h, 1, 3, 5))[0].error == 1  # past the LEO


def test_a_delayed_fetch_asked_again_reads_without_recording_the_follower_again() -> None:
    """Kafka's DelayedFetch completes with a read alone: the follower's position was recorded
    when the request arrived (``updateFollowerFetchState``), so a fetch woken by new records
    reads them and moves neither the HW, the ISR nor the follower's last caught-up time again;
    its trace is the read alone (a FOLLOWER_FETCH from the same offset marked ``asked_again``,
    the response the trace checker replays)."""
    h = Harness(min_insync_replicas=1, replica_lag_time_max_ms=100)
    h.leader_and_isr(0, 1, (0, 1))
    h.step(Produce(50, 1, TP, batch(0, 2), 1, 1_000))
    follower_fetch(h, 1, 2, 1)  # on arrival: caught up, the HW passes both records
    fetched_at = h.now
    assert h.store.logs[TP].high_watermark == 2
    h.step(Produce(50, 2, TP, batch(2), 1, 1_000))
    before = len(h.trace.events)
    h.now += 60
    effects = h.step(FetchCall(5, 1, 1, TP, 2, 1, asked_again=True))
    (reply,) = fetch_replies(effects)
    assert (reply.error, reply.high_watermark) == (0, 2)
    assert [header.base_offset for header in rb.iter_batches(reply.records)] == [2]
    (read,) = h.trace.events[before:]
    assert (read.event, dict(read.fields)) == ("FOLLOWER_FETCH", {
        "replica": 1, "fetch_offset": 2, "asked_again": True, "leader_epoch": 1})
    assert h.node.last_caught_up_ms[TP][1] == fetched_at
    # the same fetch arriving (not asked again) records: traced, caught up now
    before = len(h.trace.events)
    h.step(FetchCall(6, 1, 1, TP, 2, 1))
    (arrival,) = h.trace.events[before:]
    assert (arrival.event, dict(arrival.fields)) == ("FOLLOWER_FETCH", {
        "replica": 1, "fetch_offset": 2, "leader_epoch": 1})
    assert h.node.last_caught_up_ms[TP][1] == h.now


def test_isr_shrinks_after_the_lag_bound_and_expands_per_kip_320() -> None:
    h = Harness(replica_lag_time_max_ms=100)
    h.leader_and_isr(0, 1, (0, 1), replicas=(0, 1))
    h.now += 101
    writes = [e for e in h.step(Tick()) if isinstance(e, WriteIsr)]
    assert [(w.isr, w.partition_epoch) for w in writes] == [((0,), 0)]
    assert [e for e in h.step(Tick()) if isinstance(e, WriteIsr)] == []  # one write in flight
    h.step(IsrWritten(TP, (0,), 1))
    assert h.node.states[TP].isr == (0,)
    # a new epoch starts at 0 here, so a follower at the HW may join
    h.step(Produce(50, 1, TP, batch(0), 1, 1_000))
    writes = [e for e in follower_fetch(h, 1, 1, 1) if isinstance(e, WriteIsr)]
    assert [w.isr for w in writes] == [(0, 1)]


def test_a_follower_removed_for_lag_joins_again_only_on_its_own_fetch() -> None:
    """The periodic check only shrinks: a follower whose last recorded LEO reaches the HW but
    that stopped fetching (crashed, perhaps losing its unflushed tail) is not re-added from that
    old LEO, which made the ISR flap in ZooKeeper (fuzz seeds 7829 and 8630); as Kafka's
    ``maybeExpandIsr``, it joins at a fetch of its own."""
    h = Harness(replica_lag_time_max_ms=100)
    h.leader_and_isr(0, 1, (0, 1, 2))
    h.step(Produce(50, 1, TP, batch(0), 1, 1_000))
    follower_fetch(h, 1, 1, 1)
    follower_fetch(h, 2, 1, 1)  # both at the LEO and the HW, 1
    h.now += 50
    follower_fetch(h, 2, 1, 1)
    h.now += 60  # follower 1 silent for 110 ms, follower 2 for 60
    writes = [e for e in h.step(Tick()) if isinstance(e, WriteIsr)]
    assert [w.isr for w in writes] == [(0, 2)]
    h.step(IsrWritten(TP, (0, 2), 1))
    for _ in range(3):
        h.now += 10
        assert [e for e in h.step(Tick()) if isinstance(e, WriteIsr)] == []
    writes = [e for e in follower_fetch(h, 2, 1, 1) if isinstance(e, WriteIsr)]
    assert writes == []  # another follower's fetch does not bring follower 1 back
    writes = [e for e in follower_fetch(h, 1, 1, 1) if isinstance(e, WriteIsr)]
    assert [w.isr for w in writes] == [(0, 1, 2)]


def test_kip_320_rule_4_keeps_a_follower_below_the_epoch_start_out() -> None:
    h = Harness()
    h.leader_and_isr(0, 1, (0,), replicas=(0, 1))
    h.step(Produce(50, 1, TP, batch(0, 3), 1, 1_000))  # epoch 1: offsets 0..2
    h.leader_and_isr(0, 2, (0,), replicas=(0, 1), zk_version=1)  # epoch 2 starts at 3
    # the HW is 3 (ISR = leader); a follower at 2 has reached neither
    assert [e for e in follower_fetch(h, 1, 2, 2) if isinstance(e, WriteIsr)] == []
    assert [e.isr for e in follower_fetch(h, 1, 3, 2) if isinstance(e, WriteIsr)] == [(0, 1)]


def test_a_leader_restarted_into_its_epoch_keeps_a_follower_below_its_leo_out(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka's ``makeLeader`` sets the epoch's start to the LEO even when the leader leads the
    same epoch again after a restart and its cache has the epoch from lower down: a follower
    joins only once it reaches that LEO, not the restarted leader's lagging HW (fuzz seed
    1351: the cache's start of the epoch, 0, let a follower at 0 join)."""
    h = Harness()
    h.leader_and_isr(0, 1, (0, 1))
    h.step(Produce(50, 1, TP, batch(0, 3), 1, 1_000))  # epoch 1: offsets 0..2
    follower_fetch(h, 1, 3, 1)
    log = h.store.logs[TP]
    assert log.high_watermark == 3
    log.high_watermark = 0  # the restart: the HW checkpoint lags the HW exposed
    h.node = BrokerNode(NodeConfig(0), h.store, trace=h.trace, clock_ms=lambda: h.now)
    h.node.register(10)
    monkeypatch.setattr(h.store, "create", lambda tp, is_new: None)  # the log was loaded
    h.leader_and_isr(0, 1, (0, 1))  # the controller resends the same epoch
    assert h.store.epoch_start_offset(TP, 1) == 0
    follower_fetch(h, 1, 3, 1)  # (follower 1 in sync with the restarted leader: it stays)
    assert [e for e in follower_fetch(h, 2, 0, 1) if isinstance(e, WriteIsr)] == []
    assert [e.isr for e in follower_fetch(h, 2, 3, 1) if isinstance(e, WriteIsr)] == [
        (0, 1, 2)]


def test_an_isr_write_vouches_for_the_incarnations_the_leader_saw_in_sync() -> None:
    """KIP-903 as the ZooKeeper-era state records it: each member's broker epoch, the leader's
    own, a joining follower's from the fetch that brought it in, a kept member's from the
    latest fetch that found it caught up in this leadership. A member not seen in sync since
    the leader took over is left out of the write (fuzz seed 1915: the leader carried over a
    member that had crashed and registered again unseen, and the state's newer write made the
    next controller take it as vouched for)."""
    h = Harness(replica_lag_time_max_ms=100)
    h.leader_and_isr(0, 1, (0, 1, 2), replicas=(0, 1, 2, 3))
    h.step(Produce(50, 1, TP, batch(0), 1, 1_000))
    h.step(FetchCall(5, 1, 1, TP, 1, 1, broker_epoch=21))  # follower 1 in sync (LEO 1)
    # follower 3 joins while follower 2 has not fetched since the leader took over
    writes = [e for e in h.step(FetchCall(6, 3, 1, TP, 1, 1, broker_epoch=33))
              if isinstance(e, WriteIsr)]
    assert [(w.isr, w.isr_broker_epochs) for w in writes] == [((0, 1, 3), (10, 21, 33))]
    h.step(IsrWritten(TP, (0, 1, 3), 1))
    # follower 1 restarted (epoch 22) and fetches below the leader's LEO: the leader still
    # vouches only for the incarnation it saw in sync
    h.step(FetchCall(7, 1, 2, TP, 0, 1, broker_epoch=22))
    h.now += 60
    h.step(FetchCall(8, 3, 1, TP, 1, 1, broker_epoch=33))
    h.now += 60  # follower 1 has not caught up for 120 ms: it leaves
    writes = [e for e in h.step(Tick()) if isinstance(e, WriteIsr)]
    assert [(w.isr, w.isr_broker_epochs) for w in writes] == [((0, 3), (10, 33))]
    h.step(IsrWritten(TP, (0, 3), 2))
    writes = [e for e in h.step(FetchCall(9, 1, 2, TP, 1, 1, broker_epoch=22))
              if isinstance(e, WriteIsr)]
    assert [(w.isr, w.isr_broker_epochs) for w in writes] == [((0, 1, 3), (10, 22, 33))]


def test_a_member_that_rejoined_is_kept_under_the_incarnation_that_rejoined() -> None:
    """A follower seen caught up under one incarnation, then restarted, rejoins through a
    fetch at the HW that is not caught up with the leader's LEO; a later write keeping it names
    the incarnation that rejoined, not the earlier one (which the next failover would take as
    restarted since, and bar a member holding every committed record: model
    ``controller_failover_vouching``)."""
    h = Harness()
    h.leader_and_isr(0, 1, (0, 2), replicas=(0, 1, 2, 3))
    h.step(Produce(50, 1, TP, batch(0), 1, 1_000))  # LEO 1
    h.step(FetchCall(5, 2, 1, TP, 1, 1, broker_epoch=31))  # HW 1
    writes = [e for e in h.step(FetchCall(6, 1, 1, TP, 1, 1, broker_epoch=21))
              if isinstance(e, WriteIsr)]
    assert [(w.isr, w.isr_broker_epochs) for w in writes] == [((0, 1, 2), (10, 21, 31))]
    h.step(IsrWritten(TP, (0, 1, 2), 1))
    h.leader_and_isr(0, 1, (0, 2), replicas=(0, 1, 2, 3), zk_version=2)  # the controller drops 1
    h.step(Produce(51, 2, TP, batch(1), 1, 1_000))  # LEO 2; 2 still at 1: HW 1
    h.step(FetchCall(7, 1, 2, TP, 0, 1, broker_epoch=22))  # 1 restarted, its tail lost
    writes = [e for e in h.step(FetchCall(8, 1, 2, TP, 1, 1, broker_epoch=22))
              if isinstance(e, WriteIsr)]  # at the HW, short of the LEO: it joins
    assert [(w.isr, w.isr_broker_epochs) for w in writes] == [((0, 1, 2), (10, 22, 31))]
    h.step(IsrWritten(TP, (0, 1, 2), 3))
    writes = [e for e in h.step(FetchCall(9, 3, 1, TP, 1, 1, broker_epoch=41))
              if isinstance(e, WriteIsr)]
    assert [(w.isr, w.isr_broker_epochs) for w in writes] == [
        ((0, 1, 2, 3), (10, 22, 31, 41))]


def test_stale_controller_epoch_is_fenced_and_changes_nothing() -> None:
    h = Harness()
    h.controller_epoch = 3
    h.leader_and_isr(0, 1, (0,))
    effects = h.leader_and_isr(1, 2, (1,), controller_epoch=2)
    (reply,) = [e for e in effects if isinstance(e, Reply)]
    assert reply.message[1].error_code == 11
    assert h.node.states[TP].role is ReplicaRole.LEADER


def test_queued_produce_waits_for_the_append_in_flight() -> None:
    h = Harness()
    h.leader_and_isr(0, 1, (0,))
    (first,) = h.node.step(Produce(50, 1, TP, batch(0), 1, 1_000))
    assert isinstance(first, Append)
    assert h.node.step(Produce(50, 2, TP, batch(1), 1, 1_000)) == []  # queued, not checked
    log = h.store.logs[TP]
    base, last = log.append(first.records, 1)
    effects = h.node.step(Appended(TP, first.token, 0, base, last))
    replies = [e for e in effects if isinstance(e, Reply)]
    appends = [e for e in effects if isinstance(e, Append)]
    assert [r.message.request_id for r in replies] == [1]
    assert len(appends) == 1  # the second batch is checked after the first was recorded


def test_follower_truncates_by_leader_epoch_then_fetches_and_follows_the_hw() -> None:
    h = Harness(broker_id=1)
    h.leader_and_isr(1, 1, (1,))
    for sequence in range(3):  # offsets 0..2 in epoch 1, unreplicated
        h.step(Produce(50, sequence, TP, batch(sequence), 1, 1_000))
    h.leader_and_isr(0, 2, (0, 1), zk_version=1)
    (ask,) = [e for e in h.step(Tick()) if isinstance(e, Send)]
    assert isinstance(ask.message, EpochCall)
    assert ask.message.epoch == 1
    # the new leader holds epoch 1 only up to offset 1
    h.step(EpochReply(ask.message.request_id, TP, 0, 1, 1))
    assert h.store.logs[TP].log_end_offset == 1
    assert [e.event for e in h.trace if e.event == "TRUNCATE"] == ["TRUNCATE"]
    (fetch,) = [e for e in h.step(Tick()) if isinstance(e, Send)]
    assert isinstance(fetch.message, FetchCall)
    assert fetch.message.offset == 1
    leader = MemLog()
    leader.append(batch(0, 1), 1)
    leader.append(batch(10, 2), 2)
    records = b"".join(leader.batches[1:])
    h.step(FetchReply(fetch.message.request_id, TP, 0, records, 2, 3))
    log = h.store.logs[TP]
    assert log.log_end_offset == 3
    assert log.high_watermark == 2  # min(leader's HW, own LEO)


def test_offset_out_of_range_without_the_leaders_leo_truncates_again() -> None:
    h = Harness(broker_id=1)
    h.leader_and_isr(0, 2, (0, 1))
    ask = sent(h)
    h.step(EpochReply(ask.request_id, TP, 0, -1, -1))
    fetch = sent(h)
    assert isinstance(fetch, FetchCall)
    h.step(FetchReply(fetch.request_id, TP, 1))  # OFFSET_OUT_OF_RANGE, no LEO (the wire's)
    assert [e for e in h.step(Tick()) if isinstance(e, Send)] == []  # the back-off
    h.now += 1_000
    again = sent(h)
    assert isinstance(again, EpochCall)  # Kafka truncates/resets; never a retry loop


def _following_from(h: Harness, offset: int) -> FetchCall:
    """Broker 1 follows broker 0 in epoch 2, truncated (nothing to cut) and fetching from
    ``offset``, its log end: the fetch sent."""
    h.leader_and_isr(0, 2, (0, 1))
    ask = sent(h)
    assert isinstance(ask, EpochCall)
    h.step(EpochReply(ask.request_id, TP, 0, 2, offset))
    fetch = sent(h)
    assert isinstance(fetch, FetchCall)
    assert fetch.offset == offset
    return fetch


def _leader_records(count: int) -> bytes:
    leader = MemLog()
    leader.append(batch(0, count), 2)
    return b"".join(leader.batches)


def test_a_late_answer_to_an_earlier_fetch_from_the_same_offset_is_applied() -> None:
    """A fetch sent again after ``request_retry_ms`` while the first is still on its way: the
    first's answer, arriving after the second was sent, is what the second's would be (same
    offset, same epoch) and is applied, as Kafka's fetcher checks a response against the
    partition's fetch offset and epoch; the second's answer, after the append, moves nothing.
    Turned away, a follower whose answers always came later than the retry interval fetched
    from the same offset forever (simulated cluster seed 11608)."""
    h = Harness(broker_id=1, request_retry_ms=4)
    first = _following_from(h, 0)
    h.now += 4
    again = sent(h)
    assert isinstance(again, FetchCall)
    assert (again.offset, again.request_id) == (0, first.request_id + 1)
    records = _leader_records(2)
    h.step(FetchReply(first.request_id, TP, 0, records, 2, 0))
    log = h.store.logs[TP]
    assert (log.log_end_offset, log.high_watermark) == (2, 2)
    h.step(FetchReply(again.request_id, TP, 0, records, 2, 0))
    assert log.log_end_offset == 2  # (not appended twice)
    after = sent(h)
    assert isinstance(after, FetchCall)
    assert after.offset == 2


def test_an_answer_to_a_fetch_sent_again_while_an_append_was_under_way_is_dropped() -> None:
    """A shell whose append completes later (the trio broker's, on a slow disk): the fetch
    sent again after ``request_retry_ms`` while the first answer's append was under way went
    from the old log end; its answer, arriving after the append, would append the same records
    again below the log end. It is dropped, as Kafka's fetcher drops a response whose fetch
    offset is no longer the partition's, and the next tick fetches from the log end at once."""
    h = Harness(broker_id=1, request_retry_ms=4)
    first = _following_from(h, 0)
    records = _leader_records(2)
    (append,) = [e for e in h.node.step(FetchReply(first.request_id, TP, 0, records, 2, 0))
                 if isinstance(e, Append)]
    h.now += 4
    (again,) = [e.message for e in h.node.step(Tick()) if isinstance(e, Send)]
    assert isinstance(again, FetchCall)
    assert again.offset == 0  # (the append not done: the log still ends at 0)
    log = h.store.logs[TP]
    base, last = log.append(append.records, append.leader_epoch)
    h.step(Appended(TP, append.token, 0, base, last))
    assert log.log_end_offset == 2
    late = h.node.step(FetchReply(again.request_id, TP, 0, records, 2, 0))
    assert [e for e in late if isinstance(e, Append)] == []
    after = sent(h)  # (not after the retry interval)
    assert isinstance(after, FetchCall)
    assert after.offset == 2


def test_a_late_answer_to_a_fetch_from_another_offset_or_truncation_is_turned_away() -> None:
    """An answer to a fetch of an earlier log end (the log grew since), or to one sent before
    the follower asked OffsetForLeaderEpoch again, answers a request of an earlier state."""
    h = Harness(broker_id=1, request_retry_ms=4)
    first = _following_from(h, 0)
    h.step(FetchReply(first.request_id, TP, 0, _leader_records(1), 1, 0))
    log = h.store.logs[TP]
    assert log.log_end_offset == 1
    h.now += 4
    second = sent(h)
    assert isinstance(second, FetchCall)
    assert second.offset == 1
    h.now += 4
    third = sent(h)
    assert isinstance(third, FetchCall)
    # the first fetch's records again (a duplicate on the network): from offset 0, not 1
    h.step(FetchReply(first.request_id, TP, 0, _leader_records(1), 1, 0))
    assert log.log_end_offset == 1
    # a fetch from 1, then an OFFSET_OUT_OF_RANGE answer restarts the truncation
    h.step(FetchReply(third.request_id, TP, 1))
    h.now += 1_000
    ask = sent(h)
    assert isinstance(ask, EpochCall)
    leader = MemLog()
    leader.append(batch(0, 1), 2)
    leader.append(batch(1, 1), 2)
    h.step(FetchReply(second.request_id, TP, 0, leader.batches[1], 2, 0))
    assert log.log_end_offset == 1  # (sent before the truncation restarted)


def test_fenced_follower_waits_for_leader_and_isr() -> None:
    h = Harness(broker_id=1)
    h.leader_and_isr(0, 2, (0, 1))
    ask = sent(h)
    h.step(EpochReply(ask.request_id, TP, 74))
    h.now += 10_000
    assert [e for e in h.step(Tick()) if isinstance(e, Send)] == []
    h.leader_and_isr(0, 3, (0, 1), zk_version=1)
    assert [e for e in h.step(Tick()) if isinstance(e, Send)] != []


def test_idempotent_producer_survives_a_leader_follower_leader_bounce() -> None:
    """Kafka rebuilds the producer state on every change of role: a cache kept from the first
    leadership refuses the next batch as OUT_OF_ORDER_SEQUENCE_NUMBER."""
    h = Harness(broker_id=0)
    h.leader_and_isr(0, 1, (0,))
    assert produce_replies(h.step(Produce(50, 1, TP, batch(0, 2), 1, 1_000)))[0].error == 0
    # broker 1 leads epoch 2 and takes sequences 2..3; this broker follows and copies them
    h.leader_and_isr(1, 2, (0, 1), zk_version=1)
    ask = sent(h)
    h.step(EpochReply(ask.request_id, TP, 0, 2, 1))
    fetch = sent(h)
    other = MemLog()
    other.append(batch(0, 2), 1)
    other.append(batch(2, 2), 2)
    h.step(FetchReply(fetch.request_id, TP, 0, other.batches[1], 4, 4))
    assert h.store.logs[TP].log_end_offset == 4
    # leader again: the next batch continues at sequence 4
    h.leader_and_isr(0, 3, (0,), zk_version=2)
    (reply,) = produce_replies(h.step(Produce(50, 2, TP, batch(4), 1, 1_000)))
    assert (reply.error, reply.base_offset) == (0, 4)
    # and a retry of the batch the other leader took is a duplicate, not a second copy
    (dup,) = produce_replies(h.step(Produce(50, 3, TP, batch(2, 2), 1, 1_000)))
    assert (dup.error, dup.base_offset) == (0, 2)
    assert h.store.logs[TP].log_end_offset == 5


def with_record_count(data: bytes, count: int) -> bytes:
    """``data``'s batch with its header's record count replaced (its CRC made right again)."""
    changed = bytearray(data)
    struct.pack_into(">i", changed, 57, count)
    struct.pack_into(">I", changed, 17, rb.crc32c(bytes(changed[21:])))
    return bytes(changed)


@pytest.mark.parametrize("count", [0, -1, 5, 2**31 - 1])
def test_a_batch_that_miscounts_its_records_goes_to_validation_not_to_the_sequence_check(
        count: int) -> None:
    """A known producer's batch whose header miscounts its records (the structured wire fuzz
    found a count of 0 raising in the sequence check, inside the node's step): the node leaves
    it to the append's validation, which refuses it, as Kafka validates a batch before it looks
    at its producer's state; nor is it taken for a duplicate of the batch it repeats."""
    h = Harness(broker_id=0)
    h.leader_and_isr(0, 1, (0,))
    assert produce_replies(h.step(Produce(50, 1, TP, batch(0), 1, 1_000)))[0].error == 0
    for sequence in (0, 1):  # (a retry of batch 0, the next batch)
        lying = with_record_count(batch(sequence), count)
        assert not rb.count_consistent(rb.parse_header(lying))
        effects = h.node.step(Produce(50, 2 + sequence, TP, lying, 1, 1_000))
        (append,) = [effect for effect in effects if isinstance(effect, Append)]
        assert append.records == lying
        assert produce_replies(effects) == []
        (refused,) = produce_replies(h.node.step(
            Appended(TP, append.token, 87, error_message="miscounted")))
        assert refused.error == 87
    assert h.store.logs[TP].log_end_offset == 1
    (reply,) = produce_replies(h.step(Produce(50, 9, TP, batch(1), 1, 1_000)))
    assert (reply.error, reply.base_offset) == (0, 1)


def test_stop_replica_fails_waiting_produces_and_reports_the_role() -> None:
    h = Harness()
    h.leader_and_isr(0, 1, (0, 1))
    h.step(Produce(50, 1, TP, batch(0), -1, 1_000))
    effects = h.step(StopReplica(99, 2, StopReplicaRequest(99, 1, 10, (
        StopReplicaPartition(TP.topic, TP.partition, 1, True),))))
    assert [r.error for r in produce_replies(effects)] == [6]
    assert any(isinstance(e, RoleChanged) and e.state is None for e in effects)
    assert TP not in h.store.logs


def list_offsets(h: Harness, timestamp: int, replica: int = -1,
                 epoch: int = -1) -> ListOffsetsReply:
    (reply,) = [e.message for e in h.step(ListOffsetsCall(9, replica, TP, timestamp, epoch, 50))
                if isinstance(e, Reply)]
    assert isinstance(reply, ListOffsetsReply)
    return reply


def test_list_offsets_latest_earliest_and_by_time_are_the_nodes_answers() -> None:
    """Latest is the HW for a consumer and the LEO for a follower, earliest the log start; a
    consumer's search by time stops at the HW; ListOffsets v4's epoch is fenced."""
    h = Harness()
    h.leader_and_isr(0, 1, (0, 1))
    for sequence in range(3):  # offsets 0..2, timestamps 1000, 2000, 3000
        h.step(Produce(50, sequence, TP, batch(sequence, timestamp_ms=1000 * (sequence + 1)),
                       1, 1_000, now_wall_ms=4000))
    h.step(FetchCall(5, 1, 1, TP, 2, 1))  # the follower holds 0..1: HW 2
    assert h.store.logs[TP].high_watermark == 2
    latest = list_offsets(h, -1)
    assert (latest.error, latest.offset, latest.leader_epoch) == (0, 2, 1)
    assert list_offsets(h, -1, replica=1).offset == 3
    assert list_offsets(h, -2).offset == 0
    found = list_offsets(h, 1500)
    assert (found.offset, found.timestamp, found.leader_epoch) == (1, 2000, 1)
    assert list_offsets(h, 2500).offset == -1  # offset 2 is above the HW
    assert list_offsets(h, 2500, replica=1).offset == 2
    assert list_offsets(h, -1, epoch=0).error == 74  # FENCED_LEADER_EPOCH
    assert list_offsets(h, -1, epoch=2).error == 75  # UNKNOWN_LEADER_EPOCH
    h.leader_and_isr(1, 2, (0, 1), zk_version=1)
    assert list_offsets(h, -1).error == 6  # NOT_LEADER_OR_FOLLOWER


def test_list_offsets_max_timestamp_is_the_first_record_with_the_largest_below_the_hw() -> None:
    """ListOffsets v7's max timestamp (KIP-734): the first record stamped with the largest
    timestamp; for a consumer only if it is below the HW (none otherwise, as Kafka filters
    every answer found in the log by the last fetchable offset), for a follower wherever it
    is."""
    h = Harness()
    h.leader_and_isr(0, 1, (0, 1))
    for sequence, stamp in enumerate((1000, 3000, 3000, 2000, 5000)):  # offsets 0..4
        h.step(Produce(50, sequence, TP, batch(sequence, timestamp_ms=stamp), 1, 1_000,
                       now_wall_ms=6000))
    h.step(FetchCall(5, 1, 1, TP, 4, 1))  # the follower holds 0..3: HW 4
    newest = list_offsets(h, -3)
    assert (newest.error, newest.offset, newest.timestamp) == (0, -1, -1)  # 5000 is at 4
    follower = list_offsets(h, -3, replica=1)
    assert (follower.offset, follower.timestamp, follower.leader_epoch) == (4, 5000, 1)
    h.store.logs[TP].batches.pop()  # (offset 4 gone: the largest below the HW is 3000)
    found = list_offsets(h, -3)
    assert (found.error, found.offset, found.timestamp, found.leader_epoch) == (0, 1, 3000, 1)


def test_offset_out_of_range_below_the_leaders_log_start_starts_afresh_there() -> None:
    """Kafka's truncateFullyAndStartAt: a follower whose log ends below its leader's log start
    (DeleteRecords there while it lagged) empties its log and fetches from that start."""
    h = Harness(broker_id=1)
    h.store.logs[TP] = MemLog()
    h.store.logs[TP].append(batch(0, 2), 1)
    h.leader_and_isr(0, 2, (0, 1))
    ask = sent(h)
    h.step(EpochReply(ask.request_id, TP, 0, 2, 1))
    fetch = sent(h)
    assert fetch.offset == 2
    h.step(FetchReply(fetch.request_id, TP, 1, high_watermark=40, log_start_offset=30))
    log = h.store.logs[TP]
    assert (log.log_start_offset, log.log_end_offset) == (30, 30)
    truncations = [e for e in h.trace if e.event == "TRUNCATE"]
    assert truncations[-1].fields["policy"] == "LOG_START"
    again = sent(h)
    assert isinstance(again, FetchCall)
    assert again.offset == 30


def test_a_fetch_of_an_older_incarnation_moves_nothing() -> None:
    """A follower's fetch from an incarnation a later one overtook (a dead process's request
    still queued) neither sets its LEO nor moves the HW; a new incarnation starts afresh."""
    h = Harness()
    h.leader_and_isr(0, 1, (0, 1))
    for sequence in range(3):
        h.step(Produce(50, sequence, TP, batch(sequence), 1, 1_000))
    h.step(FetchCall(5, 1, 2, TP, 1, 1))  # incarnation 2 holds offset 0
    assert h.store.logs[TP].high_watermark == 1
    h.step(FetchCall(6, 1, 1, TP, 3, 1))  # incarnation 1 (dead) claimed everything
    assert h.store.logs[TP].high_watermark == 1
    assert h.node.follower_leos[TP][1] == 1
    h.step(FetchCall(7, 1, 3, TP, 0, 1))  # incarnation 3 lost its log
    assert h.node.follower_leos[TP][1] == 0


def test_an_append_that_waited_past_a_new_leader_and_isr_is_not_wanted() -> None:
    """The shell asks the node, holding the partition lock, whether an append may still be
    written: a LeaderAndIsr that arrived while it waited (for the lock, for validation off the
    loop) deposed the leader, so nothing is written and the produce is refused."""
    h = Harness()
    h.leader_and_isr(0, 1, (0, 1))
    (append,) = [e for e in h.node.step(Produce(50, 1, TP, batch(0), -1, 1_000))
                 if isinstance(e, Append)]
    assert h.node.append_wanted(append)
    h.leader_and_isr(1, 2, (0, 1), zk_version=1)
    assert not h.node.append_wanted(append)
    replies = produce_replies(h.step(Appended(TP, append.token, 6)))
    assert [r.error for r in replies] == [6]
    assert h.store.logs[TP].log_end_offset == 0


def test_list_offsets_while_a_new_epochs_hw_lags_its_start_is_offset_not_available() -> None:
    """A leader whose HW is below the start of its own epoch (it inherited a lagging HW)
    answers a consumer's latest, and a search by time that finds nothing below that HW,
    OFFSET_NOT_AVAILABLE (Kafka's ``fetchOffsetForTimestamp``): the lagging HW would move a
    consumer's end offset backwards. A follower, earliest, and a search that finds a record
    below the HW are answered; once the HW reaches the epoch's start, latest is too."""
    h = Harness()
    h.leader_and_isr(0, 1, (0, 1))
    for sequence in range(3):  # offsets 0..2, timestamps 1000, 2000, 3000
        h.step(Produce(50, sequence, TP, batch(sequence, timestamp_ms=1000 * (sequence + 1)),
                       1, 1_000, now_wall_ms=4000))
    h.step(FetchCall(5, 1, 1, TP, 2, 1))  # HW 2, LEO 3
    h.leader_and_isr(0, 2, (0, 1), zk_version=1)  # epoch 2 starts at the LEO, 3
    assert h.store.logs[TP].high_watermark == 2
    assert list_offsets(h, -1).error == 78  # OFFSET_NOT_AVAILABLE
    assert list_offsets(h, 2500).error == 78  # offset 2 lies at the lagging HW
    found = list_offsets(h, 1500)
    assert (found.error, found.offset) == (0, 1)
    assert (list_offsets(h, -2).error, list_offsets(h, -2).offset) == (0, 0)
    follower = list_offsets(h, -1, replica=1)
    assert (follower.error, follower.offset) == (0, 3)
    h.step(FetchCall(6, 1, 1, TP, 3, 2))  # the follower reaches 3: the HW passes the start
    latest = list_offsets(h, -1)
    assert (latest.error, latest.offset, latest.leader_epoch) == (0, 3, 2)
    assert list_offsets(h, 3500).error == 0  # nothing at or after 3500, not lagging: -1
