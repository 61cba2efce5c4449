"""``topo run -d``: the launcher goes on in a session of its own, the command returns.

The command starts ``topo run`` again (without ``-d``) as a new session leader whose
output goes to a file in the log directory; once the run directory exists the launcher
renames that file to ``<run_dir>/launcher.log``. Until the run is up the command shows
that output as it comes (status lines, or the error of a bad file) and waits for the
launcher to write one line to a pipe — the run's id and directory — once every node is
up. If the launcher ends first, the command exits with its exit code; nothing is left
running. Ctrl-C while waiting stops the run that was starting.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, BinaryIO

from topo.rundir.layout import LAUNCHER_LOG

FD_ENV = "TOPO_DETACHED_FD"
LOG_ENV = "TOPO_DETACHED_LOG"


def child_args(argv: list[str]) -> list[str]:
    """The command line of the detached launcher: this one without ``-d``/``--detach``."""
    return [a for a in argv if a not in ("-d", "--detach")]


def launch(argv: list[str], log_dir: Path) -> tuple[int, dict[str, Any] | None]:
    """Start the detached launcher with ``argv`` (``topo`` arguments), relay its output
    to stderr until it is up: ``(0, {"id", "run_dir"})``, or ``(its exit code, None)``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    early = log_dir / f".detached-{secrets.token_hex(4)}.log"
    fd = os.open(early, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
    reader = open(early, "rb")  # kept open: the file is renamed into the run directory
    ready_r, ready_w = os.pipe()
    env = {**os.environ, FD_ENV: str(ready_w), LOG_ENV: str(early.resolve())}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "topo", *child_args(argv)],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            pass_fds=(ready_w,),
            start_new_session=True,
            env=env,
        )
    finally:
        os.close(fd)
        os.close(ready_w)
    interrupted = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal interrupted
        interrupted = True
        try:  # the run that was starting is stopped as Ctrl-C in its terminal would
            proc.send_signal(signum)
        except ProcessLookupError:
            pass

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        answer = _wait_ready(ready_r, reader, proc)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        os.close(ready_r)
        reader.close()
        early.unlink(missing_ok=True)  # only when the launcher never made a run directory
    if answer is not None and not interrupted:
        return 0, answer
    return proc.wait(), None


def _wait_ready(
    ready: int, reader: BinaryIO, proc: subprocess.Popen[bytes]
) -> dict[str, Any] | None:
    """Relay the launcher's output until it says it is up (its answer) or ends (None)."""
    line = b""
    while True:
        try:
            readable, _, _ = select.select([ready], [], [], 0.1)
        except InterruptedError:
            readable = []
        _relay(reader)
        if readable:
            chunk = os.read(ready, 4096)
            if not chunk:  # the launcher ended (or closed the pipe) before it was up
                proc.wait()
                _relay(reader)
                return None
            line += chunk
            if line.endswith(b"\n"):
                _relay(reader)
                answer = json.loads(line)
                return answer if isinstance(answer, dict) else None
        elif proc.poll() is not None:
            _relay(reader)
            return None


def _relay(reader: BinaryIO) -> None:
    data = reader.read()
    if data:
        sys.stderr.buffer.write(data)
        sys.stderr.flush()


# -- the detached launcher's side ------------------------------------------------------
class Detached:
    """In a launcher started by ``topo run -d``: where its output goes and whom to tell
    that the run is up. Taken from the environment once, so nodes do not inherit it."""

    def __init__(self, fd: int, early_log: str) -> None:
        self.fd: int | None = fd
        self.early_log = early_log

    @classmethod
    def take(cls) -> Detached | None:
        """The launcher's detached state, or None in an ordinary ``topo run``."""
        fd = os.environ.pop(FD_ENV, None)
        early = os.environ.pop(LOG_ENV, "")
        if fd is None:
            return None
        return cls(int(fd), early)

    def settle(self, run_dir: Path) -> None:
        """The run directory exists: the launcher's output file moves into it."""
        if self.early_log:
            try:
                os.replace(self.early_log, run_dir / LAUNCHER_LOG)
            except OSError:
                pass
            self.early_log = ""

    def say_ready(self, run_id: str, run_dir: Path) -> None:
        """Tell the waiting ``topo run -d`` that every node is up; it returns then."""
        if self.fd is None:
            return
        line = json.dumps({"id": run_id, "run_dir": str(run_dir)}) + "\n"
        try:
            os.write(self.fd, line.encode())
        except OSError:  # the command was killed meanwhile: the run goes on all the same
            pass
        self.close()

    def close(self) -> None:
        """The run ended before it was up: the waiting command sees the pipe close."""
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None
