"""The real :class:`~impl.storage.disk.Disk`: ``os`` calls with a small cache of open descriptors.

Zero-copy: :meth:`OsDisk.copy_range` uses ``os.copy_file_range`` (in-kernel, and a reflink on
file systems that support it), falling back to ``os.sendfile`` between two files, and to a
read/write loop only to attribute an error to one side. Every ``OSError`` carries the path at fault
in ``filename`` so that the log manager can take exactly one log dir offline.

Allocation before a large append: an append of at least ``PREALLOCATE_MIN_BYTES`` first asks the
file system for the blocks it will fill (``fallocate`` with ``FALLOC_FL_KEEP_SIZE``: the file's
size and contents do not change, only its blocks). On ext4 (and XFS) a buffered write into
blocks not yet allocated reserves them one 4 KiB block at a time (delayed allocation); into
allocated blocks it only copies, which halves the kernel's CPU per MB appended (measured in
docs/performance.md). Exactly the written range is allocated, so no block lies beyond a file's
end; a file system without ``fallocate`` turns it off for the disk, and any other failure leaves
the write itself to succeed or to report the error (``ENOSPC`` included).
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import stat
from collections import OrderedDict
from collections.abc import Callable, Sequence

from impl.storage.disk import DiskUsage

_COPY_CHUNK_MAX_BYTES = 1 << 30
#: appends this large allocate their blocks first (smaller ones: the syscall costs more than the
#: per-block reservation it saves; measured at 4 and 16 KiB)
PREALLOCATE_MIN_BYTES = 64 << 10
#: ``fallocate``'s mode: allocate without changing the file's size (linux/falloc.h)
FALLOC_FL_KEEP_SIZE = 1
#: errors meaning "this file system (or kernel) cannot allocate ahead"
_UNSUPPORTED = frozenset({errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})


def _libc_fallocate() -> Callable[[int, int, int, int], int] | None:
    """libc's ``fallocate(fd, mode, offset, length)`` (0 or -1 with ``errno`` set), or None where
    the C library has none (``os`` offers only ``posix_fallocate``, which changes the size)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        function = libc.fallocate
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    function.restype = ctypes.c_int
    return function


_FALLOCATE = _libc_fallocate()


def _with_path(error: OSError, path: str) -> OSError:
    if error.filename == path:
        return error
    return OSError(error.errno, error.strerror or os.strerror(error.errno or errno.EIO), path)


class _OwnedDescriptor:
    """A descriptor this object owns (a ``dup`` of a cached one), closed once."""

    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        self.close()


