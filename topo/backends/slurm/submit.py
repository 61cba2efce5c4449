"""Submitting a job script with ``sbatch``: its job id, or sbatch's refusal in Slurm's
own words. Standard library only."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

from topo.backends.slurm.partition import COMMAND_S, no_slurm
from topo.diagnostics import TopoError


class SubmitError(TopoError):
    """sbatch did not take the job (its message is the diagnostic's)."""


def submit(script: str, *, cwd: Path | None = None, env: Mapping[str, str] | None = None) -> str:
    """Submit ``script`` (given on sbatch's standard input) and return the job id; a
    ``SubmitError`` with sbatch's own message when it refuses the job or Slurm is not
    installed, and nothing submitted."""
    why = no_slurm()
    if why is not None:
        raise SubmitError.one(why, hint="run topo on a login node of the cluster")
    try:
        done = subprocess.run(
            ["sbatch", "--parsable"],
            input=script,
            capture_output=True,
            text=True,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            timeout=COMMAND_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        # a job may have been made: sbatch's answer is lost, so say what to look at
        raise SubmitError.one(
            f"sbatch did not answer in {COMMAND_S:.0f} s (is slurmctld up?)",
            hint="squeue --me shows whether the job was submitted",
        ) from None
    said = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    if done.returncode != 0:
        words = "; ".join(_unprefixed(line) for line in said) or f"exit status {done.returncode}"
        raise SubmitError.one(f"sbatch refused the job: {words}")
    found = re.match(r"\s*(\d+)", done.stdout)
    if found is None:
        raise SubmitError.one(
            "sbatch gave no job id (it said: "
            f"{done.stdout.strip() or '; '.join(said) or 'nothing'})"
        )
    return found.group(1)


def _unprefixed(line: str) -> str:
    """``sbatch: error: Batch job submission failed: X`` as ``Batch job submission
    failed: X`` (Slurm's words without the program's prefix)."""
    return re.sub(r"^sbatch:\s*(error:\s*)?", "", line)
