"""Checking many variants at once, one worker process per core (the shell around ``_check``).

Variants are independent, so :func:`check_in_parallel` hands each (model, variant) to a worker
process; a worker looks the model up by name in the registry (definitions hold closures and do
not travel between processes), checks the variant and returns its result as JSON. Results come
back in the order of the definitions and their variants, whatever order the workers finish in.

Variants are handed out largest first (an estimate from the model's size: action instances times
state cells times invariants), so that the longest checks do not start last and leave one core idle
at the end while the other finishes them.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import z3

from ._check import check_definitions, check_variant
from ._dsl import ModelDefinition, Variant
from ._report import Report, VariantResult
from ._z3 import SOLVER_SEED
from .registry import find


def default_jobs() -> int:
    """One worker per available core."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - platforms without affinity masks
        return max(1, os.cpu_count() or 1)


def estimated_cost(definition: ModelDefinition, variant: Variant) -> int:
    """A rough size of checking one variant, to order the work (largest first)."""
    model = definition.build(variant)
    cells = sum(len(v.index_keys()) if v.is_array else 1 for v in model.variables.values())
    return len(model.instances()) * cells * max(1, len(model.invariants))


def _check_by_name(
    model: str, variant: str, depth: int | None, only: tuple[str, ...] | None
) -> Any:
    result = check_variant(find(model), variant, depth, time.perf_counter, only)
    return result.to_json()


def check_in_parallel(  # noqa: PLR0917 - the command's options, passed along
    definitions: list[ModelDefinition],
    variant: str | None = None,
    depth: int | None = None,
    jobs: int = 1,
    meta: Mapping[str, str] | None = None,
    only: tuple[str, ...] | None = None,
) -> Report:
    """Check every variant of every definition (or only ``variant``), ``jobs`` at a time.

    Args:
        definitions: registered model definitions (looked up again by name in the workers).
        variant: only this variant of each model, when given.
        depth: the bound for every model (each variant's default when ``None``).
        jobs: worker processes; 1 checks in this process (and then also accepts definitions
            the registry does not know).
        meta: free-form text fields stored in the report.
        only: a targeted search of these invariants (see ``model._check.check_variant``).

    Returns:
        The report, results in definition and variant order.

    Raises:
        ValueError: ``depth`` or ``jobs`` is below 1.
        KeyError: a model has no variant called ``variant``.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, not {jobs}")
    if depth is not None and depth < 1:
        raise ValueError(f"depth must be at least 1, not {depth}")
    chosen = [
        (definition, candidate)
        for definition in definitions
        for candidate in (definition.variants if variant is None
                          else (definition.variant(variant),))
    ]
    if jobs == 1 or len(chosen) <= 1:
        return check_definitions(definitions, variant, depth, time.perf_counter, meta, only)
    start = time.perf_counter()
    order = sorted(range(len(chosen)), key=lambda index: -estimated_cost(*chosen[index]))
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(chosen)), mp_context=context) as pool:
        futures = {
            index: pool.submit(_check_by_name, chosen[index][0].name, chosen[index][1].name,
                               depth, only)
            for index in order
        }
        results = tuple(VariantResult.from_json(futures[index].result())
                        for index in range(len(chosen)))
    return Report(
        results=results,
        solver=f"z3 {z3.get_version_string()}",
        seed=SOLVER_SEED,
        seconds=time.perf_counter() - start,
        meta={**dict(meta or {}), "jobs": str(jobs)},
    )
