"""The cluster simulator's admin workload: logproof's admin code over the simulated ZooKeeper,
and topic deletion checked end to end."""

from __future__ import annotations

import pytest

from conformance._cluster_admin import SyncAdminClient, run_now
from conformance._coordinator_pump import SimController
from conformance._coordinator_server import SimulatedZooKeeperServer
from conformance.cluster_sim import (
    ClusterConfig,
    ClusterOutcome,
    parse_faults,
    plan_faults,
    simulate,
)
from conformance.runner import replay
from impl.controller import admin
from impl.controller.znodes import decode_topic, delete_topic_path, topic_path

from ._plans import as_found

SHORT = ClusterConfig(steps=120)


def test_admin_code_runs_to_completion_over_the_simulated_server() -> None:
    server = SimulatedZooKeeperServer()
    client = SyncAdminClient(server, server.open_session(60_000))
    run_now(admin.create_topic(client, "a0", assignment={0: (0, 1)}))
    run_now(admin.add_partitions(client, "a0", 2, assignment={1: (1, 2)}))
    data, _ = server.get(client.session_id, topic_path("a0"), False)
    assert dict(decode_topic("a0", data).partitions) == {0: (0, 1), 1: (1, 2)}
    run_now(admin.delete_topic(client, "a0"))
    assert server.exists(client.session_id, delete_topic_path("a0"), False) is not None


def test_the_admin_workload_leaves_the_fault_schedule_alone() -> None:
    without = ClusterConfig(steps=120, admin=False)
    for seed in range(5):
        assert plan_faults(seed, SHORT) == plan_faults(seed, without)


def test_admin_operations_run_and_are_checked() -> None:
    seen: set[tuple[str, str]] = set()
    operations = 0
    for seed in range(3):
        outcome = simulate(seed, SHORT, keep_trace=True)
        assert outcome.violation is None, outcome.violation
        operations += outcome.admin_operations
        seen |= {(event.machine, event.event) for event in outcome.trace
                 if event.subject.startswith("a")}
    assert operations > 0
    assert {("controller", "TOPIC_CREATED"), ("controller", "TOPIC_DELETED"),
            ("replication", "BECOME_LEADER")} <= seen, seen


