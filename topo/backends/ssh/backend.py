"""The ``ssh`` backend: one topology across the hosts of an inventory.

Before anything starts (``check``): executables are placed on hosts (labels,
colocation, then balanced spread), every host is connected to (one asyncssh
connection each), optionally gets the project's import roots (``--ship``), and is
checked (python, topo version, target modules, with the path the nodes will have: the
folders the targets import from here, or their shipped copies: ``prepare``); all
failing hosts are reported at once. ``topo apply`` (``check_update``, ``update``): what
a change adds is placed around what runs and checked on its hosts (``update``), and
every agent takes the new program.

``open`` starts one agent per host (``topo.backends.ssh.agent``: a remote fork
server) over its connection; ``start`` asks the executable's host to fork it.
Nodes bind their host's own address and reach the launcher's registry, which binds
an address the hosts can reach, over CURVE with the run's keys. Agents stream
process events and log lines back; the log lines land in the run directory's log
files, where the launcher's usual log source picks them up.

An agent that dies (killed, crashed: sshd reports its exit status or signal) while
its host's connection works is replaced: its executables are reported lost (naming the
host, the agent's pid and how it ended) so their restart policy applies, and a new
agent with the same init starts on that host and takes their restarts. An agent that
dies within ``AGENT_QUICK_S`` of starting ``AGENT_QUICK_DEATHS`` times in a row, and a
host whose agent goes quiet (cut off), whose channel breaks or where no new agent can
start, is lost: its executables count as exited (killed) so their restart policy
applies, on a host that fits, and its connection is closed. The agents end everything
they started when the launcher goes away; at the end of a run each host's run
directory is removed (a lost host's is reported: ``left_behind``).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from topo.backends.base import (
    Backend,
    BackendOption,
    ExecutableRunner,
    JobContext,
    Network,
    Sink,
)
from topo.backends.grants import exe_grant
from topo.backends.logs import append_output
from topo.backends.ssh.hostcheck import reachable_address
from topo.backends.ssh.inventory import HostSpec, Inventory, load_inventory
from topo.backends.ssh.placement import Placement, format_placement, place
from topo.backends.ssh.prepare import Prepared, unreachable_bind
from topo.backends.ssh.rundirs import remote_run_dir
from topo.backends.ssh.runner import RemoteRunner as _RemoteRunner
from topo.backends.worker import target_modules
from topo.diagnostics import Diagnostic, TopoError
from topo.ir import Program, dumps
from topo.rundir.layout import AGENTS_DIR, agent_log_name, agent_log_path

LEASE_S = 5.0  # an agent that hears nothing for this long ends; a host silent as long is lost
AGENT_QUICK_S = 5.0  # an agent that dies this soon after it started died "quickly"
AGENT_QUICK_DEATHS = 3  # this many quick deaths in a row: the host is lost


class SshBackend(Backend):
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
        return format_placement(place(program, inventory), program, inventory)

    def __init__(
        self, hosts: str | Path | Inventory, ship: bool = False, lease_s: float = LEASE_S
    ) -> None:
        self.inventory = hosts if isinstance(hosts, Inventory) else load_inventory(hosts)
        self.ship = ship
        self.lease_s = lease_s
        self.hosts: dict[str, HostSpec] = {h.name: h for h in self.inventory.hosts}
        self.placement: Placement | None = None
        self.sessions: Any = None  # topo.backends.ssh.session.Sessions, imported when used
        self.channels: dict[str, Any] = {}
        self.alive: set[str] = set()
        self.lost: dict[str, str] = {}  # host -> why it was lost
        self.import_errors: dict[str, list[str]] = {}
        self.prepared: Prepared | None = None  # the hosts' check: the nodes' path
        self.agent_restarts: dict[str, int] = {}  # host -> new agents started after deaths
        self._agent_pid: dict[str, int] = {}  # host -> its current agent's pid (its hello)
        self._made: set[str] = set()  # hosts where an agent said hello (made the run's dir)
        self._left: dict[str, str] = {}  # host -> the run's files left there, and why
        self._bye: dict[str, str] = {}  # host -> why its agent said it ends
        self._gen: dict[str, int] = {}  # host -> generation of its current agent
        self._began: dict[str, float] = {}  # host -> when its current agent started
        self._quick: dict[str, int] = {}  # host -> quick deaths of its agents in a row
        self._pending: dict[str, list[_RemoteRunner]] = {}  # host -> spawns awaiting an agent
        self._init: dict[str, Any] = {}
        self._opening = {h: threading.Lock() for h in self.hosts}  # one agent start at a time
        self._runners: dict[tuple[str, int], _RemoteRunner] = {}
        self._lock = threading.Lock()
        self._sink: Sink | None = None
        self._job: JobContext | None = None
        self._previous: Program | None = None  # the program before the last change
        self._closing = False

    # -- before anything starts ---------------------------------------------------
    def network(self) -> Network:
        first = self.inventory.hosts[0]
        bind = self.inventory.launcher_address or reachable_address(first.address, first.port)
        return Network(bind_host=bind, mechanism="curve")

    def check(self, program: Program) -> list[Diagnostic]:
        try:
            self.placement = place(program, self.inventory)
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

    def _command(self, host: HostSpec, args: list[str]) -> str:
        """``host``'s python with ``args`` and the nodes' path (``prepare.Prepared``)."""
        assert self.prepared is not None
        return self.prepared.command(host, args)

    # -- running --------------------------------------------------------------------
    def open(self, job: JobContext, sink: Sink) -> None:
        if self.sessions is None or self.placement is None:  # check() refused or not called
            raise RuntimeError("the ssh backend was not checked (Launcher runs check first)")
        self._sink = sink
        self._job = job
        agents_dir = job.run_dir / AGENTS_DIR
        agents_dir.mkdir(exist_ok=True, mode=0o700)
        self._init = {
            "program_json": dumps(job.program),
            "registry": vars(job.registry).copy(),
            "disable_run": job.options.disable_run,
            "modules": target_modules(job.program),
            "lease_s": self.lease_s,
        }
        for name in self.hosts:
            why = self._open_agent(name)
            if why is None:
                self.alive.add(name)
            else:
                self.lost[name] = f"its agent could not start: {why}"
                self._note(name, f"host {name} lost before the start: {self.lost[name]}")
        if not self.alive:
            why = "; ".join(f"{h}: {w}" for h, w in self.lost.items())
            raise RuntimeError(f"no host could start an agent ({why})")

    def start(self, exe: str, attempt: int) -> ExecutableRunner:
        assert self.placement is not None and self._sink is not None
        with self._lock:
            host = self.placement.relocate(exe, set(self.alive))
            runner = _RemoteRunner(self, exe, attempt, host or "")
            if host is not None:
                self._runners[(exe, attempt)] = runner
                if host in self._pending:  # its agent is being replaced: spawn it there
                    self._pending[host].append(runner)
                else:
                    grant = self._grant(exe)
                    self.channels[host].send(t="spawn", exe=exe, attempt=attempt, grant=grant)
        if host is None:
            self._sink.exited(exe, attempt, 0, -9, "cannot start: no live host fits it")
        return runner

    def _grant(self, exe: str) -> str:
        """Executable ``exe``'s rights, for its host's agent to pass to the fork server."""
        assert self._job is not None
        return exe_grant(self._job, exe).to_json()

    def agent_pids(self) -> dict[str, int]:
        """Host -> pid (on that host) of its current agent, for hosts whose agent is up."""
        with self._lock:
            return {h: p for h, p in self._agent_pid.items() if h in self.alive}

    def location(self, exe: str) -> str | None:
        return None if self.placement is None else self.placement.where(exe)

    # -- topo apply -------------------------------------------------------------------
    can_update = True

    def check_update(self, program: Program) -> list[Diagnostic]:
        """The executables a change adds, placed around the running ones by the start's
        rules (on hosts that are up), and the target modules it adds imported on the
        hosts that would run them; nothing changes."""
        from topo.backends.ssh.update import check_change

        if self.placement is None or self._job is None or self.prepared is None:
            return [Diagnostic("the ssh backend runs no program to change")]
        with self._lock:
            placed = self.placement, set(self.alive)
        return check_change(program, self._job.program, *placed, self.inventory, self.prepared)

    def update(self, program: Program) -> None:
        """The new executables get their hosts, and every agent the new program (so that
        new and restarted executables fork with it; an agent started later gets it too)."""
        from dataclasses import replace

        from topo.backends.ssh.update import placement_after

        assert self._job is not None and self.placement is not None
        program_json, modules = dumps(program), target_modules(program)
        with self._lock:
            try:
                running = self._job.program
                placement = placement_after(
                    program, self.placement, self.inventory, self.alive, running
                )
            except TopoError as error:  # a host was lost since the check
                why = "; ".join(d.message for d in error.diagnostics)
                raise RuntimeError(f"the change no longer fits the hosts up: {why}") from None
            self._previous = self._job.program
            self._job = replace(self._job, program=program)
            self.placement = placement
            self._init.update(program_json=program_json, modules=modules)
        for host in self.hosts:
            with self._opening[host]:  # (an agent being started meanwhile got the new init)
                channel = self.channels.get(host)
                if channel is not None and not channel.ended:
                    channel.send(t="program", program_json=program_json, modules=modules)

    def _on_message(self, host: str, msg: dict[str, Any]) -> None:
        """A message from ``host``'s agent (on the SSH event loop's thread)."""
        assert self._sink is not None and self._job is not None
        t = msg.get("t")
        if t == "out":
            self._append(str(msg["label"]), str(msg["data"]))
        elif t == "started":
            key = (msg["exe"], msg["attempt"])
            runner = self._runners.get(key)
            if runner is not None:
                runner.pid = msg["pid"]
                runner.known.set()
            self._sink.started(msg["exe"], msg["attempt"], msg["pid"])
        elif t == "exited":
            with self._lock:
                self._runners.pop((msg["exe"], msg["attempt"]), None)
            code = msg.get("code")
            self._sink.exited(msg["exe"], msg["attempt"], msg["pid"], -9 if code is None else code)
        elif t == "server":
            self.import_errors[host] = list(msg.get("import_errors", []))
        elif t == "hello":
            self._agent_pid[host] = int(msg.get("pid", 0))
            self._made.add(host)
        elif t == "agentlog":  # the fork server's output there: beside the agent's own
            with open(self._agent_log(host), "a") as log:
                log.write(str(msg["data"]))
        elif t == "bye":
            self._bye[host] = str(msg.get("reason", ""))

    def _append(self, label: str, data: str) -> None:
        """Streamed lines into the run directory's log file of a node or executable (of
        the program before a change, for one the change removed)."""
        assert self._job is not None
        program = self._job.program
        known = label in program.node_index or label in program.executable_index
        if not known and self._previous is not None:
            program = self._previous
        append_output(self._job.run_dir, program, label, data, self._job.options.log_limit)

    # -- agents ---------------------------------------------------------------------
    def _agent_log(self, host: str) -> Path:
        assert self._job is not None
        return agent_log_path(self._job.run_dir, host)

    def _note(self, host: str, text: str) -> None:
        """A line from the launcher in ``host``'s agent log."""
        with open(self._agent_log(host), "a") as log:
            log.write(f"topo: {text}\n")

    def _open_agent(self, host: str) -> str | None:
        """Start an agent on ``host`` and send it the init; why it could not (None: it
        started). One at a time per host; each gets a new generation, so that the end
        of an earlier agent is not taken for the current one's."""
        from topo.backends.ssh.session import describe_error

        assert self._job is not None
        spec = self.hosts[host]
        with self._opening[host]:
            with self._lock:
                if self._closing or host in self.lost:
                    return "the run is stopping" if self._closing else self.lost[host]
                gen = self._gen[host] = self._gen.get(host, 0) + 1
                self._agent_pid.pop(host, None)
                self._bye.pop(host, None)
                self._began[host] = time.monotonic()
            try:
                channel = self.sessions.open_channel(
                    host,
                    self._command(spec, ["-m", "topo.backends.ssh.agent"]),
                    lambda msg: self._on_message(host, msg),
                    lambda why: self._host_lost(host, why, gen),
                    self._agent_log(host),
                    self.lease_s,
                    on_died=lambda how: self._agent_died(host, gen, how),
                )
            except Exception as exc:  # the connection broke: the host is lost
                return describe_error(exc)
            run_dir = remote_run_dir(spec, self._job.run_dir.name)
            channel.send(t="init", host=host, address=spec.address, run_dir=run_dir, **self._init)
            self.channels[host] = channel
        return None

    def _agent_died(self, host: str, gen: int, how: str) -> None:
        """``host``'s agent ended by itself (killed, crashed; on the SSH loop's thread):
        its executables are lost (restart policy) and a new agent starts there, unless
        its agents keep dying as soon as they start."""
        if self._closing or self._sink is None or gen != self._gen.get(host):
            return
        pid = self._agent_pid.get(host)
        bye = self._bye.get(host)
        how = f"the agent on host {host}" + (f" (pid {pid})" if pid else "") + f" {how}"
        how += f" ({bye})" if bye else ""
        see = f"see {agent_log_name(host)}"
        quick = time.monotonic() - self._began.get(host, 0.0) < AGENT_QUICK_S
        gone: list[_RemoteRunner] = []
        with self._lock:
            deaths = self._quick[host] = self._quick.get(host, 0) + 1 if quick else 0
            if deaths < AGENT_QUICK_DEATHS:
                pending = self._pending.setdefault(host, [])
                gone = [r for r in self._runners.values() if r.host == host and r not in pending]
                for r in gone:
                    self._runners.pop((r.exe, r.attempt), None)
        if deaths >= AGENT_QUICK_DEATHS:
            self._note(host, f"{how}; host {host} is lost")
            self._lose(
                host,
                f"its agent died {deaths} times within {AGENT_QUICK_S:g}s of starting "
                f"(the last: {how}; {see})",
            )
            return
        self._note(host, f"{how}; a new agent starts")
        for r in gone:
            self._sink.exited(r.exe, r.attempt, r.pid, -9, f"was lost: {how} ({see})")
        threading.Thread(
            target=self._replace_agent, args=(host, how), name="topo-ssh-agent", daemon=True
        ).start()

    def _replace_agent(self, host: str, how: str) -> None:
        """Start a new agent on ``host`` and send it the spawns that waited for it; the
        host is lost if none can start (its connection is gone)."""
        why = self._open_agent(host)
        with self._lock:
            if self._closing or host in self.lost:
                return
            channel = self.channels.get(host)
            if why is None and channel is not None:
                self.agent_restarts[host] = self.agent_restarts.get(host, 0) + 1
                if channel.ended:  # it died already: the next new agent takes the spawns
                    return
                for r in self._pending.pop(host, []):
                    channel.send(t="spawn", exe=r.exe, attempt=r.attempt, grant=self._grant(r.exe))
                return
        self._note(host, f"no new agent could start: {why}; host {host} is lost")
        self._lose(host, f"{how}, and a new agent could not start: {why}")

    def cancel_pending(self, runner: _RemoteRunner) -> bool:
        """Drop ``runner`` if it still waits for a new agent (reported exited); whether it did."""
        with self._lock:
            pending = self._pending.get(runner.host, [])
            if runner not in pending:
                return False
            pending.remove(runner)
            self._runners.pop((runner.exe, runner.attempt), None)
        assert self._sink is not None
        self._sink.exited(runner.exe, runner.attempt, 0, -9, "was stopped before it started")
        return True

    def _host_lost(self, host: str, why: str, gen: int | None = None) -> None:
        """``host``'s agent (of generation ``gen``) went quiet or its channel broke (on the
        SSH loop's thread)."""
        if gen is not None and gen != self._gen.get(host):
            return
        if self._closing or self._sink is None:
            self.alive.discard(host)
            return
        self._lose(host, why)

    def _lose(self, host: str, why: str) -> None:
        """``host`` is lost for the rest of the run: its executables (and those waiting
        for a new agent there) count as killed, so their restart policy applies elsewhere."""
        assert self._sink is not None
        with self._lock:
            self.alive.discard(host)
            self.lost[host] = why
            self._pending.pop(host, None)
            gone = [r for r in self._runners.values() if r.host == host]
            for r in gone:
                self._runners.pop((r.exe, r.attempt), None)
        if self.sessions is not None:  # nothing more goes to that host this run
            self.sessions.drop(host)
        for r in gone:
            self._sink.exited(r.exe, r.attempt, r.pid, -9, f"was lost with host {host}: {why}")

    def close(self) -> None:
        self._closing = True
        with self._lock:
            self._pending.clear()
        for host in self.hosts:  # no agent starts after this
            with self._opening[host]:
                pass
        channels = list(self.channels.values())
        for channel in channels:
            channel.send(t="shutdown")
        for channel in channels:
            channel.close()
        self.channels.clear()
        if self.sessions is not None:
            self._clear_run_dirs()
            self.sessions.close()
            self.sessions = None

    def _clear_run_dirs(self) -> None:
        """Remove the run's directory from every host that has one (its logs are in the
        launcher's run directory by now); note where that could not be done."""
        from topo.backends.ssh.rundirs import clear_run

        if self._job is None or self.sessions is None:
            return
        run = self._job.run_dir.name
        self._left.update(clear_run(self.sessions, self.hosts, self._made, self.lost, run))

    def left_behind(self) -> list[str]:
        """The hosts that keep this run's directory (lost, or it could not be removed)."""
        return [self._left[h] for h in sorted(self._left)]
