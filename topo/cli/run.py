"""``topo run``: run a topology on a backend (procs, threads, or a plugin) with a live view.

The command gathers its options (``run_options``), then takes one of three paths: ``-d``
starts the launcher in the background and returns once the run is up (``_detach``);
otherwise the run is prepared once (``run_start``: FILE, or ``--from``/``--resume``/
``--fork``) and shown here until it ends (``run_watch``).

Exit codes (``EXIT_CODES``, also in ``topo run --help``): 0 clean stop; 1 a node failed
(or ran out of restarts), or the file is invalid (imports and node arguments included,
checked before anything starts), or the backend refused it; 2 a mistake in the command
line (an unknown option or backend, a bad option value, no FILE); 130 stopped by Ctrl-C;
143 stopped by SIGTERM.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.text import Text

from topo.backends.rotation import DEFAULT_LOG_KEEP, DEFAULT_LOG_MAX_MB
from topo.cli.app import app
from topo.cli.common import USAGE_EXIT, BackendCommand, ParamsOption, error, stderr
from topo.cli.early import RUN_BACKEND
from topo.cli.run_options import (
    BackendOption,
    Dashboard,
    DetachOption,
    FileOption,
    ForkOption,
    FromOption,
    GraceOption,
    LiveOption,
    LogDirOption,
    LogKeepOption,
    LogMaxOption,
    Looks,
    MetricsPortOption,
    MetricsToOption,
    Origin,
    PlotOption,
    QuietOption,
    ResumeOption,
    RunDirOption,
    Settings,
    SnapshotOption,
    UiHostOption,
    UiOption,
    UiPortOption,
    UiRemoteOption,
)


class RunCommand(BackendCommand):
    """``topo run``: its options and those of the backend ``--backend`` names."""

    default_backend = RUN_BACKEND

    def preset(self, args: list[str]) -> tuple[str | None, dict[str, Any]]:
        """With ``--from RUN_DIR``: the backend and options the run directory recorded."""
        from topo.cli.rerun import recorded_preset

        return recorded_preset(args, self.default_backend)


EXIT_CODES = (
    "Exit codes: 0 clean stop · 1 bad file, bad -p, failed check or failed run · "
    "2 command-line mistake · 130 Ctrl-C · 143 SIGTERM."
)


@app.command("run", cls=RunCommand, epilog=EXIT_CODES)
def run(
    ctx: typer.Context,
    file: FileOption = None,
    params: ParamsOption = None,
    backend: BackendOption = RUN_BACKEND,
    grace: GraceOption = None,
    log_dir: LogDirOption = Path("runs"),
    run_dir: RunDirOption = None,
    log_max_mb: LogMaxOption = DEFAULT_LOG_MAX_MB,
    log_keep: LogKeepOption = DEFAULT_LOG_KEEP,
    metrics_to: MetricsToOption = "",
    metrics_port: MetricsPortOption = None,
    quiet: QuietOption = False,
    live: LiveOption = None,
    detach: DetachOption = False,
    from_run: FromOption = None,
    resume: ResumeOption = None,
    fork: ForkOption = None,
    snapshot: SnapshotOption = None,
    plot: PlotOption = False,
    ui: UiOption = False,
    ui_port: UiPortOption = 0,
    ui_host: UiHostOption = "127.0.0.1",
    ui_allow_remote: UiRemoteOption = False,
) -> None:
    """Run FILE: start every node, show their status, stop on Ctrl-C.

    With --from, --resume or --fork: a run's program again, or from its snapshot."""
    origin = Origin(file, tuple(params or ()), from_run, resume, fork, snapshot)
    if metrics_port is not None and not 0 <= metrics_port <= 65535:
        raise error(f"--metrics-port {metrics_port}: expected a port, 0 to 65535", USAGE_EXIT)
    settings = Settings(
        grace, log_dir, run_dir, log_max_mb, log_keep, _formats(metrics_to), metrics_port
    )
    dashboard = Dashboard(ui_host, ui_port, ui_allow_remote) if ui else None
    looks = Looks(quiet, live, plot, dashboard)
    raise typer.Exit(_run(ctx, backend, origin, settings, looks, detach))


def _formats(given: str) -> tuple[str, ...]:
    """``--metrics-to``'s formats; exit 2 with the choices for one topo does not write."""
    from topo.supervisor.metrics_out import checked_formats

    try:
        return checked_formats([f.strip() for f in given.split(",") if f.strip()])
    except ValueError as exc:
        raise error(f"--metrics-to: {exc}", USAGE_EXIT) from None


def _run(
    ctx: typer.Context,
    backend: str,
    origin: Origin,
    settings: Settings,
    looks: Looks,
    detach: bool,
) -> int:
    """``topo run`` with its options gathered: its exit code."""
    from topo.cli.run_start import prepared, starting_point

    ui = looks.dashboard
    if ui is not None and detach:
        raise error(
            "--ui goes with a run in this terminal; for a detached run: topo ui RUN", USAGE_EXIT
        )
    start = starting_point(origin)  # a meaningless command line exits 2 before anything
    from topo.cli.run_submit import submission, submitted

    job = submission(ctx, backend)  # slurm outside an allocation: the run is a job
    if job is not None:
        ui_asked = looks.dashboard is not None
        return submitted(ctx, job, backend, origin, start, settings, detach, ui=ui_asked)
    if ui is not None:
        from topo.cli.ui import precheck_for_run

        precheck_for_run(detach, ui.host, ui.port, ui.allow_remote)
    if detach:
        _detach(settings.log_dir)
    from topo.cli.run_watch import watch
    from topo.runs.detach import Detached

    detached = Detached.take()
    if detached is not None:  # the launcher of `topo run -d`: its output goes to a file
        looks = replace(looks, live=False, quiet=False)
    warm = None
    if ui is not None:  # its interpreter starts now, before the program's nodes take the CPU
        from topo.cli.ui import warm_for_run

        warm = warm_for_run(ui.host, ui.port)
    launcher = prepared(ctx, backend, origin, start, settings, warm)
    return watch(launcher, looks, warm, detached)


def _detach(log_dir: Path) -> NoReturn:
    """``topo run -d``: start the launcher in the background, return once it is up."""
    from topo.runs.detach import launch

    code, answer = launch(sys.argv[1:], log_dir)
    if answer is None:
        raise typer.Exit(code)
    run_id, run_dir = answer["id"], answer["run_dir"]
    stderr.print(
        Text(
            f"✓ run {run_id} goes on in the background — topo attach {run_id} · "
            f"topo logs -f {run_id} · topo stop {run_id}",
            style="green",
        )
    )
    typer.echo(f"{run_id} {run_dir}")
    _exit_now(0)


def _exit_now(code: int) -> NoReturn:
    """End this process at once, without the interpreter's teardown: on a machine the new
    run keeps busy, freeing a few hundred modules took this command 0.5-4 s of waiting
    after the run was up (bench/cli_operate_bench.py). Nothing is left to clean up here."""
    import os

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # (a closed pipe: the output was not wanted)
        pass
    os._exit(code)
