"""Hypothesis strategies for rack trees, shared by the placement tests."""

from __future__ import annotations

from hypothesis import strategies as st

from impl.controller.placement import ClusterView


@st.composite
def rack_trees(
    draw: st.DrawFn, depth_max: int = 3, fan_out_max: int = 3, rack_brokers_max: int = 3
) -> ClusterView:
    """A cluster whose brokers carry multi-level racks of depth 1 to ``depth_max``.

    Branches may end at different depths (``/DC1/R1`` beside ``/DC2``); broker ids are
    consecutive from a drawn base so that ids are not always positions.
    """
    racks: list[tuple[str, int]] = []

    def grow(path: str, depth: int) -> None:
        is_rack = depth == depth_max or (depth > 0 and draw(st.booleans()))
        if is_rack:
            racks.append((path, draw(st.integers(1, rack_brokers_max))))
            return
        for child in range(draw(st.integers(1, fan_out_max))):
            grow(f"{path}/N{depth}{child}", depth + 1)

    grow("", 0)
    base = draw(st.integers(0, 1000))
    broker_racks: dict[int, str | None] = {}
    for rack, count in racks:
        for _ in range(count):
            broker_racks[base + len(broker_racks)] = rack
    return ClusterView.of(broker_racks)
