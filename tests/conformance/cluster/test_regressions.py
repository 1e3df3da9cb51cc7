"""Swarm seeds of the cluster simulator that once failed the shipped configuration.

Each test replays its seed exactly as ``logproof conformance run --swarm`` draws it (3 brokers x 2
log dirs, 200 steps) and says what was wrong. A seed reaches its interleaving only while the
simulator schedules as it did: since the simulator runs the controller node's own pump, seed 113's
case is reached by seed 112, seed 85's is scripted through the controller node in
``tests/conformance/coordinator/test_controller_back_from_a_crash.py``, and seed 1678's recorded
trace is replayed in ``tests/conformance/trace/test_recorded_traces.py``.
"""

from __future__ import annotations

import dataclasses
import gzip
import itertools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from conformance.cluster_sim import (
    ClusterConfig,
    ClusterFault,
    ClusterOutcome,
    ClusterWorld,
    parse_faults,
)
from conformance.replication_abstraction import abstractions
from conformance.runner import replay, swarm_config
from conformance.trace_check import check_trace
from impl.controller.controller import Controller
from impl.trace import TraceEvent

from ._plans import as_found


def _saved_trace(name: str, events: int) -> list[TraceEvent]:
    """The trace kept in ``traces/<name>.jsonl.gz`` (a run's whole trace, one event a line),
    checked to hold ``events`` events."""
    from conformance.trace_check import parse_trace_line

    path = Path(__file__).parent / "traces" / f"{name}.jsonl.gz"
    trace = [parse_trace_line(line)
             for line in gzip.decompress(path.read_bytes()).decode().splitlines() if line]
    assert len(trace) == events, len(trace)
    return trace


def _checked_and_kept_refused(trace: list[TraceEvent], index: int, inferred_key: str, *,
                              kept: int) -> None:
    """The replication events up to the TRUNCATE at ``index`` pass the checker, which needed
    the inference ``inferred_key``; the same TRUNCATE claiming ``truncated_to`` ``kept``
    instead is refused there (state_mismatch)."""
    replicated = [e for e in trace[: index + 1] if e.machine == "replication"]
    checked = abstractions()
    assert check_trace(replicated, checked).violation is None
    inferred = checked[0].inferred  # type: ignore[attr-defined]
    assert inferred[inferred_key] > 0, inferred
    truncate = trace[index]
    claim = TraceEvent.of("replication", "TRUNCATE", truncate.subject, "FOLLOWER", "FOLLOWER",
                          **{**dict(truncate.fields), "truncated_to": kept})
    violation = check_trace([*replicated[:-1], claim], abstractions()).violation
    assert violation is not None
    assert violation.index == len(replicated) - 1
    assert violation.kind == "state_mismatch"


def _late(trace: Iterable[TraceEvent], flagged: str, *, seen: tuple[str, ...]) -> list[str]:
    """The subjects of the replication ``flagged`` events (BECOME_LEADER or BECOME_FOLLOWER)
    whose leader epoch is below the highest a ``seen`` event of the partition carried before
    them: requests that arrived after a later epoch."""
    highest: dict[str, int] = {}
    late = []
    for event in trace:
        if event.machine != "replication" or event.event not in (*seen, flagged):
            continue
        partition = event.subject.split("@")[0]
        epoch = event.fields.get("leader_epoch")
        assert isinstance(epoch, int)
        if event.event == flagged and epoch < highest.get(partition, -1):
            late.append(event.subject)
        if event.event in seen:
            highest[partition] = max(epoch, highest.get(partition, -1))
    return late


def test_seed_112_a_restarted_leader_truncates_its_unreplicated_epoch() -> None:
    """Found as seed 113 (LOG_MATCHING), reached by seed 112 since the simulator runs the
    controller node's own pump: broker 1 led t-1 in epoch 0, wrote offsets 0-2 and crashed
    before any follower fetched them; broker 2 led epoch 1 from offset 0. Back as a follower,
    broker 1 asked OffsetsForLeaderEpoch for epoch 0, older than every entry of the leader's
    cache (epoch 1 at 0). The storage cache answered (-1, -1), so the follower truncated nothing
    and appended the leader's offsets after its divergent ones. Kafka's
    ``LeaderEpochFileCache.endOffsetFor`` answers (0, 0): the follower truncates to 0 (KIP-101,
    KIP-279) before it fetches."""
    # (recorded before the simulator ran groups and DeleteRecords: their traffic changes the
    # interleaving)
    drawn = swarm_config(112, brokers=3, log_dirs=2, steps=200)
    assert isinstance(drawn, ClusterConfig)
    # (recorded before the simulator parked delayed fetches: they move the interleaving)
    config = dataclasses.replace(drawn, delayed_fetches=False, fetch_rounds=False,
                                 groups=False, delete_records=False)
    result, outcome = replay(112, config, as_found(112, config))
    assert result.replay_command.startswith(
        "logproof conformance replay --seed 112 --brokers 3 --log-dirs 2 --partitions 2 "
        "--steps 200 --fault-probability 0.02")
    assert not result.failed, result.message
    assert outcome.violation is None, outcome.violation
    truncations = [e.to_json() for e in outcome.trace
                   if e.event == "TRUNCATE" and e.subject == "t-1@1"]
    assert any('"leader_epoch_end":0' in t and '"truncated_to":0' in t for t in truncations), (
        truncations)


def test_seed_561_a_late_leader_and_isr_names_an_isr_member_that_crashed_since() -> None:
    """Seed 561 of ``logproof fuzz`` (COMMITTED_DURABLE). A reassignment made broker 2 leader
    of t-1 in epoch 2 (ISR 1, 2, 0) while broker 2 was cut off; broker 0 then crashed, lost its
    unflushed tail (23 -> 16, below the HW 21) and the controller removed it in epoch 3. Broker 2
    received epoch 2's LeaderAndIsr last. The implementation is right (its followers in epoch 3
    fence its epoch-2 fetch answers, so the stale ISR cannot commit anything); the replication
    abstraction replayed the late election from the mirror's current logs, where the crashed
    member already lacked committed records. A late election now sees the ISR members' logs as
    they were before a crash since. (The seed's own fault plan reached the case until appends
    began to wait for their partition lock in the simulator; seed 99 of the same shape reaches
    it on t-0, without the admin workload drawn since.)"""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=3, steps=126,
                           fault_probability=0.1, segment_bytes=600, chunk_bytes=65536,
                           admin=False)
    result, outcome = replay(99, config, as_found(99, config))
    assert not result.failed, result.message
    assert outcome.violation is None, outcome.violation
    events = [e.to_json() for e in outcome.trace if e.subject.startswith("t-0@")]
    late = [i for i, e in enumerate(events) if '"event":"BECOME_LEADER"' in e
            and any('"event":"BECOME_FOLLOWER"' in f and '"leader_epoch":' in f
                    and _epoch(f) > _epoch(e) for f in events[:i])]
    assert late, "no late BECOME_LEADER: the seed no longer reaches the case"


def _epoch(event_json: str) -> int:
    value = event_json.split('"leader_epoch":')[1]
    return int(value.split(",", maxsplit=1)[0].split("}", maxsplit=1)[0])


@pytest.mark.parametrize(("seed", "brokers"), [
    pytest.param(12, 4, marks=pytest.mark.slow), (32, 4),
    pytest.param(7, 6, marks=pytest.mark.slow),
])
def test_clusters_of_more_than_three_brokers_replay_in_the_models(seed: int, brokers: int) -> None:
    """Reassignments across four or more brokers give a partition more than three replicas over
    a run (old and new ones together during a reassignment): the replication model, proved on
    three, is built over as many for the trace checker (the model replay used to refuse a
    fourth replica). Seed 12 (4 brokers): a LeaderAndIsr reached a replica its broker had
    restarted without (its dir had failed). Seed 32 (4 brokers): a replica deleted and created
    again starts a fresh move machine. Seed 7 (6 brokers): stale leaders of several old epochs,
    merged into one abstract epoch, are not two leaders of one epoch."""
    config = ClusterConfig(brokers=brokers, log_dirs=2, partitions=2, steps=300,
                           fault_probability=0.1, storage_broker=False)
    result, outcome = replay(seed, config, as_found(seed, config))
    assert not result.failed, result.message
    verdict = outcome.trace_verdict
    assert verdict.actions.get("replication.become_leader", 0) > 0
    assert verdict.events_unchecked < verdict.events_checked / 20, verdict
    wide = [e.subject for e in outcome.trace if e.machine == "replication"
            and len(set(_ints(e.fields.get("replicas")))) > 3]
    assert wide, "no partition had more than three replicas: the seed no longer reaches it"


def _ints(value: object) -> list[int]:
    return [item for item in value if isinstance(item, int)] if isinstance(value, tuple) else []


def test_seed_15_a_replica_crashes_twice_across_a_restart_it_was_not_part_of() -> None:
    """Seed 15 of the default configuration (NOT_ENABLED): broker 1's dir holding t-1 failed;
    the broker crashed, restarted without t-1 (no RESTART reported for it) and crashed again,
    reporting a second CRASH of t-1. The model's crash needs a live replica: the replication
    abstraction now infers the restart it was not told of. (Reached by seed 30 on t-1@2 since
    the simulator's reassignments shrink and grow replica sets.)"""
    config = ClusterConfig(storage_broker=False)
    result, outcome = replay(30, config, as_found(30, config))
    assert not result.failed, result.message
    crashes = [e.event for e in outcome.trace
               if e.subject == "t-1@2" and e.event in ("CRASH", "RESTART")]
    assert any(a == b == "CRASH" for a, b in itertools.pairwise(crashes)), crashes


SEED_595_FAULTS = (
    "11:dir_failure:1:1,12:controller_expiry:1:57,37:partition:2:31,55:reassign:1:4525,"
    "70:clean_restart:2:7,75:controller_expiry:0:12,93:reassign:1:63780,95:clean_restart:1:4,"
    "145:controller_expiry:1:57,170:crash:2:8,172:clean_restart:0:5,176:reassign:1:33752")


