"""The procs backend's reader of its fork server's reports: an empty read (a kernel
may read the server's end closing so) is no report -- the reader goes on while the
server runs, and takes a server that ended as gone (its executables lost), never
failing on it with a traceback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import threading
from typing import Any

from topo.backends.procs import ProcsBackend, _Server
from topo.testing import wait_until


def _server(sock: socket.socket) -> _Server:
    """A fork server as the reader sees one: a real process, a status socket."""
    server = _Server.__new__(_Server)
    server.popen = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    server.pid, server.sock = server.popen.pid, sock
    server.early = tempfile.TemporaryFile()
    server.ready = server.dead = False
    server.reader = None
    return server


def test_an_empty_read_is_no_report_and_a_server_gone_is_lost() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    backend = ProcsBackend()
    reports: list[Any] = []
    backend._sink = type(
        "Recorder",
        (),
        {
            "started": lambda _self, *a: reports.append(("started", *a)),
            "exited": lambda _self, *a: reports.append(("exited", *a)),
            "failed": lambda _self, *a: reports.append(("failed", *a)),
        },
    )()
    server = _server(ours)
    errors: list[BaseException] = []

    def read() -> None:
        try:
            backend._read(server)
        except BaseException as exc:  # what the thread would have died of
            errors.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        theirs.send(b"")  # nothing: the server runs on
        theirs.send(json.dumps({"t": "server"}).encode())
        wait_until(lambda: server.ready, 10, what="the server's report read")
        assert reader.is_alive() and not errors
        server.popen.kill()
        server.popen.wait(10)
        theirs.send(b"")
        reader.join(10)
        assert not reader.is_alive() and not errors, errors
        assert server.dead  # taken as gone: its executables would be reported lost
    finally:
        backend._closed.set()
        if server.popen.poll() is None:
            server.popen.kill()
            server.popen.wait(10)
        server.early.close()
        ours.close()
        theirs.close()
    assert [r for r in reports if r[0] == "failed"] == []
