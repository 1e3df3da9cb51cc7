"""A dataclass whose ``__init__`` is written out behaves as the generated one would.

Compiled by mypyc, a dataclass keeps the methods ``dataclasses`` generates, which run
interpreted: a frozen one's constructor is an interpreted function calling ``object.__setattr__``
per field (about 7 times the cost of a compiled one). The classes the simulator builds most
often therefore write their ``__init__`` out (CONTRIBUTING.md, "Dataclasses on hot paths"); the
field list is then written twice, and this test holds the two together: the same parameters in
the order of the fields, the same defaults (a default factory's value; a new object per instance
where the factory makes a mutable one), every field set, and no ``__post_init__`` the written-out
constructor would skip.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("impl", "model", "conformance")


def _is_dataclass_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return (isinstance(target, ast.Name) and target.id == "dataclass") or (
        isinstance(target, ast.Attribute) and target.attr == "dataclass")


def written_out(source: str) -> list[str]:
    """The names of the top-level dataclasses in ``source`` whose body defines ``__init__``."""
    found: list[str] = []
    for node in ast.parse(source).body:
        if (isinstance(node, ast.ClassDef)
                and any(_is_dataclass_decorator(item) for item in node.decorator_list)
                and any(isinstance(item, ast.FunctionDef) and item.name == "__init__"
                        for item in node.body)):
            found.append(node.name)
    return found


def _classes() -> list[tuple[str, str]]:
    classes: list[tuple[str, str]] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            classes.extend((module, name) for name in written_out(path.read_text()))
    return classes


CLASSES = _classes()
_MISSING = object()


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return _MISSING


def mismatches(cls: type) -> list[str]:
    """How ``cls``'s written-out ``__init__`` differs from the one ``dataclasses`` would make."""
    problems: list[str] = []
    if "__post_init__" in vars(cls):
        problems.append("defines __post_init__, which a written-out __init__ does not call")
    fields = dataclasses.fields(cls)
    init_fields = [field for field in fields if field.init]
    parameters = list(inspect.signature(vars(cls)["__init__"]).parameters.values())[1:]
    if [parameter.name for parameter in parameters] != [field.name for field in init_fields]:
        return [*problems, f"parameters {[p.name for p in parameters]} are not the fields "
                           f"{[f.name for f in init_fields]}"]
    required: dict[str, object] = {}
    for parameter, field in zip(parameters, init_fields, strict=True):
        default = _default(field)
        if default is _MISSING:
            required[field.name] = object()
            if parameter.default is not inspect.Parameter.empty:
                problems.append(f"{field.name}: a default the field does not have")
    # Every field as the dataclass would default it, given only the required ones.
    first, second = cls(**required), cls(**required)
    for field in fields:
        value = getattr(first, field.name)
        expected = required[field.name] if field.name in required else _default(field)
        if value is not expected and value != expected:
            problems.append(f"{field.name}: defaults to {value!r}, the field to {expected!r}")
        if (field.default_factory is not dataclasses.MISSING
                and isinstance(value, list | dict | set)
                and value is getattr(second, field.name)):
            problems.append(f"{field.name}: one {type(value).__name__} shared by every instance")
    # Every parameter given: every field is what was passed.
    given = {field.name: object() for field in init_fields}
    instance = cls(**given)
    problems.extend(f"{name}: not set from its parameter" for name, value in given.items()
                    if getattr(instance, name) is not value)
    return problems


def test_classes_found() -> None:
    names = {name for _, name in CLASSES}
    assert {"TraceEvent", "BatchHeader", "ModelAction", "_Plan"} <= names


@pytest.mark.parametrize(("module", "name"), CLASSES, ids=[f"{m}.{n}" for m, n in CLASSES])
def test_written_out_init_matches_the_fields(module: str, name: str) -> None:
    assert mismatches(getattr(importlib.import_module(module), name)) == []


def test_the_check_finds_each_kind_of_difference() -> None:
    @dataclasses.dataclass(frozen=True)
    class Good:
        a: int
        b: dict[str, int] = dataclasses.field(default_factory=dict)
        c: int = 3

        def __init__(self, a: int, b: dict[str, int] | None = None, c: int = 3) -> None:
            object.__setattr__(self, "a", a)
            object.__setattr__(self, "b", {} if b is None else b)
            object.__setattr__(self, "c", c)

    assert mismatches(Good) == []

    @dataclasses.dataclass(frozen=True)
    class Reordered:
        a: int
        c: int = 3

        def __init__(self, c: int = 3, a: int = 0) -> None:
            object.__setattr__(self, "a", a)
            object.__setattr__(self, "c", c)

    assert mismatches(Reordered)[0].startswith("parameters")

    @dataclasses.dataclass(frozen=True)
    class WrongDefault:
        a: int
        c: int = 3

        def __init__(self, a: int, c: int = 4) -> None:
            object.__setattr__(self, "a", a)
            object.__setattr__(self, "c", c)

    assert mismatches(WrongDefault) == ["c: defaults to 4, the field to 3"]

    @dataclasses.dataclass
    class Shared:
        a: list[int] = dataclasses.field(default_factory=list)

        def __init__(self, a: list[int] = []) -> None:  # noqa: B006 (the mistake checked)
            self.a = a

    assert mismatches(Shared) == ["a: one list shared by every instance"]

    @dataclasses.dataclass(frozen=True)
    class Unset:
        a: int
        c: int = 3

        def __init__(self, a: int, c: int = 3) -> None:
            object.__setattr__(self, "a", a)
            object.__setattr__(self, "c", 3)

    assert mismatches(Unset) == ["c: not set from its parameter"]

    @dataclasses.dataclass(frozen=True)
    class PostInit:
        a: int

        def __init__(self, a: int) -> None:
            object.__setattr__(self, "a", a)

        def __post_init__(self) -> None:
            pass

    assert mismatches(PostInit)[0].startswith("defines __post_init__")
    assert written_out("@dataclass(frozen=True)\nclass A:\n    def __init__(self): ...\n"
                       "@dataclasses.dataclass\nclass B:\n    def __init__(self): ...\n"
                       "class C:\n    def __init__(self): ...\n") == ["A", "B"]
