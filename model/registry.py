"""Discovery of every model definition: each module of ``model/`` with a module-level ``MODELS``.

A model engineer adds ``model/<machine>.py`` defining ``MODELS = (ModelDefinition(...), ...)``;
``logproof check``, the benchmarks and the tests find it here without any list to edit.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence

from ._dsl import ModelDefinition, ModelError

__sans_io__ = True


def discover(package: str = "model") -> list[ModelDefinition]:
    """Every model definition of the package's public modules, sorted by model name.

    Args:
        package: the package to scan (``model``).

    Returns:
        The definitions.

    Raises:
        ModelError: a ``MODELS`` entry is not a :class:`ModelDefinition`, or two share a name.
    """
    root = importlib.import_module(package)
    found: dict[str, ModelDefinition] = {}
    for info in sorted(pkgutil.iter_modules(root.__path__), key=lambda item: item.name):
        if info.name.startswith("_") or info.name == "registry":
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        definitions: Sequence[object] | None = getattr(module, "MODELS", None)
        if definitions is None:
            continue
        for definition in definitions:
            if not isinstance(definition, ModelDefinition):
                raise ModelError(f"{package}.{info.name}.MODELS holds {definition!r}")
            if definition.name in found:
                raise ModelError(f"two models are called {definition.name}")
            found[definition.name] = definition
    return [found[name] for name in sorted(found)]


def find(name: str, package: str = "model") -> ModelDefinition:
    """The model definition called ``name``.

    Raises:
        KeyError: no module defines it (the message lists the known names).
    """
    definitions = {definition.name: definition for definition in discover(package)}
    if name not in definitions:
        known = ", ".join(sorted(definitions)) or "none"
        raise KeyError(f"unknown model {name!r} (known: {known})")
    return definitions[name]
