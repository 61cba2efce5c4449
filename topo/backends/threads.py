"""The ``threads`` backend: every executable as threads of the launcher process.

For tests and debuggers. Nodes still talk through the real RPC layer and the
real registry (node status goes through its ``report`` too); their output is
routed to their log files. Threads cannot be killed: a node that ignores the
stop event past the grace period is abandoned (its thread is a daemon) and
reported as killed. Group ``resources`` that would change the launcher process
itself (env vars, working dir, CPU or GPU visibility) are refused by
``check``; a group ``memory`` limit cannot be enforced per node and is a warning.

Processes the nodes start are children of the launcher process; none outlives
what started it (see ``topo.backends.guard``):

* a node attempt's processes end with the attempt (SIGKILL, as on procs): the
  processes its node threads started are noted each time a node reports (ready,
  finished, failed), while those threads still live, and when the attempt is killed;
* at close the backend also ends (SIGTERM, then SIGKILL after ``CHILD_GRACE_S``) the
  launcher's child processes that threads born during the run started, with their
  descendants (the fork server of a procs run launched meanwhile from the same process
  excepted). Threads that were there when the run opened belong to the program that
  launched it (a test runner, a notebook): the processes they start are left alone;
* if the launcher dies (``kill -9``, a node's ``os._exit``) a guard process kills every
  process the run's threads started below it and removes the socket directory.

Limits: a process started by a thread other than a node's own (an RPC handler, a
thread the node made) cannot be told from another node's and ends at close, not with
its node; one started less than ``guard.SCAN_INTERVAL_S`` before the launcher is killed,
or before the thread that started it ended, and that no node thread reported, may
escape the guard or the close (the processes a node thread started are told to the
guard before its report goes on); one a node detached by a double fork (its parent
exited) is re-parented away from the launcher and escapes all of it.
Run such code with ``--backend procs``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from types import MappingProxyType
from typing import TextIO

from topo.backends import guard
from topo.backends.base import (
    Backend,
    ExecutableRunner,
    JobContext,
    Sink,
    memory_not_enforced,
)
from topo.backends.child import registry_reporter
from topo.backends.crash import CrashRecord
from topo.backends.grants import exe_grant, launcher_grant
from topo.backends.logs import output_gone, route_node_output, unroute_node_output
from topo.backends.worker import run_executable
from topo.diagnostics import Diagnostic
from topo.ir import Program
from topo.rundir.layout import log_path
from topo.runtime import NodeServer, ProgramContext, RegistryClient, connect_program
from topo.runtime.context import current_node_info

# resources field -> what honouring it would do to the launcher process
_PROCESS_WIDE = {
    "env": "set environment variables of the launcher",
    "workdir": "change the launcher's working directory",
    "cpus": "pin the launcher to those CPUs",
    "gpus": "set CUDA_VISIBLE_DEVICES for the launcher",
    "accelerators": "give the launcher's process the accelerators",
}
CHILD_GRACE_S = 1.0  # SIGTERM -> SIGKILL for the processes nodes left behind at close


class _ThreadRunner(ExecutableRunner):
    def __init__(
        self,
        exe: str,
        attempt: int,
        sink: Sink,
        noted: Callable[[set[guard.Proc]], None] = lambda procs: None,
        log: Callable[[str, str], None] = lambda node, text: None,
    ) -> None:
        self.exe = exe
        self._log = log  # (node, text): append to the node's log
        self.attempt = attempt
        self.pid = os.getpid()
        self._sink = sink
        self._lock = threading.Lock()
        self._ended = False
        self.servers: list[NodeServer] = []
        self._threads: dict[int, threading.Thread] = {}  # the node threads seen, by native id
        self.procs: set[guard.Proc] = set()  # processes its node threads started
        self._noted = noted  # tell the guard of processes its node threads started

    def note_thread(self) -> None:
        """The calling thread is one of this attempt's nodes: note what it started."""
        me = threading.current_thread()
        with self._lock:
            if me.native_id is not None:
                self._threads[me.native_id] = me
        new = self._note()
        if new:
            self._noted(new)

    def _note(self) -> set[guard.Proc]:
        """Note what the live node threads started; the processes not noted before."""
        with self._lock:
            threads = [(tid, t) for tid, t in self._threads.items() if t.is_alive()]
        found = set().union(*(guard.thread_tree(tid) for tid, _t in threads))
        with self._lock:
            new = found - self.procs
            self.procs |= found
        return new

    def _end_procs(self) -> None:
        """The attempt ended: kill the processes its nodes started (and reap them)."""
        self._note()
        with self._lock:
            procs, self.procs = self.procs, set()
        guard.reap(guard.kill_procs(procs))

    def report_exit(self, code: int) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
        self._end_procs()
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
        text = "\n".join(out)
        if text:  # in its log too, where a stop's warning says it is (as on procs)
            self._log(node, text)
        return text

    def kill(self) -> None:
        # Threads cannot be killed: stop serving (so the node leaves the address book and
        # its port closes), abandon the threads (their processes are killed), and let the
        # launcher go on.
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
            # (auto is a wish: here the nodes run as the launcher's process does)
            "accelerators": res.accelerators is not None and res.accelerators.kind != "auto",
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
    cannot = MappingProxyType(
        {
            "kill": "its executables are threads of the launcher's process: none ends alone",
            "memory": "its nodes share the launcher's process, so no group's memory is its own",
            "devices": "its nodes share the launcher's process: it sees what the launcher sees",
        }
    )

    def __init__(self) -> None:
        self._job: JobContext | None = None
        self._sink: Sink | None = None
        # Executable id -> its context, with its own grant: the nodes are wired as on
        # procs (though they share the launcher's memory) and call the registry as their
        # executable; one watcher (the launcher's client) hears the stop for them all.
        self._contexts: dict[str, ProgramContext] = {}
        self._contexts_lock = threading.Lock()
        self._book: RegistryClient | None = None
        self._files: dict[str, TextIO] = {}
        self._crash: CrashRecord | None = None
        self._children_before: set[guard.Proc] = set()
        self._host_tids: set[int] = set()  # threads of the program that launched the run
        self._seen: set[guard.Proc] = set()  # processes the run's threads started
        self._seen_lock = threading.Lock()
        self._sampling = threading.Event()  # set: the sampler stops
        self._guard: subprocess.Popen[bytes] | None = None
        self._guard_lock = threading.Lock()  # node threads poke it, close says goodbye

    def check(self, program: Program) -> list[Diagnostic]:
        shared = "its nodes share the launcher process"
        return process_wide_resources(program, self.name) + memory_not_enforced(
            program, self.name, shared
        )

    def _write_log(self, node: str, text: str) -> None:
        """Append ``text`` to ``node``'s log file (from any thread)."""
        f = self._files.get(node)
        if f is not None:
            with contextlib.suppress(Exception):
                f.write(text if text.endswith("\n") else text + "\n")
                f.flush()

    def open(self, job: JobContext, sink: Sink) -> None:
        self._job, self._sink = job, sink
        self._children_before = _children()
        self._host_tids = guard.tasks(os.getpid())
        self._guard = guard.start_guard(job.registry.ipc_dir, self._host_tids)
        self._sampling.clear()
        threading.Thread(target=self._sample, name="topo-threads-procs", daemon=True).start()
        self._contexts = {}
        paths = {n.id: log_path(job.run_dir, n.id) for n in job.program.nodes}
        self._files = route_node_output(job.registry.program_id, paths, job.options.log_limit)
        # Nodes share this process: leave a record if one of them ends it, and end the
        # processes they started (the guard would too, a moment later).
        self._crash = CrashRecord(
            job.run_dir, _node_of_thread, job.registry.ipc_dir, self._kill_new_processes
        )
        self._crash.install()

    def helper_pids(self) -> list[int]:
        return [] if self._guard is None else [self._guard.pid]

    def start(self, exe: str, attempt: int) -> ExecutableRunner:
        job, sink = self._job, self._sink
        assert job is not None and sink is not None
        with self._contexts_lock:
            if self._book is None:
                self._book = RegistryClient(job.registry, grant=launcher_grant(job))
            context = self._contexts.get(exe)
            grant = exe_grant(job, exe)
            ended = context is not None and context.stop_event.is_set()
            if context is not None and (
                context.grant != grant or (ended and not self._book.stop_event.is_set())
            ):
                # topo apply ended this executable's nodes, or changed what they may call,
                # and starts it again
                context.address_book.close()
                context = None
            if context is None:
                book = RegistryClient(job.registry, grant=grant, stop_from=self._book)
                context = self._contexts[exe] = connect_program(job.registry, grant, book)
        runner = _ThreadRunner(exe, attempt, sink, self._poke_guard, self._write_log)
        to_launcher = registry_reporter(context, exe, attempt, runner.pid)

        def report(kind: str, node: str, text: str) -> None:
            runner.note_thread()  # called in the node's thread, which is still alive
            if output_gone():  # a thread abandoned past its run's end: no launcher listens
                return  # (asking its registry, which is gone, would hold the thread 30 s)
            to_launcher(kind, node, text)

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

    can_update = True

    def update(self, program: Program) -> None:
        """Executables of ``program`` start from now on; new nodes' output is routed to
        their log files."""
        from dataclasses import replace

        job = self._job
        assert job is not None
        known = set(self._files)
        paths = {n.id: log_path(job.run_dir, n.id) for n in program.nodes if n.id not in known}
        if paths:
            added = route_node_output(
                job.registry.program_id, paths, job.options.log_limit, more=True
            )
            self._files.update(added)
        with self._contexts_lock:
            self._job = replace(job, program=program)

    def _poke_guard(self, procs: set[guard.Proc]) -> None:
        """Tell the guard of processes a node thread started (before its report goes on)."""
        if self._guard is not None:
            with self._guard_lock:
                guard.note(self._guard, procs)

    def _new_processes(self) -> set[guard.Proc]:
        """The processes the run's threads started since ``open`` (helpers excepted): seen
        now, or by the sampler before the thread that started them ended (its children
        then pass to the launcher's main thread, one of the host's)."""
        now = guard.new_processes(self._children_before, self._host_tids)
        with self._seen_lock:
            self._seen = guard.live(self._seen) | now
            return set(self._seen)

    def _sample(self) -> None:
        """Note, every ``guard.SCAN_INTERVAL_S``, the processes the run's threads started."""
        while not self._sampling.wait(guard.SCAN_INTERVAL_S):
            self._new_processes()

    def _kill_new_processes(self) -> None:
        guard.kill_procs(self._new_processes())

    def close(self) -> None:
        if self._crash is not None:
            self._crash.uninstall()
            self._crash = None
        self._sampling.set()
        end_processes(self._new_processes())
        if self._guard is not None:
            with self._guard_lock:
                guard.stop_guard(self._guard)
        with self._contexts_lock:
            book, self._book, contexts, self._contexts = self._book, None, self._contexts, {}
        for context in contexts.values():  # a thread abandoned past the grace may yet listen
            with contextlib.suppress(Exception):
                context.stop_event.set()
        if book is not None:
            book.close()
        if self._job is not None:
            unroute_node_output(self._job.registry.program_id, self._files)
        self._files = {}


def _children() -> set[guard.Proc]:
    """This process's live children (before a run: the ones its nodes did not start)."""
    found = ((pid, guard.start_time(pid)) for pid in guard.children(os.getpid()))
    return {(pid, t) for pid, t in found if t is not None}


def end_processes(procs: set[guard.Proc], grace: float = CHILD_GRACE_S) -> list[int]:
    """SIGTERM ``procs`` (those still the same process) and their descendants, SIGKILL
    what is left after ``grace`` seconds, reap them; their pids."""
    targets = guard.tree(pid for pid, _t in guard.live(procs))
    pids = sorted(pid for pid, _t in targets)
    for pid, t in targets:
        if guard.start_time(pid) == t:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + grace
    while guard.live(targets) and time.monotonic() < end:
        guard.reap(pids, timeout=0)
        time.sleep(0.02)
    guard.reap(guard.kill_procs(guard.live(targets)))
    guard.reap(pids, timeout=0)
    return pids
