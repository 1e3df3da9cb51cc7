"""A follower's rounds (:mod:`impl.broker.fetch_rounds`): what one request names, and which of
the node's calls each answered partition goes back to.

The regression: a LeaderAndIsr that replaced a partition's fetch state while a call of the old
state still waited made the node issue a second call; both went in one request and the first
answer (FENCED_LEADER_EPOCH for the old epoch) was applied to the new call, leaving the partition
failed for good (a reassignment stalled in
tests/integration/cluster/test_admin_apis.py::test_partition_reassignments_kip455)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from impl.broker.fetch_rounds import (
    NETWORK_EXCEPTION,
    FollowerRounds,
    Round,
)
from impl.broker.node import EpochCall, EpochReply, FetchCall, FetchReply
from impl.storage.names import TopicPartition

A = TopicPartition("moving", 0)
B = TopicPartition("moving", 1)
FENCED = 74


def test_a_replaced_call_is_not_sent_and_the_answer_goes_to_the_new_one() -> None:
    rounds = FollowerRounds(timeout_ms=100)
    old, other = EpochCall(1, 2, A, 0, 0), FetchCall(2, 2, 0, B, 5, 3)
    new = EpochCall(3, 2, A, 1, 1)
    for call in (old, other, new):
        rounds.add(1, call)
    sent = rounds.next_round(1, now_ms=0)
    assert sent is not None
    assert sent.asks
    assert sent.calls == (new,)
    # (the fetch of B waits while its leader is asked)
    assert rounds.next_round(1, now_ms=0) is None
    assert rounds.waiting(1) == 1
    replies = rounds.answered(sent, [EpochReply(-1, A, 0, 40, 1)])
    assert replies == [EpochReply(3, A, 0, 40, 1)]
    fetches = rounds.next_round(1, now_ms=1)
    assert fetches is not None
    assert not fetches.asks
    assert fetches.calls == (other,)


def test_a_fetch_of_the_old_state_gives_way_to_the_new_states_ask() -> None:
    rounds = FollowerRounds(timeout_ms=100)
    rounds.add(1, FetchCall(1, 2, 0, A, 7, 0))
    ask = EpochCall(2, 2, A, 1, 1)
    rounds.add(1, ask)
    sent = rounds.next_round(1, now_ms=0)
    assert sent is not None
    assert sent.calls == (ask,)


def test_unanswered_partitions_are_refused_and_strangers_dropped() -> None:
    rounds = FollowerRounds(timeout_ms=100)
    rounds.add(1, FetchCall(1, 2, 0, A, 0, 1))
    rounds.add(1, FetchCall(2, 2, 0, B, 0, 1))
    sent = rounds.next_round(1, now_ms=0)
    assert sent is not None
    stranger = FetchReply(-1, TopicPartition("other", 0), 0)
    replies = rounds.answered(sent, [FetchReply(-1, B, 0, b"", 9), stranger,
                                     FetchReply(-1, B, FENCED)])
    assert replies == [FetchReply(2, B, 0, b"", 9), FetchReply(1, A, NETWORK_EXCEPTION)]
    # a duplicate of the answer, or one after the round was given up, changes nothing
    assert rounds.answered(sent, [FetchReply(-1, A, 0)]) == []


def test_a_lost_or_overdue_round_refuses_its_calls_and_frees_the_leader() -> None:
    rounds = FollowerRounds(timeout_ms=100)
    rounds.add(1, EpochCall(1, 2, A, 1, 1))
    sent = rounds.next_round(1, now_ms=10)
    assert sent is not None
    rounds.add(1, FetchCall(2, 2, 0, B, 0, 1))
    assert rounds.overdue(109) == []
    assert rounds.overdue(110) == [1]
    assert rounds.lost(1) == [EpochReply(1, A, NETWORK_EXCEPTION)]
    assert rounds.answered(sent, [EpochReply(-1, A, 0, 5, 1)]) == []
    following = rounds.next_round(1, now_ms=111)
    assert following is not None
    assert following.calls == (FetchCall(2, 2, 0, B, 0, 1),)
    rounds.forget(1)
    assert rounds.in_flight(1) is None
    assert rounds.leaders() == []


_TPS = [TopicPartition("t", index) for index in range(3)]
_ACTIONS = st.lists(st.one_of(
    st.tuples(st.just("call"), st.integers(0, 1), st.sampled_from(_TPS), st.booleans()),
    st.tuples(st.just("send"), st.integers(0, 1)),
    st.tuples(st.just("answer"), st.integers(0, 1), st.permutations(range(4))),
    st.tuples(st.just("lose"), st.integers(0, 1)),
), max_size=40)


@settings(max_examples=300, deadline=None)
@given(_ACTIONS)
def test_every_reply_answers_the_newest_call_of_its_partition(actions: list[tuple]) -> None:  # type: ignore[type-arg]
    """Whatever the interleaving: a round names each partition once, with the newest call made
    for it when the round was sent; every call of a round gets exactly one reply, with its own
    request id, partition and kind; a call replaced before it was sent is never answered."""
    rounds = FollowerRounds(timeout_ms=10)
    request_ids = 0
    newest: dict[tuple[int, TopicPartition], int] = {}
    sent_ids: set[int] = set()
    answered_ids: set[int] = set()
    flying: dict[int, Round] = {}
    for now_ms, action in enumerate(actions):
        kind, leader = action[0], action[1]
        if kind == "call":
            request_ids += 1
            tp, ask = action[2], action[3]
            call = (EpochCall(request_ids, 9, tp, 1, 1) if ask
                    else FetchCall(request_ids, 9, 0, tp, 0, 1))
            newest[(leader, tp)] = request_ids
            rounds.add(leader, call)
        elif kind == "send":
            sent = rounds.next_round(leader, now_ms)
            if sent is None:
                continue
            tps = [call.tp for call in sent.calls]
            assert len(tps) == len(set(tps))
            assert len({type(call) for call in sent.calls}) == 1
            for call in sent.calls:
                assert newest[(leader, call.tp)] == call.request_id
                assert call.request_id not in sent_ids
                sent_ids.add(call.request_id)
            flying[leader] = sent
        elif kind == "answer":
            sent = flying.pop(leader, None)
            if sent is None:
                continue
            calls = sent.calls
            order = [index for index in action[2] if index < len(calls)]
            answers: list[EpochReply | FetchReply] = [
                EpochReply(-1, calls[index].tp, 0) if sent.asks
                else FetchReply(-1, calls[index].tp, 0)
                for index in order[: max(len(order) - 1, 0)]]
            replies = rounds.answered(sent, answers)
            assert sorted(reply.request_id for reply in replies) == sorted(
                call.request_id for call in calls)
            by_id = {call.request_id: call for call in calls}
            for reply in replies:
                call = by_id[reply.request_id]
                assert reply.tp == call.tp
                assert (type(reply) is EpochReply) == (type(call) is EpochCall)
                answered_ids.add(reply.request_id)
        elif kind == "lose":
            flying.pop(leader, None)
            for reply in rounds.lost(leader):
                assert reply.error == NETWORK_EXCEPTION
                answered_ids.add(reply.request_id)
    assert answered_ids <= sent_ids


def test_a_round_groups_partitions_by_topic_in_first_call_order() -> None:
    rounds = FollowerRounds(timeout_ms=100)
    other = TopicPartition("__consumer_offsets", 0)
    calls = [FetchCall(1, 2, 0, A, 0, 1), FetchCall(2, 2, 0, other, 0, 1),
             FetchCall(3, 2, 0, B, 0, 1)]
    for call in calls:
        rounds.add(1, call)
    sent = rounds.next_round(1, now_ms=0)
    assert sent is not None
    assert sent.calls == (calls[0], calls[2], calls[1])
