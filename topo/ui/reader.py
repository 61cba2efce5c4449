"""What the dashboard reads of a run directory: ``status.json`` (kept current by the
launcher at most twice a second), ``program.json`` and ``events.jsonl``; the names are
the run directory's (``topo.rundir``).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topo.ir import Program, loads
from topo.rundir.layout import EVENTS_FILE, PROGRAM_FILE, rotated_path
from topo.rundir.status import read_status, status_path
from topo.runs.probe import LIVE_STATES, ORPHANED_NODE, launcher_alive, lost_nodes

MAX_EVENTS = 5000  # events sent to a page at first (the newest)
ORPHANS_S = 1.0  # how often a lost run's orphaned nodes are looked at again

# What a page shows of each node, from its entry in status.json.
NODE_FIELDS = (
    "id",
    "group",
    "executable",
    "state",
    "pid",
    "host",
    "restarts",
    "since",
    "stalled_s",
    "phase",
    "last_line",
    "metrics",
    "rpc",
    "breakpoint",
)
RUN_FIELDS = (
    "id",
    "program",
    "backend",
    "updated",
    "exit_code",
    "stop_reason",
    "failure",
    "warnings",
    "started",
    "duration_s",
    "ready_s",
    "stopping_since",
    "limiter",
    "generation",
)


def node_view(entry: dict[str, Any]) -> dict[str, Any]:
    """The fields of a node's status entry a page shows (``busy`` reduced to its
    message: its stacks are long)."""
    out = {k: entry.get(k) for k in NODE_FIELDS}
    busy = entry.get("busy")
    out["busy"] = busy.get("message", "busy") if isinstance(busy, dict) else None
    return out


@dataclass
class StatusReading:
    """One reading of ``status.json``: its version (changes whenever the file does), the
    run's state as this machine sees it (``lost`` when its launcher died) and nodes (those
    of a lost run that were live: ``lost``, or ``orphaned``, ``topo.runs.probe``)."""

    version: int
    state: str
    run: dict[str, Any]
    nodes: dict[str, dict[str, Any]]
    control: str | None


class RunReader:
    """A run directory as the dashboard reads it; ``status()`` is shared by every page
    and read again only when the file changed (one ``stat`` per look)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._version = 0
        self._reading = StatusReading(0, "unknown", {}, {}, None)
        self._entries: list[Any] = []  # the nodes as the file has them
        self._checked = 0.0
        self._orphans_checked = 0.0
        self._program: Program | None = None
        self._program_stamp: tuple[int, int, int] | None = None

    def program(self) -> Program:
        """The run's program (``program.json``), read again when the file changed: ``topo
        apply`` rewrites it before the run's generation (``status.json``) moves on."""
        path = self.run_dir / PROGRAM_FILE
        with self._lock:
            try:
                st = path.stat()
                stamp: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
            except OSError:
                stamp = None
            if self._program is None or (stamp is not None and stamp != self._program_stamp):
                try:
                    self._program = loads(path.read_text(encoding="utf-8"))
                    self._program_stamp = stamp
                except (OSError, ValueError):
                    if self._program is None:  # (written atomically: a rewrite is whole)
                        raise
            return self._program

    def status(self, max_age_s: float = 0.05) -> StatusReading:
        """The newest reading of ``status.json`` (at most ``max_age_s`` old)."""
        with self._lock:
            now = time.monotonic()
            if now - self._checked < max_age_s:
                return self._reading
            self._checked = now
            try:
                st = status_path(self.run_dir).stat()
                stamp = (st.st_mtime_ns, st.st_size)
            except OSError:
                stamp = None
            if stamp is not None and stamp != self._stamp:
                data = read_status(self.run_dir)
                if data is not None:
                    self._stamp = stamp
                    self._version += 1
                    self._entries = list(data.get("nodes") or [])
                    self._reading = _reading(self._version, data)
            elif self._reading.state in LIVE_STATES and stamp is not None:
                # the file did not change: is its launcher still there?
                run = self._reading.run
                alive = launcher_alive(run.get("launcher"))
                if alive is False or (alive is None and _job_ended(self.run_dir)):
                    self._version += 1
                    nodes = _nodes(self._entries, lost=True)
                    self._reading = StatusReading(self._version, "lost", run, nodes, None)
            elif self._reading.state == "lost" and now - self._orphans_checked >= ORPHANS_S:
                # a node left running unwatched ends some time after its launcher: looked at
                # again until none is left
                self._orphans_checked = now
                old = self._reading
                if any(n.get("state") == ORPHANED_NODE for n in old.nodes.values()):
                    nodes = _nodes(self._entries, lost=True)
                    if nodes != old.nodes:
                        self._version += 1
                        self._reading = StatusReading(self._version, "lost", old.run, nodes, None)
            return self._reading


def _job_ended(run_dir: Path) -> bool:
    """The run lives in a Slurm job that Slurm says no longer runs (its launcher, on the
    job's node, cannot be checked from here; Slurm is asked at most every few seconds)."""
    from topo.runs.slurm_jobs import job_now, job_of

    record = job_of(run_dir)
    job = None if record is None else job_now(record["job_id"])
    return job is not None and job.ended


def _reading(version: int, data: dict[str, Any]) -> StatusReading:
    state = str(data.get("state") or "unknown")
    launcher = data.get("launcher") or {}
    if state in LIVE_STATES and launcher_alive(launcher) is False:
        state = "lost"
    run = {k: data.get(k) for k in RUN_FIELDS}
    run["launcher"] = launcher
    nodes = _nodes(data.get("nodes") or [], lost=state == "lost")
    control = data.get("control") if state in LIVE_STATES else None
    return StatusReading(version, state, run, nodes, control if isinstance(control, str) else None)


def _nodes(entries: list[Any], lost: bool) -> dict[str, dict[str, Any]]:
    """Node id -> what a page shows of it; of a lost run, its live nodes read ``lost``, or
    ``orphaned`` while their processes still run (``topo.runs.probe.lost_nodes``)."""
    if lost:
        entries = lost_nodes(entries)
    nodes = {}
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            nodes[entry["id"]] = node_view(entry)
    return nodes


class EventReader:
    """``events.jsonl`` read on from where the last read ended (a rotation starts over
    from the new file)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / EVENTS_FILE
        self.offset = 0
        self._inode: int | None = None

    def first(self) -> list[dict[str, Any]]:
        """Every event so far (the newest ``MAX_EVENTS``, the rotated file's first)."""
        older = read_json_lines(rotated_path(self.path, 1), 0)[0]
        rows = older + self.more()
        return rows[-MAX_EVENTS:]

    def more(self) -> list[dict[str, Any]]:
        """The events written since the last call."""
        try:
            st = self.path.stat()
        except OSError:
            return []
        if self._inode != st.st_ino or st.st_size < self.offset:
            self._inode, self.offset = st.st_ino, 0
        if st.st_size == self.offset:
            return []
        rows, self.offset = read_json_lines(self.path, self.offset)
        return rows


def read_json_lines(path: Path, offset: int, limit: int = -1) -> tuple[list[dict[str, Any]], int]:
    """The JSON objects of the whole lines of ``path`` from ``offset`` (at most ``limit``
    bytes read), and where the next read starts (after the last whole line)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(limit)
    except OSError:
        return [], offset
    end = data.rfind(b"\n") + 1
    rows = []
    for line in data[:end].splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows, offset + end