def test_a_restarted_broker_is_not_sent_the_replicas_it_deleted() -> None:
    """Seed 99 of the regression shape below (TOPIC_DELETED): broker 1 answered the StopReplica
    (delete) of topic a0, crashed and restarted while the deletion waited for another replica;
    the controller sent the restarted broker LeaderAndIsr for every partition assigned to it,
    a0's included, so it created a0's replicas again, and since its replicas were already
    DELETION_SUCCESSFUL no StopReplica deleted them: the topic vanished from ZooKeeper while
    broker 1 kept serving it. Kafka's ``onBrokerStartup`` leaves topics queued for deletion
    out of the new broker's LeaderAndIsr (and resumes their deletion); so does the controller
    now."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=3, steps=126,
                           fault_probability=0.1, segment_bytes=600, chunk_bytes=65536)
    result, outcome = replay(99, config, as_found(99, config))
    assert not result.failed, result.message
    assert isinstance(outcome, ClusterOutcome)
    assert outcome.admin_operations > 0


def test_a_deletion_is_not_fenced_by_an_election_written_since() -> None:
    """``logproof fuzz`` seed 67 (TOPIC_DELETED): a new controller planned an election for a0-0
    (leader epoch 4) before it read the pending deletion of a0, then sent StopReplica (delete)
    with the leader epoch of its cache, 3; the replicas, already at epoch 4, refused it
    FENCED_LEADER_EPOCH and stayed DELETION_INELIGIBLE on live brokers: the deletion never
    finished. A deletion's StopReplica carries Kafka's EpochDuringDelete (-2) now
    (``tests/unit/controller/test_deletion.py`` checks the epoch directly: since the default run
    draws session expiries, this seed no longer reaches that interleaving, and it failed on a
    leader-epoch cache bug instead, see ``test_replication_kip279_kip320.py``; the plant
    ``deletion_with_the_cached_leader_epoch`` is a gap of the default run)."""
    config = ClusterConfig(partitions=1, steps=200, fault_probability=0.1, segment_bytes=600)
    result, _outcome = replay(67, config)
    assert not result.failed, result.message


def test_a_stale_stop_replica_answer_does_not_stall_a_deletion() -> None:
    """``logproof fuzz`` seed 71 (TOPIC_DELETED): broker 0 restarted while its StopReplica
    (delete) was on the way; the controller restarted the deletion on the new incarnation, then
    took the old request's STALE_BROKER_EPOCH answer for the new one's (replica
    DELETION_INELIGIBLE) and ignored the new one's success: the deletion never finished. An
    answer to a request sent under an earlier broker epoch is dropped now (Kafka drops a
    restarted broker's in-flight requests with its old channel)."""
    config = ClusterConfig(partitions=2, steps=200, fault_probability=0.1, segment_bytes=600,
                           chunk_bytes=150)
    result, _outcome = replay(71, config)
    assert not result.failed, result.message


def _replica_events(outcome: ClusterOutcome, subject: str) -> list[tuple[str, object]]:
    return [(event.event, event.fields.get("leader_epoch")) for event in outcome.trace
            if event.machine == "replication" and event.subject == subject]


def test_a_replica_removed_while_its_broker_was_expired_stays_a_stray() -> None:
    """``logproof fuzz`` seed 196, shrunk (TOPIC_DELETED): broker 0's ZooKeeper session expired
    (its process kept running, a follower of a0-1); a reassignment then removed broker 0 from
    a0-1, and the controller, holding broker 0 dead, sent it no StopReplica, as Kafka's (its
    channel manager drops a request to a broker that is not live, and ``onBrokerStartup`` only
    addresses the replicas assigned to the broker when it registers again). Broker 0 kept a0-1
    hosted; deleting a0 later addressed the replicas assigned then, as Kafka's
    TopicDeletionManager does. The check held broker 0 to no longer serving a0-1; a replica
    that was already outside the assignment (a stray) when the deletion was asked, untouched
    since, is outside the deletion now."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=1, steps=200,
                           fault_probability=0.1, segment_bytes=1048576)
    faults = parse_faults("35:crash:0:18,55:session_expiry:0:19,62:reassign:0:33139")
    result, outcome = replay(196, config, faults)
    assert not result.failed, result.message
    assert isinstance(outcome, ClusterOutcome)
    # the shape: broker 0 followed a0-1 from its creation, the reassignment left it out
    # while its session was expired, then a0 was deleted
    assert _replica_events(outcome, "a0-1@0") == [("BECOME_FOLLOWER", 0)]
    completed = [event.fields["replicas"] for event in outcome.trace
                 if event.subject == "a0-1" and event.event == "REASSIGN_COMPLETED"
                 and event.machine == "controller"]
    assert completed == [(1, 2)], completed
    assert any(event.subject == "a0-1" and event.event == "TOPIC_DELETED"
               for event in outcome.trace)


def test_a_stop_replica_lost_with_its_controller_leaves_a_stray() -> None:
    """``logproof fuzz`` seed 1334, shrunk (TOPIC_DELETED): controller 0, elected at step 72,
    resumed a0-2's reassignment and completed it, dropping broker 2; its StopReplica (delete)
    to broker 2 waited behind a LeaderAndIsr whose answer a network partition cut (step 73),
    and controller 0's term ended with its session (``controller_expiry`` at step 86) with the
    request still queued. Kafka's controller clears its brokers' queues when it resigns and
    its successor knows only the assignment in ZooKeeper, so broker 2 kept a0-2 hosted, and
    deleting a0 later addressed the replicas assigned then: as for seed 196, the stray is
    outside the deletion."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=2, steps=200,
                           fault_probability=0.02, segment_bytes=600, chunk_bytes=65536)
    faults = parse_faults("57:clean_restart:0:10,62:controller_expiry:0:33,"
                          "73:partition:2:39,86:controller_expiry:1:9")
    result, outcome = replay(1334, config, faults)
    assert not result.failed, result.message
    assert isinstance(outcome, ClusterOutcome)
    completed = [event.fields["replicas"] for event in outcome.trace
                 if event.subject == "a0-2" and event.event == "REASSIGN_COMPLETED"
                 and event.machine == "controller"]
    assert completed == [(1, 0)], completed
    assert [name for name, _ in _replica_events(outcome, "a0-2@2")] == [
        "BECOME_FOLLOWER", "BECOME_FOLLOWER"]
    assert any(event.subject == "a0-2" and event.event == "TOPIC_DELETED"
               for event in outcome.trace)


