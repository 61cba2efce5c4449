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
from topo.diagnostics import TopoError

POLL_S = 0.5  # how often the job's state and output are looked at while following it


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


def submitted(sub: Any, backend: str, origin: Origin, settings: Settings, detach: bool) -> int:
    """Submit the run; its exit code (with ``-d``: 0 once submitted; else the job's)."""
    if origin.file is None or origin.from_run or origin.resume or origin.fork:
        raise error(
            f"topo run -b {backend} outside an allocation submits FILE; --from, --resume "
            "and --fork run inside one (an sbatch script or salloc shell)",
            USAGE_EXIT,
        )
    from topo.rundir.layout import fresh_run_dir

    program = load_program(origin.file, list(origin.params))
    run_dir = settings.run_dir or fresh_run_dir(settings.log_dir, program.name)
    run_args = [] if settings.grace_s is None else ["--grace", str(settings.grace_s)]
    try:
        job = sub.submit(program, origin.file, origin.params, run_dir, run_args)
    except TopoError as exc:
        raise fail(exc) from None
    run_dir = run_dir.resolve()
    output = run_dir / f"slurm-{job}.out"
    if detach:
        stderr.print(
            Text(
                f"✓ job {job} submitted: {program.name} runs in the job, its run directory "
                f"{run_dir} — topo logs -f {run_dir} · squeue -j {job} · scancel {job}",
                style="green",
            )
        )
        typer.echo(f"{job} {run_dir}")
        return 0
    stderr.print(
        Text(f"✓ job {job} submitted ({program.name}; run directory {run_dir})", style="green"),
        markup=False,
    )
    return follow(sub, job, output)


def follow(sub: Any, job: str, output: Path) -> int:
    """Show the job's state changes and its output until it ends: its exit code."""
    asked: list[str] = []  # "stop", then "kill": what Ctrl-C asked so far

    def on_int(_signum: int, _frame: object) -> None:
        asked.append("kill" if asked else "stop")

    previous = signal.signal(signal.SIGINT, on_int)
    shown, offset, seen = "", 0, None
    try:
        while True:
            if asked and asked[-1] != seen:
                seen = asked[-1]
                _ask(sub, job, seen)
            state = sub.state(job)
            offset = _copy(output, offset)
            said = f"{state.state} ({state.reason})" if state.reason else state.state
            if state.state and said != shown:
                shown = said
                stderr.print(f"topo          | job {job} {said}", markup=False, highlight=False)
            if state.ended:
                _copy(output, offset)
                return _outcome(job, state, bool(asked))
            time.sleep(POLL_S)
    finally:
        signal.signal(signal.SIGINT, previous)


def _ask(sub: Any, job: str, what: str) -> None:
    """Ctrl-C while following: the run stops (or the job is cancelled, the second time)."""
    try:
        if what == "stop":
            stderr.print(
                f"topo          | stopping job {job} (Ctrl-C again cancels it)", markup=False
            )
            sub.stop(job)
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


def _outcome(job: str, state: Any, interrupted: bool) -> int:
    """The exit code of ``topo run`` for a job that ended in ``state``."""
    if state.state == "COMPLETED":
        stderr.print(Text(f"✓ job {job} completed — exit 0", style="green"))
        return 0
    if state.state == "FAILED" and state.exit_code:
        stderr.print(Text(f"job {job} failed — exit {state.exit_code}", style="red"))
        return int(state.exit_code)
    if not state.state:
        stderr.print(f"job {job} ended (Slurm no longer lists it)", markup=False)
        return 130 if interrupted else 1
    why = f" ({state.reason})" if state.reason else ""
    stderr.print(Text(f"job {job} ended {state.state}{why}", style="red"))
    return 130 if interrupted and state.state == "CANCELLED" else 1
