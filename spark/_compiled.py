"""The cluster simulator compiled with mypyc: a tree beside the sources, used only when fresh.

Theory of operation: :func:`build` copies the packages ``impl``, ``model`` and ``conformance`` to a
separate directory (by default ``.venv/logproof-compiled``, ``make compiled``; never the source
packages, so a compiled module can never shadow an edited source), compiles :data:`COMPILED` there
in one mypyc group (the modules call each other natively) and, last, writes ``manifest.json``: the
SHA-256 of every file it copied that a campaign ships (the ``.py`` sources and the data files of
the three packages, compiled or not), the interpreter's cache tag and the compiled modules.

:func:`activate` puts the tree first on ``sys.path`` only when every manifest hash matches the
sources this process would otherwise run, file for file (all or nothing: compiled modules call
each other natively, a mixture would run neither version), and only before any module of the three
packages is imported in the process; otherwise it prints :data:`FALLBACK_LINE` (with the reason)
on stderr and changes nothing, and the interpreted code runs. In a Spark worker the sources are the
members of the zip the driver shipped (:mod:`spark._ship`), so a tree built from other sources
than the campaign's is refused there too.

Who activates it: only ``logproof fuzz``'s seed tasks (``--code auto``, the default, or
``--code compiled``; :func:`spark._runner.run_seed_ranges`) and ``bench.mypyc_sim``'s measuring
processes. Never the cores, never
``conformance run``, ``fuzz replay``, shrinking or a planted bug's process
(:mod:`conformance.plants`): they import the sources.

Build: ``make setup`` (so ``make run`` and ``make test``) and ``make compiled`` (:func:`main`:
``--tree DIR``, ``--opt``, ``--force``, ``--optional``; nothing is done when the tree is fresh).
Without mypyc or a C compiler, or when mypyc fails, ``make compiled`` exits 1 with one line;
``make setup`` (``--optional``) says the same line and goes on, and campaigns run from source.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from spark._ship import SHIPPED_SUFFIXES, running_from_zip

#: the compiled modules (one mypyc group: they call each other natively)
COMPILED = (
    "conformance/cluster_sim.py",
    "conformance/_cluster_nodes.py",
    "conformance/_cluster_groups.py",
    "conformance/_cluster_admin.py",
    "conformance/_cluster_records.py",
    "conformance/_coordinator_pump.py",
    "conformance/_coordinator_server.py",
    "conformance/_coordinator_driver.py",
    "conformance/network.py",
    "conformance/disk.py",
    "conformance/rng.py",
    "conformance/clock.py",
    "conformance/move_sim.py",
    "conformance/trace_check.py",
    "conformance/replication_abstraction.py",
    "conformance/controller_abstraction.py",
    "conformance/group_abstraction.py",
    "conformance/move_abstraction.py",
    "impl/trace.py",
    "impl/broker/node.py",
    "impl/broker/node_store.py",
    "impl/broker/node_groups.py",
    "impl/broker/replication.py",
    "impl/broker/purgatory.py",
    "impl/broker/producer_state.py",
    "impl/broker/group_coordinator.py",
    "impl/broker/group_records.py",
    "impl/controller/node.py",
    "impl/controller/controller.py",
    "impl/controller/znodes.py",
    "impl/storage/manager.py",
    "impl/storage/log.py",
    "impl/storage/record_batch.py",
    "impl/storage/record_walk.py",
    "impl/storage/records.py",
    "impl/storage/names.py",
    "impl/storage/checkpoint.py",
    "impl/storage/leader_epoch.py",
    "impl/storage/replica_move.py",
    "impl/storage/mover.py",
    "impl/storage/log_config.py",
    "impl/storage/throttle.py",
    "model/_dsl.py",
)

#: the packages copied to the tree (and covered by its manifest)
PACKAGES = ("impl", "model", "conformance")

MANIFEST = "manifest.json"

#: what a process that asked for the tree and cannot use it prints (then a reason)
FALLBACK_LINE = "compiled tree stale/missing, running from source"

#: what a run records when it ran from source
SOURCE = "source"

_SETUP = """
import json, sys
from setuptools import setup
from mypyc.build import mypycify
modules, opt, jobs = json.loads(sys.argv[1])
setup(name="logproof-compiled", packages=[], script_args=["build_ext", "--inplace", "-j", jobs],
      ext_modules=mypycify(modules, opt_level=opt, multi_file=True))