def test_seed_595_an_uncleanly_restarted_isr_member_is_not_elected_over_a_clean_one() -> None:
    """Seed 595 of ``logproof fuzz --seeds 2000`` (NO_COMMITTED_LOSS), shrunk from 48 faults to
    12 without the storage broker. t-1's ISR is {2, 0} (broker 1's dir failed), leader 2, HW 56.
    Broker 2 (leader) crashes and loses its unflushed [53, 56); controller 0 dies in a clean
    restart before it handles the failure, so controller 1's failover finds every ISR member
    dead and keeps ISR {2, 0} with no leader. Both brokers register again and are started in one
    pass; the election takes the first live ISR member in replica order, broker 2, whose log
    ends at 53, while broker 0 (flushed) holds everything: broker 0 then truncates the
    acknowledged batch. Fixed as KIP-966 fixes it (spec/controller.md "Unclean shutdowns"):
    broker 2 registers with previous broker epoch -1 (no clean-shutdown marker), broker 0 with
    the epoch of an incarnation registered before the state's last write; the controller marks
    2 unclean in t-1 and elects 0, writing the ISR without 2."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=3, steps=200,
                           fault_probability=0.1, segment_bytes=1048576, storage_broker=False,
                           groups=False)  # (recorded before the simulator ran groups)
    result, outcome = replay(595, config, parse_faults(SEED_595_FAULTS))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message


@pytest.mark.parametrize(("seed", "config"), [
    (71, ClusterConfig(brokers=3, log_dirs=2, partitions=2, steps=200, fault_probability=0.1,
                       segment_bytes=600, chunk_bytes=150)),
    (311, ClusterConfig(brokers=3, log_dirs=2, partitions=2, steps=200, fault_probability=0.1,
                        segment_bytes=1048576, chunk_bytes=150, network_faults=False)),
    (414, ClusterConfig(brokers=3, log_dirs=2, partitions=1, steps=200, fault_probability=0.1,
                        segment_bytes=1048576, chunk_bytes=65536)),
])
def test_a_stale_leader_is_not_held_to_what_a_later_epoch_did(seed: int,
                                                              config: ClusterConfig) -> None:
    """Seeds 71 (LOG_MATCHING), 311 and 414 (NO_COMMITTED_LOSS) of ``logproof fuzz --seeds
    2000`` once reassignments began to shrink and grow replica sets: checker false alarms. A
    leader of an older epoch (removed from the replica set, or cut off, and not told yet) was
    judged as the current leader: in 71 its ISR still named a replica the controller had since
    deleted and created again empty in a later epoch; in 311 and 414 the leader of the later
    epoch had crashed and the stale one lacked what that one acknowledged with another ISR
    (every acknowledged batch was on the ISR's survivors; the end-of-run check found them).
    LOG_MATCHING now skips members that follow a later epoch, NO_COMMITTED_LOSS checks the
    leader of ZooKeeper's epoch once it leads."""
    result, outcome = replay(seed, config, as_found(seed, config))
    assert not result.failed, result.message
    assert outcome.violation is None, outcome.violation


#: Shrunk from seed 0 of the default run with the KIP-966 rule planted away (conformance.plants
#: ``uncleanly_restarted_member_elected``): the crash of the last live in-sync copy.
LAST_COPY_FAULTS = "107:crash_last_copy:0:242,190:crash:1:16,207:crash_last_copy:0:233"
#: (found before the admin workload, which moves the interleaving: left out)
LAST_COPY_CONFIG = ClusterConfig(steps=221, storage_broker=False, groups=False, admin=False)


def test_the_crash_of_the_last_live_in_sync_copy_keeps_every_acknowledged_batch() -> None:
    """``crash_last_copy`` (docs/conformance.md): a fellow ISR member stops cleanly, then the
    broker crashes losing its unflushed tail. The controller bars the crashed member when it
    registers again (previous broker epoch -1) and waits for, then elects, the one that kept
    its log."""
    result, outcome = replay(0, LAST_COPY_CONFIG, parse_faults(LAST_COPY_FAULTS))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    assert isinstance(outcome, ClusterOutcome)
    assert outcome.faults_skipped == 0, "the schedule no longer reaches its interleaving"


def test_electing_the_uncleanly_restarted_member_loses_an_acknowledged_batch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same schedule with the rule taken away (ZooKeeper-era Kafka): the check fails."""
    monkeypatch.setattr(Controller, "_barred", lambda self, tp, isr: frozenset())
    _result, outcome = replay(0, LAST_COPY_CONFIG, parse_faults(LAST_COPY_FAULTS))
    assert outcome.violation is not None
    assert outcome.violation.invariant == "NO_COMMITTED_LOSS", outcome.violation


#: Seed 5093 of ``logproof fuzz --seeds 20000`` shrunk without the storage broker (of its 81
#: faults): 11 that fail as found (COMMITTED_DURABLE at broker 2's BECOME_LEADER of
#: __consumer_offsets-0, 150 steps), and 6 that fail end to end (NO_COMMITTED_LOSS on t-0, 166
#: steps). Each ends with the lossy crash the simulator now skips.
SEED_5093_SCHEDULES = {
    "committed_durable": (150, (
        "5:crash_last_copy:1:86,25:partition:2:31,28:connection_loss:2:444,"
        "47:clean_restart:2:3,68:crash:0:13,74:partition:2:22,82:session_expiry:1:6,"
        "97:connection_loss:2:478,112:crash_last_copy:1:213,128:crash:0:16,146:crash:2:17")),
    "no_committed_loss": (166, (
        "68:crash:0:13,82:session_expiry:1:6,97:connection_loss:2:478,"
        "112:crash_last_copy:1:213,128:crash:0:16,146:crash:2:17")),
}


@pytest.mark.parametrize("schedule", sorted(SEED_5093_SCHEDULES))
def test_seed_5093_a_lossy_crash_spares_the_last_intact_member_of_a_stale_isr(
        schedule: str) -> None:
    """Seed 5093 (COMMITTED_DURABLE at broker 2's BECOME_LEADER of __consumer_offsets-0), a
    fault the model does not promise to survive: broker 2 won the controller's term as its
    ZooKeeper connection dropped (the reply lost, the connection down and flapping), so no
    controller acted while broker 1 (``crash_last_copy``) and then 0 (``crash``) crashed
    uncleanly and came back; ZooKeeper's ISR {1, 2, 0} still named them (leader 2's connection
    was down too), so the cluster looked healthy and ``crash`` struck 2, the last member that
    had lost nothing: three unclean shutdowns, where KIP-966 promises
    ``min.insync.replicas`` - 1. The next controller rightly barred 0 and 1 and, 2 back short,
    elected it. A lossy crash now also needs another ISR member that lost no tail since it last
    joined the ISR: the schedule's last fault, that crash, is skipped (the run is the one
    without it)."""
    steps, faults = SEED_5093_SCHEDULES[schedule]
    # (recorded before the simulator parked delayed fetches: they move the interleaving)
    config = ClusterConfig(delayed_fetches=False, fetch_rounds=False,
                           brokers=3, log_dirs=2, partitions=3, steps=steps,
                           fault_probability=0.1, chunk_bytes=150, storage_broker=False)
    planned = parse_faults(faults)
    assert planned[-1] == ClusterFault(146, "crash", 2, 17)
    result, outcome = replay(5093, config, planned)
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    assert isinstance(outcome, ClusterOutcome)
    assert outcome.faults_skipped == 1, "the schedule no longer reaches its interleaving"
    _result, without = replay(5093, config, planned[:-1])
    assert without.trace_digest == outcome.trace_digest, "another fault was skipped"


def test_a_lossy_crash_needs_another_isr_member_that_lost_no_tail() -> None:
    """The guard of ``crash`` and ``dir_failure`` itself: ZooKeeper's ISR {all} with every other
    member of an ISR holding the broker marked as having lost its tail (a stale ISR) refuses
    the crash; one intact other member allows it."""
    world = ClusterWorld(0, ClusterConfig(storage_broker=False, admin=False), lambda _: None)
    for _ in range(40):
        world.clock.advance_ns(1_000_000)
        world.pump()
    assert world.healthy(), "the cluster did not settle before the workload"
    tp = world.tps[0]
    others = [b for b in range(3) if b != 2]
    world.tail_lost.update((b, tp) for b in others)
    world.inject(ClusterFault(0, "crash", 2, 5), 0)
    assert world.faults_skipped == 1
    assert world.brokers[2].alive
    world.tail_lost.discard((others[0], tp))
    world.inject(ClusterFault(0, "crash", 2, 5), 0)
    assert world.faults_skipped == 1
    assert not world.brokers[2].alive


#: Seed 301's plan when it was found (its crash_last_copy faults were drawn differently then).
SEED_301_FAULTS = (
    "20:crash:0:10,22:unreadable_at_startup:3:2,33:dir_read_only:3:0,37:crash_mid_operation:3:12,"
    "41:crash_last_copy:1:92,47:crash_in_swap:3:6,50:clean_restart:1:5,55:torn_middle:3:42346,"
    "65:dir_repaired:3:0,73:dir_repaired:3:0,81:crash:1:19,86:torn_middle:3:35430,"
    "99:session_expiry:1:8,104:partition:0:11,104:torn_middle:3:27891,108:crash:1:11,"
    "113:torn_middle:3:8448,114:crash_last_copy:0:85,123:crash_last_copy:0:34,133:crash:3:0,"
    "140:crash:3:0,142:clean_restart:1:9,150:file_failure:3:4274,157:crash_last_copy:1:54,"
    "159:crash_mid_operation:3:14,159:dir_repaired:3:0,164:crash_last_copy:1:144,"
    "166:crash_last_copy:1:162,167:dir_repaired:3:0,168:controller_expiry:2:26,"
    "176:dir_read_errors:3:0,177:dir_repaired:3:0,185:dir_repaired:3:0,196:torn_tail:3:0")
#: Seed 326's plan when it was found (the default plan drew session expiries then).
SEED_326_FAULTS = (
    "3:session_expiry:2:3,16:file_failure:3:19568,31:disk_full:3:290,31:reassign:0:56420,"
    "40:controller_expiry:0:54,46:session_expiry:0:6,49:session_expiry:1:5,58:torn_tail:3:0,"
    "80:torn_tail:3:0,93:dir_repaired:3:0,107:crash:3:0,134:crash_in_swap:3:6,"
    "145:crash_mid_operation:3:30,167:dir_repaired:3:0,177:crash_last_copy:1:84")


def test_seed_301_two_clean_restarts_in_a_row_keep_the_member_trusted() -> None:
    """Seed 301 of ``logproof fuzz --seeds 2000`` once the default fault model drew
    ``crash_last_copy`` (NO_COMMITTED_LOSS): t-0's ISR {0, 2}; broker 2 stopped cleanly and 0
    crashed losing its tail, both came back and at once the same again. The controller missed
    broker 2's middle incarnation, so a registration naming only the previous incarnation
    (KIP-966's PreviousBrokerEpoch) made 2 look unclean too; with every member marked, the
    controller elected 0, the short log. The registration now names the incarnation since
    which every shutdown was clean: 2 reaches back to the one the controller saw."""
    # (recorded before the simulator ran groups: their traffic changes the interleaving)
    drawn = swarm_config(301, brokers=3, log_dirs=2, steps=200)
    assert isinstance(drawn, ClusterConfig)
    config = dataclasses.replace(drawn, groups=False)
    result, outcome = replay(301, config, parse_faults(SEED_301_FAULTS))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message


def test_seed_326_a_late_election_precedes_its_later_leaders() -> None:
    """Seed 326 of the same campaign once the default fault model drew ``session_expiry``
    (LEADER_UNIQUE, a false alarm of the trace checker): broker 1's session expired while the
    controller's LeaderAndIsr of epoch 2 (broker 1 leading) was on its way; the controller
    failed it and elected broker 2 in epoch 3, then the delayed request made broker 1 leader of
    epoch 2. The abstraction replays such a late election from the ISR it carries; it now shows
    the leaders of later epochs OFFLINE in that replay instead of merging epoch 3 into 2."""
    drawn = swarm_config(326, brokers=3, log_dirs=2, steps=200)
    assert isinstance(drawn, ClusterConfig)
    config = dataclasses.replace(drawn, groups=False)
    result, outcome = replay(326, config, parse_faults(SEED_326_FAULTS))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    # Since the controller drops the requests queued for a broker it holds dead (Kafka's
    # removeBroker; fuzz seed 11608), only the one in flight may arrive late, and this schedule
    # no longer delivers a late election: the checker's fix is held to the trace of the run
    # that found it by the test below.


def test_seed_326_trace_a_late_election_conforms() -> None:
    """Seed 326's checker fix, held to the trace its schedule produced before the controller
    dropped a dead broker's queued requests (``traces/seed326.jsonl.gz``): t-1's late election
    (broker 1 leading epoch 2 after broker 2 led epoch 3) conforms."""
    from conformance import replication_abstraction
    from conformance.trace_check import check_trace

    trace = _saved_trace("seed326", 1098)
    verdict = check_trace(trace, replication_abstraction.abstractions())
    assert verdict.violation is None, verdict.violation
    late = _late(trace, "BECOME_LEADER", seen=("BECOME_LEADER",))
    assert late == ["t-1@1"], late


#: Seed 48's schedule once the default plan drew ``session_expiry`` (``faults-session``),
#: shrunk by ``logproof fuzz``; seed 1142's as drawn then (the same case on t-1).
SEED_48_FAULTS = ("121:session_expiry:1:4,122:clean_restart:1:6,161:partition:1:32,"
                  "184:clean_restart:0:9,186:session_expiry:1:14")
SEED_1142_FAULTS = (
    "7:dir_repaired:3:0,9:unreadable_at_startup:3:2,10:session_expiry:2:2,17:partition:2:17,"
    "24:crash_last_copy:2:222,25:crash_mid_operation:3:21,31:clean_restart:1:3,"
    "33:session_expiry:2:8,34:redirect_off_failing:3:40675,50:crash_mid_operation:3:15,"
    "57:session_expiry:2:18,61:fail_after_swap:3:21493,65:dir_repaired:3:0,67:dir_failure:2:1,"
    "68:crash_in_swap:3:6,68:file_failure_at_restart:3:16792,69:controller_expiry:1:53,"
    "88:disk_full:3:20033,88:session_expiry:0:4,94:crash:1:10,108:crash:1:10,"
    "109:partition:2:40,110:session_expiry:0:2,115:dir_read_only:3:2,116:partition:0:38,"
    "118:partition:0:29,120:file_failure:3:53025,142:controller_expiry:0:33,"
    "142:session_expiry:2:13,147:dir_repaired:3:0,150:torn_middle:3:51402,160:partition:2:9,"
    "171:session_expiry:0:11,177:torn_middle:3:14115,182:dir_repaired:3:0,"
    "186:crash_last_copy:2:138,189:dir_read_errors:3:1,192:crash:3:0,193:crash_in_swap:3:1")


@pytest.mark.parametrize(("seed", "steps", "faults"), [
    (48, 195, SEED_48_FAULTS),
    (1142, 200, SEED_1142_FAULTS),
])
def test_a_late_election_precedes_what_later_epochs_committed(seed: int, steps: int,
                                                               faults: str) -> None:
    """Seed 48 of ``logproof fuzz --seeds 2000`` once the default fault model drew
    ``session_expiry`` (COMMITTED_DURABLE, a false alarm of the trace checker; its shrunk
    schedule): broker 0, leader of t-0, stopped; the controller elected broker 1 in epoch 2
    (ISR 1, 2), but broker 1's session expired before the LeaderAndIsr reached it, so the
    controller elected broker 2 alone in epoch 3, which committed offsets 113-116 that broker 1
    never had. The delayed request, addressed to broker 1's unchanged broker epoch, then made
    it leader of epoch 2 (as in Kafka, whose broker keeps its epoch until it registers again;
    epoch 3's followers and ZooKeeper's zkVersion fence it). The abstraction replayed that
    election against the present committed prefix, epoch 3's included; it now replays it
    against the prefix committed before any later epoch was revealed. Seed 1142: the same on
    t-1 (broker 2 elected in epoch 2, its session expired, broker 0 alone in epoch 3)."""
    drawn = swarm_config(seed, brokers=3, log_dirs=2, steps=200)
    assert isinstance(drawn, ClusterConfig)
    # (recorded before the simulator ran its admin workload and DeleteRecords client: their
    # traffic moves the interleaving)
    # (recorded before the simulator parked delayed fetches: they move the interleaving)
    config = dataclasses.replace(drawn, delayed_fetches=False, fetch_rounds=False,
                                 steps=steps, admin=False,
                                 delete_records=False)
    result, outcome = replay(seed, config, parse_faults(faults))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    late = _late(outcome.trace, "BECOME_LEADER", seen=("BECOME_LEADER", "BECOME_FOLLOWER"))
    assert late, "the seed no longer reaches a late election after a later epoch"


#: Seed 67 of ``logproof conformance run --partitions 1 --steps 200 --fault-probability 0.1
#: --segment-bytes 600`` once session expiries, the admin workload and the DeleteRecords client
#: were drawn together, shrunk without the storage broker.
SEED_67_FAULTS = ("23:partition:1:38,31:session_expiry:0:7,51:partition:0:16,"
                  "65:session_expiry:2:16")


def test_seed_67_a_late_follower_is_not_held_to_the_isr_its_request_carries() -> None:
    """Seed 67 (COMMITTED_DURABLE, a false alarm of the trace checker): broker 1 was cut off
    while the controller elected broker 2 in epoch 1 of ``__consumer_offsets-1`` (ISR 2, 1). In
    that epoch broker 2 added broker 0, removed broker 1 and committed offsets 1-3 with ISR 2, 0;
    then its session expired and the controller elected broker 0 alone in epoch 2. The delayed
    LeaderAndIsr of epoch 1 then made broker 1 (log end 1) a follower of broker 2, as Kafka
    does (a higher epoch than its own). The abstraction replayed that late BECOME_FOLLOWER
    with the stale ISR the request carries (broker 1 in it) and the present committed prefix:
    an ISR member missing committed records. It now replays it as ZooKeeper last held its
    epoch: the leader's latest ISR of that epoch and the prefix committed before a later epoch
    was revealed."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=1, steps=73,
                           fault_probability=0.1, segment_bytes=600, storage_broker=False)
    result, outcome = replay(67, config, parse_faults(SEED_67_FAULTS))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    late = _late(outcome.trace, "BECOME_FOLLOWER", seen=("BECOME_LEADER", "BECOME_FOLLOWER"))
    assert "__consumer_offsets-1@1" in late, late


