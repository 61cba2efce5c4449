"""The processes a node leaves behind: its process tree and group, and the orphans a
child subreaper inherits (used by the fork server and the agents that drive one)."""

from __future__ import annotations

import ctypes
import os
import signal
import time
from collections.abc import Iterable

_PR_SET_CHILD_SUBREAPER = 36


def how_it_ended(code: int | None) -> str:
    """A process's exit status (``Popen.returncode``: negative for a signal; None: it
    still runs) for people: "exited with code 3", "was killed by SIGKILL"."""
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def kill_tree(pid: int) -> None:
    """SIGKILL a child's process group (its own grandchildren included), else the child."""
    try:
        os.killpg(pid, signal.SIGKILL)
        return
    except (ProcessLookupError, PermissionError):
        pass
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def kill_group(pgid: int) -> None:
    """SIGKILL whatever is left of process group ``pgid`` (nothing if it is empty)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def become_subreaper() -> bool:
    """Make this process the reaper of its descendants' orphans (Linux); False if not."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except Exception:
        return False


def keep_niceness() -> int | None:
    """Give this process's scheduling group the niceness this process has; what it set
    (None: nothing to do, or not allowed).

    A process that starts a new session (the fork server of every backend) gets a new
    autogroup where Linux has autogroup scheduling (most distributions): its CPU share is
    then the group's, whose niceness starts at 0 whatever the process's, so ``nice topo
    run`` would no longer make the program yield to the rest of the machine."""
    try:
        mine = os.getpriority(os.PRIO_PROCESS, 0)
        with open("/proc/self/autogroup") as f:  # "/autogroup-56 nice 0"
            group = int(f.read().split()[-1])
        if mine <= group:
            return None
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(mine))
        return mine
    except (OSError, ValueError, IndexError):
        return None  # no autogroups (disabled, not Linux), or refused


def child_pids(pid: int | None = None, recursive: bool = False) -> list[int]:
    """The child processes of ``pid`` (default: this process), read from
    ``/proc/PID/task/*/children``: unlike a scan of every process on the machine, this
    stays fast when busy threads of this process compete for the GIL."""
    pid = os.getpid() if pid is None else pid
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    kids: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids.extend(int(x) for x in f.read().split())
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        except OSError:  # no CONFIG_PROC_CHILDREN: ask psutil (scans every process)
            import psutil

            try:
                kids = [k.pid for k in psutil.Process(pid).children()]
            except psutil.Error:
                kids = []
            break
    kids = sorted(set(kids))
    if recursive:
        kids += [g for k in kids for g in child_pids(k, recursive=True)]
    return kids


def sweep_orphans(executables: Iterable[int], kill: bool) -> list[int]:
    """Reap this process's children that are not ``executables`` (pids that the
    executables' owner joins itself, so never waited for here) and have ended; with
    ``kill``, first SIGKILL the live ones (and their descendants) unless they are in a
    live executable's process group. The pids killed."""
    import psutil

    exes = set(executables)
    killed: list[int] = []
    for pid in child_pids():
        if pid in exes:
            continue
        try:
            kid = psutil.Process(pid)
            if kill and kid.status() != psutil.STATUS_ZOMBIE and os.getpgid(pid) not in exes:
                for below in [*child_pids(pid, recursive=True), pid]:
                    try:
                        os.kill(below, signal.SIGKILL)
                        killed.append(below)
                    except ProcessLookupError:
                        pass
        except (psutil.Error, ProcessLookupError):
            pass
        _reap(pid, block=pid in killed)
    return killed


def _reap(pid: int, block: bool) -> None:
    """``waitpid`` one specific child (never -1: the executables are joined elsewhere)."""
    end = time.monotonic() + (2.0 if block else 0.0)
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done or time.monotonic() >= end:
            return
        time.sleep(0.01)
