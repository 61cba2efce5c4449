"""A local Ray instance for one run (``topo run -b ray`` without ``--address``), and a
watchdog that ends it if the launcher dies without shutting it down.

``ray.init`` ties its head processes (GCS, raylet) to the launcher's life, but not the
agents the raylet starts (``DashboardAgent``, ``RuntimeEnvAgent``): after a ``kill -9``
of the launcher they stay. The watchdog (``python -m topo.backends.ray.local``, in its
own session) follows every process below Ray's head processes and kills what is left of
them once the launcher is gone; ``stop`` ends it after a clean ``ray.shutdown``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import psutil

WATCH_S = 0.5


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
