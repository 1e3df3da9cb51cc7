"""The ``Disk`` port's contract, written once and run against every implementation.

Each ``check_*`` function takes a factory returning a fresh, empty disk and its log dirs, and
asserts what the port promises (results, and errors by ``errno`` and ``filename``). The same
functions run against :class:`impl.storage.os_disk.OsDisk` in a temporary directory and against
:class:`conformance.disk.SimDisk`, so the simulated disk cannot drift from the real one.
:func:`operation_outcomes` replays one seeded random operation sequence and returns what each
operation returned, relative to the log dirs, so two disks can be compared outcome by outcome.

Crash semantics (``check_crash_*``) run only against the simulated disk: a real process cannot
crash itself mid-test. What they pin down is the durability ordering the storage engine relies on
and that ext4/xfs give with ``fsync`` and directory ``fsync`` (see the contract in
:mod:`impl.storage.disk`): fsynced bytes and fsynced entries survive; unsynced appends survive as
a prefix, or (a torn write in the middle) with one damaged stretch inside it; a rename is atomic;
entry changes to one directory survive in order.

Partial failures: :func:`check_refused_writes_leave_reads` states, for both disks, what a
file or dir whose writes are refused does (every write raises naming the path, reads still
answer); against ``OsDisk`` the refusal is a permission (``chmod``, skipped as root), against
``SimDisk`` a file system remounted read-only. The simulated-only faults (a dir whose reads fail,
one failing file, a full disk, a torn middle) have their own ``check_*`` functions: a test cannot
make a real disk fail, or fill one, safely.

This module is a sans-IO core: the factories bring the I/O.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Sequence

from conformance.disk import SimDisk, SimulatedCrash
from conformance.rng import SimRng
from impl.storage.disk import Disk

__sans_io__ = True

#: A fresh empty disk and its (at least two) log dirs.
DiskFactory = Callable[[], tuple[Disk, Sequence[str]]]
#: A fresh empty simulated disk and its log dirs.
SimDiskFactory = Callable[[], tuple[SimDisk, Sequence[str]]]


def _os_error(call: Callable[[], object]) -> OSError | None:
    try:
        call()
    except OSError as error:
        return error
    return None


def _raises(code: int, filename: str, call: Callable[[], object]) -> None:
    error = _os_error(call)
    assert error is not None, f"expected OSError {errno.errorcode[code]} on {filename}"
    assert error.errno == code, f"expected {errno.errorcode[code]}, got {error!r}"
    assert error.filename == filename, f"expected filename {filename!r}, got {error!r}"


def check_files(make: DiskFactory) -> None:
    """create, append, pwrite, read, truncate, size, fsync."""
    disk, (log_dir, *_) = make()
    path = f"{log_dir}/00000000000000000000.log"
    disk.create(path)
    assert disk.size(path) == 0
    assert disk.append(path, b"hello") == 0
    assert disk.append(path, b" world") == 5
    assert disk.read(path, 0, 100) == b"hello world"
    assert disk.read(path, 6, 3) == b"wor"
    assert disk.read(path, 11, 10) == b""
    disk.pwrite(path, 0, b"J")
    disk.pwrite(path, 11, b"!")
    assert disk.read(path, 0, 100) == b"Jello world!"
    disk.fsync(path)
    disk.truncate(path, 5)
    assert disk.size(path) == 5
    assert disk.read(path, 0, 100) == b"Jello"
    disk.create(path)
    assert disk.size(path) == 0, "create truncates an existing file"
    assert disk.list_dir(log_dir) == ["00000000000000000000.log"]


def check_large_appends(make: DiskFactory) -> None:
    """Appends of a segment's sizes (OsDisk allocates their blocks first): the size is what was
    written, never what was allocated; a truncation and a crash-free rewrite read back exact."""
    disk, (log_dir, *_) = make()
    path = f"{log_dir}/00000000000000000000.log"
    disk.create(path)
    chunks = [bytes([index]) * size for index, size in
              enumerate((100, 64 << 10, (1 << 20) + 3, 200 << 10))]
    position = 0
    for chunk in chunks:
        assert disk.append(path, bytearray(chunk)) == position
        position += len(chunk)
        assert disk.size(path) == position
    assert disk.read(path, 0, position + 4096) == b"".join(chunks)
    disk.truncate(path, 100 + 1000)
    assert disk.size(path) == 1100
    assert disk.append(path, bytearray(b"z" * (70 << 10))) == 1100
    expected = chunks[0] + chunks[1][:1000] + b"z" * (70 << 10)
    assert disk.read(path, 0, 1 << 22) == expected
    piece = disk.open_slice(path, 50, 2000)
    try:
        assert piece.read_all() == expected[50:2050]
    finally:
        piece.close()


def check_append_pieces(make: DiskFactory) -> None:
    """append_pieces writes its pieces (bytes, bytearrays, views, empty ones) one after the
    other at the end, returning where the first went, as one append of their concatenation."""
    disk, (log_dir, *_) = make()
    path = f"{log_dir}/00000000000000000000.log"
    disk.create(path)
    assert disk.append(path, b"ab") == 0
    body = bytes(range(256)) * 4096
    pieces: list[bytes | bytearray | memoryview] = [
        bytearray(b"H" * 61), b"", memoryview(body)[61:], memoryview(b"tail")[1:]]
    assert disk.append_pieces(path, pieces) == 2
    expected = b"ab" + b"H" * 61 + body[61:] + b"ail"
    assert disk.size(path) == len(expected)
    assert disk.read(path, 0, 1 << 21) == expected
    assert disk.append_pieces(path, []) == len(expected)
    assert disk.append_pieces(path, [b"z"]) == len(expected)
    assert disk.read(path, 0, 1 << 21) == expected + b"z"


def check_copy_range(make: DiskFactory) -> None:
    """copy_range appends to the destination and stops short only at the source's end."""
    disk, (source_dir, target_dir, *_) = make()
    source = f"{source_dir}/s"
    target = f"{target_dir}/t"
    disk.create(source)
    disk.create(target)
    disk.append(source, bytes(range(200)))
    disk.append(target, b"xy")
    assert disk.copy_range(source, 10, 50, target) == 50
    assert disk.copy_range(source, 190, 50, target) == 10
    assert disk.copy_range(source, 200, 5, target) == 0
    assert disk.read(target, 0, 1000) == b"xy" + bytes(range(10, 60)) + bytes(range(190, 200))
    assert disk.size(source) == 200


