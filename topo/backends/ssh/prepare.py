"""The hosts of an ssh run made ready before anything starts: one connection each, the
project shipped (``--ship``) or found on the launcher's filesystem, and every host
checked (``hostcheck``) with the path its nodes will have; all failing hosts are
reported at once and no connection is kept then."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topo.backends.ssh.hostcheck import (
    CHECK_TIMEOUT_S,
    check_script,
    host_diagnostics,
    is_local_address,
    judge,
)
from topo.backends.ssh.inventory import HostSpec, Inventory
from topo.backends.worker import target_modules
from topo.diagnostics import Diagnostic
from topo.ir import Program
from topo.targets import import_roots


@dataclass
class Prepared:
    """What a run keeps of its hosts' check: the connections (``session.Sessions``) and
    the path the nodes import from (the folders found here, or the shipped trees)."""

    sessions: Any
    ship: bool
    path: list[str]
    digests: list[str]

    def command(self, host: HostSpec, args: list[str]) -> str:
        """``host``'s python with ``args``, with the project on its path: the folders the
        targets import from here (the current directory first, then those found above
        the topology file, as procs finds them), or their shipped copies."""
        from topo.backends.ssh.session import remote_command
        from topo.backends.ssh.ship import project_dir

        path = [project_dir(host, d) for d in self.digests] if self.ship else self.path
        return remote_command(host, [host.python, *args], {"PYTHONPATH": os.pathsep.join(path)})

    def note(self) -> str:
        """Where the nodes import from, for a message."""
        if self.ship:
            return "the project's copy shipped at the start (<workdir>/project-<digest>)"
        return f"PYTHONPATH {os.pathsep.join(self.path)}"


def unreachable_bind(bind: str, inventory: Inventory) -> list[Diagnostic]:
    """An error when the launcher cannot listen on ``bind`` for its hosts."""
    if is_local_address(bind):
        return []
    where = inventory.path or "the inventory"
    return [
        Diagnostic(
            f"launcher_address {bind} is not an address of this machine, so the "
            "launcher cannot listen there for its hosts",
            hint=f"set launcher_address in {where} to this machine's address on the hosts' network",
        )
    ]


def prepare_hosts(
    program: Program, hosts: Mapping[str, HostSpec], ship: bool
) -> tuple[Prepared | None, list[Diagnostic]]:
    """Connect to every host, ship the project if asked, and check each host; the kept
    connections, or None and one error per host that is not ready."""
    try:
        from topo.backends.ssh.session import Sessions
    except ImportError as exc:
        return None, [Diagnostic(f"the ssh backend needs asyncssh ({exc}); install topo[ssh]")]
    sessions = Sessions()
    failed = sessions.connect(list(hosts.values()))
    ok = {n: h for n, h in hosts.items() if n not in failed}
    roots = import_roots(program.source, target_modules(program))
    path = [str(p) for p in dict.fromkeys([Path.cwd(), *roots])]
    prepared = Prepared(sessions, ship, path, [])
    if ship and ok:
        from topo.backends.ssh.ship import ship as ship_tree

        prepared.digests, shipped = ship_tree(sessions, ok, roots or [Path.cwd()])
        failed.update(shipped)
        ok = {n: h for n, h in ok.items() if n not in failed}
    script = check_script(target_modules(program))
    commands = {n: prepared.command(h, ["-c", script]) for n, h in ok.items()}
    for name, (status, out, err) in sessions.run_all(commands, CHECK_TIMEOUT_S).items():
        why = judge(hosts[name], status, out, err)
        if why:
            failed[name] = why
    if failed:
        sessions.close()
        order = [n for n in hosts if n in failed]
        return None, host_diagnostics({n: failed[n] for n in order}, hosts)
    return prepared, []
