"""``SO_RCVLOWAT`` while a large frame arrives: the socket reports readable only once this many
of the frame's missing bytes (or all of them) are queued, instead of at every piece the kernel
has queued.

A receive still returns whatever is there, and the kernel also wakes the reader when its
receive window is full, so the setting never stalls a sender; it must be back at 1 before the
next frame's size prefix is awaited (a frame of a few bytes would otherwise never wake the
reader). Measured: a follower's 4 MB fetch answer took 26-34 receives, about 9 with 1 MiB
(docs/performance.md, "Cut batches"). The broker's own connections use it for one thing only: a
large request's body received whole as one ``bytes`` (``server._Connection._receive_body``), and
only when the socket does not already hold all of it (:func:`queued_bytes`; a busy producer's
next body usually is there). Set for every request, to cut receives alone, it did not pay: a
1 MB Produce request arrived in 2.4 receives, 2.1 with it, and the two extra system calls per
request cost what the receives saved.
"""

from __future__ import annotations

import fcntl
import socket
import sys
import termios
from typing import Final

import trio

#: the most a receive waits for (4 MiB gave fewer receives and no less CPU)
RECEIVE_LOW_WATER_BYTES: Final = 1 << 20
#: whether this system has the option (Linux; elsewhere large frames arrive in pieces)
AVAILABLE: Final = hasattr(socket, "SO_RCVLOWAT")
_INT_BUFFER: Final = bytes(4)


def queued_bytes(sock: trio.socket.SocketType) -> int:
    """Bytes waiting in the socket's receive queue (``FIONREAD``); 0 when it cannot say."""
    try:
        return int.from_bytes(fcntl.ioctl(sock.fileno(), termios.FIONREAD, _INT_BUFFER),
                              sys.byteorder)
    except OSError:
        return 0


class ReceiveLowWater:
    """The ``SO_RCVLOWAT`` of one connected socket, changed only when it must be.

    Raises (every method): OSError when the socket refuses the option; the caller treats it as
    any other I/O error of the connection.
    """

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self._socket = sock
        self.value = 1

    def before_receive(self, missing: int) -> None:
        """A receive into a frame that still misses ``missing`` bytes follows."""
        wanted = max(1, min(missing, RECEIVE_LOW_WATER_BYTES))
        if wanted != self.value:
            self._set(wanted)

    def frame_done(self) -> None:
        """The frame is whole: the next one's size prefix may be all there is to read."""
        if self.value != 1:
            self._set(1)

    def _set(self, value: int) -> None:
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, value)
        self.value = value
