"""Controller election and epoch fencing (KAFKA-6082): CONTROLLER_FENCED, EPOCHS_MONOTONIC."""

from __future__ import annotations

import trio

from impl.controller import (
    BadVersionError,
    Controller,
    ControllerConfig,
    create_topic,
    read_live_brokers,
    read_partition_state,
    read_topic,
)
from impl.controller.controller import (
    ClusterSnapshot,
    ControllerEvent,
    Elected,
    EmitTrace,
    Resign,
    WriteCompleted,
    ZkWrite,
)
from impl.controller.znodes import (
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    decode_controller,
    decode_controller_epoch,
    partition_state_path,
)

from ._support import WAIT_S, cluster, wait_any_active


def test_one_of_two_candidates_wins_and_the_epoch_only_grows(
    backend: tuple[str, str | None],
) -> None:
    async def scenario() -> None:
        async with cluster(*backend) as c:
            await c.add_broker(0)
            first = await c.start_controller(100)
            second = await c.start_controller(101)
            await wait_any_active(first, second)
            assert first.is_active != second.is_active, "exactly one controller"
            winner_id, winner, loser_id, loser = (
                (100, first, 101, second) if first.is_active else (101, second, 100, first)
            )
            observer = c.sessions[0]
            data, stat = await observer.get(CONTROLLER_PATH)
            assert decode_controller(data) == winner_id
            assert stat.ephemeral_owner == c.sessions[winner_id].session_id
            epoch_data, _ = await observer.get(CONTROLLER_EPOCH_PATH)
            assert decode_controller_epoch(epoch_data) == winner.epoch == 1
            # The winner goes away: the other candidate takes over with a higher epoch.
            await c.sessions[winner_id].close()
            with trio.fail_after(WAIT_S):
                await loser.wait_active()
            assert loser.epoch == 2
            data, _ = await observer.get(CONTROLLER_PATH)
            assert decode_controller(data) == loser_id
            elected = list(c.traces[loser_id].named("CONTROLLER_ELECTED"))
            assert [e.fields["epoch"] for e in elected] == [2]

    trio.run(scenario)


def test_zombie_controller_writes_are_fenced_and_it_resigns(
    backend: tuple[str, str | None],
) -> None:
    async def scenario() -> None:
        async with cluster(*backend) as c:
            for broker_id in (0, 1, 2):
                await c.add_broker(broker_id)
            old = await c.start_controller(100)
            with trio.fail_after(WAIT_S):
                await old.wait_active()
            new = await c.start_controller(101)
            admin = c.sessions[0]
            await create_topic(admin, "t", assignment={0: [0, 1, 2], 1: [1, 2, 0]})
            await c.transport.wait_for(lambda: len(c.transport.leader_and_isr_states(2)) >= 2)
            assert old.core is not None
            zombie_epoch, zombie_version = old.core.epoch, old.core.epoch_zk_version

            # The old controller's session expires; the other candidate wins epoch + 1.
            await c.expire(c.sessions[100])
            with trio.fail_after(WAIT_S):
                await new.wait_active()
            assert new.epoch == zombie_epoch + 1
            await c.traces[100].wait_for(lambda: bool(c.traces[100].named("SESSION_EXPIRED")))
            assert not old.is_active

            # A zombie that has not noticed yet: a core still holding the old epoch decides
            # that broker 0 is dead and writes new leaders. Its multi fails on the epoch check.
            before = await read_partition_state(admin, "t", 0)
            assert before is not None
            topics = {"t": await read_topic(admin, "t")}
            brokers = await read_live_brokers(admin)
            del brokers[0]
            states = {("t", p): s for p in (0, 1)
                      if (s := await read_partition_state(admin, "t", p)) is not None}
            zombie = Controller(ControllerConfig(100))
            effects = zombie.handle(Elected(zombie_epoch, zombie_version,
                                            ClusterSnapshot(brokers, topics, states)))
            writes = [e for e in effects if isinstance(e, ZkWrite)]
            assert writes, "the zombie wants to write"
            results = await admin.multi(writes[0].ops)
            assert isinstance(results[0], BadVersionError)
            reaction = zombie.handle(WriteCompleted(writes[0].write_id, results))
            assert Resign(ControllerEvent.ZK_WRITE_FENCED) in reaction
            traced = [e.event.event for e in reaction if isinstance(e, EmitTrace)]
            assert "ZK_WRITE_FENCED" in traced
            assert not zombie.active
            after = await read_partition_state(admin, "t", 0)
            assert after == before, "CONTROLLER_FENCED: a zombie changed partition state"

            # The new controller's writes succeed: broker 0 fails, leaders move.
            await c.sessions[0].close()
            await c.transport.wait_for(
                lambda: any(s.leader == 1 and s.topic == "t" and s.partition == 0
                            for s in c.transport.leader_and_isr_states(1))
            )
            observer = c.sessions[1]
            moved = await read_partition_state(observer, "t", 0)
            assert moved is not None
            assert moved.leader == 1
            assert moved.controller_epoch == new.epoch
            assert moved.leader_epoch == before.leader_epoch + 1, "EPOCHS_MONOTONIC"
            _data, stat = await observer.get(partition_state_path("t", 0))
            assert stat.version == moved.zk_version

    trio.run(scenario)


def test_controller_node_deleted_resigns_and_a_new_epoch_is_won(
    backend: tuple[str, str | None],
) -> None:
    async def scenario() -> None:
        async with cluster(*backend) as c:
            await c.add_broker(0)
            first = await c.start_controller(100)
            with trio.fail_after(WAIT_S):
                await first.wait_active()
            second = await c.start_controller(101)
            admin = c.sessions[0]
            await admin.delete(CONTROLLER_PATH)  # an operator forces a re-election
            trace = c.traces[100]
            await trace.wait_for(lambda: bool(trace.named("CONTROLLER_RESIGNED")))
            await wait_any_active(first, second)
            winner = first if first.is_active else second
            assert first.is_active != second.is_active
            assert winner.epoch == 2, "EPOCHS_MONOTONIC: a re-election bumps the epoch"
            epoch_data, _ = await admin.get(CONTROLLER_EPOCH_PATH)
            assert decode_controller_epoch(epoch_data) == 2

    trio.run(scenario)
