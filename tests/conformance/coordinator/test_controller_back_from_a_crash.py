"""A controller back from a crash does not resend its stale leadership (cluster seed 85).

Found by the cluster simulator (seed 85, NO_COMMITTED_LOSS): broker 2 was the active controller
and t-0's leader; it crashed with acknowledged records unflushed on itself, no other controller
handled the failure, and broker 2 registered again and won the next election. Its failover
resent the state znode, so broker 2 led the same epoch again without those records and its
followers would have truncated to it. A live ISR member registered after the state znode's last
write restarted unseen: the failover now fails it as a bounced broker (KIP-380; KRaft's KIP-966),
and t-0 moves to another ISR member in a new epoch.

Here the same sequence runs through the controller node and a real (simulated) ZooKeeper; the
core's rule alone is tested in ``tests/unit/controller/test_failover_restarted_leader.py``.
"""

from __future__ import annotations

from conformance.coordinator import ControllerDriver, SimulatedZooKeeper
from impl.controller.coordinator import CreateOp
from impl.controller.requests import LeaderAndIsrRequest
from impl.controller.znodes import (
    PERSISTENT_PATHS,
    TopicAssignment,
    broker_path,
    decode_partition_state,
    encode_broker,
    encode_topic,
    partition_state_path,
    topic_path,
)


def _register(server: SimulatedZooKeeper, broker_id: int) -> int:
    session = server.open_session(60_000)
    result = server.multi(session, [CreateOp(broker_path(broker_id),
                                             encode_broker("h", 9000 + broker_id, None, 0),
                                             ephemeral=True)])[0]
    assert not isinstance(result, Exception), result
    return session


def test_a_controller_back_from_a_crash_moves_its_own_leadership() -> None:
    server = SimulatedZooKeeper()
    admin = server.open_session(60_000)
    for path in PERSISTENT_PATHS:
        server.multi(admin, [CreateOp(path)])
    sessions = {b: _register(server, b) for b in (0, 1, 2)}
    first = ControllerDriver(server, 2)
    assert first.elect()
    server.multi(admin, [CreateOp(topic_path("t"), encode_topic(TopicAssignment({0: (2, 0, 1)})))])
    first.topics_changed()
    data, stat = server.get(admin, partition_state_path("t", 0), False)
    before = decode_partition_state("t", 0, data, stat.version)
    assert before.leader == 2
    assert set(before.isr) == {0, 1, 2}

    # Broker 2 crashes and comes back before any other controller acted.
    server.expire_session(first.session_id)
    server.expire_session(sessions.pop(2))
    sessions[2] = _register(server, 2)
    second = ControllerDriver(server, 2)
    assert second.elect()

    data, stat = server.get(admin, partition_state_path("t", 0), False)
    after = decode_partition_state("t", 0, data, stat.version)
    assert after.leader in (0, 1), "the restarted broker kept leading its stale epoch"
    assert after.leader_epoch > before.leader_epoch
    assert 2 not in after.isr
    stale = [r for b, r in second.requests if b == 2 and isinstance(r, LeaderAndIsrRequest)
             and any(s.leader == 2 and s.leader_epoch == before.leader_epoch
                     for s in r.partition_states)]
    assert not stale, "the stale leadership was resent"
