"""Ship the project's packages to executors that do not have logproof installed.

Theory of operation: the driver zips the *source it is itself running* (the packages ``impl``,
``model``, ``conformance`` and ``spark``, plus the runner's own package when it lives elsewhere)
into one archive that Spark distributes with ``SparkContext.addPyFile``; every Python worker puts
it on ``sys.path`` before it unpickles a task, so ``spark._runner`` and the simulator are imported
from the zip. The archive is byte-for-byte reproducible (sorted entries, fixed timestamps), so its
digest names exactly the code a campaign ran. When the driver itself runs from a zip (as under
``spark-submit --py-files logproof.zip``), that zip is already distributed and nothing is built.
"""

from __future__ import annotations

import hashlib
import importlib.util
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from spark._errors import RunnerUnavailableError

#: the project's import packages, shipped to every executor.
PROJECT_PACKAGES = ("impl", "model", "conformance", "spark")

_FIXED_TIMESTAMP = (2020, 1, 1, 0, 0, 0)
SHIPPED_SUFFIXES = (".py", ".typed", ".json", ".txt", ".md")


@dataclass(frozen=True, slots=True)
class ShippedZip:
    """A built archive.

    Attributes:
        path: where it was written.
        sha256: the hex digest of its bytes.
        members: the paths inside it, sorted.
    """

    path: Path
    sha256: str
    members: tuple[str, ...]


def running_from_zip() -> Path | None:
    """The zip this very package is imported from, or ``None`` when it is a plain directory."""
    here = Path(__file__)
    for parent in here.parents:
        if parent.suffix == ".zip" and parent.is_file():
            return parent
    return None


def _package_files(name: str) -> list[tuple[str, Path]]:
    """``(archive name, file)`` for every shipped file of top-level or nested package ``name``."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None or spec.origin is None:
        raise RunnerUnavailableError(f"package {name!r} cannot be found to ship it")
    parts = name.split(".")
    files: list[tuple[str, Path]] = []
    if spec.submodule_search_locations is None:
        origin = Path(spec.origin)
        files.append(("/".join([*parts[:-1], origin.name]), origin))
        package_root = origin.parent
        parents = parts[:-1]
    else:
        package_root = Path(next(iter(spec.submodule_search_locations)))
        parents = parts
        for path in sorted(package_root.rglob("*")):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            if path.suffix not in SHIPPED_SUFFIXES:
                continue
            relative = path.relative_to(package_root).as_posix()
            files.append(("/".join([*parents, relative]), path))
        parents = parts[:-1]
        package_root = package_root.parent
    # the __init__.py of every enclosing package, so that the nested package imports
    directory = package_root
    for depth in range(len(parents), 0, -1):
        init = directory / "__init__.py"
        if init.is_file():
            files.append(("/".join([*parents[:depth], "__init__.py"]), init))
        directory = directory.parent
    return files


def build_zip(destination: Path, packages: Iterable[str] = PROJECT_PACKAGES) -> ShippedZip:
    """Write a reproducible zip of ``packages`` (top-level or dotted names) to ``destination``.

    Args:
        destination: the archive's path; its directory must exist.
        packages: import names; a dotted name ships that package (or module) with the
            ``__init__.py`` of each enclosing package.

    Returns:
        The archive's path, digest and members.

    Raises:
        RunnerUnavailableError: a package cannot be found.
    """
    entries: dict[str, Path] = {}
    for name in packages:
        for archive_name, path in _package_files(name):
            entries.setdefault(archive_name, path)
    assert entries, "nothing to ship"
    with zipfile.ZipFile(destination, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for archive_name in sorted(entries):
            info = zipfile.ZipInfo(archive_name, date_time=_FIXED_TIMESTAMP)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, entries[archive_name].read_bytes())
    digest = hashlib.sha256(destination.read_bytes()).hexdigest()
    return ShippedZip(destination, digest, tuple(sorted(entries)))


def packages_to_ship(runner: str) -> tuple[str, ...]:
    """The project's packages plus the runner's package when it is not one of them."""
    top = runner.split(".", maxsplit=1)[0]
    if top in PROJECT_PACKAGES:
        return PROJECT_PACKAGES
    package = runner.rpartition(".")[0] or runner
    return (*PROJECT_PACKAGES, package)
