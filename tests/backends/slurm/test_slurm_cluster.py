"""The Slurm test cluster itself (``cluster.py``, ``conftest.py``): its nodes and
partitions as the backend's tests expect them, steps placed on the node asked for, a
preempting partition, and a stop that leaves nothing of the cluster or its jobs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psutil

from tests.backends.slurm import cluster
from tests.backends.slurm.cluster import SlurmCluster
from tests.backends.slurm.conftest import Allocation, allocate
from topo.testing import Lines, wait_gone, wait_until


def partition(slurm: SlurmCluster, name: str) -> dict[str, str]:
    """``scontrol show partition NAME -o`` as a dict."""
    done = slurm.run("scontrol", "show", "partition", name, "-o")
    assert done.returncode == 0, done.stderr
    return dict(w.split("=", 1) for w in done.stdout.split() if "=" in w)


def test_the_cluster_has_two_idle_nodes_and_four_partitions(slurm_cluster: SlurmCluster) -> None:
    parts = ("main*", "short", "graced", "urgent")
    want = sorted((n, p, "idle") for n in ("n1", "n2") for p in parts)

    def rows() -> list[tuple[str, ...]]:
        shown = slurm_cluster.run("sinfo", "-h", "-N", "-o", "%N %P %t")
        return sorted(tuple(line.split()) for line in shown.stdout.splitlines())

    # (after an earlier test's job, the backfill scheduler may still show its nodes
    # "plnd", planned, for a moment: no job is left, see the slurm_cluster fixture)
    wait_until(lambda: rows() == want, 30, what="both nodes idle in the four partitions")
    names = ("main", "short", "graced", "urgent")
    main, short, graced, urgent = (partition(slurm_cluster, p) for p in names)
    assert main["Default"] == "YES" and main["MaxTime"] == "UNLIMITED"
    assert short["MaxTime"] == "00:01:00"
    assert int(urgent["PriorityTier"]) > int(main["PriorityTier"]) == int(graced["PriorityTier"])
    assert main["PreemptMode"] == "REQUEUE" == graced["PreemptMode"]
    assert main["GraceTime"] == "0" and int(graced["GraceTime"]) > 0


def test_a_step_runs_on_the_node_it_names(slurm_allocation: Allocation) -> None:
    assert slurm_allocation.nodes == ("n1", "n2")
    for node in slurm_allocation.nodes:
        step = ["srun", f"--jobid={slurm_allocation.job}", "-N1", "-n1", "--overlap", "-w", node]
        done = subprocess.run(
            [*step, "printenv", "SLURMD_NODENAME"],
            env=slurm_allocation.cluster.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0 and done.stdout.strip() == node, done.stderr


def test_scancel_ends_a_step_and_what_it_runs(slurm_cluster: SlurmCluster) -> None:
    held = allocate(slurm_cluster, "-N1")
    srun = ["srun", f"--jobid={held.job}", "-N1", "-n1", "--overlap"]
    step = subprocess.Popen(
        [*srun, "bash", "-c", "echo pid $$; exec sleep 600"],
        env=slurm_cluster.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert step.stdout is not None
    try:
        pid = int(Lines(step.stdout).wait_for(lambda line: line.startswith("pid "), 60).split()[1])
        # bash says its pid, then becomes sleep (on a busy machine, not at once)
        wait_until(lambda: psutil.Process(pid).name() == "sleep", 60, what="the step's sleep")
        stepds = slurm_cluster.stepds()
        assert stepds and all(pid in {c.pid for c in s.children(recursive=True)} for s in stepds)
    except BaseException:
        slurm_cluster.run("scancel", held.job)  # nothing left on the cluster for the next test
        raise
    slurm_cluster.run("scancel", held.job)
    assert wait_gone([pid, *(s.pid for s in stepds)], 60) == []
    step.wait(60)


def test_the_urgent_partition_requeues_a_job_of_main(slurm_cluster: SlurmCluster) -> None:
    whole = [
        "-N2",
        f"--ntasks-per-node={cluster.CPUS}",
        "-o",
        "/dev/null",
        "--wrap",
        "exec sleep 600",
    ]
    low = slurm_cluster.run("sbatch", "--parsable", "--requeue", "-p", "main", *whole)
    assert low.returncode == 0, low.stderr
    low_job = low.stdout.strip()
    wait_until(lambda: slurm_cluster.job_state(low_job) == "RUNNING", 60, what="main's job")
    high = slurm_cluster.run("sbatch", "--parsable", "-p", "urgent", *whole)
    high_job = high.stdout.strip()
    try:
        wait_until(lambda: slurm_cluster.job_state(high_job) == "RUNNING", 120, what="urgent's job")
        shown = slurm_cluster.run("scontrol", "show", "job", "-o", low_job).stdout
        assert "JobState=PENDING" in shown and "Restarts=1" in shown, shown
    finally:
        slurm_cluster.run("scancel", low_job, high_job)


def test_stop_leaves_nothing_of_the_cluster(slurm_session: SlurmCluster, tmp_path: Path) -> None:
    # a cluster of its own (beside the session's, which it must not touch), with a step
    other = cluster.start(tmp_path / "c", nodes=("m1",))
    try:
        held = allocate(other, "-N1")
        step = subprocess.Popen(
            ["srun", f"--jobid={held.job}", "-n1", "--overlap", "sleep", "600"],
            env=other.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(lambda: other.steps(held.job), 60, what="the step")
        wait_until(lambda: other.stepds(), 60, what="its step daemon")
        pids = other.processes()
        ours = {p.pid for p in slurm_session.stepds()}
        assert len(pids) >= 5 and not ours & set(pids)  # 3 daemons, slurmstepd, sleep
    finally:
        left = other.stop()
    assert left == []
    assert wait_gone(pids, 30) == []
    step.wait(60)
    assert slurm_session.run("scontrol", "ping").stdout.count("UP") == 1
