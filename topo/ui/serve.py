"""Starting and ending a dashboard: bind its address (bad input is a ``UiError`` with a
one-line message), say its URL, serve until asked to end.

``topo ui RUN`` serves in the foreground until Ctrl-C. ``topo run --ui`` starts
``topo ui --child`` as a process of its own: the token comes on its stdin (never on a
command line, which other users can read in ``ps``), it answers ``port N`` (or
``error: ...``) on its stdout, and it ends when its stdin closes: when ``topo run``
ends, even by ``kill -9``, nothing of the dashboard is left (it lingers ``LINGER_S`` for
the open pages to show the run's end).
"""

from __future__ import annotations

import errno
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from topo.ir import IRVersionError
from topo.rundir.layout import PROGRAM_FILE, UI_LOG
from topo.ui.api import Api
from topo.ui.auth import is_loopback
from topo.ui.reader import RunReader
from topo.ui.server import Dashboard

LINGER_S = 0.5  # after its run: long enough for every open page's stream to look again


class UiError(Exception):
    """The dashboard cannot start: the message says why (a port in use, a bad host)."""


def check_host(host: str, allow_remote: bool, flags: tuple[str, str] = ("--host", "")) -> None:
    """Refuse an address beyond loopback unless ``allow_remote`` says it is meant
    (``flags``: how the command names the two options)."""
    host_flag, allow_flag = flags[0], flags[1] or "--allow-remote"
    if not is_loopback(host) and not allow_remote:
        raise UiError(
            f"{host_flag} {host} would let other machines reach the dashboard; add "
            f"{allow_flag} if that is meant (the token is then all that guards it)"
        )


def url_of(host: str, port: int, token: str) -> str:
    """The address to open (a wildcard address shown as this machine's name)."""
    shown = socket.gethostname() if host in ("0.0.0.0", "::", "") else host
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/?token={token}"


def open_dashboard(run_dir: Path, host: str, port: int, token: str) -> Dashboard:
    """The dashboard of ``run_dir`` bound to ``host:port`` (0: a free port)."""
    if not (run_dir / PROGRAM_FILE).exists():
        raise UiError(f"{run_dir} has no {PROGRAM_FILE}: it is not a run directory")
    reader = RunReader(run_dir)
    try:
        api = Api(reader)
    except (OSError, ValueError, IRVersionError) as exc:
        raise UiError(f"cannot read {run_dir / PROGRAM_FILE}: {exc}") from None
    log = _access_log(run_dir)
    try:
        return Dashboard((host, port), api, token, log)
    except socket.gaierror as exc:
        raise UiError(f"cannot listen on host {host!r}: {exc.strerror or exc}") from None
    except OverflowError:
        raise UiError(f"--port {port} is not a port (0-65535)") from None
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UiError(f"port {port} is in use on {host}: give another --port, or 0") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise UiError(f"{host} is not an address of this machine") from None
        raise UiError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def _set_title(run_dir: Path) -> None:
    """``topo: ui RUN``: the process title ``ps`` shows, once the run is known."""
    try:
        from setproctitle import setproctitle

        setproctitle(f"topo: ui {run_dir.name}")
    except ImportError:
        pass


def _errors_to(path: Path) -> None:
    """This process's stderr goes to ``path`` from now on (it was started before its run
    directory existed)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        return
    os.dup2(fd, 2)
    os.close(fd)


def _access_log(run_dir: Path) -> TextIO | None:
    try:
        return open(run_dir / UI_LOG, "a", encoding="utf-8")
    except OSError:
        return None


def serve_until(dashboard: Dashboard, end: Callable[[], None] | None = None) -> None:
    """Serve until ``dashboard.close()`` (from ``end``'s thread, a signal handler...)."""
    if end is not None:
        threading.Thread(target=end, name="topo-ui-end", daemon=True).start()
    try:
        dashboard.serve_forever(poll_interval=0.2)
    finally:
        dashboard.server_close()
        dashboard.close_log()


def child(host: str, port: int) -> int:
    """``python -m topo.ui``: the token and then the run directory from stdin, ``port N``
    on stdout, end at stdin's end."""
    token = sys.stdin.readline().strip()
    given = sys.stdin.readline().strip() if token else ""
    if not given:
        return 1
    run_dir = Path(given)
    _errors_to(run_dir / UI_LOG)
    _set_title(run_dir)
    try:
        dashboard = open_dashboard(run_dir, host, port, token)
    except UiError as exc:
        print(f"error: {exc}", flush=True)
        return 1
    print(f"port {dashboard.server_address[1]}", flush=True)

    def wait_for_parent() -> None:
        try:
            while sys.stdin.readline():
                pass
            # the run ended: the open pages get its last state before the dashboard goes
            time.sleep(LINGER_S)
        finally:
            dashboard.stopping.set()
            dashboard.shutdown()

    serve_until(dashboard, wait_for_parent)
    return 0
