"""The shipped zip: reproducible, complete, and importable where logproof is not installed."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from spark import PROJECT_PACKAGES, build_zip
from spark._ship import packages_to_ship


def test_zip_is_reproducible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a package of its own: the project's files change while other work goes on
    package = tmp_path / "source" / "shipme"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("X = 1\n")
    (package / "inner" / "__init__.py").write_text("")
    (package / "inner" / "mod.py").write_text("Y = 2\n")
    (package / "inner" / "data.bin").write_bytes(b"\0")
    monkeypatch.syspath_prepend(str(tmp_path / "source"))
    first = build_zip(tmp_path / "a.zip", ["shipme"])
    os.utime(package / "inner" / "mod.py", (0, 0))
    second = build_zip(tmp_path / "b.zip", ["shipme"])
    assert first.sha256 == second.sha256
    assert first.members == (
        "shipme/__init__.py",
        "shipme/inner/__init__.py",
        "shipme/inner/mod.py",
    )
    (package / "inner" / "mod.py").write_text("Y = 3\n")
    assert build_zip(tmp_path / "c.zip", ["shipme"]).sha256 != first.sha256


def test_zip_holds_the_project_packages_and_no_bytecode(tmp_path: Path) -> None:
    shipped = build_zip(tmp_path / "p.zip")
    for package in PROJECT_PACKAGES:
        assert f"{package}/__init__.py" in shipped.members
    assert "spark/_runner.py" in shipped.members
    assert not [name for name in shipped.members if "__pycache__" in name or name.endswith(".pyc")]
    with zipfile.ZipFile(shipped.path) as archive:
        assert sorted(archive.namelist()) == list(shipped.members)


def test_nested_package_ships_with_its_parents(tmp_path: Path) -> None:
    packages = packages_to_ship("tests.integration.spark.seeded_runner")
    assert packages == (*PROJECT_PACKAGES, "tests.integration.spark")
    shipped = build_zip(tmp_path / "t.zip", packages)
    assert "tests/__init__.py" in shipped.members
    assert "tests/integration/__init__.py" in shipped.members
    assert "tests/integration/spark/seeded_runner.py" in shipped.members
    assert "tests/unit/__init__.py" not in shipped.members


def test_zip_imports_in_an_interpreter_without_logproof(tmp_path: Path) -> None:
    shipped = build_zip(
        tmp_path / "p.zip", packages_to_ship("tests.integration.spark.seeded_runner")
    )
    # -I -S: no site-packages at all (so no editable install of logproof), no current directory
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "assert not [p for p in sys.path if 'site-packages' in p], sys.path; "
        "import spark._runner, tests.integration.spark.seeded_runner as r; "
        "print(spark._runner.__file__); print(r.run_seed(1, r.swarm_config(1, brokers=3, "
        "log_dirs=2, steps=5)).verdict); print(spark.code_version())"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(shipped.path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    module_file, verdict, version = result.stdout.split()
    assert module_file == f"{shipped.path}/spark/_runner.py"
    assert verdict == "pass"
    assert version == f"zip-{shipped.sha256[:16]}"
