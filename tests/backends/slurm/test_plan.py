"""``topo plan FILE -b slurm`` on the real test cluster: the sbatch script it prints
(and that script, submitted as it is, runs the program to its end), its refusals of what
the partition cannot hold (Slurm's limit, the group's ``file:line:col``, exit 1, no job
submitted), and ``submit``: sbatch's job id, or its refusal in Slurm's words."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.backends.slurm.cluster import SlurmCluster
from topo.backends.slurm.submit import SubmitError, submit
from topo.testing import wait_until

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "topologies" / "consumer_producers.yaml"
NODES = "tests.backends.slurm.slurm_nodes"
SPREAD = f"""name: spread
nodes:
  head: {{target: "{NODES}:Where"}}
  where:
    target: "{NODES}:Where"
    count: 3
    resources: {{spread: true}}
"""
JOB_S = 240.0  # a job of the test cluster ends within this (it takes a few seconds idle)


def topo_plan(
    path: Path, env: dict[str, str], *extra: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``topo plan PATH -b slurm EXTRA`` as a user types it."""
    env = {**env, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "topo", "plan", str(path), "-b", "slurm", *extra],
        cwd=cwd or path.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def script_of(printed: str) -> str:
    """The sbatch script in ``topo plan -b slurm``'s output (its last part)."""
    return printed[printed.index("#!/bin/bash") :]


def test_help_lists_the_backends_options() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "topo", "plan", "-b", "slurm", "-h"],
        env={"PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "200", "PATH": ""},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    for flag in ("--partition", "--time", "--account", "--qos", "--constraint"):
        assert flag in done.stdout, done.stdout
    assert "--warning-s SECONDS" in done.stdout and "--sbatch-args ARGS" in done.stdout


def test_the_plan_is_the_script_and_it_runs_the_program_to_its_end(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    done = topo_plan(EXAMPLE, slurm_cluster.env(), "-p", "num_producers=3", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    script = script_of(done.stdout)
    lines = script.splitlines()
    assert "#SBATCH --signal=B:USR1@120" in lines and "#SBATCH --requeue" in lines
    assert "#SBATCH --open-mode=append" in lines
    # 4 one-CPU processes on the 4-CPU nodes n1, n2: one node
    assert "#SBATCH --nodes=1" in lines and "#SBATCH --cpus-per-task=4" in lines
    assert lines[-5:] == [
        f"cd {tmp_path} || exit 1",
        "trap '' USR1",
        f"exec {sys.executable} -m topo run {EXAMPLE} -b slurm \\",
        "    -p num_producers=3 \\",
        "    -p work_items=32",
    ]
    # submitted as it is, the job runs the program to its end
    env = {**slurm_cluster.env(), "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    job = submit(script, cwd=tmp_path, env=env)
    wait_until(
        lambda: slurm_cluster.job_state(job) in ("COMPLETED", "FAILED", "CANCELLED", ""),
        JOB_S,
        what=f"job {job} ended",
    )
    output = tmp_path / f"slurm-{job}.out"
    assert slurm_cluster.job_state(job) in ("COMPLETED", ""), output.read_text()
    said = output.read_text()
    assert "consumer: 32 results from 3 producers" in said and "exit 0" in said, said
    assert "Traceback" not in said


def test_what_the_partition_cannot_hold_is_refused_with_its_limit_and_the_group(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    path = tmp_path / "spread.yaml"
    path.write_text(SPREAD)
    done = topo_plan(path, slurm_cluster.env())
    assert done.returncode == 1, done.stdout
    assert done.stderr.splitlines()[:3] == [
        f"{path}:4:3: error: the job needs 3 nodes (group 'where' sets resources.spread), "
        "and partition 'main' has 2 (n1, n2)",
        "   4 |   where:",
        "         ^",
    ], done.stderr
    assert "#SBATCH" not in done.stdout
    example = topo_plan(EXAMPLE, slurm_cluster.env(), "--partition", "short", "--time", "5")
    assert example.returncode == 1
    assert example.stderr.splitlines()[0] == (
        "error: --time 5 (00:05:00) is over partition 'short''s MaxTime=00:01:00"
    ), example.stderr
    unknown = topo_plan(EXAMPLE, slurm_cluster.env(), "--partition", "mian")
    assert unknown.returncode == 1
    assert unknown.stderr.splitlines() == [
        "error: --partition mian: Slurm has no such partition "
        "(partitions: main*, short, graced, urgent)",
        "  hint: did you mean 'main'?",
    ]
    big = tmp_path / "big.yaml"
    big.write_text(
        f"""name: big
nodes:
  learner: {{target: "{NODES}:Where", resources: {{gpus: [0], memory: 8GiB}}}}
"""
    )
    refused = topo_plan(big, slurm_cluster.env())
    assert refused.returncode == 1
    assert refused.stderr.splitlines()[0] == (
        f"{big}:3:3: error: a process of group 'learner' needs 1 GPU on one node, and "
        "partition 'main' has no node with GPUs (no Gres=gpu); and 8192 MiB of memory on one "
        "node, and partition 'main' gives at most 4000 MiB (the most: RealMemory=4000M on n1)"
    ), refused.stderr
    assert slurm_cluster.jobs() == []


def test_a_job_sbatch_refuses_is_said_in_slurms_words(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    script = "#!/bin/bash\n#SBATCH --constraint=no_such_feature\nexec true\n"
    with pytest.raises(SubmitError) as info:
        submit(script, cwd=tmp_path, env=slurm_cluster.env())
    assert str(info.value) == (
        "error: sbatch refused the job: Batch job submission failed: Invalid feature specification"
    )
    assert slurm_cluster.jobs() == []


def test_a_job_sbatch_takes_gives_its_id(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    script = "#!/bin/bash\n#SBATCH --job-name=topo-held\n#SBATCH --hold\nexec true\n"
    job = submit(script, cwd=tmp_path, env=slurm_cluster.env())
    try:
        assert job.isdigit() and slurm_cluster.jobs() == [job]
        shown = slurm_cluster.run("squeue", "-h", "-j", job, "-o", "%j %T")
        assert shown.stdout.split() == ["topo-held", "PENDING"]
    finally:
        slurm_cluster.run("scancel", job)


def test_without_slurm_submit_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SubmitError, match="Slurm is not installed here: no sbatch or scontrol"):
        submit("#!/bin/bash\nexec true\n")


def test_slurm_that_reaches_no_cluster_is_refused_in_its_words(tmp_path: Path) -> None:
    if shutil.which("scontrol") is None:
        pytest.skip("Slurm's commands are not installed here")
    conf = tmp_path / "slurm.conf"
    conf.write_text("")  # scontrol cannot read it, and says so at once
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    done = topo_plan(EXAMPLE, {**env, "SLURM_CONF": str(conf)}, cwd=tmp_path)
    assert done.returncode == 1, done.stdout
    first, hint = done.stderr.splitlines()
    assert first.startswith("error: scontrol show partition -o failed: scontrol: "), first
    assert "ClusterName needs to be specified" in first  # Slurm's words, on one line
    assert hint == (
        "  hint: run topo where sbatch works (a login node of the cluster), or set SLURM_CONF "
        "to the cluster's slurm.conf"
    )
