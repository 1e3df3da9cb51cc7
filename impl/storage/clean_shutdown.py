"""The clean-shutdown marker of each log dir (spec/controller.md "Unclean shutdowns", KIP-966).

A clean shutdown flushes every log and writes the checkpoints, then writes
:data:`CLEAN_SHUTDOWN_FILE` into every online log dir (atomically: temp file, fsync, rename, dir
fsync), holding the *clean-since epoch*: the broker epoch of the incarnation since which every
shutdown was clean (the one that shut down, or an earlier one when it had itself started after
a clean shutdown). The next start reads the markers and removes them durably before the broker
registers, so a crash of that incarnation finds none. The broker registers the epoch every
online dir's marker names, or -1 (a dir without a marker, unreadable markers, markers of
different runs). The controller elects a member that restarted uncleanly only when no ISR member
kept its log.

Everything goes through the :class:`~impl.storage.disk.Disk` port, so the simulator's disks
carry the markers and its crashes lose what a crash loses. This module is a sans-IO core.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from impl.storage.checkpoint import TEMP_SUFFIX, read_checkpoint, write_atomically
from impl.storage.disk import Disk

__sans_io__ = True

#: Kafka's name for the file (``LogManager.CleanShutdownFileName``).
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
#: The clean-since epoch after an unclean shutdown (or none recorded).
UNCLEAN = -1


def encode(broker_epoch: int) -> str:
    """The marker's text: ``{"version":0,"broker_epoch":E}``."""
    return json.dumps({"version": 0, "broker_epoch": broker_epoch}, separators=(",", ":"))


def decode(text: str) -> int:
    """The broker epoch a marker names, or :data:`UNCLEAN` when the text is not a marker."""
    try:
        value = json.loads(text)
    except ValueError:
        return UNCLEAN
    if not isinstance(value, dict) or value.get("version") != 0:
        return UNCLEAN
    epoch = value.get("broker_epoch")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        return UNCLEAN
    return epoch


def write_markers(disk: Disk, log_dirs: Iterable[str], broker_epoch: int) -> None:
    """Write the marker naming ``broker_epoch`` into each of ``log_dirs`` (call after the logs
    and checkpoints are durable).

    Raises:
        OSError: a dir's write failed (that dir keeps no marker: the next start is unclean).
    """
    for log_dir in log_dirs:
        write_atomically(disk, log_dir, CLEAN_SHUTDOWN_FILE, encode(broker_epoch))


def take_markers(disk: Disk, log_dirs: Iterable[str]) -> int:
    """Read and durably remove the markers of ``log_dirs`` (the online dirs at startup).

    Returns:
        The broker epoch every dir's marker names, else :data:`UNCLEAN` (also when there is
        no dir, or a marker could not be read or removed).
    """
    epochs: set[int] = set()
    unclean = False
    dirs = list(log_dirs)
    for log_dir in dirs:
        try:
            text = read_checkpoint(disk, log_dir, CLEAN_SHUTDOWN_FILE)
            removed = False
            for name in (CLEAN_SHUTDOWN_FILE, CLEAN_SHUTDOWN_FILE + TEMP_SUFFIX):
                path = f"{log_dir}/{name}"
                if disk.exists(path):
                    disk.remove(path)
                    removed = True
            if removed:
                disk.fsync_dir(log_dir)
        except (OSError, UnicodeDecodeError):
            unclean = True
            continue
        if text is None:
            unclean = True
        else:
            epochs.add(decode(text))
    if unclean or not dirs or len(epochs) != 1:
        return UNCLEAN
    return epochs.pop()
