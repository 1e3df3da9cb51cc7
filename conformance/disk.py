"""An in-memory :class:`impl.storage.disk.Disk` with crashes, torn writes and failing disks.

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

* **Torn write in the middle** (:meth:`SimDisk.crash` with ``scramble=True``): the unsynced
  bytes that survive are not only a prefix of what was written: pages reach the platter out of
  order, so within the surviving unsynced range one stretch (up to a few KiB, anywhere: in the
  middle of a segment, with good data after it) reads back as zeros or as garbage (a torn or
  misdirected sector). Fsynced bytes are never touched.
* **Dir failure** (:meth:`SimDisk.fail_dir`): every operation on a path under that log dir,
  including reads through open slices, raises ``OSError(EIO)`` with ``filename`` set to the path,
  as a dead disk does. It stays failed across crashes and restarts until repaired.
* **Partial dir failure** (:meth:`SimDisk.fail_dir` with ``reads=False`` or ``writes=False``):
  only writes fail (every mutation, ``fsync`` and ``fsync_dir`` included: a file system
  remounted read-only after an error, ``EROFS``) while reads work, or only reads fail (media
  errors on read, ``EIO``: reads, listings, stats and slices) while writes succeed.
* **One file fails** (:meth:`SimDisk.fail_file`): every operation on that file (its inode: it
  follows renames) raises ``OSError(EIO)``; the rest of the dir works (a bad sector).
* **Disk full** (:meth:`SimDisk.fill_dir`): the log dir's file system has ``free_bytes`` left;
  a write that does not fit writes what fits (a short write) and raises ``OSError(ENOSPC)``, and
  once it is full, creating a file or a dir raises ``ENOSPC`` too. Freed space is not returned
  until the dir is repaired (an operator makes room).
* **Unreadable at startup** (:meth:`SimDisk.make_unreadable`): as ``chmod 000`` on the log dir,
  the dir itself can be stat'ed but every operation inside it raises ``OSError(EACCES)``.

:meth:`SimDisk.repair_dir` undoes every fault of a dir (failure, partial failure, failed files,
full disk). It does not flip bits of fsynced data (the RecordBatch CRC-32C covers that, the
storage engineer's unit tests exercise it, and one copy's silent corruption is no engine's to
prevent) and never loses fsynced data on a healthy dir. Why recovery is still possible: what
was fsynced (data and directory entry) survives, so a protocol that makes the destination durable
before it renames the source always finds one complete copy; torn tails and torn middles are cut
at the first invalid batch by log recovery (nothing past a damaged batch is trusted); a failed
dir, file or full disk takes only its own dir's replicas, which KIP-112 marks offline.

Differences from :class:`impl.storage.os_disk.OsDisk` are deliberate contract checks: a rename
whose source and destination are in different directories raises ``ValueError`` (the contract
only makes same-directory renames atomic), and paths outside the configured log dirs raise
``ENOENT``. ``FileSlice.fileno`` raises :class:`io.UnsupportedOperation` (no descriptor).

This module is a sans-IO core.
"""

from __future__ import annotations

import errno
import io
from collections.abc import Iterable, Sequence
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
    errno.EROFS: "Read-only file system",
    errno.ENOSPC: "No space left on device",
}

#: the most bytes a torn middle damages (a few sectors)
_TORN_MAX = 4096


def _error(code: int, path: str) -> OSError:
    return OSError(code, _STRERROR[code], path)


class SimulatedCrash(BaseException):
    """The simulated process dies here; a ``BaseException`` so that no core can swallow it."""


class _File:
    __slots__ = ("data", "durable", "fault")

    def __init__(self) -> None:
        self.data = bytearray()
        self.durable = b""
        #: an errno every operation on this file raises (:meth:`SimDisk.fail_file`)
        self.fault: int | None = None


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
        if self._file.fault is not None:
            raise _error(self._file.fault, self._path)
        return bytes(self._file.data[self._position : self._position + self._size])

    def close(self) -> None:
        """Release the slice (idempotent)."""
        self._closed = True


