"""The ``threads`` backend: every executable as threads of the launcher process.

For tests and debuggers. Nodes still talk through the real RPC layer and the
real registry; their output is routed to their log files. Threads cannot be
killed: a node that ignores the stop event past the grace period is
abandoned (its thread is a daemon) and reported as killed.
"""

from __future__ import annotations

import os
import threading
from typing import TextIO

from topo.backends.base import Backend, ExecutableRunner, JobContext, Sink
from topo.backends.logs import log_path, route_node_output, unroute_node_output
from topo.backends.worker import run_executable
from topo.runtime import NodeServer, ProgramContext, connect_program


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

    def kill(self) -> None:
        # Threads cannot be killed: stop serving (so the node leaves the address book and
        # its port closes), abandon the threads, and let the launcher go on.
        for server in list(self.servers):
            server.close(timeout=1.0)
        self.report_exit(-9)


class ThreadsBackend(Backend):
    """Executables as thread sets in this process."""

    name = "threads"

    def __init__(self) -> None:
        self._job: JobContext | None = None
        self._sink: Sink | None = None
        self._context: ProgramContext | None = None
        self._files: dict[str, TextIO] = {}

    def open(self, job: JobContext, sink: Sink) -> None:
        self._job, self._sink = job, sink
        self._context = connect_program(job.registry)
        paths = {n.id: log_path(job.run_dir, n.id) for n in job.program.nodes}
        self._files = route_node_output(job.registry.program_id, paths)

    def start(self, exe: str, attempt: int) -> ExecutableRunner:
        job, sink, context = self._job, self._sink, self._context
        assert job is not None and sink is not None and context is not None
        runner = _ThreadRunner(exe, attempt, sink)

        def report(kind: str, node: str, text: str) -> None:
            sink.node_status(kind, node, exe, attempt, runner.pid, text)

        def main() -> None:
            code = 1
            try:
                code = run_executable(job.program, exe, context, report,
                                      job.options.disable_run, runner.servers)
            finally:
                runner.report_exit(code)

        threading.Thread(target=main, name=f"topo-exe-{exe}", daemon=True).start()
        return runner

    def close(self) -> None:
        if self._context is not None:
            self._context.address_book.close()
        if self._job is not None:
            unroute_node_output(self._job.registry.program_id, self._files)
        self._files = {}
