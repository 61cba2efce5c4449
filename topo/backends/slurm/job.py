"""A submitted job as Slurm sees it (``scontrol show job``: its state, why it waits, its
exit code) and ending it (``scancel``). Standard library only."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from topo.backends.slurm.partition import COMMAND_S, fields, no_slurm
from topo.diagnostics import TopoError

# states a job does not leave (a preempted job with --requeue goes back to PENDING)
ENDED = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
    }
)


@dataclass(frozen=True)
class JobState:
    """A job's state (``PENDING``, ``RUNNING``, ``COMPLETED`` ...; "" once Slurm no longer
    knows the job), why it is in it (``Resources``, ``Priority``; "" for none), and the
    batch script's exit status once it ended."""

    state: str
    reason: str = ""
    exit_code: int | None = None

    @property
    def ended(self) -> bool:
        return self.state in ENDED or self.state == ""


def _run(args: list[str], env: Mapping[str, str] | None) -> subprocess.CompletedProcess[str]:
    why = no_slurm()
    if why is not None:
        raise TopoError.one(why)
    try:
        return subprocess.run(
            args,
            capture_output=True,
            text=True,
            timeout=COMMAND_S,
            env=dict(env) if env is not None else None,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise TopoError.one(
            f"{' '.join(args[:3])} did not answer in {COMMAND_S:.0f} s (is slurmctld up?)"
        ) from None


def parse_job(text: str) -> JobState:
    """The state in ``scontrol show job -o JOB``'s text (of a heterogeneous job, its
    first component's line: the batch script runs there)."""
    first = next((line for line in text.splitlines() if line.startswith("JobId=")), "")
    record = fields(first)
    reason = record.get("Reason", "")
    code = re.match(r"(\d+):(\d+)", record.get("ExitCode", ""))
    state = record.get("JobState", "")
    return JobState(
        state,
        "" if reason in ("None", "(null)") else reason,
        int(code.group(1)) if code and state in ENDED else None,
    )


def job_state(job: str, env: Mapping[str, str] | None = None) -> JobState:
    """Job ``job`` now; ``JobState("")`` when Slurm no longer knows it (an ended job is
    forgotten after the cluster's MinJobAge)."""
    done = _run(["scontrol", "show", "job", "-o", job], env)
    if done.returncode != 0:
        if "Invalid job id" in done.stderr:
            return JobState("")
        said = "; ".join(line.strip() for line in done.stderr.splitlines() if line.strip())
        raise TopoError.one(f"scontrol show job {job} failed: {said}")
    return parse_job(done.stdout)


def cancel(
    job: str,
    env: Mapping[str, str] | None = None,
    signal: str | None = None,
) -> None:
    """``scancel JOB``: end the job (its steps get SIGTERM, then SIGKILL after the
    cluster's KillWait); with ``signal``: only send it to the batch shell (topo's
    launcher), which then stops the run itself. A job already gone is no error."""
    args = ["scancel"]
    if signal is not None:
        args += ["--batch", f"--signal={signal}"]
    done = _run([*args, job], env)
    gone = ("Invalid job id", "already completing or completed")
    if done.returncode != 0 and not any(g in done.stderr for g in gone):
        said = "; ".join(line.strip() for line in done.stderr.splitlines() if line.strip())
        raise TopoError.one(f"scancel {job} failed: {said}")
