"""A local Ray instance for one run (``topo run -b ray`` without ``--address``), and a
watchdog that ends it if the launcher dies without shutting it down.

``ray.init`` ties its head processes (GCS, raylet) to the launcher's life, but not the
agents the raylet starts (``DashboardAgent``, ``RuntimeEnvAgent``): after a ``kill -9``
of the launcher they stay. The watchdog (``python -m topo.backends.ray.local``, in its
own session) follows every process below Ray's head processes and kills what is left of
them once the launcher is gone; ``stop`` ends it after a clean ``ray.shutdown``.

``start`` starts it, and tries again when a start fails: on a busy machine Ray's raylet
may not register with its GCS within Ray's own fixed 30 s, and the failed attempt's
processes (which ``ray.init`` leaves running) are ended before the next.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import psutil

WATCH_S = 0.5
START_TRIES = 3  # a local Ray that fails to start this often is not a machine's bad minute


def head_pids() -> list[int]:
    """The processes ``ray.init`` started in this process (Ray's private API: [] if it
    moved)."""
    try:
        import ray

        node: Any = ray._private.worker._global_node
        return [info.process.pid for infos in node.all_processes.values() for info in infos]
    except Exception:
        return []


class Watchdog:
    """The watchdog process of a local Ray started by this (launcher) process."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "topo.backends.ray.local", str(os.getpid()), *map(str, pids)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self._proc.pid

    def stop(self) -> None:
        """Ray was shut down cleanly: the watchdog ends without killing anything."""
        self._proc.terminate()
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(5)


def start(init_kwargs: dict[str, Any], say: Callable[[str], None]) -> Watchdog:
    """Start a local Ray in this process (``ray.init(address="local")``) and its
    watchdog; a failed attempt's processes are ended and it is tried again, up to
    ``START_TRIES`` times (``say`` tells the user), the last failure raised."""
    import ray

    me = psutil.Process()
    for attempt in range(1, START_TRIES + 1):
        before = {child.pid for child in me.children(recursive=True)}
        try:
            ray.init(address="local", include_dashboard=False, **init_kwargs)
        except Exception as exc:
            if attempt == START_TRIES:
                raise
            end_started(me, before)
            with contextlib.suppress(Exception):
                ray.shutdown()
            say(f"Ray did not start ({exc}); trying again ({attempt + 1}/{START_TRIES})")
            continue
        return Watchdog(head_pids())
    raise AssertionError("unreachable")


def end_started(me: psutil.Process, before: set[int]) -> list[int]:
    """Kill the processes below ``me`` that were not there ``before`` (what a failed
    ``ray.init`` left running) and wait for them; their pids."""
    started = [p for p in me.children(recursive=True) if p.pid not in before]
    for proc in started:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(started, timeout=10)
    return [p.pid for p in started]


def tree(pids: list[int]) -> list[psutil.Process]:
    """The processes ``pids`` and every process below them, now."""
    roots = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            roots.append(psutil.Process(pid))
    return list(_tree(roots).values())


def end_all(procs: list[psutil.Process], grace_s: float) -> None:
    """Wait up to ``grace_s`` for ``procs`` to end (Ray's shutdown ends its head
    processes, and they their agents), then kill what is left (same processes: psutil
    checks their start time)."""
    _, left = psutil.wait_procs(procs, timeout=grace_s)
    for proc in left:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(left, timeout=5)


def _tree(roots: list[psutil.Process]) -> dict[int, psutil.Process]:
    out = {}
    for root in roots:
        try:
            if root.is_running():
                out[root.pid] = root
                out.update({p.pid: p for p in root.children(recursive=True)})
        except psutil.Error:
            continue
    return out


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def watch(launcher_pid: int, pids: list[int]) -> None:
    """Until ``launcher_pid`` ends, keep the set of processes below ``pids``; then kill
    the ones that are still there (same process: checked by its start time)."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        launcher = psutil.Process(launcher_pid)
    except psutil.NoSuchProcess:
        return
    roots = []
    for pid in pids:
        try:
            roots.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue
    known: dict[int, psutil.Process] = {}
    while _alive(launcher):
        known = {pid: p for pid, p in known.items() if p.is_running()}
        known.update(_tree(roots))
        time.sleep(WATCH_S)
    for proc in known.values():
        try:
            if proc.is_running():  # compares the start time: not a reused pid
                proc.kill()
        except psutil.Error:
            continue


if __name__ == "__main__":
    watch(int(sys.argv[1]), [int(p) for p in sys.argv[2:]])
