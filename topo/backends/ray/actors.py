"""The launcher's side of the executables that run in a Ray actor of their own
(``actor.ExecutableActor``): those that ask for GPUs, which Ray assigns to its own
workers only.

``start`` creates the actor in its executable's bundle (named after the executable, so
``ray list actors`` and the dashboard show it) and calls its ``run``. One thread follows
every actor: its pid (``where``), its output (``read_logs``, pulled into the run
directory's log files) and its end (``run`` returns the exit code; a ``RayActorError``
means the actor's process died: code -9 with the reason, and topo's restart policy
applies: actors have ``max_restarts=0``). An ended actor is asked to exit, then
``ray.kill``ed (``runner.Ender``).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from topo.backends.base import ExecutableRunner, JobContext
from topo.backends.grants import exe_grant
from topo.backends.ray.actor import ExecutableActor
from topo.backends.ray.groups import Reservations
from topo.backends.ray.placement import demand
from topo.backends.ray.runner import LOGS_EVERY_S, Ender, Live, RayRunner, first_line
from topo.backends.ray.session import actor_runtime_env
from topo.backends.ray.update import RayInits
from topo.backends.remote.fleet import Fleet
from topo.rundir.layout import exe_output_path

POLL_S = 0.1  # how often the thread looks at the actors
MAX_CONCURRENCY = 4  # run + read_logs + where + dump_stacks at the same time


class ActorPool:
    """The actors of one run's executables that have Ray actors of their own."""

    def __init__(
        self, fleet: Fleet, reservations: Reservations, namespace: str, inits: RayInits
    ) -> None:
        import ray

        self._fleet = fleet  # the run's job (changed by topo apply), sink and output
        self._reservations = reservations
        self._namespace = namespace
        self._inits = inits
        self._class: Any = ray.remote(ExecutableActor)
        self._live: dict[tuple[str, int], Live] = {}
        self._where: dict[str, str] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._ender = Ender()
        self._thread: threading.Thread | None = None

    def _options(self, job: JobContext, exe: str, attempt: int) -> dict[str, Any]:
        """The actor's Ray options: name, its bundle's resources and place; no Ray
        restarts."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        bundle = demand(job.program, exe)
        group, index = self._reservations.slot(exe)
        return {
            "name": exe if attempt == 0 else f"{exe}#{attempt}",
            "namespace": self._namespace,
            "num_cpus": bundle.pop("CPU"),
            "num_gpus": bundle.pop("GPU", 0.0),
            "resources": bundle,
            "max_restarts": 0,  # topo's restart policy, the same on every backend
            "max_concurrency": MAX_CONCURRENCY,
            "runtime_env": actor_runtime_env(),
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                group, placement_group_bundle_index=index
            ),
        }

    def start(self, exe: str, attempt: int) -> ExecutableRunner:
        job = self._fleet.job  # (actors started from now on run the program as it is now)
        try:
            actor = self._class.options(**self._options(job, exe, attempt)).remote()
            grant = exe_grant(job, exe).to_json()
            run_ref = actor.run.remote(self._inits.get(job)[1], exe, attempt, grant)
        except Exception as exc:
            runner = RayRunner(exe, attempt, None, self._ender)
            why = f"its Ray actor could not be created: {exc}"
            self._fleet.sink.exited(exe, attempt, 0, -9, why)
            return runner
        output = exe_output_path(job.run_dir, job.program.executable_index[exe])
        runner = RayRunner(exe, attempt, actor, self._ender, output)
        with self._lock:
            self._live[(exe, attempt)] = Live(runner, run_ref, actor.where.remote())
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="topo-ray-actors", daemon=True
                )
                self._thread.start()
        return runner

    def location(self, exe: str) -> str | None:
        return self._where.get(exe)

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
        self._fleet.sink.started(runner.exe, runner.attempt, runner.pid)

    def _on_logs(self, live: Live) -> None:
        import ray

        ref: Any = live.log_ref
        live.log_ref = None
        try:
            chunks: dict[str, str] = ray.get(ref)
        except Exception:  # the actor is gone: what it wrote last is lost with it
            return
        for label, text in chunks.items():
            self._fleet.output.append(label, text)

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
                self._fleet.output.append(label, text)
        for live, code, reason in outcomes:
            runner = live.runner
            if code >= 0:
                self._ender.end(runner.actor)
            with self._lock:
                self._live.pop((runner.exe, runner.attempt), None)
            self._fleet.sink.exited(runner.exe, runner.attempt, runner.pid, code, reason)

    def close(self) -> None:
        """Stop following; end every actor still there (asked, then ``ray.kill``)."""
        import ray

        self._closed.set()
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            left = list(self._live.values())
            self._live.clear()
        if not ray.is_initialized():
            return
        self._ender.finish()
        for live in left:
            if live.runner.actor is not None:
                try:
                    ray.kill(live.runner.actor, no_restart=True)
                except Exception:
                    pass
