"""The controller across connection loss and session expiry (simulated ZooKeeper faults)."""

from __future__ import annotations

import trio

from impl.controller import create_topic, read_partition_state

from ._support import WAIT_S, cluster


def test_reconnect_resynchronises_and_expiry_hands_over() -> None:
    async def scenario() -> None:
        async with cluster("simulated") as c:
            server = c.server
            assert server is not None
            for broker_id in (0, 1, 2):
                await c.add_broker(broker_id)
            first = await c.start_controller(100)
            with trio.fail_after(WAIT_S):
                await first.wait_active()
            second = await c.start_controller(101)
            admin = c.sessions[0]
            await create_topic(admin, "f", assignment={0: [1, 0, 2], 1: [0, 1, 2]})
            await c.transport.wait_for(lambda: c.transport.latest_state(2, ("f", 1)) is not None)

            # The controller's link drops; broker 1 dies meanwhile; the link comes back within
            # the session timeout: the controller checks it still holds /controller and the
            # epoch, re-reads everything and elects f-0's new leader.
            controller_session = c.sessions[100].session_id
            server.disconnect(controller_session)
            await c.sessions[1].close()
            assert server.reconnect(controller_session)
            await c.transport.wait_for(
                lambda: (s := c.transport.latest_state(0, ("f", 0))) is not None and s.leader == 0
            )
            trace = c.traces[100]
            assert [e.fields["epoch"] for e in trace.named("CONTROLLER_ELECTED")] == [1, 1]
            assert first.is_active
            assert not second.is_active

            # Now the link stays down past the timeout: the session expires, the other
            # candidate wins epoch 2, and the old controller resigns once it hears of it.
            server.disconnect(controller_session)
            server.advance_ms(10_000)
            with trio.fail_after(WAIT_S):
                await second.wait_active()
            assert second.epoch == 2
            assert not server.reconnect(controller_session)
            await trace.wait_for(lambda: bool(trace.named("SESSION_EXPIRED")))
            assert not c.services[100].is_active
            state = await read_partition_state(admin, "f", 0)
            assert state is not None
            assert state.leader == 0
            assert state.controller_epoch == 1

    trio.run(scenario)
