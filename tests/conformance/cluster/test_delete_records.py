"""The cluster simulator's DeleteRecords client (``conformance/_cluster_records.py``): requests
reach the leaders, followers follow the log start (one lagging below it starts afresh there),
the books forget what may be gone, and a refusal the leader owes is checked."""

from __future__ import annotations

import pytest

from conformance import _cluster_records as admin
from conformance.cluster_sim import ClusterConfig, replay_command, simulate
from conformance.move_sim import ViolationFound
from impl.broker.node import DeleteRecordsReply
from impl.storage.names import TopicPartition

TP = TopicPartition("t", 0)


class _World:
    """The two things the client's answer check needs of the cluster."""

    tps = (TP,)

    def violation(self, invariant: str, message: str) -> None:
        raise ViolationFound(invariant, message)


def _client() -> admin.RecordsAdmin:
    from conformance.rng import SimRng

    return admin.RecordsAdmin(_World(), SimRng(0))  # type: ignore[arg-type]


def test_a_delete_past_the_hw_must_be_refused() -> None:
    client = _client()
    client.asked[1] = admin.PAST_THE_HW
    client.on_reply(DeleteRecordsReply(1, TP, 1))  # OFFSET_OUT_OF_RANGE: as owed
    assert client.refused == 1
    client.asked[2] = admin.PAST_THE_HW
    with pytest.raises(ViolationFound) as found:
        client.on_reply(DeleteRecordsReply(2, TP, 0, 7))
    assert found.value.invariant == "NO_COMMITTED_LOSS"


def test_a_low_watermark_below_the_offset_is_reported() -> None:
    client = _client()
    client.asked[1] = 12
    client.on_reply(DeleteRecordsReply(1, TP, 0, 12))
    assert client.acknowledged == 1
    client.asked[2] = 12
    with pytest.raises(ViolationFound, match="low watermark 11"):
        client.on_reply(DeleteRecordsReply(2, TP, 0, 11))


def test_deletes_reach_the_followers_and_a_lagging_one_starts_afresh() -> None:
    """Seed 2 of the default run (as before followers sent rounds; seed 6 from then until a
    follower applied a late answer to an earlier fetch from its log end): DeleteRecords
    acknowledged by the leaders, a follower whose log ended below its leader's log start
    emptied and restarted there (``LOG_START``), every check passing."""
    outcome = simulate(2, ClusterConfig(), keep_trace=True)
    assert outcome.violation is None, outcome.violation
    starts = [event for event in outcome.trace if event.event == "TRUNCATE"
              and dict(event.fields).get("policy") == "LOG_START"]
    assert starts
    for event in starts:  # (the leader's log start, past where this log ended)
        fields = dict(event.fields)
        start, end = fields["log_start_offset"], fields["log_end_offset"]
        assert isinstance(start, int), fields
        assert isinstance(end, int), fields
        assert start > end, fields


def test_the_client_can_be_left_out_and_the_replay_says_so() -> None:
    config = ClusterConfig(steps=40, delete_records=False)
    assert replay_command(3, config).endswith("--no-delete-records")
    assert "--no-delete-records" not in replay_command(3, ClusterConfig())


SEED_416_FAULTS = "1:reassign:1:44701,98:reassign:1:39547,154:crash_last_copy:1:239"


def test_seed_416_a_replica_re_created_empty_starts_afresh_with_nothing_of_its_old_log() -> None:
    """Fuzz seed 416 (COMMITTED_DURABLE in the trace checker): a reassignment dropped broker 0
    from t-0 (its replica stopped and deleted) and a later one added it back, empty; lagging
    below the leader's log start (17, after a DeleteRecords), it started afresh there
    (``LOG_START``). The replication abstraction spliced the leader's records onto what its
    mirror still held of the deleted replica's log (one record of epoch 0), so an ISR member
    looked divergent from the leader below the HW and a later crash "lost" a committed record.
    Kafka's truncateFullyAndStartAt empties the log first; the mirror now does too."""
    from conformance.cluster_sim import parse_faults
    from conformance.runner import replay

    config = ClusterConfig(brokers=3, log_dirs=2, partitions=1, steps=155,
                           fault_probability=0.05, segment_bytes=1048576, chunk_bytes=65536)
    result, outcome = replay(416, config, parse_faults(SEED_416_FAULTS))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    restarts = [dict(event.fields) for event in outcome.trace
                if event.subject == "t-0@0" and event.event == "TRUNCATE"
                and dict(event.fields).get("policy") == "LOG_START"]
    assert restarts, "the run no longer restarts the re-created replica at the log start"


def test_a_lossy_fault_asks_no_copy_for_the_batches_deleted_records_removed() -> None:
    """A lossy fault (and ``crash_last_copy``'s partner) needs another ISR member holding every
    acknowledged batch; a replica re-read after DeleteRecords holds none below its log start,
    which NO_COMMITTED_LOSS does not ask for either, so they are not asked of it: once both
    followers restarted (cleanly) with their log start past an acknowledged batch, the
    leader's crash still keeps the promise."""
    from conformance.cluster_sim import ClusterFault, ClusterWorld
    from conformance.rng import SimRng

    # (recorded before the simulator parked delayed fetches: they move the interleaving)
    config = ClusterConfig(partitions=1, storage_broker=False, delayed_fetches=False,
                           fetch_rounds=False)
    world = ClusterWorld(0, config, lambda _: None)
    workload = SimRng(0).stream("workload")
    for _ in range(20):
        world.clock.advance_ns(1_000_000)
        world.pump()
    restarted: list[int] = []
    for step in range(200):
        world.advance(500_000 + workload.randrange(2_000_000))
        world.restarts_due(step)
        world.operate(workload)
        world.admin_step()
        if world.groups is not None:
            world.groups.operate()
        world.movers()
        world.pump()
        world.check()
        leader = world.current_leader(TP)
        if leader is None or not world.healthy() or not world.acked_set[TP]:
            continue
        first = min(key[1] for key in world.acked_set[TP])
        followers = [b for b in world.brokers if b is not leader and b.id not in restarted
                     and (log := b.log(TP)) is not None and log.log_start_offset >= first]
        if followers:
            restarted.append(followers[0].id)
            world.inject(ClusterFault(step, "clean_restart", followers[0].id, 2), step)
        elif len(restarted) == 2:
            break
    else:
        pytest.fail("both followers never restarted past a deleted acknowledged batch")
    assert all(not world.shadow_sets[(b, TP)] >= world.acked_set[TP] for b in restarted)
    assert world._may_lose(leader)
