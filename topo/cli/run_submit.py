"""``topo run FILE -b NAME`` where the backend submits the run rather than runs it here
(slurm outside an allocation: the backend's ``submission``): the run directory made
first, the job submitted; with ``-d`` the job id and run directory are printed and the
command returns, else the job is followed until it ends, its output shown as it comes.
Ctrl-C asks the run to stop as Ctrl-C does on every backend (the launcher in the job
gets SIGINT; a job still pending is cancelled); a second Ctrl-C cancels the job."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from typing import Any

import typer
from rich.text import Text

from topo.cli.common import USAGE_EXIT, error, fail, load_program, stderr
from topo.cli.run_options import Origin, Settings
from topo.cli.run_start import StartingPoint
from topo.diagnostics import TopoError
from topo.ir import Program

POLL_S = 0.5  # how often the job's state and output are looked at while following it
PENDING_NOTE_S = 60.0  # a job pending this long is said to wait, then at twice as long ...


def submission(ctx: typer.Context, backend: str) -> Any | None:
    """The backend's ``submission`` under the command line's options, when it submits
    the run from here (None: the run starts in this process, as on every backend)."""
    from topo.backends.base import backend_factory
    from topo.cli.common import backend_options

    make = getattr(backend_factory(backend), "submission", None)
    if not callable(make):
        return None
    try:
        return make(**backend_options(ctx))
    except TopoError as exc:
        raise fail(exc) from None


def launcher_args(settings: Settings) -> list[str]:
    """The run options the job's own ``topo run`` is given: those set away from their
    defaults (the grace, the log rotation, the metrics formats and port)."""
    from topo.backends.rotation import DEFAULT_LOG_KEEP, DEFAULT_LOG_MAX_MB

    args = [] if settings.grace_s is None else ["--grace", f"{settings.grace_s:g}"]
    if settings.log_max_mb != DEFAULT_LOG_MAX_MB:
        args += ["--log-max-mb", f"{settings.log_max_mb or 0:g}"]
    if settings.log_keep != DEFAULT_LOG_KEEP:
        args += ["--log-keep", str(settings.log_keep)]
    if settings.metrics_to:
        args += ["--metrics-to", ",".join(settings.metrics_to)]
    if settings.metrics_port is not None:  # (on the batch node's loopback: a tunnel's end)
        args += ["--metrics-port", str(settings.metrics_port)]
    return args


def submitted(
    ctx: typer.Context,
    sub: Any,
    backend: str,
    origin: Origin,
    start: StartingPoint,
    settings: Settings,
    detach: bool,
    ui: bool = False,
) -> int:
    """Submit the run; its exit code (with ``-d``: 0 once submitted; else the job's).
    ``--from``/``--resume``/``--fork RUN``: the job's launcher is given them (and the
    snapshot chosen here, ``--snapshot N``); the program is sized and its snapshot checked
    here first."""
    if ui:
        raise error(
            f"--ui shows a run in this terminal; a run topo run -b {backend} submits lives in "
            "its job: topo ui RUN_DIR once it runs",
            USAGE_EXIT,
        )
    from topo.rundir.layout import fresh_run_dir

    program, settings, origin_args = _origin(ctx, origin, start, settings)
    run_dir = settings.run_dir or fresh_run_dir(settings.log_dir, program.name)
    run_args = launcher_args(settings) + origin_args
    run_dir = run_dir.resolve()
    made = _first_missing(run_dir)  # what a failed submission removes (None: nothing)
    run_id = _listed(run_dir)  # before the job can start: its launcher keeps the id
    try:
        job = sub.submit(program, origin.file, origin.params, run_dir, run_args)
    except BaseException as exc:
        _unlist(run_id, made)
        if isinstance(exc, TopoError):
            raise fail(exc) from None
        raise
    from topo.runs.index import point_latest
    from topo.runs.slurm_jobs import write_job

    write_job(run_dir, job, program.name)  # topo ps lists it while it waits
    point_latest(settings.log_dir, run_dir)
    output = run_dir / f"slurm-{job}.out"
    if detach:
        stderr.print(
            Text(
                f"✓ job {job} submitted as run {run_id}: {program.name} runs in the job, its "
                f"run directory {run_dir} — topo ps · topo logs -f {run_id} · "
                f"topo stop {run_id}",
                style="green",
            )
        )
        typer.echo(f"{job} {run_dir}")
        return 0
    stderr.print(
        Text(f"✓ job {job} submitted ({program.name}; run directory {run_dir})", style="green"),
        markup=False,
    )
    return follow(sub, job, output, run_dir)


def _origin(
    ctx: typer.Context, origin: Origin, start: StartingPoint, settings: Settings
) -> tuple[Program, Settings, list[str]]:
    """The program to size the job for, the run options, and what the job's launcher is
    told of where the program comes from (``--from RUN``, ``--resume RUN --snapshot N``,
    ``--fork RUN --snapshot N``): the program RUN ran with the parameters given now, and
    the snapshot checked against it, as ``topo run`` does before a start (exit 1)."""
    from topo.cli.rerun import rerun_of
    from topo.loader.params import merge_overrides
    from topo.rundir.snapshots import SnapshotError
    from topo.snapshots.fit import check_fit

    file, params = origin.file, list(origin.params)
    rerun = rerun_of(file, start.rerun)  # --from / --resume RUN: its file and options
    if rerun is not None:
        file, settings = rerun.file, rerun.settings(ctx, settings)
        params = merge_overrides(rerun.record.params_given, params)
    assert file is not None  # (starting_point: FILE, --from or --resume)
    program = load_program(file, params, check_imports=True)
    args: list[str] = []
    if origin.from_run is not None and start.rerun is not None:
        args = ["--from", str(start.rerun.resolve())]
    elif start.snapshot is not None:
        try:
            check_fit(program, start.snapshot, same_program=origin.resume is not None)
        except SnapshotError as exc:
            raise error(str(exc)) from None
        run_dir = start.snapshot.path.resolve().parent.parent  # RUN/snapshots/N
        flag = "--resume" if origin.resume is not None else "--fork"
        args = [flag, str(run_dir), "--snapshot", str(start.snapshot.number)]
    return program, settings, args


def _first_missing(path: Path) -> Path | None:
    """The outermost folder of ``path`` (itself included) that does not exist yet."""
    missing = None
    while not path.exists():
        missing, path = path, path.parent
    return missing


def _listed(run_dir: Path) -> str:
    """List ``run_dir`` (made here) as a run of this machine: its id."""
    from topo.runs import index

    run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    run_id = index.new_run_id()
    index.register(run_id, run_dir, None)
    return run_id


def _unlist(run_id: str, made: Path | None) -> None:
    """The submission failed: no listing, and no run directory made for it."""
    import shutil

    from topo.runs import index

    index.forget([run_id])
    if made is not None:
        shutil.rmtree(made, ignore_errors=True)


def follow(sub: Any, job: str, output: Path, run_dir: Path) -> int:
    """Show the job's state changes and its output until it ends: its exit code. Ctrl-C
    (or SIGTERM) is passed to the launcher in the job, which stops the run; a second one
    cancels the job."""
    asked: list[int] = []  # the signals received so far

    def on_signal(signum: int, _frame: object) -> None:
        asked.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    shown, offset, handled, trouble = "", 0, 0, ""
    pending = Pending(job)
    try:
        while True:
            if len(asked) > handled:
                handled = len(asked)
                _ask(sub, job, asked[-1], again=handled > 1)
            try:
                state = sub.state(job)
            except TopoError as exc:  # the controller busy or away: said once, asked again
                said = exc.diagnostics[0].message
                if said != trouble:
                    trouble = said
                    stderr.print(f"topo          | {said}", markup=False, highlight=False)
                time.sleep(POLL_S)
                continue
            offset = _copy(output, offset)
            said = f"{state.state} ({state.reason})" if state.reason else state.state
            if state.state and said != shown:
                shown = said
                stderr.print(f"topo          | job {job} {said}", markup=False, highlight=False)
            note = pending.note(state, time.monotonic())
            if note:
                stderr.print(f"topo          | {note}", markup=False, highlight=False)
            if state.ended:
                _copy(output, offset)
                return _outcome(job, state, asked[0] if asked else None, run_dir)
            time.sleep(POLL_S)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class Pending:
    """What is said of a job that waits long: once past ``PENDING_NOTE_S``, then each
    time it has waited as long again (60 s, 2 min, 4 min ...)."""

    def __init__(self, job: str) -> None:
        self.job = job
        self.since: float | None = None
        self.next_s = PENDING_NOTE_S

    def note(self, state: Any, now: float) -> str | None:
        """The line to say now about ``state`` (None: nothing)."""
        if state.state != "PENDING":
            self.since, self.next_s = None, PENDING_NOTE_S
            return None
        if self.since is None:
            self.since = now
        waited = now - self.since
        if waited < self.next_s:
            return None
        self.next_s *= 2
        why = f" ({state.reason})" if state.reason else ""
        return (
            f"job {self.job} has been pending for {waited / 60:.0f} min{why}: squeue -j "
            f"{self.job} --start says when Slurm expects to start it; Ctrl-C cancels it"
        )


def _ask(sub: Any, job: str, signum: int, again: bool) -> None:
    """A signal while following: the run stops (the job is cancelled, the second time)."""
    try:
        if not again:
            stderr.print(
                f"topo          | stopping job {job} (Ctrl-C again cancels it)", markup=False
            )
            sub.stop(job, signal.Signals(signum).name.removeprefix("SIG"))
        else:
            stderr.print(f"topo          | cancelling job {job}", markup=False)
            sub.kill(job)
    except TopoError as exc:
        stderr.print(f"[red]error:[/] {exc.diagnostics[0].message}")


def _copy(path: Path, offset: int) -> int:
    """Write what ``path`` gained past ``offset`` to stdout: the new offset."""
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except OSError:  # not there yet: the job has not started
        return offset
    if data:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return offset + len(data)


def _outcome(job: str, state: Any, signum: int | None, run_dir: Path) -> int:
    """The exit code of ``topo run`` for a job that ended in ``state`` (``signum``: the
    signal that stopped it from here, if one did); of a job Slurm already forgot, the
    exit code its launcher wrote in the run directory."""
    from topo.rundir.status import read_status

    interrupted = 128 + signum if signum is not None else 1
    if state.state == "COMPLETED":
        stderr.print(Text(f"✓ job {job} completed — exit 0", style="green"))
        return 0
    if state.state == "FAILED" and state.exit_code:
        stderr.print(Text(f"job {job} failed — exit {state.exit_code}", style="red"))
        return int(state.exit_code)
    if not state.state:
        code = (read_status(run_dir) or {}).get("exit_code")
        if isinstance(code, int):
            style = "green" if code == 0 else "red"
            stderr.print(
                Text(f"{'✓ ' if code == 0 else ''}job {job} ended — exit {code}", style=style)
            )
            return code
        stderr.print(f"job {job} ended (Slurm no longer lists it)", markup=False)
        return interrupted
    why = f" ({state.reason})" if state.reason else ""
    stderr.print(Text(f"job {job} ended {state.state}{why}", style="red"))
    return interrupted if state.state == "CANCELLED" else 1
