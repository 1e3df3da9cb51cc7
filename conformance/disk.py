"""An in-memory :class:`impl.storage.disk.Disk` with crashes, torn tails and failing log dirs.

Fault model (what :class:`SimDisk` injects; every choice is drawn from the run's seeded stream):

* **Crash** (:meth:`SimDisk.crash`, or armed with :meth:`SimDisk.arm_crash` to strike just before
  the n-th mutating operation, raising :class:`SimulatedCrash`). Exactly the latitude of the
  durability contract in :mod:`impl.storage.disk`, no more:

  - a file keeps the contents of its last ``fsync``; if it only grew since, any prefix of the
    unflushed bytes may survive (a **torn tail**, cut at an arbitrary byte, mid-batch included);
    if it was overwritten or truncated since, either the old or the new contents survive;
  - each directory keeps the entries of its last ``fsync_dir`` followed by a *prefix* of the entry
    changes made since (creations, renames, removals): later changes never survive without the
    earlier ones to the same directory, and a rename is atomic (old name or new, never both);
  - contents belong to the inode, so a renamed file keeps its durable bytes.

* **Dir failure** (:meth:`SimDisk.fail_dir`): every operation on a path under that log dir,
  including reads through open slices, raises ``OSError(EIO)`` with ``filename`` set to the path,
  as a dead disk does. It stays failed across crashes and restarts.
* **Unreadable at startup** (:meth:`SimDisk.make_unreadable`): as ``chmod 000`` on the log dir,
  the dir itself can be stat'ed but every operation inside it raises ``OSError(EACCES)``.

It does not flip bits (the RecordBatch CRC-32C covers that and the storage engineer's unit tests
exercise it) and never loses fsynced data on a healthy dir. Why recovery is still possible: what
was fsynced (data and directory entry) survives, so a protocol that makes the destination durable
before it renames the source always finds one complete copy; torn tails are cut at the last valid
batch by log recovery; a failed dir takes only its own replicas, which KIP-112 marks offline.

Differences from :class:`impl.storage.os_disk.OsDisk` are deliberate contract checks: a rename
whose source and destination are in different directories raises ``ValueError`` (the contract
only makes same-directory renames atomic), and paths outside the configured log dirs raise
``ENOENT``. ``FileSlice.fileno`` raises :class:`io.UnsupportedOperation` (no descriptor).

This module is a sans-IO core.
"""

from __future__ import annotations

import errno
import io
from collections.abc import Iterable
from dataclasses import dataclass

from conformance.rng import SimRng
from impl.storage.disk import DiskUsage

__sans_io__ = True

_STRERROR = {
    errno.ENOENT: "No such file or directory",
    errno.EEXIST: "File exists",
    errno.EISDIR: "Is a directory",
    errno.ENOTDIR: "Not a directory",
    errno.ENOTEMPTY: "Directory not empty",
    errno.EIO: "Input/output error",
    errno.EACCES: "Permission denied",
    errno.EBUSY: "Device or resource busy",
}


def _error(code: int, path: str) -> OSError:
    return OSError(code, _STRERROR[code], path)


class SimulatedCrash(BaseException):
    """The simulated process dies here; a ``BaseException`` so that no core can swallow it."""


class _File:
    __slots__ = ("data", "durable")

    def __init__(self) -> None:
        self.data = bytearray()
        self.durable = b""


class _Dir:
    __slots__ = ("durable_entries", "entries", "pending")

    def __init__(self) -> None:
        self.entries: dict[str, _File | _Dir] = {}
        self.durable_entries: dict[str, _File | _Dir] = {}
        # Entry changes since the last fsync_dir, in order: (kind, name, new name, node) with
        # kind "link", "unlink" or "rename" (one change: it survives whole or not at all).
        self.pending: list[tuple[str, str, str, _File | _Dir | None]] = []

    def link(self, name: str, node: _File | _Dir) -> None:
        self.entries[name] = node
        self.pending.append(("link", name, name, node))

    def unlink(self, name: str) -> _File | _Dir:
        node = self.entries.pop(name)
        self.pending.append(("unlink", name, name, None))
        return node

    def rename(self, name: str, new_name: str) -> None:
        self.entries[new_name] = self.entries.pop(name)
        self.pending.append(("rename", name, new_name, None))


