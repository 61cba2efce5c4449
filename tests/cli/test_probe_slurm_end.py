"""A run submitted as a Slurm job whose launcher left no final record: how its job ended,
once seen, is kept for later readers (Slurm forgets an ended job after its MinJobAge)."""

from __future__ import annotations

import json
from pathlib import Path

from topo.runs.probe import probe
from topo.runs.slurm_jobs import GONE, SlurmJob, job_of, write_job


def _lost_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_job(run_dir, "42", "prog")
    status = {  # a launcher on another host (its pid cannot be checked) that said running
        "id": "abc",
        "program": "prog",
        "backend": "slurm",
        "state": "running",
        "launcher": {"pid": 1, "host": "elsewhere"},
        "nodes": [{"id": "a", "state": "running"}],
    }
    (run_dir / "status.json").write_text(json.dumps(status))
    return run_dir


def test_a_failed_job_seen_once_reads_failed_after_slurm_forgets_it(tmp_path: Path) -> None:
    run_dir = _lost_run(tmp_path)
    first = probe(run_dir, jobs={"42": SlurmJob("42", "FAILED")})
    assert first.state == "lost" and first.slurm is not None and first.slurm.state == "FAILED"
    later = probe(run_dir, jobs={"42": SlurmJob("42", GONE)})
    assert later.state == "lost" and later.slurm is not None and later.slurm.state == "FAILED"


def test_a_state_that_may_come_back_is_not_kept(tmp_path: Path) -> None:
    run_dir = _lost_run(tmp_path)
    probe(run_dir, jobs={"42": SlurmJob("42", "PREEMPTED")})
    assert "ended" not in (job_of(run_dir) or {})
    gone = probe(run_dir, jobs={"42": SlurmJob("42", GONE)})
    assert gone.slurm is not None and gone.slurm.state == GONE
