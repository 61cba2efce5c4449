"""The runs a process launched end with it: at the exit of the process that started them
(``topo.launch`` in a script that ended or raised), each run still going stops as
``RunningProgram.stop()`` would (its grace, its snapshot at the stop) and its record ends,
where otherwise its nodes would die with the process and leave ``status.json`` saying
running. A process killed by a signal runs no exit handler: its runs are *lost*."""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from topo.supervisor.state import RunState

EXIT_WAIT_S = 60.0  # past its grace, how long the exit of a process waits for its runs


class Run(Protocol):
    """What this module needs of a ``Launcher``."""

    @property
    def state(self) -> RunState: ...

    @property
    def done(self) -> bool: ...

    def request_stop(self, reason: str = ..., code: int = ...) -> None: ...

    def wait(self, timeout: float | None = None) -> int | None: ...


_lock = threading.Lock()
_running: dict[Run, int] = {}  # the runs not ended yet -> the pid of the process that started them


def track(run: Run) -> None:
    """``run`` has started in this process: it ends with it."""
    with _lock:
        _running[run] = os.getpid()


def untrack(run: Run) -> None:
    """``run`` has ended."""
    with _lock:
        _running.pop(run, None)


def _end_runs() -> None:
    with _lock:  # (a process forked from this one inherits the hook, not the runs)
        ours = [r for r, pid in _running.items() if pid == os.getpid() and not r.done]
    if not ours:
        return
    raised = getattr(sys, "last_value", None)  # what the interpreter printed as uncaught
    why = "the process that launched it exited"
    code = 0
    if isinstance(raised, BaseException):
        why += f" (uncaught {type(raised).__name__}: {raised})"
        code = 130 if isinstance(raised, KeyboardInterrupt) else 1
    for run in ours:
        run.request_stop(why, code)
    for run in ours:
        run.wait(run.state.grace_s + EXIT_WAIT_S)


atexit.register(_end_runs)
