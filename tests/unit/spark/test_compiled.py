"""The compiled tree's manifest: a tree is used only when built from exactly the running sources.

These tests use a stand-in tree (the sources' manifest and empty extension files, no mypyc build):
what is checked is the decision, not the compiled code (``tests/integration/spark/
test_compiled_campaign.py`` runs the real tree).
"""

from __future__ import annotations

import ast
import functools
import json
import pickle
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import spark._compiled as compiled_module
from spark import DEFAULT_RUNNER, PROJECT_PACKAGES, BaseConfig, TaskSpec, build_zip
from spark._compiled import (
    COMPILED,
    FALLBACK_LINE,
    MANIFEST,
    PACKAGES,
    ROOT,
    SOURCE,
    CompiledChoice,
    activate,
    directory_digests,
    staleness,
    zip_digests,
)
from spark._runner import run_seed_ranges


def stand_in_tree(tree: Path, sources: dict[str, str]) -> Path:
    """A tree whose manifest lists ``sources`` (no copies, empty extension files)."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for module in COMPILED:
        extension = tree / (module.removesuffix(".py") + suffix)
        extension.parent.mkdir(parents=True, exist_ok=True)
        extension.write_bytes(b"")
    manifest = {
        "cache_tag": sys.implementation.cache_tag,
        "compiled": list(COMPILED),
        "sources": sources,
    }
    (tree / MANIFEST).write_text(json.dumps(manifest))
    return tree


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of the packages, to edit."""
    root = tmp_path / "checkout"
    for package in PACKAGES:
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(ROOT / package, root / package, ignore=ignore)
    return root


def test_a_tree_built_from_the_sources_is_fresh(checkout: Path, tmp_path: Path) -> None:
    tree = stand_in_tree(tmp_path / "tree", directory_digests(checkout))
    manifest, reason = staleness(tree, directory_digests(checkout))
    assert manifest is not None, reason
    assert set(manifest.sources) >= {"impl/trace.py", "conformance/cluster_sim.py", "model/_dsl.py"}
    assert "impl/cli/cmd_fuzz.py" in manifest.sources  # every file, compiled or not


@pytest.mark.parametrize(
    "edit",
    ["change a compiled module", "change an interpreted module", "add a module", "remove one"],
)
def test_any_edit_of_the_sources_makes_the_tree_stale(
    checkout: Path, tmp_path: Path, edit: str
) -> None:
    tree = stand_in_tree(tmp_path / "tree", directory_digests(checkout))
    if edit == "change a compiled module":
        path = checkout / "conformance" / "trace_check.py"
        path.write_text(path.read_text() + "\n# edited\n")
    elif edit == "change an interpreted module":
        path = checkout / "conformance" / "runner.py"
        path.write_text(path.read_text().replace("def ", "def  ", 1))
    elif edit == "add a module":
        (checkout / "impl" / "new_module.py").write_text("X = 1\n")
    else:
        (checkout / "model" / "group_coordinator.py").unlink()
    manifest, reason = staleness(tree, directory_digests(checkout))
    assert manifest is None
    assert reason.endswith(" differs from the build")  # one file


def test_a_missing_extension_or_another_interpreter_is_stale(tmp_path: Path) -> None:
    sources = directory_digests(ROOT)
    tree = stand_in_tree(tmp_path / "tree", sources)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    (tree / ("impl/storage/log" + suffix)).unlink()
    assert staleness(tree, sources) == (None, "no extension module for impl/storage/log.py")
    other = stand_in_tree(tmp_path / "other", sources)
    value = json.loads((other / MANIFEST).read_text())
    value["cache_tag"] = "cpython-39"
    (other / MANIFEST).write_text(json.dumps(value))
    assert staleness(other, sources)[0] is None
    assert staleness(tmp_path / "nowhere", sources)[1].startswith("no readable")


def test_the_shipped_zip_has_the_manifest_s_files(tmp_path: Path) -> None:
    # a worker checks the tree against the zip's members: the same files as the checkout's
    shipped = build_zip(tmp_path / "p.zip", PROJECT_PACKAGES)
    assert zip_digests(shipped.path) == directory_digests(ROOT)


