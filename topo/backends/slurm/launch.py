"""``topo run FILE -b slurm`` outside an allocation: the run is submitted as a job that
runs topo's launcher (``topo run FILE -b slurm --run-dir RUN_DIR`` inside it), in a run
directory made first. The script is the one ``topo plan -b slurm`` shows, with the job's
output in ``RUN_DIR/slurm-<job>.out``; it is kept as ``RUN_DIR/job.sh``.

Inside an allocation (``SLURM_JOB_ID`` set) there is nothing to submit: ``submission``
gives None and the run lives in the job as it is.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from topo.backends.slurm.job import JobState, cancel, job_state
from topo.backends.slurm.options import SlurmOptions
from topo.backends.slurm.partition import read_cluster
from topo.backends.slurm.request import Request, plan_request
from topo.backends.slurm.script import render
from topo.backends.slurm.submit import submit
from topo.ir import Program

SCRIPT_FILE = "job.sh"  # in the run directory: the script as it was submitted


def output_name(job: str) -> str:
    """The job's output file in the run directory."""
    return f"slurm-{job}.out"


def submission(**options: Any) -> Submission | None:
    """How ``topo run -b slurm`` submits its run from here; None inside an allocation."""
    if os.environ.get("SLURM_JOB_ID"):
        return None
    return Submission(SlurmOptions.of(**options))


class Submission:
    """One run to submit as a job, under the backend's options."""

    def __init__(self, options: SlurmOptions, env: Mapping[str, str] | None = None) -> None:
        self.options = options.checked()
        self.env = env

    def request(self, program: Program) -> Request:
        """The job for ``program``; a ``TopoError`` for what the partition cannot hold."""
        cluster = read_cluster(self.env)
        return plan_request(program, cluster.partition(self.options.partition), self.options)

    def launcher(
        self,
        file: Path | None,
        params: Sequence[str],
        run_dir: Path,
        run_args: Sequence[str] = (),
    ) -> list[str]:
        """``python -m topo run [FILE] -b slurm --run-dir RUN_DIR --no-live [RUN_ARGS]
        [--warning-s S] -p ...``: the launcher inside the job, with the run options
        (``run_args``: ``--grace 10``, ``--resume RUN --snapshot 3``; no FILE with
        ``--from`` or ``--resume``) and parameters given here (the job's own options are
        its ``#SBATCH`` lines)."""
        argv = [sys.executable, "-m", "topo", "run"]
        argv += [] if file is None else [str(file.resolve())]
        argv += ["-b", "slurm"]
        argv += ["--run-dir", str(run_dir), "--no-live", *run_args, *self.options.inside_flags()]
        for param in params:
            argv += ["-p", param]
        return argv

    def submit(
        self,
        program: Program,
        file: Path | None,
        params: Sequence[str],
        run_dir: Path,
        run_args: Sequence[str] = (),
    ) -> str:
        """Make ``run_dir``, write the job's script there and submit it: the job id. A
        ``TopoError`` (a request the partition cannot hold, sbatch's refusal in its words)
        leaves no job and no run directory this made."""
        request = self.request(program)  # refused before anything is made
        run_dir = run_dir.resolve()
        made = not run_dir.exists()
        run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            script = render(
                program,
                request,
                self.launcher(file, params, run_dir, run_args),
                output=str(run_dir / output_name("%j")),
                workdir=os.getcwd(),
            )
            path = run_dir / SCRIPT_FILE
            path.write_text(script, encoding="utf-8")
            return submit(script, env=self.env)
        except BaseException:
            if made:
                shutil.rmtree(run_dir, ignore_errors=True)
            else:
                (run_dir / SCRIPT_FILE).unlink(missing_ok=True)
            raise

    def state(self, job: str) -> JobState:
        """The job now."""
        return job_state(job, self.env)

    def stop(self, job: str, signal: str = "INT") -> None:
        """Ask the run to stop as Ctrl-C (``INT``) or SIGTERM stops it: the signal to the
        launcher, the batch shell; a job that has not started is cancelled."""
        if self.state(job).state in ("PENDING", "REQUEUED", "CONFIGURING", "SUSPENDED"):
            cancel(job, self.env)
        else:
            cancel(job, self.env, signal=signal)

    def kill(self, job: str) -> None:
        """End the job now (``scancel``)."""
        cancel(job, self.env)
