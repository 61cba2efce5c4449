"""The ``ssh`` backend: one topology across the hosts of an inventory.

Before anything starts (``check``): executables are placed on hosts (labels,
colocation, then balanced spread), every host is connected to (one asyncssh
connection each), optionally gets the working tree (``--ship``), and is checked
(python, topo version, target modules); all failing hosts are reported at once.

``open`` starts one agent per host (``topo.backends.ssh.agent``: a remote fork
server) over its connection; ``start`` asks the executable's host to fork it.
Nodes bind their host's own address and reach the launcher's registry, which binds
an address the hosts can reach, over CURVE with the run's keys. Agents stream
process events and log lines back; the log lines land in the run directory's log
files, where the launcher's usual log source picks them up.

A host whose agent goes quiet (cut off) or whose channel breaks is lost: its
executables count as exited (killed) so their restart policy applies, on a host
that fits. The agents end everything they started when the launcher goes away.
"""

from __future__ import annotations

import os
import socket
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
from topo.backends.logs import append_output, safe_name
from topo.backends.ssh.hostcheck import CHECK_TIMEOUT_S, check_script, host_diagnostics, judge
from topo.backends.ssh.inventory import HostSpec, Inventory, load_inventory
from topo.backends.ssh.placement import Placement, format_placement, place
from topo.backends.worker import target_modules
from topo.diagnostics import Diagnostic, TopoError
from topo.ir import Program, dumps

LEASE_S = 5.0  # an agent that hears nothing for this long ends; a host silent as long is lost


def reachable_address(address: str, port: int = 22) -> str:
    """This machine's address on the route to ``address`` (what that host can reach)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((address, port))  # no packet is sent: only the route is looked up
        return str(probe.getsockname()[0])
    finally:
        probe.close()


def _is_local_address(address: str) -> bool:
    """Whether this machine can listen on ``address``."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
    except OSError:
        return False
    return True


class _RemoteRunner(ExecutableRunner):
    def __init__(self, backend: SshBackend, exe: str, attempt: int, host: str) -> None:
        self.exe = exe
        self.attempt = attempt
        self.pid = 0
        self.host = host
        self.known = threading.Event()
        self._backend = backend

    def kill(self) -> None:
        channel = self._backend.channels.get(self.host)
        if channel is None or channel.ended:
            return
        self.known.wait(5)
        channel.send(t="kill", exe=self.exe, attempt=self.attempt)

    def dump_stacks(self, node: str) -> str:
        channel = self._backend.channels.get(self.host)
        if channel is None or channel.ended or not self.pid:
            return ""
        channel.send(t="stacks", exe=self.exe, attempt=self.attempt)
        time.sleep(0.5)  # let the dump travel back before the kill that follows
        return f"(the stacks of its threads are in its log, logs/{safe_name(node)}.log)"


