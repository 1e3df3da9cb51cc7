"""The cluster simulator's ZooKeeper faults reach the controller node's paths for them.

``connection_loss``: a broker's ZooKeeper connection drops and comes back on the same session
(SUSPENDED, then CONNECTED): the active controller revalidates its term and re-reads everything
(its own epoch elected again, a stutter of the model), or resigns when an operator moved the
controller meanwhile; a candidate whose election ``multi`` landed but whose reply was lost takes
the term it won. ``malformed_znode``: garbage where the controller reads requests and notices is
logged and ignored, the notifications and the preferred election request deleted.
"""

from __future__ import annotations

import pytest

from conformance import cluster_sim
from conformance._cluster_admin import MALFORMED_ZNODES
from conformance.cluster_sim import (
    LATER_STREAM_KINDS,
    ClusterConfig,
    ClusterOutcome,
    ClusterWorld,
    parse_faults,
    plan_faults,
    simulate,
)
from impl.controller.znodes import (
    ISR_CHANGE_NOTIFICATION_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    PREFERRED_REPLICA_ELECTION_PATH,
)

#: A quiet cluster: only the faults a test names.
QUIET = ClusterConfig(steps=100, storage_broker=False, groups=False, admin=False,
                      fault_probability=0.0)


def _controller_events(outcome: ClusterOutcome) -> list[tuple[str, int, int]]:
    return [(e.event, int(e.fields["broker"]), int(e.fields.get("epoch", -1)))  # type: ignore[arg-type]
            for e in outcome.trace if e.machine == "controller" and e.subject == "controller"]


def _run(faults: str, config: ClusterConfig = QUIET, seed: int = 3) -> ClusterOutcome:
    outcome = simulate(seed, config, parse_faults(faults), keep_trace=True)
    assert outcome.violation is None, outcome.violation
    return outcome


def test_connection_losses_and_malformed_znodes_are_drawn_from_streams_of_their_own() -> None:
    config = ClusterConfig(steps=300, storage_broker=False)
    kinds: set[str] = set()
    for seed in range(20):
        planned = plan_faults(seed, config)
        kinds |= {f.kind for f in planned}
        earlier = [f for f in planned if f.kind not in ("connection_loss", "malformed_znode")]
        # the same draws as before these streams existed
        assert [f for f in earlier if f.kind not in LATER_STREAM_KINDS] == [
            f for f in planned if f.kind not in LATER_STREAM_KINDS]
    assert {"connection_loss", "malformed_znode"} <= kinds
    assert {"connection_loss", "malformed_znode"} <= set(LATER_STREAM_KINDS)


def test_after_a_connection_loss_the_controller_revalidates_and_re_reads_its_term() -> None:
    outcome = _run("30:connection_loss:0:40")  # broker 0 is the controller; down 12 ms
    assert outcome.connection_losses == 1
    assert _controller_events(outcome) == [("CONTROLLER_ELECTED", 0, 1),
                                           ("CONTROLLER_ELECTED", 0, 1)]


def test_a_flapping_connection_interrupts_the_revalidation_and_the_term_survives() -> None:
    outcome = _run("30:connection_loss:0:280")
    assert outcome.connection_losses == 2  # the second with the revalidation's first read
    assert _controller_events(outcome) == [("CONTROLLER_ELECTED", 0, 1),
                                           ("CONTROLLER_ELECTED", 0, 1)]


def test_a_read_lost_with_the_connection_is_re_done_by_the_revalidation() -> None:
    """The controller's next read is lost with the connection; broker 1's session expires while
    it is down (the watch went with it): the revalidation's re-read finds broker 1 gone (its
    partitions reconciled), and the re-armed watch sees it register again."""
    outcome = _run("30:connection_loss:0:41,35:session_expiry:1:20")
    assert outcome.connection_losses == 1
    events = [(e.event, e.subject) for e in outcome.trace if e.machine == "controller"
              and e.subject in ("controller", "broker-1")]
    revalidated = events.index(("CONTROLLER_ELECTED", "controller"), 1)
    assert ("BROKER_STARTED", "broker-1") in events[revalidated:], events


def test_a_controller_moved_while_disconnected_resigns_at_the_reconnection() -> None:
    outcome = _run("30:connection_loss:0:43")  # and an operator deletes /controller meanwhile
    events = _controller_events(outcome)
    assert events[0] == ("CONTROLLER_ELECTED", 0, 1)
    moved = events.index(("CONTROLLER_RESIGNED", 0, 1))
    assert [e for e in events[1:moved] if e[0] == "CONTROLLER_ELECTED" and e[2] == 2], events


