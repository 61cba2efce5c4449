"""An executable's grant on its way through a fork server, leaving nothing behind.

The launcher (or an ssh host's agent) writes a ``spawn`` request to the fork server
as a length-prefixed pickle that holds only the grant's size, then the grant's bytes
(``topo.runtime.rights``). The server reads those bytes straight into a buffer, forks
the child (which has its copy) and zeroes the buffer: a process forked later finds no
other executable's rights in the memory it inherits from the server. Standard library
only: the fork server imports it before anything else.
"""

from __future__ import annotations

import os
import pickle
import struct


def write_spawn(fd: int, exe: str, attempt: int, grant: str) -> None:
    """Write a ``spawn`` request: the pickle, then the grant's bytes (see the module doc)."""
    blob = grant.encode()
    data = pickle.dumps(("spawn", exe, attempt, len(blob)))
    os.write(fd, struct.pack("!I", len(data)) + data + blob)


def read_blob(fd: int, n: int) -> bytearray | None:
    """Read ``n`` bytes from ``fd`` straight into a buffer (no intermediate copies that
    could not be wiped); None at EOF."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = os.readv(fd, [view[got:]])
        if not k:
            return None
        got += k
    return buf


def wipe(buf: bytearray) -> None:
    """Overwrite a buffer that held rights."""
    buf[:] = bytes(len(buf))
