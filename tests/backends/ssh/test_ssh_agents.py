"""An agent of the ssh backend killed mid-run (its host and SSH connection fine): a new
agent starts on that host and the nodes come back there per their restart policy; a
node that may not restart fails the run, naming the host and its agent."""

from __future__ import annotations

import os
import signal
import textwrap
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from tests.backends.ssh.testhosts import HostSet
from topo.testing import wait_gone, wait_until

pytestmark = pytest.mark.slow
NODES = "tests.backends.ssh.ssh_nodes"


def _topology(tmp_path: Path, name: str, restart: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        textwrap.dedent(
            f"""
            name: {name}
            nodes:
              echo:
                target: "{NODES}:Where"
                count: 3
                {restart}
            """
        )
    )
    return path


def _agent_of(run: object, node_pid: int, host: str) -> int:
    """The pid of the agent that runs ``node_pid`` on ``host`` (the node's fork server's
    parent, the hosts share this machine's pid space), checked against the backend's."""
    agent = psutil.Process(node_pid).parent().parent()  # type: ignore[union-attr]
    assert " ".join(agent.cmdline()).strip() == f"topo: agent {host}"  # its process title
    assert run.launcher.backend.agent_pids()[host] == agent.pid  # type: ignore[attr-defined]
    return agent.pid


def test_a_killed_agent_is_replaced_and_its_nodes_restart_on_its_host(
    ssh_hosts: HostSet, topo_launch: Callable, tmp_path: Path
) -> None:
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml")
    restart = "restart: {policy: on-failure, max_restarts: 3, backoff: {initial_s: 0.1}}"
    path = _topology(tmp_path, "agent_dies", restart)
    run = topo_launch(path, "ssh", backend_options={"hosts": hosts}, ready_timeout=60)
    first = run.handle("echo/1", timeout=30).where()
    host = str(first["host"])
    agent = _agent_of(run, int(first["pid"]), host)
    os.kill(agent, signal.SIGKILL)
    assert not wait_gone([agent, int(first["pid"])], 10), "the agent or its node survived"
    wait_until(
        lambda: (
            (s := {s.id: s for s in run.status()}["echo/1"]).restarts >= 1 and s.state == "running"
        ),
        40,
        what="echo/1 to come back",
    )
    second = run.handle("echo/1", timeout=10).where()
    assert second["host"] == host  # the host is fine: its node restarts there
    assert second["pid"] != first["pid"]
    new_agent = _agent_of(run, int(second["pid"]), host)
    assert new_agent != agent
    assert run.launcher.backend.agent_restarts == {host: 1}
    assert run.launcher.backend.lost == {}
    for node in ("echo/0", "echo/1", "echo/2"):  # every node answers
        assert run.handle(node, timeout=10).echo(node) == node
    log = (run.run_dir / "agents" / f"{host}.log").read_text()
    assert f"the agent on host {host} (pid {agent}) was killed by SIGKILL" in log
    assert run.stop(timeout=60) == 0
    assert not wait_gone([new_agent, int(second["pid"])], 10)


def test_a_killed_agent_fails_the_run_when_its_node_may_not_restart(
    ssh_hosts: HostSet, topo_launch: Callable, tmp_path: Path
) -> None:
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml")
    path = _topology(tmp_path, "agent_dies_never", "")
    run = topo_launch(path, "ssh", backend_options={"hosts": hosts}, ready_timeout=60)
    where = run.handle("echo/2", timeout=30).where()
    host = str(where["host"])
    agent = _agent_of(run, int(where["pid"]), host)
    os.kill(agent, signal.SIGKILL)
    assert run.wait(30) == 1
    assert run.failure is not None
    message = run.failure.message
    assert f"the agent on host {host} (pid {agent}) was killed by SIGKILL" in message
    assert f"agents/{host}.log" in message
    assert not wait_gone([agent, int(where["pid"])], 10)


def test_an_agent_that_keeps_dying_as_it_starts_loses_its_host(
    ssh_hosts: HostSet, topo_launch: Callable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Agents of one host killed as soon as each said hello: after ``quick_deaths``
    quick deaths the host is lost (not replaced forever) and its node moves to another
    host. "Quick" is made 60 s, so that a slow start on a busy machine still counts."""
    from topo.backends.ssh.agents import SshAgents

    monkeypatch.setattr(SshAgents, "quick_s", 60.0)
    deaths = SshAgents.quick_deaths
    assert deaths is not None
    workdir = tmp_path / "work"  # seen by every host
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml", workdir=str(workdir))
    restart = "restart: {policy: on-failure, max_restarts: 10, backoff: {initial_s: 0.1}}"
    path = _topology(tmp_path, "agent_keeps_dying", restart)
    run = topo_launch(path, "ssh", backend_options={"hosts": hosts}, ready_timeout=60)
    backend = run.launcher.backend
    where = run.handle("echo/0", timeout=30).where()
    host = str(where["host"])
    killed = [_agent_of(run, int(where["pid"]), host)]
    os.kill(killed[0], signal.SIGKILL)  # the first quick death

    def new_agent() -> int | None:
        assert host not in backend.lost, f"no new agent said hello: {backend.lost[host]}"
        pid = backend.agent_pids().get(host)
        return pid if pid is not None and pid not in killed else None

    for _ in range(deaths - 1):
        pid = wait_until(new_agent, 30, what="a new agent's hello", every=0.02)
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
    wait_until(lambda: host in backend.lost, 20, what="the host lost")
    assert backend.lost[host].startswith(f"its agent died {deaths} times within 60s of starting")
    assert f"(pid {killed[-1]}) was killed by SIGKILL" in backend.lost[host]
    assert backend.agent_restarts[host] == deaths - 1
    # Nothing more goes to the lost host this run: its SSH connection is closed.
    address = ssh_hosts.addresses[ssh_hosts.names.index(host)]
    wait_until(
        lambda: not _ssh_connections(address), 10, what="the lost host's SSH connection closed"
    )
    moved = wait_until(
        lambda: run.handle("echo/0", timeout=2).where(),
        40,
        what="echo/0 to answer",
        errors=(Exception,),
        every=0.2,
    )
    assert moved["host"] != host  # it moved to a host that is fine
    assert run.exit_code is None
    assert run.stop(timeout=60) == 0
    assert not wait_gone(killed, 10)
    # The other hosts' run directories are removed; the lost host's is reported.
    runs = workdir / "runs" / run.run_dir.name
    assert [p.name for p in runs.iterdir()] == [host]
    [note] = [w for w in run.launcher.state.warnings if "stay in" in w]
    assert note.startswith(f"host {host} was lost (its agent died {deaths} times"), note
    assert note.endswith(f"the run's files there stay in {runs / host}"), note


def _ssh_connections(address: str) -> list[object]:
    """This process's open TCP connections to ``address``'s sshd."""
    return [
        c
        for c in psutil.Process().net_connections("tcp")
        if c.raddr
        and c.raddr.ip == address
        and c.raddr.port == 22
        and c.status == psutil.CONN_ESTABLISHED
    ]
