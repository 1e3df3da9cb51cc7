"""The ``Disk`` port: every file and directory operation the storage engine performs.

Why a port: the storage engine runs against the real file system
(:class:`impl.storage.os_disk.OsDisk`) and against a simulated in-memory disk in ``conformance/``
that injects crashes, torn writes and per-dir I/O errors. Both implement this Protocol; contract
tests run one suite against both.

Paths are absolute ``str`` paths under one of the configured log dirs (or the log dir itself).
Every method may raise :class:`OSError`; its ``filename`` attribute is the path at fault, so the
caller can attribute the error to exactly one log dir (for :meth:`Disk.copy_range`, ``filename`` is
the source or the destination, whichever failed).

Durability contract (what survives a process crash or power loss):

* **File contents.** Bytes written by :meth:`Disk.append`, :meth:`Disk.pwrite`,
  :meth:`Disk.copy_range` and size changes by :meth:`Disk.truncate` are durable only once
  :meth:`Disk.fsync` on that file has returned. After a crash a file holds its contents as of its
  last ``fsync``, possibly followed by any prefix of the bytes appended since (a torn tail); a
  ``pwrite`` over already-durable bytes that was not fsynced may or may not have happened.
* **Directory entries.** :meth:`Disk.create`, :meth:`Disk.mkdir`, :meth:`Disk.rename`,
  :meth:`Disk.remove` and :meth:`Disk.rmdir` change directory entries, which are durable only once
  :meth:`Disk.fsync_dir` on the parent directory has returned (for a rename, the parent of the
  source and of the destination: in this engine they are always the same). After a crash, each
  entry change that was not yet made durable may or may not have happened, independently of the
  others, except that the changes to one directory survive in order: if a later change to a
  directory survived, so did every earlier change to it.
* A rename is atomic: after a crash the entry is under the old name or the new one, never both,
  never neither.
* A file's contents belong to the file (its inode), not to its name: renaming a file or its
  directory keeps the contents and their durability.

Read handles for zero-copy transmission (:meth:`Disk.open_slice`) stay valid after the file is
renamed, truncated, or removed: they read the bytes as of when the slice was opened, or fewer if
the file was truncated below the slice (the reader must then stop at the first short read).

Sync handles (:meth:`Disk.open_sync`, :meth:`Disk.open_dir_sync`) are the one thing a caller
may use from another thread while the disk goes on serving others: the periodic flush and the
checkpoint writes open them on the event loop and fsync in a worker thread, so a request never
waits for a second's worth of writeback, nor for the device cache flush a checkpoint's fsync
waits behind (Kafka flushes and checkpoints on its scheduler thread). A sync handle follows the file
or directory (its inode) like a slice.

This module is a sans-IO core: it declares the port and imports no I/O module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__sans_io__ = True


@dataclass(frozen=True, slots=True)
class DiskUsage:
    """Capacity of the file system holding a log dir (KIP-827's total and usable bytes)."""

    total_bytes: int
    usable_bytes: int


class FileSlice(Protocol):
    """A byte range of one file, readable after the file is renamed or deleted.

    The owner must :meth:`close` it. The real disk backs it with its own file descriptor, so a
    broker can ``os.sendfile(socket, slice.fileno(), slice.position, slice.size)``; a simulated
    disk has no descriptor (``fileno`` raises :class:`io.UnsupportedOperation`) and the broker
    falls back to :meth:`read_all`.
    """

    @property
    def position(self) -> int:
        """Byte offset of the range in the file."""

    @property
    def size(self) -> int:
        """Length of the range in bytes."""

    def fileno(self) -> int:
        """An OS file descriptor owned by this slice (valid until :meth:`close`)."""

    def read_all(self) -> bytes:
        """The range's bytes (shorter if the file was truncated below the range)."""

    def close(self) -> None:
        """Release the descriptor; idempotent."""


class SyncHandle(Protocol):
    """The right to ``fsync`` one file, usable from any one thread at a time.

    Opened on the caller's thread; :meth:`sync` may run in a worker thread while other
    operations of the disk go on, and makes durable every byte of the file written before
    :meth:`sync` was called (later writes may or may not be included). It follows the file
    across renames and removal. The owner must :meth:`close` it (on the opening thread).
    """

    def sync(self) -> None:
        """``fsync`` the file.

        Raises: OSError with ``filename`` set to the path the handle was opened on.
        """

    def close(self) -> None:
        """Release the handle; idempotent."""


class Disk(Protocol):
    """File and directory operations, with the durability contract in the module docstring."""

    # --- files -------------------------------------------------------------------------------

    def create(self, path: str) -> None:
        """Create ``path`` as an empty file, truncating it if it exists.

        Durable: the entry after ``fsync_dir(parent)``.
        """

    def append(self, path: str, data: bytes | bytearray) -> int:
        """Write ``data`` at the end of the file; return the offset it was written at.

        Durable: after ``fsync(path)``.
        """

    def append_pieces(self, path: str, pieces: Sequence[bytes | bytearray | memoryview]) -> int:
        """Write ``pieces`` one after the other at the end of the file, as one :meth:`append` of
        their concatenation would (a crash may keep any prefix of it, as of an append); return
        the offset the first was written at.

        Durable: after ``fsync(path)``.
        """

    def pwrite(self, path: str, offset: int, data: bytes) -> None:
        """Write ``data`` at ``offset`` (which is at most the file's size).

        Durable: after ``fsync(path)``.
        """

    def read(self, path: str, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``offset``; fewer only at end of file."""

    def truncate(self, path: str, size: int) -> None:
        """Cut the file to ``size`` bytes (``size`` at most the current size).

        Durable: after ``fsync(path)``.
        """

    def fsync(self, path: str) -> None:
        """Make the file's contents and size durable."""

    def size(self, path: str) -> int:
        """The file's size in bytes (including bytes not yet durable)."""

    def copy_range(self, src_path: str, src_offset: int, length: int, dst_path: str) -> int:
        """Append ``length`` bytes of ``src_path`` from ``src_offset`` to the end of ``dst_path``.

        Zero-copy where the OS allows (``copy_file_range``, else ``sendfile``). Returns the bytes
        copied: ``length``, or fewer only when the source ends first.
        Durable: after ``fsync(dst_path)``.
        Raises: OSError with ``filename`` set to whichever of the two paths failed.
        """

    def open_slice(self, path: str, position: int, size: int) -> FileSlice:
        """A handle on ``size`` bytes from ``position`` that outlives renames and deletion."""

    def open_sync(self, path: str) -> SyncHandle:
        """A handle that fsyncs ``path``'s file, from another thread if need be (see
        :class:`SyncHandle`); ``sync()`` on it has the effect of :meth:`fsync` on the file."""

    def open_dir_sync(self, path: str) -> SyncHandle:
        """A handle that fsyncs the directory ``path``, from another thread if need be (see
        :class:`SyncHandle`); ``sync()`` on it has the effect of :meth:`fsync_dir` on the
        directory: every entry change made in it before ``sync()`` was called is durable."""

    # --- directories -------------------------------------------------------------------------

    def mkdir(self, path: str) -> None:
        """Create the directory ``path`` (its parent exists).

        Durable: after ``fsync_dir(parent)``.
        """

    def list_dir(self, path: str) -> list[str]:
        """The entry names in directory ``path``, sorted."""

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` exists and is a directory."""

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists."""

    def rename(self, src_path: str, dst_path: str) -> None:
        """Atomically rename a file or directory; ``dst_path`` must not exist (both in one dir).

        Durable: after ``fsync_dir`` of the parent.
        """

    def remove(self, path: str) -> None:
        """Remove a file. Durable: after ``fsync_dir(parent)``."""

    def rmdir(self, path: str) -> None:
        """Remove an empty directory. Durable: after ``fsync_dir(parent)``."""

    def fsync_dir(self, path: str) -> None:
        """Make the entries of directory ``path`` (creations, renames, removals) durable."""

    def disk_usage(self, path: str) -> DiskUsage:
        """Total and usable bytes of the file system holding ``path``."""