"""

#: the checkout the tree is built from (the parent of the packages)
ROOT = Path(__file__).resolve().parent.parent

_active: str | None = None


class CompiledBuildError(Exception):
    """The tree cannot be built here (no mypyc, no C compiler, or mypyc failed): one line."""


@dataclass(frozen=True, slots=True)
class Manifest:
    """A tree's ``manifest.json``.

    Attributes:
        sha256: the digest of the manifest file's bytes (names the build).
        cache_tag: the interpreter the extensions were built for (``cpython-311``).
        sources: ``{"impl/trace.py": sha256, ...}``: every file the tree was built from.
        compiled: the compiled modules' paths.
    """

    sha256: str
    cache_tag: str
    sources: Mapping[str, str]
    compiled: tuple[str, ...]

    @property
    def label(self) -> str:
        """What a run from this tree records."""
        return f"compiled (manifest sha256 {self.sha256[:16]})"


@dataclass(frozen=True, slots=True)
class CompiledChoice:
    """A driver's decision to run a campaign's seeds compiled (pickled into every seed task).

    Attributes:
        tree: the tree's path (on the workers' machine: a shared path under ``local[N]``).
        manifest_sha256: the manifest the driver checked; a worker refuses another.
        label: what the campaign records.
    """

    tree: str
    manifest_sha256: str
    label: str


def check_compiled(tree: Path, sources: Mapping[str, str]) -> tuple[CompiledChoice | None, str]:
    """The driver's check of ``tree`` against the sources it ships.

    Returns:
        ``(choice, "")`` when the tree is fresh, else ``(None, reason)``.
    """
    manifest, reason = staleness(tree, sources)
    if manifest is None:
        return None, reason
    return CompiledChoice(str(tree.resolve()), manifest.sha256, manifest.label), ""


def default_compiled_tree() -> Path:
    """Where ``make compiled`` builds: ``logproof-compiled`` in this interpreter's venv."""
    return Path(sys.prefix) / "logproof-compiled"


def _covered(relative: str) -> bool:
    """Whether a package file is one the manifest covers (what a campaign's zip ships)."""
    parts = relative.split("/")
    return (
        len(parts) > 1
        and parts[0] in PACKAGES
        and "__pycache__" not in parts
        and Path(relative).suffix in SHIPPED_SUFFIXES
    )


