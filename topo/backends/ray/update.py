"""What the ray backend needs to change a running program (``topo apply``) besides the
plan (``growth``): the run's init for the agents and actors (put in Ray once per
program: ``RayInits``), what the live nodes have
free, and a ``Sink`` that knows which attempts run, so that a bundle an executable gives
up is released when its attempt ends (``groups.Reservations.vacated``)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from topo.backends.base import JobContext, Sink
from topo.backends.ray.placement import Bundle, threads
from topo.backends.remote.transport import run_init as remote_init


def run_init(job: JobContext, shipped: bool) -> dict[str, Any]:
    """What every agent and actor of the run is started with: the remote core's init
    (the program as JSON, ...) and where the launcher imports from."""
    return {
        **remote_init(job),
        "sys_path": [os.getcwd(), *sys.path],
        "cwd": os.getcwd(),
        "shipped": shipped,
        "threads": threads(job.program),
    }


class RayInits:
    """The run's init in Ray's object store, put once per program (``run_init``)."""

    def __init__(self, shipped: bool) -> None:
        self._shipped = shipped
        self._put: tuple[Any, dict[str, Any], Any] | None = None  # program, init, its ref
        self._lock = threading.Lock()

    def get(self, job: JobContext) -> tuple[dict[str, Any], Any]:
        """``job``'s init and its reference in Ray."""
        import ray

        with self._lock:
            if self._put is None or self._put[0] is not job.program:
                init = run_init(job, self._shipped)
                self._put = (job.program, init, ray.put(init))
            return self._put[1], self._put[2]


def live_nodes() -> tuple[dict[str, Bundle], dict[str, str]]:
    """Each live Ray node's free resources (what no placement group or task holds), and
    every node's address; by node id."""
    import ray

    ips, total = {}, {}
    for node in ray.nodes():
        node_id = str(node.get("NodeID", ""))
        ips[node_id] = str(node.get("NodeManagerAddress", "?"))
        if node.get("Alive"):
            total[node_id] = {k: float(v) for k, v in dict(node.get("Resources", {})).items()}
    try:  # Ray's own per-node view (private API: the totals, optimistic, if it moved)
        from ray._private.state import available_resources_per_node

        free = available_resources_per_node()
    except Exception:
        return total, ips
    return {n: {k: float(v) for k, v in dict(free.get(n, {})).items()} for n in total}, ips


class Tracked(Sink):
    """The backend's ``Sink`` for its pools: passes everything on to the launcher's, and
    keeps which attempts run (``started_attempt`` when one is started); at the end of
    an attempt ``on_end(exe)`` is called first."""

    def __init__(self, sink: Sink, on_end: Callable[[str], None]) -> None:
        self._sink = sink
        self._on_end = on_end
        self._running: set[tuple[str, int]] = set()
        self._lock = threading.Lock()

    def started_attempt(self, exe: str, attempt: int) -> None:
        """``attempt`` of ``exe`` is being started (its end will be reported)."""
        with self._lock:
            self._running.add((exe, attempt))

    def running(self, exe: str) -> bool:
        """Whether an attempt of ``exe`` runs (or is being started)."""
        with self._lock:
            return any(e == exe for e, _ in self._running)

    def node_status(
        self, kind: str, node: str, exe: str, attempt: int, pid: int, traceback: str = ""
    ) -> None:
        self._sink.node_status(kind, node, exe, attempt, pid, traceback)

    def started(self, exe: str, attempt: int, pid: int) -> None:
        self._sink.started(exe, attempt, pid)

    def exited(
        self, exe: str, attempt: int, pid: int, code: int, reason: str = "", started: bool = True
    ) -> None:
        with self._lock:
            self._running.discard((exe, attempt))
        try:
            self._on_end(exe)
        finally:
            self._sink.exited(exe, attempt, pid, code, reason, started)

    def backend_failed(self, message: str) -> None:
        self._sink.backend_failed(message)