def check_slices(make: DiskFactory) -> None:
    """A slice outlives renames and removal and reads fewer bytes after a truncation."""
    disk, (log_dir, *_) = make()
    disk.mkdir(f"{log_dir}/t-0")
    path = f"{log_dir}/t-0/0.log"
    disk.create(path)
    disk.append(path, b"0123456789")
    first = disk.open_slice(path, 2, 5)
    assert (first.position, first.size) == (2, 5)
    disk.rename(f"{log_dir}/t-0", f"{log_dir}/t-0.delete")
    assert first.read_all() == b"23456"
    second = disk.open_slice(f"{log_dir}/t-0.delete/0.log", 0, 10)
    disk.truncate(f"{log_dir}/t-0.delete/0.log", 4)
    assert first.read_all() == b"23"
    disk.remove(f"{log_dir}/t-0.delete/0.log")
    assert second.read_all() == b"0123"
    first.close()
    first.close()
    second.close()


def check_sync_handles(make: DiskFactory) -> None:
    """A sync handle fsyncs its file (a dir sync handle its dir) wherever it has moved (renamed
    with its dir, removed), is refused for a missing file (dir) naming the path, and closes
    idempotently."""
    disk, (log_dir, *_) = make()
    disk.mkdir(f"{log_dir}/t-0")
    path = f"{log_dir}/t-0/0.log"
    disk.create(path)
    disk.append(path, b"0123")
    handle = disk.open_sync(path)
    disk.append(path, b"45")
    handle.sync()
    disk.rename(f"{log_dir}/t-0", f"{log_dir}/t-0.delete")
    handle.sync()
    disk.remove(f"{log_dir}/t-0.delete/0.log")
    handle.sync()
    assert disk.list_dir(f"{log_dir}/t-0.delete") == []
    handle.close()
    handle.close()
    _raises(errno.ENOENT, f"{log_dir}/t-0/0.log", lambda: disk.open_sync(f"{log_dir}/t-0/0.log"))
    directory = disk.open_dir_sync(f"{log_dir}/t-0.delete")
    disk.create(f"{log_dir}/t-0.delete/1.log")
    directory.sync()
    disk.rename(f"{log_dir}/t-0.delete", f"{log_dir}/t-1")
    directory.sync()  # it follows its dir
    assert disk.list_dir(f"{log_dir}/t-1") == ["1.log"]
    directory.close()
    directory.close()
    _raises(errno.ENOENT, f"{log_dir}/t-0", lambda: disk.open_dir_sync(f"{log_dir}/t-0"))


