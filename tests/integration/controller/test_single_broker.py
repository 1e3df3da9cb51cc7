"""A one-broker cluster: the broker is its own controller (issue 4 item 5)."""

from __future__ import annotations

import trio

from impl.controller import create_topic, notify_log_dir_failure, read_partition_state

from ._support import WAIT_S, cluster


def test_one_broker_leads_everything_and_a_lost_dir_takes_only_its_partitions_offline(
    backend: tuple[str, str | None],
) -> None:
    async def scenario() -> None:
        async with cluster(*backend) as c:
            broker = await c.add_broker(0)
            service = await c.start_controller(0, session=broker)
            with trio.fail_after(WAIT_S):
                await service.wait_active()
            await create_topic(broker, "solo", assignment={0: [0], 1: [0]})
            await c.transport.wait_for(lambda: len(c.transport.leader_and_isr_states(0)) >= 2)
            for partition in (0, 1):
                state = await read_partition_state(broker, "solo", partition)
                assert state is not None
                assert (state.leader, state.isr) == (0, (0,))
            assert all(s.is_new for s in c.transport.leader_and_isr_states(0))

            c.transport.storage_errors[0] = {("solo", 1)}
            await notify_log_dir_failure(broker, 0)
            trace = c.traces[0]
            await trace.wait_for(lambda: bool(trace.named("LOG_DIR_FAILED", "solo-1")))
            await c.transport.wait_for(lambda: any(
                s.topic == "solo" and s.partition == 1 and s.offline_replicas == (0,)
                for um in c.transport.update_metadata(0) for s in um.partition_states))
            lost = await read_partition_state(broker, "solo", 1)
            kept = await read_partition_state(broker, "solo", 0)
            assert lost is not None
            assert kept is not None
            assert lost.leader == -1, "no other replica may lead"
            assert lost.isr == (0,), "the last ISR member is kept (no unclean election)"
            assert (kept.leader, kept.leader_epoch) == (0, 0), "DIR_FAILURE_ISOLATION"
            assert [e.state_after for e in trace.named("LOG_DIR_FAILED", "solo-1")] == ["OFFLINE"]

    trio.run(scenario)
