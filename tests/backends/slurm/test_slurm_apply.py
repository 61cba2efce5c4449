"""``topo apply`` inside a job: what a change adds runs on the job's nodes beside what
runs there; a change that needs more than the job holds -- more CPUs on a node than
the job has there, a node more -- is refused naming the group where it is in the file,
and nothing changes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.backends.slurm.cluster import SlurmCluster
from tests.backends.slurm.conftest import Allocation, allocate
from topo.api import ApplyRefused, RunningProgram

pytestmark = pytest.mark.slow
NODES = "tests.backends.slurm.slurm_nodes"


def program(tmp_path: Path, workers: int, extra: str = "") -> Path:
    """``workers`` of 2 CPUs each (``w``), and ``extra`` groups."""
    path = tmp_path / f"apply-{workers}-{len(extra)}.yaml"
    path.write_text(
        "name: grow\nnodes:\n"
        f'  w: {{target: "{NODES}:Where", count: {workers}, resources: {{cpus: [0, 1]}}}}\n' + extra
    )
    return path


@pytest.fixture
def two_cpus_each(
    slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Allocation]:
    """Both nodes, 2 CPUs held on each; this process inside the allocation."""
    held = allocate(slurm_cluster, "-N2", "--ntasks-per-node=1", "--cpus-per-task=2")
    env = held.env()
    for key in ("SLURM_CONF", "SLURM_JOB_ID", "SLURM_JOB_NODELIST"):
        monkeypatch.setenv(key, env[key])
    yield held
    slurm_cluster.run("scancel", held.job)


def test_a_change_is_placed_in_the_job_and_one_over_its_cpus_or_nodes_is_refused(
    two_cpus_each: Allocation, topo_launch: Callable[..., RunningProgram], tmp_path: Path
) -> None:
    run = topo_launch(program(tmp_path, 1), "slurm", ready_timeout=90)
    first = run.handle("w/0", timeout=30).where()

    up = run.apply(program(tmp_path, 2), timeout=180)
    assert up.result == "applied", up.record
    second = run.handle("w/1", timeout=30).where()
    assert {first["node"], second["node"]} == {"n1", "n2"}  # 2 CPUs: one worker a node
    assert run.handle("w/0", timeout=30).where()["pid"] == first["pid"]  # not restarted

    # a third worker: 4 CPUs named on a node that holds 2
    with pytest.raises(ApplyRefused) as info:
        run.apply(program(tmp_path, 3))
    said = str(info.value)
    assert "apply-3-0.yaml:3:3" in said, said  # the group, where it is in the file
    assert "group 'w' asks 2 CPU(s) per process" in said, said
    assert f"Slurm job {two_cpus_each.job} holds 2 there" in said, said
    # a group spread over 3 nodes: the job has 2
    spread = '  s: {target: "' + NODES + ':Where", count: 3, resources: {spread: true}}\n'
    with pytest.raises(ApplyRefused, match=r"group 's' sets resources.spread") as info:
        run.apply(program(tmp_path, 2, spread))
    assert "apply-2-" in str(info.value) and ".yaml:4:3" in str(info.value)
    assert run.launcher.state.generation == 1  # neither changed anything
    assert sorted(run.launcher.state.nodes) == ["w/0", "w/1"]
    assert run.stop(timeout=60) == 0
