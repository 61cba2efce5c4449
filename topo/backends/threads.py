"""The ``threads`` backend: every executable as threads of the launcher process.

For tests and debuggers. Nodes still talk through the real RPC layer and the
real registry (node status goes through its ``report`` too); their output is
routed to their log files. Threads cannot be killed: a node that ignores the
stop event past the grace period is abandoned (its thread is a daemon) and
reported as killed. Group ``resources`` that would change the launcher process
itself (env vars, working dir, CPU or GPU visibility) are refused by ``check``.

Processes the nodes start are children of the launcher process, so at close
the backend ends (SIGTERM, then SIGKILL after ``CHILD_GRACE_S``) the launcher's
child processes that appeared after it opened, with their descendants (the fork
server of a procs run launched meanwhile from the same process excepted). It
cannot tell whose they are: a process the launcher's own code started while
the program ran (or a node of another threads run in the same process) ends
too, and a node's processes live until the whole program stops, not until its
node ends.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
from typing import TextIO

import psutil

from topo.backends import forkserver
from topo.backends.base import Backend, ExecutableRunner, JobContext, Sink
from topo.backends.child import registry_reporter
from topo.backends.crash import CrashRecord
from topo.backends.logs import log_path, route_node_output, unroute_node_output
from topo.backends.worker import run_executable
from topo.diagnostics import Diagnostic
from topo.ir import Program
from topo.runtime import NodeServer, ProgramContext, connect_program
from topo.runtime.context import current_node_info

# resources field -> what honouring it would do to the launcher process
_PROCESS_WIDE = {
    "env": "set environment variables of the launcher",
    "workdir": "change the launcher's working directory",
    "cpus": "pin the launcher to those CPUs",
    "gpus": "set CUDA_VISIBLE_DEVICES for the launcher",
}
CHILD_GRACE_S = 1.0  # SIGTERM -> SIGKILL for the processes nodes left behind at close


class _ThreadRunner(ExecutableRunner):
    def __init__(self, exe: str, attempt: int, sink: Sink) -> None:
        self.exe = exe
        self.attempt = attempt
        self.pid = os.getpid()
        self._sink = sink
        self._lock = threading.Lock()
        self._ended = False
        self.servers: list[NodeServer] = []

    def report_exit(self, code: int) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
        self._sink.exited(self.exe, self.attempt, self.pid, code)

    def dump_stacks(self, node: str) -> str:
        names = {t.ident: t.name for t in threading.enumerate()}
        frames = sys._current_frames()
        out = []
        for ident, name in names.items():
            if name == f"topo-node-{node}" and ident in frames:
                out.append(
                    f"Thread {name} (most recent call last):\n"
                    + "".join(traceback.format_stack(frames[ident]))
                )
        return "\n".join(out)

    def kill(self) -> None:
        # Threads cannot be killed: stop serving (so the node leaves the address book and
        # its port closes), abandon the threads, and let the launcher go on.
        for server in list(self.servers):
            server.close(timeout=1.0)
        self.report_exit(-9)


def process_wide_resources(program: Program, backend: str) -> list[Diagnostic]:
    """One error per enabled group whose ``resources`` act on the whole process, which
    a backend running nodes inside the launcher cannot honour. ``host_labels`` are
    accepted: on one host every label placement is that host."""
    out = []
    for g in program.groups:
        if not g.enabled:
            continue
        res = g.resources
        set_ = {
            "env": bool(res.env),
            "workdir": res.workdir is not None,
            "cpus": bool(res.cpus),
            "gpus": res.gpus is not None,
        }
        used = [f for f in _PROCESS_WIDE if set_[f]]
        if used:
            what = "; ".join(_PROCESS_WIDE[f] for f in used)
            out.append(
                Diagnostic(
                    f"group {g.name!r} sets resources {', '.join(used)}, which the {backend} "
                    f"backend cannot honour: its nodes run inside the launcher process, so it "
                    f"would {what}",
                    g.origin,
                    hint="run it with --backend procs (one process per executable), or drop "
                    "those resources",
                )
            )
    return out


def _node_of_thread() -> str | None:
    node = current_node_info()
    return None if node is None else node.id


class ThreadsBackend(Backend):
    """Executables as thread sets in this process."""

    name = "threads"

    def __init__(self) -> None:
        self._job: JobContext | None = None
        self._sink: Sink | None = None
        self._context: ProgramContext | None = None
        self._files: dict[str, TextIO] = {}
        self._crash: CrashRecord | None = None
        self._children_before: set[tuple[int, float]] = set()

    def check(self, program: Program) -> list[Diagnostic]:
        return process_wide_resources(program, self.name)

    def open(self, job: JobContext, sink: Sink) -> None:
        self._job, self._sink = job, sink
        self._children_before = _children()
        self._context = connect_program(job.registry)
        paths = {n.id: log_path(job.run_dir, n.id) for n in job.program.nodes}
        self._files = route_node_output(job.registry.program_id, paths, job.options.log_limit)
        # Nodes share this process: leave a record if one of them ends it.
        self._crash = CrashRecord(job.run_dir, _node_of_thread, job.registry.ipc_dir)
        self._crash.install()

    def start(self, exe: str, attempt: int) -> ExecutableRunner:
        job, sink, context = self._job, self._sink, self._context
        assert job is not None and sink is not None and context is not None
        runner = _ThreadRunner(exe, attempt, sink)
        report = registry_reporter(context, exe, attempt, runner.pid)

        def main() -> None:
            code = 1
            try:
                code = run_executable(
                    job.program, exe, context, report, job.options.disable_run, runner.servers
                )
            finally:
                runner.report_exit(code)

        threading.Thread(target=main, name=f"topo-exe-{exe}", daemon=True).start()
        return runner

    def close(self) -> None:
        if self._crash is not None:
            self._crash.uninstall()
            self._crash = None
        end_processes(_children() - self._children_before, self.helper_pids())
        if self._context is not None:
            self._context.address_book.close()
        if self._job is not None:
            unroute_node_output(self._job.registry.program_id, self._files)
        self._files = {}


def _children() -> set[tuple[int, float]]:
    """This process's live children as (pid, create time): a pid alone can be reused.
    The fork servers of procs runs launched from this process are not counted: they are
    another run's helpers, not processes a node started."""
    out = set()
    for pid in forkserver.child_pids():
        try:
            kid = psutil.Process(pid)
            if forkserver.__name__ not in kid.cmdline():
                out.add((pid, kid.create_time()))
        except psutil.Error:
            pass
    return out


def end_processes(
    kids: set[tuple[int, float]], keep: list[int], grace: float = CHILD_GRACE_S
) -> list[int]:
    """SIGTERM the child processes ``kids`` (pid, create time) but ``keep`` and their
    descendants, SIGKILL what is left after ``grace`` seconds, reap them; their pids."""
    procs: dict[int, psutil.Process] = {}
    for pid, created in kids:
        if pid in keep:
            continue
        try:
            kid = psutil.Process(pid)
            if kid.create_time() != created:
                continue
            procs[pid] = kid
            for below in forkserver.child_pids(pid, recursive=True):
                procs[below] = psutil.Process(below)
        except psutil.Error:
            continue
    for proc in procs.values():
        try:
            proc.terminate()
        except psutil.Error:
            pass
    _gone, left = psutil.wait_procs(list(procs.values()), timeout=grace)
    for proc in left:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(left, timeout=grace)
    return sorted(procs)
