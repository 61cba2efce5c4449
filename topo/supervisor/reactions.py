"""Supervision: how the launcher reacts to what happens in a run.

One step of the supervisor thread reads one report (a node ready / finished /
failed, an executable started or exited), applies the groups' restart
policies, fails nodes stuck starting past their ``ready_timeout_s``, and drives
a stop: stop event to every node, the grace period, then kill. The state it
works on (nodes, executables, registry, queue) is the ``Launcher``'s.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from pathlib import Path
from typing import Any

from topo.backends.base import Backend, Event
from topo.backends.logs import log_path, write_marker
from topo.ir import Program
from topo.runtime import RegistryServer
from topo.supervisor.record import StatusRecorder
from topo.supervisor.state import ExeStatus, Failure, NodeStatus, signal_name


class Supervision:
    """The supervisor's reactions; mixed into ``Launcher``, which owns the state."""

    program: Program
    backend: Backend
    nodes: dict[str, NodeStatus]
    exes: dict[str, ExeStatus]
    registry: RegistryServer | None
    failure: Failure | None
    stop_reason: str
    warnings: list[str]
    started_at: float
    ready_at: float | None
    grace_s: float
    run_dir: Path
    _queue: queue.Queue[tuple[Any, ...]]
    _recorder: StatusRecorder | None
    _stopping: bool
    _stop_code: int
    _grace_deadline: float | None
    _kill_deadline: float | None
    _killed: bool
    _ready: threading.Event
    _ever_ready: set[str]
    _marked: set[tuple[str, int]]
    _listeners: list[Any]
    all_pids: set[int]
    _tailer: Any

    def _emit(
        self,
        kind: Any,
        node: str | None = None,
        exe: str | None = None,
        pid: int | None = None,
        message: str = "",
        **data: Any,
    ) -> None:
        event = Event(kind, node, exe, pid, message, time.time(), data)
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a broken view must not break supervision
                pass

    def _set_nodes(self, exe: ExeStatus, state: str, pid: int | None = None) -> None:
        for n in exe.nodes:
            st = self.nodes[n]
            st.state = state
            st.restarts = exe.restarts
            if pid is not None:
                st.pid = pid

    def _start_exe(self, exe: ExeStatus) -> None:
        exe.attempt += 1
        exe.failure = None
        exe.stuck = ""
        exe.restart_at = None
        exe.state = "starting"
        self._set_nodes(exe, "starting")
        now = time.time()
        for n in exe.nodes:
            self.nodes[n].started = now
        exe.runner = self.backend.start(exe.id, exe.attempt)
        if exe.runner.pid:
            self._on_started(exe.id, exe.attempt, exe.runner.pid)
        self._emit("starting", exe=exe.id, message=f"attempt {exe.attempt}")

    def _on_started(self, exe_id: str, attempt: int, pid: int) -> None:
        exe = self.exes[exe_id]
        if attempt != exe.attempt:
            return
        if pid != os.getpid() and self.backend.local_pids:  # threads: the launcher itself
            self.all_pids.add(pid)
        if (exe_id, attempt) not in self._marked:  # procs may report a pid twice
            self._marked.add((exe_id, attempt))
            self._mark(exe, f"attempt {attempt + 1} started (pid {pid})")
        exe.pids.append(pid)
        self._set_nodes(exe, self.nodes[exe.nodes[0]].state, pid)
        self._emit("started", exe=exe_id, pid=pid)

    def _mark(self, exe: ExeStatus, text: str) -> None:
        """A marker line in the log file of each node of ``exe``."""
        for n in exe.nodes:
            try:
                write_marker(log_path(self.run_dir, n), text)
            except OSError as exc:
                self.warnings.append(f"could not write to the log of {n}: {exc}")

    def _step(self) -> bool:
        """One round of supervision; True when the run is over."""
        try:
            msg = self._queue.get(timeout=0.05)
        except queue.Empty:
            msg = None
        if msg is not None:
            self._handle(msg)
            if self._recorder is not None:
                self._recorder.dirty = True
        registry = self.registry
        if registry is not None and registry.stop_event.is_set() and not self._stopping:
            reason, node = registry.stop_reason() or ("stop requested", None)
            self._begin_stop(reason, node)
        now = time.monotonic()
        timeout = self.program.stop.timeout_s
        if not self._stopping and timeout and time.time() - self.started_at > timeout:
            self._begin_stop(f"the program's stop.timeout_s of {timeout:g}s was reached")
        for exe in self.exes.values():
            if exe.restart_at is not None and now >= exe.restart_at and not self._stopping:
                self._start_exe(exe)
        if not self._stopping:
            self._check_starting()
        if self._recorder is not None:
            self._recorder.tick(now)
        if self._grace_deadline is not None and now >= self._grace_deadline:
            self._grace_deadline = None
            if self._running():
                self.warnings.append(
                    f"killed {len(self._running())} executable(s) still "
                    f"running after the {self.grace_s:g}s grace period"
                )
            self._kill_all()
        if self._stopping and not self._running():
            return True
        return self._kill_deadline is not None and now >= self._kill_deadline

    def _running(self) -> list[ExeStatus]:
        return [e for e in self.exes.values() if e.runner is not None]

    def _check_starting(self) -> None:
        """Fail an executable whose node is still starting after its group's
        ``ready_timeout_s``: its stacks are shown (or dumped to its log), then it is killed
        and its restart policy applies."""
        now = time.time()
        for exe in self.exes.values():
            if exe.runner is None or exe.stuck:
                continue
            for n in exe.nodes:
                st = self.nodes[n]
                limit = self.program.group_of(n).ready_timeout_s
                if st.state != "starting" or st.started is None or now - st.started < limit:
                    continue
                exe.stuck = (
                    f"did not become ready within {limit:g}s (stuck in its "
                    "constructor or while starting; see ready_timeout_s)"
                )
                stacks = exe.runner.dump_stacks(n)
                if exe.failure is None:
                    exe.failure = (n, stacks)
                try:
                    exe.runner.kill()
                except Exception as exc:
                    self.warnings.append(f"could not kill {exe.id}: {exc!r}")
                break

    def _handle(self, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        if kind == "node":
            self._on_node(*msg[1:])
        elif kind == "exited":
            self._on_exited(*msg[1:])
        elif kind == "started":
            self._on_started(*msg[1:])
        elif kind == "stop":
            self._begin_stop(msg[1], msg[2], code=msg[3])
        elif kind == "metrics":  # new figures (already stored): tell the view
            for node in msg[1]:
                self._emit("metrics", node)
        elif kind == "kill":
            self._begin_stop("killed by the launcher", code=self._stop_code or 130)
            self._kill_all()

    def _on_node(
        self, kind: str, node: str, exe_id: str, attempt: int, pid: int, text: str
    ) -> None:
        exe = self.exes.get(exe_id)
        if exe is None or attempt != exe.attempt or node not in self.nodes:
            return
        st = self.nodes[node]
        if kind == "ready":
            st.state = "running"
            exe.state = "running"
            self._emit("ready", node, exe_id, pid)
            self._ever_ready.add(node)
            if not self._ready.is_set() and len(self._ever_ready) == len(self.nodes):
                self.ready_at = time.time()
                self._ready.set()
                self._emit(
                    "ready",
                    message=f"all {len(self.nodes)} nodes up in "
                    f"{self.ready_at - self.started_at:.2f}s",
                )
        elif kind == "finished":
            st.state = "finished"
            self._emit("finished", node, exe_id, pid)
        elif kind == "failed":
            st.state = "failed"
            if self._tailer is not None:
                self._tailer.append(node, text)
            if self._stopping:
                last = text.strip().splitlines()[-1] if text.strip() else "error"
                self.warnings.append(f"{node} raised while the program was stopping: {last}")
                self._emit("failed", node, exe_id, pid, "raised while stopping", traceback=text)
            elif exe.failure is None:
                exe.failure = (node, text)

    def _on_exited(self, exe_id: str, attempt: int, pid: int, code: int, reason: str = "") -> None:
        exe = self.exes.get(exe_id)
        if exe is None or attempt != exe.attempt or exe.runner is None:
            return
        exe.runner = None
        if self.registry is not None:
            self.registry.forget(exe.nodes)  # nobody may keep calling a dead address
        ended = f"killed by {signal_name(code)}" if code < 0 else f"exit code {code}"
        ended += f" ({reason})" if reason else ""
        self._mark(exe, f"attempt {attempt + 1} ended (pid {pid}): {ended}")
        if self._stopping:
            exe.state = "killed" if code < 0 and self._killed else "stopped"
            for n in exe.nodes:
                if self.nodes[n].state not in ("failed", "finished"):
                    self.nodes[n].state = exe.state
            self._emit("exited", exe=exe_id, pid=pid, message=exe.state, code=code)
            return
        policy = exe.policy
        failed = code != 0 or exe.failure is not None
        if not failed:
            exe.state = "finished"
            self._set_nodes(exe, "finished")
            self._emit("exited", exe=exe_id, pid=pid, message="finished", code=code)
            if policy.policy == "always" and exe.restarts < policy.max_restarts:
                self._schedule_restart(exe, "its run() returned")
            elif not any(
                e.runner is not None or e.restart_at is not None for e in self.exes.values()
            ):
                self._begin_stop("every node finished")
            return
        node, text = exe.failure or (exe.nodes[0], "")
        if exe.stuck:
            how = exe.stuck
        elif reason:
            how = reason
        elif code < 0:
            how = f"was killed by {signal_name(code)}"
        elif text:
            how = "raised an exception"
        else:
            how = f"exited with code {code}"
        message = f"node {node} (pid {pid}) {how}"
        exe.state = "failed"
        self._set_nodes(exe, "failed")
        self._emit("failed", node, exe_id, pid, message, traceback=text, code=code)
        if policy.policy in ("on-failure", "always"):
            if exe.restarts < policy.max_restarts:
                last = text.strip().splitlines()[-1] if text.strip() and code >= 0 else ""
                self._schedule_restart(exe, f"raised {last}" if last else how)
                return
            message = (
                f"node {node} failed {exe.restarts + 1} times, giving up "
                f"(max_restarts: {policy.max_restarts}); last failure: {how}"
            )
        self.failure = Failure(node, exe_id, pid, message, text)
        self._begin_stop(message, node, failed=True)

    def _schedule_restart(self, exe: ExeStatus, why: str) -> None:
        p = exe.policy
        delay = min(p.backoff_s * (2**exe.restarts), p.backoff_max_s)
        exe.restarts += 1
        exe.restart_at = time.monotonic() + delay
        exe.state = "restarting"
        self._set_nodes(exe, "restarting")
        self._emit(
            "restarting",
            exe.nodes[0],
            exe.id,
            message=f"{why}; restart {exe.restarts}/{p.max_restarts} in {delay:g}s",
            restarts=exe.restarts,
        )

    def _begin_stop(
        self, reason: str, node: str | None = None, *, failed: bool = False, code: int = 0
    ) -> None:
        if self._stopping:
            return
        self._stopping = True
        self.stop_reason = reason if node is None or node in reason else f"{reason} ({node})"
        self._stop_code = 1 if failed else code
        for exe in self.exes.values():
            if exe.restart_at is not None:
                exe.restart_at = None
                exe.state = "stopped"
        if self.registry is not None:
            self.registry.request_stop(reason, node)
        self._grace_deadline = time.monotonic() + self.grace_s
        self._emit("stopping", node, message=self.stop_reason)

    def _kill_all(self) -> None:
        self._killed = True
        self._grace_deadline = None
        if self._kill_deadline is None:
            self._kill_deadline = time.monotonic() + 10.0
        for exe in self._running():
            assert exe.runner is not None
            try:
                exe.runner.kill()
            except Exception as exc:
                self.warnings.append(f"could not kill {exe.id}: {exc!r}")
            self._emit("killed", exe=exe.id, pid=exe.runner.pid if exe.runner else None)
