"""The supervision loop shared by every backend.

The ``Launcher`` owns one program run: the run directory, the registry
(address book + stop channel + node status, built as the backend's ``network()``
asks), the backend's executables, their logs (from the backend's
``log_source``) and status. Before anything starts it runs the checks of
``preflight`` (the backend's own ``check`` included) and raises
``topo.diagnostics.TopoError`` on a refusal. One thread of the launcher drives its
``Supervisor`` (``reactions``), which turns what is reported into changes of the
run's ``RunState``, status events, restarts, and the stop; the backend and the registry
report to that supervisor directly. ``status.json`` (``summary``) is kept current while
the run goes on.
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

from topo.backends.base import Event, EventKind, JobContext, LogSource
from topo.backends.logs import make_run_dir, write_program
from topo.backends.tail import LogTailer
from topo.diagnostics import TopoError
from topo.ir import Program
from topo.rundir.layout import holds_run, log_files, reused_warning
from topo.rundir.record import record_change
from topo.rundir.snapshots import Snapshot, SnapshotError
from topo.rundir.status import write_status
from topo.runs import index
from topo.runs.control import ControlServer
from topo.runs.probe import launcher_record
from topo.runtime import RegistryServer, new_program_id, new_secret
from topo.runtime.debugger import DEBUG_LABEL
from topo.supervisor import exiting
from topo.supervisor.applier import Applier
from topo.supervisor.benign import is_benign
from topo.supervisor.change_plan import ChangeAsk, LivePlan, plan_change
from topo.supervisor.debugging import said_at, stopped_at
from topo.supervisor.events_log import EventLog
from topo.supervisor.metrics_store import MetricsStore
from topo.supervisor.preflight import preflight
from topo.supervisor.reactions import Supervisor
from topo.supervisor.record import StatusRecorder
from topo.supervisor.requests import answer
from topo.supervisor.rpc_stats import checked, split
from topo.supervisor.run_request import RunRequest
from topo.supervisor.snapshotter import Snapshotter
from topo.supervisor.state import RunState
from topo.supervisor.summary import Helpers, run_summary

Listener = Callable[[Event], None]


class Launcher:
    """Runs a ``RunRequest`` (a program on a backend): start, watch, restart, stop.

    What the run is now (its run directory, node statuses, warnings, failure, exit
    code...) is its ``state``; the backend and the registry report to its
    ``supervisor``, which also kills (``supervisor.kill()``)."""

    def __init__(self, request: RunRequest) -> None:
        program, backend = request.program, request.backend
        found = preflight(program, backend)
        errors = [d for d in found if d.severity == "error"]
        if errors:
            raise TopoError(errors)
        self.request = request
        self.program = program  # the program as it runs now (topo apply changes it)
        self.backend = backend
        self.registry: RegistryServer | None = None
        self.metrics: MetricsStore | None = None
        self.run_id = ""
        self.control: ControlServer | None = None
        self.endpoint: Any = None  # openmetrics.MetricsEndpoint, with --metrics-port
        self.snapshots: Snapshotter | None = None
        self.applier: Applier | None = None
        self.launcher_record = launcher_record()  # this process, as status.json names it
        warnings = [d.headline() for d in found if d.severity != "error"]
        grace = request.options.grace_s
        self.state = RunState.of(program, warnings, backend=backend, grace_s=grace)
        self.supervisor = Supervisor(program, backend, self.state, self._emit)
        self._stop_lock = threading.Lock()
        self._stop_pending = False  # a snapshot at the stop is being taken first
        self._helpers = Helpers(backend)
        self._listeners: list[Listener] = []
        self._done = threading.Event()
        self._tailer: LogSource | None = None
        self._events: EventLog | None = None
        self._params_given = request.params_given
        self._thread = threading.Thread(target=self._supervise, name="topo-launcher", daemon=True)

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
                opened(self.state.run_dir)
        except BaseException:
            self._release()
            if self._events is not None:
                self._events.close()
            raise
        self.state.all_pids.update(self.backend.helper_pids())
        if self.request.resumed is not None:  # a requeued job: said once, as a snapshot is
            self._emit("snapshot", message=self.request.resumed.message, ok=True)
        self.supervisor.start_all()
        exiting.track(self)
        self._thread.start()
        if self.snapshots is not None:
            self.snapshots.start_clock()
        if self.request.guard is not None:  # (a signal handler: from the starting thread)
            self.request.guard.start(self, self.state.run_dir)

    def _open_run(self) -> None:
        """The run directory, status record, metrics store, registry and log source, then
        the backend's ``open``."""
        request, opts, state = self.request, self.request.options, self.state
        resumed = request.resumed
        if opts.run_dir is not None and holds_run(opts.run_dir) and resumed is None:
            state.warnings.append(reused_warning(opts.run_dir))
        state.run_dir = run_dir = make_run_dir(
            self.program, opts.log_dir, opts.run_dir, opts.topology_yaml, request.record
        )
        # a run brought back (a requeued job) or submitted (listed before its job ran)
        # keeps the id it is listed by
        self.run_id = (
            (resumed.run_id if resumed else None) or index.id_of(run_dir) or index.new_run_id()
        )
        self._events = EventLog(run_dir)  # events.jsonl: the dashboard's timeline
        self._listeners.insert(0, self._events)
        net = self.backend.network()
        self.control = ControlServer(
            run_dir, lambda asked: answer(self, asked), host=net.control_host
        )
        if opts.metrics_port is not None:  # /metrics for Prometheus (topo run --metrics-port)
            from topo.supervisor.openmetrics import MetricsEndpoint

            self.endpoint = MetricsEndpoint(run_dir, self.summary, port=opts.metrics_port)
        index.register(self.run_id, run_dir, opts.log_dir)
        recorder = StatusRecorder(run_dir, self.summary)
        recorder.tick(time.monotonic())  # a record exists from the first moment
        self.metrics = MetricsStore(run_dir, state.nodes, state.warnings.append, opts.metrics_to)
        deadline = opts.default_deadline or max(
            (g.rpc.deadline_s for g in self.program.groups), default=60.0
        )
        self.registry = RegistryServer(
            new_program_id(),
            new_secret(),
            mechanism=net.mechanism,
            bind_host=net.bind_host,
            advertise_host=net.advertise_host,
            default_deadline=deadline,
            on_report=self.supervisor.node_status,
            on_metrics=self._on_metrics,
            members={e.id: e.nodes for e in self.program.executables},
        )
        write_status(run_dir, self.summary())  # names the socket directory at once
        # The backend passes on the registry's public part and each executable's grant:
        # the secret stays in this process.
        public = self.registry.info.public()
        job = JobContext(self.program, opts, public, run_dir, os.getpid(), self.registry.authority)
        self._tailer = self.backend.log_source(job, self._on_line) or LogTailer(
            self._log_files(run_dir, self.program), self._on_line, limit=opts.log_limit
        )
        self._tailer.start()
        self.supervisor.attach(run_dir, self.registry, self._tailer, recorder)
        self.applier = Applier(
            self.supervisor,
            self.backend,
            self.registry,
            run_dir,
            self._adopt,
            self._emit,
            lambda: self.phase,
            self._record_soon,
        )
        self.applier.publish_initial()
        self.snapshots = Snapshotter(
            self.program,
            run_dir,
            self.registry,
            self._node_state,
            self._on_snapshot,
            request.start_from,  # read and checked when the run was asked for
            lambda: self.phase == "running",
        )
        self.registry.service.states = self.snapshots.state_for
        self.applier.snapshots = self.snapshots
        self.applier.hazards = self._hazards
        state.started_at = time.time()
        self.backend.open(job, self.supervisor)

    def _release(self) -> None:
        """Close what ``start`` opened: the backend, the log source, registry and metrics."""
        try:
            self.backend.close()
            self.state.warnings.extend(self.backend.left_behind())
        except Exception as exc:
            self.state.warnings.append(f"backend shutdown failed: {exc!r}")
        parts = (self.snapshots, self._tailer, self.registry, self.control, self.endpoint)
        for part in (*parts, self.metrics):
            if part is not None:
                part.close()

    def stop_on_sigterm(self, reason: str = "SIGTERM") -> None:
        """Stop as a SIGTERM asks (exit 143), within what the scheduler leaves before it
        kills the whole run (``Guard.sigterm_grace``: Slurm's KillWait after scancel)."""
        guard = self.request.guard
        cap = None if guard is None else guard.sigterm_grace()
        grace = None if cap is None else min(cap, self.state.grace_s)
        self.request_stop(reason, code=143, grace_s=grace)

    def request_stop(
        self, reason: str = "stop requested", code: int = 0, grace_s: float | None = None
    ) -> None:
        """Stop the program: stop event, grace period (``grace_s``, else the run's), then
        kill. ``code`` is the exit code of a clean stop (e.g. 130 for Ctrl-C)."""
        if grace_s is not None and not self.supervisor.stopping:
            self.state.grace_s = grace_s
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
        self.supervisor.request_stop(reason, code)

    def _snapshot_then_stop(self, snap: Snapshotter, reason: str, code: int) -> None:
        try:
            if snap.running():  # (the program may have begun to stop by itself meanwhile)
                snap.try_take("at the stop")
        finally:
            self.supervisor.request_stop(reason, code)

    def snapshot_now(self, reason: str) -> str:
        """Take a snapshot now for a guard (``GuardedRun``): what happened, in words."""
        try:
            return f"snapshot {self.snapshot(reason).number} taken"
        except Exception as exc:  # (the snapshotter said why to the run already)
            return f"no snapshot: {exc}"

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
            nodes=self.state.nodes,
            exes=self.state.exes,
            phase=self.phase,
            states=self.snapshots if self.phase == "running" else None,
            restart=self.supervisor.restart,
        )

    def debug(
        self, node: str, action: str, text: str, wait_s: float, again: bool = False
    ) -> dict[str, Any]:
        """``topo debug``: read the pdb output of ``node`` at its breakpoint, or write it
        a line (``supervisor.debugging``)."""
        from topo.supervisor.debugging import debug_node

        snaps = self.snapshots
        if snaps is None or self.done:
            return {"ok": False, "error": f"the run is {self.phase}: no node is running"}
        return debug_node(node, action, text, wait_s, self.state.nodes, snaps, again)

    def node_stacks(self, names: list[str], everything: bool = False) -> dict[str, Any]:
        """The Python stacks of ``names`` (every node when empty), taken without stopping
        them (``topo stacks``; ``everything``: topo's own frames and threads too); ``ok``
        false naming a node the program lacks."""
        from topo.supervisor.stacks import node_stacks

        snaps = self.snapshots
        if snaps is None or self.done:
            return {"ok": False, "error": f"the run is {self.phase}: no node is running"}
        return node_stacks(
            names,
            self.state.nodes,
            self.state.exes,
            lambda n: n in snaps.served,
            lambda n, timeout: snaps.ask(n, "stacks-all" if everything else "stacks", timeout),
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
        status = self.state.nodes.get(node)
        return ("gone", 0, None) if status is None else (status.state, status.restarts, status.pid)

    def _on_snapshot(self, ok: bool, message: str, figures: dict[str, Any]) -> None:
        if not ok:
            self.state.warnings.append(message)
        self._emit("snapshot", message=message, ok=ok, **figures)

    # -- topo apply ---------------------------------------------------------------------
    def apply(self, program: Program, ask: ChangeAsk = ChangeAsk()) -> tuple[LivePlan, int | None]:
        """Change the running program into ``program`` (``Applier.propose``): the plan,
        and the generation of the change begun in the background (None: refused, a dry
        run, nothing to do, or it would stop the program or lose work and was not
        ``ask.confirmed``: ``plan.confirm`` says why)."""
        if self.applier is None:
            refused = (f"the run is {self.phase}: a change is applied to a running program",)
            return plan_change(self.program, program, refused), None
        return self.applier.propose(program, ask)

    def _hazards(self, plan: LivePlan, keep_state: bool) -> list[str]:
        """Why ``plan`` must be confirmed (``topo.supervisor.hazards``)."""
        from topo.supervisor.hazards import hazards

        if self.snapshots is None:
            return []
        running = self.supervisor.program  # (what the plan was made from)
        return hazards(running, plan, keep_state, self.snapshots, self.state.limiter)

    @property
    def params_given(self) -> list[str]:
        """The ``-p`` values the run's program was made with, as the last change left
        them (``topo apply`` and ``RunningProgram.apply`` start from them)."""
        return list(self._params_given)

    def _record_soon(self) -> None:
        """Write ``status.json`` on the supervisor's thread at its next turn."""
        self.supervisor.call_soon(self.record_now)

    @staticmethod
    def _log_files(run_dir: Path, program: Program) -> dict[str, Path]:
        """The logs in ``run_dir`` that ``program``'s output is in (label -> path)."""
        return log_files(run_dir, (n.id for n in program.nodes), program.executables)

    def _adopt(self, program: Program, source: dict[str, Any]) -> None:
        """The run's program is ``program`` from now on: the launcher's view, snapshots,
        the grace period (unless the run was given one) and the run directory's record
        (``source``: the file and parameters it came from)."""
        self.program = program
        self.state.program_name = program.name
        if self.request.options.grace_s is None:
            self.state.grace_s = program.stop.grace_s
        if self.snapshots is not None:
            self.snapshots.adopt(program)
        run_dir = self.state.run_dir
        write_program(run_dir, program)
        if self._tailer is not None:
            for label, path in self._log_files(run_dir, program).items():
                self._tailer.follow(label, path)  # (a file it follows already stays)
        if source.get("params_given") is not None:
            self._params_given = [str(t) for t in source["params_given"]]
        if source.get("params") is not None:
            record_change(
                run_dir,
                source.get("file"),
                list(source.get("params_given") or []),
                dict(source["params"]),
                source.get("topology"),
            )

    # -- the run's end -------------------------------------------------------------------
    def wait(self, timeout: float | None = None) -> int | None:
        """Block until the run ended; its exit code (None on timeout)."""
        self._done.wait(timeout)
        return self.state.exit_code if self._done.is_set() else None

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until every node reported ready once (False on timeout or end of run)."""
        end = None if timeout is None else time.monotonic() + timeout
        ready = self.state.all_ready
        while not ready.is_set() and not self._done.is_set():
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                break
            ready.wait(0.05 if left is None else min(0.05, left))
        return ready.is_set()

    @property
    def resumed(self) -> str | None:
        """How its backend brought this run back (``resumed from snapshot 3 after the
        time limit``), or None."""
        resumed = self.request.resumed
        return None if resumed is None else resumed.message

    @property
    def done(self) -> bool:
        """True once the run ended."""
        return self._done.is_set()

    def record_now(self) -> None:
        """Write ``status.json`` now (not at the recorder's next turn)."""
        write_status(self.state.run_dir, self.summary())

    @property
    def phase(self) -> str:
        """starting (until every node was up once), running, stopping, or ended."""
        if self.state.exit_code is not None:
            return "ended"
        if self.supervisor.stopping:
            return "stopping"
        return "running" if self.state.ready_at is not None else "starting"

    def pids(self) -> dict[str, int]:
        """Executable id -> pid of its current attempt (running ones)."""
        return {
            e.id: e.runner.pid
            for e in list(self.state.exes.values())
            if e.runner is not None and e.runner.pid
        }

    def summary(self) -> dict[str, Any]:
        """The run's status now, as ``status.json`` holds it (``topo.supervisor.summary``)."""
        return run_summary(self, self._helpers)

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
        nodes = self.state.nodes
        rows, stops = split(rows, DEBUG_LABEL)  # nodes at breakpoint() or going on
        for node, at in stopped_at(stops, nodes):
            self.supervisor.mark_dirty()
            self._emit("log", node, message=said_at(self.run_id, node, at))
        rows, figures = split(rows)
        for row in figures:  # call figures (topo.runtime.callstats): status.json only
            found = checked(row, nodes)
            if found is not None:
                nodes[found[0]].rpc = found[1]
        if figures:
            self.supervisor.mark_dirty()
        if not rows and not over:
            return
        touched = store.add(rows, over)
        for node in touched:
            nodes[node].metrics = store.latest[node]
        if touched:
            self.supervisor.metrics_changed(touched)

    def _on_line(self, label: str, line: str) -> None:
        if is_benign(line):  # still in the node's log file, not on the console
            return
        status = self.state.nodes.get(label)
        if status is not None and line.strip():
            status.last_line = line
        self._emit("log", label, message=line)

    def _supervise(self) -> None:
        try:
            while not self.supervisor.step():
                pass
        finally:
            self._finish()

    def _finish(self) -> None:
        state = self.state
        for exe in self.supervisor.running():
            state.warnings.append(f"executable {exe.id} did not report its exit")
        self._release()
        state.exit_code = self.supervisor.stop_code
        if self.request.guard is not None:
            try:  # (a requeued job: asked for again)
                self.request.guard.finish()
            except Exception as exc:
                state.warnings.append(f"{exc}")
        try:
            write_status(state.run_dir, self.summary())
        finally:
            self._emit("stopped", message=state.stop_reason, code=state.exit_code)
            if self._events is not None:
                self._events.close()
            self._done.set()
            exiting.untrack(self)
