"""``topo run``: run a topology on a backend (procs, threads, or a plugin) with a live view.

Exit codes (``EXIT_CODES``, also in ``topo run --help``): 0 clean stop; 1 a node failed
(or ran out of restarts), or the file is invalid (imports and node arguments included,
checked before anything starts), or the backend refused it; 2 a mistake in the command
line (an unknown option or backend, a bad option value, no FILE); 130 stopped by Ctrl-C;
143 stopped by SIGTERM.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from topo.api import RUN_BACKEND
from topo.backends.rotation import DEFAULT_LOG_KEEP, DEFAULT_LOG_MAX_MB
from topo.cli.app import app
from topo.cli.common import (
    USAGE_EXIT,
    BackendCommand,
    ParamsOption,
    chosen_backend,
    error,
    fail,
    stderr,
)
from topo.cli.complete import complete_backend
from topo.cli.interrupts import Interrupts
from topo.diagnostics import TopoError


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
    file: Annotated[
        Path | None,
        typer.Argument(
            metavar="FILE",
            help="Topology YAML file (not with --from or --resume).",
            show_default=False,
        ),
    ] = None,
    params: ParamsOption = None,
    backend: Annotated[
        str,
        typer.Option(
            "--backend",
            "-b",
            help="procs (one process per executable), threads, ssh (with --hosts), ray, or an "
            "installed plugin backend; `topo run -b NAME --help` lists the backend's options.",
            autocompletion=complete_backend,
        ),
    ] = RUN_BACKEND,
    grace: Annotated[
        float | None,
        typer.Option(
            "--grace",
            min=0.0,
            help="Seconds nodes get to stop before being killed "
            "(default: the file's stop.grace_s, else 5).",
        ),
    ] = None,
    log_dir: Annotated[Path, typer.Option("--log-dir", help="Parent of the run directory.")] = Path(
        "runs"
    ),
    run_dir: Annotated[
        Path | None,
        typer.Option(
            "--run-dir", help="Exact run directory (default: <log-dir>/<name>-<timestamp>)."
        ),
    ] = None,
    log_max_mb: Annotated[
        float,
        typer.Option(
            "--log-max-mb",
            min=0.0,
            help="Cap of each node log file in MiB: a bigger one is rotated to "
            "<node>.log.1, .2 ... (0: no cap).",
        ),
    ] = DEFAULT_LOG_MAX_MB,
    log_keep: Annotated[
        int,
        typer.Option("--log-keep", min=0, help="Rotated files kept per node log."),
    ] = DEFAULT_LOG_KEEP,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No logs or live table; only the outcome.")
    ] = False,
    live: Annotated[
        bool | None,
        typer.Option(
            "--live/--no-live",
            help="Live table (default: when stdout is a terminal) or prefixed log lines.",
        ),
    ] = None,
    detach: Annotated[
        bool,
        typer.Option(
            "--detach",
            "-d",
            help="Return once every node is up and leave the run going on in the background "
            "(prints its id: then topo ps / status / logs / attach / stop).",
        ),
    ] = False,
    from_run: Annotated[
        Path | None,
        typer.Option(
            "--from",
            metavar="RUN",
            help="Rerun the program of RUN (a run directory, id or id prefix): its "
            "topology.yaml with the parameters it ran with, its backend and run options; "
            "options given here override them.",
        ),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(
            "--resume",
            metavar="RUN",
            help="Bring RUN's program back from its newest snapshot (or --snapshot N): "
            "counters, learners, replays and random streams go on where they were. No FILE: "
            "the program is RUN's own.",
        ),
    ] = None,
    fork: Annotated[
        Path | None,
        typer.Option(
            "--fork",
            metavar="RUN",
            help="Start a new run of FILE from RUN's newest snapshot (or --snapshot N); "
            "parameters may change where the saved states still fit (e.g. more actors).",
        ),
    ] = None,
    snapshot: Annotated[
        int | None,
        typer.Option(
            "--snapshot",
            metavar="N",
            min=1,
            help="With --resume or --fork: snapshot N (see topo snapshot --list RUN).",
        ),
    ] = None,
    plot: Annotated[
        bool,
        typer.Option(
            "--plot",
            help="At the stop, draw the nodes' metrics to RUN_DIR/metrics.png "
            "(as topo plot does; needs the plot extra).",
        ),
    ] = False,
    ui: Annotated[
        bool,
        typer.Option(
            "--ui",
            help="Serve the run's web dashboard while it runs and print its URL (a process "
            "of its own that ends with the run; topo ui RUN serves it for any run).",
        ),
    ] = False,
    ui_port: Annotated[
        int,
        typer.Option("--ui-port", min=0, max=65535, help="With --ui: its port (0: a free one)."),
    ] = 0,
    ui_host: Annotated[
        str,
        typer.Option(
            "--ui-host",
            help="With --ui: its address (default loopback; another needs --ui-allow-remote).",
        ),
    ] = "127.0.0.1",
    ui_allow_remote: Annotated[
        bool,
        typer.Option(
            "--ui-allow-remote",
            help="With --ui: listen on a --ui-host other machines can reach.",
        ),
    ] = False,
) -> None:
    """Run FILE: start every node, show their status, stop on Ctrl-C.

    With --from, --resume or --fork: a run's program again, or from its snapshot."""
    if ui and detach:
        raise error(
            "--ui goes with a run in this terminal; for a detached run: topo ui RUN", USAGE_EXIT
        )
    from_run, start_from = _snapshot_options(file, from_run, resume, fork, snapshot)
    if ui:
        from topo.cli.ui import precheck_for_run

        precheck_for_run(detach, ui_host, ui_port, ui_allow_remote)
    if detach:
        _detach(log_dir)
    from topo.api import prepare
    from topo.runs.detach import Detached

    detached = Detached.take()
    if detached is not None:  # the launcher of `topo run -d`: its output goes to a file
        live, quiet = False, False
    from topo.backends.base import BackendNotFound, BackendOptionError
    from topo.backends.titles import set_title
    from topo.cli.rerun import rerun_of, warn_reused
    from topo.rundir.snapshots import SnapshotError

    name, options = chosen_backend(ctx)
    assert name is not None
    settings: dict[str, Any] = dict(
        grace_s=grace, log_dir=log_dir, log_max_mb=log_max_mb, log_keep=log_keep
    )
    rerun = rerun_of(file, from_run)  # --from / --resume RUN: its file and recorded options
    if rerun is not None:
        file, settings = rerun.file, rerun.settings(ctx, settings)
        # its -p values go on (topology.yaml holds them as defaults, and topo apply to
        # the new run starts from them), changed by the ones given now
        from topo.loader.params import merge_overrides

        params = merge_overrides(rerun.record.params_given, params or [])
    assert file is not None
    warm = None
    if ui:  # its interpreter starts now, before the program's nodes take the CPU
        from topo.cli.ui import warm_for_run

        warm = warm_for_run(ui_host, ui_port)
    try:  # procs: the fork server imports while the file is compiled
        launcher = prepare(
            file,
            name,
            params or [],
            run_dir=run_dir,
            backend_options=options,
            from_run=from_run,
            start_from=start_from,
            same_program=resume is not None,
            **settings,
            check_imports=True,  # imports and node arguments, before anything starts
        )
    except BaseException as exc:
        if warm is not None:  # nothing runs: nor does the dashboard
            warm.close()
        if isinstance(exc, BackendNotFound | BackendOptionError | SnapshotError):
            raise error(str(exc)) from None  # (--resume / --fork: a snapshot that does not fit)
        if isinstance(exc, TopoError):  # a bad file or inventory, or a program refused
            raise fail(exc) from None
        raise
    set_title(f"topo: run {launcher.program.name} ({name})")
    warn_reused(run_dir)
    from topo.backends.base import Event
    from topo.cli.view import LinesView, TableView

    # The console writes to the stream that is stdout now, never to whatever sys.stdout is
    # later: the live view redirects sys.stdout into this console, and the threads backend
    # routes sys.stdout per node thread; resolving it on every write made the two feed each
    # other in a busy loop.
    console = Console(file=sys.stdout, highlight=False, soft_wrap=True, emoji=False)
    use_table = (live if live is not None else console.is_terminal) and not quiet
    stopping = False

    def on_event(event: Event) -> None:
        nonlocal stopping
        if event.kind == "stopping":
            stopping = True

    def on_signal(signum: int) -> None:
        # The first signal asks for a stop; one while stopping (for any reason) kills.
        nonlocal stopping
        if stopping:
            launcher.kill()
            return
        stopping = True
        name = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
        launcher.request_stop(name, code=130 if signum == signal.SIGINT else 143)

    signals = Interrupts(signal.SIGINT, signal.SIGTERM, then=on_signal).start()
    launcher.add_listener(on_event)
    view: LinesView | TableView | None = None
    dashboard = None
    try:
        if use_table:
            view = TableView(launcher, console)
        elif not quiet:  # detached: node output is in the node logs already
            view = LinesView(launcher, console, logs=detached is None)
            if detached is not None:
                view.kill_hint = "topo stop --kill to kill"
        if view is not None:
            launcher.add_listener(view)
        try:  # the dashboard opens the run before the nodes start and take the CPU
            launcher.start(warm.hand if warm is not None else None)
        except TopoError as refused:  # e.g. no run directory can be made there; nothing runs
            raise fail(refused) from None
        except SnapshotError as refused:  # the snapshot went away since it was checked
            raise error(str(refused)) from None
        if detached is not None:
            detached.settle(launcher.run_dir)
        if ui:
            from topo.cli.ui import start_with_run

            assert warm is not None
            show = view.say if isinstance(view, TableView) else None
            dashboard = start_with_run(launcher.run_dir, warm, show)
        while True:
            telling = detached is not None and detached.fd is not None
            # `run -d` waits for this: told the moment every node is up, not at a poll
            if telling and launcher.wait_ready(0.2) and detached is not None:
                launcher.record_now()  # `topo ps` right after `run -d` sees it running
                detached.say_ready(launcher.run_id, launcher.run_dir)
            if launcher.wait(0.0 if telling else 0.2) is not None:
                break
    finally:
        if dashboard is not None:
            dashboard.close()
        elif warm is not None:  # the run did not start, or the dashboard did not
            warm.close()
        if detached is not None:
            detached.close()
        if view is not None:
            view.close()
        signals.close()
    code = launcher.exit_code or 0
    if plot:
        _plot(launcher.run_dir)
    _outcome(launcher, code)
    sys.stdout.flush()
    raise typer.Exit(code)


