"""Checking many variants at once, one worker process per core (the shell around ``_check``).

Variants are independent, so :func:`check_in_parallel` hands each (model, variant) to a worker
process; a worker looks the model up by name in the registry (definitions hold closures and do
not travel between processes), checks the variant and returns its result as JSON. Results come
back in the order of the definitions and their variants, whatever order the workers finish in.
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
from ._dsl import ModelDefinition
from ._report import Report, VariantResult
from ._z3 import SOLVER_SEED
from .registry import find


def default_jobs() -> int:
    """One worker per available core."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - platforms without affinity masks
        return max(1, os.cpu_count() or 1)


def _check_by_name(model: str, variant: str, depth: int | None) -> Any:
    result = check_variant(find(model), variant, depth, time.perf_counter)
    return result.to_json()


def check_in_parallel(
    definitions: list[ModelDefinition],
    variant: str | None = None,
    depth: int | None = None,
    jobs: int = 1,
    meta: Mapping[str, str] | None = None,
) -> Report:
    """Check every variant of every definition (or only ``variant``), ``jobs`` at a time.

    Args:
        definitions: registered model definitions (looked up again by name in the workers).
        variant: only this variant of each model, when given.
        depth: the bound for every model (each variant's default when ``None``).
        jobs: worker processes; 1 checks in this process (and then also accepts definitions
            the registry does not know).
        meta: free-form text fields stored in the report.

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
    tasks = [
        (definition.name, chosen.name)
        for definition in definitions
        for chosen in (definition.variants if variant is None
                       else (definition.variant(variant),))
    ]
    if jobs == 1 or len(tasks) <= 1:
        return check_definitions(definitions, variant, depth, time.perf_counter, meta)
    start = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=context) as pool:
        futures = [pool.submit(_check_by_name, model, name, depth) for model, name in tasks]
        results = tuple(VariantResult.from_json(future.result()) for future in futures)
    return Report(
        results=results,
        solver=f"z3 {z3.get_version_string()}",
        seed=SOLVER_SEED,
        seconds=time.perf_counter() - start,
        meta={**dict(meta or {}), "jobs": str(jobs)},
    )
