"""What the tests of a submitted run's requeue share: a login node's environment, a run
submitted detached, the job's state as Slurm shows it, a requeued job hurried, a node
taken by an urgent job, the job's end."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tests.backends.slurm.cluster import SlurmCluster
from topo.testing import wait_until

ROOT = Path(__file__).resolve().parents[3]
STEP_S = 240.0  # a life up, preempted, requeued: on a busy machine
HURRY_S = 2  # a requeued job held for its begin time starts this soon (``hurried``)
LIVES_NODE = "tests.backends.slurm.requeue_nodes:Lives"  # counts, and says its lives


def login_env(slurm: SlurmCluster, home: Path) -> dict[str, str]:
    """A login node's shell on the test cluster (no job of its own), its own topo home."""
    return {
        **slurm.env(),
        "PYTHONPATH": str(ROOT),
        "TOPO_HOME": str(home),
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }


def login_topo(slurm: SlurmCluster, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``topo ARGS`` from a login node's shell in ``cwd`` (its topo home there)."""
    return subprocess.run(
        [sys.executable, "-m", "topo", *args],
        cwd=cwd,
        env=login_env(slurm, cwd / "home"),
        capture_output=True,
        text=True,
        timeout=STEP_S,
    )


def submit_detached(slurm: SlurmCluster, cwd: Path, *args: str) -> tuple[str, Path]:
    """``topo run ARGS -b slurm -d`` from a login node, in ``cwd`` (its topo home there):
    the job id and the run directory it printed."""
    done = login_topo(slurm, cwd, "run", *args, "-b", "slurm", "-d")
    assert done.returncode == 0, done.stderr
    job, run_dir = done.stdout.split()
    return job, Path(run_dir)


def submit_counting(slurm: SlurmCluster, cwd: Path, *args: str) -> tuple[str, Path, Path]:
    """``submit_detached``, then wait for the ``Lives`` node to count in its first life:
    the job id, the run directory and the job's output file."""
    job, run_dir = submit_detached(slurm, cwd, *args)
    out = run_dir / f"slurm-{job}.out"
    wait_until(
        lambda: out.is_file() and "count 3 lives 0" in out.read_text(),
        STEP_S,
        what="the program counting",
    )
    return job, run_dir, out


def state_of(slurm: SlurmCluster, job: str) -> dict[str, str]:
    """The job's state, restarts and node list as ``scontrol show job`` says them."""
    shown = slurm.run("scontrol", "show", "job", "-o", job).stdout
    return dict(re.findall(r"(JobState|Restarts|NodeList)=(\S+)", shown))


def steps_left(slurm: SlurmCluster, job: str) -> bool:
    """Whether a step daemon of ``job`` (its batch step's, ``[5.batch]``) is still there.
    Looked for by name, not by the cluster's spool (``SlurmCluster.stepds``): a step
    daemon that closed its sockets there may still be telling slurmctld that its step
    ended -- a requeued job started before slurmctld heard it is ended by it."""
    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.info["name"] == "slurmstepd" and f"[{job}." in " ".join(proc.info["cmdline"] or ()):
            return True
    return False


def hurried(slurm: SlurmCluster, job: str) -> str:
    """The job's state; a requeued job held for its begin time (Slurm holds one for
    ``cred_expire``, 2 minutes by default) is made eligible now -- once its last life's
    batch step is gone: Slurm took that step's late end for the new life's, and the
    job ended there (seen when the launcher's own ``scontrol requeue`` was followed at
    once by a start)."""
    shown = slurm.run("scontrol", "show", "job", "-o", job).stdout
    state = re.search(r"JobState=(\S+)", shown)
    if state and state.group(1) == "PENDING" and "Reason=BeginTime" in shown:
        # (EligibleTime: when it may start; StartTime is the scheduler's guess)
        begins = re.search(r"EligibleTime=(\S+)", shown)
        later = begins is None or _epoch(begins.group(1)) > time.time() + HURRY_S + 1
        if later and not steps_left(slurm, job):
            # (HURRY_S on: slurmctld may still be hearing of the old step's end)
            slurm.run("scontrol", "update", f"JobId={job}", f"StartTime=now+{HURRY_S}")
    return state.group(1) if state else ""


def _epoch(when: str) -> float:
    """Slurm's local ``2026-12-07T03:36:35`` as seconds since the epoch (inf: unknown)."""
    try:
        return time.mktime(time.strptime(when, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return float("inf")


def ended(slurm: SlurmCluster, job: str, out: Path) -> bool:
    """Whether the job ended with its program (its last words in ``out``); a requeued
    job is hurried meanwhile. (A state alone is not enough: an ``scontrol`` that fails
    on a busy controller reads as a forgotten job.)"""
    state = hurried(slurm, job)
    said = out.read_text() if out.is_file() else ""
    return state in ("COMPLETED", "FAILED", "CANCELLED", "") and "✓ stopped: every node" in said


def take_node(slurm: SlurmCluster, node: str) -> str:
    """Submit a short job of the ``urgent`` partition that needs all of ``node``; its id."""
    done = slurm.run(
        "sbatch", "--parsable", "-p", "urgent", "-w", node, "--exclusive", "-J", "urgent",
        "-o", "/dev/null", "--wrap", "true",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def node_taken(slurm: SlurmCluster, urgent: str) -> None:
    """Wait for the urgent job to have had its node: the preempted job may start again
    (``hurried``) only then, or it would be preempted again as it starts."""
    wait_until(
        lambda: slurm.job_state(urgent) != "PENDING", STEP_S, what=f"urgent job {urgent} to run"
    )
