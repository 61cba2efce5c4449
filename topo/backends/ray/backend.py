"""The ``ray`` backend: a topo agent on each Ray node forks that node's executables;
nodes talk topo's RPC.

Ray places, reserves and watches; topo does the rest the same way as on every backend.
``check`` connects to the cluster (``address``: ``auto``, ``host:port`` or ``ray://...``;
none: a local Ray instance started for this run and shut down at its end; see
``session``) and refuses, before anything starts, a placement no live node can hold.
``open`` reserves every executable's resources in placement groups (``groups``: one
STRICT_PACK group per host-colocation set, one STRICT_SPREAD group per spread group, one
SPREAD group for the rest) and starts one agent actor on each Ray node that holds
executables (``agents``, ``agent``): it forks them from topo's fork server, as the procs
and ssh backends do, so a hundred executables cost four Ray workers on four nodes, not a
hundred. An executable that asks for GPUs runs in a Ray actor of its own instead
(``actors``), because Ray assigns devices only to its own workers. Nodes bind the Ray
node's address and register with the launcher's registry over CURVE.

A node that dies takes its agent (Ray reports the actor dead): its executables count as
killed and their restart policy applies, on the live node Ray moved their bundles to.
Only what this backend started is ended: its agents and actors, its placement groups,
and Ray itself if it started it (a watchdog, ``local``, ends that Ray also when the
launcher is killed).
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

from topo.backends.base import (
    Backend,
    BackendOption,
    ExecutableRunner,
    JobContext,
    Network,
    Sink,
)
from topo.backends.logs import append_output
from topo.backends.ray.actor import local_log_root
from topo.backends.ray.actors import ActorPool
from topo.backends.ray.agents import AgentPool
from topo.backends.ray.groups import Reservations
from topo.backends.ray.placement import infeasible, memory_unenforced, own_actor, threads
from topo.backends.ray.runner import first_line
from topo.backends.ray.session import RaySession, connect_hint
from topo.diagnostics import Diagnostic
from topo.ir import Program, dumps


class RayBackend(Backend):
    """Executables on a Ray cluster (or a local Ray started for the run), forked by an
    agent actor per Ray node (in an actor of their own when they ask for GPUs)."""

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
        self.local_pids = True  # check() says whether every Ray node is this machine
        self._job: JobContext | None = None
        self._reservations: Reservations | None = None
        self._agents: AgentPool | None = None
        self._actors: ActorPool | None = None

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
        return memory_unenforced(program)

    # -- running --------------------------------------------------------------------
    def open(self, job: JobContext, sink: Sink) -> None:
        import ray

        from topo.backends.worker import target_modules

        if not self._checked:
            raise RuntimeError("the ray backend was not checked (Launcher runs check first)")
        self._job = job
        program = job.program
        self.namespace = f"topo-{program.name}-{job.registry.program_id}"
        init = {
            "program_json": dumps(program),
            "registry": vars(job.registry).copy(),
            "disable_run": job.options.disable_run,
            "modules": target_modules(program),
            "sys_path": [os.getcwd(), *sys.path],
            "cwd": os.getcwd(),
            "shipped": self.session.ship,
            "threads": threads(program),
        }
        init_ref = ray.put(init)
        self._reservations = Reservations(program, self.namespace)
        self._reservations.reserve()
        pools = (job, sink, self._reservations, init_ref, self.namespace, self._append)
        self._actors = ActorPool(*pools)
        self._agents = AgentPool(*pools)
        self._agents.open([e.id for e in program.executables if not own_actor(program, e.id)])

    def start(self, exe: str, attempt: int) -> ExecutableRunner:
        assert self._job is not None and self._agents is not None and self._actors is not None
        if own_actor(self._job.program, exe):
            return self._actors.start(exe, attempt)
        return self._agents.start(exe, attempt)

    def location(self, exe: str) -> str | None:
        for pool in (self._agents, self._actors):
            where = None if pool is None else pool.location(exe)
            if where:
                return where
        return None

    def helper_pids(self) -> list[int]:
        """Ray's head processes and their watchdog, when this backend started Ray; the
        agents and their fork servers when every Ray node is this machine."""
        pids = self.session.helper_pids()
        if self.local_pids and self._agents is not None:
            pids += self._agents.pids()
        return pids

    def _append(self, label: str, text: str) -> None:
        """Pulled output into the run directory's log file of a node or executable."""
        assert self._job is not None
        append_output(
            self._job.run_dir, self._job.program, label, text, self._job.options.log_limit
        )

    def close(self) -> None:
        import ray

        try:
            for pool in (self._agents, self._actors):
                if pool is not None:
                    try:
                        pool.close()
                    except Exception as exc:
                        print(f"topo: ray backend: {first_line(exc)}", file=sys.stderr, flush=True)
            if self._reservations is not None and ray.is_initialized():
                self._reservations.remove()
        finally:
            if self._job is not None:  # what killed agents on this machine left
                root = local_log_root(self._job.registry.program_id)
                shutil.rmtree(root, ignore_errors=True)
                try:
                    root.parent.rmdir()  # the last run on this machine: no empty dir left
                except OSError:
                    pass
            self.session.disconnect()
