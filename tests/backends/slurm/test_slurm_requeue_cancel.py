"""A submitted run whose job is cancelled (``scancel``) ends there: the job is not
requeued (no second life, no resumption), nothing of it is left, by pid, and the run's
end is recorded -- its stop ends before Slurm's KillWait (5 s on the test cluster) is
over, though its grace is 30 s and a node ignores the stop."""

from __future__ import annotations

import json
import re
from pathlib import Path

import psutil
import pytest

from tests.backends.slurm.cluster import SlurmCluster
from tests.backends.slurm.requeue_support import LIVES_NODE, state_of, submit_counting
from topo.testing import wait_until

pytestmark = pytest.mark.slow
# a node that ignores the stop, and a grace far past KillWait
STUBBORN = f"""name: lives
stop: {{grace_s: 30}}
nodes:
  lives: {{target: "{LIVES_NODE}", args: {{need: 2}}}}
  stubborn: {{target: "topo.testing.nodes:Stubborn"}}
"""


def test_a_cancelled_run_is_not_requeued_and_leaves_nothing(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    (tmp_path / "lives.yaml").write_text(STUBBORN)
    job, run_dir, out = submit_counting(slurm_cluster, tmp_path, "lives.yaml")
    status = json.loads((run_dir / "status.json").read_text())
    pids = [status["launcher"]["pid"], *(n["pid"] for n in status["nodes"] if n["pid"])]
    assert slurm_cluster.run("scancel", job).returncode == 0
    seen: set[str] = set()

    def gone() -> bool:
        now = state_of(slurm_cluster, job)
        seen.add(now.get("JobState", ""))
        assert now.get("Restarts", "0") == "0", f"job {job} was requeued: {now}"
        return now.get("JobState") in (None, "CANCELLED")

    wait_until(gone, 120, what=f"job {job} cancelled", every=0.2)
    assert "PENDING" not in seen and "REQUEUED" not in seen, seen
    wait_until(lambda: not any(psutil.pid_exists(p) for p in pids), 60, what="no process left")
    text = out.read_text()
    ended = json.loads((run_dir / "status.json").read_text())
    assert ended["state"] == "ended" and ended["exit_code"] == 143, (ended, text)
    assert "resumed from snapshot" not in text and not re.search(r"lives [1-9]", text), text