def check_directories(make: DiskFactory) -> None:
    """mkdir, list_dir (sorted), is_dir, exists, rename of a directory, remove, rmdir."""
    disk, (log_dir, *_) = make()
    for name in ("t-1", "t-0.move", "t-0"):
        disk.mkdir(f"{log_dir}/{name}")
    disk.create(f"{log_dir}/t-0.move/0.log")
    disk.append(f"{log_dir}/t-0.move/0.log", b"abc")
    disk.fsync_dir(log_dir)
    assert disk.list_dir(log_dir) == ["t-0", "t-0.move", "t-1"]
    assert disk.is_dir(f"{log_dir}/t-0")
    assert not disk.is_dir(f"{log_dir}/t-0.move/0.log")
    assert not disk.is_dir(f"{log_dir}/absent")
    assert disk.exists(f"{log_dir}/t-0.move/0.log")
    assert not disk.exists(f"{log_dir}/absent")
    disk.rename(f"{log_dir}/t-0", f"{log_dir}/t-0.delete")
    disk.rename(f"{log_dir}/t-0.move", f"{log_dir}/t-0")
    disk.fsync_dir(log_dir)
    assert disk.read(f"{log_dir}/t-0/0.log", 0, 10) == b"abc"
    assert disk.list_dir(log_dir) == ["t-0", "t-0.delete", "t-1"]
    disk.remove(f"{log_dir}/t-0/0.log")
    disk.rmdir(f"{log_dir}/t-0")
    disk.rmdir(f"{log_dir}/t-0.delete")
    assert disk.list_dir(log_dir) == ["t-1"]
    usage = disk.disk_usage(log_dir)
    assert usage.total_bytes >= usage.usable_bytes >= 0


def check_errors(make: DiskFactory) -> None:
    """Each misuse raises the same errno as the OS, naming the path at fault."""
    disk, (log_dir, *_) = make()
    absent = f"{log_dir}/absent"
    disk.mkdir(f"{log_dir}/d")
    disk.create(f"{log_dir}/f")
    disk.create(f"{log_dir}/g")
    _raises(errno.ENOENT, absent, lambda: disk.append(absent, b"x"))
    _raises(errno.ENOENT, absent, lambda: disk.read(absent, 0, 1))
    _raises(errno.ENOENT, absent, lambda: disk.size(absent))
    _raises(errno.ENOENT, absent, lambda: disk.fsync(absent))
    _raises(errno.ENOENT, absent, lambda: disk.list_dir(absent))
    _raises(errno.ENOENT, absent, lambda: disk.remove(absent))
    _raises(errno.ENOENT, absent, lambda: disk.rmdir(absent))
    _raises(errno.ENOENT, absent, lambda: disk.fsync_dir(absent))
    _raises(errno.ENOENT, absent, lambda: disk.rename(absent, f"{log_dir}/other"))
    _raises(errno.ENOENT, f"{absent}/x", lambda: disk.create(f"{absent}/x"))
    _raises(errno.ENOENT, f"{absent}/x", lambda: disk.mkdir(f"{absent}/x"))
    _raises(errno.EEXIST, f"{log_dir}/d", lambda: disk.mkdir(f"{log_dir}/d"))
    _raises(errno.EEXIST, f"{log_dir}/f", lambda: disk.mkdir(f"{log_dir}/f"))
    _raises(errno.EEXIST, f"{log_dir}/g", lambda: disk.rename(f"{log_dir}/f", f"{log_dir}/g"))
    _raises(errno.EEXIST, f"{log_dir}/d", lambda: disk.rename(f"{log_dir}/f", f"{log_dir}/d"))
    _raises(errno.EISDIR, f"{log_dir}/d", lambda: disk.create(f"{log_dir}/d"))
    _raises(errno.EISDIR, f"{log_dir}/d", lambda: disk.read(f"{log_dir}/d", 0, 1))
    _raises(errno.EISDIR, f"{log_dir}/d", lambda: disk.append(f"{log_dir}/d", b"x"))
    _raises(errno.EISDIR, f"{log_dir}/d", lambda: disk.remove(f"{log_dir}/d"))
    _raises(errno.ENOTDIR, f"{log_dir}/f", lambda: disk.list_dir(f"{log_dir}/f"))
    _raises(errno.ENOTDIR, f"{log_dir}/f", lambda: disk.rmdir(f"{log_dir}/f"))
    _raises(errno.ENOTDIR, f"{log_dir}/f", lambda: disk.fsync_dir(f"{log_dir}/f"))
    _raises(errno.ENOTDIR, f"{log_dir}/f/x", lambda: disk.exists(f"{log_dir}/f/x"))
    _raises(errno.ENOTDIR, f"{log_dir}/f/x", lambda: disk.create(f"{log_dir}/f/x"))
    disk.create(f"{log_dir}/d/inside")
    _raises(errno.ENOTEMPTY, f"{log_dir}/d", lambda: disk.rmdir(f"{log_dir}/d"))
    assert disk.list_dir(log_dir) == ["d", "f", "g"], "a failed operation changes nothing"