#: Seed 67's whole schedule (the shipped run above, 200 steps) shrunk once the late follower
#: was replayed right, without the storage broker.
SEED_67_EPOCH_CACHE_FAULTS = (
    "2:session_expiry:0:8,18:session_expiry:2:20,23:partition:1:38,31:session_expiry:0:7,"
    "51:partition:0:16,65:session_expiry:2:16,77:crash_last_copy:1:21")


def test_seed_67_a_leader_that_wrote_nothing_keeps_the_older_epoch_it_followed() -> None:
    """Seed 67 again (COMMITTED_DURABLE), an implementation bug: broker 0 led t-0 in epoch 3
    from offset 11 and wrote nothing (its leader-epoch cache: epoch 3 at 11); deposed, it
    followed broker 1 in epoch 4 and fetched 11-12, written by broker 1 in epoch 2. The cache
    ignored the epoch-2 batch (older than its latest entry), so broker 0, leader of epoch 7
    after a restart, answered OffsetsForLeaderEpoch(2) with epoch 1 ending at 11, and broker
    2, holding the same 11-12, truncated them (committed: with the follower in the ISR and the
    leader lost before it fetched them again, they would have been lost; the abstraction,
    learning the leader's log from the answer, saw the leader without them). Kafka's
    ``LeaderEpochFileCache.assign`` drops the entries starting at or after an appended
    batch's offset; the cache does so now, and answers epoch 2 ending at 13."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=1, steps=84,
                           fault_probability=0.1, segment_bytes=600, storage_broker=False)
    result, outcome = replay(67, config, parse_faults(SEED_67_EPOCH_CACHE_FAULTS))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    events = [e for e in outcome.trace
              if e.machine == "replication" and e.subject.startswith("t-0@")]
    elected_empty = {(e.subject, e.fields.get("leader_epoch"), e.fields.get("log_end_offset"))
                     for e in events if e.event == "BECOME_LEADER"}
    older_after = [
        e for e in events if e.event == "LEADER_APPEND" and any(
            subject != e.subject and isinstance(epoch, int) and isinstance(leo, int)
            and _epoch(e.to_json()) < epoch and e.fields.get("base_offset") == leo
            for subject, epoch, leo in elected_empty)]
    assert older_after, "no older epoch's records where a leader wrote nothing: not reached"
    assert not [e.fields for e in events if e.event == "TRUNCATE" and e.subject == "t-0@2"]


#: Seed 843 of ``logproof fuzz --seeds 2000`` (its swarm config), shrunk without the storage
#: broker.
SEED_843_FAULTS = (
    "1:clean_restart:1:7,9:dir_failure:0:1,11:crash_last_copy:1:250,14:partition:1:13,"
    "18:crash_last_copy:2:101,20:partition:2:39,21:crash_last_copy:2:100,41:crash:2:18,"
    "43:clean_restart:2:10,46:clean_restart:0:6,48:crash_last_copy:1:29,"
    "49:crash_last_copy:0:140,50:crash_last_copy:0:142,62:partition:1:8,"
    "67:session_expiry:0:2,73:crash_last_copy:2:216,77:partition:1:34,85:reassign:2:30169,"
    "111:controller_expiry:0:38,119:crash_last_copy:0:19,124:clean_restart:0:9,"
    "126:reassign:2:22886,127:crash:1:11,134:crash_last_copy:1:186,140:crash_last_copy:1:192,"
    "144:clean_restart:1:9,153:reassign:0:24158,162:partition:2:23,172:crash_last_copy:0:126,"
    "178:crash:0:5,181:session_expiry:0:18")


def test_seed_843_a_late_follower_truncates_against_its_deposed_leader() -> None:
    """Seed 843 (NO_COMMITTED_LOSS, a false alarm of the trace checker, met once seed 67's late
    follower was replayed right): broker 0's session expired with the LeaderAndIsr of t-2's
    epoch 9 (broker 0 leading, log end 12) on its way; broker 2 led epochs 10 and 12 alone and
    committed offset 12. The delayed requests then made broker 0 leader of epoch 9 and broker 1
    (log end 13, offset 12 fetched from broker 2) its follower, which truncated to 12 on the
    deposed leader's answer, as Kafka's would (offset 12 lives on broker 2, the current
    leader). The abstraction replayed that TRUNCATE with the deposed leader as ZooKeeper's and
    the present committed prefix; it replays it as epoch 9 last stood now."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=3, steps=189,
                           fault_probability=0.1, segment_bytes=600, chunk_bytes=65536,
                           storage_broker=False)
    result, outcome = replay(843, config, parse_faults(SEED_843_FAULTS))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    # Since seed 7829's fix (a follower joins the ISR only on its own fetch) this schedule runs
    # otherwise and no late follower truncates; the checker's fix is held to the trace of the
    # run that found it by the test below.


