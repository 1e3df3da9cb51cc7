"""Controller failover time for many partitions against a real ZooKeeper.

What it measures: three registered brokers (their own ZooKeeper sessions) and the controller
(running in broker 0's session, as in a broker process); ``--partitions`` partitions spread over
``--topics`` topics with replication factor 3, leaders round-robin, so broker 1 leads a third of
them. The broker side is a recording transport that answers LeaderAndIsr at once. Broker 1 is
killed by closing its session; the figure is the time from the controller seeing the loss (its
BROKER_FAILED trace event) until every partition broker 1 led has its new leader written in
ZooKeeper and a LeaderAndIsr naming that leader delivered to it (requests are sent only after
the writes that decided them completed). "Seeing the loss" is the arrival of the ``/brokers/ids``
child watch in the controller's session. The baseline is the replication design's own estimate:
one 4 ms ZooKeeper write per partition state (40 s for 10,000), compared with both figures.
The controller's Prometheus metrics are served and scraped over HTTP before the kill and once
everything settled: the leader elections it counted
(``kafka_controller_controllerstats_leaderelectionrateandtimems``) must equal the partitions the
victim led, with ``kafka_controller_kafkacontroller_offlinepartitionscount`` back at 0.

Usage: ``python -m bench.failover --partitions 10000`` (prints the figures, then one JSON line).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence

import trio

from bench._metrics import Endpoint
from conformance.coordinator import RecordingBrokers
from impl.broker import garbage
from impl.broker.metrics import Parts
from impl.controller import (
    ControllerService,
    Coordinator,
    CoordinatorEvent,
    EmbeddedZooKeeper,
    KazooCoordinator,
    LeaderAndIsrRequest,
    Op,
    OpResult,
    WatchEvent,
    create_topic,
    read_partition_state,
    register_broker,
)
from impl.controller.znodes import BROKER_IDS_PATH
from impl.trace import TraceEvent

#: The replication design's estimate of one ZooKeeper write (design V3, "Discussions" 1).
SEED_WRITE_MS = 4.0
TARGET_S = 2.0
BROKERS = (0, 1, 2)
VICTIM = 1
WAIT_S = 600.0


class _TimedTraces:
    def __init__(self) -> None:
        self.events: list[tuple[float, TraceEvent]] = []
        self.changed = trio.Event()

    def emit(self, event: TraceEvent) -> None:
        self.events.append((trio.current_time(), event))
        self.changed.set()
        self.changed = trio.Event()

    def first(self, name: str) -> float | None:
        return next((t for t, e in self.events if e.event == name), None)


class _CountingCoordinator(KazooCoordinator):
    """Counts the partition-state multis the controller sends."""

    state_multis = 0
    state_writes = 0
    #: When the controller's session received the ``/brokers/ids`` child watch (trio time).
    brokers_watch_at: list[float] = []

    async def next_event(self) -> CoordinatorEvent:
        event = await super().next_event()
        if isinstance(event, WatchEvent) and event.path == BROKER_IDS_PATH:
            type(self).brokers_watch_at.append(trio.current_time())
        return event

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        writes = sum(1 for op in ops if op.path.endswith("/state"))
        if writes:
            type(self).state_multis += 1
            type(self).state_writes += writes
        return await super().multi(ops)


async def _run(hosts: str, partitions: int, topics: int, batch: int,
               session_timeout_ms: int = 6_000) -> dict[str, object]:
    per_topic = math.ceil(partitions / topics)
    transport = RecordingBrokers()
    traces = _TimedTraces()
    sessions: dict[int, Coordinator] = {}
    async with trio.open_nursery() as nursery:
        for broker_id in BROKERS:
            if broker_id == 0:
                session: Coordinator = await _CountingCoordinator.connect(
                    hosts, session_timeout_ms=session_timeout_ms)
            else:
                session = await KazooCoordinator.connect(
                    hosts, session_timeout_ms=session_timeout_ms)
            sessions[broker_id] = session
            await register_broker(session, broker_id, "127.0.0.1", 9092 + broker_id)
        service = ControllerService(trace_sink=traces, partitions_per_write_max=batch)
        await nursery.start(service.run, sessions[0], 0, transport.send)
        with trio.fail_after(WAIT_S):
            await service.wait_active()

        setup_start = time.monotonic()
        names: list[str] = []
        led_by_victim: set[tuple[str, int]] = set()
        created = 0
        for index in range(topics):
            count = min(per_topic, partitions - created)
            if count <= 0:
                break
            name = f"bench-{index:04d}"
            assignment = {p: [(created + p + k) % 3 for k in range(3)] for p in range(count)}
            await create_topic(sessions[2], name, assignment=assignment)
            led_by_victim |= {(name, p) for p, r in assignment.items() if r[0] == VICTIM}
            names.append(name)
            created += count

        def initialised() -> int:
            return len({(s.topic, s.partition) for s in transport.leader_and_isr_states(0)})

        await transport.wait_for(lambda: initialised() >= created, WAIT_S)
        setup_s = time.monotonic() - setup_start
        multis_before = _CountingCoordinator.state_multis
        writes_before = _CountingCoordinator.state_writes
        delivered_before = len(transport.deliveries)

        endpoint = Endpoint(Parts(controller=service))
        before = await endpoint.scrape_async()
        watches_before = len(_CountingCoordinator.brokers_watch_at)
        first_after_kill = len(transport.deliveries)
        killed_at = trio.current_time()
        await sessions[VICTIM].close()
        pending = set(led_by_victim)
        done_at = killed_at
        new_leaders: dict[tuple[str, int], int] = {}

        def moved() -> bool:
            nonlocal done_at, delivered_before
            for delivery in transport.deliveries[delivered_before:]:
                request = delivery.request
                if isinstance(request, LeaderAndIsrRequest):
                    for state in request.partition_states:
                        tp = (state.topic, state.partition)
                        if (tp in pending and state.leader == delivery.broker_id
                                and state.leader != VICTIM):
                            pending.discard(tp)
                            new_leaders[tp] = state.leader
                            done_at = max(done_at, delivery.time_s)
            delivered_before = len(transport.deliveries)
            return not pending

        await transport.wait_for(moved, WAIT_S)
        # Then the second round: every partition's ISR without the victim, on every survivor.
        unsettled = {(name, p, b) for name in names
                     for p in range(per_topic if name != names[-1] else
                                    created - per_topic * (len(names) - 1))
                     for b in BROKERS if b != VICTIM}
        settled_at = done_at
        scanned = 0

        def settled() -> bool:
            nonlocal settled_at, scanned
            for delivery in transport.deliveries[first_after_kill + scanned:]:
                request = delivery.request
                if isinstance(request, LeaderAndIsrRequest):
                    for state in request.partition_states:
                        if VICTIM not in state.isr:
                            key = (state.topic, state.partition, delivery.broker_id)
                            if key in unsettled:
                                unsettled.discard(key)
                                settled_at = max(settled_at, delivery.time_s)
            scanned = len(transport.deliveries) - first_after_kill
            return not unsettled

        await transport.wait_for(settled, WAIT_S)
        after = await endpoint.scrape_async()
        endpoint.close()
        elections_name = ("kafka_controller_controllerstats_leaderelectionrateandtimems_total", ())
        offline_name = ("kafka_controller_kafkacontroller_offlinepartitionscount", ())
        endpoint_elections = after[elections_name] - before[elections_name]
        assert len(_CountingCoordinator.brokers_watch_at) > watches_before, "no watch fired"
        seen_at = _CountingCoordinator.brokers_watch_at[watches_before]
        decided_at = traces.first("BROKER_FAILED")
        assert decided_at is not None, "the controller never traced the broker failure"

        # Check what ZooKeeper holds for every partition the victim led.
        sample = sorted(led_by_victim)
        limiter = trio.CapacityLimiter(256)
        wrong: list[tuple[str, int]] = []

        async def check(tp: tuple[str, int]) -> None:
            async with limiter:
                state = await read_partition_state(sessions[2], *tp)
            if state is None or state.leader != new_leaders[tp] or VICTIM in state.isr:
                wrong.append(tp)

        async with trio.open_nursery() as checks:
            for tp in sample:
                checks.start_soon(check, tp)
        assert not wrong, f"ZooKeeper disagrees for {len(wrong)} partitions, e.g. {wrong[:3]}"

        for broker_id, session in sessions.items():
            if broker_id != VICTIM:
                await session.close()
        nursery.cancel_scope.cancel()

    failover_s = done_at - seen_at
    rewritten = _CountingCoordinator.state_writes - writes_before
    baseline_leaders_s = len(led_by_victim) * SEED_WRITE_MS / 1000.0
    baseline_all_s = rewritten * SEED_WRITE_MS / 1000.0
    settled_s = settled_at - seen_at
    return {
        "bench": "failover",
        "partitions": created,
        "topics": len(names),
        "affected_leaders": len(led_by_victim),
        "partitions_rewritten": rewritten,
        "zk_multis": _CountingCoordinator.state_multis - multis_before,
        "partitions_per_multi_max": batch,
        "detect_s": round(seen_at - killed_at, 4),
        "plan_s": round(decided_at - seen_at, 4),
        "failover_s": round(failover_s, 4),
        "all_isr_updated_s": round(settled_s, 4),
        "baseline_leaders_one_write_each_s": round(baseline_leaders_s, 3),
        "baseline_all_one_write_each_s": round(baseline_all_s, 3),
        "speedup_leaders": round(baseline_leaders_s / failover_s, 1) if failover_s > 0 else None,
        "speedup_all": round(baseline_all_s / settled_s, 1) if settled_s > 0 else None,
        "target_s": TARGET_S,
        "within_target": failover_s <= TARGET_S,
        "setup_s": round(setup_s, 2),
        "endpoint_leader_elections": endpoint_elections,
        "endpoint_offline_partitions_after": after[offline_name],
        "endpoint_active_controller": after[
            ("kafka_controller_kafkacontroller_activecontrollercount", ())],
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print the figures and one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions-per-write", type=int, default=500,
                        help="partitions per ZooKeeper multi (1 = one write each)")
    parser.add_argument("--zookeeper", help="connect string of a running ZooKeeper "
                        "(default: start an embedded one)")
    args = parser.parse_args(argv)
    garbage.take_over_full_collections()  # the collector policy of the broker process
    if args.partitions < 3 or args.topics < 1 or args.partitions_per_write < 1:
        parser.error("need --partitions >= 3, --topics >= 1, --partitions-per-write >= 1")
    if args.zookeeper:
        result = trio.run(_run, args.zookeeper, args.partitions, args.topics,
                          args.partitions_per_write)
    else:
        with EmbeddedZooKeeper() as server:
            result = trio.run(_run, server.connect_string, args.partitions, args.topics,
                              args.partitions_per_write)
    print(f"partitions: {result['partitions']} in {result['topics']} topics, RF 3, "
          f"broker {VICTIM} led {result['affected_leaders']}")
    print(f"the controller's /brokers/ids watch fired {result['detect_s']} s after the session "
          f"closed; its plan (new leaders and ISRs) took {result['plan_s']} s")
    print(f"failover: {result['failover_s']} s from the controller seeing the loss to every "
          f"new leader written and LeaderAndIsr delivered "
          f"({result['partitions_rewritten']} partition states in {result['zk_multis']} multis)")
    print(f"the controller's endpoint counted {result['endpoint_leader_elections']:.0f} leader "
          f"elections (broker {VICTIM} led {result['affected_leaders']}); offline partitions "
          f"after: {result['endpoint_offline_partitions_after']:.0f}")
    print(f"then every partition's ISR without broker {VICTIM} on every survivor: "
          f"{result['all_isr_updated_s']} s")
    print(f"baseline (design V3 estimate, one 4 ms write each): "
          f"{result['baseline_leaders_one_write_each_s']} s for the leaders "
          f"(speedup {result['speedup_leaders']}x), "
          f"{result['baseline_all_one_write_each_s']} s for every partition "
          f"(speedup {result['speedup_all']}x); "
          f"target <= {TARGET_S} s: {'met' if result['within_target'] else 'missed'}")
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
