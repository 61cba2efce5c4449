"""A run seen from another shell: what its ``status.json`` says, in the shape the live
view reads from a launcher (``topo status``, ``topo attach``). It reads no program
(the IR): ``topo status`` stays light."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from topo.runs.node_status import LimiterProgress, NodeStatus
from topo.runs.probe import RunInfo, probe


class StatusSource:
    """A run's latest ``status.json``, refreshed by ``refresh`` (a ``RunSource``)."""

    def __init__(self, info: RunInfo) -> None:
        self.info = info
        self.run_dir: Path = info.run_dir
        self.program_name = info.name
        self.nodes: dict[str, NodeStatus] = {}
        self.backend_name = info.backend
        self.grace_s = 0.0
        self.stopping_since: float | None = None
        self.limiter: LimiterProgress | None = None
        self.generation = 0
        self._hosts: dict[str, str | None] = {}
        self._devices: dict[str, str | None] = {}
        self._apply(info.status)

    def location(self, exe_id: str) -> str | None:
        """The host an executable runs on (None on this machine)."""
        return self._hosts.get(exe_id)

    def device(self, exe_id: str) -> str | None:
        """The accelerators an executable was given (None: none)."""
        return self._devices.get(exe_id)

    def refresh(self) -> RunInfo:
        """Read the record again; the run as it is now."""
        info = probe(self.run_dir, self.info.id)
        if info.status:
            self.info = info
            self._apply(info.status)
        else:
            self.info.state = info.state if info.state != "unknown" else self.info.state
        return self.info

    def _apply(self, status: dict[str, Any]) -> None:
        hosts: dict[str, str | None] = {}
        devices: dict[str, str | None] = {}
        self.generation = int(status.get("generation") or 0)  # changes topo apply made
        self.program_name = str(status.get("program") or self.program_name)
        rows = status.get("nodes") or []
        listed = {row["id"] for row in rows}
        for gone in [n for n in self.nodes if n not in listed]:
            del self.nodes[gone]
        for row in rows:
            node = self.nodes.get(row["id"]) or NodeStatus(row["id"], row.get("executable", ""))
            node.state = row.get("state") or node.state
            node.pid = row.get("pid")
            node.restarts = int(row.get("restarts") or 0)
            node.started = row.get("since")
            node.last_line = row.get("last_line") or ""
            node.metrics = row.get("metrics") or {}
            node.stalled_s = row.get("stalled_s")
            node.busy = row.get("busy")
            node.phase = row.get("phase") or ""
            node.breakpoint = row.get("breakpoint") or None
            self.nodes[node.id] = node
            hosts[node.exe] = row.get("host")
            devices[node.exe] = row.get("device")
        self._hosts, self._devices = hosts, devices
        self.backend_name = str(status.get("backend") or "?")
        self.grace_s = float(status.get("grace_s") or 0.0)
        self.stopping_since = status.get("stopping_since")
        limiter = status.get("limiter")
        self.limiter = LimiterProgress(**limiter) if isinstance(limiter, dict) else None
