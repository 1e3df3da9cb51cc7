"""A follower's requests to its leaders, one round at a time (sans-IO).

The broker node (:class:`~impl.broker.node.BrokerNode`) makes one call per followed partition:
an :class:`~impl.broker.node.EpochCall` (KIP-279's OffsetForLeaderEpoch) or a
:class:`~impl.broker.node.FetchCall`, each with its own request id. On the wire a follower
sends a leader one request at a time, naming many partitions and carrying no request id per
partition: its answer names each partition once, by topic and index. This module holds the
decisions between the two, which the trio fetcher (:mod:`impl.broker.replica_fetcher`) and
the simulator (:mod:`conformance._cluster_nodes`) both carry out:

- **what waits**: the newest call per partition. A LeaderAndIsr can replace a partition's
  fetch state while a call of the old state still waits; the node answers only its newest
  call (``Followed.in_flight``), and a request naming a partition twice gets two answers for
  it that cannot be told apart: the first, meant for the stale call, was applied to the new
  one (a FENCED_LEADER_EPOCH for the old epoch left the partition failed for good).
- **what one round sends**: at most one round is in flight per leader; a round is an
  OffsetForLeaderEpoch for every partition whose truncation is asked, else a Fetch for every
  partition waiting to fetch (the fetches wait while their leader is asked: a partition whose
  truncation ends fetches in the next round), grouped by topic as the wire lays them out.
- **how answers are matched**: each partition answered is matched to the call of the round
  that named it, and the reply stepped into the node carries that call's request id; a
  partition the leader left unanswered is answered NETWORK_EXCEPTION (the node backs it off),
  an answer naming a partition not asked, or a second time, is dropped; an answer to a round
  no longer in flight (a duplicate, or one that came after its round was given up) changes
  nothing.
- **a lost round**: every call of a round whose connection failed, or which is overdue, is
  answered NETWORK_EXCEPTION.

The leader answers a round as any Fetch, its partitions within the request's byte budget
(:class:`~impl.broker.purgatory.FetchBudget`).
"""

from __future__ import annotations

from typing import Final, NamedTuple

from impl.storage import TopicPartition

from .node import EpochCall, EpochReply, FetchCall, FetchReply

__sans_io__ = True

#: What a call whose request was lost is answered with, to the node.
NETWORK_EXCEPTION: Final = 13

Call = EpochCall | FetchCall
Answer = EpochReply | FetchReply


class Round(NamedTuple):
    """One request to ``leader``: its calls, all asks or all fetches, one per partition, in the
    order the node made them, grouped by topic."""

    round_id: int
    leader: int
    calls: tuple[Call, ...]
    #: when it was sent (the shell's milliseconds)
    sent_ms: int

    @property
    def asks(self) -> bool:
        """An OffsetForLeaderEpoch (else a Fetch)."""
        return type(self.calls[0]) is EpochCall


def latest_per_partition(calls: list[Call]) -> list[Call]:
    """The newest of ``calls`` for each partition, in the order they were made."""
    latest: dict[TopicPartition, Call] = {}
    for call in calls:
        latest.pop(call.tp, None)
        latest[call.tp] = call
    return list(latest.values())


def refused(call: Call) -> Answer:
    """The node's answer to ``call`` when its request got none: NETWORK_EXCEPTION."""
    if type(call) is EpochCall:
        return EpochReply(call.request_id, call.tp, NETWORK_EXCEPTION)
    return FetchReply(call.request_id, call.tp, NETWORK_EXCEPTION)


class FollowerRounds:
    """The calls a follower's node made, per leader, and the round in flight to each.

    Args:
        timeout_ms: a round unanswered this long is :meth:`overdue` (the shell gives it up
            with :meth:`lost`).
    """

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        #: leader -> the calls waiting to be sent there, in the order the node made them
        self._waiting: dict[int, list[Call]] = {}
        self._in_flight: dict[int, Round] = {}
        self._rounds = 0

    def add(self, leader: int, call: Call) -> None:
        """The node's call for ``leader`` (a newer one for its partition will replace it)."""
        self._waiting.setdefault(leader, []).append(call)

    def waiting(self, leader: int) -> int:
        """How many partitions have a call waiting to be sent to ``leader``."""
        return len(latest_per_partition(self._waiting.get(leader, [])))

    def in_flight(self, leader: int) -> Round | None:
        """The round sent to ``leader`` and not yet answered."""
        return self._in_flight.get(leader)

    def leaders(self) -> list[int]:
        """The leaders with calls waiting or a round in flight, in order."""
        return sorted(set(self._waiting) | set(self._in_flight))

    def next_round(self, leader: int, now_ms: int) -> Round | None:
        """The round to send ``leader`` now: ``None`` while one is in flight there or no call
        waits. The asks go first, all of them; else every waiting fetch."""
        if leader in self._in_flight:
            return None
        waiting = self._waiting.pop(leader, None)
        if not waiting:
            return None
        latest = latest_per_partition(waiting)
        calls: tuple[Call, ...] = tuple(call for call in latest if type(call) is EpochCall)
        if calls:
            fetches = [call for call in latest if type(call) is not EpochCall]
            if fetches:
                self._waiting[leader] = fetches
        else:
            calls = tuple(latest)
        # (grouped by topic, each topic where its first call was: the order the wire's
        # topic-then-partitions layout gives the leader's answers and its byte budget)
        first: dict[str, int] = {}
        for call in calls:
            first.setdefault(call.tp.topic, len(first))
        if len(first) > 1:
            calls = tuple(sorted(calls, key=lambda call: first[call.tp.topic]))
        self._rounds += 1
        sent = Round(self._rounds, leader, calls, now_ms)
        self._in_flight[leader] = sent
        return sent

    def answered(self, sent: Round, answers: list[Answer]) -> list[Answer]:
        """The leader's answers to ``sent``, in the order it gave them (their request ids are
        not read: the wire has none), matched to its calls: what to step into the node, each
        with its call's request id; ``[]`` when ``sent`` is no longer in flight."""
        if self._in_flight.get(sent.leader) != sent:
            return []
        del self._in_flight[sent.leader]
        by_tp: dict[TopicPartition, Call] = {call.tp: call for call in sent.calls}
        replies: list[Answer] = []
        for answer in answers:
            call = by_tp.pop(answer.tp, None)
            if call is None or (type(answer) is EpochReply) != (type(call) is EpochCall):
                continue
            replies.append(answer._replace(request_id=call.request_id))
        replies.extend(refused(call) for call in by_tp.values())
        return replies

    def lost(self, leader: int) -> list[Answer]:
        """The round in flight to ``leader`` will get no answer (its connection failed, or it
        is overdue): each of its calls is answered NETWORK_EXCEPTION."""
        sent = self._in_flight.pop(leader, None)
        return [] if sent is None else [refused(call) for call in sent.calls]

    def abandon(self, leader: int) -> None:
        """The round in flight to ``leader`` is given up without answers (its loop was
        cancelled: the node asks again after its retry interval); the waiting calls stay."""
        self._in_flight.pop(leader, None)

    def forget(self, leader: int) -> None:
        """No partition follows ``leader`` any more: drop what waits and what is in flight."""
        self._waiting.pop(leader, None)
        self._in_flight.pop(leader, None)

    def overdue(self, now_ms: int) -> list[int]:
        """The leaders whose round has waited ``timeout_ms`` or longer."""
        return sorted(leader for leader, sent in self._in_flight.items()
                      if now_ms - sent.sent_ms >= self.timeout_ms)
