"""A plug-in backend written from the outside, as a user would (docs/extending.md): each
executable is a fresh ``python`` subprocess of the launcher -- no fork server, no agent.
It passes the conformance suite (tests/backends/test_conformance.py).

The child reads what it is (the program, which executable, the registry's public part
and its own grant) from its stdin -- nothing secret on its command line -- and runs the
shared set-up of every process backend (``topo.backends.child.child_main``): output to
the run directory, resources, the memory limit, the registry, the nodes, their status.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
from pathlib import Path

from topo.backends.base import Backend, ExecutableRunner, JobContext, Sink
from topo.backends.grants import exe_grant
from topo.ir import Program, dumps
from topo.rundir.layout import exe_output_path

HERE = str(Path(__file__).resolve().parent)


class _Child(ExecutableRunner):
    """One attempt: a subprocess, in a process group of its own once it runs."""

    def __init__(self, exe: str, attempt: int, proc: subprocess.Popen[bytes]) -> None:
        self.exe, self.attempt, self.pid, self.proc = exe, attempt, proc.pid, proc

    def kill(self) -> None:
        for kill, target in ((os.killpg, self.pid), (os.kill, self.pid)):
            try:
                kill(target, signal.SIGKILL)  # its group: the processes its nodes started too
                return
            except ProcessLookupError:
                continue  # not its own group yet (or already gone)


class Subprocesses(Backend):
    """Every executable a ``python`` subprocess of the launcher."""

    name = "subprocs"
    can_update = True  # a changed program only changes what the next child is told

    def open(self, job: JobContext, sink: Sink) -> None:
        self.job, self.sink = job, sink
        self.children: list[_Child] = []

    def update(self, program: Program) -> None:
        from dataclasses import replace

        self.job = replace(self.job, program=program)

    def start(self, exe: str, attempt: int) -> ExecutableRunner:
        job = self.job
        what = {
            "program": dumps(job.program),
            "exe": exe,
            "attempt": attempt,
            "registry": vars(job.registry.public()),
            "grant": exe_grant(job, exe).to_json(),
            "run_dir": str(job.run_dir),
            "log_limit": job.options.log_limit,
            "disable_run": job.options.disable_run,
            "sys_path": [os.getcwd(), *sys.path],
            "launcher": os.getpid(),
        }
        output = exe_output_path(job.run_dir, job.program.executable_index[exe])
        output.parent.mkdir(parents=True, exist_ok=True)
        with output.open("ab") as early:  # what the child says before it takes its fds
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    f"import sys; sys.path.insert(0, {HERE!r}); "
                    "import bk_subprocs; bk_subprocs.child()",
                ],
                stdin=subprocess.PIPE,
                stdout=early,
                stderr=early,
            )
        assert proc.stdin is not None
        proc.stdin.write(pickle.dumps(what))
        proc.stdin.close()
        child = _Child(exe, attempt, proc)
        self.children.append(child)
        threading.Thread(target=self._watch, args=(child,), daemon=True).start()
        return child

    def _watch(self, child: _Child) -> None:
        code = child.proc.wait()  # -N when killed by signal N, as the sink wants it
        self.sink.exited(child.exe, child.attempt, child.pid, code)

    def close(self) -> None:
        for child in self.children:
            if child.proc.poll() is None:
                child.kill()
            child.proc.wait()


def child() -> None:
    """A child's entry: read what it is from stdin, then topo's shared process set-up."""
    from topo.backends.child import ChildOutput, ChildSpec, child_main
    from topo.ir import loads
    from topo.runtime import Grant, RegistryInfo

    what = pickle.loads(sys.stdin.buffer.read())
    sys.path[:0] = [p for p in what["sys_path"] if p not in sys.path]
    program = loads(what["program"])
    output = ChildOutput.in_run_dir(Path(what["run_dir"]), program, what["exe"], what["log_limit"])
    spec = ChildSpec(
        program,
        what["exe"],
        what["attempt"],
        RegistryInfo(**what["registry"]),
        output,
        what["disable_run"],
        grant=Grant.from_json(what["grant"]),
    )
    launcher = what["launcher"]
    child_main(spec, lambda: os.getppid() == launcher)
