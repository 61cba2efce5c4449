"""A submitted run preempted in a partition with a grace time (``graced``: Slurm sends
SIGTERM to the job's steps, and ends the job only when the grace is over) takes a
snapshot *at* the preemption, stops and is requeued; the requeued job resumes from
that snapshot -- the program has no snapshot clock: there is no other -- with the
state the node had then, and says so. The agents lived through the SIGTERM and said
it. The same where the site has Slurm send the job's own signal at a preemption
(``SlurmctldParameters=preempt_send_user_signal``: the batch shell's USR1, on a
cluster of its own). Checked by the node's state, not by timing; nothing is left."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import psutil
import pytest

from tests.backends.slurm import cluster
from tests.backends.slurm.cluster import SlurmCluster
from tests.backends.slurm.conftest import leftovers
from tests.backends.slurm.requeue_support import (
    STEP_S,
    ended,
    node_taken,
    state_of,
    submit_detached,
    take_node,
)
from topo.backends.slurm.guard import preempted
from topo.testing import wait_until

pytestmark = pytest.mark.slow
LIVES = """name: lives
nodes:
  lives: {target: "tests.backends.slurm.requeue_nodes:Lives", args: {need: 1}}
"""
GRACED = ("--partition", "graced")  # (GraceTime: cluster.GRACE_S)
COUNTED = 5  # the node counted this far in its first life when the urgent job comes


def test_a_preempted_run_snapshots_in_its_grace_and_resumes_from_that_snapshot(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    preempted_in_its_grace(slurm_cluster, tmp_path, steps_signalled=True)


def test_where_the_site_sends_the_jobs_signal_at_preemption_the_same(tmp_path: Path) -> None:
    why = cluster.unavailable()
    if why is not None:
        pytest.skip(why)
    root = Path(tempfile.mkdtemp(prefix="topo-slurm-usr1-"))  # (short: munge's socket path)
    try:
        own = cluster.start(root, ("n1",), extra=("SlurmctldParameters=preempt_send_user_signal",))
    except RuntimeError as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"the Slurm test cluster did not start: {exc}")
    try:
        preempted_in_its_grace(own, tmp_path, steps_signalled=False)
        assert not leftovers(own), leftovers(own)
    finally:
        left = own.stop()
        shutil.rmtree(root, ignore_errors=True)
    assert not left, f"the Slurm test cluster left processes: {left}"


def preempted_in_its_grace(slurm: SlurmCluster, tmp_path: Path, steps_signalled: bool) -> None:
    """A run of ``graced`` preempted once: a snapshot at the preemption, the requeued job
    resumed from it (``steps_signalled``: the agents heard the preemption's SIGTERM)."""
    (tmp_path / "lives.yaml").write_text(LIVES)
    job, run_dir = submit_detached(slurm, tmp_path, "lives.yaml", *GRACED)
    out = run_dir / f"slurm-{job}.out"
    wait_until(
        lambda: out.is_file() and f"count {COUNTED} lives 0" in out.read_text(),
        STEP_S,
        what="the program counting",
    )
    urgent = take_node(slurm, state_of(slurm, job)["NodeList"])
    node_taken(slurm, urgent)  # (the run snapshots, stops and is requeued meanwhile)
    try:
        wait_until(lambda: ended(slurm, job, out), STEP_S, what="the requeued job's end", every=1.0)
    except AssertionError as exc:  # (what Slurm says of it, for the reader)
        shown = slurm.run("scontrol", "show", "job", job)
        shown_text = shown.stdout + shown.stderr
        log = (slurm.root / "slurmctld.log").read_text(errors="replace").splitlines()
        said = "\n".join(line for line in log if f"JobId={job} " in line or "urgent" in line)
        raise AssertionError(f"{exc}\n{shown_text}\n{said}\n{out.read_text()[-3000:]}") from None
    text = out.read_text()
    status = json.loads((run_dir / "status.json").read_text())
    assert status["exit_code"] == 0 and status["stop_reason"] == "every node finished", text
    # the first life: a snapshot at the preemption (the only one), then the stop
    assert "◆ snapshot 1 (at preemption)" in text, text
    assert f"the job is preempted (snapshot 1 taken); Slurm job {job} is requeued" in text, text
    saved = [int(n) for n in re.findall(r"saved count (\d+) lives 0", text)]
    assert len(saved) == 1 and saved[0] >= COUNTED, text
    # the requeued job resumed from it with the node's state then, and said so
    assert "◆ resumed from snapshot 1 after preemption" in text, text
    assert f"restored count {saved[0]} lives 1" in text, text
    assert not re.search(r"count \d+ lives [2-9]", text), text  # (one preemption, one requeue)
    last = re.findall(r"done count (\d+) lives 1", text)
    assert last and int(last[-1]) > saved[0], text
    assert status["resumed"] == "resumed from snapshot 1 after preemption"
    assert [p.name for p in (tmp_path / "home" / "runs").iterdir()] == [status["id"]]
    # the agents lived through the preemption's SIGTERM and told the launcher (or the
    # batch shell heard the job's signal, and the agents nothing)
    agent_logs = "".join(p.read_text() for p in (run_dir / "agents").glob("*.log"))
    assert ("its agent got SIGTERM and goes on" in agent_logs) == steps_signalled, agent_logs
    pids = [status["launcher"]["pid"], *(n["pid"] for n in status["nodes"] if n["pid"])]
    wait_until(lambda: not any(psutil.pid_exists(p) for p in pids), 60, what="no process left")


def test_the_jobs_record_tells_a_preemption_from_a_cancel() -> None:
    """As measured (docs/slurm-notes.md): in its grace a preempted job still runs with a
    ``PreemptTime``; a cancelled one is completing without one."""
    grace = {"JobState": "RUNNING", "PreemptTime": "2026-12-06T21:04:13"}
    assert preempted(grace)
    assert preempted({**grace, "JobState": "SIGNALING"})  # (its warning being sent)
    assert not preempted({**grace, "JobState": "COMPLETING"})  # (past its grace: Slurm's)
    assert not preempted({"JobState": "COMPLETING", "PreemptTime": "None"})  # scancel
    assert not preempted({"JobState": "RUNNING", "PreemptTime": "None"})  # scancel -s TERM
    assert not preempted(None)  # (no record read)
