"""The ray backend when a Ray node or a topo agent dies, and at scale, on the four-node
cluster (a head on the bridge, a worker in each test host); checked by pid.

* a Ray node whose raylet is killed: Ray declares the node dead, its agent with it; the
  nodes that ran there are restarted by their policy on live Ray nodes;
* a node agent killed by pid: its executables end with it (their processes, its fork
  server) and restart on the same Ray node, forked by a new agent;
* 200 nodes start, answer and stop, and nothing of them is left.
"""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path

import psutil
import pytest

from tests.backends.ray.cluster import Cluster, add_worker, descendants, end_node, ray_missing
from tests.backends.ray.runs import (
    NODES,
    kill_if_running,
    start,
    status,
    topo_run,
    wait_for,
    wheres,
    write,
)
from tests.backends.ssh.testhosts import HostSet
from topo.testing import alive, wait_gone

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(ray_missing() is not None, reason=str(ray_missing())),
]

RESTART = "restart: {policy: on-failure, max_restarts: 1, backoff: {initial_s: 0}}"


def _spread(tmp_path: Path, count: int) -> Path:
    return write(
        tmp_path / "many.yaml",
        f"""
        name: many
        nodes:
          w: {{target: "{NODES}:Reporter", count: {count}, {RESTART}}}
        """,
    )


def _parent(pid: int) -> int:
    return psutil.Process(pid).ppid()


def test_a_dead_ray_node_s_nodes_restart_on_live_nodes(
    ray_hosts: Cluster, ray_test_hosts: HostSet, tmp_path: Path
) -> None:
    """A fifth Ray node (inside test host h3, beside h3's) takes some of ten nodes; its
    raylet is killed: once Ray declares the node dead, they are restarted elsewhere."""
    [sshd] = ray_test_hosts.sshd_pids(ray_test_hosts.names[2])
    add_worker(ray_hosts, "x", ray_test_hosts.names[2], sshd, {"host_x": 1})
    x_pids = descendants(ray_hosts.procs["x"].pid)
    run_dir = tmp_path / "run"
    proc = start(topo_run(_spread(tmp_path, 10), run_dir, "-q", address=ray_hosts.address))
    names = [f"w/{i}" for i in range(10)]
    try:
        wait_for(lambda: all(wheres(run_dir, n) for n in names), proc, 120)
        first = {n: int(wheres(run_dir, n)[0]["pid"]) for n in names}
        on = {n: ray_hosts.node_of(pid) for n, pid in first.items()}
        doomed = [n for n in names if on[n] == "x"]
        assert doomed and len(set(on.values())) == 5, on  # Ray spread them over all 5
        x_pids = sorted(set(x_pids) | set(descendants(ray_hosts.procs["x"].pid)))
        [raylet] = [p for p in x_pids if "raylet" in " ".join(_cmdline(p))]
        os.kill(raylet, signal.SIGKILL)
        assert not wait_gone([first[n] for n in doomed], 30), "its nodes outlived the agent"
        for n in doomed:  # Ray's health checks declare the node dead within ~15-30 s
            wait_for(lambda n=n: len(wheres(run_dir, n)) == 2, proc, 120)
        for n in doomed:
            again = int(wheres(run_dir, n)[1]["pid"])
            assert ray_hosts.node_of(again) not in (None, "x"), n
            assert status(run_dir)[n]["restarts"] == 1
            assert "was lost with Ray node" in (run_dir / "logs" / f"w_{n[2:]}.log").read_text()
        kept = [n for n in names if n not in doomed]
        assert all(len(wheres(run_dir, n)) == 1 for n in kept)  # the others ran on
        assert alive([first[n] for n in kept]) == [first[n] for n in kept]
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=90)
        assert proc.returncode == 130, out
    finally:
        kill_if_running(proc)
        left = end_node(ray_hosts, "x", x_pids)
    every = [int(w["pid"]) for n in names for w in wheres(run_dir, n)]
    assert not wait_gone(every, 15)
    assert not left, f"the dead Ray node left processes: {left}"


