"""On the ray backend, a node's own processes end with it: when its process is killed
(and topo restarts it) -- those it detached with ``setsid`` too, as on procs: the
agent's fork server is their subreaper -- and when the run stops; checked by pid."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.backends.ray.cluster import Cluster, ray_missing
from tests.backends.ray.runs import kill_if_running, start, status, topo_run, wait_for, write
from topo.testing import alive, wait_gone

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(ray_missing() is not None, reason=str(ray_missing())),
]


def _pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def test_a_killed_node_process_takes_the_processes_its_node_started(
    ray_cluster: Cluster, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    path = write(
        tmp_path / "spawn.yaml",
        f"""
        name: spawn
        nodes:
          spawner:
            target: "tests.faults.fault_nodes:Spawner"
            args: {{pid_file: "{pid_file}"}}
            restart: {{policy: on-failure, max_restarts: 1, backoff: {{initial_s: 0}}}}
        """,
    )
    run_dir = tmp_path / "run"
    proc = start(topo_run(path, run_dir, "-q", address=ray_cluster.address))
    first: list[int] = []
    second: list[int] = []
    try:
        first = wait_for(lambda: _pids(pid_file), proc, 60)
        node = wait_for(lambda: status(run_dir).get("spawner", {}).get("pid"), proc, 60)
        assert alive(first) == first
        pid_file.unlink()
        os.kill(int(node), signal.SIGKILL)
        second = wait_for(lambda: _pids(pid_file), proc, 60)  # restarted, new processes
        assert not wait_gone(first, 10), "a killed node's processes outlived it"
        assert alive(second) == second
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 130, out
        assert not wait_gone(second, 10), "the node's processes outlived the run"
    finally:
        kill_if_running(proc)
        for pid in alive([*first, *second]):
            os.kill(pid, signal.SIGKILL)
