"""Discovery of ``MODELS`` in the modules of a package."""

from __future__ import annotations

import pytest

from model import ModelDefinition, registry

PACKAGE = "tests.model.registry_fixture"


def test_discovers_public_modules_with_models() -> None:
    found = registry.discover(PACKAGE)
    assert [definition.name for definition in found] == ["lockserv"]
    assert registry.find("lockserv", PACKAGE).depth == 6


def test_unknown_model_lists_known_names() -> None:
    with pytest.raises(KeyError, match="known: lockserv"):
        registry.find("nope", PACKAGE)


def test_model_package_definitions_are_well_formed() -> None:
    for definition in registry.discover():
        assert isinstance(definition, ModelDefinition)
        assert definition.shipped.shipped
        assert definition.depth >= 1
        assert len({variant.name for variant in definition.variants}) == len(
            definition.variants)
