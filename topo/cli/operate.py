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
from typing import Annotated, Any

import typer

from topo.cli.app import app
from topo.cli.complete import complete_run
from topo.cli.operate_jobs import cancel_waiting, job_hint, lost_cause, probe_all, slurm_text
from topo.runs.probe import RunInfo

RunArgument = Annotated[
    str | None,
    typer.Argument(
        help="Run id, unique id prefix or run directory (default: the latest run started here).",
        show_default=False,
        autocompletion=complete_run,
    ),
]
LiveRunArgument = Annotated[
    str,
    typer.Argument(
        help="Run id, unique id prefix or run directory.",
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


def require_live(info: RunInfo, nothing_to: str) -> None:
    """Exit 1 unless ``info`` is a live run (``nothing_to``: what a run that is not
    cannot do, "nothing to restart")."""
    if not info.live:
        say(f"error: run {info.id} is not running ({info.state}): {nothing_to}", "red")
        raise typer.Exit(1)


def ask_launcher(info: RunInfo, message: dict[str, Any], timeout: float) -> dict[str, Any]:
    """The answer of a live run's launcher to ``message`` over its control socket (exit
    1 saying why when there is none)."""
    from topo.runs.control import ControlError, request

    socket_path = info.status.get("control")
    try:
        if not socket_path:
            raise ControlError("the run has no control socket")
        return request(info.run_dir, str(socket_path), message, timeout=timeout)
    except ControlError as exc:
        say(f"error: {exc}", "red")
        raise typer.Exit(1) from None


def state_text(info: RunInfo) -> str:
    """``running``, ``ended (exit 1)``, ``lost``, ``running (gen 2)`` after ``topo
    apply`` changed the program twice, ``running (applying change 3)`` ...; a lost run
    whose nodes still run says how many (``lost (2 orphaned)``), one ``topo stop`` cleared
    says ``ended (lost)``."""
    generation = int(info.status.get("generation") or 0)
    if info.state == "ended" and not info.status:  # a job that ended before topo ran
        return "ended" + slurm_text(info)
    if info.state == "ended":
        return "ended (lost)" if info.exit_code is None else f"ended (exit {info.exit_code})"
    if info.state == "lost" and info.orphans:
        return f"lost ({len(info.orphans)} orphaned)" + slurm_text(info)
    if info.live and info.status.get("applying"):
        return f"{info.state} (applying change {generation + 1})"
    text = f"{info.state} (gen {generation})" if generation else info.state
    return text + slurm_text(info)


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
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the run ids.")] = False,
    filters: Annotated[
        list[str] | None,
        typer.Option(
            "--filter",
            "-f",
            metavar="KEY=VALUE",
            help="Only the runs that match (repeatable; one key's values are alternatives): "
            "id=PREFIX, name=PART, backend=NAME, state=running|starting|stopping|ended|lost|"
            "live, exit=CODE. A state= filter looks at ended runs too.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON list.")] = False,
) -> None:
    """List the runs on this machine (-a: ended ones too).

    Live and lost runs are listed; -a adds the ended ones."""
    import os
    import shutil

    from topo.cli.ps_table import HEADER, BadFilter, fit, keep, parse_filters
    from topo.runs import index

    try:
        chosen = parse_filters(filters or [])
    except BadFilter as exc:
        say(f"error: {exc}", "red")
        raise typer.Exit(2) from None
    infos = probe_all(index.entries())
    infos.sort(key=lambda i: i.started or 0.0, reverse=True)
    ended = [i for i in infos if not i.live and i.state != "lost"]
    index.forget([i.id for i in ended[index.KEEP_ENDED :]])
    every = all_runs or "state" in chosen or "exit" in chosen
    shown = [i for i in infos if (every or i.live or i.state == "lost") and keep(i, chosen)]
    if quiet:
        for i in shown:
            typer.echo(i.id)
        return
    if as_json:
        typer.echo(json.dumps([i.to_json() for i in shown], indent=2))
        return
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
    width = shutil.get_terminal_size().columns if os.isatty(1) else None
    for line in fit([HEADER, *rows], width):
        typer.echo(line)
    if not shown and not every and not chosen and infos:  # (plain: rich costs 50 modules)
        typer.echo(f"({len(infos)} ended runs: topo ps -a)", err=True)


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
        extra = {} if info.slurm_job is None else {"slurm": info.to_json()["slurm"]}
        state = {**info.status, "state": info.state, **extra}
        typer.echo(json.dumps(state, indent=2, default=str))
        return
    if not info.status:  # a submitted job whose launcher has not started (or never did)
        say(f"run {info.id}: {state_text(info)}{job_hint(info)}", _style(info))
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
    footer = [(f"run {info.id}: {state_text(info)}{lost_hint(info)}", _style(info))]
    sys.stderr.write(paint(footer, use_colour(sys.stderr)) + "\n")


def lost_hint(info: RunInfo) -> str:
    """What a lost run is and what to do about it, after its state ("" for the others)."""
    if info.state != "lost":
        return ""
    if info.slurm is not None and info.slurm.ended:
        return f" — {lost_cause(info)}; topo stop {info.id} clears what is left"
    left = f"; {len(info.orphans)} node(s) still running unwatched" if info.orphans else ""
    return (
        f" — its launcher (pid {info.pid}) ended without ending the run{left}; "
        f"topo stop {info.id} clears what is left"
    )


def _style(info: RunInfo) -> str:
    if info.state == "lost" or (info.state == "ended" and info.exit_code != 0):
        return "red"
    return "green" if info.live else ""


@app.command("stop")
def stop(
    runs: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="RUN",
            help="Run ids, unique id prefixes or run directories (default: the latest run "
            "started here).",
            show_default=False,
            autocompletion=complete_run,
        ),
    ] = None,
    grace: Annotated[
        float | None,
        typer.Option("--grace", min=0.0, help="Seconds nodes get to stop before being killed."),
    ] = None,
    kill: Annotated[bool, typer.Option("--kill", help="Kill every node now.")] = False,
    log_dir: LogDirOption = Path("runs"),
) -> None:
    """Stop runs as Ctrl-C in their terminals would.

    Exits with the first non-zero exit code of the runs, in the order given."""
    codes: list[int | None] = []  # in the order given; None: a live run, known at its end
    stopping: list[RunInfo] = []
    specs: list[str | None] = list(runs) if runs else [None]
    for spec in specs:
        try:
            info = pick_run(spec, log_dir)
        except typer.Exit as refused:  # (said why) the others are stopped all the same
            codes.append(refused.exit_code)
            continue
        if info.slurm is not None and info.slurm.waiting:
            code, said = cancel_waiting(info)
            say(said, "red" if code else "")
            codes.append(code)
        elif info.live:
            ask_stop(info, grace, kill)
            stopping.append(info)
            codes.append(None)
        else:
            codes.append(_already_over(info, grace, kill))
    ends = iter(_wait_end(stopping, grace, kill))
    final = [next(ends) if c is None else c for c in codes]
    sys.exit(next((c for c in final if c != 0), 0))