def test_a_late_leader_and_isr_in_flight_when_the_deletion_was_asked_leaves_a_stray(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``logproof fuzz`` seed 11608, shrunk (TOPIC_DELETED): broker 2, a follower of a0-0 in
    epoch 1, was cut off by a network partition with the controller's LeaderAndIsr of epoch 2
    in flight; a reassignment removed it from a0-0 and its session expired, so the controller
    held it dead and left a0-0 on it (seed 196's stray). a0 was deleted, then the partition
    healed and the request in flight reached broker 2 with its unchanged broker epoch: it
    followed a0-0 in epoch 2, as Kafka's broker accepts a late request (its epoch stands
    until it registers again), and stays a stray the deletion does not address. The check took
    the epoch's change for a controller request made since the deletion was asked; a stray may
    now also be left in the epoch of a LeaderAndIsr then in flight to its broker.

    The same run found a livelock of the follower (CLUSTER_HEALS at its end): broker 2 followed
    t-0 one record behind, and every answer of the leader reached it after the node had sent
    the fetch again (the simulated retry interval, 4 ms, counted from the call, against a call
    queued behind a round of delayed fetches parked 3 ms at the leader: 4-5 ms), so each was
    turned away as the answer to an earlier request. A follower now applies an answer to an
    earlier fetch of the same run from its log end offset, as Kafka's fetcher applies a
    response while the partition's fetch offset and epoch are the request's, and the run
    heals."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=3, steps=200,
                           fault_probability=0.1, segment_bytes=600, storage_broker=False)
    # (the shrunk plan moved by a step and a partition's length: with the follower's fix, the
    # found one's LeaderAndIsr of epoch 2 reached broker 2 before its session expired)
    faults = parse_faults("11:clean_restart:1:4,26:partition:2:29,41:clean_restart:1:2,"
                          "51:partition:2:17,53:session_expiry:2:8,59:partition:1:31")
    result, outcome = replay(11608, config, faults)
    assert not result.failed, result.message
    assert isinstance(outcome, ClusterOutcome)
    controller = [(event.event, event.fields.get("replicas"), event.fields.get("broker"))
                  for event in outcome.trace if event.machine == "controller"
                  and event.subject in ("a0-0", "broker-2")
                  and event.event in ("REASSIGN_COMPLETED", "BROKER_FAILED", "BROKER_STARTED",
                                      "TOPIC_DELETED")]
    assert controller == [("REASSIGN_COMPLETED", (0, 1), None), ("BROKER_FAILED", None, 2),
                          ("BROKER_STARTED", None, 2), ("TOPIC_DELETED", None, None)]
    # the late request: epoch 2 reached broker 2 after the controller held it dead
    assert _replica_events(outcome, "a0-0@2") == [
        ("BECOME_FOLLOWER", 0), ("BECOME_FOLLOWER", 1), ("BECOME_FOLLOWER", 2)]
    # the check as it was, a stray held to the epoch it served when the deletion was asked
    monkeypatch.setattr(SimController, "in_flight", lambda _: [])
    result, _ = replay(11608, config, faults)
    assert result.violated_invariant == "TOPIC_DELETED", result.message


#: Seed 11608's plan as ``logproof fuzz`` drew it (its default run, the storage broker's faults
#: on broker 3).
SEED_11608_FAULTS = (
    "3:dir_read_only:3:0,7:torn_tail:3:0,10:clean_restart:1:4,11:torn_tail:3:0,"
    "15:crash_in_swap:3:0,19:session_expiry:0:4,21:session_expiry:0:15,21:torn_tail:3:0,"
    "22:torn_tail:3:0,26:partition:2:29,27:torn_middle:3:35577,30:session_expiry:0:9,"
    "31:disk_full:3:63296,36:crash:3:0,36:fail_after_swap:3:48572,37:crash:1:19,"
    "37:redirect_off_failing:3:11338,39:torn_tail:3:0,41:clean_restart:1:2,45:torn_tail:3:0,"
    "50:crash_last_copy:0:90,50:dir_repaired:3:0,51:crash_last_copy:1:250,51:partition:2:18,"
    "53:session_expiry:2:8,55:crash_in_swap:3:6,58:crash_mid_operation:3:18,"
    "59:partition:1:31,65:torn_tail:3:0,67:torn_middle:3:49233,73:crash_in_swap:3:1,"
    "74:controller_expiry:1:45,78:crash_last_copy:2:15,81:crash_mid_operation:3:18,"
    "85:partition:2:30,87:crash:1:20,88:crash:3:0,91:crash:3:0,97:crash_in_swap:3:4,"
    "97:crash_last_copy:1:116,98:torn_tail:3:0,99:crash:3:0,106:crash_mid_operation:3:15,"
    "107:torn_middle:3:15669,111:crash:3:0,116:crash:3:0,118:crash_last_copy:2:106,"
    "123:clean_restart:1:9,125:dir_repaired:3:0,129:crash_last_copy:2:213,130:partition:2:8,"
    "137:torn_tail:3:0,139:partition:2:13,149:fail_after_swap:3:28677,"
    "150:crash_last_copy:2:106,153:file_failure_at_restart:3:35434,154:partition:1:14,"
    "156:torn_middle:3:54533,159:crash_in_swap:3:4,162:dir_failure:3:0,164:dir_repaired:3:0,"
    "167:dir_failure:3:1,170:dir_failure:3:0,175:partition:1:36,177:unreadable_at_startup:3:0,"
    "180:crash_in_swap:3:4,180:file_failure:3:30097,184:dir_repaired:3:0,"
    "187:torn_middle:3:7932,192:session_expiry:2:18,194:redirect_off_failing:3:63304,"
    "198:partition:0:21,199:controller_expiry:2:12")


