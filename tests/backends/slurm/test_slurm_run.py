"""``topo run -b slurm`` inside an allocation of the test cluster, beyond the conformance
suite: where it refuses to run (``topo.launch`` outside an allocation; no Slurm, a job
that is not running, a feature no node has: one message and exit 1); nodes placed on
the job's nodes; the agents, fork servers and nodes counted in their steps by Slurm
(their short names are one word: ``proctrack/linuxproc``); an agent killed mid-run
replaced on its node."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from tests.backends.slurm.cluster import SlurmCluster
from tests.backends.slurm.conftest import Allocation
from topo.testing import wait_gone, wait_until

ROOT = Path(__file__).resolve().parents[3]
NODES = "tests.backends.slurm.slurm_nodes"
SPREAD = f"""name: spread
nodes:
  where: {{target: "{NODES}:Where", count: 2, resources: {{spread: true}}}}
"""
RESTARTS = "restart: {policy: on-failure, max_restarts: 3, backoff: {initial_s: 0.1}}"


def topo_run(path: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    """``topo run PATH -b slurm`` as a user types it, in ``path``'s folder."""
    env = {**env, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "topo", "run", str(path), "-b", "slurm", "--no-live", *extra],
        cwd=path.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def outside(**more: str) -> dict[str, str]:
    """This environment without a job (no ``SLURM_*``), and ``more``."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("SLURM")}, **more}


def test_outside_an_allocation_a_launch_is_refused_saying_where_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (topo run -b slurm submits a job there instead: test_submit_run.py)
    import topo
    from topo.diagnostics import TopoError

    for key in [k for k in os.environ if k.startswith("SLURM")]:
        monkeypatch.delenv(key)
    path = tmp_path / "spread.yaml"
    path.write_text(SPREAD)
    with pytest.raises(TopoError) as refused:
        topo.launch(path, backend="slurm", log_dir=tmp_path / "runs")
    said = str(refused.value)
    assert said == (
        "error: the slurm backend runs a program inside a Slurm allocation, and SLURM_JOB_ID "
        "is not set: launch it in an sbatch script or an salloc shell, or submit it as a job "
        "with topo run FILE -b slurm"
    )
    assert not (tmp_path / "runs").exists()


def test_without_slurm_on_the_machine_the_run_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "spread.yaml"
    path.write_text(SPREAD)
    bare = str(Path(sys.executable).parent)  # python, and no Slurm command
    done = topo_run(path, outside(PATH=bare, SLURM_JOB_ID="7"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Slurm's commands are not installed on this machine (scontrol not found)" in (
        done.stderr
    ), done.stderr


def test_a_job_that_is_not_running_is_refused_in_slurms_words(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    path = tmp_path / "spread.yaml"
    path.write_text(SPREAD)
    done = topo_run(path, {**slurm_cluster.env(), "SLURM_JOB_ID": "999999"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "scontrol show job failed: slurm_load_jobs error: Invalid job id specified" in (
        done.stderr
    ), done.stderr


def test_a_feature_no_node_has_is_refused_with_what_to_ask_slurm_for(
    slurm_allocation: Allocation, tmp_path: Path
) -> None:
    path = tmp_path / "gpu.yaml"
    path.write_text(f'name: gpu\nnodes:\n  w: {{target: "{NODES}:Where", resources: ')
    path.write_text(path.read_text() + "{host_labels: [gpu]}}\n")
    done = topo_run(path, slurm_allocation.env())
    assert done.returncode == 1, done.stdout + done.stderr
    said = (
        "gpu.yaml:3:3: error: group 'w' needs a node with the feature(s) gpu, and no node of "
        f"the job has it (the nodes of job {slurm_allocation.job}: n1 (rack1); n2 (rack2))"
    )
    assert said in done.stderr, done.stderr
    assert "--constraint=FEATURE" in done.stderr
    assert slurm_allocation.cluster.steps(slurm_allocation.job) == []  # no agent started


@pytest.fixture
def in_job(slurm_allocation: Allocation, monkeypatch: pytest.MonkeyPatch) -> Allocation:
    """This process inside the allocation (``topo.launch`` runs here)."""
    env = slurm_allocation.env()
    for key in ("SLURM_CONF", "SLURM_JOB_ID", "SLURM_JOB_NODELIST"):
        monkeypatch.setenv(key, env[key])
    return slurm_allocation


@pytest.mark.slow
def test_spread_nodes_run_on_both_nodes_counted_in_their_steps(
    in_job: Allocation, topo_launch: Callable, tmp_path: Path
) -> None:
    path = tmp_path / "spread.yaml"
    path.write_text(SPREAD)
    run = topo_launch(path, "slurm", ready_timeout=90)
    agents = run.launcher.backend.agent_pids()
    seen = {}
    for node in ("where/0", "where/1"):
        where = run.handle(node, timeout=30).where()
        assert where["job"] == in_job.job
        seen[where["node"]] = int(where["pid"])
    assert set(seen) == {"n1", "n2"} == set(agents)
    for name, pid in seen.items():
        server = psutil.Process(pid).parent()
        assert server.parent().pid == agents[name]  # node <- fork server <- agent
        tracked = in_job.cluster.run("scontrol", "listpids", in_job.job, name).stdout
        listed = {int(line.split()[0]) for line in tracked.splitlines()[1:] if line.strip()}
        assert {pid, server.pid, agents[name]} <= listed, tracked
        for proc in (pid, server.pid, agents[name]):
            short = Path(f"/proc/{proc}/comm").read_text().strip()
            assert short.startswith("topo:") and len(short.split()) == 1, short
    assert run.stop(timeout=60) == 0


@pytest.mark.slow
def test_a_killed_agent_is_replaced_and_its_nodes_restart_on_its_node(
    in_job: Allocation, topo_launch: Callable, tmp_path: Path
) -> None:
    path = tmp_path / "agent_dies.yaml"
    path.write_text(
        f'name: agent_dies\nnodes:\n  echo: {{target: "{NODES}:Where", count: 2, {RESTARTS}}}\n'
    )
    run = topo_launch(path, "slurm", ready_timeout=90)
    first = run.handle("echo/1", timeout=30).where()
    node = str(first["node"])
    agent = run.launcher.backend.agent_pids()[node]
    os.kill(agent, signal.SIGKILL)
    assert not wait_gone([agent, int(first["pid"])], 30), "the agent or its node survived"
    wait_until(
        lambda: (
            (s := {s.id: s for s in run.status()}["echo/1"]).restarts >= 1 and s.state == "running"
        ),
        60,
        what="echo/1 to come back",
    )
    second = run.handle("echo/1", timeout=30).where()
    assert second["node"] == node and second["pid"] != first["pid"]
    assert second["step"] != first["step"]  # the new agent's step
    assert run.launcher.backend.agent_restarts == {node: 1}
    assert run.launcher.backend.lost == {}
    for each in ("echo/0", "echo/1"):
        assert run.handle(each, timeout=30).echo(each) == each
    log = (run.run_dir / "agents" / f"{node}.log").read_text()
    assert f"the agent on Slurm node {node} (pid {agent}) was killed by SIGKILL" in log, log
    assert run.stop(timeout=60) == 0
    assert not (run.run_dir / "nodes").exists()  # the agents' own files are removed
