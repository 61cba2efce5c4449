"""Supervision: how a run reacts to what happens in it.

One ``Supervisor.step`` reads one report (a node ready / finished / failed, an
executable started or exited), applies the groups' restart policies, fails nodes
stuck starting past their ``ready_timeout_s`` (``deadlines``), and drives a stop:
stop event to every node, the grace period, then kill. The ``Supervisor`` is given the
run's state (``RunState``), the program, the backend and where events go; the
``Launcher`` owns it and calls ``step`` from its thread until the run is over.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from topo.backends.base import Backend, LogSource
from topo.backends.logs import write_marker
from topo.ir import Program
from topo.rundir.layout import log_path
from topo.rundir.pids import process_start
from topo.runtime import RegistryServer
from topo.supervisor import changes
from topo.supervisor.deadlines import check_starting, dump_late_stacks
from topo.supervisor.outcome import ended, failure_cause
from topo.supervisor.phases import PhaseWatch
from topo.supervisor.progress import ProgressWatch
from topo.supervisor.record import StatusRecorder
from topo.supervisor.reports import Emit, Reports
from topo.supervisor.state import ExeStatus, Failure, RunState
from topo.supervisor.stopping import Stop


class Supervisor(Reports):
    """Turns reports into state changes, restarts and the stop of one run.

    Reports (``topo.supervisor.reports``: the ``Sink`` methods, ``request_stop``,
    ``kill``, ``metrics_changed``...) may come from any thread: they are queued.
    Everything else runs on the thread that calls ``start_all`` and then ``step``."""

    def __init__(self, program: Program, backend: Backend, state: RunState, emit: Emit) -> None:
        super().__init__()
        self.program = program
        self.backend = backend
        self.state = state  # its grace_s is the grace period of a stop
        self._emit = emit
        self._run_dir = Path()
        self._registry: RegistryServer | None = None
        self._logs: LogSource | None = None
        self._recorder: StatusRecorder | None = None
        self._stop = Stop(state, emit)
        self._ever_ready: set[str] = set()
        self._marked: set[tuple[str, int]] = set()  # attempts whose start is in the logs
        self._progress = ProgressWatch(self._stall_after)
        self._phases = PhaseWatch(program, self._awaited)

    def _stall_after(self, node: str) -> float:
        """The node's group's ``stall_after_s`` (0, never flagged, for a node leaving)."""
        program = self.program
        return program.group_of(node).stall_after_s if node in program.node_index else 0.0

    def attach(
        self,
        run_dir: Path,
        registry: RegistryServer | None,
        logs: LogSource | None,
        recorder: StatusRecorder | None,
    ) -> None:
        """What the launcher opened for the run: the run directory (log markers), the
        registry (stop channel, address book), the log source (tracebacks) and the
        ``status.json`` recorder (told when something changed)."""
        self._run_dir = run_dir
        self._registry = self._stop.registry = registry
        self._logs = logs
        self._recorder = recorder

    def mark_dirty(self) -> None:
        """Something ``status.json`` shows changed outside a report (call figures)."""
        if self._recorder is not None:
            self._recorder.dirty = True

    # -- the supervisor's thread --------------------------------------------------
    @property
    def stopping(self) -> bool:
        """True once the run is being stopped (its grace, then the kill)."""
        return self._stop.begun

    @property
    def stop_code(self) -> int:
        """The exit code the run ends with: 0 clean stop, 1 a node failed, or the code
        the stop was asked with."""
        return self._stop.code

    def start_all(self) -> None:
        """Start the first attempt of every executable."""
        for exe in self.state.exes.values():
            self._start_exe(exe)

    def _set_nodes(
        self, exe: ExeStatus, state: str, pid: int | None = None, pid_start: int | None = None
    ) -> None:
        for n in exe.nodes:
            st = self.state.nodes[n]
            st.state = state
            st.restarts = exe.restarts
            if pid is not None:
                st.pid, st.pid_start = pid, pid_start

    def _start_exe(self, exe: ExeStatus) -> None:
        exe.attempt += 1
        exe.failure = None
        exe.stuck = ""
        exe.killed_at = None
        exe.restart_at = None
        exe.state = "starting"
        self._set_nodes(exe, "starting")
        now = time.time()
        for n in exe.nodes:
            self.state.nodes[n].started = now
            self.state.nodes[n].busy = None
        exe.runner = self.backend.start(exe.id, exe.attempt)
        if exe.runner.pid:
            self._on_started(exe.id, exe.attempt, exe.runner.pid)
        self._emit("starting", exe=exe.id, message=f"attempt {exe.attempt}")

    def _on_started(self, exe_id: str, attempt: int, pid: int) -> None:
        exe = self.state.exes[exe_id]
        if attempt != exe.attempt:
            return
        pid_start = None  # with the pid, names the process for good (a lost run's cleanup)
        if pid != os.getpid() and self.backend.local_pids:  # threads: the launcher itself
            self.state.all_pids.add(pid)
            self.state.all_pids.update(self.backend.helper_pids())  # e.g. a new fork server
            pid_start = process_start(pid)
        if (exe_id, attempt) not in self._marked:  # procs may report a pid twice
            self._marked.add((exe_id, attempt))
            self._mark(exe, f"attempt {attempt + 1} started (pid {pid})")
        exe.pids.append(pid)
        self._set_nodes(exe, self.state.nodes[exe.nodes[0]].state, pid, pid_start)
        self._emit("started", exe=exe_id, pid=pid)

    def _mark(self, exe: ExeStatus, text: str) -> None:
        """A marker line in the log file of each node of ``exe``."""
        for n in exe.nodes:
            try:
                write_marker(log_path(self._run_dir, n), text)
            except OSError as exc:
                self.state.warnings.append(f"could not write to the log of {n}: {exc}")

    def step(self) -> bool:
        """One round of supervision; True when the run is over."""
        msg = self._next_report(0.05)
        if msg is not None:
            self._handle(msg)
            if self._recorder is not None:
                self._recorder.dirty = True
                self._recorder.urgent = self._recorder.urgent or msg[0] != "metrics"
        registry = self._registry
        if registry is not None and registry.stop_event.is_set() and not self._stop.begun:
            reason, node = registry.stop_reason() or ("stop requested", None)
            self._stop.begin(reason, node)
        now = time.monotonic()
        timeout = self.program.stop.timeout_s
        if not self._stop.begun and timeout and time.time() - self.state.started_at > timeout:
            self._stop.begin(f"the program's stop.timeout_s of {timeout:g}s was reached")
        for exe in list(self.state.exes.values()):
            if exe.restart_at is not None and now >= exe.restart_at and not self._stop.begun:
                self._start_exe(exe)
            if exe.retire_deadline is not None and now >= exe.retire_deadline:
                self._kill_retiring(exe)
        if not self._stop.begun:
            self._check_starting()
            self._check_progress()
        if self._phases.update(self.state.nodes, now) and self._recorder is not None:
            self._recorder.dirty = True  # also while stopping: a node up since has no phase
        if self._recorder is not None:
            self._recorder.tick(now)
        self._stop.tick(now, self.running())
        if self._stop.begun and not self.running():
            return True
        return self._stop.given_up(now)

    def _stop_wanted(self) -> bool:
        """True once a stop began or was asked for (still queued, or by a node)."""
        registry = self._registry
        asked = registry is not None and registry.stop_event.is_set()
        return self._stop.begun or self._stop_asked or asked

    def _awaited(self) -> set[str]:
        """Nodes whose address some caller looked up lately and did not find."""
        return set() if self._registry is None else self._registry.waited_for()

    def running(self) -> list[ExeStatus]:
        """The executables whose current attempt has not reported its exit."""
        return [e for e in self.state.exes.values() if e.runner is not None]

    def _check_starting(self) -> None:
        """Fail the executables with a node stuck starting (``topo.supervisor.deadlines``)."""

        def lost(exe: ExeStatus, why: str) -> None:
            assert exe.runner is not None
            self._on_exited(exe.id, exe.attempt, exe.runner.pid, -9, why)

        check_starting(self.program, self.state, lost)

    def _check_progress(self) -> None:
        """Flag running nodes whose progress stopped (a warning line once per stall) and
        say when it comes back; ``stalled_s`` keeps status.json current meanwhile."""
        nodes = self.state.nodes
        for node, seconds in self._progress.check(nodes, time.time()):
            message = self._progress.describe(node, seconds)
            if seconds >= 0:
                self.state.warnings.append(f"node {node} stalled: {message}")
            self._emit("stalled", node, nodes[node].exe, message=message, stalled_s=seconds)
        if self._recorder is not None and any(st.stalled_s for st in nodes.values()):
            self._recorder.dirty = True  # how long, kept current

    def _handle(self, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        if kind == "node":
            self._on_node(*msg[1:])
        elif kind == "exited":
            self._on_exited(*msg[1:])
        elif kind == "started":
            self._on_started(*msg[1:])
        elif kind == "stop":
            self._stop.begin(msg[1], msg[2], code=msg[3])
        elif kind == "metrics":  # new figures (already stored): progress; tell the view
            for node in msg[1]:
                self._progress.progressed(node, time.time())
                self._emit("metrics", node)
        elif kind == "backend_failed":
            self._on_backend_failed(msg[1])
        elif kind == "kill":
            self._stop.begin("killed by the launcher", code=self._stop.code or 130)
            self._stop.kill(self.running())
        elif kind == "call":
            _, fn, future = msg
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)
        elif kind == "restart":
            self._on_restart(msg[1], msg[2])

    def _on_restart(self, node: str, by: str) -> None:
        """A restart asked from outside: the attempt is killed, its exit starts the next."""
        st = self.state.nodes.get(node)
        if st is None or self._stop.begun:
            return
        exe = self.state.exes[st.exe]
        if exe.leaving or exe.retiring:  # topo apply is ending it
            return
        if exe.runner is not None:
            exe.asked = by
            try:
                exe.runner.kill()
            except Exception as exc:
                exe.asked = ""
                self.state.warnings.append(f"could not restart {exe.id}: {exc!r}")
        elif exe.restart_at is not None:  # already waiting out a backoff: now
            exe.restart_at = time.monotonic()

    def _on_node(
        self, kind: str, node: str, exe_id: str, attempt: int, pid: int, text: str
    ) -> None:
        exe = self.state.exes.get(exe_id)
        if exe is None or attempt != exe.attempt or node not in self.state.nodes:
            return
        st = self.state.nodes[node]
        if kind == "ready":
            st.state = "running"
            st.phase = ""
            exe.state = "running"
            self._emit("ready", node, exe_id, pid)
            self._ever_ready.add(node)
            run = self.state
            up = len(self._ever_ready) == len(run.nodes)
            if not run.all_ready.is_set() and up and not self._stop_wanted():  # not after ^C
                run.ready_at = ready_at = time.time()
                run.all_ready.set()
                n = len(run.nodes)
                who = "the node is" if n == 1 else f"all {n} nodes"
                took = ready_at - run.started_at
                self._emit("ready", message=f"{who} up in {took:.2f}s")
        elif kind == "finished":
            st.state = "finished"
            self._emit("finished", node, exe_id, pid)
        elif kind == "busy":  # every handler thread stuck (text: the report), or no longer
            try:
                st.busy = json.loads(text) if text else None
            except ValueError:
                st.busy = {"message": f"node {node} answers no calls", "stacks": text}
            message = st.busy["message"] if st.busy else f"node {node} answers calls again"
            self._emit("busy", node, exe_id, pid, str(message), busy=st.busy is not None)
        elif kind == "failed":
            st.state = "failed"
            if self._logs is not None:
                self._logs.append(node, text)
            if self._stop.begun:
                last = text.strip().splitlines()[-1] if text.strip() else "error"
                self.state.warnings.append(f"{node} raised while the program was stopping: {last}")
                self._emit("failed", node, exe_id, pid, "raised while stopping", traceback=text)
            elif exe.failure is None:
                exe.failure = (node, text)

    def _on_exited(
        self,
        exe_id: str,
        attempt: int,
        pid: int,
        code: int,
        reason: str = "",
        started: bool = True,
    ) -> None:
        exe = self.state.exes.get(exe_id)
        if exe is None or attempt != exe.attempt or exe.runner is None:
            return
        exe.runner = None
        if self._registry is not None:
            self._registry.forget(exe.nodes)  # nobody may keep calling a dead address
        self._mark(exe, f"attempt {attempt + 1} ended (pid {pid}): {ended(code, reason)}")
        if exe.retiring or (exe.leaving and not self._stop.begun):
            exe.asked = ""  # a node topo apply ends is not restarted as asked
            self._retired(exe, pid, code)
            return
        if exe.asked and not self._stop.begun:
            by, exe.asked = exe.asked, ""
            exe.asked_restarts += 1
            self._restarting(exe, 0.0, f"restarted as asked by {by}", pid, asked=by)
            return
        if not started and exe.failure is None and not self._stop.begun:
            exe.unstarted_restarts += 1  # it never ran (its host was lost first): no failure
            said = f"{_clause(reason)}; it had not started: started elsewhere, no restart counted"
            self._restarting(exe, 0.0, said, pid)
            return
        if self._stop.begun:
            exe.state = "killed" if code < 0 and self._stop.killed else "stopped"
            for n in exe.nodes:
                if self.state.nodes[n].state not in ("failed", "finished"):
                    self.state.nodes[n].state = exe.state
            self._emit("exited", exe=exe_id, pid=pid, message=exe.state, code=code)
            return
        policy = exe.policy
        failed = code != 0 or exe.failure is not None
        if not failed:
            exe.state = "finished"
            self._set_nodes(exe, "finished")
            self._emit("exited", exe=exe_id, pid=pid, message="finished", code=code)
            if policy.policy == "always" and exe.failed_restarts < policy.max_restarts:
                self._schedule_restart(exe, "its run() returned")
            elif not any(
                e.runner is not None or e.restart_at is not None for e in self.state.exes.values()
            ):
                self._stop.begin("every node finished")
            return
        node, text = exe.failure or (exe.nodes[0], "")
        how, text = failure_cause(exe.stuck, reason, text, code)
        message = f"node {node} (pid {pid}) {how}"
        exe.state = "failed"
        self._set_nodes(exe, "failed")
        self._emit("failed", node, exe_id, pid, message, traceback=text, code=code)
        if policy.policy in ("on-failure", "always"):
            if exe.failed_restarts < policy.max_restarts:
                last = text.strip().splitlines()[-1] if text.strip() and code >= 0 else ""
                self._schedule_restart(exe, f"raised {last}" if last else how)
                return
            message = (
                f"node {node} failed {exe.failed_restarts + 1} times, giving up "
                f"(max_restarts: {policy.max_restarts}); last failure: {how}"
            )
        self.state.failure = Failure(node, exe_id, pid, message, text)
        self._stop.begin(message, node, failed=True)

    # -- topo apply (on this thread, through call_soon: topo.supervisor.changes) --------
    def adopt_program(self, program: Program) -> list[str]:
        """``program`` is the run's program from now on (``changes.adopt``); the new
        executables' ids."""
        self.program = program
        self._phases = PhaseWatch(program, self._awaited)
        return changes.adopt(self.state, program)

    def start_exes(self, exe_ids: list[str]) -> None:
        """Start these (new, or retired to be started again) executables."""
        for exe_id in exe_ids:
            exe = self.state.exes[exe_id]
            if exe.runner is None and not self._stop.begun:
                exe.retiring, exe.retire_deadline = "", None
                if self._registry is not None:
                    self._registry.unend(exe_id)
                self._start_exe(exe)

    def retire(self, exe_ids: list[str], why: str) -> None:
        """Ask these executables' nodes to end as at a stop (the program goes on); each
        is killed if it still runs after the grace period."""
        for exe in changes.retire(self.state, exe_ids, why, self.state.grace_s):
            self._set_nodes(exe, "stopping")
            self._emit("stopping", exe.nodes[0], exe.id, message=why)
            if self._registry is not None:
                self._registry.end_members([exe.id])

    def drop(self, exe_ids: list[str]) -> None:
        """Forget executables (and their nodes) that left the program and ended."""
        self._ever_ready -= changes.drop(self.state, self.program, exe_ids)

    def _retired(self, exe: ExeStatus, pid: int, code: int) -> None:
        """An executable asked to end (or no longer in the program) ended."""
        why = changes.retired(self.state, exe)
        if self._registry is not None:
            self._registry.unend(exe.id)
        self._emit("exited", exe=exe.id, pid=pid, message=f"stopped ({why})", code=code)

    def _kill_retiring(self, exe: ExeStatus) -> None:
        exe.retire_deadline = None
        if exe.runner is None:
            return
        late = dump_late_stacks([exe])
        where = f"; where it was is in the logs of {', '.join(late)}" if late else ""
        self.state.warnings.append(
            f"killed {exe.id}: still running {self.state.grace_s:g}s after topo apply asked it to "
            f"end{where}"
        )
        try:
            exe.runner.kill()
        except Exception as exc:
            self.state.warnings.append(f"could not kill {exe.id}: {exc!r}")
        self._emit("killed", exe=exe.id, pid=exe.runner.pid if exe.runner else None)

    def _on_backend_failed(self, message: str) -> None:
        """The backend cannot go on: the run fails with its message (no node to blame)."""
        if self._stop.begun:
            self.state.warnings.append(message)
            return
        self.state.failure = Failure("", "", None, message)
        self._stop.begin(message, failed=True)

    def _schedule_restart(self, exe: ExeStatus, why: str) -> None:
        p = exe.policy
        delay = min(p.backoff_s * (2**exe.failed_restarts), p.backoff_max_s)
        number = exe.failed_restarts + 1  # this one
        said = f"{_clause(why)}; restart {number}/{p.max_restarts} in {delay:g}s"
        self._restarting(exe, delay, said)

    def _restarting(
        self, exe: ExeStatus, delay: float, message: str, pid: int | None = None, **data: Any
    ) -> None:
        """``exe`` starts again in ``delay`` seconds: its state, and the event that says so
        (``message``; an asked restart adds its count)."""
        exe.restarts += 1
        exe.restart_at = time.monotonic() + delay
        exe.state = "restarting"
        self._set_nodes(exe, "restarting")
        if "asked" in data:
            message = f"{message} (restart {exe.restarts})"
        self._emit("restarting", exe.nodes[0], exe.id, pid, message, restarts=exe.restarts, **data)


def _clause(text: str) -> str:
    """``text`` without the full stop it may end with (an error's message, Ray's), so
    that more can follow it after a semicolon."""
    return text[:-1] if text.endswith(".") and not text.endswith("..") else text
