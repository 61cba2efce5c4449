"""What a run directory says about its run, checked against the machine: a run whose
launcher died without ending it is *lost*, whatever its ``status.json`` last said, and
so are its nodes that were live: each reads ``lost`` (its process is gone, or this
machine cannot tell) or ``orphaned`` (its process still runs here, the same pid and
start time as recorded, with no launcher watching it: ``topo stop`` ends it)."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topo.rundir.pids import process_start
from topo.rundir.status import read_status
from topo.runs.slurm_jobs import GONE, SlurmJob, job_now, job_of, record_end

LIVE_STATES = ("starting", "running", "stopping")
NODE_LIVE_STATES = ("pending", "starting", "running", "restarting", "stopping")
LOST_NODE = "lost"  # a node of a lost run whose process is gone (or cannot be checked)
ORPHANED_NODE = "orphaned"  # a node of a lost run whose process verifiably still runs


def launcher_record() -> dict[str, Any]:
    """What identifies this process as a run's launcher, for ``status.json``."""
    pid = os.getpid()
    return {"pid": pid, "start": process_start(pid), "host": socket.gethostname()}


def launcher_alive(record: dict[str, Any] | None) -> bool | None:
    """Whether the launcher recorded in ``status.json`` still runs (None: it runs on
    another host, so this machine cannot tell)."""
    if not record or not record.get("pid"):
        return None
    if record.get("host") not in (None, socket.gethostname()):
        return None
    start = process_start(int(record["pid"]))
    return start is not None and start == record.get("start")


def node_alive(entry: dict[str, Any]) -> bool | None:
    """Whether the process of a node entry of ``status.json`` still runs: the recorded pid
    with the recorded start time (None: it ran on another host, or no start time was
    recorded, so this machine cannot tell)."""
    pid, start = entry.get("pid"), entry.get("pid_start")
    if not pid or start is None or entry.get("host") not in (None, socket.gethostname()):
        return None
    return process_start(int(pid)) == start


