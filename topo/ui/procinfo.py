"""CPU and memory of a node's process, read by pid with psutil (the dashboard's process,
not the launcher, does the reading). Only for runs whose processes are on this machine:
a node on another host (ssh, ray) is said to be remote."""

from __future__ import annotations

import socket
import threading
from typing import Any

import psutil

_lock = threading.Lock()
_procs: dict[int, psutil.Process] = {}  # kept: cpu_percent measures since the last look


def process_figures(
    pid: int | None, host: str | None, launcher: dict[str, Any], backend: str
) -> dict[str, Any]:
    """``{"where": "local"|"remote"|"gone", "cpu_percent", "rss", "threads", ...}`` of the
    process ``pid`` (a node's, on the machine the launcher recorded)."""
    if host or launcher.get("host") not in (None, socket.gethostname()):
        return {"where": "remote", "host": host or launcher.get("host")}
    if not pid:
        return {"where": "gone"}
    shared = backend == "threads" or pid == launcher.get("pid")
    with _lock:
        proc = _procs.get(pid)
        try:
            if proc is None or not proc.is_running():
                proc = _procs[pid] = psutil.Process(pid)
                proc.cpu_percent(None)  # the first look starts the measure
            with proc.oneshot():
                memory = proc.memory_info()
                figures = {
                    "where": "local",
                    "pid": pid,
                    "cpu_percent": round(proc.cpu_percent(None), 1),
                    "rss": memory.rss,
                    "vms": memory.vms,
                    "threads": proc.num_threads(),
                    "started": proc.create_time(),
                    "shared": shared,
                }
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            _procs.pop(pid, None)
            return {"where": "gone", "pid": pid}
        if len(_procs) > 4096:  # pids of processes that ended
            for old in [p for p, pr in _procs.items() if not pr.is_running()]:
                _procs.pop(old, None)
    return figures
