"""The placement model (model/placement.py): proofs, refutations, and the implementation's walk
replayed through it step by step."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import TypeVar

import pytest

from impl.controller.placement import ClusterView, RingWalk, build_rack_tree, parse_rack
from impl.ports import SeededRng
from model import ModelDefinition, State, Status, check_variant
from model.placement import (
    IRREGULAR_TREE,
    KIP_EXAMPLE_TREE,
    MODELS,
    PLACEMENT_SPREAD,
    pointer_variable,
)

T = TypeVar("T")


class ScriptedRng:
    """Hands out the given draws in order (the tree's nodes draw their first pointer)."""

    def __init__(self, draws: Sequence[int]) -> None:
        self._draws = list(draws)

    def randrange(self, stop: int) -> int:
        value = self._draws.pop(0)
        assert 0 <= value < stop
        return value

    def random(self) -> float:
        raise AssertionError("the walk draws only randrange")

    def choice(self, items: Sequence[T]) -> T:
        raise AssertionError("the walk draws only randrange")


def _check_all(definition: ModelDefinition, variants: Sequence[str]) -> None:
    for name in variants:
        variant = definition.variant(name)
        result = check_variant(definition, variant)
        assert result.ok, result.problems()
        spread = result.result(PLACEMENT_SPREAD)
        if variant.shipped:
            assert spread.status is Status.PROVED
        else:
            assert spread.status is Status.VIOLATED
            assert spread.counterexample is not None
            assert spread.counterexample.replayed
        assert all(witness.reached for witness in result.witnesses)


def test_irregular_tree_shipped_walk_proved_and_known_bad_walks_refuted() -> None:
    _check_all(MODELS[0], [variant.name for variant in MODELS[0].variants])


def test_kip_example_shipped_walk_proved_and_flat_racks_refuted() -> None:
    _check_all(MODELS[1], ["shipped", "flat_racks"])


@pytest.mark.slow
def test_kip_example_every_known_bad_walk_refuted() -> None:
    _check_all(MODELS[1], [variant.name for variant in MODELS[1].variants])


def _pointers_agree(state: State, walk: RingWalk) -> bool:
    """The model's pointers (nodes with more than one child) are the walk's."""
    values = state.as_dict()
    for name, pointer in walk.pointers().items():
        variable = pointer_variable(parse_rack(name) if name != "/" else ())
        if variable in values and values[variable] != pointer:
            return False
    return True


def _model_state(definition: ModelDefinition, walk: RingWalk) -> State:
    """The model's initial state whose pointers are the walk's."""
    for state in definition.model().initial_states():
        if _pointers_agree(state, walk):
            return state
    raise AssertionError(f"no initial state has pointers {walk.pointers()}")


@pytest.mark.parametrize(
    ("definition", "racks"),
    [(MODELS[0], IRREGULAR_TREE), (MODELS[1], KIP_EXAMPLE_TREE)],
    ids=["irregular", "kip_example"],
)
def test_implementation_walk_is_the_models_only_enabled_step(
    definition: ModelDefinition, racks: Mapping[int, str]
) -> None:
    model = definition.model()
    brokers = sorted(racks)
    tree = build_rack_tree(ClusterView.of(dict(racks)).brokers)
    chooser = random.Random(879)
    for _ in range(20):
        draws = [chooser.randrange(node.ring_size) for node in tree.nodes]
        walk = RingWalk(tree, ScriptedRng(draws))
        state = _model_state(definition, walk)
        for _partition in range(4):
            replication_factor = chooser.randint(1, len(brokers))
            taken: list[int] = []
            for _ in range(replication_factor):
                enabled = [b for b in brokers if model.enabled(state, "replica_placed", {"b": b})]
                chosen = walk.next_replica(taken)
                assert enabled == [chosen]
                state = model.step(state, "replica_placed", {"b": chosen})
                assert model.check_invariants(state) == []
                assert _pointers_agree(state, walk)
                taken.append(chosen)
            state = model.step(state, "partition_placed")


@pytest.mark.parametrize("seed", range(5))
def test_placer_trace_replays_through_the_model(seed: int) -> None:
    from impl.controller.placement import (
        MultiLevelRackPlacer,
        PlacementEvent,
        PlacementSpec,
    )
    from impl.trace import ListTraceSink
    from model.placement import PlacementEvent as ModelPlacementEvent

    assert [e.name for e in PlacementEvent] == [e.name for e in ModelPlacementEvent]
    assert [e.value for e in PlacementEvent] == [e.value for e in ModelPlacementEvent]
    definition = MODELS[0]
    model = definition.model()
    sink = ListTraceSink()
    view = ClusterView.of(dict(IRREGULAR_TREE))
    spec = PlacementSpec(partition_count=6, replication_factor=1 + seed % 5, topic="t")
    MultiLevelRackPlacer(SeededRng(seed), sink).place(spec, view, None)
    events = list(sink)
    assert len(events) == spec.partition_count * (spec.replication_factor + 1)
    first = events[0]
    assert first.machine == "placement"
    assert first.subject == "t-0"
    raw_pointers = first.fields["pointers"]
    assert isinstance(raw_pointers, tuple)
    pointers: dict[str, int] = {}
    for pair in raw_pointers:
        assert isinstance(pair, tuple)
        name, value = pair
        assert isinstance(name, str)
        assert isinstance(value, int)
        pointers[name] = value
    [state] = [
        s for s in model.initial_states()
        if all(
            s.as_dict().get(pointer_variable(parse_rack(n) if n != "/" else ()), v) == v
            for n, v in pointers.items()
        )
    ]
    for event in events:
        action = event.event.lower()
        params = {"b": event.fields["broker"]} if action == "replica_placed" else {}
        assert model.enabled(state, action, params), event.to_json()
        state = model.step(state, action, params)
        assert model.check_invariants(state) == []
