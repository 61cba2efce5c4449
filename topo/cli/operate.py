"""``topo ps``, ``topo status`` and ``topo stop``: the runs of this machine, one run's
nodes, and stopping a run from any shell. They read run directories and the machine's
index of runs (``topo.runs``) and import little, so they answer at once.

RUN is a run id, a unique prefix of one, a run directory, or nothing for the latest
run started from this directory (``runs/latest``).
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from topo.cli.app import app
from topo.cli.complete import complete_run
from topo.runs.probe import RunInfo

RunArgument = Annotated[
    str | None,
    typer.Argument(
        help="Run id, unique id prefix or run directory (default: the latest run started here).",
        show_default=False,
        autocompletion=complete_run,
    ),
]
LogDirOption = Annotated[
    Path, typer.Option("--log-dir", help="Where `runs/latest` is looked for.", hidden=True)
]


def say(message: str, style: str = "") -> None:
    """A line on stderr (coloured on a terminal)."""
    from rich.console import Console
    from rich.text import Text

    Console(stderr=True, highlight=False, soft_wrap=True).print(Text(message, style=style))


def pick_run(spec: str | None, log_dir: Path = Path("runs")) -> RunInfo:
    """The run RUN names, or ``error: ...`` and exit 1."""
    from topo.runs.resolve import RunNotFound, resolve

    try:
        return resolve(spec, log_dir)
    except RunNotFound as exc:
        say(f"error: {exc}", "red")
        raise typer.Exit(1) from None


def state_text(info: RunInfo) -> str:
    """``running``, ``ended (exit 1)``, ``lost``, ``running (gen 2)`` after ``topo
    apply`` changed the program twice, ``running (applying change 3)`` ..."""
    generation = int(info.status.get("generation") or 0)
    if info.state == "ended":
        return f"ended (exit {info.exit_code})"
    if info.live and info.status.get("applying"):
        return f"{info.state} (applying change {generation + 1})"
    return f"{info.state} (gen {generation})" if generation else info.state


def duration(seconds: float | None) -> str:
    """``42s``, ``3m05s``, ``2h07m``, ``3d04h``."""
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


@app.command("ps")
def ps(
    all_runs: Annotated[bool, typer.Option("--all", "-a", help="Ended runs too.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON list.")] = False,
) -> None:
    """List the runs on this machine (-a: ended ones too)."""
    from topo.runs import index
    from topo.runs.probe import probe

    infos = [probe(run_dir, run_id) for run_id, run_dir in index.entries()]
    infos.sort(key=lambda i: i.started or 0.0, reverse=True)
    ended = [i for i in infos if not i.live and i.state != "lost"]
    index.forget([i.id for i in ended[index.KEEP_ENDED :]])
    shown = infos if all_runs else [i for i in infos if i.live or i.state == "lost"]
    if as_json:
        typer.echo(json.dumps([i.to_json() for i in shown], indent=2))
        return
    header = ("ID", "NAME", "BACKEND", "STATE", "NODES", "RESTARTS", "UPTIME", "PID", "RUN DIR")
    rows = [
        (
            i.id,
            i.name,
            i.backend,
            state_text(i),
            f"{i.nodes_up}/{i.nodes_total}",
            str(i.restarts),
            duration(i.uptime_s),
            str(i.pid or "-"),
            _shown_path(i.run_dir),
        )
        for i in shown
    ]
    widths = [max(len(r[k]) for r in [header, *rows]) for k in range(len(header))]
    for row in [header, *rows]:
        typer.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    if not shown and not all_runs and infos:
        say(f"({len(infos)} ended runs: topo ps -a)", "dim")


def _shown_path(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


@app.command("status")
def status(
    run: RunArgument = None,
    as_json: Annotated[bool, typer.Option("--json", help="The run's status.json.")] = False,
    wide: Annotated[
        bool,
        typer.Option(
            "--wide", help="Every column and more figures, nothing cut (long lines wrap)."
        ),
    ] = False,
    log_dir: LogDirOption = Path("runs"),
) -> None:
    """Show one run's nodes once: state, pid, uptime, metrics.

    Also restarts and each node's last line. On a terminal the table fits its width, as
    the live view does; piped, every row is whole. It reads the run's status.json only,
    so it answers at once."""
    info = pick_run(run, log_dir)
    if as_json:
        typer.echo(json.dumps({**info.status, "state": info.state}, indent=2, default=str))
        return
    import shutil

    from topo.cli.ansi import paint, use_colour
    from topo.cli.recorded import StatusSource
    from topo.cli.view_table import CHROME_LINES, Shape, table_lines

    if sys.stdout.isatty() and not wide:
        size = shutil.get_terminal_size()
        shape = Shape(size.columns, max(size.lines - CHROME_LINES, 5))
    else:  # piped: whole rows, every node
        shape = Shape(None, None, wide=wide)
    colour = use_colour(sys.stdout)
    text = "".join(paint(line, colour) + "\n" for line in table_lines(StatusSource(info), shape))
    sys.stdout.write(text)
    sys.stdout.flush()
    footer = [(f"run {info.id}: {state_text(info)}", _style(info))]
    sys.stderr.write(paint(footer, use_colour(sys.stderr)) + "\n")


def _style(info: RunInfo) -> str:
    if info.state == "lost" or (info.state == "ended" and info.exit_code not in (0, None)):
        return "red"
    return "green" if info.live else ""


@app.command("stop")
def stop(
    run: RunArgument = None,
    grace: Annotated[
        float | None,
        typer.Option("--grace", min=0.0, help="Seconds nodes get to stop before being killed."),
    ] = None,
    kill: Annotated[bool, typer.Option("--kill", help="Kill every node now.")] = False,
    log_dir: LogDirOption = Path("runs"),
) -> None:
    """Stop a run as Ctrl-C in its terminal would.

    Exits with the run's exit code."""
    from topo.runs.control import ControlError, request

    info = pick_run(run, log_dir)
    if not info.live:
        _already_over(info)
    socket_path = info.status.get("control")
    message = {"op": "stop", "grace": grace, "kill": kill, "by": "topo stop"}
    try:
        if not socket_path:
            raise ControlError("the run has no control socket")
        request(info.run_dir, str(socket_path), message)
    except ControlError as exc:  # e.g. a launcher too busy to answer: its SIGTERM stop
        say(f"warning: {exc}; sending SIGTERM to the launcher (pid {info.pid})", "yellow")
        _signal(info, signal.SIGTERM)
    say(f"■ stopping run {info.id}" + (" (kill)" if kill else ""), "bold")
    code = _wait_end(info)
    sys.exit(code)


