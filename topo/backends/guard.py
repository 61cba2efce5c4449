"""The processes the nodes of a ``threads`` run start, and the guard that ends them.

On threads every node runs inside the launcher, so a process a node starts is a
child of the launcher. Two things end those processes:

* per attempt: the processes a node thread started (``thread_tree``: the kernel
  lists children per thread, ``/proc/PID/task/TID/children``) are noted each time
  the node reports, while its thread still lives, and killed when the attempt ends
  (``kill_procs``), so a restarted node's first attempt leaves nothing behind;
* the launcher's death (``kill -9``, or a node's ``os._exit``): a small guard
  process (``python -I -S .../guard.py``), tied to the launcher by a pipe and by its
  pid, notes every process below the launcher that was not there when the run opened
  (every ``SCAN_INTERVAL_S``), is told at once which processes a node thread started
  (``note``: the launcher writes them into the pipe before the node's report goes on, so
  they are in the pipe even if the guard has not run since), and when the launcher is
  gone reads what is left in the pipe, kills every process noted, with their
  descendants, and removes the run's socket directory.

A process is named by (pid, start time in clock ticks since boot): a pid alone can be
reused. Only the standard library is imported here (the guard starts in milliseconds).
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Collection, Iterable

SCAN_INTERVAL_S = 0.2  # how often the guard notes the processes below the launcher
BYE = b"bye\n"  # the launcher closes the run cleanly: the guard leaves everything alone
NOTE = b"+"  # a line ``+pid:start,...``: processes a node thread started (the launcher saw)
HELPERS = ("topo.backends.forkserver", "topo/backends/guard.py")  # a run's helpers (cmdline)
HELPER_TITLE = ("topo: ", " fork server")  # a fork server's title (topo.backends.titles)

Proc = tuple[int, int]  # (pid, start time in clock ticks since boot)


def start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot); None if there is none, or
    only its exit status is left (a zombie: nothing to kill, nothing below it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count after the last ')'.
    fields = stat[stat.rfind(b")") + 2 :].split()
    if fields[0] in (b"Z", b"X"):  # field 3, the state
        return None
    return int(fields[19])  # field 22 of the whole line


def _read_children(path: str) -> list[int]:
    try:
        with open(path) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def tasks(pid: int) -> set[int]:
    """The thread ids of process ``pid`` (empty when it is gone)."""
    try:
        return {int(t) for t in os.listdir(f"/proc/{pid}/task")}
    except OSError:
        return set()


def children(pid: int, spare_tids: Collection[int] = ()) -> list[int]:
    """The child processes of ``pid``, whichever of its threads started them (but those
    its threads ``spare_tids`` started)."""
    return sorted(
        {
            k
            for tid in tasks(pid) - set(spare_tids)
            for k in _read_children(f"/proc/{pid}/task/{tid}/children")
        }
    )


def tree(pids: Iterable[int]) -> set[Proc]:
    """``pids`` and every process below them, with their start times."""
    out: set[Proc] = set()
    todo = list(pids)
    while todo:
        pid = todo.pop()
        started = start_time(pid)
        if started is None or (pid, started) in out:
            continue
        out.add((pid, started))
        todo.extend(children(pid))
    return out


def thread_tree(tid: int) -> set[Proc]:
    """The processes thread ``tid`` of this process started, and every process below them
    (read in that thread's lifetime: when it ends the kernel hands them to another)."""
    return tree(_read_children(f"/proc/{os.getpid()}/task/{tid}/children"))


def live(procs: Iterable[Proc]) -> set[Proc]:
    """The ones still running as the same process (not a reused pid)."""
    return {(pid, t) for pid, t in procs if start_time(pid) == t}


def kill_procs(procs: Iterable[Proc]) -> list[int]:
    """SIGKILL ``procs`` (those still the same process) and what is below them now; a
    second pass takes what they started meanwhile. The pids killed."""
    killed: set[int] = set()
    for _ in range(2):
        targets = tree(pid for pid, _t in live(procs)) | live(procs)
        todo = [(pid, t) for pid, t in targets if pid not in killed]
        if not todo:
            break
        for pid, t in todo:
            if start_time(pid) != t:
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        procs = targets
    return sorted(killed)


def reap(pids: Iterable[int], timeout: float = 1.0) -> None:
    """Collect the exit status of those of ``pids`` that are this process's children
    (so no zombie stays); the others are left to their own parent."""
    end = time.monotonic() + timeout
    for pid in pids:
        while True:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                break
            if done or time.monotonic() >= end:
                break
            time.sleep(0.005)


def is_helper(pid: int) -> bool:
    """A fork server or guard of a run launched from the same process: that run's own."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().decode(errors="replace")
    except OSError:
        return False
    titled = cmd.replace("\0", " ").strip()
    if titled.startswith(HELPER_TITLE[0]) and titled.endswith(HELPER_TITLE[1]):
        return True
    return any(h in cmd for h in HELPERS)


def new_below(
    launcher: int, baseline: set[Proc], me: int, spare_tids: Collection[int] = ()
) -> set[Proc]:
    """The processes below ``launcher`` that are not ``baseline``, helpers of other runs
    (fork servers, guards), ``me``, or started by its threads ``spare_tids`` (the ones
    that were there before the run: the program that launched it), nor below those."""
    tops = []
    for pid in children(launcher, spare_tids):
        started = start_time(pid)
        if pid == me or started is None or (pid, started) in baseline or is_helper(pid):
            continue
        tops.append(pid)
    return tree(tops)


def encode(procs: Iterable[Proc]) -> str:
    """``pid:start,...`` (the guard's baseline argument)."""
    return ",".join(f"{pid}:{t}" for pid, t in sorted(procs))


def decode(text: str) -> set[Proc]:
    """The inverse of ``encode``."""
    out = set()
    for item in text.split(","):
        if item:
            pid, _, t = item.partition(":")
            out.add((int(pid), int(t)))
    return out


def start_guard(
    ipc_dir: str | None = None, spare_tids: Collection[int] = ()
) -> subprocess.Popen[bytes]:
    """A guard for this process (run with ``-I -S``: it imports only the standard library):
    the processes that appear below this one from now on die with it, but those its
    threads ``spare_tids`` start (the program that launched the run keeps its own)."""
    baseline = ((pid, start_time(pid)) for pid in children(os.getpid()))
    return subprocess.Popen(
        [
            sys.executable,
            "-I",
            "-S",
            __file__,
            str(os.getpid()),
            ipc_dir or "",
            encode((pid, t) for pid, t in baseline if t is not None),
            ",".join(map(str, sorted(spare_tids))),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=True,  # not in this process's group: Ctrl-C is not the guard's
    )


def note(proc: subprocess.Popen[bytes], procs: Iterable[Proc]) -> None:
    """Tell the guard of ``procs`` (a node thread started them): once written, they die with
    this process even if it dies before the guard's next scan."""
    with contextlib.suppress(OSError, ValueError):
        assert proc.stdin is not None
        proc.stdin.write(NOTE + encode(procs).encode() + b"\n")
        proc.stdin.flush()


def _told(lines: bytes) -> set[Proc]:
    """The processes named by the complete ``+pid:start,...`` lines of ``lines``."""
    out: set[Proc] = set()
    for line in lines.split(b"\n"):
        if line.startswith(NOTE):
            with contextlib.suppress(ValueError):
                out |= decode(line[len(NOTE) :].decode())
    return out


def _drain(fd: int) -> bytes:
    """What is in the pipe now, without waiting (its writer may be gone, or a forked
    child of it may still hold the write end)."""
    out = b""
    while select.select([fd], [], [], 0)[0]:
        data = os.read(fd, 65536)
        if not data:
            break
        out += data
    return out


def stop_guard(proc: subprocess.Popen[bytes]) -> None:
    """Tell the guard this process ends its run cleanly (it leaves everything), wait for it."""
    with contextlib.suppress(OSError, ValueError):
        assert proc.stdin is not None
        proc.stdin.write(BYE)
        proc.stdin.close()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def new_processes(baseline: set[Proc], spare_tids: Collection[int] = ()) -> set[Proc]:
    """The processes below this one that are not ``baseline`` (nor below it), helpers, or
    started by its threads ``spare_tids``."""
    return new_below(os.getpid(), baseline, os.getpid(), spare_tids)


def guard(
    launcher: int,
    launcher_start: int,
    ipc_dir: str,
    baseline: set[Proc],
    spare_tids: Collection[int] = (),
) -> int:
    """Watch ``launcher`` until it closes the pipe on fd 0 (``BYE``: a clean end, leave
    everything) or dies; then kill every process noted below it and remove ``ipc_dir``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the launcher's to handle
    me = os.getpid()
    noted: set[Proc] = set()
    said = b""  # what the launcher wrote, from the last incomplete line on
    while True:
        readable, _, _ = select.select([0], [], [], SCAN_INTERVAL_S)
        gone = start_time(launcher) != launcher_start or os.getppid() != launcher
        if readable and not gone:
            data = os.read(0, 65536)
            said += data
            if said.endswith(BYE):
                return 0
            gone = not data  # EOF without a goodbye: the launcher died
        if gone:
            said += _drain(0)
            if said.endswith(BYE):  # it said goodbye just before it ended
                return 0
            kill_procs(noted | _told(said))
            if ipc_dir:
                shutil.rmtree(ipc_dir, ignore_errors=True)
            return 0
        lines, _, said = said.rpartition(b"\n")
        noted = live(noted | _told(lines)) | new_below(launcher, baseline, me, spare_tids)


def main(argv: list[str]) -> int:
    """``python -I -S guard.py LAUNCHER_PID IPC_DIR BASELINE SPARE_TIDS``."""
    launcher = int(argv[0])
    started = start_time(launcher)
    if started is None or os.getppid() != launcher:
        # The launcher died before this guard ran: no scan can tell its processes apart
        # any more, but what it wrote into the pipe names the ones its nodes started.
        kill_procs(_told(_drain(0)))
        if argv[1]:
            shutil.rmtree(argv[1], ignore_errors=True)
        return 0
    spare = {int(t) for t in argv[3].split(",") if t} if len(argv) > 3 else set()
    return guard(launcher, started, argv[1], decode(argv[2]), spare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
