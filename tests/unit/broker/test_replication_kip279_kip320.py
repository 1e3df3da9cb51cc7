"""KIP-320 rule 4 in ``desired_isr`` and KIP-279's iterated truncation in
``follower_truncation_offset``, driven with explicit logs and leader-epoch caches."""

from __future__ import annotations

import random

import pytest

from impl.broker.replication import (
    MAX_TRUNCATION_ROUNDS,
    ReplicaRole,
    ReplicaState,
    TruncationPolicy,
    TruncationStep,
    desired_isr,
    epoch_end_offset,
    follower_truncation_offset,
)
from impl.storage.leader_epoch import EpochEntry, LeaderEpochCache

LEADER = ReplicaState("t", 0, ReplicaRole.LEADER, 1, 5, 7, (1,), (1, 2, 3))


def _isr(follower_leo: int, high_watermark: int, epoch_start: int) -> tuple[int, ...]:
    return desired_isr(LEADER, high_watermark, follower_log_end_offsets={2: follower_leo},
                       last_caught_up_ms={}, now_ms=0, lag_time_max_ms=10,
                       leader_epoch_start_offset=epoch_start)


# --- KIP-320 rule 4 -------------------------------------------------------------------------


def test_a_follower_at_the_hw_but_below_the_leaders_epoch_start_stays_out() -> None:
    # a re-elected leader's HW (4) lags the records an earlier leader committed (up to 6, where
    # its own epoch starts): a follower at 5 lacks one of them
    assert _isr(follower_leo=5, high_watermark=4, epoch_start=6) == (1,)


def test_a_follower_at_the_epoch_start_and_the_hw_joins() -> None:
    assert _isr(follower_leo=6, high_watermark=4, epoch_start=6) == (1, 2)
    assert _isr(follower_leo=9, high_watermark=9, epoch_start=6) == (1, 2)


def test_a_follower_past_the_epoch_start_but_below_the_hw_stays_out() -> None:
    assert _isr(follower_leo=7, high_watermark=8, epoch_start=6) == (1,)


def test_an_isr_member_is_not_dropped_for_being_below_the_epoch_start() -> None:
    state = ReplicaState("t", 0, ReplicaRole.LEADER, 1, 5, 7, (1, 2), (1, 2))
    assert desired_isr(state, 4, follower_log_end_offsets={2: 3}, last_caught_up_ms={2: 0},
                       now_ms=5, lag_time_max_ms=10, leader_epoch_start_offset=6) == (1, 2)


def test_the_epoch_cache_knows_where_the_current_epoch_starts() -> None:
    cache = LeaderEpochCache([EpochEntry(1, 0), EpochEntry(3, 6)])
    assert cache.start_offset_of(3, 10) == 6
    assert cache.start_offset_of(1, 10) == 0
    assert cache.start_offset_of(4, 10) == 10  # not recorded yet: it starts at the LEO
    assert cache.start_offset_of(2, 10) == -1  # epoch 3 started without it


# --- KIP-279 --------------------------------------------------------------------------------


def _runs(log: list[int]) -> list[tuple[int, int]]:
    """The leader-epoch cache of a log given as the epoch of each record."""
    return [(e, i) for i, e in enumerate(log) if i == 0 or log[i - 1] != e]


def _truncate(follower: list[int], leader: list[int],
              leader_epoch: int | None = None) -> tuple[int, int]:
    """The whole exchange against a leader whose cache is the storage engine's (with its
    current ``leader_epoch`` recorded at its LEO, as on becoming leader): (truncation point,
    answers taken)."""
    mine = _runs(follower)
    cache = LeaderEpochCache([EpochEntry(e, s) for e, s in _runs(leader)])
    if leader_epoch is not None:
        cache.assign(leader_epoch, len(leader))
    step = TruncationStep(len(follower), follower[-1] if follower else None)
    rounds = 0
    while step.ask_epoch is not None:
        assert rounds < MAX_TRUNCATION_ROUNDS
        answered, end = cache.end_offset_for_epoch(step.ask_epoch, len(leader))
        asked = step.ask_epoch
        rounds += 1
        step = follower_truncation_offset(
            TruncationPolicy.LEADER_EPOCH, log_end_offset=step.offset, log_start_offset=0,
            high_watermark=0, leader_epoch_end_offset=end, leader_epoch=answered, epochs=mine)
        assert step.ask_epoch is None or step.ask_epoch < asked  # each round asks older
    return step.offset, rounds