def test_seed_843_trace_a_late_follower_truncating_against_its_deposed_leader_conforms() -> None:
    """Seed 843's checker fix, held to the trace the run produced when it was found: the
    shrunk schedule above no longer reaches the late truncation (seed 7829's fix changed the
    interleaving), so the trace it gave then is kept (``traces/seed843.jsonl.gz``, 1,544 events)
    and replayed in the replication model. The late follower's TRUNCATE is replayed as its
    epoch last stood and conforms; replayed against the present committed prefix it was
    refused (NO_COMMITTED_LOSS)."""
    from conformance import replication_abstraction
    from conformance.trace_check import check_trace

    events = _saved_trace("seed843", 1544)
    checked = replication_abstraction.abstractions()
    verdict = check_trace(events, checked)
    assert verdict.violation is None, verdict.violation
    inferred = checked[0].inferred  # type: ignore[attr-defined]
    assert inferred["TRUNCATE after a later epoch: as its epoch last stood"] > 0, inferred


#: Seed 2081 of ``logproof fuzz`` (STATE_MISMATCH), shrunk.
SEED_2081_FAULTS = (
    "23:crash:1:17,24:torn_tail:3:0,60:reassign:0:14981,67:partition:0:10,"
    "75:fail_after_swap:3:58741,75:partition:2:20,88:partition:2:22,99:dir_repaired:3:0,"
    "106:session_expiry:0:15,110:crash:1:16,113:clean_restart:2:8,114:dir_read_errors:3:1,"
    "115:crash_last_copy:0:97,116:crash:1:8,128:session_expiry:2:20,132:session_expiry:1:19,"
    "136:clean_restart:2:7")


def test_seed_2081_an_epoch_entry_dropped_by_recovery_stays_dropped() -> None:
    """Seed 2081 (STATE_MISMATCH), an implementation bug: broker 2 became leader of t-1's
    epoch 4 (its LeaderAndIsr delivered after epoch 5's) at log end 18 and wrote nothing (its
    cache: epoch 3 at 16, epoch 4 at 18); it crashed, and loading the log dropped the empty
    epoch's entry in memory only. Following broker 1 in epoch 6, it fetched 18-19, written in
    epoch 3 (the cache already ended with epoch 3: nothing rewritten). After a clean restart
    the checkpoint brought epoch 4 at 18 back; following broker 0 in epoch 7, broker 2 asked
    for epoch 4, was answered epoch 3 ending at 20 and truncated to where its own epoch 3
    ended, 18: records both held, committed. Kafka's ``truncateFromEnd`` flushes the
    checkpoint, at load too; the load now persists the entries it drops, and broker 2 keeps
    18-19. (The offsets are the found run's; since a follower applies a late answer to an
    earlier fetch from its log end, the same schedule leads epoch 4 from 21 and keeps 21-22,
    so the test reads them from the trace.)"""
    # (recorded before the simulator parked delayed fetches: they move the interleaving)
    config = ClusterConfig(delayed_fetches=False, fetch_rounds=False,
                           brokers=3, log_dirs=2, partitions=2, steps=147,
                           fault_probability=0.1, segment_bytes=1048576, chunk_bytes=65536)
    result, outcome = replay(2081, config, parse_faults(SEED_2081_FAULTS))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    events = [e for e in outcome.trace
              if e.machine == "replication" and e.subject == "t-1@2"]
    led_empty = [(i, e.fields["log_end_offset"]) for i, e in enumerate(events)
                 if e.event == "BECOME_LEADER" and e.fields.get("leader_epoch") == 4]
    assert led_empty, "broker 2 never led epoch 4: not reached"
    led_at, led_from = led_empty[0]
    assert isinstance(led_from, int)
    crashes = [i for i, e in enumerate(events) if e.event == "CRASH" and i > led_at]
    assert len(crashes) >= 2, crashes  # the crash after leading, the restart after fetching
    # (between the two: following from where it led, without having written in epoch 4)
    assert [e for e in events[crashes[0]:crashes[1]] if e.event == "BECOME_FOLLOWER"
            and e.fields.get("log_end_offset") == led_from], "not following from there"
    followed_past = [e for e in events[crashes[1]:]
                     if e.event == "BECOME_FOLLOWER"
                     and e.fields.get("log_end_offset") == led_from + 2]
    assert followed_past, f"broker 2 did not come back holding {led_from}-{led_from + 1}"
    assert not [e.fields for e in events[crashes[1]:] if e.event == "TRUNCATE"]


#: Seed 4498 of ``logproof fuzz`` (its swarm config: one partition, fault probability 0.05,
#: 600-byte segments), shrunk.
SEED_4498_FAULTS = (
    "22:crash_last_copy:1:169,23:controller_expiry:2:46,37:partition:0:6,38:crash_in_swap:3:5,"
    "72:clean_restart:0:6,73:dir_read_only:3:1,73:torn_tail:3:0,81:reassign:0:43266,"
    "84:session_expiry:2:11,86:crash:3:0,86:partition:0:31,87:crash_last_copy:1:234,"
    "88:controller_expiry:0:7,88:fail_after_swap:3:16750,93:redirect_off_failing:3:23239,"
    "97:session_expiry:1:8,103:crash:3:0,124:clean_restart:0:9,125:dir_failure:3:2,"
    "125:file_failure:3:32161")


def test_seed_4498_a_leader_that_wrote_nothing_drops_its_empty_epoch_above_its_own() -> None:
    """Seed 4498 (COMMITTED_DURABLE), an implementation bug seed 67's fix left: broker 1 held
    t-0's epoch-2 records from offset 33 up to 39, led epoch 4 from 39 and wrote nothing
    (its cache: epoch 2 at 33, epoch 4 at 39); deposed, it followed broker 0 in epoch 5 and
    fetched 39-42, epoch-2 records broker 0 led and committed. The cache dropped the empty
    epoch 4 only when no entry of the appended epoch was left below it, so broker 1, leader of
    epoch 6 from 43, answered OffsetsForLeaderEpoch(2) with 39 and broker 2, holding the same
    39-42, truncated them (committed: an ISR member doing so loses them with the leader; the
    abstraction, learning the leader's log from the answer, saw the leader without them). The
    cache now drops every entry at or after an appended batch, as Kafka's
    ``LeaderEpochFileCache.assign``, and answers epoch 2 ending at 43."""
    # (recorded before the simulator parked delayed fetches: they move the interleaving)
    config = ClusterConfig(delayed_fetches=False, fetch_rounds=False,
                           brokers=3, log_dirs=2, partitions=1, steps=127,
                           fault_probability=0.05, segment_bytes=600)
    result, outcome = replay(4498, config, parse_faults(SEED_4498_FAULTS))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    events = [e for e in outcome.trace
              if e.machine == "replication" and e.subject.startswith("t-0@")]
    led = [(e.fields.get("leader_epoch"), e.fields.get("log_end_offset")) for e in events
           if e.event == "BECOME_LEADER" and e.subject == "t-0@1"]
    # broker 1 led an epoch from 39 without writing in it, then led again from 43
    assert (4, 39) in led, led
    assert (6, 43) in led, led
    assert not [e for e in events if e.event == "LEADER_APPEND" and e.subject == "t-0@1"
                and e.fields.get("leader_epoch") == 4]
    again = next(i for i, e in enumerate(events)
                 if e.event == "BECOME_LEADER" and e.subject == "t-0@1"
                 and e.fields.get("leader_epoch") == 6)
    assert not [e.fields for e in events[again:]
                if e.event == "TRUNCATE" and e.subject == "t-0@2"]


#: Seed 2187 of ``logproof fuzz`` (its default run: ``--partitions 3 --steps 200
#: --fault-probability 0.1 --segment-bytes 600 --chunk-bytes 150``), shrunk without the storage
#: broker.
SEED_2187_FAULTS = (
    "48:crash:1:3,48:session_expiry:2:12,98:partition:1:31,108:session_expiry:0:16,"
    "117:controller_expiry:1:29,124:session_expiry:1:11,145:session_expiry:0:17")


def test_seed_2187_a_leader_that_wrote_nothing_drops_its_epoch_for_the_one_it_continued() -> None:
    """Seed 2187 (LOG_MATCHING), an implementation bug, the rest of seed 67's: broker 1 held
    t-1's epoch-1 records up to 24; a LeaderAndIsr of epoch 2 delayed past epoch 3 made it
    leader from 25 (its cache: epoch 2 at 25), and it wrote nothing. Following broker 2 in
    epoch 3, it fetched offset 25, written by broker 0 in epoch 1 and committed by broker 2
    (HW 26). The cache kept epoch 2: the fix of seed 67 dropped the entries starting at or
    after an appended batch only when the entry left below them was of an older epoch than
    the batch's, not of the batch's own. In epoch 4 broker 1, in the ISR, asked for epoch 2,
    heard epoch 1 ending at 26, and truncated to 25, where its own epoch 1 "ended": an ISR
    member without a committed record.
    Kafka's ``LeaderEpochFileCache.assign`` drops epoch 2 there; the cache does so now, and
    keeps epoch 1's entry as it was."""
    # (recorded before followers sent rounds: one request per leader at a time moves the
    # interleaving)
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=3, steps=149,
                           fault_probability=0.1, segment_bytes=600, chunk_bytes=150,
                           storage_broker=False, fetch_rounds=False)
    result, outcome = replay(2187, config, parse_faults(SEED_2187_FAULTS))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    events = [e for e in outcome.trace
              if e.machine == "replication" and e.subject.startswith("t-1@")]

    def leo(event: TraceEvent) -> int:
        value = event.fields.get("log_end_offset")
        return value if isinstance(value, int) else -1

    # (replica, epoch, LEO) of a leader elected at the offset where another leader wrote an
    # older epoch's record, which it held later, following a newer epoch
    continued = [
        (e.subject, _epoch(e.to_json()), leo(e)) for e in events
        if e.event == "BECOME_LEADER" and leo(e) >= 0
        and any(other.event == "LEADER_APPEND" and other.subject != e.subject
                and _epoch(other.to_json()) < _epoch(e.to_json())
                and other.fields.get("base_offset") == leo(e) for other in events)
        and any(later.event == "BECOME_FOLLOWER" and later.subject == e.subject
                and _epoch(later.to_json()) > _epoch(e.to_json()) and leo(later) > leo(e)
                for later in events)]
    assert continued, "no leader that wrote nothing then followed an older epoch's records there"
    for subject, _, led_from in continued:
        for event in events:
            if event.event == "TRUNCATE" and event.subject == subject:
                to, end = event.fields.get("truncated_to"), event.fields.get("log_end_offset")
                assert isinstance(to, int)
                assert isinstance(end, int)
                assert not to <= led_from < end, event.fields