def _already_over(info: RunInfo) -> None:
    if info.state == "lost":
        say(
            f"✗ run {info.id} is lost: its launcher (pid {info.pid}) ended without ending the run",
            "red",
        )
        raise typer.Exit(1)
    code = info.exit_code if info.exit_code is not None else 1
    say(f"run {info.id} has already ended (exit {code})")
    raise typer.Exit(code)


def _signal(info: RunInfo, signum: int) -> None:
    import os

    from topo.runs.probe import launcher_alive

    if info.pid and launcher_alive(info.status.get("launcher")):
        try:
            os.kill(int(info.pid), signum)
        except ProcessLookupError:
            pass


def _wait_end(info: RunInfo) -> int:
    """Wait until the run ended; its exit code (1 when its launcher vanished)."""
    from topo.runs.control import ControlError, request
    from topo.runs.probe import launcher_alive, probe

    killing = False

    def on_interrupt(signum: int, frame: object) -> None:  # Ctrl-C while waiting: kill
        nonlocal killing
        killing = True

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        while True:
            now = probe(info.run_dir, info.id)
            if now.state == "ended":
                code = now.exit_code if now.exit_code is not None else 1
                say(f"✓ run {info.id} stopped: {now.status.get('stop_reason')} — exit {code}")
                return code
            if now.state == "lost" or launcher_alive(now.status.get("launcher")) is False:
                time.sleep(0.1)  # its last record may be on its way
                if probe(info.run_dir, info.id).state == "ended":
                    continue
                say(f"✗ run {info.id}: its launcher (pid {info.pid}) ended without a record", "red")
                return 1
            if killing:
                killing = False
                say("killing every node", "red")
                try:
                    request(
                        info.run_dir, str(now.status.get("control")), {"op": "stop", "kill": True}
                    )
                except ControlError:
                    _signal(info, signal.SIGKILL)
            time.sleep(0.1)
    finally:
        signal.signal(signal.SIGINT, previous)
