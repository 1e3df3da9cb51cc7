"""Golden expectations of the models: every (variant, invariant) status, the witnesses' depths,
and every safety counterexample as its initial state (an index into ``Model.initial_states()``)
and the list of action instances it takes.

Regenerate after a deliberate model change and review the diff::

    .venv/bin/python -m tests.model._golden replica_move move_recovery

The default test run replays the stored counterexamples through the concrete interpretation (fast);
the slow run re-checks every variant with Z3 and compares the whole record.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from model import Model, State, VariantResult, check_variant
from model._report import flatten_state
from model.registry import find

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"


def golden_path(model: str) -> Path:
    """Where a model's golden file lives."""
    return GOLDEN_DIR / f"{model}.json"


def record(result: VariantResult, model: Model) -> dict[str, Any]:
    """The golden record of one checked variant (``model``: that variant's model)."""
    initial_states = [flatten_state(state) for state in model.initial_states()]
    counterexamples: dict[str, dict[str, Any]] = {}
    for invariant in result.invariants:
        trace = invariant.counterexample
        if trace is not None and invariant.kind == "safety":
            counterexamples[invariant.name] = {
                "initial": initial_states.index(dict(trace.steps[0].state)),
                "steps": [{"action": step.action_name, "args": dict(step.args)}
                          for step in trace.steps[1:]],
            }
    return {
        "depth": result.depth,
        "statuses": {invariant.name: invariant.status.value for invariant in result.invariants},
        "witnesses": {witness.name: witness.depth if witness.reached else None
                      for witness in result.witnesses},
        "counterexamples": counterexamples,
    }


def load(model: str) -> dict[str, Any]:
    """A model's golden file."""
    data: dict[str, Any] = json.loads(golden_path(model).read_text(encoding="utf-8"))
    return data


def replay(model: Model, steps: list[dict[str, Any]], initial: int = 0) -> State:
    """Run stored action instances from initial state number ``initial``, concretely."""
    state = model.initial_states()[initial]
    for step in steps:
        params = model.parse_args(step["action"], step["args"])
        state = model.step(state, step["action"], params)
    return state


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
    text = json.dumps({"model": name, "variants": variants}, indent=2) + "\n"
    golden_path(name).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    for argument in sys.argv[1:]:
        regenerate(argument)
