"""The content of ``status.json``: a launcher's run as another shell reads it.

``run_summary`` is what ``topo ps``/``status``/``attach``, the dashboard and a lost run's
cleanup read (``topo.runs.probe``, ``topo.cli.recorded``); ``Helpers`` names the
backend's own processes on this machine so that ``topo stop`` of a lost run ends them.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from topo.backends.base import Backend
from topo.ir import Program
from topo.rundir.pids import process_start
from topo.runs.control import ControlServer
from topo.runtime import RegistryServer
from topo.supervisor.applier import Applier
from topo.supervisor.metrics_store import MetricsStore
from topo.supervisor.state import RunState


class Summarised(Protocol):
    """What ``run_summary`` reads of a ``Launcher``."""

    run_id: str
    program: Program
    backend: Backend
    state: RunState
    launcher_record: dict[str, Any]
    control: ControlServer | None
    applier: Applier | None
    registry: RegistryServer | None
    metrics: MetricsStore | None
    endpoint: Any  # openmetrics.MetricsEndpoint with --metrics-port, else None

    @property
    def phase(self) -> str: ...

    @property
    def resumed(self) -> str | None: ...


class Helpers:
    """The backend's helper processes here (a fork server) by pid and start time."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._starts: dict[int, int] = {}

    def listed(self) -> list[dict[str, Any]]:
        """``[{"pid": ..., "pid_start": ...}]``: what ``topo stop`` of a lost run ends
        besides its nodes (a pid with its start time names the process for good)."""
        if not self._backend.local_pids:
            return []
        out = []
        for pid in self._backend.helper_pids():
            start = self._starts.get(pid) or process_start(pid)
            if start is not None:
                self._starts[pid] = start
            out.append({"pid": pid, "pid_start": start})
        return out


def run_summary(launcher: Summarised, helpers: Helpers) -> dict[str, Any]:
    """The run's status as ``status.json`` holds it, now."""
    state = launcher.state
    now = time.time()
    limiter = state.limiter
    started = state.started_at
    return {
        "id": launcher.run_id,
        "resumed": launcher.resumed,
        "program": launcher.program.name,
        "backend": launcher.backend.name,
        "state": launcher.phase,
        "updated": now,
        "launcher": launcher.launcher_record,
        "control": None if launcher.control is None else launcher.control.path,
        "grace_s": state.grace_s,
        "generation": state.generation,
        "applying": launcher.applier is not None and launcher.applier.busy,
        "exit_code": state.exit_code,
        "stop_reason": state.stop_reason,
        "failure": None if state.failure is None else vars(state.failure),
        "warnings": state.warnings,
        "socket_dir": None if launcher.registry is None else launcher.registry.info.ipc_dir,
        "metrics_endpoint": None if launcher.endpoint is None else launcher.endpoint.url,
        "started": started,
        "duration_s": round(now - started, 3) if started else None,
        "ready_s": None if state.ready_at is None else round(state.ready_at - started, 3),
        "metrics_rows": 0 if launcher.metrics is None else launcher.metrics.rows,
        "metrics_dropped": 0 if launcher.metrics is None else launcher.metrics.dropped,
        "stopping_since": state.stopping_since,
        "helpers": helpers.listed(),
        "limiter": None if limiter is None else vars(limiter),
        "nodes": [
            {
                "id": n.id,
                "executable": n.exe,
                "group": n.id.split("/")[0],
                "state": n.state,
                "pid": n.pid,
                "pid_start": n.pid_start,
                "host": launcher.backend.location(n.exe),
                "device": launcher.backend.device_of(n.exe),
                "restarts": n.restarts,
                "since": n.started,
                "metrics": n.metrics,
                "stalled_s": n.stalled_s,
                "busy": n.busy,
                "phase": n.phase,
                "last_line": n.last_line[-500:],
                "rpc": n.rpc,
                "breakpoint": n.breakpoint,
            }
            for n in list(state.nodes.values())  # (topo apply may add or drop some)
        ],
    }
