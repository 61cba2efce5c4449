"""The ``slurm`` backend: one topology inside a Slurm allocation.

Before anything starts (``check``): the job this process runs in is read
(``allocation.current``: ``SLURM_JOB_ID``, its nodes -- of every component of a
heterogeneous job --, their addresses and features) and the executables are placed on
its nodes (``placement``; in a heterogeneous job, on the component sized for them:
``components``); outside an allocation, or without Slurm, one message says why and
what to do. The request options (partition, time, ...: ``options.OPTIONS``) size a job
that topo submits; inside a job they change nothing, and a warning says so.

Running: one agent per node of the job, each an ``srun`` step (``agents.SrunAgents``,
the remote core's transport); the rest -- forking executables with their grants, their
events and logs into the run directory, agents that die, nodes lost, restarts
elsewhere, the end -- is the remote core's (``topo.backends.remote``), as on ssh. Nodes
bind their node's address and reach the launcher's registry, which binds the address of
the launcher's node (or its route to the job's first node), over CURVE; the launcher's
control channel listens there on TCP, so that other shells -- on the login node too --
operate the run.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from topo.backends.base import (
    BackendOption,
    Guard,
    JobContext,
    Network,
    Sink,
)
from topo.backends.device_plan import init_ids
from topo.backends.devices import Assigned
from topo.backends.remote.fleet import Fleet
from topo.backends.remote.hosted import HostedBackend
from topo.backends.slurm.agents import SrunAgents
from topo.backends.slurm.allocation import Allocation, NoAllocation, current, route_to
from topo.backends.slurm.components import planned_nodes
from topo.backends.slurm.demand import tpu_refusals
from topo.backends.slurm.options import DEFAULT_WARNING_S
from topo.backends.slurm.placement import (
    Placement,
    as_held,
    as_inventory,
    job_devices,
    place_in,
)
from topo.diagnostics import Diagnostic, TopoError
from topo.ir import Program

if TYPE_CHECKING:
    from topo.backends.slurm.guard import JobGuard

LEASE_S = 5.0  # an agent that hears nothing for this long ends; a node silent as long is lost


class SlurmBackend(HostedBackend):
    """Executables as processes on the nodes of a Slurm job, forked by one agent per node."""

    name = "slurm"
    local_pids = False  # the nodes' pids are on their nodes

    @classmethod
    def options(cls) -> tuple[BackendOption, ...]:
        from topo.backends.slurm.options import OPTIONS

        return OPTIONS

    @classmethod
    def placement_text(cls, program: Program, **options: Any) -> str | None:
        """The job ``topo run -b slurm`` would submit for ``program`` (its sbatch script)."""
        from topo.backends.slurm.plan import plan_text

        return plan_text(program, **options)

    @classmethod
    def submission(cls, **options: Any) -> Any:
        """Outside an allocation: how ``topo run`` submits the run as a job (None inside
        one: the run lives in the job as it is)."""
        from topo.backends.slurm.launch import submission

        return submission(**options)

    def __init__(
        self,
        partition: str | None = None,
        time: str | None = None,
        account: str | None = None,
        qos: str | None = None,
        constraint: str | None = None,
        warning_s: int = DEFAULT_WARNING_S,
        sbatch_args: str | None = None,
        lease_s: float = LEASE_S,
    ) -> None:
        self.request = {
            "partition": partition,
            "time": time,
            "account": account,
            "qos": qos,
            "constraint": constraint,
            "sbatch_args": sbatch_args,
        }
        self.warning_s = warning_s
        self.lease_s = lease_s
        self.allocation: Allocation | None = None
        self.placement: Placement | None = None
        self.accelerators: dict[str, Assigned] = {}  # executable -> its GPUs on its node
        self.agents: SrunAgents | None = None
        self.fleet: Fleet | None = None
        self.job_guard: JobGuard | None = None  # (``guard``: the launcher is the batch shell)

    def guard(self) -> Guard | None:
        """Where the launcher is its job's batch shell: the job's time limit and a
        preemption are met with a snapshot and a requeue, and the requeued job resumes
        (``guard.JobGuard``; its agents then report the SIGTERM of a preemption)."""
        from topo.backends.slurm.guard import job_guard

        self.job_guard = job_guard(self.warning_s)
        return self.job_guard

    # -- before anything starts ---------------------------------------------------
    def _allocation(self) -> Allocation:
        if self.allocation is None:
            self.allocation = current()
        return self.allocation

    def network(self) -> Network:
        try:
            allocation = self._allocation()
        except NoAllocation:  # (check refused the run already)
            return Network(mechanism="curve")
        if allocation.here is not None:
            bind = allocation.node(allocation.here).address
        else:  # an salloc shell on a login node: the way to the job's nodes
            bind = route_to(allocation.nodes[0].address)
        # the control channel on TCP too: topo ps / stop / snapshot from the login node
        return Network(bind_host=bind, mechanism="curve", control_host=bind)

    def check(self, program: Program) -> list[Diagnostic]:
        refused = tpu_refusals(program)
        if refused:
            return refused
        try:
            allocation = self._allocation()
        except NoAllocation as error:
            return [Diagnostic(str(error))]
        try:
            self.placement = place_in(program, allocation, planned_nodes(program, allocation))
            self.accelerators = job_devices(program, self.placement, allocation)
        except TopoError as error:
            return list(error.diagnostics)
        given = [f"--{k.replace('_', '-')}" for k, v in self.request.items() if v]
        if not given:
            return []
        return [
            Diagnostic(
                f"{', '.join(given)}: the options of the job topo submits; this run lives "
                f"in Slurm job {allocation.job} as it is, and they change nothing",
                severity="warning",
            )
        ]

    # -- running --------------------------------------------------------------------
    host_word = "node of the job"

    def host_names(self) -> Collection[str]:
        return [] if self.allocation is None else self.allocation.names

    def open(self, job: JobContext, sink: Sink) -> None:
        if self.placement is None or self.allocation is None:  # check() refused or not called
            raise RuntimeError("the slurm backend was not checked (Launcher runs check first)")
        guard = self.job_guard
        self.agents = SrunAgents(self.allocation, self.lease_s, hold_sigterm=guard is not None)
        self.agents.accelerator_ids = init_ids(self.accelerators)
        self.fleet = Fleet(job, sink, self.agents)
        if guard is not None:
            self.fleet.on_signal = lambda host, name: guard.steps_signalled(name)
        nodes = self.allocation.names
        self.fleet.open(nodes)
        if not self.fleet.hosts_up(nodes):
            why = "; ".join(f"{n}: {w}" for n, w in self.fleet.lost.items())
            raise RuntimeError(f"no node of the job could start an agent ({why})")

    def helper_pids(self) -> list[int]:
        """The agents' srun processes (on this machine)."""
        return [] if self.agents is None else self.agents.srun_pids()

    def device_of(self, exe: str) -> str | None:
        """The GPUs ``exe`` was given, by the indexes its node knows them by (``gpu 1``)."""
        got = self.accelerators.get(exe)
        node = None if self.placement is None else self.placement.where(exe)
        if got is None or node is None or self.allocation is None:
            return None
        return str(as_held(got, node, self.allocation))

    # -- topo apply -------------------------------------------------------------------
    can_update = True

    def check_update(self, program: Program) -> list[Diagnostic]:
        """The executables a change adds, placed around the running ones on the nodes up
        (the targets import here as on the nodes: one environment), within the CPUs the
        job holds on each (``room``); nothing changes."""
        from topo.backends.slurm.room import cpu_problems

        try:
            after = self._after(program)
            assert self.allocation is not None
            job_devices(program, after, self.allocation, self._kept(program))
        except TopoError as error:
            return list(error.diagnostics)
        assert self.placement is not None
        return cpu_problems(program, after, self.allocation, self._changed(program, after))

    def _kept(self, program: Program) -> dict[str, Assigned]:
        """The GPUs of the executables a change keeps running."""
        return {e: a for e, a in self.accelerators.items() if e in program.executable_index}

    def _changed(self, program: Program, after: Placement) -> set[str]:
        """The executables a change starts anew on a node (new, moved, or naming other CPUs)."""
        from topo.backends.slurm.room import named_cpus

        assert self.placement is not None and self.fleet is not None
        before, running = self.placement.assignment(), self.fleet.job.program
        return {
            e
            for e, n in after.assignment().items()
            if e in program.executable_index
            and (
                before.get(e) != n
                or e not in running.executable_index
                or named_cpus(running, e) != named_cpus(program, e)
            )
        }

    def _after(self, program: Program) -> Placement:
        from topo.backends.ssh.update import placement_after

        if self.placement is None or self.fleet is None or self.allocation is None:
            raise TopoError([Diagnostic("the slurm backend runs no program to change")])
        up = self.fleet.hosts_up(self.allocation.names)
        inventory = as_inventory(self.allocation)
        return placement_after(program, self.placement, inventory, up, self.fleet.job.program)

    def update(self, program: Program) -> None:
        """The new executables get their nodes, and every agent the new program."""
        assert self.fleet is not None
        try:
            self.placement = self._after(program)
            assert self.allocation is not None
            kept = self._kept(program)
            self.accelerators = job_devices(program, self.placement, self.allocation, kept)
        except TopoError as error:  # a node was lost since the check
            why = "; ".join(d.message for d in error.diagnostics)
            raise RuntimeError(f"the change no longer fits the nodes up: {why}") from None
        if self.agents is not None:
            self.agents.accelerator_ids = init_ids(self.accelerators)
        self.fleet.update(replace(self.fleet.job, program=program))

    def close(self) -> None:
        if self.fleet is not None:
            self.fleet.close()
        if self.agents is not None and self.fleet is not None:
            self.agents.clear(self.fleet.job)
