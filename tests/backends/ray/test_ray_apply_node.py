"""``topo apply`` on a one-node Ray cluster (4 CPUs, 1 GPU): a GPU executable a change
adds runs in a Ray actor of its own in a new bundle and Ray gives it the device; a new
forked executable asking for 2 CPUs gets ``OMP_NUM_THREADS`` for them, as at the start;
removed again, the actor ends and its bundle is released; the running nodes keep their
processes throughout."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.backends.ray.applying import calls_go_on, groups_of, launch, pids, workers
from tests.backends.ray.cluster import Cluster, ray_missing
from topo.api import RunningProgram
from topo.testing import wait_gone, wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(ray_missing() is not None, reason=str(ray_missing())),
]
WHERE = "tests.backends.ray.ray_nodes:Where"


def test_a_gpu_executable_added_runs_in_an_actor_of_its_own_and_goes_again(
    ray_cluster: Cluster, topo_launch: Callable[..., RunningProgram], tmp_path: Path
) -> None:
    run = launch(topo_launch, ray_cluster, workers(tmp_path, 2))
    kept = pids(run, ["worker/0", "worker/1", "caller"])
    started = set(groups_of(run))
    extra = f'gpu: {{target: "{WHERE}", resources: {{gpus: [0]}}}}\n'
    extra += f'  wide: {{target: "{WHERE}", resources: {{cpus: [0, 1]}}}}'
    added = run.apply(workers(tmp_path, 2, extra=extra), timeout=240)
    assert added.result == "applied", added.record
    gpu = run.handle("gpu", timeout=30).where()
    assert gpu["actor"] == "gpu" and gpu["ray_gpus"] == ["0"] and gpu["cuda"] == "0"
    wide = run.handle("wide", timeout=30).where()
    assert wide["actor"] is None and wide["omp"] == "2"  # forked, with its CPUs' threads
    # Ray starts its workers at nice 15; the program runs at the normal priority
    assert gpu["nice"] == 0 and wide["nice"] == 0, (gpu, wide)
    assert pids(run, list(kept)) == kept
    new = [g for g in groups_of(run) if g not in started]
    assert len(new) == 1 and groups_of(run)[new[0]] == "CREATED"

    removed = run.apply(workers(tmp_path, 2), timeout=240)
    assert removed.result == "applied", removed.record
    assert not wait_gone([int(gpu["pid"]), int(wide["pid"])], 30)
    wait_until(  # both left: the group is given back
        lambda: groups_of(run)[new[0]] == "REMOVED", 20, what="the group removed"
    )
    stats = calls_go_on(run, 50)
    assert stats["errors"] == [] and pids(run, list(kept)) == kept
    assert run.stop(timeout=90) == 0
    assert not wait_gone(list(kept.values()), 20)
