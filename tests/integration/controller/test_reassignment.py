"""Reassignment (design V3 §F): AR + RAR until RAR ⊆ ISR, then AR := RAR; survives failover."""

from __future__ import annotations

import pytest
import trio

from impl.controller import (
    ReassignmentInProgressError,
    ReassignmentTarget,
    ZnodeFormatError,
    create_topic,
    read_partition_state,
    read_topic,
    reassign_partitions,
    update_isr,
)
from impl.controller.znodes import REASSIGN_PARTITIONS_PATH

from ._support import WAIT_S, Cluster, cluster, wait_any_active


async def _leader_adds(c: Cluster, tp: tuple[str, int], follower: int) -> None:
    """The partition's leader adds a caught-up follower to the ISR (its conditional write)."""
    admin = c.sessions[0]
    state = await read_partition_state(admin, *tp)
    assert state is not None
    await update_isr(admin, tp[0], tp[1], leader=state.leader, leader_epoch=state.leader_epoch,
                     isr=[*state.isr, follower], controller_epoch=state.controller_epoch,
                     zk_version=state.zk_version)


def test_reassignment_resumes_after_controller_failover(backend: tuple[str, str | None]) -> None:
    async def scenario() -> None:
        async with cluster(*backend) as c:
            for broker_id in (0, 1, 2):
                await c.add_broker(broker_id)
            first = await c.start_controller(100)
            with trio.fail_after(WAIT_S):
                await first.wait_active()
            second = await c.start_controller(101)
            admin = c.sessions[0]
            await create_topic(admin, "r", assignment={0: [0, 1], 1: [1, 0]})
            await c.transport.wait_for(lambda: c.transport.latest_state(0, ("r", 1)) is not None)
            with pytest.raises(ZnodeFormatError):
                await reassign_partitions(admin, [ReassignmentTarget("r", 0, (1, 1))])
            await reassign_partitions(admin, [
                ReassignmentTarget("r", 0, (1, 2), ("any", "/data/b")),
                ReassignmentTarget("r", 1, (2, 1)),
            ])
            with pytest.raises(ReassignmentInProgressError):
                await reassign_partitions(admin, [ReassignmentTarget("r", 1, (0, 1))])

            def added(partition: int) -> bool:
                sent = c.transport.latest_state(2, ("r", partition))
                return sent is not None and sent.is_new and 2 in sent.replicas

            await c.transport.wait_for(lambda: added(0) and added(1))
            new_replica = c.transport.latest_state(2, ("r", 0))
            assert new_replica is not None
            assert new_replica.preferred_log_dir == "/data/b"
            assert new_replica.adding_replicas == (2,)
            assert new_replica.removing_replicas == (0,)
            topic = await read_topic(admin, "r")
            assert topic.partitions[0] == (1, 2, 0), "AR = RAR + OAR"
            assert topic.partitions[1] == (2, 1, 0)
            state = await read_partition_state(admin, "r", 0)
            assert state is not None
            assert state.isr == (0, 1), "REASSIGN_SAFE: nothing switches before RAR ⊆ ISR"

            # The controller fails mid-reassignment; the other one resumes from ZooKeeper.
            await c.sessions[100].close()
            await wait_any_active(second)
            assert second.epoch == first.epoch + 1
            trace = c.traces[101]
            await _leader_adds(c, ("r", 0), 2)
            await _leader_adds(c, ("r", 1), 2)
            await trace.wait_for(lambda: len(trace.named("REASSIGN_COMPLETED")) >= 2)
            await c.transport.wait_for(lambda: ("r", 0) in dict(c.transport.stop_replicas(0))
                                       and ("r", 1) in dict(c.transport.stop_replicas(0)))
            topic = await read_topic(admin, "r")
            assert topic.partitions == {0: (1, 2), 1: (2, 1)}
            assert dict(topic.adding_replicas) == {}
            assert dict(topic.removing_replicas) == {}
            moved = await read_partition_state(admin, "r", 0)
            assert moved is not None
            assert moved.leader == 1, "the old leader 0 is not in RAR: RAR's first ISR member"
            assert moved.isr == (1, 2)
            kept = await read_partition_state(admin, "r", 1)
            assert kept is not None
            assert kept.leader == 1, "the leader stays when it is in RAR"
            assert all(delete for _tp, delete in c.transport.stop_replicas(0))
            # Requests are flushed only once no write is outstanding, so the StopReplica seen
            # above means the emptied /admin/reassign_partitions has been deleted too.
            assert await admin.exists(REASSIGN_PARTITIONS_PATH) is None
            phases = [(e.event, e.state_before, e.state_after) for e in trace.events
                      if e.machine == "reassignment" and e.subject == "r-0"]
            assert phases[0] == ("REASSIGN_STARTED", "NONE", "ADDING")
            assert phases[-1][2] == "DONE"

    trio.run(scenario)
