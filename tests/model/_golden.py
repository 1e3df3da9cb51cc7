"""Golden expectations of the models, one format for all: for every variant, the depth it was
checked to, each invariant's status (with, when violated, the counterexample's length, its
initial state as an index into ``Model.initial_states()`` and its steps as action-instance
labels) and each witness's depth; and what every model's tests check against them (coverage,
expectations, counterexamples replayed concretely, the full re-check).

Regenerate after a deliberate model change and review the diff::

    .venv/bin/python -m tests.model._golden replication controller

The default test runs replay the stored counterexamples through the concrete interpretation
(fast); the slow runs re-check every variant with Z3 and compare the whole record (checks are
deterministic: pinned seeds, a fresh Z3 context per variant).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from model import (
    ActionInstance,
    ActionNotEnabled,
    Model,
    ModelDefinition,
    State,
    Status,
    Trace,
    VariantResult,
    check_variant,
)
from model._report import flatten_state
from model.registry import find

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"


def golden_path(model: str) -> Path:
    """Where a model's golden file lives."""
    return GOLDEN_DIR / f"{model}.json"


def load(model: str) -> dict[str, Any]:
    """A model's golden file."""
    data: dict[str, Any] = json.loads(golden_path(model).read_text(encoding="utf-8"))
    return data


def by_name(result: VariantResult) -> dict[str, Any]:
    """A checked variant's invariant results by name."""
    return {invariant.name: invariant for invariant in result.invariants}


def record(result: VariantResult, model: Model) -> dict[str, Any]:
    """The golden record of one checked variant (``model``: that variant's model)."""
    initial_states = [flatten_state(state) for state in model.initial_states()]
    invariants: dict[str, dict[str, Any]] = {}
    for invariant in result.invariants:
        entry: dict[str, Any] = {"status": invariant.status.value}
        trace = invariant.counterexample
        if invariant.status is Status.VIOLATED and trace is not None:
            entry["length"] = trace.length
            entry["trace"] = [step.action or "" for step in trace.steps[1:]]
            entry["initial"] = initial_states.index(dict(trace.steps[0].state))
        invariants[invariant.name] = entry
    return {
        "depth": result.depth,
        "invariants": invariants,
        "witnesses": {witness.name: witness.trace.length if witness.trace else None
                      for witness in result.witnesses},
    }


def run(model: Model, initial: State, labels: Sequence[str]) -> State:
    """Take the steps named by their instance labels (``crash(r=1, keep=0)``), concretely.

    Raises:
        ActionNotEnabled: a step is not enabled in ``model``.
        KeyError: a step names an action instance ``model`` does not have.
    """
    instances: dict[str, ActionInstance] = {
        instance.label: instance for instance in model.instances()
    }
    state = initial
    for label in labels:
        state = model.step_instance(state, instances[label])
    return state


def replay(model: Model, trace: Trace) -> State:
    """Replay a counterexample's steps from its own initial state through ``model``.

    Raises:
        ActionNotEnabled: a step is not enabled in ``model`` (e.g. the shipped variant).
        KeyError: a step names an action instance ``model`` does not have.
    """
    initial = [state for state in model.initial_states()
               if flatten_state(state) == dict(trace.steps[0].state)]
    assert len(initial) == 1, "the trace starts in exactly one initial state"
    return run(model, initial[0], [step.action or "" for step in trace.steps[1:]])


def regenerate(name: str) -> None:
    """Check every variant of a model and write its golden file."""
    definition = find(name)
    variants: dict[str, Any] = {}
    for variant in definition.variants:
        start = time.perf_counter()
        result = check_variant(definition, variant, clock=time.perf_counter)
        variants[variant.name] = record(result, definition.model(variant.name))
        print(f"{name}/{variant.name}: {time.perf_counter() - start:.1f}s "
              f"{'ok' if result.ok else result.problems()}")
    text = json.dumps({"model": name, "depth": definition.depth, "variants": variants},
                      indent=2) + "\n"
    golden_path(name).write_text(text, encoding="utf-8")


