"""Log-dir failure in the controller (KIP-112): DIR_FAILURE_ISOLATION, is_new, offline replicas."""

from __future__ import annotations

import trio

from impl.controller import (
    create_topic,
    notify_log_dir_failure,
    read_partition_state,
)
from impl.controller.znodes import LOG_DIR_EVENT_NOTIFICATION_PATH

from ._support import WAIT_S, cluster

FAILED = {("d", 0), ("d", 1), ("d", 2)}


def test_failed_log_dir_moves_leadership_and_isr_off_the_lost_replicas(
    backend: tuple[str, str | None],
) -> None:
    async def scenario() -> None:
        async with cluster(*backend) as c:
            for broker_id in (0, 1, 2):
                await c.add_broker(broker_id)
            service = await c.start_controller(100)
            with trio.fail_after(WAIT_S):
                await service.wait_active()
            admin = c.sessions[0]
            assignment = {p: [p % 3, (p + 1) % 3, (p + 2) % 3] for p in range(6)}
            await create_topic(admin, "d", assignment=assignment)
            await c.transport.wait_for(
                lambda: all(c.transport.latest_state(2, ("d", p)) is not None for p in range(6))
            )
            before = {p: await read_partition_state(admin, "d", p) for p in range(6)}
            sent_to_2 = len(c.transport.leader_and_isr_states(2))

            # Broker 2 loses the dir holding d-0, d-1 and d-2 and tells the controller.
            c.transport.storage_errors[2] = set(FAILED)
            created = await notify_log_dir_failure(c.sessions[2], 2)
            assert created.startswith(f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/log_dir_event_")
            trace = c.traces[100]
            await trace.wait_for(lambda: len(trace.named("LOG_DIR_FAILED")) == 3)
            # Broker 0 holds a replica of every partition: once it has heard of each lost
            # replica's removal (d-2's new leader, d-0's and d-1's shrunk ISRs), every write of
            # the failure is in ZooKeeper.
            await c.transport.wait_for(
                lambda: all((s := c.transport.latest_state(0, tp)) is not None
                            and 2 not in s.isr and s.leader != 2 for tp in FAILED)
            )

            # The controller resent LeaderAndIsr for every replica of broker 2, none as new.
            probe = c.transport.leader_and_isr_states(2)[sent_to_2:sent_to_2 + 6]
            assert sorted(s.partition for s in probe) == list(range(6))
            assert not any(s.is_new for s in probe)
            assert await admin.children(LOG_DIR_EVENT_NOTIFICATION_PATH) == []
            for partition in range(6):
                state = await read_partition_state(admin, "d", partition)
                old = before[partition]
                assert state is not None
                assert old is not None
                if ("d", partition) in FAILED:
                    assert 2 not in state.isr
                    assert state.leader != 2
                    assert state.leader_epoch == old.leader_epoch + 1
                else:
                    assert state == old, "DIR_FAILURE_ISOLATION: a healthy replica was touched"
            # d-2 was led by broker 2: the next ISR member of AR [2, 0, 1] leads.
            moved = await read_partition_state(admin, "d", 2)
            assert moved is not None
            assert moved.leader == 0
            offline = {(s.topic, s.partition): s.offline_replicas
                       for metadata in c.transport.update_metadata(1)
                       for s in metadata.partition_states}
            assert all(offline[tp] == (2,) for tp in FAILED)
            assert all(offline.get(("d", p), ()) == () for p in (3, 4, 5))
            # Replicas known offline are not sent LeaderAndIsr again (they would be recreated).
            later = c.transport.leader_and_isr_states(2)[sent_to_2 + 6:]
            assert not any((s.topic, s.partition) in FAILED for s in later)

    trio.run(scenario)