def ask_stop(info: RunInfo, grace: float | None, kill: bool) -> None:
    """Ask a live run's launcher to stop (its SIGTERM when it cannot be reached)."""
    from topo.runs.control import ControlError, request

    socket_path = info.status.get("control")
    message = {"op": "stop", "grace": grace, "kill": kill, "by": "topo stop"}
    try:
        if not socket_path:
            raise ControlError("the run has no control socket")
        request(info.run_dir, str(socket_path), message)
    except ControlError as exc:  # e.g. a launcher too busy to answer: its SIGTERM stop
        if info.slurm_job is not None:  # the launcher is the job's batch shell, on its node
            from topo.runs.slurm_jobs import cancel

            say(f"warning: {exc}; sending SIGTERM to Slurm job {info.slurm_job}", "yellow")
            cancel(info.slurm_job, signal="TERM")
        else:
            say(f"warning: {exc}; sending SIGTERM to the launcher (pid {info.pid})", "yellow")
            _signal(info, signal.SIGTERM)
    say(f"■ stopping run {info.id}" + (" (kill)" if kill else ""), "bold")


def _already_over(info: RunInfo, grace: float | None, kill: bool) -> int:
    """A run that is not live: a lost one is cleared (0), an ended one says so (its
    exit code; 0 for one that was lost)."""
    if info.state == "lost":
        say(f"run {info.id} is lost: {lost_cause(info)}")
        return clear_lost(info, grace, kill, "topo stop")
    if info.state == "ended" and not info.status:  # its job ended before topo ran in it
        say(f"run {info.id} has already ended{job_hint(info)}")
        return 1
    if info.state == "ended" and info.exit_code is None:
        say(f"run {info.id} has already ended (lost, cleared)")
        return 0
    code = info.exit_code if info.exit_code is not None else 1
    say(f"run {info.id} has already ended (exit {code})")
    return code


