"""``topo run --ui``: the dashboard as a process of its own (``python -m topo.ui``), so
the launcher pays nothing for it, that ends with the run (see ``serve``)."""

from __future__ import annotations

import errno
import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

from topo.rundir.layout import UI_LOG
from topo.ui.auth import new_token
from topo.ui.serve import UiError, check_host, url_of

# A program's nodes can take every core as the dashboard starts (each node's threads
# count as much as the dashboard's one): a start on a busy machine takes this long.
START_TIMEOUT_S = 120.0


def precheck(host: str, port: int, allow_remote: bool) -> None:
    """Refuse a host or port the dashboard could not take, before the run starts."""
    check_host(host, allow_remote, ("--ui-host", "--ui-allow-remote"))
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UiError(f"cannot listen on host {host!r}: {exc.strerror or exc}") from None
    except OverflowError:
        raise UiError(f"--port {port} is not a port (0-65535)") from None
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise UiError(f"port {port} is in use on {host}: give another --ui-port") from None
            raise UiError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


class Child:
    """A running dashboard process and the URL it serves."""

    def __init__(self, proc: subprocess.Popen[bytes], url: str) -> None:
        self.proc = proc
        self.url = url

    @property
    def pid(self) -> int:
        """The dashboard's pid."""
        return self.proc.pid

    def close(self, timeout: float = 5.0) -> None:
        """End it (its stdin closes) and wait; kill it if it does not end."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Warm:
    """A dashboard process started before its run (``warm_up``): its interpreter and
    imports done while the program starts, which on a busy machine (a program's nodes
    taking every core at once) is what lets it come up at all."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "topo.ui", "-", host, str(port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # it writes to the run's ui.log once it has it
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._token = new_token()
        self._handed: Path | None = None
        self._lost: OSError | None = None

    def hand(self, run_dir: Path) -> None:
        """Give it ``run_dir`` to serve, without waiting: the launcher does this before the
        program's nodes start, so that the dashboard opens before they take the CPU."""
        if self._handed is not None:
            return
        self._handed = run_dir
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(f"{self._token}\n{run_dir}\n".encode())
            self.proc.stdin.flush()
        except OSError as exc:  # it ended already: ``start`` says so
            self._lost = exc

    def start(self, run_dir: Path) -> Child:
        """Serve ``run_dir``: its URL once it listens (``UiError`` if it does not)."""
        proc = self.proc
        self.hand(run_dir)
        child = Child(proc, "")
        try:
            if self._lost is not None:
                raise self._lost
            answer = _first_line(proc, START_TIMEOUT_S)
        except (OSError, UiError):
            child.close(1.0)
            raise
        if not answer.startswith("port "):
            child.close(1.0)
            raise UiError(answer.removeprefix("error: ") or "the dashboard did not start")
        child.url = url_of(self.host, int(answer.split()[1]), self._token)
        return child

    def close(self) -> None:
        """The run never started: end the waiting dashboard process."""
        Child(self.proc, "").close(1.0)


def warm_up(host: str, port: int) -> Warm:
    """Start the dashboard process now, to serve a run that is about to start."""
    return Warm(host, port)


def _first_line(proc: subprocess.Popen[bytes], timeout: float) -> str:
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    end = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        left = end - time.monotonic()
        if left <= 0:
            raise UiError(f"the dashboard did not start within {timeout:g}s (see {UI_LOG})")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    return data.decode(errors="replace").strip()
