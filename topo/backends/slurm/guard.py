"""A run that outlives its job's time limit and its preemptions: ``JobGuard``, the
slurm backend's ``Guard``.

The job asks Slurm for a warning before its end (``--signal=B:USR1@W``, ``--warning-s``)
and is requeueable (``--requeue``). The warning reaches only the batch shell, so the
guard exists only where the launcher *is* the batch shell (its script ``exec``'d it:
``SLURM_TASK_PID`` is this process, no ``SLURM_STEP_ID``). On the warning -- or at the
start, when the warning was due already (a warning that came while Python started was
ignored: the script's ``trap '' USR1``) -- the guard waits for the program to run,
takes a snapshot (``topo snapshot``'s), writes why the run stops into
``RUN_DIR/requeued.json``, and stops the program; once it ended the job is requeued
(``scontrol requeue``, when the process exits: Slurm then signals the batch shell).

A preemption with the partition's ``GraceTime`` sends SIGTERM to the job's steps only
(docs/slurm-notes.md): the agents live through it and report it (``steps_signalled``).
The job's record tells a preemption (``PreemptTime`` set, still ``RUNNING``) from the
rest (``scancel``, which the launcher hears itself): at a preemption the guard does
as at the warning -- snapshot ``at preemption``, stop, requeue (a job that ends within
its grace is not requeued by Slurm) --; any other SIGTERM of the steps stops the run
as the launcher's own SIGTERM would (exit 143). A site that has Slurm send the job's
own signal at a preemption (``SlurmctldParameters=preempt_send_user_signal``) warns
the batch shell instead: a warning well before the time limit's is looked up in the
record (one at its time is the time limit's, and its snapshot does not wait).

The requeued job runs the same script (``SLURM_RESTART_COUNT`` > 0): ``resumed`` finds
the run directory's newest snapshot, the run's id and why it stopped, and the run
starts from that snapshot as ``topo run --resume`` would.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from topo.backends.base import Guard, GuardedRun, Resumed
from topo.backends.interrupts import Interrupts
from topo.backends.slurm.partition import COMMAND_S, fields, time_s
from topo.rundir.layout import STATUS_FILE
from topo.rundir.snapshots import latest

RECORD_FILE = "requeued.json"  # in the run directory: why the last job's run stopped
TIME_LIMIT = "the time limit"
PREEMPTION = "preemption"
REQUEUED = PREEMPTION  # a requeue topo did not ask for: Slurm's (PreemptMode=REQUEUE)
RUNNING_WAIT_S = 0.2  # how often the guard looks whether a starting program runs
START_WAIT_S = 120.0  # a SIGTERM of the steps while the run starts: acted on once it runs
EARLY_S = 60.0  # a warning this close to its time is the time limit's (Slurm: 30 s early)
READ_TRIES = 3  # scontrol show job at a signal: tries before "not preempted"
REQUEUE_AFTER_S = 15  # a requeued job starts again this long after at the soonest
KILL_MARGIN_S = 10.0  # a stop on SIGTERM ends before Slurm's KillWait: by half, at most this


def in_batch_shell(env: Mapping[str, str] | None = None) -> bool:
    """Whether this process is its Slurm job's batch shell (the script ``exec``'d it)."""
    env = os.environ if env is None else env
    return bool(env.get("SLURM_JOB_ID")) and (
        env.get("SLURM_TASK_PID") == str(os.getpid()) and "SLURM_STEP_ID" not in env
    )


def job_guard(warning_s: int, env: Mapping[str, str] | None = None) -> JobGuard | None:
    """The guard of a launcher that is its job's batch shell; None elsewhere (an salloc
    shell, a step, a script that did not ``exec`` topo: no warning reaches it)."""
    env = os.environ if env is None else env
    if not in_batch_shell(env):
        return None
    restarts = int(env.get("SLURM_RESTART_COUNT") or 0)
    return JobGuard(env["SLURM_JOB_ID"], restarts, warning_s)


def warning_at(record: Mapping[str, str], warning_s: int) -> float | None:
    """When the job whose ``scontrol show job -o`` record this is is to be warned (its
    start plus its time limit, less ``warning_s``); None if the record does not say."""
    try:
        limit = time_s(record.get("TimeLimit", ""))
        started = datetime.fromisoformat(record.get("StartTime", "")).timestamp()
    except ValueError:
        return None
    return None if limit is None else started + limit - warning_s


def warning_due(record: Mapping[str, str], warning_s: int, now: float) -> bool:
    """Whether the job whose record this is should have been warned by ``now``."""
    at = warning_at(record, warning_s)
    return at is not None and now >= at


def preempted(record: Mapping[str, str] | None) -> bool:
    """Whether the job whose ``scontrol show job -o`` record this is was preempted and
    still runs (in its grace time): ``PreemptTime`` set and ``JobState=RUNNING`` (or
    ``SIGNALING``: running, its warning being sent -- at a preemption, where the site
    sends it then)."""
    if record is None:
        return False
    when = record.get("PreemptTime", "None")
    running = record.get("JobState") in ("RUNNING", "SIGNALING")
    return when not in ("", "None", "Unknown") and running


class JobGuard(Guard):
    """The guard of one job's launcher (see the module's docstring)."""

    def __init__(self, job: str, restarts: int, warning_s: int) -> None:
        self.job = job
        self.restarts = restarts
        self.warning_s = warning_s
        self.requeue = False  # decided: ask for the job again once the run ended
        self._run: GuardedRun | None = None
        self._run_dir: Path | None = None
        self._once = threading.Lock()  # one stop for a requeue (time limit or preemption)
        self._noticed = threading.Lock()  # one look at the steps' SIGTERM (every agent says it)
        self._signals: Interrupts | None = None
        self._started = threading.Event()  # ``start``: the run to guard is known
        self._warning_at: float | None = None  # when the time limit's warning is due
        self._kill_wait: float | None = None  # Slurm's KillWait (read at the start)

    def resumed(self, run_dir: Path) -> Resumed | None:
        if self.restarts <= 0 or not (run_dir / STATUS_FILE).is_file():
            return None
        try:
            run_id = json.loads((run_dir / STATUS_FILE).read_text()).get("id")
        except (OSError, ValueError):
            run_id = None
        try:
            after = str(json.loads((run_dir / RECORD_FILE).read_text())["after"])
        except (OSError, ValueError, KeyError, TypeError):
            after = REQUEUED
        (run_dir / RECORD_FILE).unlink(missing_ok=True)  # the next requeue writes its own
        snapshot = latest(run_dir)
        return Resumed(None if snapshot is None else snapshot.path, run_id, after)

    def start(self, run: GuardedRun, run_dir: Path) -> None:
        self._run, self._run_dir = run, run_dir
        self._started.set()
        if threading.current_thread() is threading.main_thread():
            self._signals = Interrupts(signal.SIGUSR1, then=self._warned).start()
        threading.Thread(target=self._check_due, name="topo-slurm-guard", daemon=True).start()

    def sigterm_grace(self) -> float | None:
        """A SIGTERM of the job (``scancel``) is followed by SIGKILL ``KillWait`` seconds
        later: the stop ends before, so that the run's end is recorded."""
        if self._kill_wait is None:
            return None
        return max(1.0, self._kill_wait - min(KILL_MARGIN_S, self._kill_wait / 2))

    def _check_due(self) -> None:
        """The warning came before its handler was there (Python starting): act now, or
        at its time. Slurm sends it at its first look at the job from up to its period
        (30 s) before it is due -- possibly while Python started, when the script's
        trap ignored it, and it is sent once: a run whose warning came so was killed at
        its time limit, unwarned, on a loaded machine. Slurm's KillWait is read
        meanwhile."""
        self._kill_wait = kill_wait()
        record = read_job(self.job)
        if record is not None:
            self._warning_at = warning_at(record, self.warning_s)
        if record is not None and warning_due(record, self.warning_s, time.time()):
            self._warned(signal.SIGUSR1)
        elif self._warning_at is not None:
            time.sleep(max(0.0, self._warning_at - time.time()))
            self._warned(signal.SIGUSR1)  # (nothing if the signal came: one is acted on)

    def _warned(self, signum: int) -> None:
        if not self._once.acquire(blocking=False):
            return  # (one warning is acted on)
        threading.Thread(target=self._stop_warned, name="topo-slurm-requeue", daemon=True).start()

    def _stop_warned(self) -> None:
        """The job's warning: its time limit, or a preemption where the site sends it
        then -- read in the job's record only when the warning came well before its time
        (at its time, the snapshot goes first: scontrol may take seconds)."""
        at = self._warning_at
        if at is not None and time.time() >= at - EARLY_S:
            self._stop_for(TIME_LIMIT)
        else:
            self._stop_for(PREEMPTION if preempted(self._record()) else TIME_LIMIT)

    def _record(self) -> dict[str, str] | None:
        """The job's record; tried again when scontrol fails (a busy controller)."""
        record = read_job(self.job)
        for _ in range(READ_TRIES - 1):
            if record is not None:
                break
            time.sleep(RUNNING_WAIT_S)
            record = read_job(self.job)
        return record

    def steps_signalled(self, name: str) -> None:
        """An agent lived through ``name`` (SIGTERM) sent to the job's steps: a
        preemption's notice, or the job's end (any thread; the first report counts)."""
        if not self._noticed.acquire(blocking=False):
            return
        threading.Thread(
            target=self._on_steps_signal, args=(name,), name="topo-slurm-notice", daemon=True
        ).start()

    def _on_steps_signal(self, name: str) -> None:
        if not self._started.wait(START_WAIT_S):  # (the agents start before the run does)
            return
        if preempted(self._record()):
            if self._once.acquire(blocking=False):  # (not stopping for the time limit already)
                self._stop_for(PREEMPTION)
        elif self._run is not None:  # e.g. scancel: the launcher's own SIGTERM stops it too
            self._run.stop_on_sigterm(f"Slurm sent {name} to the job's steps")

    def _stop_for(self, after: str) -> None:
        """Snapshot, say why, stop; the job is requeued once the run ended."""
        run, run_dir = self._run, self._run_dir
        assert run is not None and run_dir is not None
        while run.phase == "starting":
            time.sleep(RUNNING_WAIT_S)
        if run.phase != "running":  # it stops by itself: nothing to carry on
            return
        if after == TIME_LIMIT:
            taken = run.snapshot_now(f"before {TIME_LIMIT}")
            why = f"the job's time limit is near ({taken})"
        else:
            taken = run.snapshot_now(f"at {PREEMPTION}")
            why = f"the job is preempted ({taken})"
        _write_json(run_dir / RECORD_FILE, {"after": after, "job": self.job})
        self.requeue = True
        run.request_stop(f"{why}; Slurm job {self.job} is requeued")

    def finish(self) -> None:
        if self.requeue:
            atexit.register(self._requeue_at_exit)

    def _requeue_at_exit(self) -> None:
        """Ask Slurm for the job again as the process ends (``scontrol requeuehold``, its
        start put off ``REQUEUE_AFTER_S``, ``release``): Slurm then ends the batch shell."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # (Slurm's, for the requeue)
            if self._signals is not None:
                self._signals.close()
        # Held while its start is put off: a job started again at once (Slurm may, where
        # nothing holds it) can be ended by this life's batch step ending late.
        done = _scontrol("requeuehold", self.job)
        if done is None or done.returncode != 0:
            done = _scontrol("requeue", self.job)
        else:
            _scontrol("update", f"JobId={self.job}", f"StartTime=now+{REQUEUE_AFTER_S}")
            done = _scontrol("release", self.job)
        if done is not None and done.returncode != 0:
            print(f"topo: scontrol requeue {self.job} failed: {done.stderr.strip()}", flush=True)


def _write_json(path: Path, data: Mapping[str, object]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(dict(data)))
    os.replace(tmp, path)


def _scontrol(*args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            ["scontrol", *args], capture_output=True, text=True, timeout=COMMAND_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def read_job(job: str) -> dict[str, str] | None:
    """The job's ``scontrol show job -o`` record (its first line); None if unread."""
    done = _scontrol("show", "job", "-o", job)
    if done is None or done.returncode != 0 or not done.stdout.strip():
        return None
    return fields(done.stdout.splitlines()[0])


def kill_wait() -> float | None:
    """Slurm's ``KillWait`` (``scontrol show config``: ``KillWait = 30 sec``); None if
    unread."""
    done = _scontrol("show", "config")
    if done is None or done.returncode != 0:
        return None
    found = re.search(r"^KillWait\s*=\s*(\d+)", done.stdout, re.M)
    return None if found is None else float(found.group(1))