def directory_digests(root: Path) -> dict[str, str]:
    """SHA-256 of every covered file of the packages under ``root`` (a checkout or a tree)."""
    digests: dict[str, str] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*")):
            relative = path.relative_to(root).as_posix()
            if path.is_file() and _covered(relative):
                digests[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


def zip_digests(archive: Path) -> dict[str, str]:
    """SHA-256 of every covered member of a shipped zip."""
    with zipfile.ZipFile(archive) as opened:
        return {
            name: hashlib.sha256(opened.read(name)).hexdigest()
            for name in opened.namelist()
            if _covered(name)
        }


def running_digests() -> dict[str, str]:
    """The sources this process would import the packages from: the shipped zip's members when
    it runs from one (a Spark worker), else the checkout's files."""
    archive = running_from_zip()
    return zip_digests(archive) if archive is not None else directory_digests(ROOT)


def read_manifest(tree: Path) -> Manifest | None:
    """The tree's manifest, ``None`` when there is none or it cannot be read."""
    try:
        raw = (tree / MANIFEST).read_bytes()
        value = json.loads(raw)
        return Manifest(
            sha256=hashlib.sha256(raw).hexdigest(),
            cache_tag=str(value["cache_tag"]),
            sources={str(name): str(digest) for name, digest in value["sources"].items()},
            compiled=tuple(str(name) for name in value["compiled"]),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def staleness(tree: Path, sources: Mapping[str, str]) -> tuple[Manifest | None, str]:
    """Check the tree against ``sources``.

    Returns:
        ``(manifest, "")`` when the tree is fresh, else ``(None, reason)``.
    """
    manifest = read_manifest(tree)
    if manifest is None:
        return None, f"no readable {tree / MANIFEST}"
    if manifest.cache_tag != sys.implementation.cache_tag:
        return None, f"built for {manifest.cache_tag}, this is {sys.implementation.cache_tag}"
    changed = sorted(
        name for name in manifest.sources.keys() | sources.keys()
        if manifest.sources.get(name) != sources.get(name)
    )  # fmt: skip
    if changed:
        more = f" and {len(changed) - 1} more differ" if len(changed) > 1 else " differs"
        return None, f"{changed[0]}{more} from the build"
    missing = [name for name in manifest.compiled if not _extension_exists(tree, name)]
    if missing:
        return None, f"no extension module for {missing[0]}"
    return manifest, ""


def _extension_exists(tree: Path, module: str) -> bool:
    stem = tree / module.removesuffix(".py")
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    return stem.with_name(stem.name + suffix).is_file()


def active() -> str | None:
    """The label of the tree this process activated, ``None`` when it runs from source."""
    return _active


def activate(tree: Path, sources: Mapping[str, str], *, expected: str | None = None) -> str:
    """Put ``tree`` first on ``sys.path`` when it is fresh against ``sources`` and no module of
    the packages is imported yet; else print :data:`FALLBACK_LINE` and a reason on stderr.

    Args:
        tree: the compiled tree.
        sources: the digests of the sources this process would otherwise run.
        expected: the manifest digest the caller checked (a driver): refused when it differs.

    Returns:
        The manifest's label when the tree is (or already was) active, :data:`SOURCE` otherwise.
    """
    global _active
    manifest, reason = staleness(tree, sources)
    if manifest is not None and expected is not None and manifest.sha256 != expected:
        manifest, reason = None, "the tree was rebuilt since the campaign started"
    if manifest is not None and _active == manifest.label:
        return _active
    if manifest is not None and _active is None:
        imported = sorted(
            name for name in sys.modules if name.split(".", maxsplit=1)[0] in PACKAGES
        )
        if imported:
            manifest, reason = None, f"{imported[0]} is already imported from source"
    if manifest is None:
        print(f"{FALLBACK_LINE} ({reason})", file=sys.stderr, flush=True)
        return SOURCE
    sys.path.insert(0, str(tree))
    importlib.invalidate_caches()
    _active = manifest.label
    return _active


def confirm(tree: Path) -> None:
    """Assert that every module of the packages this process imported comes from ``tree``.

    Raises:
        AssertionError: a module was imported from elsewhere (the tree was bypassed).
    """
    prefix = str(tree.resolve())
    for name, module in list(sys.modules.items()):
        if name.split(".", maxsplit=1)[0] not in PACKAGES:
            continue
        location = str(Path(getattr(module, "__file__", "") or "").resolve())
        assert location.startswith(prefix), f"{name} imported from {location}, not {tree}"


def _c_compiler() -> str | None:
    configured = (os.environ.get("CC") or str(sysconfig.get_config_var("CC") or "cc")).split()
    return shutil.which(configured[0]) if configured else None


def build(tree: Path, *, opt: str = "3", jobs: int = 2, root: Path = ROOT) -> float:
    """Copy the packages of ``root`` to ``tree`` (replacing it), compile :data:`COMPILED` there
    and write the manifest (last: a failed build leaves no manifest, so nothing activates it).

    Returns:
        The wall-clock seconds of the compilation.

    Raises:
        CompiledBuildError: no mypyc, no C compiler, or the compilation failed.
    """
    if importlib.util.find_spec("mypyc") is None:
        raise CompiledBuildError("cannot build the compiled tree: mypyc is not installed")
    if _c_compiler() is None:
        raise CompiledBuildError("cannot build the compiled tree: no C compiler found")
    tree = tree.resolve()
    assert not any(tree.is_relative_to(root / package) for package in PACKAGES), tree
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    for package in PACKAGES:
        shutil.copytree(
            root / package,
            tree / package,
            ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c"),
        )
    shutil.copy(root / "pyproject.toml", tree / "pyproject.toml")
    sources = directory_digests(tree)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _SETUP, json.dumps([list(COMPILED), opt, str(jobs)])],
        cwd=tree, capture_output=True, text=True, check=False,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    (tree / "build.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise CompiledBuildError(
            f"mypyc failed to build the compiled tree (see {tree / 'build.log'})"
        )
    manifest = {
        "cache_tag": sys.implementation.cache_tag,
        "compiled": list(COMPILED),
        "sources": sources,
    }
    (tree / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return seconds


def main(argv: list[str] | None = None) -> int:
    """Build the tree (``make compiled``) unless it is fresh already."""
    parser = argparse.ArgumentParser(description="Build the mypyc-compiled simulator tree.")
    parser.add_argument("--tree", type=Path, default=default_compiled_tree(), help="where to build")
    parser.add_argument("--opt", default="3", help="mypyc's opt_level (3)")
    parser.add_argument("--jobs", type=int, default=2, help="parallel C compilations (2)")
    parser.add_argument("--force", action="store_true", help="rebuild even when it is fresh")
    parser.add_argument(
        "--optional",
        action="store_true",
        help="a tree that cannot be built here is not an error (make setup): campaigns then run "
        "from source",
    )
    arguments = parser.parse_args(argv)
    manifest, reason = staleness(arguments.tree, directory_digests(ROOT))
    if manifest is not None and not arguments.force:
        print(f"{arguments.tree} is fresh ({manifest.label})")
        return 0
    print(
        f"building the compiled simulator in {arguments.tree} ({reason or 'forced'}; about "
        "2 minutes, again only when a source changes)",
        flush=True,
    )
    try:
        seconds = build(arguments.tree, opt=arguments.opt, jobs=arguments.jobs)
    except CompiledBuildError as error:
        if arguments.optional:
            print(f"{error}; campaigns will run from source", file=sys.stderr)
            return 0
        print(error, file=sys.stderr)
        return 1
    manifest = read_manifest(arguments.tree)
    assert manifest is not None
    print(
        f"compiled {len(COMPILED)} modules into {arguments.tree} in {seconds:.0f} s; "
        f"{manifest.label}, {len(manifest.sources)} source files"
    )
    return 0
