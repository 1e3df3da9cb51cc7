"""The modelling layer itself: concrete and symbolic readings agree, frames are enforced,
proofs can fail, counterexamples replay."""

from __future__ import annotations

import random

import pytest
import z3

from model import (
    ActionNotEnabled,
    ArrayValue,
    Bool,
    ConcreteOps,
    DomainError,
    Encoding,
    FrameError,
    Int,
    Model,
    ModelDefinition,
    ModelError,
    Ops,
    State,
    Status,
    Term,
    Transition,
    Variant,
    check_variant,
)
from model._z3 import new_solver

from ._lockserv import LOCKSERV, Phase


def test_concrete_interpretation_steps_and_guards() -> None:
    model = LOCKSERV.model()
    [initial] = model.initial_states()
    assert initial.held == ArrayValue({0: False, 1: False}, ConcreteOps())
    after = model.step(initial, "lock", {"n": 1})
    assert after.held[1] is True
    assert after.phase is Phase.GRANTED
    assert not model.enabled(after, "lock", {"n": 0})
    with pytest.raises(ActionNotEnabled):
        model.step(after, "lock", {"n": 0})
    assert model.check_invariants(after) == []
    with pytest.raises(KeyError):
        model.step(after, "lock", {"n": 7})


def test_validate_refuses_every_value_outside_its_domain() -> None:
    """An array over another index set, an array item or a scalar outside its sort: refused,
    every time (the index sets are remembered per model after the first state)."""
    model = LOCKSERV.model()
    [initial] = model.initial_states()
    ops = ConcreteOps()
    bad = [
        ("held is not an array", initial.replace(held=False)),
        ("held is not an array", initial.replace(held=ArrayValue({0: False}, ops))),
        ("held is not an array", initial.replace(held=ArrayValue({0: False, 2: False}, ops))),
        (r"held\[1\] = 1 is outside", initial.replace(held=ArrayValue({0: False, 1: 1}, ops))),
        ("grants_count = 4 is outside", initial.replace(grants_count=4)),
        ("server_free = 0 is outside", initial.replace(server_free=0)),
    ]
    for _ in range(2):
        model.validate(initial)
        model.validate(initial.replace(held=ArrayValue({1: True, 0: False}, ops)))
        for message, state in bad:
            with pytest.raises(DomainError, match=message):
                model.validate(state)


def test_shipped_variant_is_proved_and_false_invariant_violated() -> None:
    result = check_variant(LOCKSERV, "shipped")
    assert result.result("MUTEX").status is Status.PROVED
    assert result.result("HELD_MEANS_TAKEN").status is Status.PROVED
    few = result.result("FEW_GRANTS")
    assert few.status is Status.VIOLATED
    assert few.counterexample is not None
    assert few.counterexample.length == 5
    assert few.counterexample.replayed
    assert result.witnesses[0].reached
    assert result.ok, result.problems()


def test_known_bad_variant_counterexample_names_instances() -> None:
    result = check_variant(LOCKSERV, "no_free_check")
    mutex = result.result("MUTEX")
    assert mutex.status is Status.VIOLATED
    assert mutex.counterexample is not None
    labels = [str(step.action) for step in mutex.counterexample.steps[1:]]
    assert sorted(labels) == ["lock(n=0)", "lock(n=1)"]
    changed = {change[0] for change in mutex.counterexample.steps[1].changes}
    assert "server_free" in changed
    assert result.ok, result.problems()


def test_frame_is_enforced_both_ways() -> None:
    model = LOCKSERV.model("leak_frame")
    [initial] = model.initial_states()
    locked = model.step(initial, "lock", {"n": 0})
    with pytest.raises(FrameError):
        model.step(locked, "unlock", {"n": 0})
    result = check_variant(LOCKSERV, "leak_frame")
    assert not result.ok
    assert any("frame" in problem for problem in result.problems())


def test_non_inductive_invariant_is_not_proved() -> None:
    """Without its lemma, MUTEX is true but not inductive: the report must say which pair."""

    def build(variant: Variant) -> Model:
        model = LOCKSERV.build(variant)
        invariant = model.invariants["MUTEX"]
        model.invariants["MUTEX"] = type(invariant)(
            invariant.name, invariant.body, invariant.kind, (), invariant.doc)
        return model

    weak = ModelDefinition("weak", "no lemma", build, (Variant("shipped", "", shipped=True),), 4)
    result = check_variant(weak)
    mutex = result.result("MUTEX")
    assert mutex.status is Status.HOLDS
    assert mutex.status_text == "holds to depth 4"
    assert "not preserved by action" in mutex.note
    assert "lock(n=" in mutex.note or "unlock(n=" in mutex.note


def test_unreachable_witness_is_a_problem() -> None:
    def build(variant: Variant) -> Model:
        model = LOCKSERV.build(variant)

        @model.witness("BOTH_HELD")
        def both(o: Ops, s: State) -> Term:
            return o.And(s.held[0], s.held[1])

        return model

    definition = ModelDefinition(
        "vacuous", "", build, (Variant("shipped", "", shipped=True,
                                       expected={"FEW_GRANTS": Status.VIOLATED}),), 3)
    result = check_variant(definition)
    assert any("BOTH_HELD" in problem for problem in result.problems())


