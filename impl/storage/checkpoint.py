"""Checkpoint files: Kafka's text formats and the atomic write (temp, fsync, rename, fsync dir).

Per log dir: ``replication-offset-checkpoint`` (HW per partition),
``recovery-point-offset-checkpoint`` (offset below which segments were fsynced) and
``meta.properties``. Per partition: ``leader-epoch-checkpoint`` (see :mod:`leader_epoch`).

The offset-checkpoint format is version ``0``, the entry count, then ``<topic> <partition>
<offset>`` per line. The write goes through the :class:`~impl.storage.disk.Disk` port only, so this
module is a sans-IO core too; its fsyncs can be handed over to another thread
(:func:`write_atomically_steps`).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator, Mapping

from impl.storage.disk import Disk, SyncHandle
from impl.storage.names import TopicPartition

__sans_io__ = True

REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
#: DeleteRecords' log start offsets that lie inside a segment (Kafka's file of that name)
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
META_PROPERTIES = "meta.properties"
TEMP_SUFFIX = ".tmp"


def format_offsets(offsets: Mapping[TopicPartition, int]) -> str:
    """Kafka's offset-checkpoint text, entries sorted for byte-stable files."""
    lines = ["0", str(len(offsets))]
    lines += [f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items())]
    return "\n".join(lines) + "\n"


def parse_offsets(text: str) -> dict[TopicPartition, int]:
    """Parse an offset-checkpoint file.

    Raises:
        ValueError: malformed (wrong version, wrong count, bad line).
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2 or lines[0].strip() != "0":
        raise ValueError("offset checkpoint: bad version line")
    count = int(lines[1])
    if count != len(lines) - 2:
        raise ValueError(f"offset checkpoint: {len(lines) - 2} entries, header says {count}")
    offsets: dict[TopicPartition, int] = {}
    for line in lines[2:]:
        topic, partition, offset = line.rsplit(" ", 2)
        offsets[TopicPartition(topic, int(partition))] = int(offset)
    return offsets


#: ``meta.properties`` key: this log dir's identity (KIP-858 ``directory.id``)
DIRECTORY_ID = "directory.id"
#: ``meta.properties`` key: the ``directory.id`` of every log dir of the broker, comma-separated
LOG_DIR_IDS = "log.dir.ids"


def format_meta_properties(
    broker_id: int, directory_id: str | None = None, log_dir_ids: Iterable[str] = ()
) -> str:
    """``meta.properties``: version 0 and ``broker.id`` as a ZooKeeper-mode Kafka broker writes
    it, plus (when given) the dir's ``directory.id`` and the ids of all the broker's log dirs."""
    text = f"version=0\nbroker.id={broker_id}\n"
    if directory_id is not None:
        text += f"{DIRECTORY_ID}={directory_id}\n"
        text += f"{LOG_DIR_IDS}={','.join(sorted(log_dir_ids))}\n"
    return text


def recorded_log_dir_ids(properties: Mapping[str, str]) -> frozenset[str]:
    """The ``log.dir.ids`` a parsed ``meta.properties`` records (empty if none)."""
    return frozenset(i for i in properties.get(LOG_DIR_IDS, "").split(",") if i)


def parse_meta_properties(text: str) -> dict[str, str]:
    """``key=value`` lines, comments skipped."""
    properties: dict[str, str] = {}
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            properties[key.strip()] = value.strip()
    return properties


class CheckpointSync:
    """One fsync of an atomic checkpoint write handed over (:func:`write_atomically_steps`):
    the temp file's, before the rename, or the dir's, after it. :meth:`run` may run in a worker
    thread while the disk goes on serving others (a checkpoint's fsync ends with a flush of the
    device's write cache, which waits for whatever the device is writing, the segments a flush
    is writing back included: up to 18.6 ms seen on the event loop at 50 MB/s).
    """

    __slots__ = ("_handle", "done", "error", "path")

    def __init__(self, handle: SyncHandle, path: str) -> None:
        self._handle = handle
        #: the file or dir fsynced
        self.path = path
        #: :meth:`run` has been called
        self.done = False
        #: the ``OSError`` the fsync raised
        self.error: OSError | None = None

    def run(self) -> None:
        """Fsync (from any one thread; once); an ``OSError`` is kept in :attr:`error` for the
        caller's thread to act on."""
        if self.done:
            return
        self.done = True
        try:
            self._handle.sync()
        except OSError as error:
            self.error = error

    def close(self) -> None:
        """Release the handle (on the thread that opened it); idempotent."""
        self._handle.close()


def _synced(sync: CheckpointSync) -> Iterator[CheckpointSync]:
    try:
        yield sync
        sync.run()  # inline, if the driver did not run it
    finally:
        sync.close()
    if sync.error is not None:
        raise sync.error


def write_atomically_steps(disk: Disk, dir_path: str, name: str,
                           text: str) -> Generator[CheckpointSync, None, None]:
    """:func:`write_atomically` taken apart for a driver that fsyncs elsewhere: each fsync is
    yielded (a :class:`CheckpointSync`) before it runs, and run inline when the driver resumes
    without having run it; an fsync's ``OSError`` is raised on resuming.

    The file work stays on the caller's thread and in the same order (temp written, fsynced,
    then the rename, then the dir fsynced), so a crash at any point leaves the old file or the
    new one whole. The caller owns the temp file from the first step to the last: two writes
    of one file must not be in flight at once unless the older one stops at its next
    handover, before its rename (:meth:`impl.storage.manager.LogManager` checks this)."""
    temp = f"{dir_path}/{name}{TEMP_SUFFIX}"
    final = f"{dir_path}/{name}"
    disk.create(temp)
    disk.append(temp, text.encode())
    yield from _synced(CheckpointSync(disk.open_sync(temp), temp))
    if disk.exists(final):
        disk.remove(final)
    disk.rename(temp, final)
    yield from _synced(CheckpointSync(disk.open_dir_sync(dir_path), dir_path))


def write_atomically(disk: Disk, dir_path: str, name: str, text: str) -> None:
    """Replace ``dir_path/name`` with ``text`` so a crash leaves the old or the new file whole.

    Write ``name.tmp``, fsync it, rename it over ``name``, fsync the dir. The rename over an
    existing file is done as remove + rename because the port's rename refuses to replace; a crash
    between them leaves only ``name.tmp``, which :func:`read_checkpoint` falls back to.
    """
    for _ in write_atomically_steps(disk, dir_path, name, text):
        pass


def read_checkpoint(disk: Disk, dir_path: str, name: str) -> str | None:
    """The checkpoint's text: the file, else a complete leftover temp file, else ``None``."""
    final = f"{dir_path}/{name}"
    if disk.exists(final):
        return disk.read(final, 0, disk.size(final)).decode()
    temp = final + TEMP_SUFFIX
    if disk.exists(temp):
        return disk.read(temp, 0, disk.size(temp)).decode()
    return None