@dataclass(frozen=True, slots=True)
class DiskStatistics:
    """Counters of one simulated disk."""

    operations: int
    bytes_written: int
    bytes_copied: int
    fsyncs: int
    dir_fsyncs: int
    crashes: int


class SimFileSlice:
    """A byte range bound to an inode: it survives renames, removal and truncation."""

    __slots__ = ("_closed", "_disk", "_file", "_path", "_position", "_root", "_size")

    def __init__(
        self, disk: SimDisk, root: str, path: str, node: _File, *, position: int, size: int
    ) -> None:
        self._disk = disk
        self._root = root
        self._path = path
        self._file = node
        self._position = position
        self._size = size
        self._closed = False

    @property
    def position(self) -> int:
        """Byte offset of the range in the file."""
        return self._position

    @property
    def size(self) -> int:
        """Length of the range in bytes."""
        return self._size

    def fileno(self) -> int:
        """Always raises: a simulated file has no descriptor."""
        raise io.UnsupportedOperation("a simulated file slice has no descriptor")

    def read_all(self) -> bytes:
        """The range's bytes (fewer if the file shrank); EIO once the dir failed."""
        if self._closed:
            raise ValueError("slice is closed")
        self._disk._check_root(self._root, self._path)
        return bytes(self._file.data[self._position : self._position + self._size])

    def close(self) -> None:
        """Release the slice (idempotent)."""
        self._closed = True