def clear_lost(info: RunInfo, grace: float | None, kill: bool, by: str) -> int:
    """End what a lost run left running, remove its temporary directories, mark it ended;
    say what was done. 0, or 1 when something could not be cleared."""
    from topo.runs.cleanup import end_lost

    cleared = end_lost(info, grace, kill, by)
    done = []
    if cleared.ended:
        pids = ", ".join(f"{node} (pid {pid})" for node, pid in cleared.ended)
        done.append(f"ended {len(cleared.ended)} process(es) left running: {pids}")
    else:
        done.append("no process was left running")
    if cleared.removed:
        done.append("removed " + ", ".join(str(p) for p in cleared.removed))
    for problem in cleared.problems:
        say(f"warning: {problem}", "yellow")
    say(f"✓ run {info.id} cleared: {'; '.join(done)}; it is marked ended (lost)")
    return 1 if cleared.problems else 0


def _signal(info: RunInfo, signum: int) -> None:
    import os

    from topo.runs.probe import launcher_alive

    if info.pid and launcher_alive(info.status.get("launcher")):
        try:
            os.kill(int(info.pid), signum)
        except ProcessLookupError:
            pass


def _wait_end(stopping: list[RunInfo], grace: float | None, kill: bool) -> list[int]:
    """Wait until every run in ``stopping`` ended; their exit codes, in order (1 for one
    whose launcher vanished: what it left is cleared). Ctrl-C kills every node."""
    from topo.runs.control import ControlError, request
    from topo.runs.probe import launcher_alive, probe

    codes: dict[str, int] = {}
    killing = False
    killed: set[str] = set()

    def on_interrupt(signum: int, frame: object) -> None:  # Ctrl-C while waiting: kill
        nonlocal killing
        killing = True

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        while len(codes) < len({i.id for i in stopping}):  # (a run named twice: once)
            for info in stopping:
                if info.id in codes:
                    continue
                now = probe(info.run_dir, info.id)
                if now.state == "ended":
                    code = now.exit_code if now.exit_code is not None else 1
                    reason = now.status.get("stop_reason")
                    say(f"✓ run {info.id} stopped: {reason} — exit {code}")
                    codes[info.id] = code
                elif now.state == "lost" or launcher_alive(now.status.get("launcher")) is False:
                    time.sleep(0.1)  # its last record may be on its way
                    now = probe(info.run_dir, info.id)
                    if now.state == "ended":
                        continue
                    say(f"✗ run {info.id}: {lost_cause(now)}", "red")
                    clear_lost(now, grace, kill, "topo stop")
                    codes[info.id] = 1
                elif killing and info.id not in killed:
                    killed.add(info.id)
                    say(f"killing every node of run {info.id}", "red")
                    try:
                        message = {"op": "stop", "kill": True}
                        request(info.run_dir, str(now.status.get("control")), message)
                    except ControlError:
                        _signal(info, signal.SIGKILL)
            time.sleep(0.1)
    finally:
        signal.signal(signal.SIGINT, previous)
    return [codes[i.id] for i in stopping]