def test_seed_130_a_coordinator_deposed_by_a_later_epoch_answers_from_its_cache() -> None:
    """Seed 130 of the default run once groups met ``session_expiry`` (COORDINATOR_LOADED in
    the trace, OFFSETS_DURABLE end to end; a false alarm of both checks; its shrunk schedule):
    broker 1 led ``__consumer_offsets-0`` in epoch 0 and coordinated group-0 when its session
    expired; the controller elected broker 2 in epoch 1, which loaded the group and
    acknowledged a commit of t-0. Broker 1, its LeaderAndIsr not arrived, still owned the
    partition and answered the static member (which kept it as coordinator) from its cache,
    without that commit, as Kafka's coordinator does until a LeaderAndIsr changes its
    ``ownedPartitions``. The checks excuse a stale answer of a leader deposed by a later epoch
    (ZooKeeper's, or a later coordinator's election in the trace) and no other."""
    # (recorded before the simulator parked delayed fetches: they move the interleaving)
    config = ClusterConfig(delayed_fetches=False, fetch_rounds=False, steps=48)
    result, outcome = replay(130, config, parse_faults("27:session_expiry:1:18"))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    newest = -1  # (group-0's offsets partition is __consumer_offsets-0)
    acked: dict[tuple[str, int], int] = {}
    stale = []
    for event in outcome.trace:
        if event.machine != "group_coordinator":
            continue
        fields = event.fields
        epoch = fields.get("leader_epoch")
        offsets: Any = fields.get("offsets", ())
        if event.event == "COORDINATOR_ELECTED" and isinstance(epoch, int) and \
                event.subject.startswith("__consumer_offsets-0@"):
            newest = max(epoch, newest)
        elif event.subject != "group-0":
            continue
        elif event.event == "OFFSET_COMMITTED":
            acked.update({(topic, index): offset for topic, index, offset in offsets})
        elif event.event == "OFFSET_FETCHED" and isinstance(epoch, int) and epoch < newest:
            answered = {(topic, index): offset for topic, index, offset in offsets}
            if any(answered.get(slot, -1) < value for slot, value in acked.items()):
                stale.append(fields["broker"])
    assert stale == [1], "the seed no longer reaches a stale answer of a deposed coordinator"


#: Seed 7829 of ``logproof fuzz`` (``--partitions 3 --fault-probability 0.05 --chunk-bytes
#: 150``), shrunk (seed 8630 is the same bug on ``__consumer_offsets-0``).
SEED_7829_FAULTS = (
    "16:partition:0:16,18:crash:3:0,29:file_failure_at_restart:3:34121,31:clean_restart:0:10,"
    "105:partition:2:31,111:dir_failure:0:0,138:crash_last_copy:0:224,140:fail_after_swap:3:53880,"
    "141:controller_expiry:0:23,141:crash_mid_operation:3:24,144:crash_last_copy:1:204,"
    "151:session_expiry:0:15")


def _joined_without_a_fetch(trace: Iterable[TraceEvent]) -> list[tuple[str, int]]:
    """(leader's subject, replica) for each ISR_EXPAND adding a replica from which that leader
    had no fetch since its previous ISR change (or since it took the lead)."""
    found: list[tuple[str, int]] = []
    isr: dict[str, tuple[int, ...]] = {}
    fetched: dict[str, set[int]] = {}
    for event in trace:
        if event.machine != "replication":
            continue
        subject, fields = event.subject, event.fields
        if event.event == "BECOME_LEADER":
            isr[subject] = tuple(fields.get("isr") or ())  # type: ignore[arg-type]
            fetched[subject] = set()
        elif event.event == "FOLLOWER_FETCH":
            fetched.setdefault(subject, set()).add(fields["replica"])  # type: ignore[arg-type]
        elif event.event in ("ISR_EXPAND", "ISR_SHRINK"):
            new: tuple[int, ...] = tuple(fields["isr"])  # type: ignore[arg-type]
            if event.event == "ISR_EXPAND":
                found += [(subject, b) for b in new if b not in isr.get(subject, ())
                          and b not in fetched.get(subject, set())]
            isr[subject], fetched[subject] = new, set()
    return found


def test_seed_7829_a_follower_joins_the_isr_only_on_its_own_fetch() -> None:
    """Seed 7829 (COMMITTED_DURABLE; seed 8630 the same), an implementation bug: the leader's
    ISR check let any follower outside the ISR join whose LEO, recorded at its last fetch,
    reached the HW, at every check, not only when it fetched. A follower the lag rule had just
    removed (it stopped fetching: crashed, or its dir failed) was re-added at the next check and
    removed again, the ISR flapping in ZooKeeper. Broker 2 led t-2 (HW 19); broker 0's replica,
    offline, flapped. Broker 0 stopped, broker 1 (the controller) crashed and lost its unflushed
    12-18; it registered again, a flap rewrote t-2's state after that (still naming it), so
    broker 0's failover took it as vouched for, not as an unclean restart, and its LeaderAndIsr
    left it in the ISR with 12 records of 19 (were broker 2 to fail, it could be elected).
    Kafka calls ``maybeExpandIsr`` only from the follower's own fetch; the leader now does the
    same, the periodic check only shrinks."""
    # (recorded before followers sent rounds: one request per leader at a time moves the
    # interleaving)
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=3, steps=161,
                           fault_probability=0.05, chunk_bytes=150, fetch_rounds=False)
    result, outcome = replay(7829, config, parse_faults(SEED_7829_FAULTS))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    assert not _joined_without_a_fetch(outcome.trace)
    crashed = [e for e in outcome.trace if e.machine == "replication"
               and e.subject == "t-2@1" and e.event == "CRASH"]
    assert crashed, "broker 1's replica of t-2 never crashed: not reached"


#: Seed 8740 of ``logproof fuzz`` (its swarm config: one partition, fault probability 0.05,
#: 150-byte move chunks), shrunk.
SEED_8740_FAULTS = (
    "5:crash_last_copy:1:89,8:crash:1:14,23:crash_mid_operation:3:19,"
    "25:file_failure_at_restart:3:36144,38:crash:3:0,40:session_expiry:2:16,49:crash:3:0,"
    "51:partition:0:24,53:torn_middle:3:59343,55:dir_read_errors:3:0,70:controller_expiry:2:22,"
    "75:crash_mid_operation:3:18,97:controller_expiry:2:32,97:fail_after_swap:3:60049,"
    "102:clean_restart:0:2,103:clean_restart:0:10,106:session_expiry:2:18,110:crash:2:8,"
    "134:crash_last_copy:0:207,140:crash_last_copy:1:251,142:reassign:2:17238,"
    "144:dir_read_errors:3:2,148:partition:2:22,150:reassign:2:2885,171:crash_in_swap:3:3,"
    "175:partition:0:14,195:crash:1:5,199:fail_after_swap:3:5651")


