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

A change to the running program (``topo apply``) reserves bundles for what it adds only,
around what runs (``growth``: checked against the live nodes' free resources first), hands
every agent the new program, and releases the bundles of executables that left once they
ended (``groups``); nothing that runs is moved or restarted by the backend.

A node that dies takes its agent (Ray reports the actor dead): its executables count as
killed and their restart policy applies, on the live node Ray moved their bundles to.
Only what this backend started is ended: its agents and actors, its placement groups,
and Ray itself if it started it (a watchdog, ``local``, ends that Ray also when the
launcher is killed).
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import replace
from typing import Any

from topo.backends.base import Backend, BackendOption, ExecutableRunner, JobContext, Network, Sink
from topo.backends.ray.actor import local_log_root
from topo.backends.ray.actors import ActorPool
from topo.backends.ray.agents import RayAgents
from topo.backends.ray.groups import Reservations
from topo.backends.ray.growth import additions, plan_growth
from topo.backends.ray.placement import infeasible, memory_unenforced, own_actor
from topo.backends.ray.runner import first_line
from topo.backends.ray.session import RaySession, connect_hint
from topo.backends.ray.update import RayInits, Tracked, live_nodes
from topo.backends.remote.fleet import Fleet
from topo.diagnostics import Diagnostic
from topo.ir import Program


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
        self._tracked: Tracked | None = None
        self._reservations: Reservations | None = None
        self._inits = RayInits(ship)
        self._agents: RayAgents | None = None
        self._fleet: Fleet | None = None
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
        if not self._checked:
            raise RuntimeError("the ray backend was not checked (Launcher runs check first)")
        self._job = job
        program = job.program
        self.namespace = f"topo-{program.name}-{job.registry.program_id}"
        self._reservations = Reservations(program, self.namespace)
        self._reservations.reserve()
        self._tracked = Tracked(sink, self._reservations.vacated)
        self._agents = RayAgents(self._reservations, self.namespace, self._inits)
        self._fleet = Fleet(job, self._tracked, self._agents)
        self._actors = ActorPool(self._fleet, self._reservations, self.namespace, self._inits)
        self._agents.open([e.id for e in program.executables if not own_actor(program, e.id)])

    def start(self, exe: str, attempt: int) -> ExecutableRunner:
        assert self._job is not None and self._fleet is not None and self._actors is not None
        assert self._tracked is not None
        self._tracked.started_attempt(exe, attempt)
        if own_actor(self._job.program, exe):
            return self._actors.start(exe, attempt)
        runner = self._fleet.runner(exe, attempt)
        self._fleet.hold(runner)  # the agents' thread sends it to its bundle's node
        return runner

    # -- topo apply -------------------------------------------------------------------
    can_update = True

    def check_update(self, program: Program) -> list[Diagnostic]:
        """Whether the live nodes' free resources hold what the change adds (the running
        executables keep what they reserved); nothing changes."""
        if self._job is None or self._reservations is None:
            return [Diagnostic("the ray backend runs no program to change")]
        adding = additions(self._job.program, program)
        if not adding:
            return memory_unenforced(program)
        free, ips = live_nodes()
        _, errors = plan_growth(program, adding, self._reservations.nodes(), free, ips)
        return errors or memory_unenforced(program)

    def update(self, program: Program) -> None:
        """Bundles for what the change adds (``RuntimeError`` if Ray cannot place them
        now: nothing is changed then), the new program to every agent and to the actors
        started from now on; the bundles of executables that leave are released once
        they end."""
        assert self._job is not None and self._reservations is not None
        assert self._fleet is not None and self._actors is not None
        assert self._tracked is not None
        running, reservations = self._job.program, self._reservations
        adding = additions(running, program)
        if adding:
            free, ips = live_nodes()
            requests, errors = plan_growth(program, adding, reservations.nodes(), free, ips)
            if errors:
                why = "; ".join(d.message for d in errors)
                raise RuntimeError(f"Ray cannot place what the change adds now: {why}")
            reservations.add(program, requests)
        job = replace(self._job, program=program)
        self._job = job
        self._fleet.update(job)  # (and the actors started from now on)
        leaving = [e.id for e in running.executables if e.id not in program.executable_index]
        reservations.leave(leaving)
        idle = [e for e in reservations.vacating() if not self._tracked.running(e)]
        for exe in idle:  # nothing of it runs: no end will come to release its bundle
            reservations.vacated(exe)

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
        if self.local_pids and self._fleet is not None:
            pids += self._fleet.helper_pids()
        return pids

    def close(self) -> None:
        import ray

        try:
            for pool in (self._fleet, self._actors):
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
