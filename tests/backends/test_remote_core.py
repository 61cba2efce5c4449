"""The remote core (``topo.backends.remote``) behind a backend written in the tests: a
transport (local agent processes over pipes) and a placement, nothing else
(``pipe_backend``). It runs programs, streams their output back, replaces an agent
that dies, and gives up a host whose agents keep dying -- without SSH or Ray."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from topo.rundir.layout import agent_log_path
from topo.testing import wait_gone, wait_until

pytestmark = pytest.mark.slow
NODES = "pipe_backend"  # tests/backends is on the path of the launcher and of the agents


def _program(topology: Callable[[str], Path], name: str, restart: str = "") -> Path:
    return topology(
        f"""
        name: {name}
        nodes:
          talk:
            target: "{NODES}:Talker"
            count: 4
            {restart}
        """
    )


def _agent_of(node_pid: int) -> psutil.Process:
    """The agent that forked ``node_pid`` (its fork server's parent)."""
    agent = psutil.Process(node_pid).parent().parent()  # type: ignore[union-attr]
    assert agent is not None
    return agent


def test_a_transport_and_a_placement_run_a_program(
    topology: Callable[[str], Path], topo_launch: Callable
) -> None:
    from pipe_backend import PipeBackend

    backend = PipeBackend()
    run = topo_launch(_program(topology, "pipes"), backend, ready_timeout=60)
    pids = {n: run.handle(n, timeout=10).pid() for n in ("talk/0", "talk/1")}
    agents = backend.fleet.agent_pids()  # type: ignore[union-attr]
    assert sorted(agents) == ["a", "b"]
    assert {_agent_of(p).pid for p in pids.values()} == set(agents.values())
    assert run.handle("talk/2", timeout=10).say("hello from a host") == "hello from a host"
    wait_until(
        lambda: "hello from a host" in run.log("talk/2"), 15, what="the line in the run's log"
    )
    assert backend.location("talk/2") == "a" and backend.location("talk/3") == "b"
    assert run.stop(timeout=60) == 0
    assert not wait_gone([*pids.values(), *agents.values()], 10)


def test_a_dead_agent_is_replaced_and_its_nodes_restart_on_its_host(
    topology: Callable[[str], Path], topo_launch: Callable
) -> None:
    from pipe_backend import PipeBackend

    backend = PipeBackend()
    restart = "restart: {policy: on-failure, max_restarts: 3, backoff: {initial_s: 0.1}}"
    run = topo_launch(_program(topology, "pipes_agent", restart), backend, ready_timeout=60)
    first = run.handle("talk/0", timeout=10).pid()
    agent = backend.fleet.agent_pids()["a"]  # type: ignore[union-attr]
    assert _agent_of(first).pid == agent
    os.kill(agent, signal.SIGKILL)
    assert not wait_gone([agent, first], 10), "the agent or its node survived"
    wait_until(
        lambda: (
            {s.id: s for s in run.status()}["talk/0"].restarts == 1
            and {s.id: s for s in run.status()}["talk/0"].state == "running"
        ),
        30,
        what="talk/0 back",
    )
    second = run.handle("talk/0", timeout=10).pid()
    new_agent = backend.fleet.agent_pids()["a"]  # type: ignore[union-attr]
    assert second != first and new_agent != agent and _agent_of(second).pid == new_agent
    assert backend.location("talk/0") == "a"  # the host is fine: its node restarts there
    assert backend.fleet.restarts == {"a": 1} and backend.fleet.lost == {}  # type: ignore[union-attr]
    lost = f"was lost: the agent on host a (pid {agent}) was killed by SIGKILL"
    assert lost in run.log("talk/0")
    assert lost[len("was lost: ") :] in (agent_log_path(run.run_dir, "a")).read_text()
    assert run.stop(timeout=60) == 0


def test_a_host_whose_agents_keep_dying_is_lost_and_its_nodes_move(
    topology: Callable[[str], Path], topo_launch: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipe_backend import PipeAgents, PipeBackend

    monkeypatch.setattr(PipeAgents, "quick_s", 60.0)  # a slow start still counts as quick
    backend = PipeBackend()
    restart = "restart: {policy: on-failure, max_restarts: 10, backoff: {initial_s: 0.1}}"
    run = topo_launch(_program(topology, "pipes_lost", restart), backend, ready_timeout=60)
    fleet = backend.fleet
    assert fleet is not None
    killed: list[int] = []
    for _ in range(PipeAgents.quick_deaths or 0):
        wait_until(
            lambda: "a" in fleet.lost or fleet.agent_pids().get("a", 0) not in (0, *killed),
            30,
            what="a new agent on host a",
        )
        killed.append(fleet.agent_pids()["a"])
        os.kill(killed[-1], signal.SIGKILL)
    wait_until(lambda: "a" in fleet.lost, 20, what="host a lost")
    assert fleet.lost["a"].startswith("its agent died 3 times within 60s of starting")
    assert f"(pid {killed[-1]}) was killed by SIGKILL" in fleet.lost["a"]
    assert fleet.restarts == {"a": 2}
    wait_until(
        lambda: (
            all(s.state == "running" for s in run.status())
            and all(backend.location(e) == "b" for e in ("talk/0", "talk/2"))
        ),
        40,
        what="every node on host b",
    )
    assert run.handle("talk/0", timeout=10).say("moved") == "moved"
    assert run.exit_code is None
    assert run.stop(timeout=60) == 0
    assert not wait_gone(killed, 10)
