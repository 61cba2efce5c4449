"""A relay from a Unix socket to a TCP port of the same process's network namespace.

A server isolated in a network namespace of its own (:mod:`topo.runtime.isolation`) is
reached from its host through a Unix socket in a private (0700) directory: only the
run's user can connect to it, and this relay, living in the namespace, carries each
connection to the server's loopback port. Two threads per connection, blocking: the
kernel's buffers give flow control, and a slow connection holds up no other.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time

CHUNK = 256 << 10


def _pump(src: socket.socket, dst: socket.socket, relay: UnixRelay) -> None:
    """Copy ``src`` to ``dst`` until ``src`` ends; then end ``dst``'s writing side."""
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    try:
        while True:
            n = src.recv_into(buf)
            if not n:
                break
            dst.sendall(view[:n])
            relay.last_active = time.monotonic()
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
        with contextlib.suppress(OSError):
            src.shutdown(socket.SHUT_RD)


class UnixRelay:
    """Listens on the Unix socket ``path`` (replacing a stale one) and relays each
    connection to ``127.0.0.1:port``."""

    def __init__(self, path: str, port: int) -> None:
        self.path = path
        self._port = port
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # left by an earlier attempt that was killed
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(path)
        os.chmod(path, 0o600)
        self._listener.listen(128)
        self._closed = False
        self.last_active = time.monotonic()  # when bytes last went through, either way
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="topo-relay", daemon=True).start()

    def dial(self) -> socket.socket:
        """A new connection to the server (what each relayed connection gets)."""
        sock = socket.create_connection(("127.0.0.1", self._port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def retarget(self, port: int) -> None:
        """Relay new connections to ``port`` from now on (the server was replaced by one
        restored from a checkpoint; connections to the old one end with it)."""
        self._port = port

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = self.dial()
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update((client, server))
            for a, b in ((client, server), (server, client)):
                threading.Thread(
                    target=self._carry, args=(a, b), name="topo-relay-pump", daemon=True
                ).start()

    def _carry(self, src: socket.socket, dst: socket.socket) -> None:
        _pump(src, dst, self)
        with self._lock:  # the second pump of a pair to end closes both sockets
            if src in self._open and dst not in self._open:
                self._open.discard(src)
                src.close()
                dst.close()
            else:
                self._open.discard(src)

    def close(self) -> None:
        """Stop accepting, end every connection and remove the socket file."""
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
