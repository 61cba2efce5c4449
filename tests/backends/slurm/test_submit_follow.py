"""Following a submitted job (``topo.cli.run_submit``, ``topo.backends.slurm.job``), the
parts that need no cluster: Slurm's job record read, and what is said of a job that
waits long."""

from __future__ import annotations

from topo.backends.slurm.job import JobState, parse_job
from topo.cli.run_submit import PENDING_NOTE_S, Pending

# `scontrol show job -o` of a heterogeneous job that failed (one line per component)
FAILED = (
    "JobId=11 HetJobId=11 HetJobOffset=0 JobName=topo-het UserId=me(1000) JobState=FAILED "
    "Reason=NonZeroExitCode Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 ExitCode=130:0 "
    "RunTime=00:00:09 TimeLimit=00:02:00 Partition=main NodeList=n1\n"
    "JobId=12 HetJobId=11 HetJobOffset=1 JobName=topo-het JobState=FAILED Reason=None "
    "ExitCode=0:0 Partition=main NodeList=n2\n"
)


def test_the_job_record_gives_the_batch_scripts_state_reason_and_exit_code() -> None:
    assert parse_job(FAILED) == JobState("FAILED", "NonZeroExitCode", 130)
    pending = "JobId=7 JobName=x JobState=PENDING Reason=Priority ExitCode=0:0 NodeList=(null)"
    assert parse_job(pending) == JobState("PENDING", "Priority", None)
    assert not parse_job(pending).ended and JobState("").ended
    assert parse_job("JobId=7 JobState=RUNNING Reason=None ExitCode=0:0").reason == ""


def test_a_job_pending_long_is_said_to_wait_at_growing_intervals() -> None:
    pending, waiting = Pending("42"), JobState("PENDING", "Resources")
    assert pending.note(waiting, 100.0) is None
    assert pending.note(waiting, 100.0 + PENDING_NOTE_S - 1) is None
    said = pending.note(waiting, 100.0 + PENDING_NOTE_S)
    assert said == (
        "job 42 has been pending for 1 min (Resources): squeue -j 42 --start says when "
        "Slurm expects to start it; Ctrl-C cancels it"
    )
    assert pending.note(waiting, 100.0 + PENDING_NOTE_S + 1) is None
    assert "pending for 2 min" in (pending.note(waiting, 100.0 + 2 * PENDING_NOTE_S) or "")
    assert pending.note(JobState("RUNNING"), 500.0) is None  # running: the count starts over
    assert pending.note(JobState("PENDING", "BeginTime"), 600.0) is None
