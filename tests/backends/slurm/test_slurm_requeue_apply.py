"""A submitted run changed by ``topo apply`` and then preempted goes on with the program
it ran when it stopped -- the applied one, from the snapshot taken of it -- not with
the file its job was submitted with (the job's script still names that one)."""

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
    login_topo,
    node_taken,
    state_of,
    submit_counting,
    take_node,
)
from tests.backends.slurm.test_slurm_requeue_preempt import snapshots
from topo.testing import wait_until

pytestmark = pytest.mark.slow
LIVES = f"""name: lives
snapshots: {{every_s: 1, keep: 2}}
nodes:
  lives: {{target: "{LIVES_NODE}", args: {{need: 1}}}}
"""
GROWN = LIVES + f'  more: {{target: "{LIVES_NODE}", args: {{need: 1}}}}\n'


def test_an_applied_run_that_is_preempted_resumes_the_applied_program(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    (tmp_path / "lives.yaml").write_text(LIVES)
    (tmp_path / "grown.yaml").write_text(GROWN)
    job, run_dir, out = submit_counting(slurm_cluster, tmp_path, "lives.yaml")
    applied = login_topo(slurm_cluster, tmp_path, "apply", str(run_dir), "grown.yaml", "--yes")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    more_log = run_dir / "logs" / "more.log"
    wait_until(lambda: "count 2 lives 0" in more_log.read_text(), STEP_S, what="more counting")
    # a snapshot of the grown program (taken every second) before the preemption
    after_apply = max(snapshots(run_dir), default=0)
    wait_until(
        lambda: max(snapshots(run_dir), default=0) >= after_apply + 2,
        STEP_S,
        what="a snapshot of the applied program",
    )
    urgent = take_node(slurm_cluster, state_of(slurm_cluster, job)["NodeList"])
    node_taken(slurm_cluster, urgent)
    wait_until(lambda: ended(slurm_cluster, job, out), STEP_S, what=f"job {job} to end", every=1.0)
    said = out.read_text()
    assert re.search(r"◆ resumed from snapshot \d+ after preemption", said), said
    status = json.loads((run_dir / "status.json").read_text())
    assert status["exit_code"] == 0, said
    assert sorted(n["id"] for n in status["nodes"]) == ["lives", "more"]
    # both nodes came back with the states the snapshot of the grown program kept
    assert "restored count" in more_log.read_text() and "restored count" in said, said
    record = json.loads((run_dir / "run.json").read_text())
    assert record["file"] == str(tmp_path / "grown.yaml")
    assert (run_dir / "topology.yaml").read_text() == GROWN