def test_a_killed_agent_s_nodes_restart_on_its_ray_node(ray_hosts: Cluster, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = start(topo_run(_spread(tmp_path, 8), run_dir, "-q", address=ray_hosts.address))
    names = [f"w/{i}" for i in range(8)]
    try:
        wait_for(lambda: all(wheres(run_dir, n) for n in names), proc, 120)
        first = {n: wheres(run_dir, n)[0] for n in names}
        server = int(first["w/0"]["ppid"])  # the fork server of w/0's agent
        agent = _parent(server)
        assert "NodeAgent" in " ".join(_cmdline(agent)) or "ray::" in _name(agent)
        node = ray_hosts.node_of(int(first["w/0"]["pid"]))
        victims = [n for n in names if first[n]["ppid"] == server]
        os.kill(agent, signal.SIGKILL)
        gone = [agent, server, *(int(first[n]["pid"]) for n in victims)]
        assert not wait_gone(gone, 15), "the agent's fork server or nodes outlived it"
        for n in victims:
            wait_for(lambda n=n: len(wheres(run_dir, n)) == 2, proc, 90)
        for n in victims:
            again = wheres(run_dir, n)[1]
            assert again["ppid"] != server  # a new agent's fork server
            assert ray_hosts.node_of(int(again["pid"])) == node  # on the same Ray node
            log = (run_dir / "logs" / f"w_{n[2:]}.log").read_text()
            assert "was lost: the agent on Ray node" in log
        others = [n for n in names if n not in victims]
        assert all(len(wheres(run_dir, n)) == 1 for n in others)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=90)
        assert proc.returncode == 130, out
    finally:
        kill_if_running(proc)
    every = [int(w["pid"]) for n in names for w in wheres(run_dir, n)]
    assert not wait_gone(every, 15)


def test_two_hundred_nodes_start_and_stop_leaving_nothing(
    ray_hosts: Cluster, tmp_path: Path
) -> None:
    """Every process of the run -- the nodes, the agents' fork servers, the agents --
    is gone after the stop, and so are the agents' directories on the nodes."""
    root = Path(tempfile.gettempdir()) / "topo-ray"
    before = set(os.listdir(root)) if root.exists() else set()
    path = write(
        tmp_path / "wide.yaml",
        f'name: wide\nnodes:\n  w: {{target: "{NODES}:Where", count: 200}}\n',
    )
    run_dir = tmp_path / "run"
    proc = start(topo_run(path, run_dir, "-q", address=ray_hosts.address))
    pids: list[int] = []
    try:
        nodes = wait_for(lambda: _all_ready(run_dir, 200), proc, 240)
        pids = [int(n["pid"]) for n in nodes.values()]
        assert alive(pids) == pids
        servers = {_parent(p) for p in pids}
        agents = {_parent(s) for s in servers}
        assert len(servers) == len(agents) == 4, (servers, agents)  # one per Ray node
        on = {ray_hosts.node_of(p) for p in pids}
        assert on == {"head", "h1", "h2", "h3"}, on
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 130, out
    finally:
        kill_if_running(proc)
    assert not wait_gone([*pids, *servers, *agents], 30)
    after = set(os.listdir(root)) if root.exists() else set()
    assert after <= before, after - before  # the agents removed their directories


def _all_ready(run_dir: Path, count: int) -> dict[str, dict] | None:
    nodes = status(run_dir)
    if len(nodes) == count and all(n["state"] == "running" and n["pid"] for n in nodes.values()):
        return nodes
    return None


def _cmdline(pid: int) -> list[str]:
    try:
        return psutil.Process(pid).cmdline()
    except psutil.Error:
        return []


def _name(pid: int) -> str:
    try:
        return psutil.Process(pid).name()
    except psutil.Error:
        return ""
