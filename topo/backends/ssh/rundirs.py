"""The run's directory on each host (``<workdir>/runs/<run>/<host>``): where the agent's
fork server and the nodes write their logs, which the agent streams to the launcher's
run directory as they grow. At the end of a run the launcher removes it from every host
it still reaches; a host it lost keeps its copy (what was written after the host was cut
off is only there), and the user is told where it is."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING

from topo.backends.ssh.inventory import HostSpec
from topo.rundir.layout import safe_name

if TYPE_CHECKING:  # asyncssh is imported only once the backend connects
    from topo.backends.ssh.session import Sessions

CLEAR_TIMEOUT_S = 15.0


def remote_run_dir(host: HostSpec, run_name: str) -> str:
    """Where ``host`` keeps the files of run ``run_name`` (hosts sharing a workdir each
    have their own)."""
    return f"{host.workdir.rstrip('/')}/runs/{run_name}/{safe_name(host.name)}"


def clear(sessions: Sessions, dirs: Mapping[str, str]) -> dict[str, str]:
    """Remove each host's run directory in ``dirs`` (host -> path), and the run's
    directory above it once no host has one there; the hosts where that failed, with why."""
    commands = {}
    for name, path in dirs.items():
        mine, run = shlex.quote(path), shlex.quote(path.rsplit("/", 1)[0])
        commands[name] = f"rm -rf {mine} && {{ rmdir {run} 2>/dev/null; true; }}"
    failed = {}
    for name, (status, _out, err) in sessions.run_all(commands, CLEAR_TIMEOUT_S).items():
        if status != 0:
            lines = [x.strip() for x in err.splitlines() if x.strip()]
            failed[name] = lines[-1] if lines else "no answer"
    return failed


def clear_run(
    sessions: Sessions,
    hosts: Mapping[str, HostSpec],
    made: set[str],
    lost: Mapping[str, str],
    run_name: str,
) -> dict[str, str]:
    """Remove run ``run_name``'s directory from the hosts in ``made`` that were not
    ``lost`` (host -> why); what stays behind on which host and why, for the user."""
    dirs = {h: remote_run_dir(hosts[h], run_name) for h in made}
    failed = clear(sessions, {h: d for h, d in dirs.items() if h not in lost})
    left = {}
    for host in sorted(dirs):
        if host in lost:
            why = f"host {host} was lost ({lost[host]})"
        elif host in failed:
            why = f"the run's directory on host {host} could not be removed ({failed[host]})"
        else:
            continue
        left[host] = f"{why}; the run's files there stay in {dirs[host]}"
    return left
