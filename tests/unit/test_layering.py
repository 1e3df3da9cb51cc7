"""Sans-IO cores never import trio, kazoo, os or any other I/O module (STYLE.md item 3).

A module declares itself a core with a module-level ``__sans_io__ = True``; this test parses every
such module under impl/, model/ and conformance/ and rejects forbidden imports, including
``from x import y`` and imports nested in functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("impl", "model", "conformance")
FORBIDDEN_MODULES = frozenset(
    {"trio", "kazoo", "os", "socket", "subprocess", "shutil", "pathlib", "threading", "asyncio",
     "select", "selectors", "signal", "time", "tempfile", "fcntl", "mmap"}
)


def _is_sans_io(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__sans_io__" for target in node.targets
        ):
            return isinstance(node.value, ast.Constant) and node.value.value is True
    return False


def forbidden_imports(source: str) -> list[str]:
    """The forbidden top-level module names ``source`` imports."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            names = [node.module]
        found.extend(name for name in names if name.split(".")[0] in FORBIDDEN_MODULES)
    return found


def sans_io_modules() -> list[Path]:
    """Every module under the packages that declares ``__sans_io__ = True``."""
    modules: list[Path] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if _is_sans_io(ast.parse(path.read_text())):
                modules.append(path)
    return modules


def test_checker_catches_forbidden_imports() -> None:
    assert forbidden_imports("import os\n") == ["os"]
    assert forbidden_imports("def f():\n    from trio import sleep\n") == ["trio"]
    assert forbidden_imports("import kazoo.client as k\n") == ["kazoo.client"]
    assert forbidden_imports("from os.path import join\n") == ["os.path"]
    assert forbidden_imports("import dataclasses\nfrom . import os\n") == []


def test_there_are_sans_io_cores() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in sans_io_modules()}
    assert "impl/trace.py" in names


@pytest.mark.parametrize(
    "path", sans_io_modules(), ids=lambda path: path.relative_to(ROOT).as_posix()
)
def test_sans_io_core_imports_no_io(path: Path) -> None:
    assert forbidden_imports(path.read_text()) == [], f"{path} is a sans-IO core"
