"""Runs submitted as Slurm jobs, as Slurm sees them: ``RUN_DIR/slurm-job.json`` names the
job (written when ``topo run -b slurm`` submits it), and one ``squeue`` call tells the
state and reason of every job asked about, so that ``topo ps`` stays cheap with many
runs. Standard library only (``topo ps`` imports little)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JOB_FILE = "slurm-job.json"
SQUEUE_S = 10.0  # squeue answers in milliseconds; a controller away is not waited on longer
FRESH_S = 2.0  # a job's state this recent is not asked again (topo attach polls 4 times a second)
# the states of a job whose batch script (topo's launcher) does not run (yet)
WAITING = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING"})
RUNNING = frozenset({"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING"})


@dataclass(frozen=True)
class SlurmJob:
    """A job's state (``PENDING``, ``RUNNING``, ``CANCELLED`` ...; ``GONE`` once Slurm no
    longer lists it) and why it is in it (``Resources``; "" for none)."""

    id: str
    state: str
    reason: str = ""

    @property
    def waiting(self) -> bool:
        return self.state in WAITING

    @property
    def running(self) -> bool:
        return self.state in RUNNING

    @property
    def ended(self) -> bool:
        return not self.waiting and not self.running

    def text(self) -> str:
        """``RUNNING``, ``PENDING (Resources)``."""
        return f"{self.state} ({self.reason})" if self.reason else self.state


GONE = "GONE"  # the state of a job squeue no longer lists (ended, then forgotten)


def write_job(run_dir: Path, job_id: str, program: str) -> None:
    """Record that the run of ``program`` in ``run_dir`` lives in Slurm job ``job_id``."""
    path = run_dir / JOB_FILE
    record = {"job_id": job_id, "program": program, "submitted": time.time()}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(record) + "\n")


def record_end(run_dir: Path, state: str) -> None:
    """Keep how the run's job ended (``CANCELLED`` by ``topo stop`` before topo ran in
    it): Slurm forgets an ended job after its ``MinJobAge`` (300 s by default), and the
    run would read ``GONE`` from then on."""
    record = job_of(run_dir)
    if record is None:
        return
    path = run_dir / JOB_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps({**record, "ended": state}) + "\n")


def job_of(run_dir: Path) -> dict[str, Any] | None:
    """What ``write_job`` recorded for the run in ``run_dir`` (None: not a submitted run)."""
    try:
        record = json.loads((run_dir / JOB_FILE).read_text())
        return {**record, "job_id": str(record["job_id"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def squeue(job_ids: list[str]) -> dict[str, SlurmJob] | None:
    """Every job of ``job_ids`` as Slurm lists it now (one ``squeue`` call; a job it no
    longer lists reads ``GONE``); None when Slurm cannot be asked (no squeue, the
    controller away): nothing is known then."""
    if not job_ids:
        return {}
    fmt = "%i|%T|%r"
    args = ["squeue", "-h", "-t", "all", "-o", fmt, "-j", ",".join(job_ids)]
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=SQUEUE_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0 and "Invalid job id" not in done.stderr:
        return None
    found = {j: SlurmJob(j, GONE) for j in job_ids}
    for line in done.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 3 or parts[0] not in found:
            continue
        reason = "" if parts[2] in ("None", "(null)") else parts[2]
        found[parts[0]] = SlurmJob(parts[0], parts[1], reason)
    return found


_known: dict[str, tuple[float, SlurmJob]] = {}  # job -> (when asked, its state then)


def job_now(job_id: str) -> SlurmJob | None:
    """Job ``job_id`` as Slurm listed it at most ``FRESH_S`` ago (asked again when older:
    a command that polls a run asks the controller every few seconds, not at each look);
    None when Slurm cannot be asked."""
    now = time.monotonic()
    known = _known.get(job_id)
    if known is not None and now - known[0] < FRESH_S:
        return known[1]
    found = (squeue([job_id]) or {}).get(job_id)
    if found is not None:
        _known[job_id] = (now, found)
    return found


def cancel(job_id: str, signal: str | None = None) -> str | None:
    """``scancel JOB`` (with ``signal``: only that signal to the batch shell, topo's
    launcher): None once done, else what went wrong in Slurm's words."""
    args = ["scancel", *([] if signal is None else ["--batch", f"--signal={signal}"]), job_id]
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=SQUEUE_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"scancel {job_id}: {exc}"
    if done.returncode != 0 and "already completing or completed" not in done.stderr:
        return "; ".join(s.strip() for s in done.stderr.splitlines() if s.strip())
    return None
