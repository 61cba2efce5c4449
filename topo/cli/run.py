"""``topo run``: run a topology on a backend (procs, threads, or a plugin) with a live view.

Exit codes: 0 clean stop; 1 a node failed (or ran out of restarts), or the
file is invalid, or there is no such backend, or the backend refused it; 130
stopped by Ctrl-C; 143 stopped by SIGTERM.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from topo.cli.app import app
from topo.cli.common import FileArgument, ParamsOption, fail, load_topology, stderr
from topo.diagnostics import TopoError

if TYPE_CHECKING:
    from topo.backends.base import Backend
    from topo.supervisor.launcher import Launcher


@app.command("run")
def run(
    file: FileArgument,
    params: ParamsOption = None,
    backend: Annotated[
        str,
        typer.Option(
            "--backend",
            "-b",
            help="procs (one process per executable), threads, ssh (with --hosts), ray (with "
            "--address), or an installed plugin backend.",
        ),
    ] = "procs",
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
    plot: Annotated[
        bool,
        typer.Option(
            "--plot",
            help="At the stop, draw the nodes' metrics to RUN_DIR/metrics.png "
            "(as topo plot does; needs the plot extra).",
        ),
    ] = False,
    hosts: Annotated[
        Path | None,
        typer.Option("--hosts", help="Inventory file of --backend ssh: the hosts to run on."),
    ] = None,
    ship: Annotated[
        bool,
        typer.Option(
            "--ship",
            help="With --backend ssh: copy the working tree to each host's workdir over SFTP "
            "before starting; with --backend ray: send it as the job's working_dir.",
        ),
    ] = False,
    address: Annotated[
        str | None,
        typer.Option(
            "--address",
            help="With --backend ray: the Ray cluster to join (auto, HOST:PORT or ray://...); "
            "default: a local Ray started for the run and stopped at its end.",
        ),
    ] = None,
) -> None:
    """Run FILE: start every node, show their status and logs, stop on Ctrl-C."""
    from topo.backends.base import BackendNotFound, get_backend
    from topo.command import take_warm

    try:
        options = _backend_options(backend, hosts, ship, address)
        chosen = take_warm(backend) or get_backend(backend, **options)
    except BackendNotFound as exc:
        stderr.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from None
    except TopoError as error:  # e.g. a bad inventory: nothing has started yet
        raise fail(error) from None
    warm = chosen.warm_up()  # procs: the fork server imports while the file is compiled
    try:
        launcher = _prepare(chosen, file, params, grace, log_dir, run_dir)
    except BaseException:  # a bad file: what the warm-up started ends here
        if warm:
            chosen.close()
        raise
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

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # The first signal asks for a stop; one while stopping (for any reason) kills.
        nonlocal stopping
        if stopping:
            launcher.kill()
            return
        stopping = True
        name = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
        launcher.request_stop(name, code=130 if signum == signal.SIGINT else 143)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    launcher.add_listener(on_event)
    view: LinesView | TableView | None = None
    try:
        if use_table:
            view = TableView(launcher, console)
        elif not quiet:
            view = LinesView(launcher, console)
        if view is not None:
            launcher.add_listener(view)
        launcher.start()
        while launcher.wait(0.2) is None:
            pass
    finally:
        if view is not None:
            view.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    code = launcher.exit_code or 0
    if plot:
        _plot(launcher.run_dir)
    _outcome(launcher, code)
    sys.stdout.flush()
    raise typer.Exit(code)


def _prepare(
    backend: Backend,
    file: Path,
    params: list[str] | None,
    grace: float | None,
    log_dir: Path,
    run_dir: Path | None,
) -> Launcher:
    """Load and compile FILE and make its launcher (checked, nothing started); on bad
    input print the errors and exit 1."""
    from topo.backends.base import RunOptions
    from topo.supervisor.launcher import Launcher

    loaded = load_topology(file, params)
    options = RunOptions(
        grace_s=grace, log_dir=log_dir, run_dir=run_dir, topology_yaml=loaded.yaml_text
    )
    try:
        return Launcher(loaded.program, backend, options)
    except TopoError as error:
        raise fail(error) from None


def _backend_options(
    backend: str, hosts: Path | None, ship: bool, address: str | None = None
) -> dict[str, object]:
    """The options ``get_backend`` passes to the backend's constructor: ``--hosts`` is
    for the ssh backend only, ``--address`` for ray, ``--ship`` for both; a wrong
    combination exits 1."""
    if address is not None and backend != "ray":
        stderr.print(
            f"[red]error:[/] --address only applies to --backend ray (not {escape(backend)})"
        )
        raise typer.Exit(1)
    if backend == "ray":
        if hosts is not None:
            stderr.print("[red]error:[/] --hosts only applies to --backend ssh (not ray)")
            raise typer.Exit(1)
        return {"address": address, "ship": ship}
    if backend != "ssh":
        for flag, on, where in (
            ("--hosts", hosts is not None, "ssh"),
            ("--ship", ship, "ssh or ray"),
        ):
            if on:
                stderr.print(
                    f"[red]error:[/] {flag} only applies to --backend {where} "
                    f"(not {escape(backend)})"
                )
                raise typer.Exit(1)
        return {}
    if hosts is None:
        stderr.print("[red]error:[/] --backend ssh needs --hosts FILE (the inventory of hosts)")
        raise typer.Exit(1)
    return {"hosts": hosts, "ship": ship}


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
