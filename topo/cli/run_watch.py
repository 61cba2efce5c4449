"""``topo run``: start the prepared launcher and show the run in this terminal until it
ends (a live table, or prefixed log lines; ``-q``: only the outcome), stopping it on
the first Ctrl-C or SIGTERM and killing it on the second; then the outcome.

The launcher of ``topo run -d`` runs here too, its output going to a file: it tells the
command that started it (``topo.runs.detach``) the moment every node is up.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from topo.cli.common import fail, stderr
from topo.cli.interrupts import Interrupts
from topo.cli.run_options import Looks
from topo.diagnostics import TopoError

if TYPE_CHECKING:
    from topo.backends.base import Event
    from topo.cli.ui import Warm
    from topo.cli.view import LinesView, TableView
    from topo.runs.detach import Detached
    from topo.supervisor.launcher import Launcher


def watch(launcher: Launcher, looks: Looks, warm: Warm | None, detached: Detached | None) -> int:
    """Start ``launcher`` and show its run until it ends (with the dashboard ``warm``, for
    ``--ui``; ``detached``: the launcher of ``topo run -d``); its exit code."""
    # The console writes to the stream that is stdout now, never to whatever sys.stdout is
    # later: the live view redirects sys.stdout into this console, and the threads backend
    # routes sys.stdout per node thread; resolving it on every write made the two feed each
    # other in a busy loop.
    console = Console(file=sys.stdout, highlight=False, soft_wrap=True, emoji=False)
    signals = _stop_on_signals(launcher)
    view: LinesView | TableView | None = None
    dashboard = None
    try:
        view = _view(launcher, console, looks, detached)
        if view is not None:
            launcher.add_listener(view)
        try:  # the dashboard opens the run before the nodes start and take the CPU
            launcher.start(warm.hand if warm is not None else None)
        except TopoError as refused:  # e.g. no run directory can be made there; nothing runs
            raise fail(refused) from None
        run_dir = launcher.state.run_dir
        if launcher.endpoint is not None:  # (--metrics-port 0: the port is known only now)
            token = run_dir / "metrics.token"
            stderr.print(
                Text(f"metrics for Prometheus at {launcher.endpoint.url} (bearer token: {token})"),
                soft_wrap=True,
                highlight=False,
            )
        if detached is not None:
            detached.settle(run_dir)
        if warm is not None:
            from topo.cli.ui import start_with_run
            from topo.cli.view import TableView

            show = view.say if isinstance(view, TableView) else None
            dashboard = start_with_run(run_dir, warm, show)
        _until_ended(launcher, detached)
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
    code = launcher.state.exit_code or 0
    if looks.plot:
        _plot(launcher.state.run_dir)
    _outcome(launcher, code)
    sys.stdout.flush()
    return code


def _stop_on_signals(launcher: Launcher) -> Interrupts:
    """The first SIGINT or SIGTERM asks for a stop; one while stopping (for any reason)
    kills."""
    stopping = False

    def on_event(event: Event) -> None:
        nonlocal stopping
        if event.kind == "stopping":
            stopping = True

    def on_signal(signum: int) -> None:
        nonlocal stopping
        if stopping:
            launcher.supervisor.kill()
            return
        stopping = True
        if signum == signal.SIGINT:
            launcher.request_stop("Ctrl-C", code=130)
        else:
            launcher.stop_on_sigterm("SIGTERM")

    signals = Interrupts(signal.SIGINT, signal.SIGTERM, then=on_signal).start()
    launcher.add_listener(on_event)
    return signals


def _view(
    launcher: Launcher, console: Console, looks: Looks, detached: Detached | None
) -> LinesView | TableView | None:
    """The live table (a terminal, or ``--live``), prefixed lines, or nothing (``-q``)."""
    from topo.cli.view import LinesView, TableView

    if looks.quiet:
        return None
    if looks.live if looks.live is not None else console.is_terminal:
        return TableView(launcher.state, console)
    lines = LinesView(launcher.state, console, logs=detached is None)
    if detached is not None:  # its node output is in the node logs already
        lines.kill_hint = "topo stop --kill to kill"
    return lines


def _until_ended(launcher: Launcher, detached: Detached | None) -> None:
    """Wait for the run's end; ``topo run -d``'s launcher tells its command the moment
    every node is up, not at a poll."""
    while True:
        telling = detached is not None and detached.fd is not None
        if telling and launcher.wait_ready(0.2) and detached is not None:
            launcher.record_now()  # `topo ps` right after `run -d` sees it running
            detached.say_ready(launcher.run_id, launcher.state.run_dir)
        if launcher.wait(0.0 if telling else 0.2) is not None:
            return


def _plot(run_dir: Path) -> None:
    """``topo plot RUN_DIR`` for ``--plot``: a problem is a warning, not a failed run."""
    from topo.cli.plot import PlotError, plot_run

    try:
        written, _bad = plot_run(run_dir)
    except PlotError as exc:
        stderr.print(Text(f"warning: no learning curves: {exc}", style="yellow"))
        return
    stderr.print(f"wrote {escape(str(written))}")


def _outcome(launcher: Launcher, code: int) -> None:
    """The run's warnings, then its failure (with its traceback) or how it stopped."""
    state = launcher.state
    for warning in state.warnings:
        stderr.print(Text(f"warning: {warning}", style="yellow"))
    failure = state.failure
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
        stderr.print(Text(f"exit 1 — logs in {state.run_dir}", style="red"))
        return
    style = "green" if code == 0 else "yellow"
    stderr.print(
        Text(
            f"✓ stopped: {state.stop_reason} — exit {code}, logs in {state.run_dir}",
            style=style,
        )
    )