def _common_prefix(a: list[int], b: list[int]) -> int:
    length = 0
    while length < min(len(a), len(b)) and a[length] == b[length]:
        length += 1
    return length


def test_kafka_6361_truncates_the_epoch_the_leader_never_had() -> None:
    # A leads epoch 1 (offsets 0..9); B has 0..5, leads epoch 2 and writes 6..8 nobody copies;
    # A leads again in epoch 3 and B follows: B asks for epoch 2, A answers epoch 1 ending at 10.
    leader = [1] * 10 + [3] * 2
    follower = [1] * 6 + [2] * 3
    # KIP-101 alone truncates to min(10, 9) = 9, keeping B's epoch-2 records
    once = follower_truncation_offset(TruncationPolicy.LEADER_EPOCH, log_end_offset=9,
                                      log_start_offset=0, high_watermark=0,
                                      leader_epoch_end_offset=10)
    assert once == TruncationStep(9)
    step = follower_truncation_offset(TruncationPolicy.LEADER_EPOCH, log_end_offset=9,
                                      log_start_offset=0, high_watermark=0,
                                      leader_epoch_end_offset=10, leader_epoch=1,
                                      epochs=_runs(follower))
    assert step == TruncationStep(6)
    assert _truncate(follower, leader) == (6, 1)


def test_a_leader_answering_an_epoch_the_follower_lacks_is_asked_again() -> None:
    # follower epochs 1, 3; leader epochs 1, 2, 4: asked 3, the leader answers 2 (ending at 7);
    # the follower has no epoch 2, truncates to the end of its epoch 1 (5) and asks for 1; the
    # leader's epoch 1 ends at 4
    follower = [1] * 5 + [3] * 4
    leader = [1] * 4 + [2] * 3 + [4] * 2
    first = follower_truncation_offset(TruncationPolicy.LEADER_EPOCH, log_end_offset=9,
                                       log_start_offset=0, high_watermark=0,
                                       leader_epoch_end_offset=7, leader_epoch=2,
                                       epochs=_runs(follower))
    assert first == TruncationStep(5, ask_epoch=1)
    assert not first.done
    second = follower_truncation_offset(TruncationPolicy.LEADER_EPOCH, log_end_offset=5,
                                        log_start_offset=0, high_watermark=0,
                                        leader_epoch_end_offset=4, leader_epoch=1,
                                        epochs=_runs(follower))
    assert second == TruncationStep(4)
    assert _truncate(follower, leader) == (4, 2)


def test_a_leader_that_wrote_nothing_then_followed_older_records_answers_their_end() -> None:
    # A led epoch 3 from offset 11 and wrote nothing; deposed, it followed the leader of epoch 4,
    # whose log holds epoch-2 records at 11..12, then led epoch 5 from 13. Its cache must say
    # epoch 2 starts at 11 (Kafka's assign drops the empty epoch 3): asked for epoch 2 by a
    # follower holding the same records, it answers their end, 13, and nothing is truncated.
    cache = LeaderEpochCache([EpochEntry(0, 0), EpochEntry(1, 4)])
    assert cache.assign(3, 11)  # becoming leader at its LEO
    assert cache.assign(2, 11)  # the epoch-2 batch fetched as a follower
    assert not cache.assign(2, 12)
    assert cache.assign(5, 13)
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(1, 4), EpochEntry(2, 11),
                             EpochEntry(5, 13))
    answered, end = cache.end_offset_for_epoch(2, 13)
    assert (answered, end) == (2, 13)
    follower = [0] * 4 + [1] * 7 + [2] * 2
    step = follower_truncation_offset(TruncationPolicy.LEADER_EPOCH, log_end_offset=13,
                                      log_start_offset=0, high_watermark=0,
                                      leader_epoch_end_offset=end, leader_epoch=answered,
                                      epochs=_runs(follower))
    assert step == TruncationStep(13)
    # an older epoch's batch after a later epoch's records is stale: ignored
    assert not cache.assign(4, 14)
    assert cache.entries[-1] == EpochEntry(5, 13)


