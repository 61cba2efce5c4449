"""``topo logs``: the output of a run's nodes, interleaved with ``node | `` prefixes as
``topo run`` shows it, while the run lives and after it ended; ``-f`` follows it."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Annotated

import typer

from topo.cli.app import app
from topo.cli.complete import complete_run
from topo.cli.interrupts import Interrupts
from topo.cli.operate import LogDirOption, pick_run, say
from topo.rundir.layout import log_path
from topo.runs.probe import RunInfo


@app.command("logs")
def logs(
    run: Annotated[
        str | None,
        typer.Argument(
            help="Run id, id prefix or run directory (default: the latest run started here).",
            show_default=False,
            autocompletion=complete_run,
        ),
    ] = None,
    nodes: Annotated[
        list[str] | None,
        typer.Argument(help="Nodes or groups to show (default: all).", show_default=False),
    ] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Follow new output.")] = False,
    tail: Annotated[
        int | None, typer.Option("--tail", "-n", min=0, help="Only the last N lines of each node.")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since", help="Only lines from then on: 30s, 10m, 1h30m, 1d ago, or a time."
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option("--until", help="Only lines before then (as --since; not with -f)."),
    ] = None,
    timestamps: Annotated[
        bool, typer.Option("--timestamps", "-t", help="Show each line's timestamp.")
    ] = False,
    log_dir: LogDirOption = Path("runs"),
) -> None:
    """Print a run's node output (-f: follow it until the run ends)."""
    from topo.runs.history import BadSince, parse_time

    try:
        since_t = None if since is None else parse_time(since, "--since")
        until_t = None if until is None else parse_time(until, "--until")
    except BadSince as exc:
        say(f"error: {exc}", "red")
        raise typer.Exit(2) from None
    if follow and until is not None:
        say("error: --until ends the output at a time; -f follows new lines: give one", "red")
        raise typer.Exit(2)
    info, chosen = _run_and_nodes(run, nodes or [], log_dir)
    files = _files(info, chosen)
    _print_history(files, tail, since_t, until_t, timestamps)
    if follow:
        sys.exit(_follow(info, files, timestamps))


def _run_and_nodes(run: str | None, nodes: list[str], log_dir: Path) -> tuple[RunInfo, list[str]]:
    """RUN may be left out: ``topo logs actor`` shows the group of the latest run."""
    from topo.runs.resolve import RunNotFound, resolve

    if run is not None:
        try:
            return resolve(run, log_dir), nodes
        except RunNotFound:
            try:
                latest = resolve(None, log_dir)
            except RunNotFound:
                latest = None
            if latest is None or not _known(latest, run):
                return pick_run(run, log_dir), nodes  # says why
            return latest, [run, *nodes]
    return pick_run(None, log_dir), nodes


def _ids(info: RunInfo) -> list[tuple[str, str]]:
    return [(str(n["id"]), str(n.get("group") or n["id"])) for n in info.status.get("nodes") or []]


def _known(info: RunInfo, name: str) -> bool:
    return any(name in (node, group) for node, group in _ids(info))


def _files(info: RunInfo, chosen: list[str]) -> dict[str, Path]:
    """Node id -> its log file, for the nodes and groups named (all when none is)."""
    ids = _ids(info)
    unknown = [c for c in chosen if not _known(info, c)]
    if unknown:
        names = ", ".join(sorted({g for _, g in ids}))
        say(
            f"error: run {info.id} has no node or group {', '.join(unknown)} (groups: {names})",
            "red",
        )
        raise typer.Exit(1)
    picked = [n for n, g in ids if not chosen or n in chosen or g in chosen]
    return {n: log_path(info.run_dir, n) for n in picked}


def _prefixer(files: dict[str, Path]) -> tuple[int, dict[str, str]]:
    from topo.cli.colours import colour

    width = min(32, max((len(n) for n in files), default=4))
    return width, {n: colour(n) for n in files}


def _print_history(
    files: dict[str, Path],
    tail: int | None,
    since: float | None,
    until: float | None,
    stamps: bool,
) -> None:
    from rich.console import Console
    from rich.text import Text

    from topo.rundir.lines import bare
    from topo.runs.history import history

    console = Console(highlight=False, soft_wrap=True, emoji=False)
    width, colours = _prefixer(files)
    for label, line in history(files, tail, since, until):
        shown = line if stamps else bare(line)
        console.print(Text(f"{label:<{width}} | ", style=colours[label]) + Text(shown))


def _follow(info: RunInfo, files: dict[str, Path], stamps: bool) -> int:
    """Print new lines until the run ends (its exit code) or Ctrl-C (130)."""
    from rich.console import Console
    from rich.text import Text

    from topo.backends.tail import LogTailer
    from topo.runs.probe import probe

    console = Console(highlight=False, soft_wrap=True, emoji=False)
    width, colours = _prefixer(files)
    lock = threading.Lock()

    def emit(label: str, line: str) -> None:
        with lock:
            console.print(Text(f"{label:<{width}} | ", style=colours.get(label, "")) + Text(line))

    with Interrupts() as ctrl_c:
        tailer = LogTailer(files, emit, stamps=stamps)
        tailer.start()
        try:
            while not ctrl_c.wait(0.25):
                now = probe(info.run_dir, info.id)
                if not now.live:
                    time.sleep(0.3)  # the last lines the nodes wrote
                    tailer.close()
                    code = now.exit_code if now.state == "ended" else None
                    return 1 if code is None else code
            return 130
        finally:
            tailer.close()
