"""``topo ui [RUN]``: the web dashboard of a run, live or ended, served from this machine
until Ctrl-C (``topo.ui``); ``topo run --ui`` starts the same dashboard with the run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from topo.cli.app import app
from topo.cli.interrupts import Interrupts
from topo.cli.operate import LogDirOption, RunArgument, pick_run, say

if TYPE_CHECKING:
    from rich.text import Text

    from topo.ui.spawn import Child, Warm

HostOption = Annotated[
    str,
    typer.Option(
        "--host",
        help="Address to listen on (default loopback: only this machine); another needs "
        "--allow-remote.",
    ),
]
AllowRemoteOption = Annotated[
    bool,
    typer.Option(
        "--allow-remote",
        help="Listen on a --host other machines can reach (the token is then all that "
        "guards the dashboard).",
    ),
]


def remote_warning(host: str) -> None:
    """The warning of a dashboard that listens beyond loopback."""
    say(
        f"warning: the dashboard listens on {host}: anyone who can reach it and has the "
        "URL's token can see the run and stop it",
        "yellow",
    )


@app.command("ui")
def ui(
    run: RunArgument = None,
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port (default 0: a free one).")
    ] = 0,
    host: HostOption = "127.0.0.1",
    allow_remote: AllowRemoteOption = False,
    log_dir: LogDirOption = Path("runs"),
) -> None:
    """Serve a run's web dashboard on this machine and print its URL.

    The run may be live or ended."""
    from topo.ui.auth import is_loopback, new_token
    from topo.ui.serve import UiError, check_host, open_dashboard, serve_until, url_of

    info = pick_run(run, log_dir)
    token = new_token()
    try:
        check_host(host, allow_remote)
        dashboard = open_dashboard(info.run_dir, host, port, token)
    except UiError as exc:
        say(f"error: {exc}", "red")
        raise typer.Exit(1) from None
    if not is_loopback(host):
        remote_warning(host)

    def on_interrupt(signum: int) -> None:
        dashboard.stopping.set()
        dashboard.shutdown()  # returns once serve_until's loop has ended (or at once)

    with Interrupts(then=on_interrupt):  # before the URL: Ctrl-C as soon as it shows
        say(f"dashboard of run {info.id} ({info.state}) — Ctrl-C to end it", "bold")
        typer.echo(url_of(host, dashboard.server_address[1], token))
        serve_until(dashboard)
    raise typer.Exit(0)


def precheck_for_run(detach: bool, host: str, port: int, allow_remote: bool) -> None:
    """``topo run --ui``: refuse what the dashboard could not take before anything starts."""
    from topo.ui.auth import is_loopback
    from topo.ui.serve import UiError
    from topo.ui.spawn import precheck

    if detach:
        say("error: --ui goes with a run in this terminal; for a detached run: topo ui RUN", "red")
        raise typer.Exit(1)
    try:
        precheck(host, port, allow_remote)
    except UiError as exc:
        say(f"error: {exc}", "red")
        raise typer.Exit(1) from None
    if not is_loopback(host):
        remote_warning(host)


def warm_for_run(host: str, port: int) -> Warm:
    """``topo run --ui``: the dashboard process, started before the run so that its
    start-up does not compete with the program's nodes for the CPU."""
    from topo.ui.spawn import warm_up

    return warm_up(host, port)


def start_with_run(
    run_dir: Path, warm: Warm, show: Callable[[Text], None] | None = None
) -> Child | None:
    """``topo run --ui``: the warmed-up dashboard serves the run; print its URL (through
    ``show``, the live table's, when there is one; else on stderr). A failure is a
    warning (the run goes on)."""
    from rich.text import Text

    from topo.ui.serve import UiError

    def tell(message: str, style: str) -> None:
        if show is None:
            say(message, style)
        else:
            show(Text(message, style=style))

    try:
        child = warm.start(run_dir)
    except UiError as exc:
        tell(f"warning: no dashboard: {exc}", "yellow")
        return None
    tell(f"dashboard: {child.url}", "bold")
    return child
