"""Test-only backends: the seams a new backend fills in, on top of threads and procs."""

from __future__ import annotations

from topo.backends.base import ExecutableRunner, JobContext, LineSink, LogSource, Network
from topo.backends.procs import ProcsBackend
from topo.backends.tail import LogTailer
from topo.backends.threads import ThreadsBackend
from topo.rundir.layout import log_files

CURVE = Network(bind_host="127.0.0.1", advertise_host="127.0.0.1", mechanism="curve")


class CurveThreads(ThreadsBackend):
    """threads, asking for a CURVE (encrypted) registry as a cross-host backend would."""

    name = "curve-threads"

    def network(self) -> Network:
        return CURVE


class CurveProcs(ProcsBackend):
    """procs, asking for a CURVE registry: the forked children must speak CURVE too."""

    name = "curve-procs"

    def network(self) -> Network:
        return CURVE


class RemoteLogs(ThreadsBackend):
    """threads whose log lines come "from elsewhere": every line gets a host prefix, as
    an SSH backend streaming them would add."""

    name = "remote-logs"

    def log_source(self, job: JobContext, emit: LineSink) -> LogSource:
        def prefixed(label: str, line: str) -> None:
            emit(label, f"[host-a] {line}")

        program = job.program
        files = log_files(job.run_dir, (n.id for n in program.nodes), program.executables)
        return LogTailer(files, prefixed, limit=job.options.log_limit)


class _Unreported(ExecutableRunner):
    """A threads runner whose kill is never followed by a report of the exit."""

    def __init__(self, inner: ExecutableRunner) -> None:
        self.inner = inner
        self.exe, self.attempt, self.pid = inner.exe, inner.attempt, inner.pid

    def kill(self) -> None:
        pass  # what was to report the exit is gone with the process

    def dump_stacks(self, node: str) -> str:
        return self.inner.dump_stacks(node)


class LosesKilledExits(ThreadsBackend):
    """threads that never report the exit of an executable it was told to kill: what a
    backend that lost the process with whatever watched it (a dead host or fork server)
    looks like to the supervisor."""

    name = "loses-killed-exits"

    def start(self, exe: str, attempt: int) -> ExecutableRunner:
        return _Unreported(super().start(exe, attempt))