def lost_nodes(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The node entries of a lost run as they are now: a node that was live reads
    ``lost``, or ``orphaned`` when its process verifiably still runs; the others (ended
    before the launcher) keep their state."""
    out = []
    for entry in nodes:
        if isinstance(entry, dict) and entry.get("state") in NODE_LIVE_STATES:
            alive = node_alive(entry)
            entry = {**entry, "state": ORPHANED_NODE if alive else LOST_NODE, "stalled_s": None}
        out.append(entry)
    return out


@dataclass
class RunInfo:
    """One run as ``topo ps`` lists it."""

    id: str
    run_dir: Path
    name: str = "?"
    backend: str = "?"
    state: str = "unknown"  # starting / running / stopping / ended / lost / unknown
    exit_code: int | None = None
    nodes_up: int = 0
    nodes_total: int = 0
    restarts: int = 0
    started: float | None = None
    updated: float | None = None
    pid: int | None = None
    status: dict[str, Any] = field(default_factory=dict)
    slurm_job: str | None = None  # the Slurm job the run lives in (submitted runs)
    slurm: SlurmJob | None = None  # that job as Slurm lists it (None: not asked, or unknown)

    @property
    def live(self) -> bool:
        """The launcher is (as far as this machine can tell) still running the run."""
        return self.state in LIVE_STATES

    @property
    def orphans(self) -> list[dict[str, Any]]:
        """The node entries of a lost run whose processes still run on this machine."""
        return [n for n in self.status.get("nodes") or [] if n.get("state") == ORPHANED_NODE]

    @property
    def uptime_s(self) -> float | None:
        """How long the run ran (until now, or until its last record when it ended)."""
        if self.started is None:
            return None
        end = time.time() if self.live else (self.updated or time.time())
        return max(0.0, end - self.started)

    def to_json(self) -> dict[str, Any]:
        """The row as ``topo ps --json`` prints it."""
        return {
            "id": self.id,
            "name": self.name,
            "backend": self.backend,
            "state": self.state,
            "exit_code": self.exit_code,
            "nodes_up": self.nodes_up,
            "nodes": self.nodes_total,
            "restarts": self.restarts,
            "started": self.started,
            "uptime_s": None if self.uptime_s is None else round(self.uptime_s, 1),
            "launcher_pid": self.pid,
            "run_dir": str(self.run_dir),
            **({} if self.slurm_job is None else {"slurm": self._slurm_json()}),
        }

    def _slurm_json(self) -> dict[str, Any]:
        known = self.slurm
        return {
            "job_id": self.slurm_job,
            "state": None if known is None else known.state,
            "reason": None if known is None or not known.reason else known.reason,
        }


def probe(
    run_dir: Path,
    run_id: str | None = None,
    jobs: dict[str, SlurmJob] | None = None,
    ask_slurm: bool = True,
) -> RunInfo:
    """The run in ``run_dir`` as it is now. A run submitted as a Slurm job is checked
    against the job (``jobs``: the jobs already asked about, one ``squeue`` for many runs;
    else Slurm is asked, at most every few seconds, unless ``ask_slurm`` is false): a job
    still waiting is a run ``starting``, a job no longer running under a live record is a
    ``lost`` run (its launcher cannot tell: it runs on the job's node), and how the job
    ended is kept in the run directory once seen (Slurm forgets it after MinJobAge)."""
    record = job_of(run_dir)
    info = _probe(run_dir, run_id)
    if record is None:
        return info
    info.slurm_job = job_id = record["job_id"]
    if not info.status:  # the launcher has not started yet
        info.name = str(record.get("program") or "?")
        info.started = record.get("submitted")
    if info.state not in (*LIVE_STATES, "lost", "unknown"):
        return info  # ended: the launcher's own record says how
    if jobs is not None and job_id in jobs:
        info.slurm = jobs[job_id]
    elif ask_slurm:
        info.slurm = job_now(job_id)
    ended = record.get("ended")
    if isinstance(ended, str) and (info.slurm is None or info.slurm.state == GONE):
        info.slurm = SlurmJob(job_id, ended)  # as topo ended it (Slurm forgets)
    elif info.slurm is not None and info.slurm.state in FINAL and ended != info.slurm.state:
        # Slurm forgets an ended job after its MinJobAge: keep how it ended for the
        # readers after this one (a lost run read later says FAILED, not GONE)
        try:
            record_end(run_dir, info.slurm.state)
        except OSError:
            pass  # a reader that may not write there
    return _with_job(info, run_id)


# job states that never come back (a preempted or requeued job may run again)
FINAL = frozenset(
    {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL"}
    | {"OUT_OF_MEMORY", "TIMEOUT"}
)


def _with_job(info: RunInfo, run_id: str | None) -> RunInfo:
    job = info.slurm
    if job is None:
        return info
    if not info.status:  # the launcher has not started: the job waits, or ended so
        info.state = "ended" if job.ended else "starting"
        info.backend = "slurm"
        return info
    if job.waiting and info.state in (*LIVE_STATES, "lost"):  # requeued: it starts again
        info.state = "starting"
        return info
    if job.ended and info.state in LIVE_STATES:
        again = _probe(info.run_dir, run_id)  # its last record may have just come
        if again.state in LIVE_STATES:
            nodes = lost_nodes(again.status.get("nodes") or [])
            again.status = {**again.status, "state": "lost", "nodes": nodes}
            again.state = "lost"
            again.nodes_up = 0
        again.slurm_job, again.slurm = info.slurm_job, job
        return again
    return info


def _probe(run_dir: Path, run_id: str | None) -> RunInfo:
    """The run in ``run_dir`` as it is now."""
    status = read_status(run_dir)
    if status is None:
        return RunInfo(run_id or run_dir.name, run_dir)
    nodes = status.get("nodes") or []
    launcher = status.get("launcher") or {}
    state = str(status.get("state") or "unknown")
    if state in LIVE_STATES and launcher_alive(launcher) is False:
        state = "lost"
        nodes = lost_nodes(nodes)
        status = {**status, "state": state, "nodes": nodes}
    return RunInfo(
        id=str(status.get("id") or run_id or run_dir.name),
        run_dir=run_dir,
        name=str(status.get("program") or "?"),
        backend=str(status.get("backend") or "?"),
        state=state,
        exit_code=status.get("exit_code"),
        nodes_up=sum(1 for n in nodes if n.get("state") == "running"),
        nodes_total=len(nodes),
        restarts=sum(int(n.get("restarts") or 0) for n in nodes),
        started=status.get("started") or None,
        updated=status.get("updated"),
        pid=launcher.get("pid"),
        status=status,
    )