class ModelGolden:
    """One model definition with its golden file, and checks cached per (variant, depth)."""

    def __init__(self, definition: ModelDefinition) -> None:
        self.definition = definition
        self.golden: dict[str, Any] = load(definition.name)
        self.known_bad = [variant.name for variant in definition.variants if not variant.shipped]
        self._checked: dict[tuple[str, int], VariantResult] = {}

    def check(self, variant: str, depth: int) -> VariantResult:
        """One check, shared by the tests that read it (checks are deterministic)."""
        key = (variant, depth)
        if key not in self._checked:
            self._checked[key] = check_variant(self.definition, variant, depth=depth)
        return self._checked[key]

    def violated(self, variant: str) -> dict[str, dict[str, Any]]:
        """The golden file's violated invariants of ``variant``."""
        invariants: dict[str, dict[str, Any]] = self.golden["variants"][variant]["invariants"]
        return {name: entry for name, entry in invariants.items() if entry["status"] == "violated"}

    def violations(self) -> list[tuple[str, str, int]]:
        """Every (known-bad variant, violated invariant, counterexample length) in the file."""
        return [
            (variant, name, entry["length"])
            for variant in self.known_bad
            for name, entry in self.violated(variant).items()
        ]

    def assert_covers_every_variant_and_invariant(self) -> None:
        """The golden file names every variant and, for each, exactly its invariants."""
        assert self.golden["depth"] == self.definition.depth
        assert set(self.golden["variants"]) == {v.name for v in self.definition.variants}
        for variant in self.definition.variants:
            golden = self.golden["variants"][variant.name]
            assert golden["depth"] == (variant.depth or self.definition.depth)
            names = set(self.definition.model(variant.name).invariants)
            assert set(golden["invariants"]) == names

    def assert_expectations_agree(self, complete: bool = True) -> None:
        """Each variant's ``expected`` statuses are the golden file's (and, when ``complete``,
        every variant declares a status for every invariant)."""
        for variant in self.definition.variants:
            golden = {name: entry["status"] for name, entry
                      in self.golden["variants"][variant.name]["invariants"].items()}
            declared = {name: status.value for name, status in variant.expected.items()}
            if complete:
                assert declared == golden, variant.name
            else:
                assert declared == {name: golden[name] for name in declared}, variant.name

    def assert_golden_counterexample_replays(self, variant: str, name: str) -> None:
        """The stored counterexample breaks ``name`` concretely at its last step, not before."""
        entry = self.violated(variant)[name]
        labels: list[str] = entry["trace"]
        assert len(labels) == entry["length"]
        model = self.definition.model(variant)
        initial = model.initial_states()[entry["initial"]]
        assert not model.holds(run(model, initial, labels), name)
        assert model.holds(run(model, initial, labels[:-1]), name), "not the shortest trace"

    def assert_counterexample_found_and_replays(self, variant: str) -> None:
        """Z3 finds each golden counterexample of ``variant`` at its length; replayed concretely
        it breaks the invariant in the variant, and the shipped protocol refuses a step or keeps
        the invariant."""
        violated = self.violated(variant)
        result = self.check(variant, max(entry["length"] for entry in violated.values()))
        assert result.errors == ()
        invariants = by_name(result)
        bad_model = self.definition.model(variant)
        shipped_model = self.definition.model()
        for name, entry in violated.items():
            invariant = invariants[name]
            assert invariant.status is Status.VIOLATED, name
            trace = invariant.counterexample
            assert trace is not None
            assert trace.replayed
            assert trace.length == entry["length"]
            assert not bad_model.holds(replay(bad_model, trace), name)
            try:
                final = replay(shipped_model, trace)
            except (ActionNotEnabled, KeyError):
                continue
            assert shipped_model.holds(final, name)

    def assert_full_check_matches(self, variant: str) -> None:
        """A full check at the variant's depth reproduces the golden record exactly."""
        result = check_variant(self.definition, variant)
        assert result.errors == ()
        assert not result.problems()
        assert record(result, self.definition.model(variant)) == (
            self.golden["variants"][variant])


if __name__ == "__main__":
    for argument in sys.argv[1:]:
        regenerate(argument)
