"""What the replication, controller and reassignment tests share: one model's golden file and
the checks every model gets (golden coverage, expectations, counterexamples replayed concretely,
the full re-check).

The golden file ``golden/<model>.json`` records the model's default depth and, for every variant,
each invariant's status (with the length of its counterexample when violated) and each witness's
depth.
"""

from __future__ import annotations

import json
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

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"


def by_name(result: VariantResult) -> dict[str, Any]:
    """A checked variant's invariant results by name."""
    return {invariant.name: invariant for invariant in result.invariants}


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


class ModelGolden:
    """One model definition with its golden file, and checks cached per (variant, depth)."""

    def __init__(self, definition: ModelDefinition) -> None:
        self.definition = definition
        self.golden: dict[str, Any] = json.loads(
            (GOLDEN_DIR / f"{definition.name}.json").read_text()
        )
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
            names = set(self.definition.model(variant.name).invariants)
            assert set(self.golden["variants"][variant.name]["invariants"]) == names

    def assert_expectations_agree(self) -> None:
        """Each variant's ``expected`` statuses are the golden file's."""
        for variant in self.definition.variants:
            golden = self.golden["variants"][variant.name]["invariants"]
            assert {name: status.value for name, status in variant.expected.items()} == {
                name: entry["status"] for name, entry in golden.items()
            }

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
        """A full check at the model's default depth reproduces the golden record."""
        result = check_variant(self.definition, variant)
        assert result.errors == ()
        golden = self.golden["variants"][variant]
        for invariant in result.invariants:
            entry = golden["invariants"][invariant.name]
            assert invariant.status.value == entry["status"], invariant.name
            if invariant.counterexample is not None:
                assert invariant.counterexample.length == entry["length"]
        assert {witness.name: witness.trace.length if witness.trace else None
                for witness in result.witnesses} == golden["witnesses"]
        assert not result.problems()
