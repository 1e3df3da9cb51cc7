"""Builds the mypyc-compiled modules (the produce path's record walk) where it can.

Everything else is declared in ``pyproject.toml``. The compiled extension is optional: without
mypyc or a C compiler the build goes on and Python imports the same module's source
(``impl/storage/record_walk.py``), which behaves alike, only slower.
"""

from __future__ import annotations

from typing import Any

from setuptools import setup

#: the modules compiled with mypyc (sans-IO, ``mypy --strict`` clean)
COMPILED_MODULES = ["impl/storage/record_walk.py"]


def _extensions() -> list[Any]:
    try:
        from mypyc.build import mypycify  # noqa: PLC0415 (optional: only where mypy is installed)
    except ImportError:
        return []
    try:
        extensions = mypycify(["--ignore-missing-imports", *COMPILED_MODULES], opt_level="3")
    except (Exception, SystemExit) as error:  # mypy's errors exit: build without it
        print(f"mypyc: {error}; the pure-Python modules are used")
        return []
    for extension in extensions:
        extension.optional = True  # a compiler failure is a warning, not a failed install
    return list(extensions)


setup(ext_modules=_extensions())
