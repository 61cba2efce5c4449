"""``topo run --resume RUN -b slurm`` from a login node submits the run brought back:
the job's launcher is told the run and the snapshot chosen (checked) here, and the
program goes on from that snapshot's states in its new job; a snapshot that does not
fit is refused before anything is submitted."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.backends.slurm.cluster import SlurmCluster
from tests.backends.slurm.requeue_support import (
    LIVES_NODE,
    STEP_S,
    ended,
    submit_counting,
)
from tests.backends.slurm.requeue_support import login_topo as topo
from topo.testing import wait_until

pytestmark = pytest.mark.slow
LIVES = f"""name: lives
nodes:
  lives: {{target: "{LIVES_NODE}", args: {{need: 1}}}}
"""


def test_a_resumed_run_is_submitted_and_goes_on_from_its_snapshot(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    (tmp_path / "lives.yaml").write_text(LIVES)
    job, run_dir, out = submit_counting(slurm_cluster, tmp_path, "lives.yaml")
    taken = topo(slurm_cluster, tmp_path, "snapshot", str(run_dir))
    assert taken.returncode == 0, taken.stderr
    stopped = topo(slurm_cluster, tmp_path, "stop", str(run_dir))
    assert stopped.returncode == 0, stopped.stderr
    wait_until(lambda: slurm_cluster.job_state(job) in ("COMPLETED", ""), STEP_S, what="the end")
    [saved] = re.findall(r"saved count (\d+) lives 0", out.read_text())

    # a snapshot of another program is refused here, and nothing is submitted
    (tmp_path / "other.yaml").write_text(LIVES.replace("lives:", "other:", 1))
    refused = topo(slurm_cluster, tmp_path, "run", "other.yaml", "--fork", str(run_dir), "-b",
                   "slurm", "-d")  # fmt: skip
    assert refused.returncode == 1, refused.stdout
    assert "Traceback" not in refused.stderr and "lives" in refused.stderr, refused.stderr
    assert slurm_cluster.jobs() == []

    again = topo(slurm_cluster, tmp_path, "run", "--resume", str(run_dir), "-b", "slurm", "-d")
    assert again.returncode == 0, again.stderr
    job2, run_dir2 = again.stdout.split()
    script = (Path(run_dir2) / "job.sh").read_text()
    assert f"--resume {run_dir} --snapshot 1" in " ".join(script.split()), script
    out2 = Path(run_dir2) / f"slurm-{job2}.out"
    wait_until(lambda: ended(slurm_cluster, job2, out2), STEP_S, what=f"job {job2} to end")
    said = out2.read_text()
    assert f"restored count {saved} lives 1" in said, said  # its count went on
    status = json.loads((Path(run_dir2) / "status.json").read_text())
    assert status["exit_code"] == 0, said
