"""``topo.backends.guard``: processes are told apart by the thread that started them and
by start time (a reused pid is never killed), and a guard ends what appeared below the
process it watches when that process dies, but nothing when it says goodbye."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from topo.backends import guard
from topo.testing import alive, wait_gone


def test_a_threads_processes_are_its_own() -> None:
    started: dict[str, tuple[int, int]] = {}  # name -> (thread id, sleep pid)
    hold = threading.Event()
    noted: dict[str, set[guard.Proc]] = {}

    def spawn(name: str) -> None:
        proc = subprocess.Popen(["sleep", "600"])
        started[name] = (threading.get_native_id(), proc.pid)
        hold.wait(30)

    threads = [threading.Thread(target=spawn, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    try:
        while len(started) < 2:
            threading.Event().wait(0.01)
        for name, (tid, _pid) in started.items():
            noted[name] = guard.thread_tree(tid)
        assert {p for p, _t in noted["a"]} == {started["a"][1]}
        assert {p for p, _t in noted["b"]} == {started["b"][1]}
    finally:
        hold.set()
        for t in threads:
            t.join()
    pid_a = started["a"][1]
    assert guard.kill_procs({(pid_a, noted["a"].pop()[1] + 1)}) == []  # another start time
    assert alive([pid_a]) == [pid_a]
    assert guard.kill_procs(guard.tree([started["a"][1], started["b"][1]])) == sorted(
        [pid_a, started["b"][1]]
    )
    guard.reap([pid_a, started["b"][1]])
    assert not wait_gone([pid_a, started["b"][1]], 5)


# A process that starts a guard and prints its pid; on "go" starts two sleeps (one
# detached), tells the guard of them and prints their pids, then waits: killed (-9), or
# told to leave cleanly ("bye" on stdin).
WATCHED = textwrap.dedent("""
    import subprocess, sys
    from topo.backends import guard
    g = guard.start_guard(sys.argv[1])
    print(g.pid, flush=True)
    sys.stdin.readline()
    out = subprocess.DEVNULL  # not our stdout: the test reads it to its end
    kids = [subprocess.Popen(["sleep", "600"], stdout=out),
            subprocess.Popen(["sleep", "600"], stdout=out, start_new_session=True)]
    guard.note(g, guard.tree(k.pid for k in kids))
    print(*(k.pid for k in kids), flush=True)
    if sys.stdin.readline() == "bye\\n":
        guard.stop_guard(g)
        print("done", flush=True)
""")


def _watched(ipc_dir: Path, frozen: bool = False) -> tuple[subprocess.Popen[str], int, list[int]]:
    """The watched process, its guard's pid and its two sleeps; ``frozen``: the guard is
    stopped (SIGSTOP) before the sleeps start, so it can only learn of them from the note."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WATCHED, str(ipc_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    guard_pid = int(proc.stdout.readline())
    if frozen:
        os.kill(guard_pid, signal.SIGSTOP)
    proc.stdin.write("go\n")
    proc.stdin.flush()
    kids = [int(x) for x in proc.stdout.readline().split()]
    return proc, guard_pid, kids


@pytest.mark.parametrize("frozen", [False, True], ids=["guard-running", "guard-frozen"])
def test_the_guard_ends_what_a_killed_process_started(tmp_path: Path, frozen: bool) -> None:
    # Frozen: the guard has not run since the sleeps started and the launcher died, so
    # their parent is gone before any scan could see them: only the note names them.
    ipc_dir = tmp_path / "sockets"
    ipc_dir.mkdir()
    proc, guard_pid, kids = _watched(ipc_dir, frozen)
    try:
        assert alive(kids) == kids
        os.kill(proc.pid, signal.SIGKILL)  # at once: no time for a scan
        proc.wait(10)
        if frozen:
            os.kill(guard_pid, signal.SIGCONT)
        assert not wait_gone([*kids, guard_pid], 10)
        assert not ipc_dir.exists()
    finally:
        for pid in alive([*kids, guard_pid]):
            os.kill(pid, signal.SIGKILL)


def test_after_goodbye_the_guard_leaves_everything(tmp_path: Path) -> None:
    ipc_dir = tmp_path / "sockets"
    ipc_dir.mkdir()
    proc, guard_pid, kids = _watched(ipc_dir)
    try:
        out, _ = proc.communicate("bye\n", timeout=30)
        assert out.strip() == "done" and not wait_gone([guard_pid], 10)
        assert alive(kids) == kids and ipc_dir.is_dir()  # not the guard's to end
    finally:
        for pid in alive(kids):
            os.kill(pid, signal.SIGKILL)
