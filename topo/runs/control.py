"""A live run's control channel: ``topo stop`` from another shell asks the launcher.

A Unix socket in a private (0700) directory of the run's user; or, for a launcher that
runs on another host than the shells that operate it (inside a Slurm job, operated from
the login node), TCP on the address the backend names (``Network.control_host``),
written ``tcp://HOST:PORT`` in the run's record. Both sides prove they hold the run's
key (``<run_dir>/control.key``, 0600, on the file system both hosts share) with an HMAC
over the other side's fresh nonce; on a Unix socket the server also checks the peer's
uid (``SO_PEERCRED``). Only JSON crosses it: nothing is unpickled.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import shutil
import socket
import stat
import struct
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from topo.rundir.layout import CONTROL_KEY_FILE

SOCKET_NAME = "control.sock"
TCP = "tcp://"
MAX_LINE = 64 * 1024  # a handshake line
MAX_MESSAGE = 64 << 20  # a request or an answer (topo apply sends a whole compiled program)
Handler = Callable[[dict[str, Any]], dict[str, Any]]


class ControlError(Exception):
    """The run cannot be reached or did not answer as it should."""


def _mac(key: bytes, role: str, nonce: str) -> str:
    return hmac.new(key, f"{role}:{nonce}".encode(), hashlib.sha256).hexdigest()


def _read_line(stream: BinaryIO, limit: int = MAX_LINE) -> str:
    data = stream.readline(limit + 1)
    if not data.endswith(b"\n"):
        raise ControlError(
            "control message too long" if len(data) > limit else "the connection closed"
        )
    return data.decode()


class ControlServer:
    """The launcher's side: answers requests with ``handler`` on a thread of its own."""

    def __init__(self, run_dir: Path, handler: Handler, host: str | None = None) -> None:
        """``host``: listen on TCP there (any free port) instead of a Unix socket."""
        self.key = secrets.token_bytes(32)
        key_path = run_dir / CONTROL_KEY_FILE
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.key.hex() + "\n")
        self.dir: str | None = None
        if host is None:
            base = tempfile.gettempdir() if len(tempfile.gettempdir()) < 60 else "/tmp"
            self.dir = tempfile.mkdtemp(prefix="topo-ctl-", dir=base)  # 0700
            self.path = os.path.join(self.dir, SOCKET_NAME)
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._sock.bind(self.path)
        else:
            self._sock = socket.create_server((host, 0))
            self.path = f"{TCP}{host}:{self._sock.getsockname()[1]}"
        self._sock.listen(8)
        self._handler = handler
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="topo-control", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as stream:
            conn.settimeout(10.0)
            try:
                if conn.family == socket.AF_UNIX:
                    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
                    _pid, uid, _gid = struct.unpack("3i", creds)
                    if uid != os.geteuid():
                        return
                nonce = secrets.token_hex(16)
                conn.sendall(f"{nonce}\n".encode())
                theirs, proof = _read_line(stream).split()
                if not hmac.compare_digest(proof, _mac(self.key, "client", nonce)):
                    return
                request = json.loads(_read_line(stream, MAX_MESSAGE))
                if not isinstance(request, dict):
                    return
                try:
                    reply = self._handler(request)
                except Exception as exc:  # a bad request must not end the server
                    reply = {"ok": False, "error": str(exc)}
                answer = json.dumps(reply, default=str)
                conn.sendall(f"{_mac(self.key, 'server', theirs)} {answer}\n".encode())
            except (OSError, ValueError, ControlError):
                return

    def close(self) -> None:
        """Stop answering and remove the socket and its directory."""
        self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._thread.join(2.0)  # accept() returns at once on a shut listening socket
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)


def _check_dir(path: str) -> None:
    """Talk only to a socket in a directory no other user could have put it in."""
    st = os.stat(path)
    if st.st_uid != os.geteuid() or st.st_mode & 0o077 or not stat.S_ISDIR(st.st_mode):
        raise ControlError(f"the control directory {path} is not private to this user")


def request(
    run_dir: Path, socket_path: str, message: dict[str, Any], timeout: float = 10.0
) -> dict[str, Any]:
    """Send ``message`` to the run's launcher (``socket_path``: a Unix socket's path or
    ``tcp://HOST:PORT``) and return its answer."""
    try:
        key = bytes.fromhex((run_dir / CONTROL_KEY_FILE).read_text().strip())
    except (OSError, ValueError) as exc:
        raise ControlError(f"cannot read the run's key {run_dir / CONTROL_KEY_FILE}: {exc}") from None
    try:
        with _connect(socket_path, timeout) as conn:
            stream = conn.makefile("rb")
            nonce = _read_line(stream).strip()
            mine = secrets.token_hex(16)
            conn.sendall(f"{mine} {_mac(key, 'client', nonce)}\n".encode())
            conn.sendall((json.dumps(message) + "\n").encode())
            proof, _, answer = _read_line(stream, MAX_MESSAGE).partition(" ")
            stream.close()
    except OSError as exc:
        raise ControlError(f"cannot reach the run's launcher: {exc.strerror or exc}") from None
    if not hmac.compare_digest(proof, _mac(key, "server", mine)):
        raise ControlError("the control socket did not prove it holds the run's key")
    reply = json.loads(answer)
    if not isinstance(reply, dict):
        raise ControlError("the launcher's answer is not an object")
    return reply


def _connect(where: str, timeout: float) -> socket.socket:
    """A connection to the control channel at ``where`` (raises OSError)."""
    if where.startswith(TCP):
        host, _, port = where[len(TCP) :].rpartition(":")
        conn = socket.create_connection((host, int(port)), timeout=timeout)
    else:
        _check_dir(os.path.dirname(where))
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.settimeout(timeout)
            conn.connect(where)
        except OSError:
            conn.close()
            raise
    conn.settimeout(timeout)
    return conn