def test_a_leader_that_wrote_nothing_then_followed_its_own_older_epoch_drops_the_empty_one(
) -> None:
    # A held epoch 3 from 16 to 18, led epoch 4 from 18 and wrote nothing; deposed, it followed
    # a leader whose log continues epoch 3 at 18..19 (seed 2081's path without its crash). The
    # epoch-3 batch continues the entry the cache ends with once epoch 4's is dropped: that
    # entry must go all the same (Kafka's assign removes it), or epoch 3 seems to end at 18 and,
    # leading epoch 7 from 20, A answers a follower holding the same 18..19 with (3, 18).
    cache = LeaderEpochCache([EpochEntry(0, 0), EpochEntry(1, 9), EpochEntry(3, 16)])
    assert cache.assign(4, 18)  # becoming leader at its LEO
    assert cache.assign(3, 18)  # the epoch-3 batch fetched as a follower
    assert not cache.assign(3, 19)
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(1, 9), EpochEntry(3, 16))
    assert cache.assign(7, 20)
    answered, end = cache.end_offset_for_epoch(4, 20)
    assert (answered, end) == (3, 20)
    follower = [0] * 9 + [1] * 7 + [3] * 4
    step = follower_truncation_offset(TruncationPolicy.LEADER_EPOCH, log_end_offset=20,
                                      log_start_offset=0, high_watermark=0,
                                      leader_epoch_end_offset=end, leader_epoch=answered,
                                      epochs=_runs(follower))
    assert step == TruncationStep(20)
    # a stale batch (an epoch older than the last entry left) still adds nothing, but the empty
    # entries at its offset go
    stale = LeaderEpochCache([EpochEntry(2, 0), EpochEntry(5, 4), EpochEntry(6, 6)])
    assert stale.assign(3, 6)
    assert stale.entries == (EpochEntry(2, 0), EpochEntry(5, 4))
    assert not stale.assign(3, 7)


def test_a_leader_that_wrote_nothing_then_followed_its_own_older_epoch_answers_its_end() -> None:
    # Seed 4498: B followed epoch-2 records from offset 33, led epoch 4 from 39 and wrote nothing;
    # deposed, it followed the leader of epoch 5, whose log holds more epoch-2 records at 39..42,
    # then led epoch 6 from 43. The empty epoch 4 must go (Kafka's assign drops every entry at
    # or after the appended batch), though the entry left below is of epoch 2 itself: asked for
    # epoch 2 by a follower holding the same records, it answers their end, 43, not 39.
    cache = LeaderEpochCache([EpochEntry(0, 0), EpochEntry(1, 12), EpochEntry(2, 33)])
    assert cache.assign(4, 39)  # becoming leader at its LEO
    assert cache.assign(2, 39)  # the epoch-2 batch fetched as a follower: drops epoch 4
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(1, 12), EpochEntry(2, 33))
    assert not cache.assign(2, 41)
    assert cache.assign(6, 43)
    answered, end = cache.end_offset_for_epoch(2, 43)
    assert (answered, end) == (2, 43)
    follower = [0] * 12 + [1] * 21 + [2] * 10
    step = follower_truncation_offset(TruncationPolicy.LEADER_EPOCH, log_end_offset=43,
                                      log_start_offset=0, high_watermark=0,
                                      leader_epoch_end_offset=end, leader_epoch=answered,
                                      epochs=_runs(follower))
    assert step == TruncationStep(43)


def test_a_replica_that_led_without_writing_then_followed_its_own_last_epoch_forgets_it() -> None:
    # Seed 2187: B holds epoch-4 records at 10..11, leads epoch 5 from 12 and writes nothing;
    # deposed, it follows the leader of epoch 7, whose log holds an epoch-4 record at 12. The
    # fetched batch drops B's empty epoch 5 (epoch 4's entry left covers offset 12), so asked
    # again, B asks for epoch 4, the leader answers its end (13), and B keeps offset 12.
    cache = LeaderEpochCache([EpochEntry(0, 0), EpochEntry(4, 10)])
    assert cache.assign(5, 12)  # becoming leader at its LEO
    assert cache.assign(4, 12)  # the epoch-4 batch fetched as a follower
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(4, 10))
    assert not cache.assign(4, 13)
    follower = [0] * 10 + [4] * 3
    assert cache.latest_epoch == 4
    assert [(e.epoch, e.start_offset) for e in cache.entries] == _runs(follower)
    leader = [0] * 10 + [4] * 3
    assert _truncate(follower, leader, leader_epoch=7) == (13, 1)
    # with epoch 5 kept, B would ask for it, hear epoch 4 ending at 13, and cut 12 (its own
    # epoch 4 "ending" where epoch 5 began)
    step = follower_truncation_offset(TruncationPolicy.LEADER_EPOCH, log_end_offset=13,
                                      log_start_offset=0, high_watermark=0,
                                      leader_epoch_end_offset=13, leader_epoch=4,
                                      epochs=[(0, 0), (4, 10), (5, 12)])
    assert step == TruncationStep(12)