_FILE_NAMES = ("f0", "f1", "f2")
_DIR_NAMES = ("t-0", "t-0.move", "t-0.delete")


def operation_outcomes(disk: Disk, log_dirs: Sequence[str], seed: int, steps: int) -> list[str]:
    """Run a seeded random operation sequence; return each outcome relative to the log dirs.

    Args:
        disk: a fresh disk.
        log_dirs: its log dirs (the first two are used).
        seed: decides the operations; the same seed gives the same sequence on any disk.
        steps: how many operations.

    Returns:
        One string per operation: its result, or the errno name and the relative path at fault.
    """
    rng = SimRng(seed)
    roots = list(log_dirs[:2])
    outcomes: list[str] = []

    def relative(path: object) -> str:
        text = str(path)
        for index, root in enumerate(roots):
            if text == root or text.startswith(root + "/"):
                return f"<{index}>{text[len(root):]}"
        return text

    def directory() -> str:
        root = rng.choice(roots)
        return root if rng.chance(0.4) else f"{root}/{rng.choice(_DIR_NAMES)}"

    def file_path() -> str:
        return f"{directory()}/{rng.choice(_FILE_NAMES)}"

    for _ in range(steps):
        operation = rng.randrange(14)
        try:
            if operation == 0:
                disk.create(file_path())
                result: object = None
            elif operation == 1:
                result = disk.append(file_path(), bytes([rng.randrange(256)]) * rng.randint(1, 9))
            elif operation == 2:
                disk.pwrite(file_path(), rng.randrange(12), b"P" * rng.randint(1, 4))
                result = None
            elif operation == 3:
                result = disk.read(file_path(), rng.randrange(12), rng.randint(0, 20))
            elif operation == 4:
                path = file_path()
                disk.truncate(path, min(rng.randrange(12), disk.size(path)))
                result = None
            elif operation == 5:
                result = disk.size(file_path())
            elif operation == 6:
                disk.fsync(file_path())
                result = None
            elif operation == 7:
                source, target = file_path(), file_path()
                if source == target:
                    continue
                result = disk.copy_range(source, rng.randrange(8), rng.randint(0, 16), target)
            elif operation == 8:
                disk.mkdir(f"{rng.choice(roots)}/{rng.choice(_DIR_NAMES)}")
                result = None
            elif operation == 9:
                result = disk.list_dir(directory())
            elif operation == 10:
                root = rng.choice(roots)
                disk.rename(f"{root}/{rng.choice(_DIR_NAMES)}", f"{root}/{rng.choice(_DIR_NAMES)}")
                result = None
            elif operation == 11:
                disk.remove(file_path())
                result = None
            elif operation == 12:
                disk.rmdir(f"{rng.choice(roots)}/{rng.choice(_DIR_NAMES)}")
                result = None
            else:
                path = file_path()
                result = (disk.exists(path), disk.is_dir(directory()))
            outcomes.append(f"{operation}:ok:{result!r}")
        except OSError as error:
            code = errno.errorcode.get(error.errno or 0, str(error.errno))
            outcomes.append(f"{operation}:{code}:{relative(error.filename)}")
    return outcomes


