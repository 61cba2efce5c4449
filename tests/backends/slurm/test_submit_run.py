"""``topo run FILE -b slurm`` outside an allocation, on the test cluster: the run is
submitted as a job in a run directory made first (its script kept as ``job.sh``, the
job's output in ``slurm-<job>.out``); ``-d`` prints the job id and run directory and
returns, without it the job is followed to its end (its output shown, its exit code
returned; Ctrl-C stops the run). Refused before anything is made: what the partition
cannot hold, what sbatch refuses (in its words): exit 1, no job, no run directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.backends.slurm.cluster import SlurmCluster
from topo.testing import Lines, wait_until

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "topologies" / "consumer_producers.yaml"
NODES = "tests.backends.slurm.slurm_nodes"
SPREAD = f"""name: spread
nodes:
  where:
    target: "{NODES}:Where"
    count: 3
    resources: {{spread: true}}
"""
FOREVER = """name: forever
nodes:
  ticker: {target: "topo.testing.nodes:Ticker", args: {name: t, every: 0.2}}
"""
JOB_S = 240.0  # a job of the test cluster ends within this (a few seconds idle)


def login_env(slurm: SlurmCluster) -> dict[str, str]:
    """A login node's shell on the test cluster: no job of its own."""
    return {
        **{k: v for k, v in slurm.env().items() if not k.startswith("SLURM_")},
        "SLURM_CONF": str(slurm.conf),
        "PYTHONPATH": str(ROOT),
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }


def topo_run(
    slurm: SlurmCluster, path: Path, cwd: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    """``topo run PATH -b slurm EXTRA`` from a login node's shell in ``cwd``."""
    return subprocess.run(
        [sys.executable, "-m", "topo", "run", str(path), "-b", "slurm", *extra],
        cwd=cwd,
        env=login_env(slurm),
        capture_output=True,
        text=True,
        timeout=JOB_S + 60,
    )


def ended(slurm: SlurmCluster, job: str) -> bool:
    return slurm.job_state(job) in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "")


def test_detached_the_job_id_and_run_dir_are_printed_and_the_run_lives_in_the_job(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    done = topo_run(slurm_cluster, EXAMPLE, tmp_path, "-d", "--time", "10", "-p", "num_producers=3")
    assert done.returncode == 0, done.stderr
    job, run_dir_text = done.stdout.split()
    run_dir = Path(run_dir_text)
    assert run_dir.parent == tmp_path / "runs" and run_dir.name.startswith("consumer_producers-")
    assert f"✓ job {job} submitted" in done.stderr
    script = (run_dir / "job.sh").read_text()
    assert f"#SBATCH --output={run_dir}/slurm-%j.out" in script
    assert f"--run-dir {run_dir} --no-live" in script and "-p num_producers=3" in script
    assert "#SBATCH --time=10" in script and "--time 10" not in script  # the job's own
    wait_until(lambda: ended(slurm_cluster, job), JOB_S, what=f"job {job} ended")
    output = (run_dir / f"slurm-{job}.out").read_text()
    assert "consumer: 32 results from 3 producers" in output, output
    assert "change nothing" not in output  # the launcher is not given the job's options
    status = json.loads((run_dir / "status.json").read_text())  # the job's launcher's
    assert (status["program"], status["exit_code"]) == ("consumer_producers", 0)


def test_followed_the_jobs_output_is_shown_and_its_exit_code_returned(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    done = topo_run(slurm_cluster, EXAMPLE, tmp_path, "-p", "num_producers=2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "consumer: 32 results from 2 producers" in done.stdout, done.stdout
    (job,) = {line.split()[2] for line in done.stderr.splitlines() if "submitted" in line}
    assert f"✓ job {job} " in done.stderr and " — exit 0" in done.stderr, done.stderr
    assert slurm_cluster.jobs() == []


def test_ctrl_c_while_following_stops_the_run_in_the_job(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    path = tmp_path / "forever.yaml"
    path.write_text(FOREVER)
    proc = subprocess.Popen(
        [sys.executable, "-m", "topo", "run", str(path), "-b", "slurm"],
        cwd=tmp_path,
        env=login_env(slurm_cluster),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = Lines(proc.stdout)
        lines.wait_for(" up in ", timeout=JOB_S)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=JOB_S) == 130, lines.text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    said = lines.text()
    assert "stopping job" in said and "Ctrl-C" in said, said
    assert slurm_cluster.jobs() == [], said


def test_what_the_partition_cannot_hold_is_refused_before_anything_is_made(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    path = tmp_path / "spread.yaml"
    path.write_text(SPREAD)
    done = topo_run(slurm_cluster, path, tmp_path)
    assert done.returncode == 1, done.stdout
    assert done.stderr.splitlines()[0] == (
        f"{path}:3:3: error: the job needs 3 nodes (group 'where' sets resources.spread), "
        "and partition 'main' has 2 (n1, n2)"
    ), done.stderr
    assert not (tmp_path / "runs").exists()
    bad = tmp_path / "bad.yaml"
    bad.write_text('name: bad\nnodes:\n  x: {target: "no_such_module_here:Node"}\n')
    done = topo_run(slurm_cluster, bad, tmp_path)  # imports checked here, as on every backend
    assert done.returncode == 1, done.stdout
    assert "no_such_module_here" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()
    assert slurm_cluster.jobs() == []


def test_a_job_sbatch_refuses_is_said_in_its_words_and_leaves_nothing(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    done = topo_run(slurm_cluster, EXAMPLE, tmp_path, "--constraint", "no_such_feature")
    assert done.returncode == 1, done.stdout
    assert done.stderr.splitlines() == [
        "error: sbatch refused the job: Batch job submission failed: Invalid feature specification"
    ], done.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    assert slurm_cluster.jobs() == []


def test_from_a_login_node_the_dashboard_and_a_rerun_of_no_run_are_refused(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "topo", "run", "-b", "slurm", *args],
            cwd=tmp_path,
            env=login_env(slurm_cluster),
            capture_output=True,
            text=True,
            timeout=60,
        )

    rerun = run("--from", str(tmp_path))  # (a rerun is submitted: test_submit_rerun.py)
    assert rerun.returncode == 1, rerun.stdout
    assert f"cannot rerun {tmp_path}: {tmp_path} has no run.json" in rerun.stderr, rerun.stderr
    ui = run(str(EXAMPLE), "--ui")
    assert ui.returncode == 2, ui.stdout
    assert "a run topo run -b slurm submits lives in its job" in ui.stderr, ui.stderr
    assert os.listdir(tmp_path) == []
    assert slurm_cluster.jobs() == []