def _snapshot_options(
    file: Path | None,
    from_run: Path | None,
    resume: Path | None,
    fork: Path | None,
    number: int | None,
) -> tuple[Path | None, Path | None]:
    """(the run directory to run again, the snapshot to start from) for --from, --resume
    and --fork. A command line that means nothing exits 2 (before anything starts or is
    detached); a run or a snapshot that is not there exits 1."""
    given = [
        name for name, v in (("--from", from_run), ("--resume", resume), ("--fork", fork)) if v
    ]
    if len(given) > 1:
        raise error(f"give one of {', '.join(given)}, not several", USAGE_EXIT)
    if number is not None and not (resume or fork):
        raise error("--snapshot N goes with --resume RUN or --fork RUN", USAGE_EXIT)
    if file is None and not (from_run or resume):
        raise error(
            "missing FILE: --fork RUN starts FILE from RUN's snapshot"
            if fork
            else "missing FILE: give a topology file (or --from RUN to run a run's program "
            "again, --resume RUN to bring it back from its snapshot)",
            USAGE_EXIT,
        )
    if file is not None and resume is not None:
        raise error(
            f"--resume RUN brings back the program RUN ran (its own topology, parameters "
            f"and backend) and takes no FILE; to start {file} from RUN's snapshot, with its "
            "parameters, use --fork RUN",
            USAGE_EXIT,
        )
    if file is not None and from_run is not None:
        raise error(
            "give FILE or --from RUN, not both: --from runs again the topology kept in RUN "
            "(add -p NAME=VALUE to change its parameters)",
            USAGE_EXIT,
        )
    from topo.cli.rerun import run_dir_of

    if from_run is not None:
        return run_dir_of(from_run), None
    source = resume or fork
    if source is None:
        return None, None
    from topo.rundir.snapshots import SnapshotError, find

    run_dir = run_dir_of(source)
    try:
        snap = find(run_dir, number)
    except SnapshotError as exc:
        raise error(str(exc)) from None
    return (run_dir if resume is not None else None), snap.path


