"""``topo run -d`` on a Ray cluster: the run goes on after the command returned, ``ps``
and ``status`` see its actors running, ``stop`` ends it and leaves no process here."""

from __future__ import annotations

import re
from pathlib import Path

from tests.cli.operate import run_detached, run_pids, status, ticker_topology, topo, wait_gone
from tests.backends.ray.cluster import Cluster


def test_a_detached_run_on_ray_is_operated_and_stopped(
    ray_cluster: Cluster, tmp_path: Path
) -> None:
    file = ticker_topology(tmp_path / "tickers.yaml", count=2)
    args = ["-b", "ray", "--address", ray_cluster.address]
    run_id, run_dir = run_detached(tmp_path, str(file), *args)
    pids = run_pids(run_dir)
    listed = topo("ps", cwd=tmp_path).stdout
    assert re.search(rf"{run_id}\s+tickers\s+ray\s+running\s+2/2", listed), listed
    shown = topo("status", run_id, cwd=tmp_path).stdout
    assert re.search(r"ticker/1 .* running", shown), shown
    stopped = topo("stop", run_id, cwd=tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    assert status(run_dir)["exit_code"] == 0
    assert not wait_gone(pids)