def check_crash_keeps_what_was_synced(make: SimDiskFactory, seeds: int = 50) -> None:
    """Fsynced bytes under fsynced entries survive every crash; unsynced ones may not."""
    for seed in range(seeds):
        disk, (log_dir, *_) = make()
        disk.mkdir(f"{log_dir}/t-0")
        disk.fsync_dir(log_dir)
        disk.create(f"{log_dir}/t-0/0.log")
        disk.fsync_dir(f"{log_dir}/t-0")
        disk.append(f"{log_dir}/t-0/0.log", b"durable")
        disk.fsync(f"{log_dir}/t-0/0.log")
        disk.append(f"{log_dir}/t-0/0.log", b"-unsynced")
        disk.create(f"{log_dir}/t-0/1.log")
        disk.crash(SimRng(seed))
        contents = disk.read(f"{log_dir}/t-0/0.log", 0, 100)
        assert contents.startswith(b"durable"), (seed, contents)
        assert b"durable-unsynced".startswith(contents), (seed, contents)
        assert disk.size(f"{log_dir}/t-0/0.log") == len(contents)


def check_crash_loss_is_possible(make: SimDiskFactory, seeds: int = 50) -> None:
    """Across seeds, each unsynced change is sometimes lost and sometimes kept (not vacuous)."""
    torn = kept = entry_lost = entry_kept = 0
    for seed in range(seeds):
        disk, (log_dir, *_) = make()
        disk.create(f"{log_dir}/a")
        disk.fsync_dir(log_dir)
        disk.append(f"{log_dir}/a", b"0123456789")
        disk.create(f"{log_dir}/b")
        disk.crash(SimRng(seed))
        size = disk.size(f"{log_dir}/a")
        torn += 0 < size < 10
        kept += size == 10
        present = disk.exists(f"{log_dir}/b")
        entry_kept += present
        entry_lost += not present
    assert torn > 0
    assert kept > 0
    assert entry_lost > 0
    assert entry_kept > 0


def check_crash_rename_atomic_and_ordered(make: SimDiskFactory, seeds: int = 80) -> None:
    """A rename leaves old or new name, never both or neither; changes to a dir survive in order."""
    outcomes: set[tuple[str, ...]] = set()
    for seed in range(seeds):
        disk, (log_dir, *_) = make()
        disk.mkdir(f"{log_dir}/t-0")
        disk.mkdir(f"{log_dir}/t-0.move")
        disk.fsync_dir(log_dir)
        disk.rename(f"{log_dir}/t-0", f"{log_dir}/t-0.delete")
        disk.rename(f"{log_dir}/t-0.move", f"{log_dir}/t-0")
        disk.crash(SimRng(seed))
        outcomes.add(tuple(disk.list_dir(log_dir)))
    # Nothing survived, the first rename only, or both: never the second without the first.
    assert outcomes == {("t-0", "t-0.move"), ("t-0.delete", "t-0.move"), ("t-0", "t-0.delete")}


def check_armed_crash(make: SimDiskFactory) -> None:
    """arm_crash strikes before the n-th mutating operation, which does not happen."""
    disk, (log_dir, *_) = make()
    disk.arm_crash(2)
    disk.create(f"{log_dir}/a")
    assert disk.read(f"{log_dir}/a", 0, 1) == b""
    try:
        disk.append(f"{log_dir}/a", b"x")
    except SimulatedCrash:
        pass
    else:
        raise AssertionError("the armed crash did not strike")
    assert disk.size(f"{log_dir}/a") == 0
    disk.append(f"{log_dir}/a", b"y")