class OsFileSlice(_OwnedDescriptor):
    """A range of a file backed by its own descriptor (a ``dup`` taken when the slice opened).

    The descriptor refers to the open file, not the name, so the slice keeps reading the same
    bytes after the segment is renamed into ``.delete`` or unlinked by retention.
    """

    __slots__ = ("_position", "_size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        super().__init__(fd)
        self._position = position
        self._size = size

    @property
    def position(self) -> int:
        """Byte offset of the range in the file."""
        return self._position

    @property
    def size(self) -> int:
        """Length of the range in bytes."""
        return self._size

    def fileno(self) -> int:
        """The descriptor, for ``os.sendfile``; valid until :meth:`close`."""
        if self._fd < 0:
            raise ValueError("slice is closed")
        return self._fd

    def read_all(self) -> bytes:
        """The range's bytes (shorter if the file shrank)."""
        return os.pread(self.fileno(), self._size, self._position)


class OsSyncHandle(_OwnedDescriptor):
    """The right to ``fsync`` one file (or directory) through its own descriptor (a ``dup``
    taken on the opening thread, or the directory opened read-only), so a worker thread can
    fsync while the descriptor cache closes and reuses its descriptors: the descriptor refers
    to the open file, not the name."""

    __slots__ = ("_path",)

    def __init__(self, fd: int, path: str) -> None:
        super().__init__(fd)
        self._path = path

    def sync(self) -> None:
        """``fsync`` the file (from any one thread)."""
        if self._fd < 0:
            raise ValueError("sync handle is closed")
        try:
            os.fsync(self._fd)
        except OSError as error:
            raise _with_path(error, self._path) from None


class OsDisk:
    """The file system, through ``os``; keeps up to ``open_files_max`` descriptors open."""

    def __init__(self, open_files_max: int = 512) -> None:
        self._fds: OrderedDict[str, int] = OrderedDict()
        #: each directory (named without a trailing ``/``) -> the cached paths below it, at any
        #: depth: what :meth:`_forget` closes when the directory goes, found without a scan of
        #: the whole cache (once for every file created, renamed or removed)
        self._below: dict[str, set[str]] = {}
        self._open_files_max = open_files_max
        self._copy_file_range_works = hasattr(os, "copy_file_range")
        #: ``fallocate`` before large appends (None: not available here)
        self._fallocate = _FALLOCATE

    # --- descriptor cache --------------------------------------------------------------------

    def _fd(self, path: str) -> int:
        fd = self._fds.get(path)
        if fd is not None:
            self._fds.move_to_end(path)
            return fd
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except OSError as error:
            raise _with_path(error, path) from None
        self._keep(path, fd)
        return fd

    @staticmethod
    def _directories(path: str) -> list[str]:
        """Every ``d`` (not ending in ``/``) such that ``path`` starts with ``d + "/"``."""
        directories: list[str] = []
        slash = path.find("/")
        while slash >= 0:
            if slash == 0 or path[slash - 1] != "/":
                directories.append(path[:slash])
            slash = path.find("/", slash + 1)
        return directories

    def _keep(self, path: str, fd: int) -> None:
        """Cache ``fd`` as ``path``'s descriptor, closing the least recently used beyond
        ``open_files_max``."""
        self._fds[path] = fd
        for directory in self._directories(path):
            self._below.setdefault(directory, set()).add(path)
        while len(self._fds) > self._open_files_max:
            self._close(next(iter(self._fds)))

    def _close(self, path: str) -> None:
        os.close(self._fds.pop(path))
        for directory in self._directories(path):
            below = self._below[directory]
            below.discard(path)
            if not below:
                del self._below[directory]

    def _forget(self, path: str) -> None:
        """Close the descriptors of ``path`` and of every cached path below it."""
        cached = set(self._below.get(path.rstrip("/"), ()))
        if path in self._fds:
            cached.add(path)
        for each in cached:
            self._close(each)

    def close(self) -> None:
        """Close every cached descriptor."""
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        self._below.clear()

    # --- files -------------------------------------------------------------------------------

    def create(self, path: str) -> None:
        """Create or truncate ``path``."""
        self._forget(path)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        except OSError as error:
            raise _with_path(error, path) from None
        self._keep(path, fd)

    def append(self, path: str, data: bytes | bytearray) -> int:
        """Write at the end; return the offset written at."""
        return self.append_pieces(path, (data,))

    def append_pieces(self, path: str, pieces: Sequence[bytes | bytearray | memoryview]) -> int:
        """Write the pieces one after the other at the end (``pwritev``); return the offset
        written at."""
        fd = self._fd(path)
        size = sum(len(piece) for piece in pieces)
        try:
            offset = os.fstat(fd).st_size
            if size >= PREALLOCATE_MIN_BYTES and self._fallocate is not None:
                self._allocate(fd, offset, size)
            self._pwritev_all(fd, offset, pieces)
        except OSError as error:
            raise _with_path(error, path) from None
        return offset

    def _allocate(self, fd: int, offset: int, length: int) -> None:
        """Allocate the blocks of ``[offset, offset + length)`` without changing the size; on a
        file system that cannot, stop trying; any other failure is the write's to report."""
        assert self._fallocate is not None
        failed = self._fallocate(fd, FALLOC_FL_KEEP_SIZE, offset, length) != 0
        if failed and ctypes.get_errno() in _UNSUPPORTED:
            self._fallocate = None

    @staticmethod
    def _pwritev_all(fd: int, offset: int,
                     pieces: Sequence[bytes | bytearray | memoryview]) -> None:
        """Every byte of ``pieces`` from ``offset`` on, however many calls a short write takes
        (one, normally)."""
        views = [memoryview(piece) for piece in pieces if len(piece)]
        while views:
            written = os.pwritev(fd, views, offset)
            offset += written
            while views and written >= views[0].nbytes:
                written -= views[0].nbytes
                del views[0]
            if written:
                views[0] = views[0][written:]

    def pwrite(self, path: str, offset: int, data: bytes) -> None:
        """Write ``data`` at ``offset``."""
        fd = self._fd(path)
        try:
            self._pwritev_all(fd, offset, (data,))
        except OSError as error:
            raise _with_path(error, path) from None

    def read(self, path: str, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``offset``."""
        fd = self._fd(path)
        chunks: list[bytes] = []
        try:
            while length > 0:
                chunk = os.pread(fd, length, offset)
                if not chunk:
                    break
                chunks.append(chunk)
                offset += len(chunk)
                length -= len(chunk)
        except OSError as error:
            raise _with_path(error, path) from None
        return b"".join(chunks)

    def truncate(self, path: str, size: int) -> None:
        """Cut the file to ``size`` bytes."""
        try:
            os.ftruncate(self._fd(path), size)
        except OSError as error:
            raise _with_path(error, path) from None

    def fsync(self, path: str) -> None:
        """``fsync`` the file."""
        try:
            os.fsync(self._fd(path))
        except OSError as error:
            raise _with_path(error, path) from None

    def size(self, path: str) -> int:
        """The file's size."""
        try:
            return os.stat(path).st_size
        except OSError as error:
            raise _with_path(error, path) from None

    def copy_range(self, src_path: str, src_offset: int, length: int, dst_path: str) -> int:
        """Append a range of ``src_path`` to ``dst_path`` in the kernel."""
        src_fd = self._fd(src_path)
        dst_fd = self._fd(dst_path)
        try:
            dst_offset = os.fstat(dst_fd).st_size
        except OSError as error:
            raise _with_path(error, dst_path) from None
        copied = 0
        try:
            while copied < length:
                count = min(length - copied, _COPY_CHUNK_MAX_BYTES)
                n = self._copy_once(src_fd, src_offset + copied, count, dst_fd, dst_offset + copied)
                if n == 0:
                    break
                copied += n
        except OSError:
            # Redo the remainder by read and write: whichever side fails names the bad dir.
            copied += self._copy_by_read_write(
                src_path, src_offset + copied, length - copied, dst_path, dst_offset + copied
            )
        return copied

    def _copy_once(
        self, src_fd: int, src_offset: int, count: int, dst_fd: int, dst_offset: int
    ) -> int:
        if self._copy_file_range_works:
            try:
                return os.copy_file_range(src_fd, dst_fd, count, src_offset, dst_offset)
            except OSError as error:
                if error.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                    raise
                self._copy_file_range_works = False
        # sendfile writes at the destination's file position.
        os.lseek(dst_fd, dst_offset, os.SEEK_SET)
        return os.sendfile(dst_fd, src_fd, src_offset, count)

    def _copy_by_read_write(
        self, src_path: str, src_offset: int, length: int, dst_path: str, dst_offset: int
    ) -> int:
        copied = 0
        while copied < length:
            data = self.read(src_path, src_offset + copied, min(length - copied, 1 << 20))
            if not data:
                break
            self.pwrite(dst_path, dst_offset + copied, data)
            copied += len(data)
        return copied

    def open_slice(self, path: str, position: int, size: int) -> OsFileSlice:
        """A ``dup`` of the cached descriptor, owned by the slice."""
        try:
            return OsFileSlice(os.dup(self._fd(path)), position, size)
        except OSError as error:
            raise _with_path(error, path) from None

    def open_sync(self, path: str) -> OsSyncHandle:
        """A ``dup`` of the cached descriptor, for an ``fsync`` on another thread."""
        try:
            return OsSyncHandle(os.dup(self._fd(path)), path)
        except OSError as error:
            raise _with_path(error, path) from None

    def open_dir_sync(self, path: str) -> OsSyncHandle:
        """The directory opened read-only, for an ``fsync`` on another thread."""
        try:
            return OsSyncHandle(os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), path)
        except OSError as error:
            raise _with_path(error, path) from None

    # --- directories -------------------------------------------------------------------------

    def mkdir(self, path: str) -> None:
        """``mkdir``."""
        try:
            os.mkdir(path)
        except OSError as error:
            raise _with_path(error, path) from None

    def list_dir(self, path: str) -> list[str]:
        """Sorted entry names."""
        try:
            return sorted(os.listdir(path))
        except OSError as error:
            raise _with_path(error, path) from None

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a directory; an I/O error (not absence) raises."""
        try:
            return stat.S_ISDIR(os.stat(path).st_mode)
        except FileNotFoundError:
            return False
        except OSError as error:
            raise _with_path(error, path) from None

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists; an I/O error (not absence) raises."""
        try:
            os.stat(path)
        except FileNotFoundError:
            return False
        except OSError as error:
            raise _with_path(error, path) from None
        return True

    def rename(self, src_path: str, dst_path: str) -> None:
        """Atomic rename; refuses to replace an existing ``dst_path``."""
        if os.path.lexists(dst_path):
            raise OSError(errno.EEXIST, os.strerror(errno.EEXIST), dst_path)
        self._forget(src_path)
        try:
            os.rename(src_path, dst_path)
        except OSError as error:
            raise _with_path(error, src_path) from None

    def remove(self, path: str) -> None:
        """Unlink a file."""
        self._forget(path)
        try:
            os.unlink(path)
        except OSError as error:
            raise _with_path(error, path) from None

    def rmdir(self, path: str) -> None:
        """Remove an empty directory."""
        self._forget(path)
        try:
            os.rmdir(path)
        except OSError as error:
            raise _with_path(error, path) from None

    def fsync_dir(self, path: str) -> None:
        """Open the directory read-only and ``fsync`` it."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as error:
            raise _with_path(error, path) from None

    def disk_usage(self, path: str) -> DiskUsage:
        """``statvfs`` of the file system: total bytes and bytes available to this user."""
        try:
            usage = shutil.disk_usage(path)
        except OSError as error:
            raise _with_path(error, path) from None
        return DiskUsage(total_bytes=usage.total, usable_bytes=usage.free)
