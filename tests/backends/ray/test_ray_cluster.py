"""The ray backend on a four-node Ray cluster (a head on the bridge, a worker in each
test host): runs across nodes, placement (host colocation, spread, host labels),
restarts, refusals before anything starts, ``--ship``, and nothing left behind when the
launcher is killed (checked by pid)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.backends.ray.cluster import Cluster, ray_missing
from tests.backends.ray.runs import (
    NODES,
    ROOT,
    kill_if_running,
    start,
    topo_run,
    wait_for,
    wheres,
    write,
)
from tests.backends.ssh.testhosts import BASE
from topo.testing import alive, wait_gone

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(ray_missing() is not None, reason=str(ray_missing())),
]


def hosts_of(run_dir: Path) -> dict[str, str]:
    status = json.loads((run_dir / "status.json").read_text())
    return {n["id"]: n["host"] for n in status["nodes"]}


def test_consumer_producers_runs_across_ray_nodes(ray_hosts: Cluster, tmp_path: Path) -> None:
    argv = topo_run(
        "examples/topologies/consumer_producers.yaml",
        tmp_path / "run",
        *["-p", "num_producers=5"],
        address=ray_hosts.address,
    )
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "32 results from 5 producers" in done.stdout
    hosts = set(hosts_of(tmp_path / "run").values())
    assert hosts <= set(ray_hosts.ips.values())
    assert len(hosts) >= 3, hosts  # 6 actors spread over the 4 nodes, not all on the head
    assert alive([ray_hosts.pid])


CP = "examples/topologies/consumer_producers.yaml"

PLACED = f"""
name: placed
nodes:
  left: {{target: "{NODES}:Reporter"}}
  right: {{target: "{NODES}:Reporter"}}
  spread:
    target: "{NODES}:Reporter"
    count: 3
    resources: {{spread: true}}
    restart: {{policy: on-failure, max_restarts: 1, backoff: {{initial_s: 0}}}}
  pinned: {{target: "{NODES}:Reporter", resources: {{host_labels: [host_h2]}}}}
colocation:
  - {{name: pair, nodes: ["@left", "@right"], mode: host}}