def test_seed_8740_a_crashed_follower_truncates_its_own_record_back_from_the_crash() -> None:
    """Seed 8740 (COMMITTED_DURABLE), a checker error: broker 1 led __consumer_offsets-1's
    epoch 4 and wrote offset 8 (not committed), crashed; back as a follower of broker 2 in
    epoch 5 it truncated it, and broker 2 wrote 8 in epoch 5. The abstraction took broker 1's
    fetch from 8 to have brought that record; broker 1 crashed with the append in flight and
    the truncation unflushed, and came back holding its own offset 8 of epoch 4. Broker 2,
    leading epoch 6 from 9 without writing (committed with broker 0), answered
    OffsetsForLeaderEpoch(4) with 8 and broker 1, outside the ISR, truncated to 8. The
    abstraction cut broker 2's log to the answer though its BECOME_LEADER had reported 9, and saw
    the committed offset 8 gone; a reported LEO now stands, and the crashed follower's tail past
    the answer is its own."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=1, steps=200,
                           fault_probability=0.05, chunk_bytes=150)
    result, outcome = replay(8740, config, parse_faults(SEED_8740_FAULTS))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message


def test_seed_8740_trace_a_crashed_follower_truncating_its_own_record_conforms() -> None:
    """Seed 8740's checker fix, held to the trace its shrunk schedule produced when found (kept
    in ``traces/seed8740.jsonl.gz``): since seed 7829's fix (a follower joins the ISR only on
    its own fetch) the schedule runs otherwise. The trace reaches the case (broker 2 led epoch 6
    from 9; broker 1 truncated its offset 8 twice) and conforms; the checker before the fix
    refused it (COMMITTED_DURABLE)."""
    from conformance import replication_abstraction
    from conformance.trace_check import check_trace

    trace = _saved_trace("seed8740", 1396)
    verdict = check_trace(trace, replication_abstraction.abstractions())
    assert verdict.violation is None, verdict.violation
    events = [e for e in trace if e.machine == "replication"
              and e.subject.startswith("__consumer_offsets-1@")]
    led = [(e.fields.get("leader_epoch"), e.fields.get("log_end_offset")) for e in events
           if e.event == "BECOME_LEADER" and e.subject.endswith("@2")]
    assert (6, 9) in led, led
    truncations = [(e.fields.get("log_end_offset"), e.fields.get("truncated_to"),
                    e.fields.get("leader_epoch_end")) for e in events
                   if e.event == "TRUNCATE" and e.subject.endswith("@1")]
    # broker 1 truncated its offset 8 twice: once in epoch 5, again after the crash undid it
    assert truncations.count((9, 8, 8)) == 2, truncations


#: Seed 11892 of ``logproof fuzz`` (STATE_MISMATCH), shrunk.
SEED_11892_FAULTS = ("3:clean_restart:0:2,4:reassign:0:55405,80:clean_restart:2:5,"
                     "133:reassign:0:53557")


def test_seed_11892_a_replica_back_with_a_stale_log_truncates_it_all() -> None:
    """Seed 11892 (STATE_MISMATCH, a false alarm of the trace checker): broker 0 led t-0 in
    epoch 0, wrote 0-3 and stopped before any follower fetched them; broker 1 led epoch 1 from
    0, and a reassignment removed broker 0 while it was down, so no StopReplica deleted its log
    (as in ZooKeeper-era Kafka). Reassigned back in epoch 6, broker 0 asked for epoch 0, older
    than every entry of the leader's cache, heard (0, 0) and truncated to 0, as Kafka's
    ``endOffsetFor`` answers. The abstraction built the TRUNCATE with epochs 0 (broker 0's
    records), 2 and 5 (the leader's at its cuts) and 6, one more than the model's ranks, and
    merged the oldest two: broker 0's record looked like the leader's and the model kept it.
    Such a truncation is now built at the cuts that need the fewest epochs; a follower keeping
    its stale records is still refused."""
    # (recorded before the simulator parked delayed fetches: they move the interleaving)
    config = ClusterConfig(delayed_fetches=False, fetch_rounds=False,
                           brokers=3, log_dirs=2, partitions=1, steps=140,
                           fault_probability=0.1, segment_bytes=600, chunk_bytes=65536)
    result, outcome = replay(11892, config, parse_faults(SEED_11892_FAULTS))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    trace = list(outcome.trace)
    index = next((i for i, e in enumerate(trace)
                  if e.event == "TRUNCATE" and e.subject == "t-0@0"
                  and e.fields.get("log_end_offset") == 4
                  and e.fields.get("leader_epoch_end") == 0), None)
    assert index is not None, "broker 0 never truncated its stale log: not reached"
    assert trace[index].fields.get("truncated_to") == 0
    replicated = [e for e in trace[: index + 1] if e.machine == "replication"]
    kept = TraceEvent.of("replication", "TRUNCATE", "t-0@0", "FOLLOWER", "FOLLOWER",
                         **{**dict(trace[index].fields), "truncated_to": 4})
    violation = check_trace([*replicated[:-1], kept], abstractions()).violation
    assert violation is not None
    assert violation.index == len(replicated) - 1
    assert violation.kind == "state_mismatch"


#: Seed 4492 of ``logproof fuzz --seeds 20000`` (its default run, ``--partitions 2 --steps 200
#: --fault-probability 0.1 --chunk-bytes 150``; STATE_MISMATCH), shrunk to 4 of its 80 faults.
SEED_4492_FAULTS = ("42:session_expiry:1:20,47:controller_expiry:1:30,49:clean_restart:0:5,"
                    "62:session_expiry:2:14")


def test_seed_4492_a_deposed_leader_truncates_what_it_wrote_after_its_epoch() -> None:
    """Seed 4492 (STATE_MISMATCH, a false alarm of the trace checker): broker 1 led
    ``__consumer_offsets-0`` in epoch 0 and, its session expired, went on writing offset 4 in
    epoch 0 after broker 2 took the lead of epoch 1 at 4 and wrote its own offset 4 (as in
    ZooKeeper-era Kafka, nothing the deposed leader writes can commit). Broker 2 led epoch 2
    alone, broker 0 epoch 3; told at last, broker 1 asked for epoch 0, heard 4 (the start of
    epoch 1 in broker 0's cache) and truncated its record, as Kafka's ``endOffsetFor``
    answers. Built at the cuts needing the fewest epochs, the TRUNCATE still met four: the
    records' 0 and 1, broker 2's 2 (deposed, not told yet, still a leader) and 3; the oldest
    two merged, broker 1's epoch-0 record looked like the leader's epoch-1 one and the model
    kept it. A deposed leader the event is not about is now shown OFFLINE there, its epoch
    taking no rank; a follower keeping its record is still refused."""
    # (recorded before the simulator parked delayed fetches: they move the interleaving)
    config = ClusterConfig(delayed_fetches=False, fetch_rounds=False,
                           brokers=3, log_dirs=2, partitions=2, steps=66,
                           fault_probability=0.1, chunk_bytes=150)
    result, outcome = replay(4492, config, parse_faults(SEED_4492_FAULTS))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    trace = list(outcome.trace)
    subject = "__consumer_offsets-0@1"
    index = next((i for i, e in enumerate(trace)
                  if e.event == "TRUNCATE" and e.subject == subject
                  and e.fields.get("log_end_offset") == 5
                  and e.fields.get("leader_epoch_end") == 4), None)
    assert index is not None, "broker 1 never truncated its deposed epoch's record: not reached"
    assert trace[index].fields.get("truncated_to") == 4
    late = [e.fields["base_offset"] for e in trace[:index]
            if e.event == "LEADER_APPEND" and e.subject == subject
            and e.fields.get("leader_epoch") == 0
            and any(b.event == "BECOME_LEADER" and b.subject == "__consumer_offsets-0@2"
                    for b in trace[:trace.index(e)])]
    assert late == [4], f"broker 1 wrote nothing as a deposed leader: {late}"
    _checked_and_kept_refused(
        trace, index, "a stale leader shown OFFLINE where record epochs merged", kept=5)


#: Seed 6056 of ``logproof fuzz`` shrunk to 6 faults (the storage broker's left out).
SEED_6056_FAULTS = ("19:controller_expiry:1:20,28:reassign:0:47506,36:reassign:0:49802,"
                    "60:crash:2:8,96:controller_expiry:2:15,96:crash_last_copy:2:136")


def test_seed_6056_a_leaderless_state_vouches_only_for_what_its_writer_saw() -> None:
    """Seed 6056 (NO_COMMITTED_LOSS), an implementation bug: t-0's ISR {2, 1}, leader 1;
    ``crash_last_copy`` stopped 1 cleanly and crashed 2, which lost its unflushed [46, 51).
    Controller 0 planned the leaderless state ISR {2, 1}; its write stalled across its session's
    expiry (KAFKA-6082, its epoch still ZooKeeper's) and landed after both brokers registered
    again. Re-elected, its failover read registrations older than the state's mzxid and took
    both as vouched for by it: it elected 2, the first in replica order, and 1 would have
    truncated acknowledged batches. A state without a leader now vouches for no member whose
    registration follows an unclean shutdown: 2 is barred and 1 leads."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=1, steps=200,
                           fault_probability=0.02, segment_bytes=1048576, chunk_bytes=65536)
    result, outcome = replay(6056, config, parse_faults(SEED_6056_FAULTS))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    elected = [(e.fields["leader"], e.fields["leader_epoch"]) for e in outcome.trace
               if e.machine == "controller" and e.subject == "t-0"
               and e.event == "LEADER_ELECTED" and e.fields.get("controller_epoch") == 4]
    assert elected, "controller 0's second term elected no leader of t-0: not reached"
    assert elected[0] == (1, 5), f"the uncleanly restarted member led: {elected}"


#: Seed 14102 of ``logproof fuzz``: its storage broker's faults up to the failing step.
SEED_14102_FAULTS = ("9:disk_full:3:43969,21:crash:3:0,23:torn_tail:3:0,34:torn_middle:3:18250,"
                     "35:crash:3:0,37:dir_failure:3:0,52:dir_repaired:3:0,61:crash:3:0,"
                     "62:redirect_off_failing:3:64637,69:dir_read_errors:3:0,104:torn_tail:3:0,"
                     "108:crash_in_swap:3:1,120:crash_in_swap:3:1,122:torn_middle:3:48053,"
                     "132:file_failure_at_restart:3:4846")


def test_seed_14102_recovery_checks_a_segment_a_stale_later_file_made_look_flushed() -> None:
    """Seed 14102 (IMPLEMENTATION_ERROR, ``CorruptBatch`` reading c-0 back), an implementation
    bug: on the storage broker, a truncation of c-0 to 16 deleted its segment at 16 (an unlink
    a crash may undo) and segment 0 took offsets 16-19 again, unflushed; the recovery point was
    16. ``torn_middle`` crashed it: the unlink was undone and a batch in segment 0's unflushed
    bytes was torn. Recovery took segment 0 as wholly below the recovery point because the next
    file started at 16, loaded its tail without a CRC check and served the torn batch [18, 19].
    A segment whose batches end past the recovery point is now checked like the rest: the torn
    batch is cut and the stale file, overlapping, deleted.

    Since seed 18812's fix a truncation to a segment's base offset empties that segment instead
    of deleting it, so this schedule no longer leaves the stale file; the interleaving is kept
    by ``test_a_stale_later_segment_does_not_make_unflushed_batches_trusted`` in
    ``tests/unit/storage/test_log.py``, which fails without the recovery fix."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=3, steps=140,
                           fault_probability=0.05, segment_bytes=600, chunk_bytes=150)
    result, outcome = replay(14102, config, parse_faults(SEED_14102_FAULTS))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message


#: Seed 18812 of ``logproof fuzz --seeds 20000`` (its default run, ``--partitions 3 --steps 200
#: --fault-probability 0.1 --segment-bytes 600 --chunk-bytes 150``): its storage broker's faults
#: up to the failing step (they alone reach it, at 165 steps).
SEED_18812_FAULTS = (
    "7:dir_repaired:3:0,11:crash_mid_operation:3:31,16:unreadable_at_startup:3:0,"
    "35:torn_middle:3:23916,39:dir_failure:3:1,40:crash_in_swap:3:3,46:dir_read_errors:3:1,"
    "54:dir_repaired:3:0,65:dir_repaired:3:0,65:file_failure_at_restart:3:19207,"
    "72:crash_in_swap:3:3,73:crash_mid_operation:3:17,76:crash:3:0,85:crash:3:0,"
    "95:dir_failure:3:1,102:unreadable_at_startup:3:0,104:dir_failure:3:0,106:torn_tail:3:0,"
    "110:torn_tail:3:0,111:file_failure_at_restart:3:16672,117:dir_repaired:3:0,"
    "123:torn_middle:3:59303,125:crash:3:0,130:crash:3:0,136:torn_middle:3:44513,"
    "143:crash:3:0,144:crash_in_swap:3:6,146:crash_in_swap:3:6,148:disk_full:3:49905,"
    "154:crash_in_swap:3:1,160:dir_repaired:3:0,162:crash_in_swap:3:4,164:crash_in_swap:3:0")


def test_seed_18812_a_truncation_to_a_segments_base_keeps_the_offsets_below_it() -> None:
    """Seed 18812 (MOVE_NO_LOSS, "c-0 recovered up to 40, durable up to 44"), an implementation
    bug: on the storage broker, a truncation of c-0 to 41 deleted its empty segment at 44 (an
    unlink a crash may undo) and cut segment 31 at 40, fsynced; a crash undid the unlink, so
    c-0 came back with LEO 44 and offsets 40-43 a gap. With the HW at 44 and [44, 49)
    appended, a truncation to 44 deleted the segment based at 44 too and left the LEO at 40,
    below the HW. Only segments based above the target go now (Kafka's ``baseOffset >
    targetOffset``)."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=3, steps=165,
                           fault_probability=0.1, segment_bytes=600, chunk_bytes=150)
    result, outcome = replay(18812, config, parse_faults(SEED_18812_FAULTS))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message


#: Seed 13451 of ``logproof fuzz`` (its default run, ``--partitions 3 --steps 200
#: --fault-probability 0.1 --segment-bytes 600 --chunk-bytes 65536``) shrunk within 123 runs to
#: 27 of its 43 faults, 197 steps, without the storage broker.
SEED_13451_FAULTS = (
    "23:malformed_znode:0:266,23:session_expiry:2:15,25:controller_expiry:1:18,"
    "25:malformed_znode:0:949,27:reassign:1:48832,32:crash_last_copy:1:218,"
    "40:connection_loss:0:320,44:crash_last_copy:2:114,47:clean_restart:2:4,"
    "49:connection_loss:0:190,49:partition:1:26,66:session_expiry:0:8,72:connection_loss:0:251,"
    "75:malformed_znode:0:722,80:malformed_znode:0:1616,88:crash:2:15,127:partition:1:5,"
    "131:session_expiry:2:3,148:controller_expiry:0:47,153:session_expiry:0:20,"
    "155:connection_loss:2:404,177:malformed_znode:0:1737,180:malformed_znode:0:4084,"
    "182:controller_expiry:0:55,189:controller_expiry:1:7,190:reassign:0:8430,"
    "192:crash_last_copy:2:65")


def test_seed_13451_a_state_whose_leader_is_gone_vouches_only_for_what_its_writer_saw() -> None:
    """Seed 13451 (COMMITTED_DURABLE at the next BECOME_LEADER of t-0), an implementation bug,
    a sibling of seed 6056 with a leader: controller 1 planned a preferred election of t-0
    (leader 0, ISR {0, 1, 2}) while all three brokers were up; the write landed after 2
    crashed, losing committed records, and registered again, and 1's session expired before it
    read that registration. 0 crashed too. Re-elected, 1's failover took 2's registration, older
    than the state's mzxid, as vouched for by it and elected 1 keeping 2 in the ISR, short of
    the high watermark. A state the failover elects from (its leader gone) now vouches for no
    member whose registration follows an unclean shutdown: 2 leaves the ISR."""
    # (recorded before the simulator parked delayed fetches: they move the interleaving)
    config = ClusterConfig(delayed_fetches=False, fetch_rounds=False,
                           brokers=3, log_dirs=2, partitions=3, steps=197,
                           fault_probability=0.1, segment_bytes=600, chunk_bytes=65536,
                           storage_broker=False)
    result, outcome = replay(13451, config, parse_faults(SEED_13451_FAULTS))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    control = [(e.event, e.fields.get("broker"), e.fields.get("epoch")) for e in outcome.trace
               if e.machine == "controller" and e.subject == "controller"]
    terms = [epoch for event, broker, epoch in control
             if event == "SESSION_EXPIRED" and broker == 1 and isinstance(epoch, int)
             and ("CONTROLLER_ELECTED", 1, epoch + 1) in control]
    assert terms, "controller 1 was not re-elected after its session expired: not reached"
    written = [(e.event, e.fields["leader"], e.fields["isr"]) for e in outcome.trace
               if e.machine == "controller" and e.subject == "t-0"
               and e.fields.get("controller") == 1
               and e.fields.get("controller_epoch") == terms[0] + 1]
    assert written, "controller 1's next term wrote no state of t-0: not reached"
    isr = written[0][2]
    assert isinstance(isr, tuple)
    assert 2 not in isr, f"its failover kept broker 2 in the ISR: {written}"


#: Seed 1337 of ``logproof fuzz`` (its default run with ``--partitions 2 --steps 200
#: --fault-probability 0.1 --segment-bytes 2048 --chunk-bytes 150``), shrunk without the
#: storage broker.
SEED_1337_FAULTS = ("9:controller_expiry:2:25,11:crash:1:10,18:controller_expiry:1:58,"
                    "28:connection_loss:2:424,38:crash:1:4,54:crash_last_copy:0:82,"
                    "58:connection_loss:1:234")


def test_seed_1337_a_leaderless_state_names_an_unclean_member_until_the_controller_reads_it(
) -> None:
    """Seed 1337 (COMMITTED_DURABLE at broker 2's RESTART of __consumer_offsets-0), a false
    alarm of the checker: ISR {1, 2, 0}, leader 2, offset 0 committed; broker 1 crashed and
    lost it. ``crash_last_copy`` stopped 2 (the controller) cleanly and crashed 0, which lost
    it too. Controller 1's failover barred 1 (an unclean restart) and wrote the leaderless
    state ISR {2, 0}. Broker 0 registered again, uncleanly, and took its LeaderAndIsr (leader
    -1, its LEO 0) before the controller's write that takes it out of the ISR landed: for that
    window ZooKeeper's ISR names a member short of the committed prefix while 2, stopped
    cleanly, holds it. (The abstraction then left such a member out of a leaderless state's
    ISR; that excuse is gone.)

    Seed 11302 showed that window to be an implementation bug of the controller: its write of
    broker 0's removal went out as its ZooKeeper connection dropped, the re-read went
    unanswered, and it sent its cached states anyway (Kafka's controller retries the write once
    connected before sending anything). Since that fix broker 0 first hears of the partition
    from the state that removed it."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=2, steps=200,
                           fault_probability=0.1, segment_bytes=2048, chunk_bytes=150,
                           storage_broker=False)
    result, outcome = replay(1337, config, parse_faults(SEED_1337_FAULTS))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    events = [e for e in outcome.trace if e.subject.startswith("__consumer_offsets-0")]
    restarts = [i for i, e in enumerate(events)
                if e.subject == "__consumer_offsets-0@0" and e.event == "RESTART"]
    assert restarts, "broker 0 never restarted: not reached"
    follows = [e for e in events[restarts[0]:]
               if e.subject == "__consumer_offsets-0@0" and e.event == "BECOME_FOLLOWER"]
    assert follows, "broker 0 never heard of the partition again: not reached"
    assert follows[0].fields.get("log_end_offset") == 0, "broker 0 kept offset 0: not reached"
    isr = follows[0].fields.get("isr")
    assert isinstance(isr, tuple)
    assert 0 not in isr, f"broker 0, short, was sent a state naming it: {follows[0]}"
    elected = [(e.fields["leader"], e.fields["isr"]) for e in events[restarts[0]:]
               if e.machine == "controller" and e.event == "LEADER_ELECTED"]
    assert elected, "no leader elected after broker 0 came back: not reached"
    assert elected[0] == (2, (2,)), f"not broker 2 alone: {elected}"


def _joined_below_the_epoch_start(trace: Iterable[TraceEvent]) -> list[tuple[str, int, int]]:
    """(leader's subject, replica, its last fetch offset) for each ISR_EXPAND adding a replica
    whose last fetch from that leader was below the LEO the leader became leader at."""
    found: list[tuple[str, int, int]] = []
    isr: dict[str, tuple[int, ...]] = {}
    start: dict[str, int] = {}
    offsets: dict[str, dict[int, int]] = {}
    for event in trace:
        if event.machine != "replication":
            continue
        subject, fields = event.subject, event.fields
        if event.event == "BECOME_LEADER":
            isr[subject] = tuple(fields.get("isr") or ())  # type: ignore[arg-type]
            start[subject] = int(fields.get("log_end_offset", -1))  # type: ignore[arg-type]
            offsets[subject] = {}
        elif event.event == "FOLLOWER_FETCH":
            replica, offset = fields["replica"], fields["fetch_offset"]
            assert isinstance(replica, int)
            assert isinstance(offset, int)
            offsets.setdefault(subject, {})[replica] = offset
        elif event.event in ("ISR_EXPAND", "ISR_SHRINK"):
            new: tuple[int, ...] = tuple(fields["isr"])  # type: ignore[arg-type]
            if event.event == "ISR_EXPAND":
                for b in new:
                    at = offsets.get(subject, {}).get(b, -1)
                    if b not in isr.get(subject, ()) and at < start.get(subject, -1):
                        found.append((subject, b, at))
            isr[subject] = new
    return found


def test_seed_1351_a_leader_restarted_into_its_epoch_adds_no_follower_below_its_leo() -> None:
    """Seed 1351 (NOT_ENABLED at an ISR_EXPAND of t-1@1), an implementation bug: broker 1 led
    t-1's epoch 1 and wrote 0-2, restarted and, its registration back before any failover, was
    sent the same epoch again; it became leader at LEO 3 with its HW at 0. Broker
    2, outside the ISR, fetched at 0 and was added: the leader read its epoch's start from its
    epoch cache (0, written before the crash). Kafka's ``makeLeader`` sets
    ``leaderEpochStartOffsetOpt`` to the LEO at every election, and a follower joins only once
    it reaches it; the leader now does the same."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=3, steps=200,
                           fault_probability=0.1, segment_bytes=2048, chunk_bytes=700)
    result, outcome = replay(1351, config)
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    assert not _joined_below_the_epoch_start(outcome.trace)
    leads = [(e.fields.get("leader_epoch"), e.fields.get("log_end_offset"),
              e.fields.get("high_watermark"))
             for e in outcome.trace if e.machine == "replication" and e.subject == "t-1@1"
             and e.event == "BECOME_LEADER" and e.state_before == "NONE"]
    assert (1, 3, 0) in leads, f"broker 1 did not lead t-1's epoch 1 again at LEO 3: {leads}"


def test_seed_3176_a_leader_restarted_cleanly_into_its_epoch_waits_for_its_leo() -> None:
    """Seed 3176 of ``logproof fuzz --first-seed 2000`` (NOT_ENABLED), shrunk to 5 faults: seed
    1351's case with a connection loss and clean restarts only. The leader of
    __consumer_offsets-1, restarted cleanly and sent its epoch again, added a follower that had
    reached only the epoch start its cache held from before the restart, not the LEO at which it
    became leader again (KIP-320 rule 4)."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=1, steps=65, fault_probability=0.05,
                           segment_bytes=600)
    result, outcome = replay(3176, config, parse_faults(
        "14:partition:1:30,27:partition:1:25,36:connection_loss:1:134,38:clean_restart:0:4,"
        "48:clean_restart:2:6"))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message


def test_seed_1915_a_leaders_isr_write_vouches_only_for_members_it_saw_in_sync() -> None:
    """Seed 1915 of ``logproof fuzz --seeds 2000`` (COMMITTED_DURABLE), hand-shrunk to 19
    faults, an implementation bug: broker 0, the active controller and a member of leader 2's
    ISR, crashed uncleanly and registered again before any controller saw it; leader 2 then
    wrote two ISR changes (another member shrunk and re-added) carrying 0 over, so the state's
    last write was newer than 0's registration and the next failover took 0 as vouched for,
    short of a committed record. Now a leader writes only members it saw in sync in its
    leadership, and each state records the incarnation it vouches for of each member
    (KIP-903), which the failover compares with the registration. Without both, the run fails;
    each alone passes it (tests/unit/controller/test_unclean_shutdown.py and
    tests/unit/broker/test_node.py check each)."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=1, steps=155,
                           fault_probability=0.1, chunk_bytes=150)
    result, outcome = replay(1915, config, parse_faults(
        "2:controller_expiry:0:50,3:clean_restart:0:4,10:session_expiry:0:17,"
        "13:malformed_znode:0:1101,17:connection_loss:0:265,23:partition:1:14,"
        "28:controller_expiry:1:25,47:session_expiry:2:9,55:malformed_znode:0:3281,"
        "65:controller_expiry:1:17,68:crash_last_copy:1:118,91:clean_restart:2:6,"
        "93:connection_loss:0:262,101:crash:1:3,109:connection_loss:1:126,"
        "113:reassign:0:44372,121:partition:1:28,127:session_expiry:1:16,128:crash:0:14"))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    events = [(e.machine, e.event, e.subject) for e in outcome.trace]
    crash = events.index(("replication", "CRASH", "t-0@0"))
    assert ("controller", "CONTROLLER_ELECTED", "controller") in events[crash:], (
        "no failover after broker 0's crash: the case was not reached")


