"""A submitted run that reaches its job's time limit goes on by itself: Slurm's warning
(``--signal=B:USR1@W``) makes the launcher snapshot, stop and requeue the job, and the
requeued job resumes from that snapshot in the same run directory, under the same run
id, saying so. Checked by the node's state (its count goes on from the snapshot's),
not by timing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import psutil
import pytest

from tests.backends.slurm.cluster import SlurmCluster
from tests.backends.slurm.requeue_support import hurried, submit_detached
from topo.testing import wait_until

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
LIVES = """name: lives
nodes:
  lives: {target: "tests.backends.slurm.requeue_nodes:Lives", args: {need: 1}}
"""
# The controller looks at time limits and warnings every 30 s, and later on a busy
# machine: with a two-minute job and a 100 s warning, the warning is due 20 s after the
# start and the end 100 s later, a window of three looks (a one-minute job's 45 s window
# was missed on a loaded machine: no look between the warning and the end, the job
# killed unwarned).
WARNING_S = "100"
LIMITED = ("--time", "2", "--warning-s", WARNING_S)
JOB_S = 420.0  # two lives of the job (the second ends soon), the requeue between, loaded


def test_a_run_at_its_time_limit_is_requeued_and_resumes_from_its_snapshot(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    (tmp_path / "lives.yaml").write_text(LIVES)
    job, run_dir = submit_detached(slurm_cluster, tmp_path, "lives.yaml", *LIMITED)
    assert "trap '' USR1" in (run_dir / "job.sh").read_text()

    wait_until(
        lambda: hurried(slurm_cluster, job) in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", ""),
        JOB_S,
        what=f"job {job} to end",
        every=1.0,
    )
    out = (run_dir / f"slurm-{job}.out").read_text()
    status = json.loads((run_dir / "status.json").read_text())
    assert status["exit_code"] == 0 and status["stop_reason"] == "every node finished", out
    # the first life: the snapshot before the time limit, then the stop and the requeue
    assert "◆ snapshot 1 (before the time limit)" in out, out
    assert f"Slurm job {job} is requeued" in out
    saved = [int(n) for n in re.findall(r"saved count (\d+) lives 0", out)]
    assert saved, out
    # the next life resumed from that snapshot, and said so: the count goes on from it
    assert "◆ resumed from snapshot 1 after the time limit" in out, out
    assert f"restored count {saved[0]} lives 1" in out, out
    last = re.findall(r"done count (\d+) lives (\d+)", out)
    assert last and int(last[-1][0]) > saved[0] and int(last[-1][1]) >= 1, out
    # one run: the same id across the requeue, resumed as status.json says
    assert status["resumed"].startswith("resumed from snapshot ")
    assert status["resumed"].endswith("after the time limit")
    listed = list((tmp_path / "home" / "runs").iterdir())
    assert [p.name for p in listed] == [status["id"]]
    assert "already holds a run" not in out  # (the requeued run's own directory)
    # nothing left by pid: the last launcher and its nodes
    pids = [status["launcher"]["pid"], *(n["pid"] for n in status["nodes"] if n["pid"])]
    wait_until(lambda: not any(psutil.pid_exists(p) for p in pids), 60, what="no process left")
