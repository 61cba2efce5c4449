"""GPUs on Slurm: a job's GPUs on a node are given out one per executable that asks, by
the indexes its step sees (a job holding a node's GPUs 1 and 2 sees "1,2"), and an
executable that asks for none sees none. On a cluster of its own, one node with three
GPUs for Slurm to give out (``cluster.gpu_devices``: stand-ins nothing opens), on this
machine."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.backends.slurm import cluster
from tests.backends.slurm.cluster import SlurmCluster
from tests.backends.slurm.conftest import Allocation, allocate, leftovers, own_cluster
from tests.backends.slurm.test_slurm_run import topo_run
from topo.backends.device_plan import in_step
from topo.backends.slurm.allocation import gpu_indexes

LEARNERS = """
name: gpus
nodes:
  learner:
    target: "tests.backends.devices_nodes:Platform"
    count: {count}
    resources: {{accelerators: {{kind: gpu}}}}
  actor: {{target: "tests.backends.devices_nodes:Platform"}}
"""


def test_a_job_s_gpus_are_read_from_its_gres_indexes() -> None:
    assert gpu_indexes("gpu:2(IDX:1-2)") == (1, 2)
    assert gpu_indexes("gpu:a100:2(IDX:0,3)") == (0, 3)
    assert gpu_indexes("gpu:4(IDX:0-1,3-4)") == (0, 1, 3, 4)
    assert gpu_indexes("gpu:2") == (0, 1)  # no indexes given: the first ones
    assert gpu_indexes("gpu:1(IDX:2),license:3") == (2,)
    assert gpu_indexes("") == () and gpu_indexes("(null)") == ()


def test_positions_become_the_gpus_the_step_sees() -> None:
    given = {"learner/0": "gpu:0", "learner/1": "gpu:1", "big": "gpu:0,1"}
    assert in_step(given, "1,2") == {"learner/0": "gpu:1", "learner/1": "gpu:2", "big": "gpu:1,2"}
    assert in_step(given, "0,1") == given  # a job that confines its devices sees 0..n-1
    assert in_step(given, None) == given and in_step(given, "") == given
    assert in_step({"x": "gpu:2"}, "5,6") == {"x": "gpu:2"}  # not among them: as given


@pytest.fixture(scope="module")
def gpu_cluster() -> Iterator[SlurmCluster]:
    """Node g1 with three GPUs, its slurmd on this machine."""
    why = cluster.unavailable()
    if why is not None:
        pytest.skip(why)
    with own_cluster(nodes=("g1",), gpus=3) as running:
        yield running


@pytest.fixture
def two_gpus(gpu_cluster: SlurmCluster) -> Iterator[Allocation]:
    """A job holding GPUs 1 and 2 of g1 (another holds GPU 0)."""
    first = allocate(gpu_cluster, "--gres=gpu:1", "--mem=100")
    held = allocate(gpu_cluster, "--gres=gpu:2", "--mem=100")
    yield held
    gpu_cluster.run("scancel", held.job, first.job)
    left = leftovers(gpu_cluster)
    assert not left, f"left on the Slurm test cluster: {left}"


def _in_job(allocation: Allocation, monkeypatch: pytest.MonkeyPatch) -> None:
    env = allocation.env()
    for key in ("SLURM_CONF", "SLURM_JOB_ID", "SLURM_JOB_NODELIST"):
        monkeypatch.setenv(key, env[key])  # topo.launch runs here, as in an salloc shell


@pytest.mark.slow
def test_each_learner_gets_one_of_the_job_s_gpus_and_the_actor_none(
    two_gpus: Allocation,
    topo_launch: Callable,
    topology: Callable,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _in_job(two_gpus, monkeypatch)
    run = topo_launch(topology(LEARNERS.format(count=2)), "slurm", ready_timeout=90)
    seen = [run.handle(f"learner/{i}", timeout=30).env() for i in (0, 1)]
    assert sorted(e["CUDA_VISIBLE_DEVICES"] for e in seen) == ["1", "2"]
    assert {e["JAX_PLATFORMS"] for e in seen} == {"cuda,cpu"}
    actor = run.handle("actor", timeout=30).env()
    assert actor["CUDA_VISIBLE_DEVICES"] == "" and actor["JAX_PLATFORMS"] == "cpu"
    status = json.loads((run.run_dir / "status.json").read_text())  # what the views show
    devices = {n["id"]: n["device"] for n in status["nodes"]}
    assert devices["actor"] is None
    assert sorted([devices["learner/0"], devices["learner/1"]]) == ["gpu 1", "gpu 2"]
    assert run.stop(timeout=60) == 0


@pytest.mark.slow
def test_more_learners_than_the_job_has_gpus_is_refused_before_anything_starts(
    two_gpus: Allocation, tmp_path: Path
) -> None:
    path = tmp_path / "gpus.yaml"
    path.write_text(textwrap.dedent(LEARNERS.format(count=3)))
    done = topo_run(path, two_gpus.env())
    assert done.returncode == 1, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "gpus.yaml:4:" in said and "group 'learner'" in said, said
    assert "nodes of job" in said and "g1 (" in said and "Traceback" not in said, said
    assert "--gres=gpu:N" in said, said  # what to ask Slurm for
    assert not two_gpus.cluster.steps(two_gpus.job)  # nothing started in the job
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
