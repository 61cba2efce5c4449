"""Where servers listen: ``ipc://`` sockets in a private directory, or TCP with CURVE.

A client must know it talks to the real server before it sends the program's
secret or unpickles a reply (a dead node's TCP port can be taken by any local
user). Two designs give that:

* ``ipc``: one machine. Every server of a run binds a Unix socket inside a
  directory made by the launcher with mode 0700, so no other user can create
  (or connect to) a socket there: reaching the path authenticates the server.
  PLAIN then only checks the client. As fast as loopback TCP, or faster
  (``bench/rpc_bench.py``).
* ``tcp`` with CURVE: across hosts. The handshake proves the server holds the
  program's key before the client reveals anything, and traffic is encrypted.

PLAIN over TCP authenticates nobody's server, so it is refused.
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import stat
import tempfile

import zmq

_MAX_IPC_PATH = 100  # sockaddr_un.sun_path is 108 bytes; keep a margin for the name


class TransportError(ValueError):
    """A listening configuration that cannot be made safe."""


def make_ipc_dir(owned: bool = True) -> str:
    """A fresh private (0700) directory for a run's sockets; removed at exit if ``owned``.

    Under ``$TMPDIR`` when its path is short enough for socket names, else ``/tmp``."""
    base = tempfile.gettempdir()
    if len(base) > _MAX_IPC_PATH - 40:
        base = "/tmp"
    path = tempfile.mkdtemp(prefix="topo-", dir=base)  # mkdtemp creates it 0700
    if owned:
        atexit.register(shutil.rmtree, path, True)
    return path


def check_ipc_dir(path: str) -> None:
    """Refuse a socket directory other users could write to or that is not ours."""
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise TransportError(f"socket directory {path} is not a directory")
    if st.st_uid != os.geteuid():
        raise TransportError(f"socket directory {path} belongs to uid {st.st_uid}, not to us")
    if st.st_mode & 0o077:
        raise TransportError(
            f"socket directory {path} has mode {stat.S_IMODE(st.st_mode):o}; it must be 0700 "
            "so that no other user can put a socket in it"
        )


def check_mechanism(mechanism: str, ipc_dir: str | None) -> None:
    """PLAIN is only safe over ipc in a private directory."""
    if mechanism == "plain" and ipc_dir is None:
        raise TransportError(
            "PLAIN authentication over TCP cannot authenticate the server; "
            "use ipc sockets in a private directory (one host) or CURVE (across hosts)"
        )


LISTEN_BACKLOG = 4096  # connections waiting to be accepted (the kernel caps it: somaxconn)


def bind(
    sock: zmq.Socket, *, ipc_dir: str | None, bind_host: str, advertise_host: str | None = None
) -> str:
    """Bind ``sock`` to a fresh address; the endpoint peers connect to."""
    # A thousand nodes connect to the registry at once: past ZMQ's default listen
    # backlog (100) the kernel drops their SYNs, and TCP retries after 1, 3, 7, 15 s...
    sock.setsockopt(zmq.BACKLOG, LISTEN_BACKLOG)
    if ipc_dir is not None:
        path = os.path.join(ipc_dir, secrets.token_hex(8))
        if len(path) > _MAX_IPC_PATH:
            raise TransportError(f"socket path {path} is too long for a Unix socket")
        endpoint = f"ipc://{path}"
        sock.bind(endpoint)
        return endpoint
    sock.bind(f"tcp://{bind_host}:0")
    last = sock.last_endpoint
    bound = last.decode() if isinstance(last, bytes) else str(last)
    if advertise_host:
        bound = f"tcp://{advertise_host}:{bound.rsplit(':', 1)[1]}"
    return bound