def test_a_follower_whose_epochs_are_all_newer_keeps_nothing_after_its_first() -> None:
    follower = [3] * 4
    leader = [1] * 2 + [4] * 2
    assert _truncate(follower, leader) == (0, 1)


def test_the_log_start_bounds_every_step() -> None:
    step = follower_truncation_offset(TruncationPolicy.LEADER_EPOCH, log_end_offset=9,
                                      log_start_offset=7, high_watermark=0,
                                      leader_epoch_end_offset=7, leader_epoch=2,
                                      epochs=[(1, 7), (3, 8)])
    assert step == TruncationStep(8, ask_epoch=1)
    done = follower_truncation_offset(TruncationPolicy.LEADER_EPOCH, log_end_offset=8,
                                      log_start_offset=7, high_watermark=0,
                                      leader_epoch_end_offset=2, leader_epoch=1,
                                      epochs=[(1, 7), (3, 8)])
    assert done == TruncationStep(7)


def test_the_high_watermark_policy_is_unchanged() -> None:
    step = follower_truncation_offset(TruncationPolicy.HIGH_WATERMARK, log_end_offset=9,
                                      log_start_offset=0, high_watermark=4,
                                      leader_epoch_end_offset=8, leader_epoch=1,
                                      epochs=[(1, 0)])
    assert step == TruncationStep(4)


def test_epoch_end_offset_agrees_with_the_storage_cache() -> None:
    rng = random.Random(11)
    for _ in range(200):
        log = sorted(rng.choices(range(1, 6), k=rng.randint(1, 12)))
        entries = _runs(log)
        cache = LeaderEpochCache([EpochEntry(e, s) for e, s in entries])
        for epoch in range(7):
            assert epoch_end_offset(entries, len(log), epoch) == cache.end_offset_for_epoch(
                epoch, len(log)), (log, epoch)


@pytest.mark.parametrize("seed", range(5))
def test_iterated_truncation_reaches_the_common_prefix(seed: int) -> None:
    """Logs grown as Kafka grows them (one leader per epoch, followers copying a prefix of the
    leader's log, epoch 1 copied everywhere): the exchange with the latest leader always ends at
    the longest common prefix."""
    rng = random.Random(seed)
    multi = 0
    for _ in range(300):
        logs: list[list[int]] = [[1], [1], [1]]
        leader = 0
        last = rng.randint(2, 7)
        for epoch in range(2, last + 1):
            leader = rng.randrange(3)
            logs[leader].extend([epoch] * rng.randint(0, 3))
            for other in range(3):
                if other != leader and rng.random() < 0.5:
                    keep = _common_prefix(logs[other], logs[leader])
                    logs[other] = list(logs[leader][:rng.randint(keep, len(logs[leader]))])
        follower = logs[rng.choice([r for r in range(3) if r != leader])]
        point, rounds = _truncate(follower, logs[leader], last)
        assert point == _common_prefix(follower, logs[leader]), (follower, logs[leader], point)
        multi += rounds > 1
    assert multi > 0  # the generator reaches the KIP-279 case where one answer is not enough


def test_a_leader_without_an_epoch_that_old_answers_its_first_epochs_start() -> None:
    """Kafka's ``LeaderEpochFileCache.endOffsetFor``: an epoch older than every entry answers
    (that epoch, the first entry's start offset), and the follower truncates its records of that
    epoch (once answered (-1, -1), the follower kept them and appended the leader's records
    after them: swarm seed 113, LOG_MATCHING)."""
    cache = LeaderEpochCache([EpochEntry(1, 0)])
    assert cache.end_offset_for_epoch(0, 3) == (0, 0)
    assert cache.end_offset_for_epoch(-1, 3) == (-1, -1)
    assert LeaderEpochCache().end_offset_for_epoch(0, 0) == (-1, -1)
    assert _truncate([0], [1, 1, 1], 1) == (0, 1)  # a crashed leader's unreplicated record
    assert _truncate([3, 3], [6, 6, 6], 6) == (0, 1)
