"""The ``ssh`` backend: one topology across the hosts of an inventory.

Before anything starts (``check``): executables are placed on hosts (labels,
colocation, then balanced spread), every host is connected to (one asyncssh
connection each), optionally gets the project's import roots (``--ship``), and is
checked (python, topo version, target modules, with the path the nodes will have: the
folders the targets import from here, or their shipped copies: ``prepare``); all
failing hosts are reported at once. ``topo apply`` (``check_update``, ``update``): what
a change adds is placed around what runs and checked on its hosts (``update``), and
every agent takes the new program.

What is the ssh backend's own is how it reaches a host -- an SSH channel per agent
(``agents.SshAgents``, the remote core's transport) -- and how it places (the
inventory, ``placement``). The rest is the remote core's (``topo.backends.remote``):
``open`` starts one agent per host (the stream agent: a remote fork server), ``start``
places the executable on a host that is up and has the fleet send it to that host's
agent; the agents stream process events and log lines back, which land in the run
directory's log files, where the launcher's usual log source picks them up. Nodes bind
their host's own address and reach the launcher's registry, which binds an address the
hosts can reach, over CURVE with the run's keys.

An agent that dies (killed, crashed: sshd reports its exit status or signal) while its
host's connection works takes its executables: they are reported lost (naming the
host, the agent's pid and how it ended) so their restart policy applies, and a new
agent starts on that host for their restarts. A host whose agents die within
``quick_s`` (5 s) of starting three times in a row (``StreamTransport``), whose agent goes
quiet (cut off), whose channel breaks or where no new agent can start is lost: its
executables count as exited (killed) so their restart policy applies, on a host that
fits, and its connection is closed. The agents end everything they started when the
launcher goes away; at the end of a run each host's run directory is removed (a lost
host's is reported: ``left_behind``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from pathlib import Path
from typing import Any

from topo.backends.base import BackendOption, JobContext, Network, Sink
from topo.backends.device_plan import Assigned, assign, format_assignment, init_ids
from topo.backends.remote.fleet import Fleet
from topo.backends.remote.hosted import HostedBackend
from topo.backends.ssh.agents import SshAgents
from topo.backends.ssh.hostcheck import reachable_address
from topo.backends.ssh.inventory import HostSpec, Inventory, load_inventory
from topo.backends.ssh.placement import Placement, format_placement, place
from topo.backends.ssh.prepare import Prepared, unreachable_bind
from topo.diagnostics import Diagnostic, TopoError
from topo.ir import Program

LEASE_S = 5.0  # an agent that hears nothing for this long ends; a host silent as long is lost


class SshBackend(HostedBackend):
    """Executables as processes on SSH hosts, forked by one agent per host."""

    name = "ssh"
    local_pids = False  # the tests check the hosts themselves (ip netns pids)
    imports_here = False  # the host check imports the targets on each host

    @classmethod
    def options(cls) -> tuple[BackendOption, ...]:
        return (
            BackendOption(
                "hosts", "the inventory of hosts to run on", Path, required=True, metavar="FILE"
            ),
            BackendOption(
                "ship",
                "copy the working tree to each host's workdir over SFTP before starting",
                bool,
            ),
        )

    @classmethod
    def placement_text(cls, program: Program, **options: Any) -> str | None:
        """The executables placed on the hosts of the inventory ``hosts``, host by host."""
        hosts = options.get("hosts")
        if hosts is None:
            raise TopoError.one("the ssh backend places executables on hosts: give hosts")
        inventory = hosts if isinstance(hosts, Inventory) else load_inventory(hosts)
        placement = place(program, inventory)
        devices = format_assignment(program, host_devices(program, placement, inventory))
        return format_placement(placement, program, inventory) + (f"\n{devices}" if devices else "")

    def __init__(
        self, hosts: str | Path | Inventory, ship: bool = False, lease_s: float = LEASE_S
    ) -> None:
        self.inventory = hosts if isinstance(hosts, Inventory) else load_inventory(hosts)
        self.ship = ship
        self.lease_s = lease_s
        self.hosts: dict[str, HostSpec] = {h.name: h for h in self.inventory.hosts}
        self.placement: Placement | None = None
        self.accelerators: dict[str, Assigned] = {}  # executable -> its devices on its host
        self._agents: SshAgents | None = None
        self.sessions: Any = None  # topo.backends.ssh.session.Sessions, imported when used
        self.prepared: Prepared | None = None  # the hosts' check: the nodes' path
        self.fleet: Fleet | None = None  # the agents, once open
        self._left: dict[str, str] = {}  # host -> the run's files left there, and why

    # -- before anything starts ---------------------------------------------------
    def network(self) -> Network:
        first = self.inventory.hosts[0]
        bind = self.inventory.launcher_address or reachable_address(first.address, first.port)
        return Network(bind_host=bind, mechanism="curve")

    def check(self, program: Program) -> list[Diagnostic]:
        try:
            self.placement = place(program, self.inventory)
            self.accelerators = host_devices(program, self.placement, self.inventory)
        except TopoError as error:
            return list(error.diagnostics)
        unbound = unreachable_bind(self.network().bind_host, self.inventory)
        if unbound:
            return unbound
        from topo.backends.ssh.prepare import prepare_hosts

        self.prepared, problems = prepare_hosts(program, self.hosts, self.ship)
        if self.prepared is None:
            return problems
        self.sessions = self.prepared.sessions
        return []

    # -- running --------------------------------------------------------------------
    def host_names(self) -> Collection[str]:
        return self.hosts

    def open(self, job: JobContext, sink: Sink) -> None:
        if self.sessions is None or self.placement is None:  # check() refused or not called
            raise RuntimeError("the ssh backend was not checked (Launcher runs check first)")
        assert self.prepared is not None
        agents = SshAgents(self.sessions, self.hosts, self.prepared, self.lease_s)
        agents.accelerator_ids = init_ids(self.accelerators)
        self._agents = agents
        self.fleet = Fleet(job, sink, agents)
        self.fleet.open(self.hosts)
        if not self.fleet.hosts_up(self.hosts):
            why = "; ".join(f"{h}: {w}" for h, w in self.fleet.lost.items())
            raise RuntimeError(f"no host could start an agent ({why})")

    # -- topo apply -------------------------------------------------------------------
    can_update = True

    def check_update(self, program: Program) -> list[Diagnostic]:
        """The executables a change adds, placed around the running ones by the start's
        rules (on hosts that are up), and the target modules it adds imported on the
        hosts that would run them; nothing changes."""
        from topo.backends.ssh.update import check_change

        fleet, placement = self.fleet, self.placement
        if placement is None or fleet is None or self.prepared is None:
            return [Diagnostic("the ssh backend runs no program to change")]
        up = fleet.hosts_up(self.hosts)
        found = check_change(
            program, fleet.job.program, placement, up, self.inventory, self.prepared
        )
        if found:
            return found
        from topo.backends.ssh.update import placement_after

        after = placement_after(program, placement, self.inventory, up, fleet.job.program)
        try:
            host_devices(program, after, self.inventory, self._kept(program))
        except TopoError as error:
            return list(error.diagnostics)
        return []

    def _kept(self, program: Program) -> dict[str, Assigned]:
        """The devices of the executables a change keeps running."""
        return {e: a for e, a in self.accelerators.items() if e in program.executable_index}

    def update(self, program: Program) -> None:
        """The new executables get their hosts, and every agent the new program (so that
        new and restarted executables fork with it; an agent started later gets it too)."""
        from topo.backends.ssh.update import placement_after

        assert self.fleet is not None and self.placement is not None
        job = self.fleet.job
        try:
            up = self.fleet.hosts_up(self.hosts)
            self.placement = placement_after(
                program, self.placement, self.inventory, up, job.program
            )
            self.accelerators = host_devices(
                program, self.placement, self.inventory, self._kept(program)
            )
        except TopoError as error:  # a host was lost since the check
            why = "; ".join(d.message for d in error.diagnostics)
            raise RuntimeError(f"the change no longer fits the hosts up: {why}") from None
        if self._agents is not None:
            self._agents.accelerator_ids = init_ids(self.accelerators)
        self.fleet.update(replace(job, program=program))

    def close(self) -> None:
        if self.fleet is not None:
            self.fleet.close()
        if self.sessions is not None:
            self._clear_run_dirs()
            self.sessions.close()
            self.sessions = None

    def _clear_run_dirs(self) -> None:
        """Remove the run's directory from every host that has one (its logs are in the
        launcher's run directory by now); note where that could not be done."""
        from topo.backends.ssh.rundirs import clear_run

        if self.fleet is None or self.sessions is None:
            return
        fleet = self.fleet
        run = fleet.job.run_dir.name
        self._left.update(clear_run(self.sessions, self.hosts, fleet.greeted, fleet.lost, run))

    def left_behind(self) -> list[str]:
        """The hosts that keep this run's directory (lost, or it could not be removed)."""
        return [self._left[h] for h in sorted(self._left)]


def host_devices(
    program: Program,
    placement: Placement,
    inventory: Inventory,
    kept: dict[str, Assigned] | None = None,
) -> dict[str, Assigned]:
    """The accelerators each executable gets on the host placement gave it."""
    host_of = {e.id: placement.host_of(e.id) for e in program.executables}
    return assign(program, host_of, {h.name: h.accelerators for h in inventory.hosts}, kept)
