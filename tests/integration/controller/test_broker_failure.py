"""Broker failure (design V3 §A): leaders re-elected from the live ISR in batched multis."""

from __future__ import annotations

import math

import pytest
import trio

from impl.controller import (
    CheckOp,
    IsrUpdateFencedError,
    LeaderAndIsrRequest,
    UpdateMetadataRequest,
    create_topic,
    read_partition_state,
    register_broker,
    update_isr,
)
from impl.controller.znodes import CONTROLLER_EPOCH_PATH, ISR_CHANGE_NOTIFICATION_PATH

from ._support import WAIT_S, cluster

PARTITIONS = 90
BATCH = 20


def _assignment() -> dict[int, list[int]]:
    return {p: [p % 3, (p + 1) % 3, (p + 2) % 3] for p in range(PARTITIONS)}


def test_broker_failure_reelects_many_partitions_in_batched_multis(
    backend: tuple[str, str | None],
) -> None:
    async def scenario() -> None:
        async with cluster(*backend) as c:
            for broker_id in (0, 1, 2):
                await c.add_broker(broker_id)
            service = await c.start_controller(100, partitions_per_write_max=BATCH)
            with trio.fail_after(WAIT_S):
                await service.wait_active()
            recorder = c.recorders[100]
            admin = c.sessions[0]
            await create_topic(admin, "big", assignment=_assignment())

            def hosted(broker_id: int) -> set[int]:
                return {s.partition for s in c.transport.leader_and_isr_states(broker_id)
                        if s.topic == "big"}

            await c.transport.wait_for(lambda: len(hosted(0)) == PARTITIONS)
            created = recorder.state_multis()
            assert len(created) == math.ceil(PARTITIONS / BATCH)
            assert all(len(ops) <= BATCH + 1 for ops in created)
            # Topic creation: every replica is new to its broker.
            assert all(s.is_new for s in c.transport.leader_and_isr_states(2))

            delivered_before = len(c.transport.deliveries)
            await c.sessions[1].close()

            def moved() -> bool:
                states: dict[int, set[int]] = {0: set(), 2: set()}
                for delivery in c.transport.deliveries[delivered_before:]:
                    request = delivery.request
                    if isinstance(request, LeaderAndIsrRequest) and delivery.broker_id in states:
                        states[delivery.broker_id].update(
                            s.partition for s in request.partition_states
                        )
                return all(len(got) == PARTITIONS for got in states.values())

            await c.transport.wait_for(moved)
            failover = recorder.state_multis()[len(created):]
            # Every partition has a replica on broker 1: all 90 change (new leader or smaller ISR),
            # written in ceil(90 / 20) multis, each guarded by the controller-epoch check.
            assert len(failover) == math.ceil(PARTITIONS / BATCH)
            for ops in failover:
                assert isinstance(ops[0], CheckOp)
                assert ops[0].path == CONTROLLER_EPOCH_PATH
            # Leadership first: one LeaderAndIsr per surviving broker carries the 30 partitions
            # broker 1 led; a second one carries the 60 that only lost broker 1 from the ISR.
            late = [d for d in c.transport.deliveries[delivered_before:]
                    if isinstance(d.request, LeaderAndIsrRequest)]
            assert sorted(d.broker_id for d in late) == [0, 0, 2, 2]
            led_by_1 = {p for p, r in _assignment().items() if r[0] == 1}
            for broker_id in (0, 2):
                first, second = [d.request for d in late if d.broker_id == broker_id]
                assert isinstance(first, LeaderAndIsrRequest)
                assert isinstance(second, LeaderAndIsrRequest)
                assert {s.partition for s in first.partition_states} == led_by_1
                assert {s.partition for s in second.partition_states} == (
                    set(range(PARTITIONS)) - led_by_1
                )
                assert not any(s.is_new for s in first.partition_states)
                assert not any(s.is_new for s in second.partition_states)
            for partition, replicas in _assignment().items():
                state = await read_partition_state(admin, "big", partition)
                assert state is not None
                expected_leader = replicas[0] if replicas[0] != 1 else replicas[1]
                assert state.leader == expected_leader
                assert 1 not in state.isr
                assert state.leader_epoch == 1
            # the update naming the partitions broker 1 followed (their offline replica): the
            # controller's later updates may reach broker 2 in either order, so it is waited for
            # rather than taken to be the last one delivered
            def offline_update() -> UpdateMetadataRequest | None:
                for update in reversed(c.transport.update_metadata(2)):
                    if len(update.partition_states) == PARTITIONS - len(led_by_1):
                        return update
                return None

            await c.transport.wait_for(lambda: offline_update() is not None)
            metadata = offline_update()
            assert metadata is not None
            assert [b.broker_id for b in metadata.live_brokers] == [0, 2]
            assert all(s.offline_replicas == (1,) for s in metadata.partition_states)
            assert len(metadata.partition_states) == PARTITIONS - len(led_by_1)

    trio.run(scenario)