class SshBackend(Backend):
    """Executables as processes on SSH hosts, forked by one agent per host."""

    name = "ssh"
    local_pids = False  # the tests check the hosts themselves (ip netns pids)

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
        self._runners: dict[tuple[str, int], _RemoteRunner] = {}
        self._lock = threading.Lock()
        self._sink: Sink | None = None
        self._job: JobContext | None = None
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
        bind = self.network().bind_host
        if not _is_local_address(bind):
            where = self.inventory.path or "the inventory"
            return [
                Diagnostic(
                    f"launcher_address {bind} is not an address of this machine, so the "
                    "launcher cannot listen there for its hosts",
                    hint=f"set launcher_address in {where} to this machine's address "
                    "on the hosts' network",
                )
            ]
        try:
            from topo.backends.ssh.session import Sessions
        except ImportError as exc:
            return [Diagnostic(f"the ssh backend needs asyncssh ({exc}); install topo[ssh]")]
        self.sessions = Sessions()
        failed = self.sessions.connect(list(self.hosts.values()))
        ok = {n: h for n, h in self.hosts.items() if n not in failed}
        if self.ship and ok:
            from topo.backends.ssh.ship import ship

            failed.update(ship(self.sessions, ok, Path.cwd()))
            ok = {n: h for n, h in ok.items() if n not in failed}
        script = check_script(target_modules(program))
        commands = {n: self._command(h, ["-c", script]) for n, h in ok.items()}
        for name, (status, out, err) in self.sessions.run_all(commands, CHECK_TIMEOUT_S).items():
            why = judge(self.hosts[name], status, out, err)
            if why:
                failed[name] = why
        if failed:
            self.sessions.close()
            self.sessions = None
            order = [n for n in self.hosts if n in failed]
            return host_diagnostics({n: failed[n] for n in order}, self.hosts)
        return []

    def _command(self, host: HostSpec, args: list[str]) -> str:
        """``host``'s python with ``args``, with the project on its path."""
        from topo.backends.ssh.session import remote_command
        from topo.backends.ssh.ship import project_dir

        path = project_dir(host) if self.ship else os.getcwd()
        return remote_command(host, [host.python, *args], {"PYTHONPATH": path})

    # -- running --------------------------------------------------------------------
    def open(self, job: JobContext, sink: Sink) -> None:
        if self.sessions is None or self.placement is None:  # check() refused or not called
            raise RuntimeError("the ssh backend was not checked (Launcher runs check first)")
        self._sink = sink
        self._job = job
        agents_dir = job.run_dir / "agents"
        agents_dir.mkdir(exist_ok=True, mode=0o700)
        init = {
            "program_json": dumps(job.program),
            "registry": vars(job.registry).copy(),
            "disable_run": job.options.disable_run,
            "modules": target_modules(job.program),
            "lease_s": self.lease_s,
        }
        for name, host in self.hosts.items():
            try:
                channel = self.sessions.open_channel(
                    name,
                    self._command(host, ["-m", "topo.backends.ssh.agent"]),
                    lambda msg, name=name: self._on_message(name, msg),
                    lambda why, name=name: self._host_lost(name, why),
                    agents_dir / f"{safe_name(name)}.log",
                    self.lease_s,
                )
            except Exception as exc:  # the connection broke since the check: host lost
                from topo.backends.ssh.session import describe_error

                self.lost[name] = f"its agent could not start: {describe_error(exc)}"
                with open(agents_dir / f"{safe_name(name)}.log", "a") as log:
                    log.write(f"topo: host {name} lost before the start: {self.lost[name]}\n")
                continue
            run_dir = f"{host.workdir.rstrip('/')}/runs/{job.run_dir.name}/{safe_name(name)}"
            channel.send(t="init", address=host.address, run_dir=run_dir, **init)
            self.channels[name] = channel
            self.alive.add(name)
        if not self.alive:
            why = "; ".join(f"{h}: {w}" for h, w in self.lost.items())
            raise RuntimeError(f"no host could start an agent ({why})")

    def start(self, exe: str, attempt: int) -> ExecutableRunner:
        assert self.placement is not None and self._sink is not None
        with self._lock:
            host = self.placement.relocate(exe, set(self.alive))
        runner = _RemoteRunner(self, exe, attempt, host or "")
        if host is None:
            self._sink.exited(exe, attempt, 0, -9, "cannot start: no live host fits it")
            return runner
        with self._lock:
            self._runners[(exe, attempt)] = runner
        self.channels[host].send(t="spawn", exe=exe, attempt=attempt)
        return runner

    def location(self, exe: str) -> str | None:
        if self.placement is None:
            return None
        return self.placement.host_of(exe)

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

    def _append(self, label: str, data: str) -> None:
        """Streamed lines into the run directory's log file of a node or executable."""
        assert self._job is not None
        append_output(
            self._job.run_dir, self._job.program, label, data, self._job.options.log_limit
        )

    def _host_lost(self, host: str, why: str) -> None:
        """``host``'s agent is gone: its executables count as killed (restart policy)."""
        self.alive.discard(host)
        if self._closing or self._sink is None:
            return
        self.lost[host] = why
        with self._lock:
            gone = [r for r in self._runners.values() if r.host == host]
            for r in gone:
                self._runners.pop((r.exe, r.attempt), None)
        for r in gone:
            self._sink.exited(r.exe, r.attempt, r.pid, -9, f"was lost with host {host}: {why}")

    def close(self) -> None:
        self._closing = True
        for channel in self.channels.values():
            channel.send(t="shutdown")
        for channel in self.channels.values():
            channel.close()
        self.channels.clear()
        if self.sessions is not None:
            self.sessions.close()
            self.sessions = None
