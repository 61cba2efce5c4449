"""What ``topo ps``, ``status`` and ``stop`` say and do about runs submitted as Slurm
jobs (``topo.runs.slurm_jobs``): Slurm's state next to topo's, why a job waits, a job
that ended under a live run (lost), a waiting job cancelled."""

from __future__ import annotations

from pathlib import Path

from topo.runs.probe import RunInfo


def probe_all(entries: list[tuple[str, Path]]) -> list[RunInfo]:
    """Every listed run as it is now; those submitted as Slurm jobs and not ended checked
    against their jobs with one ``squeue`` call for all."""
    from topo.runs.probe import probe
    from topo.runs.slurm_jobs import squeue

    infos = [probe(run_dir, run_id, ask_slurm=False) for run_id, run_dir in entries]
    asked = [i.slurm_job for i in infos if i.slurm_job and i.state != "ended"]
    jobs = squeue(sorted(set(asked))) if asked else {}
    if not jobs:
        return infos
    return [
        probe(i.run_dir, run_id, jobs=jobs) if i.slurm_job in jobs else i
        for i, (run_id, _) in zip(infos, entries, strict=True)
    ]


def slurm_text(info: RunInfo) -> str:
    """`` · PENDING (Resources)``: the state of the Slurm job a run lives in, known."""
    return "" if info.slurm is None else f" · {info.slurm.text()}"


def job_hint(info: RunInfo) -> str:
    """What a run whose Slurm job has not started topo (or ended before) is waiting for."""
    job = info.slurm
    if info.slurm_job is None:
        return ""
    if job is None:
        return f" — Slurm job {info.slurm_job} (Slurm did not answer)"
    if job.waiting:
        why = f" ({job.reason})" if job.reason else ""
        return (
            f" — Slurm job {job.id} waits in the queue{why}: squeue -j {job.id} --start "
            f"says when Slurm expects to start it; topo stop {info.id} cancels it"
        )
    if job.ended:
        return f" — Slurm job {job.id} ended {job.text()} before topo ran in it"
    return f" — Slurm job {job.id} runs; topo's launcher is starting in it"


def cancel_waiting(info: RunInfo) -> tuple[int, str]:
    """A run whose Slurm job waits in the queue: the job is cancelled. Its exit code (0;
    1 when Slurm refused) and what to say (Slurm's words when it refused)."""
    from topo.runs.slurm_jobs import cancel, record_end

    assert info.slurm is not None
    refused = cancel(info.slurm.id)
    if refused is not None:
        return 1, f"error: could not cancel Slurm job {info.slurm.id}: {refused}"
    record_end(info.run_dir, "CANCELLED")
    return 0, (
        f"✓ run {info.id}: Slurm job {info.slurm.id} cancelled before it ran; "
        f"it was {info.slurm.text()}"
    )


def lost_cause(info: RunInfo) -> str:
    """Why a lost run is lost, in a clause."""
    if info.slurm is not None and info.slurm.ended:
        return (
            f"its Slurm job {info.slurm.id} ended {info.slurm.text()} without a final "
            "record from topo (killed, or its node lost)"
        )
    return f"its launcher (pid {info.pid}) ended without ending the run"
