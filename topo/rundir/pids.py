"""Whether the processes a run directory names still run: by pid alone, and by pid and
start time (a pid can be reused; the two together name one process for good). Read by
the snapshots' writers, ``topo.runs`` (lost and orphaned nodes), the supervisor and the
fork server."""

from __future__ import annotations

import os
from collections.abc import Callable


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (a zombie counts; one of another user's too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def still_running(pid: int) -> Callable[[], bool]:
    """A check of whether the process that is ``pid`` now still runs: not ended, not a
    zombie that its parent has not reaped yet (``pid_alive`` counts one), not replaced by
    another process under the same pid. Where there is no /proc, ``pid_alive``."""
    start = process_start(pid)
    if start is None:
        return lambda: pid_alive(pid)
    return lambda: process_start(pid) == start


def process_start(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (None: no such process,
    or a zombie); with the pid it names one process for good, even after the pid is
    reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ")".
    fields = stat[stat.rfind(b")") + 2 :].split()
    if fields[:1] in ([b"Z"], [b"X"]):  # ended, not yet reaped
        return None
    try:
        return int(fields[19])  # field 22 of the whole line
    except (IndexError, ValueError):
        return None