def test_a_stale_tree_is_not_activated_and_says_so(
    checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = stand_in_tree(tmp_path / "tree", directory_digests(checkout))
    path = checkout / "impl" / "broker" / "node.py"
    path.write_text(path.read_text() + "\n")
    before = list(sys.path)
    assert activate(tree, directory_digests(checkout)) == SOURCE
    assert sys.path == before
    err = capsys.readouterr().err
    assert err.startswith(FALLBACK_LINE)
    assert "impl/broker/node.py differ" in err
    assert len(err.splitlines()) == 1


def test_a_fresh_tree_is_not_activated_after_the_sources_are_imported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # this process imported impl already: the tree would only half apply
    tree = stand_in_tree(tmp_path / "tree", directory_digests(ROOT))
    before = list(sys.path)
    assert activate(tree, directory_digests(ROOT)) == SOURCE
    assert sys.path == before
    assert "is already imported from source" in capsys.readouterr().err


_CHILD = """
import json, sys
from pathlib import Path
from spark._compiled import activate, directory_digests, ROOT
tree, expected = Path(sys.argv[1]), sys.argv[2] or None
print(json.dumps([activate(tree, directory_digests(ROOT), expected=expected), sys.path[0]]))
"""


def _activate_in_a_fresh_process(tree: Path, expected: str = "") -> tuple[list[str], str]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tree), expected],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    value: list[str] = json.loads(done.stdout)
    return value, done.stderr


def test_a_fresh_tree_is_put_first_on_the_path_of_a_fresh_process(tmp_path: Path) -> None:
    tree = stand_in_tree(tmp_path / "tree", directory_digests(ROOT))
    (label, first), err = _activate_in_a_fresh_process(tree)
    assert label.startswith("compiled (manifest sha256 ")
    assert first == str(tree)
    assert err == ""
    # a driver's check names the manifest: a tree rebuilt since is refused
    (label, first), err = _activate_in_a_fresh_process(tree, expected="0" * 64)
    assert (label, first != str(tree)) == (SOURCE, True)
    assert err.startswith(FALLBACK_LINE)


_UNPICKLE = """
import pickle, sys
task = pickle.loads(sys.stdin.buffer.read())
packages = {"impl", "model", "conformance"}
print(sorted(name for name in sys.modules if name.split(".")[0] in packages))
"""


def test_a_seed_task_unpickles_without_importing_the_packages() -> None:
    # a worker unpickles the task before it activates the tree: were a simulator object (a
    # compiled frozen dataclass does not unpickle) or any module of the packages in it, the
    # sources would be imported first and the tree refused
    task = functools.partial(
        run_seed_ranges,
        TaskSpec("v", DEFAULT_RUNNER, BaseConfig(), CompiledChoice("/t", "0" * 64, "compiled")),
    )
    done = subprocess.run(
        [sys.executable, "-c", _UNPICKLE], input=pickle.dumps(task),
        capture_output=True, check=True, cwd=ROOT,
    )  # fmt: skip
    assert done.stdout.decode().strip() == "[]"


def _reused_exception_names(source: str) -> list[str]:
    """``function: name`` for every ``except ... as name`` whose name the function also binds
    otherwise (compiled, the variable keeps the type of its first binding: the exception then
    fails with ``TypeError: int object expected``)."""
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        bound = {node.arg for node in ast.walk(function) if isinstance(node, ast.arg)}
        bound |= {
            node.id
            for node in ast.walk(function)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
        }
        found += [
            f"{function.name}: {node.name}"
            for node in ast.walk(function)
            if isinstance(node, ast.ExceptHandler) and node.name in bound
        ]
    return found


def test_no_compiled_function_reuses_a_variable_for_an_exception() -> None:
    # fuzz seed 957, compiled: Node._on_fetch's ``error`` (an int) reused by ``except ... as``
    assert _reused_exception_names("def f(error: int):\n try: pass\n except E as error: pass\n")
    reused = {
        module: names
        for module in COMPILED
        if (names := _reused_exception_names((ROOT / module).read_text()))
    }
    assert reused == {}


def test_set_up_leaves_a_fresh_tree_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = stand_in_tree(tmp_path / "tree", directory_digests(ROOT))

    def no_build(*args: object, **kwargs: object) -> float:
        raise AssertionError("a fresh tree was built again")

    monkeypatch.setattr(compiled_module, "build", no_build)
    assert compiled_module.main(["--tree", str(tree), "--optional"]) == 0
    assert "is fresh (compiled (manifest sha256" in capsys.readouterr().out


@pytest.mark.parametrize("optional", [False, True])
def test_a_tree_that_cannot_be_built_fails_make_compiled_not_make_setup(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    optional: bool,
) -> None:
    # no C compiler: the build stops before it copies anything
    monkeypatch.setattr(compiled_module, "_c_compiler", lambda: None)
    tree = tmp_path / "tree"
    argv = ["--tree", str(tree), *(["--optional"] if optional else [])]
    assert compiled_module.main(argv) == (0 if optional else 1)
    captured = capsys.readouterr()
    assert "building the compiled simulator" in captured.out
    (line,) = captured.err.splitlines()
    assert line.startswith("cannot build the compiled tree: no C compiler found")
    assert line.endswith("; campaigns will run from source") == optional
    assert not (tree / MANIFEST).exists()
