"""The supervision loop shared by every backend.

The ``Launcher`` owns one program run: the run directory, the registry
(address book + stop channel + node status, built as the backend's ``network()``
asks), the backend's executables, their logs (from the backend's
``log_source``) and status. Before anything starts it runs the checks of
``preflight`` (the backend's own ``check`` included) and raises
``topo.diagnostics.TopoError`` on a refusal. One thread of the launcher drives its
``Supervisor`` (``reactions``), which turns what is reported into changes of the
run's ``RunState``, status events, restarts, and the stop; ``status.json`` is kept
current while the run goes on.
Metric rows from ``topo.metrics`` loggers go to ``metrics_store`` (files under
``<run_dir>/metrics/``, latest figures in ``NodeStatus.metrics``), the nodes' call
figures to ``NodeStatus.rpc`` (``rpc_stats``), every status event to
``<run_dir>/events.jsonl`` (``events_log``).

Exit codes: 0 clean stop; 1 a node failed (or ran out of restarts);
130 stopped by Ctrl-C (SIGINT); 143 stopped by SIGTERM.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from topo.backends.base import (
    Backend,
    Event,
    EventKind,
    JobContext,
    LogSource,
    RunOptions,
    Sink,
)
from topo.backends.logs import make_run_dir, write_program
from topo.backends.tail import LogTailer
from topo.diagnostics import TopoError
from topo.ir import Program
from topo.rundir.layout import holds_run, log_files, reused_warning
from topo.rundir.record import record_change
from topo.rundir.snapshots import Snapshot, SnapshotError, read_snapshot
from topo.rundir.status import write_status
from topo.runs import index
from topo.runs.control import ControlServer
from topo.runs.probe import launcher_record, process_start
from topo.runtime import RegistryServer, new_program_id, new_secret
from topo.supervisor import exiting
from topo.supervisor.applier import Applier
from topo.supervisor.benign import is_benign
from topo.supervisor.change_plan import LivePlan, plan_change
from topo.supervisor.events_log import EventLog
from topo.supervisor.metrics_store import MetricsStore
from topo.supervisor.phases import LimiterProgress, limiter_progress
from topo.supervisor.preflight import preflight
from topo.supervisor.reactions import Supervisor
from topo.supervisor.record import StatusRecorder
from topo.supervisor.requests import answer
from topo.supervisor.rpc_stats import checked, split
from topo.supervisor.snapshotter import Snapshotter
from topo.supervisor.state import ExeStatus, Failure, NodeStatus, RunState

Listener = Callable[[Event], None]


class Launcher(Sink):
    """Runs ``program`` on ``backend``: start, watch, restart, stop."""

    def __init__(
        self, program: Program, backend: Backend, options: RunOptions | None = None
    ) -> None:
        found = preflight(program, backend)
        errors = [d for d in found if d.severity == "error"]
        if errors:
            raise TopoError(errors)
        self.program = program
        self.backend = backend
        self.options = options or RunOptions()
        self.grace_s = (
            self.options.grace_s if self.options.grace_s is not None else program.stop.grace_s
        )
        self.run_dir: Path = Path()
        self.registry: RegistryServer | None = None
        self.metrics: MetricsStore | None = None
        self.run_id = ""
        self.control: ControlServer | None = None
        self.snapshots: Snapshotter | None = None
        self._stop_lock = threading.Lock()
        self._stop_pending = False  # a snapshot at the stop is being taken first
        self._launcher = launcher_record()
        self._helper_starts: dict[int, int] = {}
        self._state = RunState.of(program, [d.headline() for d in found if d.severity != "error"])
        self._supervisor = Supervisor(program, backend, self._state, self._emit, self.grace_s)
        self._listeners: list[Listener] = []
        self._done = threading.Event()
        self._tailer: LogSource | None = None
        self.applier: Applier | None = None
        self._events: EventLog | None = None
        record = self.options.record
        self._params_given: list[str] = [] if record is None else list(record.params_given)
        self._thread = threading.Thread(target=self._supervise, name="topo-launcher", daemon=True)

    # -- the run's state (kept by the supervisor) -------------------------------
    @property
    def nodes(self) -> dict[str, NodeStatus]:
        """Node id -> its status (the live view reads it)."""
        return self._state.nodes

    @property
    def exes(self) -> dict[str, ExeStatus]:
        """Executable id -> its supervision state."""
        return self._state.exes

    @property
    def warnings(self) -> list[str]:
        """What went wrong without failing the run (preflight warnings included)."""
        return self._state.warnings

    @property
    def failure(self) -> Failure | None:
        """Why the run ended with exit code 1 (None otherwise)."""
        return self._state.failure

    @property
    def stop_reason(self) -> str:
        """Why the run stopped ("" while it runs)."""
        return self._state.stop_reason

    @property
    def exit_code(self) -> int | None:
        """The run's exit code once it ended, else None."""
        return self._state.exit_code

    @property
    def started_at(self) -> float:
        """Wall-clock time the backend was opened (0 before ``start``)."""
        return self._state.started_at

    @property
    def ready_at(self) -> float | None:
        """Wall-clock time every node had been ready once (None until then)."""
        return self._state.ready_at

    @property
    def stopping_since(self) -> float | None:
        """Wall-clock time the stop began (None while the run goes on): the grace runs."""
        return self._state.stopping_since

    @property
    def limiter(self) -> LimiterProgress | None:
        """How far a steps limiter node got (None: the program has none, or it has not
        reported yet)."""
        return limiter_progress(self.nodes)

    @property
    def generation(self) -> int:
        """How many changes ``topo apply`` made to the program (0: none)."""
        return self._state.generation

    @property
    def backend_name(self) -> str:
        """The backend's name (``procs``, ``threads``...)."""
        return self.backend.name

    @property
    def program_name(self) -> str:
        """The program's name (the live table's title)."""
        return self.program.name

    def location(self, exe_id: str) -> str | None:
        """The host an executable runs on, for a backend that spans hosts (else None)."""
        return self.backend.location(exe_id)

    @property
    def all_pids(self) -> set[int]:
        """Every local pid the run has had: executables' attempts and backend helpers."""
        return self._state.all_pids

    # -- public ---------------------------------------------------------------
    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(event)`` for every status event (from launcher threads)."""
        self._listeners.append(listener)

    def start(self, opened: Callable[[Path], None] | None = None) -> None:
        """Create the run directory and registry, start every executable. ``opened`` is
        given the run directory before any executable starts (``topo run --ui`` hands it
        to its dashboard then)."""
        try:  # nothing may stay up when a step fails: backend helpers, logs, registry
            self._open_run()
            if opened is not None:
                opened(self.run_dir)
        except BaseException:
            self._release()
            if self._events is not None:
                self._events.close()
            raise
        self.all_pids.update(self.backend.helper_pids())
        self._supervisor.start_all()
        exiting.track(self)
        self._thread.start()
        if self.snapshots is not None:
            self.snapshots.start_clock()

    def _open_run(self) -> None:
        """The run directory, status record, metrics store, registry and log source, then
        the backend's ``open``."""
        opts = self.options
        if opts.run_dir is not None and holds_run(opts.run_dir):
            self.warnings.append(reused_warning(opts.run_dir))
        self.run_dir = make_run_dir(
            self.program, opts.log_dir, opts.run_dir, opts.topology_yaml, opts.record
        )
        self.run_id = index.new_run_id()
        self._events = EventLog(self.run_dir)  # events.jsonl: the dashboard's timeline
        self._listeners.insert(0, self._events)
        self.control = ControlServer(self.run_dir, lambda request: answer(self, request))
        index.register(self.run_id, self.run_dir, opts.log_dir)
        recorder = StatusRecorder(self.run_dir, self.summary)
        recorder.tick(time.monotonic())  # a record exists from the first moment
        self.metrics = MetricsStore(self.run_dir, self.nodes, self.warnings.append)
        deadline = opts.default_deadline or max(
            (g.rpc.deadline_s for g in self.program.groups), default=60.0
        )
        net = self.backend.network()
        self.registry = RegistryServer(
            new_program_id(),
            new_secret(),
            mechanism=net.mechanism,
            bind_host=net.bind_host,
            advertise_host=net.advertise_host,
            default_deadline=deadline,
            on_report=self.node_status,
            on_metrics=self._on_metrics,
            members={e.id: e.nodes for e in self.program.executables},
        )
        write_status(self.run_dir, self.summary())  # names the socket directory at once
        # The backend passes on the registry's public part and each executable's grant:
        # the secret stays in this process.
        job = JobContext(
            self.program,
            opts,
            self.registry.info.public(),
            self.run_dir,
            os.getpid(),
            self.registry.authority,
        )
        self._tailer = self.backend.log_source(job, self._on_line) or LogTailer(
            self._log_files(self.program), self._on_line, limit=opts.log_limit
        )
        self._tailer.start()
        self._supervisor.attach(self.run_dir, self.registry, self._tailer, recorder)
        self.applier = Applier(
            self._supervisor,
            self.backend,
            self.registry,
            self.run_dir,
            self._adopt,
            self._emit,
            lambda: self.phase,
            self._record_soon,
        )
        self.applier.publish_initial()
        self.snapshots = Snapshotter(
            self.program,
            self.run_dir,
            self.registry,
            self._node_state,
            self._on_snapshot,
            read_snapshot(opts.start_from) if opts.start_from is not None else None,
            lambda: self.phase == "running",
        )
        self.registry.service.states = self.snapshots.state_for
        self.applier.snapshots = self.snapshots
        self.applier.hazards = self._hazards
        self._state.started_at = time.time()
        self.backend.open(job, self)

    def _release(self) -> None:
        """Close what ``start`` opened: the backend, the log source, registry and metrics."""
        try:
            self.backend.close()
            self.warnings.extend(self.backend.left_behind())
        except Exception as exc:
            self.warnings.append(f"backend shutdown failed: {exc!r}")
        if self.snapshots is not None:
            self.snapshots.close()
        if self._tailer is not None:
            self._tailer.close()
        if self.registry is not None:
            self.registry.close()
        if self.control is not None:
            self.control.close()
        if self.metrics is not None:
            self.metrics.close()

    def request_stop(
        self, reason: str = "stop requested", code: int = 0, grace_s: float | None = None
    ) -> None:
        """Stop the program: stop event, grace period (``grace_s``, else the run's), then
        kill. ``code`` is the exit code of a clean stop (e.g. 130 for Ctrl-C)."""
        if grace_s is not None and not self._supervisor.stopping:
            self.grace_s = self._supervisor.grace_s = grace_s
        with self._stop_lock:
            first, self._stop_pending = not self._stop_pending, True
        snap = self.snapshots
        if first and snap is not None and snap.settings.at_stop and self.phase == "running":
            # the snapshot first, on a thread of its own (this may be a signal handler);
            # a second request while it is taken stops at once
            threading.Thread(
                target=self._snapshot_then_stop,
                args=(snap, reason, code),
                name="topo-stop-snapshot",
                daemon=True,
            ).start()
            return
        self._supervisor.request_stop(reason, code)

    def _snapshot_then_stop(self, snap: Snapshotter, reason: str, code: int) -> None:
        try:
            if snap.running():  # (the program may have begun to stop by itself meanwhile)
                snap.try_take("at the stop")
        finally:
            self._supervisor.request_stop(reason, code)

    def snapshot(self, reason: str = "asked") -> Snapshot:
        """Take a snapshot of the running program now (``SnapshotError`` if it cannot)."""
        if self.snapshots is None or self.done:
            raise SnapshotError("the run is not running")
        return self.snapshots.take(reason)

    def restart_node(
        self, node: str, by: str = "topo restart", fresh: bool = False
    ) -> dict[str, Any]:
        """Restart ``node`` now: its executable's attempt is killed and started again (all
        of that executable's nodes restart), whatever its restart policy, each node
        handing its live state over to its next start unless ``fresh``; the answer says
        which nodes and what each starts from, or why not (``ok`` false)."""
        from topo.supervisor.node_restart import restart_node

        return restart_node(
            node,
            by,
            fresh,
            nodes=self.nodes,
            exes=self.exes,
            phase=self.phase,
            states=self.snapshots if self.phase == "running" else None,
            restart=self._supervisor.restart,
        )

    def describe_targets(self, targets: list[str], source: str | None) -> dict[str, Any]:
        """What the checks of a new program (``topo apply``) need of its targets, imported
        where the nodes import them (procs: the fork server; threads: here), as plain
        data: target -> ``TargetInfo`` as a dict, or why it does not import. The command
        that asks never imports a node's framework itself."""
        import dataclasses

        from topo.targets import describe_targets

        found = self.backend.describe_targets(targets, source)
        if found is None:
            return describe_targets(targets, source)
        return {t: v if isinstance(v, str) else dataclasses.asdict(v) for t, v in found.items()}

    def _node_state(self, node: str) -> tuple[str, int, int | None]:
        """A node's (state, restarts, pid) for the snapshotter (``gone``: not in the run)."""
        status = self.nodes.get(node)
        return ("gone", 0, None) if status is None else (status.state, status.restarts, status.pid)

    def _on_snapshot(self, ok: bool, message: str, figures: dict[str, Any]) -> None:
        if not ok:
            self.warnings.append(message)
        self._emit("snapshot", message=message, ok=ok, **figures)

    # -- topo apply ---------------------------------------------------------------------
    def apply(
        self,
        program: Program,
        *,
        dry_run: bool = False,
        max_unavailable: int = 1,
        source: dict[str, Any] | None = None,
        keep_state: bool = True,
        confirmed: bool = False,
    ) -> tuple[LivePlan, int | None]:
        """Change the running program into ``program`` (``Applier.propose``): the plan,
        and the generation of the change begun in the background (None: refused, a dry
        run, nothing to do, or it would stop the program or lose work and was not
        ``confirmed``: ``plan.confirm`` says why)."""
        if self.applier is None:
            refused = (f"the run is {self.phase}: a change is applied to a running program",)
            return plan_change(self.program, program, refused), None
        return self.applier.propose(
            program,
            dry_run=dry_run,
            max_unavailable=max_unavailable,
            source=source,
            keep_state=keep_state,
            confirmed=confirmed,
        )

    def _hazards(self, plan: LivePlan, keep_state: bool) -> list[str]:
        """Why ``plan`` must be confirmed (``topo.supervisor.hazards``)."""
        from topo.supervisor.hazards import hazards

        if self.snapshots is None:
            return []
        running = self._supervisor.program  # (what the plan was made from)
        return hazards(running, plan, keep_state, self.snapshots, self.limiter)

    @property
    def params_given(self) -> list[str]:
        """The ``-p`` values the run's program was made with, as the last change left
        them (``topo apply`` and ``RunningProgram.apply`` start from them)."""
        return list(self._params_given)

    def _record_soon(self) -> None:
        """Write ``status.json`` on the supervisor's thread at its next turn."""
        self._supervisor.call_soon(self.record_now)

    def _log_files(self, program: Program) -> dict[str, Path]:
        """The logs in the run directory that ``program``'s output is in (label -> path)."""
        return log_files(self.run_dir, (n.id for n in program.nodes), program.executables)

    def _adopt(self, program: Program, source: dict[str, Any]) -> None:
        """The run's program is ``program`` from now on: the launcher's view, snapshots,
        the grace period (unless the run was given one) and the run directory's record
        (``source``: the file and parameters it came from)."""
        self.program = program
        if self.options.grace_s is None:
            self.grace_s = self._supervisor.grace_s = program.stop.grace_s
        if self.snapshots is not None:
            self.snapshots.adopt(program)
        write_program(self.run_dir, program)
        if self._tailer is not None:
            for label, path in self._log_files(program).items():
                self._tailer.follow(label, path)  # (a file it follows already stays)
        if source.get("params_given") is not None:
            self._params_given = [str(t) for t in source["params_given"]]
        if source.get("params") is not None:
            record_change(
                self.run_dir,
                source.get("file"),
                list(source.get("params_given") or []),
                dict(source["params"]),
                source.get("topology"),
            )

    def kill(self) -> None:
        """Kill every executable now (a second Ctrl-C)."""
        self._supervisor.kill()

    def wait(self, timeout: float | None = None) -> int | None:
        """Block until the run ended; its exit code (None on timeout)."""
        self._done.wait(timeout)
        return self.exit_code if self._done.is_set() else None

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until every node reported ready once (False on timeout or end of run)."""
        end = None if timeout is None else time.monotonic() + timeout
        ready = self._state.all_ready
        while not ready.is_set() and not self._done.is_set():
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                break
            ready.wait(0.05 if left is None else min(0.05, left))
        return ready.is_set()

    @property
    def done(self) -> bool:
        """True once the run ended."""
        return self._done.is_set()

    def record_now(self) -> None:
        """Write ``status.json`` now (not at the recorder's next turn)."""
        write_status(self.run_dir, self.summary())

    @property
    def phase(self) -> str:
        """starting (until every node was up once), running, stopping, or ended."""
        if self.exit_code is not None:
            return "ended"
        if self._supervisor.stopping:
            return "stopping"
        return "running" if self.ready_at is not None else "starting"

    def pids(self) -> dict[str, int]:
        """Executable id -> pid of its current attempt (running ones)."""
        return {
            e.id: e.runner.pid
            for e in list(self.exes.values())
            if e.runner is not None and e.runner.pid
        }

    def summary(self) -> dict[str, Any]:
        """The final status summary (``status.json``)."""
        now = time.time()
        limiter = self.limiter
        return {
            "id": self.run_id,
            "program": self.program.name,
            "backend": self.backend.name,
            "state": self.phase,
            "updated": now,
            "launcher": self._launcher,
            "control": None if self.control is None else self.control.path,
            "grace_s": self.grace_s,
            "generation": self._state.generation,
            "applying": self.applier is not None and self.applier.busy,
            "exit_code": self.exit_code,
            "stop_reason": self.stop_reason,
            "failure": None if self.failure is None else vars(self.failure),
            "warnings": self.warnings,
            "socket_dir": None if self.registry is None else self.registry.info.ipc_dir,
            "started": self.started_at,
            "duration_s": round(now - self.started_at, 3) if self.started_at else None,
            "ready_s": None if self.ready_at is None else round(self.ready_at - self.started_at, 3),
            "metrics_rows": 0 if self.metrics is None else self.metrics.rows,
            "metrics_dropped": 0 if self.metrics is None else self.metrics.dropped,
            "stopping_since": self.stopping_since,
            "helpers": self._helpers(),
            "limiter": None if limiter is None else vars(limiter),
            "nodes": [
                {
                    "id": n.id,
                    "executable": n.exe,
                    "group": n.id.split("/")[0],
                    "state": n.state,
                    "pid": n.pid,
                    "pid_start": n.pid_start,
                    "host": self.backend.location(n.exe),
                    "restarts": n.restarts,
                    "since": n.started,
                    "metrics": n.metrics,
                    "stalled_s": n.stalled_s,
                    "busy": n.busy,
                    "phase": n.phase,
                    "last_line": n.last_line[-500:],
                    "rpc": n.rpc,
                }
                for n in list(self.nodes.values())  # (topo apply may add or drop some)
            ],
        }

    def _helpers(self) -> list[dict[str, Any]]:
        """The backend's own processes on this machine (a fork server) by pid and start
        time: what ``topo stop`` of a lost run ends besides its nodes."""
        if not self.backend.local_pids:
            return []
        out = []
        for pid in self.backend.helper_pids():
            start = self._helper_starts.get(pid) or process_start(pid)
            if start is not None:
                self._helper_starts[pid] = start
            out.append({"pid": pid, "pid_start": start})
        return out

    # -- Sink (called from backend threads and the registry's handlers) --------
    def node_status(
        self, kind: str, node: str, exe: str, attempt: int, pid: int, traceback: str = ""
    ) -> None:
        self._supervisor.node_status(kind, node, exe, attempt, pid, traceback)

    def exited(self, exe: str, attempt: int, pid: int, code: int, reason: str = "") -> None:
        self._supervisor.exited(exe, attempt, pid, code, reason)

    def started(self, exe: str, attempt: int, pid: int) -> None:
        """A backend learned the pid of an attempt (procs: after the fork)."""
        self._supervisor.started(exe, attempt, pid)

    def backend_failed(self, message: str) -> None:
        self._supervisor.backend_failed(message)

    # -- internals --------------------------------------------------------------
    def _emit(
        self,
        kind: EventKind,
        node: str | None = None,
        exe: str | None = None,
        pid: int | None = None,
        message: str = "",
        **data: Any,
    ) -> None:
        """Tell every listener; a broken view must not break supervision."""
        event = Event(kind, node, exe, pid, message, time.time(), data)
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                pass

    def _on_metrics(self, rows: list[Any], over: int) -> None:
        """Rows from the registry's ``metrics`` RPC (a registry handler thread): on disk
        before the call returns; the supervisor then tells the view."""
        store = self.metrics
        if store is None:
            return
        rows, figures = split(rows)
        for row in figures:  # call figures (topo.runtime.callstats): status.json only
            found = checked(row, self.nodes)
            if found is not None:
                self.nodes[found[0]].rpc = found[1]
        if figures:
            self._supervisor.mark_dirty()
        if not rows and not over:
            return
        touched = store.add(rows, over)
        for node in touched:
            self.nodes[node].metrics = store.latest[node]
        if touched:
            self._supervisor.metrics_changed(touched)

    def _on_line(self, label: str, line: str) -> None:
        if is_benign(line):  # still in the node's log file, not on the console
            return
        status = self.nodes.get(label)
        if status is not None and line.strip():
            status.last_line = line
        self._emit("log", label, message=line)

    def _supervise(self) -> None:
        try:
            while not self._supervisor.step():
                pass
        finally:
            self._finish()

    def _finish(self) -> None:
        for exe in self._supervisor.running():
            self.warnings.append(f"executable {exe.id} did not report its exit")
        self._release()
        self._state.exit_code = self._supervisor.stop_code
        try:
            write_status(self.run_dir, self.summary())
        finally:
            self._emit("stopped", message=self.stop_reason, code=self.exit_code)
            if self._events is not None:
                self._events.close()
            self._done.set()
            exiting.untrack(self)