def test_an_election_whose_reply_was_lost_takes_the_term_it_won() -> None:
    """Brokers 1 and 2 each lose their connection with their next election ``multi`` in flight
    (applied, reply lost); the controller's broker stops: the winner finds ``/controller`` its
    own session's at an epoch above its own and takes that term (no term skipped)."""
    outcome = _run("20:connection_loss:1:42,20:connection_loss:2:42,30:clean_restart:0:10")
    assert outcome.connection_losses >= 1
    elected = [e for e in _controller_events(outcome) if e[0] == "CONTROLLER_ELECTED"]
    assert [epoch for _, _, epoch in elected] == list(range(1, len(elected) + 1)), elected
    assert elected[1][1] in (1, 2)


@pytest.fixture
def final_world(monkeypatch: pytest.MonkeyPatch) -> list[ClusterWorld]:
    """The world of each run, as the final check sees it."""
    worlds: list[ClusterWorld] = []
    original = ClusterWorld.final_check

    def final_check(self: ClusterWorld) -> None:
        worlds.append(self)
        original(self)

    monkeypatch.setattr(cluster_sim.ClusterWorld, "final_check", final_check)
    return worlds


def test_malformed_znodes_are_logged_ignored_and_the_notices_deleted(
        final_world: list[ClusterWorld]) -> None:
    kinds = len(MALFORMED_ZNODES)
    faults = ",".join(f"{10 + 8 * k}:malformed_znode:0:{k + kinds * k}" for k in range(kinds))
    # (a failover in the middle: the new controller reads every one of them again)
    outcome = _run(f"{faults},70:clean_restart:0:5",
                   ClusterConfig(steps=120, storage_broker=False, groups=False))
    (world,) = final_world
    assert world.admin_ops.malformed_written == kinds
    assert outcome.zookeeper_warnings >= kinds
    zk, admin = world.zk, world.admin
    assert zk.exists(admin, PREFERRED_REPLICA_ELECTION_PATH, False) is None
    assert zk.children(admin, ISR_CHANGE_NOTIFICATION_PATH, False) == []
    assert zk.children(admin, LOG_DIR_EVENT_NOTIFICATION_PATH, False) == []


def test_seed_177_a_write_fenced_by_a_term_whose_winner_has_not_heard_its_reply() -> None:
    """Seed 177 of the default run once ``connection_loss`` was drawn (NOT_ENABLED, shrunk):
    the controller's (broker 1's) next fenced write stalls while its session expires; broker 0
    wins the next term in ZooKeeper but loses its election's reply with its connection. The
    stalled write is fenced by that term before broker 0 traces its election: the controller
    abstraction refused the fence, no later epoch being known; only an election moves
    ``/controller_epoch``, so the fence is checked against ZooKeeper holding the next term."""
    outcome = simulate(177, ClusterConfig(),
                       parse_faults("83:controller_expiry:0:25,86:connection_loss:0:142"),
                       keep_trace=True)
    assert outcome.violation is None, outcome.violation
    events = _controller_events(outcome)
    assert events.index(("ZK_WRITE_FENCED", 1, 1)) < events.index(("CONTROLLER_ELECTED", 0, 2))


def test_seed_130_a_deposed_coordinator_unaware_serves_its_cache() -> None:
    """Seed 130 of the default run once ``connection_loss`` was drawn (OFFSETS_DURABLE,
    shrunk): broker 1, controller and coordinator of group-0, loses its ZooKeeper connection
    and its registration's session expires meanwhile; its revalidation makes broker 2 the
    coordinator and sends broker 1 nothing until it registers again. A member still talking to
    broker 1 is answered from its cache, behind a commit broker 2 acknowledged: Kafka's
    coordinator answers so too (no epoch fences an OffsetFetch), so neither the end-to-end check
    nor the group abstraction judges a deposed coordinator's answer."""
    outcome = simulate(130, ClusterConfig(),
                       parse_faults("15:connection_loss:1:80,27:session_expiry:1:18"),
                       keep_trace=True)
    assert outcome.violation is None, outcome.violation
    fetched = [int(e.fields["broker"]) for e in outcome.trace  # type: ignore[arg-type]
               if e.event == "OFFSET_FETCHED" and e.subject == "group-0"]
    assert {1, 2} <= set(fetched), fetched