def test_a_failed_brokers_queued_requests_are_dropped() -> None:
    """``logproof fuzz`` seed 11608 as drawn (TOPIC_DELETED), an implementation divergence:
    the controller queued a0-0's LeaderAndIsr of epoch 3 for broker 2 behind requests a
    network partition held up; broker 2's session expired and the controller failed it, but
    its node went on sending the queue to the still running process, which followed a0-0 in
    epoch 3 after a0's deletion was asked, although a reassignment had removed it from a0-0
    (seed 196's stray, which the deletion does not address). Kafka's ControllerChannelManager
    drops a failed broker's queue (``removeBroker``): only the request in flight may arrive."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=3, steps=200,
                           fault_probability=0.1, segment_bytes=600, chunk_bytes=700)
    result, outcome = replay(11608, config, parse_faults(SEED_11608_FAULTS))
    assert not result.failed, result.message
    assert isinstance(outcome, ClusterOutcome)
    assert [epoch for name, epoch in _replica_events(outcome, "a0-0@2")
            if name == "BECOME_FOLLOWER"][-1] == 2, "broker 2 left in a0-0's epoch 2"


def test_a_new_controller_queues_deletions_before_it_resumes_reassignments() -> None:
    """``logproof fuzz`` seed 16677 (TOPIC_DELETED, "broker 2 still serves a1-0 of deleted
    topic a1"): a reassignment of a1-0 dropping broker 2, its leader, and the deletion of a1
    were both pending when controller 0 was elected. It resumed the reassignment first: it
    moved the leadership to broker 0, wrote a1-0's replicas as (0, 1) and queued broker 2's
    StopReplica, then lost its term when brokers 0 and 1 crashed; its successor deleted a1 from
    (0, 1) only and broker 2 went on leading a1-0 in epoch 0. Kafka's ``onControllerFailover``
    queues the deletions (TopicDeletionManager init) before ``initializePartitionReassignments``,
    which skips a topic queued for deletion; so does the controller now, and the deletion's
    StopReplica reaches broker 2."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=1, steps=200,
                           fault_probability=0.05, segment_bytes=600, chunk_bytes=700)
    result, outcome = replay(16677, config)
    assert not result.failed, result.message
    assert isinstance(outcome, ClusterOutcome)
    # the shape: the deletion was asked while the topic was still (2, 0, 1), and the replica
    # of broker 2 is deleted, not left leading
    assert any(event.subject == "a1-0" and event.event == "TOPIC_DELETED"
               for event in outcome.trace)
    assert not any(event.subject == "a1-0" and event.event == "REASSIGN_COMPLETED"
                   for event in outcome.trace)


def test_a_reassignment_pending_when_the_deletion_was_asked_may_drop_a_replica_first() -> None:
    """``logproof fuzz`` seed 19241 (TOPIC_DELETED, "broker 0 still holds the logs of a1-0 of
    deleted topic a1"): a reassignment of a1-0 from (2, 0, 1) to (2, 1) was pending in
    ``/admin/reassign_partitions`` when the deletion of a1 was asked, broker 0 down. The
    controller read the reassignment first and completed it (broker 0 held dead, no
    StopReplica), then deleted a1 from (2, 1); broker 0 came back with a1-0 on its disk, as a
    ZooKeeper-era Kafka broker does (its controller reads the notifications in order, and a
    reassignment removing a replica of a dead broker forgets it). The check held broker 0 to
    the assignment read when the deletion was asked; a replica a reassignment then pending
    drops may stay on its broker's disk now."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=3, steps=200,
                           fault_probability=0.02, segment_bytes=1048576, chunk_bytes=700)
    result, outcome = replay(19241, config)
    assert not result.failed, result.message
    assert isinstance(outcome, ClusterOutcome)
    # the shape: the reassignment completed without broker 0, then a1 was deleted, and broker
    # 0's restart still found a1-0's log
    events = [(event.event, event.machine) for event in outcome.trace
              if event.subject == "a1-0" and event.machine == "controller"]
    completed = events.index(("REASSIGN_COMPLETED", "controller"))
    assert events.index(("TOPIC_DELETED", "controller")) > completed, events
    assert [event.fields["replicas"] for event in outcome.trace
            if event.subject == "a1-0" and event.event == "REASSIGN_COMPLETED"
            and event.machine == "controller"] == [(2, 1)]
    deleted = next(i for i, event in enumerate(outcome.trace)
                   if event.subject == "a1-0" and event.event == "TOPIC_DELETED")
    assert any(event.subject == "a1-0@0" and event.event == "CLASSIFIED"
               and event.fields["live_dir"] is not None for event in outcome.trace[deleted:])
