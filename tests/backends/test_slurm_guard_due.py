"""The Slurm job guard acts on its time limit's warning at the warning's time even when
Slurm's signal never reached it: Slurm sends it once, at its first look at the job from
up to 30 s before it is due, which can fall while Python starts and the script's trap
ignores it (a loaded suite's requeue test saw the job killed at its limit, unwarned).
The guard reads the job's record itself (``scontrol``, replaced here by the record a
job with that limit has); the run is a stand-in that says what was asked of it."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from topo.backends.slurm import guard as slurm_guard
from topo.backends.slurm.guard import TIME_LIMIT, JobGuard


class _Run:
    def __init__(self) -> None:
        self.phase = "running"
        self.asked: list[str] = []
        self.stopped = threading.Event()

    def snapshot_now(self, reason: str) -> str:
        self.asked.append(f"snapshot {reason}")
        return "snapshot 1"

    def request_stop(self, reason: str = "", code: int = 0, grace_s: float | None = None) -> None:
        self.asked.append(f"stop: {reason}")
        self.stopped.set()

    def stop_on_sigterm(self, reason: str = "") -> None:
        self.asked.append(f"sigterm: {reason}")


def test_a_warning_never_heard_is_acted_on_at_its_time(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # a one-minute job started 58.5 s ago, warned 60 s before its end: due in 1.5 s
    started = datetime.fromtimestamp(time.time() - 58.5).isoformat(timespec="seconds")
    record = {"JobState": "RUNNING", "TimeLimit": "2", "StartTime": started}
    monkeypatch.setattr(slurm_guard, "read_job", lambda job: record)
    monkeypatch.setattr(slurm_guard, "kill_wait", lambda: 30.0)
    guard = JobGuard("7", restarts=0, warning_s=60)
    run = _Run()
    began = time.monotonic()
    threading.Thread(target=guard.start, args=(run, tmp_path)).start()  # (no signal handler)
    assert run.stopped.wait(30), run.asked
    assert time.monotonic() - began >= 0.2  # at its time, not at the start
    assert run.asked == [
        f"snapshot before {TIME_LIMIT}",
        "stop: the job's time limit is near (snapshot 1); Slurm job 7 is requeued",
    ]
    assert guard.requeue
    assert (tmp_path / "requeued.json").is_file()
