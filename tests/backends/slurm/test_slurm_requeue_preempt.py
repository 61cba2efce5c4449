"""A submitted run preempted (a job of the ``urgent`` partition needs its node; Slurm
requeues the run's job, PreemptMode=REQUEUE) goes on by itself: the requeued job resumes
from the run's newest snapshot -- here taken on the program's clock -- in the same run
directory, under the same run id, saying ``after preemption``; twice in a row, and the
program then ends. Checked by the node's state, not by timing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import psutil
import pytest

from tests.backends.slurm.cluster import SlurmCluster
from tests.backends.slurm.requeue_support import (
    STEP_S,
    ended,
    hurried,
    node_taken,
    state_of,
    submit_detached,
    take_node,
)
from topo.testing import wait_until

pytestmark = pytest.mark.slow
LIVES = """name: lives
snapshots: {every_s: 1, keep: 2}
nodes:
  lives: {target: "tests.backends.slurm.requeue_nodes:Lives", args: {need: 2}}
"""


def snapshots(run_dir: Path) -> list[int]:
    found = run_dir / "snapshots"
    return [int(p.name) for p in found.iterdir() if p.name.isdigit()] if found.is_dir() else []


def preempt(slurm: SlurmCluster, job: str, run_dir: Path, restarts: int) -> None:
    """Once the run's life ``restarts`` runs and has a snapshot: an urgent job takes
    its node; wait for Slurm to requeue the run's job."""
    taken = max(snapshots(run_dir), default=0)

    def ready() -> bool:
        hurried(slurm, job)  # (a requeued job held for its begin time goes now)
        now = state_of(slurm, job)
        return (
            now.get("JobState") == "RUNNING"
            and now.get("Restarts") == str(restarts)
            and max(snapshots(run_dir), default=0) > taken
        )

    wait_until(ready, STEP_S, what=f"life {restarts} of job {job} with a snapshot", every=0.5)
    urgent = take_node(slurm, state_of(slurm, job)["NodeList"])
    wait_until(
        lambda: state_of(slurm, job).get("Restarts") == str(restarts + 1),
        STEP_S,
        what=f"job {job} requeued",
    )
    node_taken(slurm, urgent)


def test_a_preempted_run_resumes_from_its_snapshot_twice_and_ends(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    (tmp_path / "lives.yaml").write_text(LIVES)
    job, run_dir = submit_detached(slurm_cluster, tmp_path, "lives.yaml")
    for restarts in (0, 1):
        preempt(slurm_cluster, job, run_dir, restarts)
    wait_until(
        lambda: ended(slurm_cluster, job, run_dir / f"slurm-{job}.out"),
        STEP_S,
        what=f"job {job} to end",
        every=1.0,
    )
    out = (run_dir / f"slurm-{job}.out").read_text()
    status = json.loads((run_dir / "status.json").read_text())
    assert status["exit_code"] == 0 and status["stop_reason"] == "every node finished", out
    resumed = re.findall(r"◆ resumed from snapshot (\d+) after preemption", out)
    assert len(resumed) == 2, out
    # each life started from a state the one before saved: the count goes on
    for lives in (1, 2):
        restored = re.findall(rf"restored count (\d+) lives {lives}\b", out)
        saved = re.findall(rf"saved count (\d+) lives {lives - 1}\b", out)
        assert restored and restored[0] in saved, out
    last = re.findall(r"done count (\d+) lives 2", out)
    assert last and int(last[-1]) > max(int(n) for n in re.findall(r"restored count (\d+)", out))
    assert status["resumed"] == f"resumed from snapshot {resumed[-1]} after preemption"
    listed = list((tmp_path / "home" / "runs").iterdir())
    assert [p.name for p in listed] == [status["id"]]
    pids = [status["launcher"]["pid"], *(n["pid"] for n in status["nodes"] if n["pid"])]
    wait_until(lambda: not any(psutil.pid_exists(p) for p in pids), 60, what="no process left")
