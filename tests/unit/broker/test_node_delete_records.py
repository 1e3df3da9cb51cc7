"""DeleteRecords in the broker node (Kafka's DelayedDeleteRecords): the leader moves its log
start offset at once and answers when every ISR member's log start offset (carried by its
fetches) has reached the requested offset, or REQUEST_TIMED_OUT at a periodic tick past the
timeout; a lost leadership answers NOT_LEADER_OR_FOLLOWER."""

from __future__ import annotations

from typing import Any

from impl.broker.node import (
    DeleteRecords,
    DeleteRecordsReply,
    EpochCall,
    EpochReply,
    FetchCall,
    Produce,
    Reply,
    Tick,
)

from .test_node import TP, Harness, batch, sent


def _deletes(effects: list[Any]) -> list[DeleteRecordsReply]:
    return [e.message for e in effects if isinstance(e, Reply)
            and isinstance(e.message, DeleteRecordsReply)]


def _led_with_records(isr: tuple[int, ...] = (0, 1, 2)) -> Harness:
    """Broker 0 leads t-0 (ISR ``isr``) with 10 records, all replicated (HW 10)."""
    h = Harness()
    h.leader_and_isr(0, 1, isr)
    h.step(Produce(50, 1, TP, batch(0, 10), 1, 1_000))
    for replica in isr[1:]:
        h.step(FetchCall(5, replica, 1, TP, 10, 1, log_start_offset=0))
    assert h.store.logs[TP].high_watermark == 10
    return h


def test_delete_records_waits_for_every_isr_member() -> None:
    h = _led_with_records()
    effects = h.step(DeleteRecords(60, 2, TP, 4, 30_000))
    assert _deletes(effects) == [], "the followers have not followed yet"
    assert h.store.logs[TP].log_start_offset == 4, "the leader moved at once"
    # follower 1 follows; follower 2 still reports 0
    assert _deletes(h.step(FetchCall(5, 1, 1, TP, 10, 1, log_start_offset=4))) == []
    assert h.node.low_watermark(TP) == 0
    [answer] = _deletes(h.step(FetchCall(6, 2, 1, TP, 10, 1, log_start_offset=4)))
    assert (answer.request_id, answer.error, answer.low_watermark) == (2, 0, 4)


def test_minus_one_means_the_high_watermark_and_above_it_is_out_of_range() -> None:
    h = _led_with_records(isr=(0,))
    [answer] = _deletes(h.step(DeleteRecords(60, 3, TP, -1, 30_000)))
    assert (answer.error, answer.low_watermark) == (0, 10), "no follower in the ISR: at once"
    [refused] = _deletes(h.step(DeleteRecords(60, 4, TP, 11, 30_000)))
    assert refused.error == 1  # OFFSET_OUT_OF_RANGE


def test_delete_records_times_out_and_fails_on_lost_leadership() -> None:
    h = _led_with_records()
    assert _deletes(h.step(DeleteRecords(60, 5, TP, 3, 1_000))) == []
    assert _deletes(h.step(DeleteRecords(60, 6, TP, 3, 60_000))) == []
    h.now += 1_000
    [timed_out] = _deletes(h.step(Tick()))
    assert (timed_out.request_id, timed_out.error) == (5, 7)  # REQUEST_TIMED_OUT
    [lost] = _deletes(h.leader_and_isr(1, 2, (0, 1, 2), zk_version=1))
    assert (lost.request_id, lost.error) == (6, 6)  # NOT_LEADER_OR_FOLLOWER


def test_a_follower_reports_its_log_start_offset_when_it_fetches() -> None:
    h = Harness(broker_id=1)
    h.leader_and_isr(0, 1, (0, 1))
    asked = sent(h)  # the truncation exchange first (KIP-279)
    assert isinstance(asked, EpochCall)
    h.step(EpochReply(asked.request_id, TP, 0, 0, 1))
    fetch = sent(h)
    assert isinstance(fetch, FetchCall)
    assert fetch.log_start_offset == 0