def test_bad_expectation_is_reported() -> None:
    definition = ModelDefinition(
        "lockserv", "", LOCKSERV.build,
        (Variant("shipped", "", shipped=True, expected={"MUTEX": Status.VIOLATED}),), 3)
    result = check_variant(definition)
    assert any("MUTEX is proved, expected violated" in p for p in result.problems())
    with pytest.raises(ValueError, match="depth"):
        check_variant(definition, depth=0)


def _random_state(model: Model, rng: random.Random) -> State:
    values: dict[str, Term] = {}
    for name, variable in model.variables.items():
        options = variable.sort.values()
        if variable.is_array:
            values[name] = ArrayValue(
                {key: rng.choice(options) for key in variable.index_keys()}, ConcreteOps())
        else:
            values[name] = rng.choice(options)
    return State(values)


def _pin(encoding: Encoding, symbolic: State, concrete: State) -> list[object]:
    lift = encoding.lift
    constraints: list[object] = []
    for name, variable in encoding.model.variables.items():
        if variable.is_array:
            for key in variable.index_keys():
                constraints.append(symbolic[name][key] == lift(concrete[name][key]))
        else:
            constraints.append(symbolic[name] == lift(concrete[name]))
    return constraints


def _agree_on(model: Model, rng: random.Random, count: int) -> int:
    """Compare guards, successors and invariants of both readings on ``count`` random states;
    returns how many enabled steps were compared."""
    encoding = Encoding(model)
    pre = encoding.state("pre")
    post = encoding.state("post")
    compared = 0
    for _ in range(count):
        state = _random_state(model, rng)
        for name in model.invariants:
            solver = new_solver()
            solver.add(*_pin(encoding, pre, state))
            solver.add(encoding.invariant(name, pre))
            assert (solver.check() == z3.sat) == model.holds(state, name), name
        for instance in model.instances():
            enabled = model.enabled(state, instance.action.name, dict(instance.args))
            solver = new_solver()
            solver.add(*_pin(encoding, pre, state))
            solver.add(encoding.transition(instance, pre, post))
            assert (solver.check() == z3.sat) == enabled, instance.label
            if enabled:
                try:
                    expected = model.step_instance(state, instance)
                except DomainError:
                    continue
                assert encoding.decode(solver.model(), post) == expected, instance.label
                compared += 1
    return compared


@pytest.mark.parametrize("seed", range(5))
def test_concrete_equals_symbolic_on_random_states(seed: int) -> None:
    """For random states: guards, successors and invariants agree between the two readings."""
    rng = random.Random(seed)
    for variant in ("shipped", "no_free_check"):
        _agree_on(LOCKSERV.model(variant), rng, 10)


@pytest.mark.parametrize(
    ("name", "variant"),
    [("replica_move", "shipped"), ("move_recovery", "kip113_as_written"),
     ("log_dir_failure", "shipped"), ("throttle", "rate_change_refills"),
     ("controller", "shipped")],
)
def test_models_agree_concretely_and_symbolically(name: str, variant: str) -> None:
    from model.registry import find

    rng = random.Random(name)
    assert _agree_on(find(name).model(variant), rng, 3) > 0


def test_narrow_integers_refuse_what_does_not_fit() -> None:
    narrow = Model("narrow", int_bits=4)
    narrow.var("x", Int(0, 3))
    encoding = Encoding(narrow)
    assert encoding.lift(7).size() == 4
    with pytest.raises(ModelError, match="does not fit"):
        encoding.lift(8)
    too_wide = Model("too_wide", int_bits=4)
    too_wide.var("x", Int(0, 4))
    with pytest.raises(ModelError, match="does not fit"):
        Encoding(too_wide)
    with pytest.raises(ModelError):
        Model("zero", int_bits=1)


def test_action_selector_has_its_own_width() -> None:
    model = LOCKSERV.model("shipped")
    encoding = Encoding(model)
    count = len(model.instances())
    assert 2 ** encoding.selector_bits >= count > 2 ** (encoding.selector_bits - 1)
    assert encoding.selector("act@0").size() == encoding.selector_bits


def test_tiny_model_with_failing_proof() -> None:
    """A counter that may exceed its claimed bound: BMC finds it at exactly depth 2."""

    def build(variant: Variant) -> Model:
        m = Model("counter")
        m.var("count", __import__("model").Int(0, 5))
        m.var("stopped", Bool())

        @m.init()
        def init(o: Ops) -> dict[str, Term]:
            return {"count": 0, "stopped": False}

        @m.action(modifies=["count"])
        def tick(o: Ops, s: State) -> Transition:
            return Transition(o.And(o.Not(s.stopped), s.count < 5), {"count": s.count + 1})

        @m.invariant("BELOW_TWO")
        def below_two(o: Ops, s: State) -> Term:
            return s.count < 2

        @m.witness("ONE")
        def one(o: Ops, s: State) -> Term:
            return s.count == 1

        return m

    definition = ModelDefinition(
        "counter", "", build,
        (Variant("shipped", "", shipped=True, expected={"BELOW_TWO": Status.VIOLATED}),), 5)
    result = check_variant(definition)
    below = result.result("BELOW_TWO")
    assert below.status is Status.VIOLATED
    assert below.depth == 2
    assert below.counterexample is not None
    assert [step.action for step in below.counterexample.steps] == [None, "tick", "tick"]
    assert below.counterexample.steps[-1].changes == (("count", "1", "2"),)
    assert result.ok
