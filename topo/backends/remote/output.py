"""Where what a remote backend's hosts send lands in the launcher's run directory: the
output of nodes and executables appended to their log files (rotated past the run's
limit), across program changes, and each host's agent log (``agents/<host>.log``: the
agent's and its fork server's own output, and the launcher's notes about it)."""

from __future__ import annotations

from pathlib import Path

from topo.backends.base import JobContext
from topo.backends.logs import append_output
from topo.ir import Program
from topo.rundir.layout import AGENTS_DIR, agent_log_path


class RunOutput:
    """One run's directory as remote output's destination."""

    def __init__(self, job: JobContext) -> None:
        self.job = job
        self._previous: Program | None = None  # the program before the last change
        (job.run_dir / AGENTS_DIR).mkdir(exist_ok=True, mode=0o700)

    def changed(self, job: JobContext) -> None:
        """``topo apply`` changed the program into ``job.program``."""
        self._previous, self.job = self.job.program, job

    def append(self, label: str, text: str) -> None:
        """Output into the run directory's log file of a node or executable (of the
        program before a change, for one the change removed)."""
        job = self.job
        program = job.program
        known = label in program.node_index or label in program.executable_index
        if not known and self._previous is not None:
            program = self._previous
        append_output(job.run_dir, program, label, text, job.options.log_limit)

    def agent_log(self, label: str) -> Path:
        """The path of the agent log ``label`` (``agents/<label>.log``)."""
        return agent_log_path(self.job.run_dir, label)

    def agent_output(self, label: str, text: str) -> None:
        """``text`` appended to the agent log ``label``."""
        with open(self.agent_log(label), "a") as log:
            log.write(text)