def check_sync_handle_durability(make: SimDiskFactory, seeds: int = 30) -> None:
    """What a handle's ``sync`` made durable survives every crash, also after the file was
    renamed with its dir; bytes appended after it may be lost; a crash armed before it strikes
    there; once the dir failed it raises EIO naming the path it was opened on."""
    lost_after = 0
    for seed in range(seeds):
        disk, (log_dir, *_) = make()
        disk.mkdir(f"{log_dir}/t-0")
        disk.create(f"{log_dir}/t-0/0.log")
        disk.fsync_dir(f"{log_dir}/t-0")
        disk.fsync_dir(log_dir)
        handle = disk.open_sync(f"{log_dir}/t-0/0.log")
        disk.append(f"{log_dir}/t-0/0.log", b"durable")
        disk.rename(f"{log_dir}/t-0", f"{log_dir}/t-0.move")
        disk.fsync_dir(log_dir)
        handle.sync()
        handle.close()
        disk.append(f"{log_dir}/t-0.move/0.log", b"-unsynced")
        disk.crash(SimRng(seed))
        contents = disk.read(f"{log_dir}/t-0.move/0.log", 0, 100)
        assert contents.startswith(b"durable"), (seed, contents)
        lost_after += contents != b"durable-unsynced"
    assert lost_after, "no crash lost the bytes appended after the sync (vacuous)"
    disk, (bad, *_) = make()
    disk.create(f"{bad}/a")
    disk.fsync_dir(bad)
    armed = disk.open_sync(f"{bad}/a")
    disk.append(f"{bad}/a", b"x")
    disk.arm_crash(1)
    try:
        armed.sync()
    except SimulatedCrash:
        pass
    else:
        raise AssertionError("the armed crash did not strike before the sync")
    disk.crash(SimRng(0))
    handle = disk.open_sync(f"{bad}/a")
    disk.fail_dir(bad)
    _raises(errno.EIO, f"{bad}/a", handle.sync)
    _check_dir_sync_handle_durability(make, seeds)


def _check_dir_sync_handle_durability(make: SimDiskFactory, seeds: int) -> None:
    """What a dir handle's ``sync`` made durable survives every crash (the entries changed
    before it), the entry changes after it may be lost; a failed dir raises on it."""
    lost_after = 0
    for seed in range(seeds):
        disk, (log_dir, *_) = make()
        directory = disk.open_dir_sync(log_dir)
        disk.create(f"{log_dir}/a")
        directory.sync()
        directory.close()
        disk.create(f"{log_dir}/b")
        disk.crash(SimRng(seed))
        assert disk.exists(f"{log_dir}/a"), seed
        lost_after += not disk.exists(f"{log_dir}/b")
    assert lost_after, "no crash lost the entry created after the sync (vacuous)"
    disk, (bad, *_) = make()
    directory = disk.open_dir_sync(bad)
    disk.fail_dir(bad)
    _raises(errno.EIO, bad, directory.sync)


def check_failed_dir(make: SimDiskFactory) -> None:
    """A failed dir raises EIO everywhere under it, slices included; other dirs are untouched."""
    disk, (bad, good, *_) = make()
    disk.create(f"{bad}/a")
    disk.create(f"{good}/a")
    disk.fsync_dir(bad)
    held = disk.open_slice(f"{bad}/a", 0, 1)
    disk.fail_dir(bad)
    for call in (
        lambda: disk.list_dir(bad),
        lambda: disk.exists(bad),
        lambda: disk.append(f"{bad}/a", b"x"),
        lambda: disk.create(f"{bad}/b"),
        lambda: disk.fsync_dir(bad),
        held.read_all,
    ):
        error = _os_error(call)
        assert error is not None, "a failed dir answered"
        assert error.errno == errno.EIO
        assert str(error.filename).startswith(bad)
    _raises(errno.EIO, f"{bad}/a", lambda: disk.copy_range(f"{good}/a", 0, 1, f"{bad}/a"))
    assert disk.append(f"{good}/a", b"ok") == 0
    assert disk.failed_dirs() == [bad]
    disk.crash(SimRng(1))
    _raises(errno.EIO, bad, lambda: disk.list_dir(bad))
    disk.repair_dir(bad)
    assert disk.exists(f"{bad}/a")


def check_unreadable_dir(make: SimDiskFactory) -> None:
    """As chmod 000: the dir exists, everything inside raises EACCES."""
    disk, (log_dir, *_) = make()
    disk.create(f"{log_dir}/a")
    disk.make_unreadable(log_dir)
    assert disk.is_dir(log_dir)
    _raises(errno.EACCES, f"{log_dir}/a", lambda: disk.read(f"{log_dir}/a", 0, 1))
    _raises(errno.EACCES, f"{log_dir}/a", lambda: disk.exists(f"{log_dir}/a"))