"""


def test_placement_and_a_restart_across_ray_nodes(ray_hosts: Cluster, tmp_path: Path) -> None:
    """A host-colocation pair shares a node, a spread group has a node per replica, a
    host label picks its node (each checked by pid: the Ray node whose processes the
    node's process descends from); ``kill -9`` of a replica on a worker restarts it on
    the node of its bundle, forked by the same agent."""
    path = write(tmp_path / "placed.yaml", PLACED)
    run_dir = tmp_path / "run"
    proc = start(topo_run(path, run_dir, "-q", address=ray_hosts.address))
    nodes = ["left", "right", "spread/0", "spread/1", "spread/2", "pinned"]
    try:
        wait_for(lambda: all(wheres(run_dir, n) for n in nodes), proc)
        first = {n: wheres(run_dir, n)[0] for n in nodes}
        on = {n: ray_hosts.node_of(int(w["pid"])) for n, w in first.items()}
        assert None not in on.values(), on
        assert on["left"] == on["right"]
        assert len({on[f"spread/{i}"] for i in range(3)}) == 3, on
        assert on["pinned"] == "h2"
        assert hosts_of(run_dir)["pinned"] == ray_hosts.ips["h2"]  # status.json says so too
        assert first["spread/1"]["actor"] is None  # forked by its node's agent
        assert first["left"]["ppid"] == first["right"]["ppid"]  # by the same fork server
        victim = int(first["spread/1"]["pid"])
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: len(wheres(run_dir, "spread/1")) == 2, proc)
        second = wheres(run_dir, "spread/1")[1]
        assert second["pid"] != victim and second["ppid"] == first["spread/1"]["ppid"]
        assert ray_hosts.node_of(int(second["pid"])) == on["spread/1"]  # its bundle's node
        assert not wait_gone([victim], 10)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=90)
    finally:
        kill_if_running(proc)
    assert proc.returncode == 130, out
    log = (run_dir / "logs" / "spread_1.log").read_text()
    assert "attempt 2 started" in log and "SIGKILL" in log, log[-2000:]
    assert not wait_gone([int(w["pid"]) for w in first.values() if w["pid"] != victim], 15)


def test_a_killed_launcher_leaves_no_actor_on_the_cluster(
    ray_hosts: Cluster, tmp_path: Path
) -> None:
    path = write(
        tmp_path / "far.yaml",
        f"""
        name: far
        nodes:
          far: {{target: "{NODES}:Reporter", count: 3, resources: {{spread: true}}}}
        """,
    )
    run_dir = tmp_path / "run"
    proc = start(topo_run(path, run_dir, "-q", address=ray_hosts.address))
    try:
        wait_for(lambda: all(wheres(run_dir, f"far/{i}") for i in range(3)), proc)
        pids = [int(wheres(run_dir, f"far/{i}")[0]["pid"]) for i in range(3)]
        assert alive(pids)
        # each agent's directory on its node: where its nodes' output goes
        dirs = {Path(os.readlink(f"/proc/{pid}/fd/1")).parents[1] for pid in pids}
        assert len(dirs) == 3 and all(d.is_dir() for d in dirs), dirs
        proc.kill()
        proc.wait(10)
        left = wait_gone(pids, 10)
        assert not left, f"nodes left on the cluster 10 s after kill -9 of topo run: {left}"
    finally:
        kill_if_running(proc)
    assert alive([ray_hosts.pid])  # the cluster itself stays
    # Ray ended the agents with the launcher, too soon for them to remove their
    # directories: the next run's agents do
    argv = topo_run(
        CP, tmp_path / "again", "-q", "-p", "num_producers=1", address=ray_hosts.address
    )
    again = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert again.returncode == 0, again.stdout + again.stderr
    assert not [d for d in dirs if d.exists()], "the agents' directories were left"


def test_an_impossible_placement_is_refused_before_anything_starts(
    ray_hosts: Cluster, tmp_path: Path
) -> None:
    path = write(
        tmp_path / "wide.yaml",
        f"""
        name: wide
        nodes:
          fine: {{target: "{NODES}:Where"}}
          wide: {{target: "{NODES}:Where", count: 5, resources: {{spread: true}}}}
          gpu: {{target: "{NODES}:Where", resources: {{host_labels: [gpu_box]}}}}
        """,
    )
    done = subprocess.run(
        topo_run(path, tmp_path / "run", address=ray_hosts.address),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    err = done.stdout + done.stderr
    assert "Traceback" not in err
    assert "group 'wide' sets resources.spread: its 5 processes need 5 Ray nodes" in err
    assert "and the cluster has 4" in err
    assert "group 'gpu': no node of the Ray cluster offers" in err and "wide.yaml:" in err
    assert not (tmp_path / "run").exists()


SHIPPED_NODE = """
import os


class Where:
    def run(self):
        print("SHIPPED from", os.getcwd(), flush=True)
"""


def test_ship_sends_the_working_tree_to_nodes_that_cannot_see_it(
    ray_hosts: Cluster, tmp_path: Path
) -> None:
    """A project in the launcher's ``/tmp/topo/remote`` (private to each test host): a
    node on ``h1`` cannot import it, unless ``--ship`` sends it as the job's tree."""
    project = BASE / "remote" / f"ship-{os.getpid()}-{tmp_path.name}"
    project.mkdir(parents=True)
    try:
        (project / "shipmod.py").write_text(SHIPPED_NODE)
        (project / "runs").mkdir()  # left out of the shipped tree
        (project / "runs" / "big.bin").write_bytes(os.urandom(1 << 20))
        write(
            project / "ship.yaml",
            """
            name: ship
            nodes:
              w:
                target: "shipmod:Where"
                stops_program: true
                resources: {host_labels: [host_h1]}
            """,
        )
        argv = topo_run("ship.yaml", tmp_path / "plain", "-q", address=ray_hosts.address)
        plain = subprocess.run(argv, cwd=project, capture_output=True, text=True, timeout=180)
        assert plain.returncode == 1, plain.stdout + plain.stderr
        assert "No module named 'shipmod'" in plain.stdout + plain.stderr
        argv = topo_run("ship.yaml", tmp_path / "shipped", "--ship", address=ray_hosts.address)
        shipped = subprocess.run(argv, cwd=project, capture_output=True, text=True, timeout=180)
        assert shipped.returncode == 0, shipped.stdout + shipped.stderr
        log = (tmp_path / "shipped" / "logs" / "w.log").read_text()
        cwd = log.split("SHIPPED from", 1)[1].split()[0]
        assert cwd != str(project) and "runtime_resources" in cwd  # Ray's unpacked copy
    finally:
        import shutil

        shutil.rmtree(project, ignore_errors=True)


@pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("reverb", "haiku", "jax")),
    reason="needs the rl and reverb extras",
)
def test_distributed_dqn_runs_across_ray_nodes(ray_hosts: Cluster, tmp_path: Path) -> None:
    """Acme's distributed DQN (a small budget): actors on other Ray nodes than the replay
    insert into it, the learner feeds on it, the steps limiter stops the program."""
    argv = topo_run(
        "examples/topologies/acme_distributed.yaml", tmp_path / "run", address=ray_hosts.address
    )
    for param in ["num_actors=2", "max_actor_steps=1500", "min_replay_size=200", "eval_every_s=5"]:
        argv += ["-p", param]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "final evaluation return:" in done.stdout
    host_of = hosts_of(tmp_path / "run")
    assert len(set(host_of.values())) >= 3, host_of
    assert {host_of["actor/0"], host_of["actor/1"]} - {host_of["replay"]}  # across nodes
    assert "learner: stopped after" in (tmp_path / "run" / "logs" / "learner.log").read_text()
    # Every node stopped within the grace (none killed), with no Reverb error on the way.
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert not [w for w in status["warnings"] if "grace period" in w], status["warnings"]
    assert "DATA_LOSS" not in done.stdout + done.stderr
