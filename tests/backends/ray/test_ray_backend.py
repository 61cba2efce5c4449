"""The ray backend on a one-node Ray: a run end to end, restarts after a killed node
process, placement refused before anything starts, nothing left behind (checked by pid)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from tests.backends.ray.cluster import Cluster, descendants, ray_missing
from tests.backends.ray.conftest import LABEL
from tests.backends.ray.runs import (
    NODES,
    ROOT,
    kill_if_running,
    start,
    status,
    topo_run,
    wait_for,
    wheres,
    write,
)
from topo.diagnostics import TopoError
from topo.testing import alive, wait_gone, wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(ray_missing() is not None, reason=str(ray_missing())),
]


def test_consumer_producers_on_a_ray_the_run_starts_and_stops(tmp_path: Path) -> None:
    """No --address: the backend starts a local Ray for the run and shuts it down."""
    proc = start(
        topo_run(
            "examples/topologies/consumer_producers.yaml",
            tmp_path / "run",
            "-p",
            "num_producers=2",
        )
    )
    seen: set[int] = set()

    def ended() -> bool:  # every process the run made meanwhile: Ray's own, the actors
        seen.update(descendants(proc.pid))
        return proc.poll() is not None

    wait_until(ended, 300, what="the run to end", every=0.2)
    out = proc.stdout.read() if proc.stdout else ""
    assert proc.returncode == 0, out
    assert "consumer: 32 results from 2 producers" in out
    log = (tmp_path / "run" / "logs" / "consumer.log").read_text()
    assert "32 results from 2 producers" in log  # pulled from the actor into the run dir
    assert len(seen) >= 5  # gcs, raylet, ... the agent, its fork server, the nodes
    assert not wait_gone(seen, 15), "the run left Ray processes or actors behind"


def test_a_killed_launcher_leaves_no_ray_process_behind(tmp_path: Path) -> None:
    """``kill -9`` of ``topo run -b ray``: the actors, the Ray it started and Ray's agents
    (which Ray itself does not tie to the launcher: the watchdog does) are gone."""
    path = write(tmp_path / "one.yaml", f'name: one\nnodes:\n  w: {{target: "{NODES}:Where"}}\n')
    proc = start(topo_run(path, tmp_path / "run"))
    assert proc.stdout is not None
    seen: set[int] = set()
    for line in proc.stdout:
        seen.update(descendants(proc.pid))
        if " up in " in line:
            break
    time.sleep(0.5)  # no event: the watchdog's look (every 0.5 s) takes in the agent
    seen.update(descendants(proc.pid))
    assert any("ray::NodeAgent" in name for name in _names(seen)), _names(seen)
    assert any("fork server" in " ".join(_cmdline(pid)) for pid in seen)  # the agent's
    proc.kill()
    proc.wait(10)
    left = wait_gone(seen, 10)
    assert not left, f"left behind: {_names(left)}"


def _cmdline(pid: int) -> list[str]:
    import psutil

    try:
        return psutil.Process(pid).cmdline()
    except psutil.Error:
        return []


def _names(pids: Iterable[int]) -> list[str]:
    import psutil

    out = []
    for pid in pids:
        try:
            out.append(psutil.Process(pid).name())
        except psutil.NoSuchProcess:
            continue
    return out


def test_a_killed_node_process_is_restarted_by_the_policy(
    ray_cluster: Cluster, tmp_path: Path
) -> None:
    """``kill -9`` of a node's process (forked by the Ray node's agent): topo's restart
    policy forks a new one; a host-colocation pair (a STRICT_PACK placement group) with a
    GPU executable in it (a Ray actor of its own, which Ray gives the device) runs too,
    and a node asking for 3 CPUs may use 3 threads in native code."""
    path = write(
        tmp_path / "placed.yaml",
        f"""
        name: placed
        nodes:
          left:
            target: "{NODES}:Reporter"
            restart: {{policy: on-failure, max_restarts: 1, backoff: {{initial_s: 0}}}}
          right:
            target: "{NODES}:Reporter"
            resources: {{host_labels: [{LABEL}], gpus: [3]}}
          wide: {{target: "{NODES}:Reporter", resources: {{cpus: [0, 1, 2]}}}}
        colocation:
          - {{name: pair, nodes: ["@left", "@right"], mode: host}}
        """,
    )
    run_dir = tmp_path / "run"
    proc = start(topo_run(path, run_dir, "-q", address=ray_cluster.address))
    try:
        wait_for(lambda: all(wheres(run_dir, n) for n in ("left", "right", "wide")), proc, 60)
        first = wheres(run_dir, "left")[0]
        right = wheres(run_dir, "right")[0]
        # native libraries get the executable's CPUs, as Ray gives an actor of as many
        assert (first["omp"], wheres(run_dir, "wide")[0]["omp"]) == ("1", "3")
        assert first["actor"] is None and first["cwd"] == str(ROOT)  # forked by the agent
        assert right["actor"] == "right"  # named after the executable (the dashboard shows it)
        assert ray_cluster.node_of(int(first["pid"])) == "head"
        # gpus: [3] asks Ray for one GPU; the device Ray gave stays visible (not "3")
        assert right["ray_gpus"] == ["0"] and right["cuda"] == "0"
        assert first["cuda"] in (None, "")
        os.kill(int(first["pid"]), signal.SIGKILL)
        assert wait_gone([int(first["pid"])], 10) == []
        wait_for(lambda: len(wheres(run_dir, "left")) == 2, proc, 60)
        second = wheres(run_dir, "left")[1]
        assert second["pid"] != first["pid"] and second["ppid"] == first["ppid"]
        assert "killed by SIGKILL" in (run_dir / "logs" / "left.log").read_text()
        assert wait_for(lambda: status(run_dir).get("left", {}).get("restarts") == 1, proc, 60)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        kill_if_running(proc)
    assert proc.returncode == 130, out
    pids = [int(first["pid"]), int(second["pid"]), int(right["pid"]), int(first["ppid"])]
    pids.append(int(wheres(run_dir, "wide")[0]["pid"]))
    assert not wait_gone(pids, 15)  # and the agent's fork server


def test_topo_run_joins_a_cluster_given_by_address(ray_cluster: Cluster, tmp_path: Path) -> None:
    """``--address``: the run's actors go to that cluster, which stays up afterwards."""
    done = subprocess.run(
        topo_run(
            "examples/topologies/consumer_producers.yaml",
            tmp_path / "run",
            *["-p", "num_producers=1", "-q"],
            address=ray_cluster.address,
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["backend"] == "ray"
    host = ray_cluster.address.rpartition(":")[0]
    assert {n["host"] for n in status["nodes"]} == {host}  # the Ray node each actor ran on
    assert "32 results from 1 producers" in (tmp_path / "run" / "logs" / "consumer.log").read_text()
    assert alive([ray_cluster.pid])


def test_an_infeasible_placement_is_refused_before_anything_starts(
    ray_cluster: Cluster, tmp_path: Path
) -> None:
    import ray

    from topo.api import launch
    from topo.backends.ray.backend import RayBackend

    path = write(
        tmp_path / "gpu.yaml",
        f"""
        name: gpu
        nodes:
          fine: {{target: "{NODES}:Where"}}
          trainer: {{target: "{NODES}:Where", resources: {{host_labels: [gpu_box]}}}}
        """,
    )
    backend = RayBackend(address=ray_cluster.address)
    with pytest.raises(TopoError) as refused:
        launch(path, backend, log_dir=tmp_path / "runs")
    text = str(refused.value)
    assert "group 'trainer': no node of the Ray cluster offers" in text
    assert "label 'gpu_box'" in text and "gpu.yaml:" in text
    assert "'fine'" not in text
    assert not (tmp_path / "runs").exists()
    assert not ray.is_initialized()  # it disconnected from the cluster it joined
    assert alive([ray_cluster.pid])  # and left the cluster itself alone


def test_a_local_ray_run_leaves_this_process_fit_for_a_cluster(
    ray_cluster: Cluster, tmp_path: Path, topo_launch: Callable
) -> None:
    """A local Ray turns token authentication on in the launcher process (env and Ray's
    cached config); after the run a cluster without it must still work, here and in
    processes started from here."""
    from topo.backends.ray.backend import RayBackend

    path = write(tmp_path / "one.yaml", f'name: one\nnodes:\n  w: {{target: "{NODES}:Where"}}\n')
    before = dict(os.environ)
    for backend in (RayBackend(), RayBackend(address=ray_cluster.address)):
        run = topo_launch(path, backend)
        assert run.handle("w").where()["pid"] != os.getpid()
        assert run.stop(timeout=60) == 0
        assert dict(os.environ) == before  # no RAY_AUTH_MODE=token, PYTHONBREAKPOINT...