def test_stale_leader_isr_write_fails_and_new_leader_isr_change_propagates(
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
            await create_topic(admin, "s", assignment={0: [1, 0, 2]})
            await c.transport.wait_for(lambda: c.transport.latest_state(1, ("s", 0)) is not None)
            cached = c.transport.latest_state(1, ("s", 0))
            assert cached is not None
            assert cached.leader == 1

            await c.sessions[1].close()
            await c.transport.wait_for(
                lambda: (s := c.transport.latest_state(0, ("s", 0))) is not None and s.leader == 0
            )
            # The deposed leader (a GC pause, design V3 discussion 3) tries to shrink the ISR.
            with pytest.raises(IsrUpdateFencedError):
                await update_isr(admin, "s", 0, leader=1, leader_epoch=cached.leader_epoch,
                                 isr=[1], controller_epoch=cached.controller_epoch,
                                 zk_version=cached.zk_version)
            current = c.transport.latest_state(0, ("s", 0))
            assert current is not None
            assert current.isr == (0, 2)
            # The new leader's ISR shrink succeeds and reaches every broker as UpdateMetadata.
            version = await update_isr(admin, "s", 0, leader=0, leader_epoch=current.leader_epoch,
                                       isr=[0], controller_epoch=current.controller_epoch,
                                       zk_version=current.zk_version)
            assert version == current.zk_version + 1

            def propagated() -> bool:
                return any(s.topic == "s" and s.isr == (0,) and s.zk_version == version
                           for um in c.transport.update_metadata(2) for s in um.partition_states)

            await c.transport.wait_for(propagated)
            assert await admin.children(ISR_CHANGE_NOTIFICATION_PATH) == []
            assert c.traces[100].named("ISR_CHANGED", "s-0")

    trio.run(scenario)


@pytest.mark.parametrize("unclean", [False, True], ids=["clean", "unclean"])
def test_no_live_isr_member_leaves_the_partition_offline_unless_unclean(
    backend: tuple[str, str | None], unclean: bool,
) -> None:
    async def scenario() -> None:
        async with cluster(*backend) as c:
            for broker_id in (0, 1):
                await c.add_broker(broker_id)
            service = await c.start_controller(100, unclean_leader_election=unclean)
            with trio.fail_after(WAIT_S):
                await service.wait_active()
            admin = c.sessions[0]
            await create_topic(admin, "u", assignment={0: [1, 0]})
            await c.transport.wait_for(lambda: c.transport.latest_state(1, ("u", 0)) is not None)
            led = c.transport.latest_state(1, ("u", 0))
            assert led is not None
            await update_isr(admin, "u", 0, leader=1, leader_epoch=led.leader_epoch, isr=[1],
                             controller_epoch=led.controller_epoch, zk_version=led.zk_version)
            await c.transport.wait_for(lambda: any(
                s.isr == (1,) for um in c.transport.update_metadata(0)
                for s in um.partition_states))
            await c.sessions[1].close()
            await c.transport.wait_for(lambda: any(
                1 not in [b.broker_id for b in um.live_brokers]
                for um in c.transport.update_metadata(0)))
            state = await read_partition_state(admin, "u", 0)
            assert state is not None
            if unclean:
                assert state.leader == 0
                assert state.isr == (0,)
                return
            assert state.leader == -1, "NO_COMMITTED_LOSS: no leader outside the ISR"
            assert state.isr == (1,), "the last ISR member is kept"
            assert c.traces[100].named("BROKER_FAILED", "u-0")
            # The last ISR member comes back: it leads again (a clean election).
            returning = await c.connect()
            c.sessions[1] = returning
            await register_broker(returning, 1, "127.0.0.1", 9001)
            await c.transport.wait_for(
                lambda: (s := c.transport.latest_state(1, ("u", 0))) is not None
                and s.leader == 1 and s.leader_epoch == state.leader_epoch + 1
            )

    trio.run(scenario)
