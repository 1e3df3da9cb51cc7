"""A topic znode of many partitions is decoded and encoded through the caller's offload (the trio
broker's worker threads): the JSON of 100,000 assignments took 0.51 s to decode and 0.31 s to
encode on the event loop, and a CreatePartitions to that size decoded it twice and encoded it once.
A small one is handled where it is; the simulator's admin workload runs everything inline."""

from __future__ import annotations

from typing import Any

import trio

from impl.controller import admin
from impl.controller.znodes import TopicAssignment, decode_topic, encode_topic

from ._support import cluster

#: more partitions than the encoding's bound, and (at least 9 bytes of JSON each) more bytes
#: than the decoding's
LARGE = max(admin.OFFLOAD_TOPIC_PARTITIONS, admin.OFFLOAD_TOPIC_BYTES // 8) + 1


def test_large_topic_znodes_go_through_the_offload(backend: tuple[str, str | None]) -> None:
    offloaded: list[str] = []

    async def offload(function: Any, *args: Any) -> Any:
        offloaded.append(function.__name__)
        return await trio.to_thread.run_sync(function, *args)

    async def scenario() -> None:
        async with cluster(*backend) as c:
            session = await c.add_broker(0)
            await admin.create_topic(session, "small", assignment={0: [0], 1: [0]},
                                     offload=offload)
            assert await admin.read_topic(session, "small", offload=offload) == decode_topic(
                "small", encode_topic(TopicAssignment({0: (0,), 1: (0,)})))
            await admin.add_partitions(session, "small", 3, assignment={2: [0]},
                                       offload=offload)
            assert offloaded == []
            await admin.create_topic(session, "large",
                                     assignment={p: [0] for p in range(LARGE)},
                                     offload=offload)
            assert offloaded == [encode_topic.__name__]
            assert len(encode_topic(TopicAssignment(dict.fromkeys(range(LARGE), (0,))))) > (
                admin.OFFLOAD_TOPIC_BYTES)
            offloaded.clear()
            assert len((await admin.read_topic(session, "large", offload=offload)).partitions) == (
                LARGE)
            assert offloaded == [decode_topic.__name__]
            offloaded.clear()
            added = await admin.add_partitions(session, "large", LARGE + 2,
                                               assignment={LARGE: [0], LARGE + 1: [0]},
                                               offload=offload)
            assert sorted(added) == [LARGE, LARGE + 1]
            assert offloaded == [decode_topic.__name__, encode_topic.__name__]
            grown = await admin.read_topic(session, "large")  # inline by default
            assert len(grown.partitions) == LARGE + 2

    trio.run(scenario)


def test_the_brokers_create_partitions_lends_worker_threads(
        backend: tuple[str, str | None], monkeypatch: Any) -> None:
    """The trio broker's CreatePartitions reads the topic, places the new replicas (reading
    every topic) and grows the topic with ``trio.to_thread.run_sync`` as the offload."""
    from impl.broker import admin_zk
    from impl.controller.placement import RackUnawarePlacer
    from impl.ports import SeededRng

    offloads: list[object] = []
    read_topic, add_partitions = admin.read_topic, admin.add_partitions

    async def spy_read(*args: Any, offload: Any = admin.run_inline) -> Any:
        offloads.append(offload)
        return await read_topic(*args, offload=offload)

    async def spy_add(*args: Any, offload: Any = admin.run_inline, **kwargs: Any) -> Any:
        offloads.append(offload)
        return await add_partitions(*args, offload=offload, **kwargs)

    monkeypatch.setattr(admin, "read_topic", spy_read)
    monkeypatch.setattr(admin, "add_partitions", spy_add)

    async def scenario() -> None:
        async with cluster(*backend) as c:
            session = await c.add_broker(0)
            await admin.create_topic(session, "t", assignment={0: [0]})
            result = await admin_zk.create_partitions(
                session, "t", 2, None, placer=RackUnawarePlacer(SeededRng(1)),
                rng=SeededRng(1), live_brokers=[0], validate_only=False)
            assert result == (0, None)

    trio.run(scenario)
    # the topic read, the placement's read of every topic (one here), the growth
    assert offloads == [trio.to_thread.run_sync] * 3