def test_seed_4899_seed_1915s_case_in_the_default_configuration() -> None:
    """Seed 4899 of ``logproof fuzz --seeds 20000`` (COMMITTED_DURABLE), seed 1915's case: a
    member that crashed unseen was carried over by its leader's ISR writes and trusted at the
    next failover. It fails with both halves of 1915's fix reverted, and passes with either."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=1, steps=200,
                           fault_probability=0.1, chunk_bytes=150)
    result, outcome = replay(4899, config)
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message


def test_seed_9726_a_lossy_crash_waits_for_a_member_that_lost_no_tail() -> None:
    """Seed 9726 of ``logproof fuzz --seeds 20000`` (NO_COMMITTED_LOSS), shrunk to 7 faults
    without the storage broker, a fault outside the promise: ISR {0, 2}, leader 2; controller
    1's next write took its connection down (applied, its reply lost, then a flap), and while it
    was away broker 0 crashed losing its unflushed tail and came back. No controller had failed
    it, so ZooKeeper's ISR still named it and the cluster looked healthy: the planned crash of
    leader 2 struck, losing acknowledged batches broker 0 had lost too (any Kafka loses them:
    no copy survived). A lossy fault now also needs, like ``crash_last_copy``, another ISR
    member that lost no tail since it last joined the ISR and holds every acknowledged batch:
    the crash of broker 2 is skipped."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=1, steps=186,
                           fault_probability=0.05, segment_bytes=1 << 20, storage_broker=False)
    result, outcome = replay(9726, config, parse_faults(
        "11:malformed_znode:0:832,43:reassign:2:45630,111:malformed_znode:0:1190,"
        "117:clean_restart:0:8,122:connection_loss:1:382,164:crash:0:4,168:crash:2:14"))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    events = [(e.machine, e.event, e.subject) for e in outcome.trace]
    # (the last crash of broker 0: the first is the clean restart)
    crash = max(i for i, e in enumerate(events) if e == ("replication", "CRASH", "t-0@0"))
    restart = events.index(("replication", "RESTART", "t-0@0"), crash)
    assert not [e for e in events[crash:restart] if e[0] == "controller"], (
        "a controller ran while broker 0 was down: the case was not reached")
    assert ("replication", "CRASH", "t-0@2") not in events[restart:]
    assert isinstance(outcome, ClusterOutcome)
    assert outcome.faults_skipped == 1
