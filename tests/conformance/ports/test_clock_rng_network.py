"""The virtual clock, the seeded rng with sub-streams, and the simulated network."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance import NetworkFaults, SimClock, SimNetwork, SimRng
from impl.ports import Clock, Rng


def test_clock_is_virtual_and_monotonic() -> None:
    clock: Clock = SimClock(start_ns=5)
    assert isinstance(clock, SimClock)
    assert clock.monotonic_ns() == 5
    wall_before_ms = clock.wall_ms()
    assert clock.advance_ns(3_000_000) == 3_000_005
    assert clock.wall_ms() == wall_before_ms + 3
    assert clock.advance_to_ns(10) == 3_000_005
    with pytest.raises(ValueError, match="backwards"):
        clock.advance_ns(-1)


def test_same_seed_same_draws_and_streams_independent() -> None:
    rng: Rng = SimRng(42)
    assert isinstance(rng, SimRng)
    first = [SimRng(42).stream("disk").randrange(1000) for _ in range(3)]
    assert len(set(first)) == 1
    disk_alone = SimRng(42).stream("disk")
    alone = [disk_alone.randrange(1 << 30) for _ in range(20)]
    # Draws in another stream do not shift the disk's draws.
    parent = SimRng(42)
    network = parent.stream("network")
    for _ in range(7):
        network.random()
    disk = parent.stream("disk")
    assert [disk.randrange(1 << 30) for _ in range(20)] == alone
    assert SimRng(43).stream("disk").randrange(1 << 30) != alone[0]
    assert parent.stream("a").stream("b").seed != parent.stream("b").stream("a").seed


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(min_value=-(2**70), max_value=2**70),
       draws=st.lists(st.tuples(st.sampled_from(["randrange", "randint", "choice", "shuffle",
                                                  "random"]),
                                st.integers(min_value=1, max_value=2**70)),
                      max_size=40))
def test_integer_draws_are_random_randoms(seed: int, draws: list[tuple[str, int]]) -> None:
    """SimRng draws its integers itself (no interpreted call in the compiled simulator): the
    same numbers, in the same order, as ``random.Random`` seeded alike, interleaved with floats."""
    ours, theirs = SimRng(seed), random.Random(seed)
    for kind, size in draws:
        if kind == "randrange":
            assert ours.randrange(size) == theirs.randrange(size)
        elif kind == "randint":
            assert ours.randint(-size // 2, size) == theirs.randint(-size // 2, size)
        elif kind == "choice":
            items = list(range(size % 50 + 1))
            assert ours.choice(items) == theirs.choice(items)
        elif kind == "shuffle":
            mine, yours = list(range(size % 30)), list(range(size % 30))
            ours.shuffle(mine)
            theirs.shuffle(yours)
            assert mine == yours
        else:
            assert ours.random() == theirs.random()


def test_bad_draws_are_refused_as_random_refuses_them() -> None:
    rng = SimRng(3)
    with pytest.raises(IndexError):
        rng.choice([])
    with pytest.raises(ValueError, match="empty range"):
        rng.randrange(0)
    with pytest.raises(ValueError, match="empty range"):
        rng.randint(5, 4)


def test_chance_bounds() -> None:
    rng = SimRng(1)
    assert not any(rng.chance(0.0) for _ in range(100))
    assert all(rng.chance(1.0) for _ in range(100))
    hits = sum(rng.chance(0.25) for _ in range(4000))
    assert 800 < hits < 1200


def _network(seed: int, faults: NetworkFaults) -> tuple[SimClock, SimNetwork]:
    clock = SimClock()
    return clock, SimNetwork(clock, SimRng(seed).stream("network"), faults)


def _run(network: SimNetwork, clock: SimClock) -> list[tuple[int, int, object, int]]:
    arrived: list[tuple[int, int, object, int]] = []
    while (due_ns := network.next_delivery_ns()) is not None:
        clock.advance_to_ns(due_ns)
        arrived.extend(
            (d.source, d.target, d.payload, d.delivered_ns) for d in network.deliver_nowait()
        )
    return arrived


def test_reliable_network_delivers_everything_in_time_order() -> None:
    clock, network = _network(7, NetworkFaults(delay_min_ns=10, delay_max_ns=10))
    for index in range(50):
        network.send(1, 2, index)
    arrived = _run(network, clock)
    assert [payload for _, _, payload, _ in arrived] == list(range(50))
    stats = network.statistics()
    assert (stats.sent, stats.delivered, stats.lost, stats.in_flight) == (50, 50, 0, 0)


def test_faults_lose_duplicate_and_reorder_deterministically() -> None:
    faults = NetworkFaults(
        loss_probability=0.2, duplicate_probability=0.2, reorder_probability=0.3
    )
    clock, network = _network(11, faults)
    for index in range(500):
        network.send(1, 2, index)
        clock.advance_ns(1000)
    arrived = _run(network, clock)
    payloads = [payload for _, _, payload, _ in arrived]
    stats = network.statistics()
    assert stats.lost > 0
    assert stats.duplicated > 0
    assert len(payloads) == 500 - stats.lost + stats.duplicated
    assert payloads != sorted(payloads, key=lambda p: p if isinstance(p, int) else 0)
    times = [delivered_ns for *_, delivered_ns in arrived]
    assert times == sorted(times)
    clock_again, network_again = _network(11, faults)
    for index in range(500):
        network_again.send(1, 2, index)
        clock_again.advance_ns(1000)
    assert _run(network_again, clock_again) == arrived


def test_partition_drops_across_the_cut_and_in_flight() -> None:
    clock, network = _network(3, NetworkFaults())
    network.send(1, 3, "in flight")
    network.partition([{1, 2}, {3}])
    network.send(1, 2, "same side")
    network.send(2, 3, "across")
    assert not network.connected(1, 3)
    assert network.connected(1, 4)
    arrived = _run(network, clock)
    assert [payload for _, _, payload, _ in arrived] == ["same side"]
    assert network.statistics().dropped_by_partition == 2
    network.heal()
    network.send(2, 3, "healed")
    assert [payload for _, _, payload, _ in _run(network, clock)] == ["healed"]
    with pytest.raises(ValueError, match="two partition groups"):
        network.partition([{1}, {1, 2}])


def test_drop_to_crashed_node() -> None:
    clock, network = _network(5, NetworkFaults())
    network.send(1, 2, "a")
    network.send(1, 3, "b")
    assert network.drop_to(2) == 1
    assert [payload for _, _, payload, _ in _run(network, clock)] == ["b"]


def test_total_loss_is_refused() -> None:
    with pytest.raises(AssertionError):
        NetworkFaults(loss_probability=1.0)