class SimSyncHandle:
    """The right to fsync one file or directory, bound to its inode (it follows renames and
    removal).

    The simulator is single-threaded: :meth:`sync` runs where the caller runs it, and is one
    mutating operation of the disk (a crash can be armed before it), as :meth:`SimDisk.fsync`
    and :meth:`SimDisk.fsync_dir`.
    """

    __slots__ = ("_closed", "_disk", "_node", "_path", "_root")

    def __init__(self, disk: SimDisk, root: str, path: str, node: _File | _Dir) -> None:
        self._disk = disk
        self._root = root
        self._path = path
        self._node = node
        self._closed = False

    def sync(self) -> None:
        """Make the file's contents (the directory's entries) durable; EIO (or the dir's errno)
        once the dir failed."""
        if self._closed:
            raise ValueError("sync handle is closed")
        if isinstance(self._node, _Dir):
            self._disk._sync_dir_node(self._root, self._path, self._node)
        else:
            self._disk._sync_node(self._root, self._path, self._node)

    def close(self) -> None:
        """Release the handle (idempotent)."""
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
        #: root -> (errno, reads fail, writes fail)
        self._failed: dict[str, tuple[int, bool, bool]] = {}
        #: root -> files failed with :meth:`fail_file`
        self._failed_files: dict[str, list[_File]] = {}
        #: root -> bytes left on a full (or filling) file system
        self._space: dict[str, int] = {}
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

    def fail_dir(self, log_dir: str, code: int | None = None, *, reads: bool = True,
                 writes: bool = True) -> None:
        """Make later operations under ``log_dir`` raise ``OSError(code)``.

        Args:
            log_dir: one of the configured log dirs.
            code: ``errno.EIO`` (a dead disk; the default), ``errno.EACCES`` (see
                :meth:`make_unreadable`); for writes alone ``errno.EROFS`` is the default.
            reads: reads fail (reads, listings, stats, slices).
            writes: writes fail (every mutation, ``fsync`` and ``fsync_dir``).

        Raises:
            KeyError: ``log_dir`` is not a configured log dir.
            ValueError: neither reads nor writes fail.
        """
        root = self._configured(log_dir)
        if not (reads or writes):
            raise ValueError("a failure fails reads, writes or both")
        if code is None:
            code = errno.EROFS if not reads else errno.EIO
        self._failed[root] = (code, reads, writes)

    def fail_file(self, path: str, code: int = errno.EIO) -> None:
        """Make every operation on the file at ``path`` raise ``OSError(code)`` (a bad sector:
        the fault follows the inode through renames; the rest of the dir works).

        Raises:
            KeyError: ``path`` is not a file (faults already injected are ignored).
        """
        path = path.rstrip("/")
        root = self._root_of(path)
        node: _Dir | _File | None = self._roots[root]
        for part in path[len(root) + 1 :].split("/"):
            node = node.entries.get(part) if isinstance(node, _Dir) else None
        if not isinstance(node, _File):
            raise KeyError(path)
        node.fault = code
        self._failed_files.setdefault(root, []).append(node)

    def fill_dir(self, log_dir: str, free_bytes: int = 0) -> None:
        """Leave ``free_bytes`` of space on ``log_dir``'s file system (see the module
        docstring's *disk full*).

        Raises:
            KeyError: ``log_dir`` is not a configured log dir.
        """
        assert free_bytes >= 0
        self._space[self._configured(log_dir)] = free_bytes

    def _configured(self, log_dir: str) -> str:
        root = log_dir.rstrip("/")
        if root not in self._roots:
            raise KeyError(log_dir)
        return root

    def make_unreadable(self, log_dir: str) -> None:
        """As ``chmod 000``: the dir can be stat'ed, everything inside raises EACCES."""
        self.fail_dir(log_dir, errno.EACCES)

    def repair_dir(self, log_dir: str) -> None:
        """Undo every fault of ``log_dir`` (:meth:`fail_dir`, :meth:`fail_file`,
        :meth:`fill_dir`); contents are as they were (a cable reseated, a bad sector remapped,
        room made: not a new disk)."""
        root = log_dir.rstrip("/")
        self._failed.pop(root, None)
        self._space.pop(root, None)
        for node in self._failed_files.pop(root, ()):
            node.fault = None

    def failed_dirs(self) -> list[str]:
        """The log dirs currently failed whole (every operation inside raises), sorted."""
        return sorted(root for root, (_, reads, writes) in self._failed.items()
                      if reads and writes)

    def unreadable_dirs(self) -> list[str]:
        """The log dirs whose reads fail (failed whole, or reads alone), sorted."""
        return sorted(root for root, (_, reads, _) in self._failed.items() if reads)

    def faulty_dirs(self) -> list[str]:
        """The log dirs with any fault (failed whole or in part, a failed file, full), sorted."""
        return sorted({*self._failed, *self._failed_files, *self._space})

    def arm_crash(self, after_operations: int | None) -> None:
        """Raise :class:`SimulatedCrash` just before the given mutating operation (1 = the next).

        The operation does not happen; call :meth:`crash` afterwards to lose unsynced state.
        ``None`` disarms.
        """
        assert after_operations is None or after_operations >= 1
        self._crash_countdown = after_operations

    @property
    def crash_armed(self) -> bool:
        """A crash is armed (:meth:`arm_crash`)."""
        return self._crash_countdown is not None

    def set_fsync_effective(self, effective: bool) -> None:
        """Make ``fsync``/``fsync_dir`` no-ops for durability (``False``) or real again.

        Not a fault of the fault model above: a *variant hook* that reproduces, from the disk's
        side, an implementation that skips a sync (e.g. renaming before ``tp.move`` is durable).
        """
        self._fsync_effective = effective

    def crash(self, rng: SimRng, *, scramble: bool = False) -> None:
        """Lose what a process crash may lose under the durability contract.

        Args:
            rng: decides, per directory, how many unsynced entry changes survive and, per file,
                how much of the unsynced tail survives (and, scrambled, where it is torn).
            scramble: a torn write in the middle: in each file's surviving unsynced bytes, one
                stretch reads back as zeros or garbage (see the module docstring).
        """
        self._crashes += 1
        self._namespace_version += 1
        self._crash_countdown = None
        visited: set[int] = set()
        for root_path in sorted(self._roots):
            self._recover_dir(self._roots[root_path], rng, visited, scramble)

    def _recover_dir(self, directory: _Dir, rng: SimRng, visited: set[int],
                     scramble: bool = False) -> None:
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
                self._recover_dir(child, rng, visited, scramble)
            elif id(child) not in visited:
                visited.add(id(child))
                self._recover_file(child, rng, scramble)

    @staticmethod
    def _recover_file(node: _File, rng: SimRng, scramble: bool = False) -> None:
        durable = node.durable
        if node.data.startswith(durable):
            unsynced_bytes = len(node.data) - len(durable)
            kept = rng.randint(0, unsynced_bytes) if unsynced_bytes else 0
            node.data = bytearray(node.data[: len(durable) + kept])
            if scramble and kept > 1:
                start = len(durable) + rng.randrange(kept - 1)
                end = min(len(durable) + kept, start + 1 + rng.randrange(_TORN_MAX))
                if rng.chance(0.5):
                    node.data[start:end] = bytes(end - start)
                else:
                    node.data[start:end] = bytes(rng.randrange(256) for _ in range(end - start))
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

    def _check_root(self, root: str, path: str, write: bool = False) -> None:
        failure = self._failed.get(root)
        if failure is None:
            return
        code, reads, writes = failure
        if not (writes if write else reads):
            return
        if code == errno.EACCES and path == root:
            return
        raise _error(code, path)

    def _spend(self, root: str, path: str, growth: int) -> int:
        """The bytes of ``growth`` that fit on ``root``'s file system (all of them unless it
        was filled); the caller writes those, then raises ENOSPC if some did not fit."""
        left = self._space.get(root)
        if left is None or growth <= 0:
            return growth
        fits = min(left, growth)
        self._space[root] = left - fits
        return fits

    def _full(self, root: str, path: str) -> None:
        """ENOSPC for a new entry on a full file system."""
        if self._space.get(root) == 0:
            raise _error(errno.ENOSPC, path)

    def _mutating(self) -> None:
        self._operations += 1
        if self._crash_countdown is not None:
            self._crash_countdown -= 1
            if self._crash_countdown <= 0:
                self._crash_countdown = None
                raise SimulatedCrash(f"simulated crash before operation {self._operations}")

    def _walk(self, path: str,
              write: bool = False) -> tuple[str, _Dir | _File | None, _Dir | None, str]:
        """(root, node or None if absent, parent dir or None for a root, entry name);
        ``write``: the operation is a write (for a dir whose writes alone fail)."""
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
            self._check_root(root, path, write)
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

    def _file(self, path: str, write: bool = False) -> _File:
        return self._file_at(path, write)[1]

    def _file_at(self, path: str, write: bool = False) -> tuple[str, _File]:
        root, node, _, _ = self._walk(path, write)
        if node is None:
            raise _error(errno.ENOENT, path)
        if isinstance(node, _Dir):
            raise _error(errno.EISDIR, path)
        if node.fault is not None:
            raise _error(node.fault, path)
        return root, node

    def _dir(self, path: str, write: bool = False) -> _Dir:
        _, node, _, _ = self._walk(path, write)
        if node is None:
            raise _error(errno.ENOENT, path)
        if isinstance(node, _File):
            raise _error(errno.ENOTDIR, path)
        return node

    def _parent(self, path: str) -> tuple[_Dir, str, _Dir | _File | None]:
        """For entry changes (writes)."""
        parent, name, node, _ = self._parent_at(path)
        return parent, name, node

    def _parent_at(self, path: str) -> tuple[_Dir, str, _Dir | _File | None, str]:
        root, node, parent, name = self._walk(path, write=True)
        if parent is None:
            raise _error(errno.EBUSY, path)
        return parent, name, node, root

    # --- files -------------------------------------------------------------------------------

    def create(self, path: str) -> None:
        """Create ``path`` empty, truncating an existing file."""
        parent, name, node, root = self._parent_at(path)
        if isinstance(node, _Dir):
            raise _error(errno.EISDIR, path)
        if node is not None and node.fault is not None:
            raise _error(node.fault, path)
        if node is None:
            self._full(root, path)
        self._mutating()
        if node is None:
            parent.link(name, _File())
            self._namespace_version += 1
        else:
            node.data = bytearray()

    def append(self, path: str, data: bytes | bytearray) -> int:
        """Write ``data`` at the end; return the offset written at."""
        root, node = self._file_at(path, write=True)
        self._mutating()
        offset = len(node.data)
        fits = self._spend(root, path, len(data))
        node.data += data[:fits] if fits < len(data) else data
        self._bytes_written += fits
        if fits < len(data):
            raise _error(errno.ENOSPC, path)
        return offset

    def append_pieces(self, path: str, pieces: Sequence[bytes | bytearray | memoryview]) -> int:
        """:meth:`append` of the pieces' concatenation (a crash keeps what an append's would)."""
        return self.append(path, b"".join(pieces))

    def pwrite(self, path: str, offset: int, data: bytes) -> None:
        """Write ``data`` at ``offset`` (zero-filling a gap past the end, as a file system does)."""
        assert offset >= 0
        root, node = self._file_at(path, write=True)
        growth = offset + len(data) - len(node.data)
        if self._spend(root, path, growth) < growth:
            raise _error(errno.ENOSPC, path)
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
        root, node = self._file_at(path, write=True)
        growth = size - len(node.data)
        if self._spend(root, path, growth) < growth:
            raise _error(errno.ENOSPC, path)
        self._mutating()
        if size <= len(node.data):
            del node.data[size:]
        else:
            node.data += bytes(size - len(node.data))

    def fsync(self, path: str) -> None:
        """Make the file's contents durable."""
        root, node = self._file_at(path, write=True)
        self._sync_node(root, path, node)

    def open_sync(self, path: str) -> SimSyncHandle:
        """A handle whose ``sync`` fsyncs the file (its inode), wherever it has moved since."""
        root, node = self._file_at(path, write=True)
        return SimSyncHandle(self, root, path, node)

    def _sync_node(self, root: str, path: str, node: _File) -> None:
        """:meth:`SimSyncHandle.sync`: the root's and the file's faults, then :meth:`fsync`'s
        effect on the inode."""
        self._check_root(root, path, write=True)
        if node.fault is not None:
            raise _error(node.fault, path)
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
        root, target = self._file_at(dst_path, write=True)
        self._mutating()
        chunk = bytes(source.data[src_offset : src_offset + length])
        fits = self._spend(root, dst_path, len(chunk))
        target.data += chunk[:fits]
        self._bytes_copied += fits
        if fits < len(chunk):
            raise _error(errno.ENOSPC, dst_path)
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
        parent, name, node, root = self._parent_at(path)
        if node is not None:
            raise _error(errno.EEXIST, path)
        self._full(root, path)
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
        directory = self._dir(path, write=True)
        self._fsync_dir_node(directory)

    def open_dir_sync(self, path: str) -> SimSyncHandle:
        """A handle whose ``sync`` fsyncs the directory (its inode), wherever it has moved."""
        root, _, _, _ = self._walk(path, write=True)
        return SimSyncHandle(self, root, path, self._dir(path, write=True))

    def _sync_dir_node(self, root: str, path: str, directory: _Dir) -> None:
        """:meth:`SimSyncHandle.sync` on a directory: the root's faults, then
        :meth:`fsync_dir`'s effect on it."""
        self._check_root(root, path, write=True)
        self._fsync_dir_node(directory)

    def _fsync_dir_node(self, directory: _Dir) -> None:
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