def test_seed_11302_no_state_goes_out_while_its_removal_was_lost_with_the_connection() -> None:
    """Seed 11302 of ``logproof fuzz --seeds 20000`` (COMMITTED_DURABLE), shrunk to two faults,
    an implementation bug: the controller (broker 2) lost its ZooKeeper connection with the
    write of broker 0's ISR removals in flight (``crash_last_copy`` had stopped broker 1
    cleanly and crashed broker 0, which came back without its unflushed records). The write's
    outcome was unknown and the re-read went unanswered too, yet the core flushed the
    LeaderAndIsr states it had queued from its cache for the restarted broker: leader epoch 0,
    broker 0 in the ISR, so it followed as an ISR member from an empty log. Now the states of a
    partition whose re-read is unanswered are held until the revalidation re-reads and resends
    (tests/unit/controller/test_core.py checks the core)."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=1, steps=200,
                           fault_probability=0.1, segment_bytes=600, chunk_bytes=65536)
    result, outcome = replay(11302, config, parse_faults(
        "1:connection_loss:2:186,5:crash_last_copy:0:144"))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    follows = [e for e in outcome.trace if e.machine == "replication"
               and e.event == "BECOME_FOLLOWER" and e.subject.endswith("@0")]
    restarted = next(i for i, e in enumerate(outcome.trace) if e.event == "RESTART"
                     and e.subject == "__consumer_offsets-1@0")
    after = [e for e in follows if outcome.trace.index(e) > restarted
             and e.subject == "__consumer_offsets-1@0"]
    assert after, "broker 0 never followed __consumer_offsets-1 again: the case was not reached"
    isr = after[0].fields["isr"]
    assert isinstance(isr, tuple | list)
    assert 0 not in isr, after[0]


def test_seed_12101_a_barred_broker_waits_for_the_state_that_drops_it() -> None:
    """Seed 12101 of ``logproof fuzz --seeds 20000`` (COMMITTED_DURABLE at broker 2's
    BECOME_FOLLOWER of ``__consumer_offsets-0``), shrunk to 12 faults, an implementation bug:
    broker 2's session had expired (controller 1 failed it) while it kept running, and leader 0
    took it back into the ISR; it then crashed, losing a committed record, and registered
    afresh. Controller 1 marked it (KIP-966) and wrote it out of the ISR, but the startup's
    LeaderAndIsr, queued first, carried the state naming it; the write's outcome was lost with
    the connection, so was the re-read, and the stale state went out: broker 2 followed as an
    ISR member short of a committed record. Seed 11302's case: a partition whose re-read went
    unanswered sends no state from the cache until it is read again."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=2, steps=90,
                           fault_probability=0.1, segment_bytes=600, storage_broker=False)
    result, outcome = replay(12101, config, parse_faults(
        "2:clean_restart:2:2,5:controller_expiry:0:12,11:session_expiry:1:9,"
        "16:clean_restart:2:4,18:malformed_znode:0:4090,19:connection_loss:0:41,"
        "22:partition:1:10,34:session_expiry:2:19,50:controller_expiry:2:16,"
        "56:session_expiry:2:19,64:crash:2:20,83:connection_loss:1:306"))
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message
    events = [(e.machine, e.event, e.subject) for e in outcome.trace]
    crash = len(events) - 1 - events[::-1].index(
        ("replication", "CRASH", "__consumer_offsets-0@2"))
    assert ("controller", "BROKER_STARTED", "broker-2") in events[crash:], (
        "broker 2 did not register again after its crash: the case was not reached")
    follows = [e for e in outcome.trace[crash:] if e.event == "BECOME_FOLLOWER"
               and e.subject == "__consumer_offsets-0@2"]
    assert follows, "broker 2 never followed again"
    isr = follows[0].fields["isr"]
    assert isinstance(isr, tuple)
    assert 2 not in isr, follows[0]


def test_seed_3153_a_handed_over_flush_credits_nothing_after_a_truncation() -> None:
    """Seed 3153 (MOVE_NO_LOSS on the storage broker, "c-0 recovered up to 0, durable up to
    2"): the move simulator's interleaved flush pass took c-0's sync handles at end 6; a
    follower's truncation of the compacted c-0 to 0 (a new segment file) and an append of 2
    came before the pass resumed, and the model credited offsets 0-1 as durable though only the
    old file was synced. The model now credits a handed-over flush only while the partition
    holds the acknowledged batches it held then."""
    config = ClusterConfig(brokers=3, log_dirs=2, partitions=2, steps=200,
                           fault_probability=0.1, segment_bytes=600)
    result, outcome = replay(3153, config)
    assert outcome.violation is None, outcome.violation
    assert not result.failed, result.message


def test_seed_4036_a_follower_that_keeps_nothing_is_built_at_its_first_record() -> None:
    """Seed 4036 of ``logproof fuzz`` (STATE_MISMATCH, a false alarm of the trace checker):
    broker 0, deposed leader of ``__consumer_offsets-1`` in epoch 4, wrote offset 0 in epoch 4
    after broker 2 took the lead of epoch 5 and wrote its own offset 0 (epoch 5), then 1 (epoch
    6). Told at last to follow broker 1 (epoch 7, holding broker 2's log), broker 0 asked for
    epoch 4, heard 0 (epoch 4 is older than anything in the leader's cache: Kafka's
    ``endOffsetFor`` answers the start of the next epoch) and truncated to 0. The truncation's
    fewest-epoch cuts took the leader's record at offset 1 as their second slot: four epochs
    (4, 5, 6 and the current 7), the oldest two merged, broker 0's record looked like the
    leader's and the model kept it. A follower that keeps nothing is now built at its first
    record alone (the second cut past every log); a follower claiming to keep it is refused.

    Held to the trace the seed produced until a follower applied a late answer to an earlier
    fetch from its log end (``traces/seed4036.jsonl.gz``, 2,000 events): the seed now runs
    otherwise and no longer reaches the case."""
    trace = _saved_trace("seed4036", 2000)
    verdict = check_trace(trace, abstractions())
    assert verdict.violation is None, verdict.violation
    subject = "__consumer_offsets-1@0"
    index = next((i for i, e in enumerate(trace)
                  if e.event == "TRUNCATE" and e.subject == subject
                  and e.fields.get("log_end_offset") == 1
                  and e.fields.get("leader_epoch_end") == 0), None)
    assert index is not None, "broker 0 never truncated its deposed epoch's record: not reached"
    assert trace[index].fields.get("truncated_to") == 0
    _checked_and_kept_refused(
        trace, index, "a truncation built at its fewest-epoch cuts", kept=1)