def _detach(log_dir: Path) -> None:
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


def _plot(run_dir: Path) -> None:
    """``topo plot RUN_DIR`` for ``--plot``: a problem is a warning, not a failed run."""
    from topo.cli.plot import PlotError, plot_run

    try:
        written, _bad = plot_run(run_dir)
    except PlotError as exc:
        stderr.print(Text(f"warning: no learning curves: {exc}", style="yellow"))
        return
    stderr.print(f"wrote {escape(str(written))}")


def _outcome(launcher: object, code: int) -> None:
    from topo.supervisor.launcher import Launcher

    assert isinstance(launcher, Launcher)
    for warning in launcher.warnings:
        stderr.print(Text(f"warning: {warning}", style="yellow"))
    failure = launcher.failure
    if failure is not None:
        body = Text(failure.traceback.rstrip() or "(no traceback: the process died)")
        if stderr.is_terminal:
            stderr.print(
                Panel(
                    body,
                    title=Text(f"✗ {failure.message}", style="bold red"),
                    title_align="left",
                    border_style="red",
                    expand=False,
                )
            )
        else:  # piped: the whole traceback as plain text, at full width, for logs and grep
            stderr.file.write(f"✗ {failure.message}\n{body.plain}\n")
        stderr.print(Text(f"exit 1 — logs in {launcher.run_dir}", style="red"))
        return
    style = "green" if code == 0 else "yellow"
    stderr.print(
        Text(
            f"✓ stopped: {launcher.stop_reason} — exit {code}, logs in {launcher.run_dir}",
            style=style,
        )
    )