class SimDisk:
    """In-memory log dirs implementing the ``Disk`` port, with the faults in the module docstring.

    Args:
        log_dirs: absolute paths of the log dirs; each exists, empty and durable.
        capacity_bytes: the simulated size of each log dir's file system.
    """

    def __init__(self, log_dirs: Iterable[str], capacity_bytes: int = 1 << 40) -> None:
        self._roots: dict[str, _Dir] = {}
        for log_dir in log_dirs:
            root = log_dir.rstrip("/") or "/"
            assert root.startswith("/"), f"log dir {log_dir!r} is not absolute"
            self._roots[root] = _Dir()
        assert self._roots, "a disk needs at least one log dir"
        self._capacity_bytes = capacity_bytes
        self._failed: dict[str, int] = {}
        self._root_cache: dict[str, str] = {}
        #: path -> (normalised path, its root, the dirs below the root, the entry's name; both
        #: empty for a root)
        self._walk_cache: dict[str, tuple[str, str, tuple[str, ...], str]] = {}
        self._crash_countdown: int | None = None
        self._fsync_effective = True
        self._namespace_version = 0
        self._operations = 0
        self._bytes_written = 0
        self._bytes_copied = 0
        self._fsyncs = 0
        self._dir_fsyncs = 0
        self._crashes = 0

    # --- fault injection ---------------------------------------------------------------------

    @property
    def log_dirs(self) -> list[str]:
        """The configured log dirs, sorted."""
        return sorted(self._roots)

    def fail_dir(self, log_dir: str, code: int = errno.EIO) -> None:
        """Make every later operation under ``log_dir`` raise ``OSError(code)``.

        Args:
            log_dir: one of the configured log dirs.
            code: ``errno.EIO`` (a dead disk) or ``errno.EACCES`` (see :meth:`make_unreadable`).

        Raises:
            KeyError: ``log_dir`` is not a configured log dir.
        """
        root = log_dir.rstrip("/")
        if root not in self._roots:
            raise KeyError(log_dir)
        self._failed[root] = code

    def make_unreadable(self, log_dir: str) -> None:
        """As ``chmod 000``: the dir can be stat'ed, everything inside raises EACCES."""
        self.fail_dir(log_dir, errno.EACCES)

    def repair_dir(self, log_dir: str) -> None:
        """Undo :meth:`fail_dir`; contents are as they were (a cable reseated, not a new disk)."""
        self._failed.pop(log_dir.rstrip("/"), None)

    def failed_dirs(self) -> list[str]:
        """The log dirs currently failing, sorted."""
        return sorted(self._failed)

    def arm_crash(self, after_operations: int | None) -> None:
        """Raise :class:`SimulatedCrash` just before the given mutating operation (1 = the next).

        The operation does not happen; call :meth:`crash` afterwards to lose unsynced state.
        ``None`` disarms.
        """
        assert after_operations is None or after_operations >= 1
        self._crash_countdown = after_operations

    def set_fsync_effective(self, effective: bool) -> None:
        """Make ``fsync``/``fsync_dir`` no-ops for durability (``False``) or real again.

        Not a fault of the fault model above: a *variant hook* that reproduces, from the disk's
        side, an implementation that skips a sync (e.g. renaming before ``tp.move`` is durable).
        """
        self._fsync_effective = effective

    def crash(self, rng: SimRng) -> None:
        """Lose what a process crash may lose under the durability contract.

        Args:
            rng: decides, per directory, how many unsynced entry changes survive and, per file,
                how much of the unsynced tail survives.
        """
        self._crashes += 1
        self._namespace_version += 1
        self._crash_countdown = None
        visited: set[int] = set()
        for root_path in sorted(self._roots):
            self._recover_dir(self._roots[root_path], rng, visited)

    def _recover_dir(self, directory: _Dir, rng: SimRng, visited: set[int]) -> None:
        if id(directory) in visited:
            return
        visited.add(id(directory))
        entries = dict(directory.durable_entries)
        survivors = rng.randint(0, len(directory.pending)) if directory.pending else 0
        for kind, name, new_name, node in directory.pending[:survivors]:
            if kind == "link":
                assert node is not None
                entries[name] = node
            elif kind == "rename":
                entries[new_name] = entries.pop(name)
            else:
                del entries[name]
        directory.entries = entries
        directory.durable_entries = dict(entries)
        directory.pending = []
        for name in sorted(entries):
            child = entries[name]
            if isinstance(child, _Dir):
                self._recover_dir(child, rng, visited)
            elif id(child) not in visited:
                visited.add(id(child))
                self._recover_file(child, rng)

    @staticmethod
    def _recover_file(node: _File, rng: SimRng) -> None:
        durable = node.durable
        if node.data.startswith(durable):
            unsynced_bytes = len(node.data) - len(durable)
            kept = rng.randint(0, unsynced_bytes) if unsynced_bytes else 0
            node.data = bytearray(node.data[: len(durable) + kept])
        elif rng.chance(0.5):
            node.data = bytearray(durable)
        node.durable = bytes(node.data)

    # --- path resolution ---------------------------------------------------------------------

    def _root_of(self, path: str) -> str:
        cached = self._root_cache.get(path)
        if cached is not None:
            return cached
        best = ""
        for root in self._roots:
            if (path == root or path.startswith(root + "/")) and len(root) > len(best):
                best = root
        if not best:
            raise _error(errno.ENOENT, path)
        if len(self._root_cache) < 100_000:
            self._root_cache[path] = best
        return best

    def _check_root(self, root: str, path: str) -> None:
        code = self._failed.get(root)
        if code is None:
            return
        if code == errno.EACCES and path == root:
            return
        raise _error(code, path)

    def _mutating(self) -> None:
        self._operations += 1
        if self._crash_countdown is not None:
            self._crash_countdown -= 1
            if self._crash_countdown <= 0:
                self._crash_countdown = None
                raise SimulatedCrash(f"simulated crash before operation {self._operations}")

    def _walk(self, path: str) -> tuple[str, _Dir | _File | None, _Dir | None, str]:
        """(root, node or None if absent, parent dir or None for a root, entry name)."""
        self._operations += 1
        plan = self._walk_cache.get(path)
        if plan is None:
            normalised = path.rstrip("/") or "/"
            found = self._root_of(normalised)
            below = normalised[len(found) + 1 :].split("/") if normalised != found else [""]
            plan = (normalised, found, tuple(below[:-1]), below[-1])
            if len(self._walk_cache) < 100_000:
                self._walk_cache[path] = plan
        path, root, dirs, name = plan
        if self._failed:
            self._check_root(root, path)
        node: _Dir | _File = self._roots[root]
        if not name:
            return root, node, None, ""
        for part in dirs:
            if isinstance(node, _File):
                raise _error(errno.ENOTDIR, path)
            child = node.entries.get(part)
            if child is None:
                raise _error(errno.ENOENT, path)
            node = child
        if isinstance(node, _File):
            raise _error(errno.ENOTDIR, path)
        return root, node.entries.get(name), node, name

    def _file(self, path: str) -> _File:
        _, node, _, _ = self._walk(path)
        if node is None:
            raise _error(errno.ENOENT, path)
        if isinstance(node, _Dir):
            raise _error(errno.EISDIR, path)
        return node

    def _dir(self, path: str) -> _Dir:
        _, node, _, _ = self._walk(path)
        if node is None:
            raise _error(errno.ENOENT, path)
        if isinstance(node, _File):
            raise _error(errno.ENOTDIR, path)
        return node

    def _parent(self, path: str) -> tuple[_Dir, str, _Dir | _File | None]:
        _, node, parent, name = self._walk(path)
        if parent is None:
            raise _error(errno.EBUSY, path)
        return parent, name, node

    # --- files -------------------------------------------------------------------------------

    def create(self, path: str) -> None:
        """Create ``path`` empty, truncating an existing file."""
        parent, name, node = self._parent(path)
        if isinstance(node, _Dir):
            raise _error(errno.EISDIR, path)
        self._mutating()
        if node is None:
            parent.link(name, _File())
            self._namespace_version += 1
        else:
            node.data = bytearray()

    def append(self, path: str, data: bytes) -> int:
        """Write ``data`` at the end; return the offset written at."""
        node = self._file(path)
        self._mutating()
        offset = len(node.data)
        node.data += data
        self._bytes_written += len(data)
        return offset

    def pwrite(self, path: str, offset: int, data: bytes) -> None:
        """Write ``data`` at ``offset`` (zero-filling a gap past the end, as a file system does)."""
        assert offset >= 0
        node = self._file(path)
        self._mutating()
        if offset > len(node.data):
            node.data += bytes(offset - len(node.data))
        node.data[offset : offset + len(data)] = data
        self._bytes_written += len(data)

    def read(self, path: str, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``offset``."""
        assert offset >= 0
        assert length >= 0
        node = self._file(path)
        return bytes(node.data[offset : offset + length])

    def truncate(self, path: str, size: int) -> None:
        """Cut (or zero-extend) the file to ``size`` bytes."""
        assert size >= 0
        node = self._file(path)
        self._mutating()
        if size <= len(node.data):
            del node.data[size:]
        else:
            node.data += bytes(size - len(node.data))

    def fsync(self, path: str) -> None:
        """Make the file's contents durable."""
        node = self._file(path)
        self._mutating()
        if self._fsync_effective:
            node.durable = bytes(node.data)
        self._fsyncs += 1

    def size(self, path: str) -> int:
        """The file's size, unflushed bytes included."""
        return len(self._file(path).data)

    def copy_range(self, src_path: str, src_offset: int, length: int, dst_path: str) -> int:
        """Append ``length`` bytes of ``src_path`` from ``src_offset`` to ``dst_path``."""
        assert src_offset >= 0
        assert length >= 0
        source = self._file(src_path)
        target = self._file(dst_path)
        self._mutating()
        chunk = bytes(source.data[src_offset : src_offset + length])
        target.data += chunk
        self._bytes_copied += len(chunk)
        return len(chunk)

    def open_slice(self, path: str, position: int, size: int) -> SimFileSlice:
        """A handle on ``size`` bytes from ``position`` that follows the inode."""
        node = self._file(path)
        return SimFileSlice(
            self, self._root_of(path), path, node, position=position, size=size
        )

    # --- directories -------------------------------------------------------------------------

    def mkdir(self, path: str) -> None:
        """Create the directory ``path``."""
        parent, name, node = self._parent(path)
        if node is not None:
            raise _error(errno.EEXIST, path)
        self._mutating()
        parent.link(name, _Dir())
        self._namespace_version += 1

    def list_dir(self, path: str) -> list[str]:
        """The entry names in ``path``, sorted."""
        return sorted(self._dir(path).entries)

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a directory (absence is False; an I/O error raises)."""
        try:
            _, node, _, _ = self._walk(path)
        except FileNotFoundError:
            return False
        return isinstance(node, _Dir)

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists (an I/O error raises)."""
        try:
            _, node, _, _ = self._walk(path)
        except FileNotFoundError:
            return False
        return node is not None

    def rename(self, src_path: str, dst_path: str) -> None:
        """Atomic same-directory rename; ``dst_path`` must not exist."""
        dst_parent, dst_name, dst_node = self._parent(dst_path)
        if dst_node is not None:
            raise _error(errno.EEXIST, dst_path)
        src_parent, src_name, src_node = self._parent(src_path)
        if src_node is None:
            raise _error(errno.ENOENT, src_path)
        if src_parent is not dst_parent:
            raise ValueError(
                f"rename across directories ({src_path!r} -> {dst_path!r}) is outside the "
                "Disk port's contract"
            )
        self._mutating()
        src_parent.rename(src_name, dst_name)
        self._namespace_version += 1

    def remove(self, path: str) -> None:
        """Remove a file."""
        parent, name, node = self._parent(path)
        if node is None:
            raise _error(errno.ENOENT, path)
        if isinstance(node, _Dir):
            raise _error(errno.EISDIR, path)
        self._mutating()
        parent.unlink(name)
        self._namespace_version += 1

    def rmdir(self, path: str) -> None:
        """Remove an empty directory."""
        parent, name, node = self._parent(path)
        if node is None:
            raise _error(errno.ENOENT, path)
        if isinstance(node, _File):
            raise _error(errno.ENOTDIR, path)
        if node.entries:
            raise _error(errno.ENOTEMPTY, path)
        self._mutating()
        parent.unlink(name)
        self._namespace_version += 1

    def fsync_dir(self, path: str) -> None:
        """Make the entries of directory ``path`` durable."""
        directory = self._dir(path)
        self._mutating()
        if self._fsync_effective:
            directory.durable_entries = dict(directory.entries)
            directory.pending = []
        self._dir_fsyncs += 1

    def disk_usage(self, path: str) -> DiskUsage:
        """The configured capacity, less the bytes of the files under ``path``'s log dir."""
        root, _, _, _ = self._walk(path)
        used_bytes = self._used_bytes(self._roots[root], set())
        return DiskUsage(
            total_bytes=self._capacity_bytes,
            usable_bytes=max(0, self._capacity_bytes - used_bytes),
        )

    def _used_bytes(self, directory: _Dir, seen: set[int]) -> int:
        total = 0
        for child in directory.entries.values():
            if id(child) in seen:
                continue
            seen.add(id(child))
            total += self._used_bytes(child, seen) if isinstance(child, _Dir) else len(child.data)
        return total

    # --- inspection (for checkers; no port equivalent) ---------------------------------------

    @property
    def namespace_version(self) -> int:
        """Bumped by every change of any directory entry (and by a crash): a checker that
        scanned the namespace at one version need not scan it again at the same version."""
        return self._namespace_version

    def entries_unchecked(self, path: str) -> list[str]:
        """The current entry names of directory ``path`` (sorted), ignoring injected faults.

        Returns an empty list when ``path`` is absent or not a directory.
        """
        path = path.rstrip("/")
        root = self._root_of(path)
        node: _Dir | _File | None = self._roots[root]
        if path != root:
            for part in path[len(root) + 1 :].split("/"):
                node = node.entries.get(part) if isinstance(node, _Dir) else None
        return sorted(node.entries) if isinstance(node, _Dir) else []

    def durable_snapshot(self) -> dict[str, bytes | None]:
        """Every path and its durable contents as a crash with no luck would leave them.

        Directories map to ``None``. Reads no fault state: checkers may call it on a failed dir.
        """
        snapshot: dict[str, bytes | None] = {}
        for root_path in sorted(self._roots):
            self._snapshot(root_path, self._roots[root_path], snapshot)
        return snapshot

    def _snapshot(self, path: str, directory: _Dir, out: dict[str, bytes | None]) -> None:
        for name in sorted(directory.durable_entries):
            child = directory.durable_entries[name]
            child_path = f"{path}/{name}"
            if isinstance(child, _Dir):
                out[child_path] = None
                self._snapshot(child_path, child, out)
            else:
                out[child_path] = child.durable

    def statistics(self) -> DiskStatistics:
        """Counters so far."""
        return DiskStatistics(
            operations=self._operations,
            bytes_written=self._bytes_written,
            bytes_copied=self._bytes_copied,
            fsyncs=self._fsyncs,
            dir_fsyncs=self._dir_fsyncs,
            crashes=self._crashes,
        )