#: Makes the file or dir at a path refuse writes (reads still work): returns the errno expected.
RefuseWrites = Callable[[Disk, str], int]


def check_refused_writes_leave_reads(make: DiskFactory, refuse: RefuseWrites) -> None:
    """A dir (and a file) whose writes are refused still reads: every write raises ``OSError``
    naming the path, every read answers as before (a read-only remount; on the real disk, a
    permission)."""
    disk, (log_dir, *_) = make()
    disk.mkdir(f"{log_dir}/t-0")
    disk.create(f"{log_dir}/t-0/0.log")
    disk.append(f"{log_dir}/t-0/0.log", b"payload")
    disk.fsync(f"{log_dir}/t-0/0.log")
    code = refuse(disk, f"{log_dir}/t-0")
    path = f"{log_dir}/t-0/0.log"
    _raises(code, f"{log_dir}/t-0/1.log", lambda: disk.create(f"{log_dir}/t-0/1.log"))
    error = _os_error(lambda: disk.append(path, b"more"))
    if error is not None:  # a dir's permission does not cover its files' contents
        assert error.errno == code
        assert error.filename == path
    assert disk.read(path, 0, 100) in (b"payload", b"payloadmore")
    assert disk.list_dir(f"{log_dir}/t-0") == ["0.log"]
    assert disk.exists(path)
    assert disk.size(path) in (7, 11)


def check_reads_fail_writes_work(make: SimDiskFactory) -> None:
    """Media errors on read: reads, listings and slices raise EIO; writes still land."""
    disk, (bad, good, *_) = make()
    disk.create(f"{bad}/a")
    disk.append(f"{bad}/a", b"abc")
    held = disk.open_slice(f"{bad}/a", 0, 3)
    disk.fail_dir(bad, writes=False)
    _raises(errno.EIO, f"{bad}/a", lambda: disk.read(f"{bad}/a", 0, 1))
    _raises(errno.EIO, bad, lambda: disk.list_dir(bad))
    _raises(errno.EIO, f"{bad}/a", held.read_all)
    assert disk.append(f"{bad}/a", b"d") == 3
    disk.fsync(f"{bad}/a")
    disk.create(f"{bad}/b")
    assert (disk.failed_dirs(), disk.faulty_dirs()) == ([], [bad])
    disk.repair_dir(bad)
    assert disk.read(f"{bad}/a", 0, 10) == b"abcd"
    assert disk.list_dir(good) == []


def check_one_file_fails(make: SimDiskFactory) -> None:
    """One file's I/O fails (EIO, following the inode through a rename); its neighbours and
    its dir work; a repair of the dir undoes it."""
    disk, (log_dir, *_) = make()
    disk.create(f"{log_dir}/a")
    disk.create(f"{log_dir}/b")
    disk.append(f"{log_dir}/a", b"abc")
    held = disk.open_slice(f"{log_dir}/a", 0, 3)
    disk.fail_file(f"{log_dir}/a")
    _raises(errno.EIO, f"{log_dir}/a", lambda: disk.read(f"{log_dir}/a", 0, 1))
    _raises(errno.EIO, f"{log_dir}/a", lambda: disk.append(f"{log_dir}/a", b"x"))
    _raises(errno.EIO, f"{log_dir}/a", lambda: disk.fsync(f"{log_dir}/a"))
    _raises(errno.EIO, f"{log_dir}/a", held.read_all)
    assert disk.append(f"{log_dir}/b", b"ok") == 0
    assert disk.list_dir(log_dir) == ["a", "b"]
    disk.rename(f"{log_dir}/a", f"{log_dir}/c")
    _raises(errno.EIO, f"{log_dir}/c", lambda: disk.size(f"{log_dir}/c"))
    assert (disk.failed_dirs(), disk.faulty_dirs()) == ([], [log_dir])
    disk.repair_dir(log_dir)
    assert disk.read(f"{log_dir}/c", 0, 10) == b"abc"


