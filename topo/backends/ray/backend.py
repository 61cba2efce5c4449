"""The ``ray`` backend: each executable is one Ray actor; nodes talk topo's RPC.

Ray places and keeps the processes; topo does the rest the same way as on every
backend. ``check`` connects to the cluster (``address``: ``auto``, ``host:port`` or
``ray://...``; none: a local Ray instance started for this run and shut down at its
end; see ``session``) and refuses, before anything starts, a placement no live node
can hold. ``open`` makes one placement group per host-colocation set (STRICT_PACK)
and per spread group (STRICT_SPREAD); the rest go with Ray's SPREAD; ``start``
creates an ``ExecutableActor`` (named after the executable, so the dashboard and
``ray list actors`` show topo's nodes) and calls its ``run``, which runs the shared
child set-up in the actor's process: nodes bind the Ray node's address and register
with the launcher's registry over CURVE.

One watcher thread follows every actor: its pid (``where``), its output (``read_logs``,
pulled into the run directory's log files) and its end (``run`` returns the exit
code; a ``RayActorError`` means the actor's process died: code -9 with the reason, and
topo's restart policy applies: actors have ``max_restarts=0``). Stopping is topo's
stop channel first (the launcher's), then ``__ray_terminate__``, then ``ray.kill``
(``runner.Ender``). Only what this backend
started is ended: its actors, its placement groups, and Ray itself if it started it
(a watchdog, ``local``, ends that Ray also when the launcher is killed).
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from typing import Any

from topo.backends.base import (
    Backend,
    BackendOption,
    ExecutableRunner,
    JobContext,
    Network,
    Sink,
    memory_not_enforced,
)
from topo.backends.grants import exe_grant
from topo.backends.logs import append_output, exe_output_path
from topo.backends.ray.actor import ExecutableActor, local_log_root
from topo.backends.ray.placement import Unit, demand, infeasible, units
from topo.backends.ray.runner import LOGS_EVERY_S, Ender, Live, RayRunner, first_line
from topo.backends.ray.session import RaySession, connect_hint
from topo.diagnostics import Diagnostic
from topo.ir import Program, dumps

POLL_S = 0.1  # how often the watcher looks at the actors
PLACEMENT_TIMEOUT_S = 60.0  # a placement group the check found feasible is ready by then
MAX_CONCURRENCY = 4  # run + read_logs + where + dump_stacks at the same time


class RayBackend(Backend):
    """Executables as Ray actors on a Ray cluster (or a local Ray started for the run)."""

    name = "ray"
    imports_here = False  # the cluster's workers may have other packages than this machine

    @classmethod
    def options(cls) -> tuple[BackendOption, ...]:
        return (
            BackendOption(
                "address",
                "the Ray cluster to join (auto, HOST:PORT or ray://...); default: a local "
                "Ray started for the run and stopped at its end",
                metavar="ADDRESS",
            ),
            BackendOption("ship", "send the working tree as the job's working_dir", bool),
        )

    @classmethod
    def placement_text(cls, program: Program, **options: Any) -> str | None:
        """The placement groups and resources each executable asks of Ray."""
        from topo.backends.ray.placement import format_ray_placement

        return format_ray_placement(program)

    def __init__(self, address: str | None = None, ship: bool = False) -> None:
        # ship: the working tree goes to every node as the job's working_dir
        self.session = RaySession(address, ship)
        self.node_ip = ""
        self.namespace = ""
        self._checked = False
        self._sink: Sink | None = None
        self._job: JobContext | None = None
        self._actor_class: Any = None
        self._init_ref: Any = None
        self._slots: dict[str, tuple[Any, int]] = {}  # exe -> (placement group, bundle)
        self._groups: list[Any] = []
        self._live: dict[tuple[str, int], Live] = {}
        self._where: dict[str, str] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._watcher: threading.Thread | None = None
        self._ender = Ender()

    # -- before anything starts ---------------------------------------------------
    def network(self) -> Network:
        if not self.node_ip:
            import ray

            self.node_ip = str(ray.util.get_node_ip_address())
        return Network(bind_host=self.node_ip, mechanism="curve")

    def check(self, program: Program) -> list[Diagnostic]:
        try:
            import ray
        except ImportError as exc:
            return [Diagnostic(f"the ray backend needs ray ({exc}); install topo-launch[ray]")]
        where = self.session.address or "a new local Ray instance"
        try:
            self.session.connect()
        except Exception as exc:
            self.session.disconnect()
            return [
                Diagnostic(
                    f"cannot reach the Ray cluster at {where}: {first_line(exc)}",
                    hint=connect_hint(exc),
                )
            ]
        alive = [n for n in ray.nodes() if n.get("Alive")]
        found = infeasible(program, [dict(n.get("Resources", {})) for n in alive])
        if found:
            self.session.disconnect()
            return found
        self.node_ip = str(ray.util.get_node_ip_address())
        # pids are this machine's when every node is this machine (one-node Ray)
        self.local_pids = {n.get("NodeManagerAddress") for n in alive} == {self.node_ip}
        self._checked = True
        return memory_not_enforced(program, self.name, "Ray's memory is a scheduling hint")

    # -- running --------------------------------------------------------------------
    def open(self, job: JobContext, sink: Sink) -> None:
        import ray

        if not self._checked:
            raise RuntimeError("the ray backend was not checked (Launcher runs check first)")
        self._sink = sink
        self._job = job
        program = job.program
        self.namespace = f"topo-{program.name}-{job.registry.program_id}"
        self._actor_class = ray.remote(ExecutableActor)
        init = {
            "program_json": dumps(program),
            "registry": vars(job.registry).copy(),
            "disable_run": job.options.disable_run,
            "sys_path": [os.getcwd(), *sys.path],
            "cwd": os.getcwd(),
            "shipped": self.session.ship,
        }
        self._init_ref = ray.put(init)
        for unit in units(program):
            if unit.strategy is not None:
                self._place(unit)
        self._watcher = threading.Thread(target=self._watch, name="topo-ray-watch", daemon=True)
        self._watcher.start()

    def _place(self, unit: Unit) -> None:
        """One placement group for a host-colocation set or a spread group, ready before
        any actor starts (the check found it feasible)."""
        import ray
        from ray.exceptions import GetTimeoutError
        from ray.util.placement_group import placement_group

        assert self._job is not None and unit.strategy is not None
        bundles = [demand(self._job.program, e) for e in unit.exes]
        group = placement_group(
            bundles, strategy=unit.strategy, name=f"{self.namespace}/{unit.name}"
        )
        self._groups.append(group)
        try:
            ray.get(group.ready(), timeout=PLACEMENT_TIMEOUT_S)
        except GetTimeoutError:
            what = "on one node" if unit.strategy == "STRICT_PACK" else "one process per node"
            raise RuntimeError(
                f"Ray could not place {unit.name!r} {what} within {PLACEMENT_TIMEOUT_S:g}s"
            ) from None
        for index, exe in enumerate(unit.exes):
            self._slots[exe] = (group, index)

    def _options(self, exe: str, attempt: int) -> dict[str, Any]:
        """The actor's Ray options: name, resources, placement; no Ray restarts."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        assert self._job is not None
        bundle = demand(self._job.program, exe)
        opts: dict[str, Any] = {
            "name": exe if attempt == 0 else f"{exe}#{attempt}",
            "namespace": self.namespace,
            "num_cpus": bundle.pop("CPU"),
            "num_gpus": bundle.pop("GPU", 0.0),
            "resources": bundle,
            "max_restarts": 0,  # topo's restart policy, the same on every backend
            "max_concurrency": MAX_CONCURRENCY,
        }
        if exe in self._slots:
            group, index = self._slots[exe]
            opts["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                group, placement_group_bundle_index=index
            )
        else:  # like the ssh backend's balancing: not all on the node of the launcher
            opts["scheduling_strategy"] = "SPREAD"
        return opts

    def start(self, exe: str, attempt: int) -> ExecutableRunner:
        assert self._sink is not None
        try:
            actor = self._actor_class.options(**self._options(exe, attempt)).remote()
            assert self._job is not None
            grant = exe_grant(self._job, exe).to_json()
            run_ref = actor.run.remote(self._init_ref, exe, attempt, grant)
        except Exception as exc:
            runner = RayRunner(exe, attempt, None, self._ender)
            self._sink.exited(exe, attempt, 0, -9, f"its Ray actor could not be created: {exc}")
            return runner
        output = None
        if self._job is not None:  # where the watcher appends the actor's output
            output = exe_output_path(self._job.run_dir, self._job.program, exe)
        runner = RayRunner(exe, attempt, actor, self._ender, output)
        with self._lock:
            self._live[(exe, attempt)] = Live(runner, run_ref, actor.where.remote())
        return runner

    def location(self, exe: str) -> str | None:
        return self._where.get(exe)

    def helper_pids(self) -> list[int]:
        """Ray's head processes and their watchdog, when this backend started Ray (gone
        after ``close``)."""
        return self.session.helper_pids()

    # -- the watcher ----------------------------------------------------------------
    def _watch(self) -> None:
        """The watcher thread: one bad round (Ray hiccup) is reported, not fatal."""
        next_logs = 0.0
        while not self._closed.is_set():
            try:
                next_logs = self._watch_round(next_logs)
            except Exception as exc:
                print(f"topo: ray backend: watcher error: {exc!r}", file=sys.stderr, flush=True)
                self._closed.wait(POLL_S)

    def _watch_round(self, next_logs: float) -> float:
        """Handle what is ready (pids, output, ends); pull output every ``LOGS_EVERY_S``."""
        import ray

        self._ender.reap()
        with self._lock:
            lives = list(self._live.values())
        refs: dict[Any, tuple[Live, str]] = {}
        for live in lives:
            if live.where_ref is not None:
                refs[live.where_ref] = (live, "where")
            if live.log_ref is not None:
                refs[live.log_ref] = (live, "logs")
            refs[live.run_ref] = (live, "run")
        if not refs:
            self._closed.wait(POLL_S)
            return next_logs
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=POLL_S)
        ends = []
        for ref in ready:
            live, what = refs[ref]
            if what == "where":
                self._on_where(live)
            elif what == "logs":
                self._on_logs(live)
            else:
                ends.append(live)
        if ends:
            self._on_ends(ends)
        if time.monotonic() >= next_logs:
            next_logs = time.monotonic() + LOGS_EVERY_S
            for live in lives:
                if live.log_ref is None and live.runner.pid and live not in ends:
                    live.log_ref = live.runner.actor.read_logs.remote()
        return next_logs

    def _on_where(self, live: Live) -> None:
        import ray

        ref: Any = live.where_ref
        live.where_ref = None
        try:
            pid, node_ip = ray.get(ref)
        except Exception:  # the actor died first: its run() says how
            return
        runner = live.runner
        runner.pid, runner.node_ip = int(pid), str(node_ip)
        self._where[runner.exe] = runner.node_ip
        assert self._sink is not None
        self._sink.started(runner.exe, runner.attempt, runner.pid)

    def _on_logs(self, live: Live) -> None:
        import ray

        ref: Any = live.log_ref
        live.log_ref = None
        try:
            chunks: dict[str, str] = ray.get(ref)
        except Exception:  # the actor is gone: what it wrote last is lost with it
            return
        for label, text in chunks.items():
            self._append(label, text)

    def _on_ends(self, ends: list[Live]) -> None:
        """``run`` returned (the exit code) or raised (the actor died), for each of
        ``ends``; the last output of those that ran to their end is pulled for all of them
        at once (a stop ends every actor in the same round), then they are ended."""
        import ray
        from ray.exceptions import RayActorError

        outcomes: list[tuple[Live, int, str]] = []
        pulls: list[tuple[Any, Live]] = []  # in order: an earlier pull first, then the last
        for live in ends:
            reason = ""
            try:
                code = int(ray.get(live.run_ref))
            except RayActorError as exc:
                code = -9
                if not live.runner.killed:
                    reason = f"its Ray actor died: {first_line(exc)}"
            except Exception as exc:
                code, reason = 1, f"its Ray actor failed: {first_line(exc)}"
            outcomes.append((live, code, reason))
            if code >= 0:  # it ran to its end: its last lines, then the process goes
                if live.log_ref is not None:
                    pulls.append((live.log_ref, live))
                pulls.append((live.runner.actor.read_logs.remote(True), live))
                live.log_ref = None
        if pulls:
            ray.wait([ref for ref, _ in pulls], num_returns=len(pulls), timeout=5.0)
        for ref, _ in pulls:
            try:
                chunks: dict[str, str] = ray.get(ref, timeout=0)
            except Exception:  # the actor is gone, or too slow: its last lines are lost
                continue
            for label, text in chunks.items():
                self._append(label, text)
        assert self._sink is not None
        for live, code, reason in outcomes:
            runner = live.runner
            if code >= 0:
                self._ender.end(runner.actor)
            with self._lock:
                self._live.pop((runner.exe, runner.attempt), None)
            self._sink.exited(runner.exe, runner.attempt, runner.pid, code, reason)

    def _append(self, label: str, text: str) -> None:
        """Pulled output into the run directory's log file of a node or executable."""
        assert self._job is not None
        append_output(
            self._job.run_dir, self._job.program, label, text, self._job.options.log_limit
        )

    def close(self) -> None:
        import ray

        self._closed.set()
        if self._watcher is not None:
            self._watcher.join(5)
        with self._lock:
            left = list(self._live.values())
            self._live.clear()
        try:
            if ray.is_initialized():
                self._ender.finish()
                for live in left:
                    if live.runner.actor is not None:
                        ray.kill(live.runner.actor, no_restart=True)
                from ray.util.placement_group import remove_placement_group

                for group in self._groups:
                    remove_placement_group(group)
        finally:
            self._groups.clear()
            if self._job is not None:  # what killed actors on this machine left
                root = local_log_root(self._job.registry.program_id)
                shutil.rmtree(root, ignore_errors=True)
                try:
                    root.parent.rmdir()  # the last run on this machine: no empty dir left
                except OSError:
                    pass
            self.session.disconnect()
