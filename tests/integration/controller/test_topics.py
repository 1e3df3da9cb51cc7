"""Topics (design V3 §B): creation with NEW → ONLINE, partition addition, deletion."""

from __future__ import annotations

import pytest
import trio

from impl.controller import (
    AdminError,
    TopicExistsError,
    UnknownTopicError,
    ZnodeFormatError,
    add_partitions,
    create_topic,
    delete_topic,
    read_partition_state,
    read_topic,
)
from impl.controller.coordinator import CreateOp
from impl.controller.placement import RackUnawarePlacer
from impl.controller.znodes import (
    DELETE_TOPICS_PATH,
    TOPICS_PATH,
    TopicAssignment,
    encode_topic,
    partition_path,
    partitions_path,
    topic_path,
)
from impl.ports import SeededRng

from ._support import WAIT_S, cluster


def test_create_add_partitions_and_delete_a_topic(backend: tuple[str, str | None]) -> None:
    async def scenario() -> None:
        async with cluster(*backend) as c:
            for broker_id in (0, 1, 2):
                await c.add_broker(broker_id)
            service = await c.start_controller(100)
            with trio.fail_after(WAIT_S):
                await service.wait_active()
            admin = c.sessions[0]
            placer = RackUnawarePlacer(SeededRng(7))
            assignment = await create_topic(admin, "orders", partition_count=4,
                                            replication_factor=2, placer=placer,
                                            rng=SeededRng(7))
            assert sorted(assignment) == [0, 1, 2, 3]
            with pytest.raises(TopicExistsError):
                await create_topic(admin, "orders", assignment={0: [0]})

            def delivered(partitions: range) -> bool:
                return all(
                    c.transport.latest_state(replica, ("orders", p)) is not None
                    for p in partitions for replica in assignment.get(p, ())
                )

            await c.transport.wait_for(lambda: delivered(range(4)))
            trace = c.traces[100]
            for partition, replicas in assignment.items():
                state = await read_partition_state(admin, "orders", partition)
                assert state is not None
                assert state.leader == replicas[0]
                assert state.isr == replicas
                assert state.leader_epoch == 0
                transitions = [(e.event, e.state_before, e.state_after)
                               for e in trace.events if e.subject == f"orders-{partition}"]
                assert transitions[:2] == [("TOPIC_CREATED", "NON_EXISTENT", "NEW"),
                                           ("LEADER_ELECTED", "NEW", "ONLINE")]
                for replica in replicas:
                    sent = c.transport.latest_state(replica, ("orders", partition))
                    assert sent is not None
                    assert sent.is_new
                    assert sent.replicas == replicas

            # Partition addition: only the new partitions are new to their brokers.
            added = await add_partitions(admin, "orders", 6, placer=placer, rng=SeededRng(8))
            assert sorted(added) == [4, 5]
            with pytest.raises(AdminError):
                await add_partitions(admin, "orders", 6, placer=placer, rng=SeededRng(8))
            assignment.update(added)
            await c.transport.wait_for(lambda: delivered(range(6)))
            for partition in (4, 5):
                for replica in assignment[partition]:
                    sent = c.transport.latest_state(replica, ("orders", partition))
                    assert sent is not None
                    assert sent.is_new
            resent_old = [s for b in (0, 1, 2) for s in c.transport.leader_and_isr_states(b)
                          if s.topic == "orders" and s.partition < 4]
            assert len(resent_old) == 8, "old partitions are not sent again"

            # Deletion: StopReplica(delete) to every replica, then the znodes go.
            with pytest.raises(UnknownTopicError):
                await delete_topic(admin, "missing")
            await delete_topic(admin, "orders")
            await trace.wait_for(lambda: len(trace.named("TOPIC_DELETED")) == 6)
            for broker_id in (0, 1, 2):
                stopped = c.transport.stop_replicas(broker_id)
                hosted = {("orders", p) for p, r in assignment.items() if broker_id in r}
                assert {tp for tp, delete in stopped if delete} == hosted
            assert "orders" not in await admin.children(TOPICS_PATH)
            assert await admin.children(DELETE_TOPICS_PATH) == []
            with pytest.raises(UnknownTopicError):
                await read_topic(admin, "orders")
            assert all(e.state_after == "NON_EXISTENT" for e in trace.named("TOPIC_DELETED"))

    trio.run(scenario)


def test_bad_topic_requests_get_clear_errors() -> None:
    async def scenario() -> None:
        async with cluster("simulated") as c:
            admin = await c.add_broker(0)
            with pytest.raises(ZnodeFormatError):
                await create_topic(admin, "bad/name", assignment={0: [0]})
            with pytest.raises(ZnodeFormatError):
                await create_topic(admin, "gap", assignment={0: [0], 2: [0]})
            with pytest.raises(ZnodeFormatError):
                await create_topic(admin, "dup", assignment={0: [0, 0]})
            with pytest.raises(AdminError):
                await create_topic(admin, "nothing")
            assert await admin.children(TOPICS_PATH) == []

    trio.run(scenario)



def test_missing_parents_of_new_partition_states_are_created_in_one_multi(
        backend: tuple[str, str | None]) -> None:
    """A new topic's partition znodes (the parents of its state znodes) are created in one
    multi per depth; when one exists already that multi fails as a whole and each is created on
    its own, so every partition still gets its state."""
    async def scenario() -> None:
        async with cluster(*backend) as c:
            await c.add_broker(0)
            service = await c.start_controller(100)
            with trio.fail_after(WAIT_S):
                await service.wait_active()
            admin = c.sessions[0]

            def delivered(topic: str, count: int) -> bool:
                return all(c.transport.latest_state(0, (topic, p)) is not None
                           for p in range(count))

            await create_topic(admin, "fresh", assignment={p: [0] for p in range(5)})
            await c.transport.wait_for(lambda: delivered("fresh", 5))
            creates = [ops for ops in c.recorders[100].multis
                       if all(isinstance(op, CreateOp) and "/fresh/" in op.path for op in ops)]
            assert [[op.path for op in ops] for ops in creates] == [
                [partitions_path("fresh")],
                [partition_path("fresh", p) for p in range(5)]]

            # A topic written with one of its partition znodes already there (by a multi of
            # another tool): the multi of the partition znodes fails on it, each is created on
            # its own, and the states are written at the first attempt, in one multi (the
            # controller splits a failed state write and retries the halves).
            await admin.multi([
                CreateOp(topic_path("partly"),
                         encode_topic(TopicAssignment(dict.fromkeys(range(5), (0,))))),
                CreateOp(partitions_path("partly")),
                CreateOp(partition_path("partly", 3))])
            await c.transport.wait_for(lambda: delivered("partly", 5))
            state_writes = [ops for ops in c.recorders[100].state_multis()
                            if "/partly/" in ops[-1].path]
            assert [len(ops) for ops in state_writes] == [1 + 5]  # the epoch check and 5 states
            for partition in range(5):
                state = await read_partition_state(admin, "partly", partition)
                assert state is not None
                assert state.leader == 0

    trio.run(scenario)