def check_disk_full(make: SimDiskFactory) -> None:
    """A full file system: a write that does not fit writes what fits and raises ENOSPC; a
    full one refuses new entries too; other dirs and reads are untouched; a repair makes room."""
    disk, (log_dir, other, *_) = make()
    disk.create(f"{log_dir}/a")
    disk.fill_dir(log_dir, free_bytes=4)
    assert disk.append(f"{log_dir}/a", b"ab") == 0
    _raises(errno.ENOSPC, f"{log_dir}/a", lambda: disk.append(f"{log_dir}/a", b"cdef"))
    assert disk.read(f"{log_dir}/a", 0, 10) == b"abcd"
    _raises(errno.ENOSPC, f"{log_dir}/b", lambda: disk.create(f"{log_dir}/b"))
    _raises(errno.ENOSPC, f"{log_dir}/d", lambda: disk.mkdir(f"{log_dir}/d"))
    disk.create(f"{other}/b")
    assert disk.append(f"{other}/b", b"fine") == 0
    disk.fsync(f"{log_dir}/a")
    assert (disk.failed_dirs(), disk.faulty_dirs()) == ([], [log_dir])
    disk.repair_dir(log_dir)
    assert disk.faulty_dirs() == []
    assert disk.append(f"{log_dir}/a", b"e") == 4


def check_crash_torn_in_the_middle(make: SimDiskFactory, seeds: int = 60) -> None:
    """A scrambled crash keeps every fsynced byte; the surviving unsynced bytes may hold one
    damaged stretch with good bytes after it (a tear in the middle, not only a short tail)."""
    middle = 0
    for seed in range(seeds):
        disk, (log_dir, *_) = make()
        disk.create(f"{log_dir}/0.log")
        disk.fsync_dir(log_dir)
        disk.append(f"{log_dir}/0.log", b"D" * 100)
        disk.fsync(f"{log_dir}/0.log")
        written = b"".join(bytes([65 + i % 26]) * 50 for i in range(40))
        disk.append(f"{log_dir}/0.log", written)
        disk.crash(SimRng(seed), scramble=True)
        contents = disk.read(f"{log_dir}/0.log", 0, 1 << 20)
        assert contents[:100] == b"D" * 100, seed
        tail = contents[100:]
        assert len(tail) <= len(written), seed
        damaged = [i for i in range(len(tail)) if tail[i] != written[i]]
        if damaged:
            assert damaged[-1] - damaged[0] < 4096, seed
            middle += damaged[-1] + 1 < len(tail)
    assert middle > 0, "no crash tore in the middle"


#: Checks every Disk must pass.
DISK_CONTRACT_CHECKS: tuple[Callable[[DiskFactory], None], ...] = (
    check_files,
    check_large_appends,
    check_append_pieces,
    check_copy_range,
    check_slices,
    check_sync_handles,
    check_directories,
    check_errors,
)

#: Checks of the simulated disk's fault injection.
SIM_DISK_FAULT_CHECKS: tuple[Callable[[SimDiskFactory], None], ...] = (
    check_crash_keeps_what_was_synced,
    check_crash_loss_is_possible,
    check_crash_rename_atomic_and_ordered,
    check_armed_crash,
    check_sync_handle_durability,
    check_failed_dir,
    check_unreadable_dir,
    check_reads_fail_writes_work,
    check_one_file_fails,
    check_disk_full,
    check_crash_torn_in_the_middle,
)


def check_disk(make: DiskFactory) -> None:
    """Run every check of :data:`DISK_CONTRACT_CHECKS` against disks from ``make``."""
    for check in DISK_CONTRACT_CHECKS:
        check(make)


def check_ineffective_fsync(make: SimDiskFactory) -> None:
    """With fsync made ineffective (a variant hook), a crash may lose what was 'synced'."""
    lost = 0
    for seed in range(30):
        disk, (log_dir, *_) = make()
        disk.create(f"{log_dir}/a")
        disk.fsync_dir(log_dir)
        disk.set_fsync_effective(False)
        disk.append(f"{log_dir}/a", b"payload")
        disk.fsync(f"{log_dir}/a")
        disk.set_fsync_effective(True)
        assert disk.entries_unchecked(log_dir) == ["a"]
        disk.crash(SimRng(seed))
        lost += disk.size(f"{log_dir}/a") < 7
    assert lost > 0


SIM_DISK_FAULT_CHECKS = (*SIM_DISK_FAULT_CHECKS, check_ineffective_fsync)
