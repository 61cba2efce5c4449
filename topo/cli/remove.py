"""``topo rm`` and ``topo prune``: forget runs that are over, as ``docker rm`` and
``docker container prune`` do: each run's listing, its run directory (unless kept) and
what it left in the temporary directory; a lost run's leftover node processes are ended
first (checked by pid and start time). Only runs listed for this user and ``TOPO_HOME``
are touched."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from topo.cli.app import app
from topo.cli.complete import complete_run
from topo.cli.operate import LogDirOption, ask_stop, clear_lost, pick_run, say
from topo.runs.cleanup import Cleared
from topo.runs.probe import RunInfo

KeepDirOption = Annotated[
    bool,
    typer.Option("--keep-dir", help="Keep the run directory (logs, metrics, snapshots)."),
]


@app.command("rm")
def rm(
    runs: Annotated[
        list[str],
        typer.Argument(
            metavar="RUN",
            help="Run ids, unique id prefixes or run directories.",
            show_default=False,
            autocompletion=complete_run,
        ),
    ],
    force: Annotated[
        bool, typer.Option("--force", "-f", help="Kill a live run first, then remove it.")
    ] = False,
    keep_dir: KeepDirOption = False,
    log_dir: LogDirOption = Path("runs"),
) -> None:
    """Remove ended or lost runs and what they left.

    Their listing, run directory (unless --keep-dir) and temporary files go."""
    code = 0
    for spec in runs:
        try:
            info = pick_run(spec, log_dir)
        except typer.Exit as refused:  # (said why) the others are removed all the same
            code = code or refused.exit_code
            continue
        code = _remove_one(info, force, keep_dir) or code
    sys.exit(code)


def _remove_one(info: RunInfo, force: bool, keep_dir: bool) -> int:
    """Remove one run (``rm``); 0, or 1 when refused or not all of it could go."""
    from topo.runs.cleanup import listed_here, remove

    if not listed_here(info):
        say(
            f"error: {info.run_dir} is not a run listed for this user here (topo ps -a); "
            "topo rm removes listed runs only",
            "red",
        )
        return 1
    if info.live:
        if not force:
            say(
                f"error: run {info.id} is {info.state}: stop it first (topo stop {info.id}), "
                "or topo rm -f kills it and removes it",
                "red",
            )
            return 1
        ask_stop(info, None, kill=True)
        if not _ended(info):
            say(f"error: run {info.id} did not end; nothing removed", "red")
            return 1
    elif info.state == "lost" and clear_lost(info, None, False, "topo rm") != 0:
        say(f"error: what run {info.id} left could not all be cleared; nothing removed", "red")
        return 1
    cleared = remove(_fresh(info), keep_dir)
    _said(info, cleared, keep_dir)
    return 1 if cleared.problems or cleared.refused else 0


def _fresh(info: RunInfo) -> RunInfo:
    from topo.runs.probe import probe

    return probe(info.run_dir, info.id)


def _ended(info: RunInfo, timeout: float = 60.0) -> bool:
    """Wait until a run asked to stop has ended (or its launcher is gone)."""
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        now = _fresh(info)
        if not now.live:
            if now.state == "lost":
                clear_lost(now, None, False, "topo rm")
            return True
        time.sleep(0.1)
    return False


def _said(info: RunInfo, cleared: Cleared, keep_dir: bool) -> None:
    """What removing one run did: a line on stderr, its id on stdout (as docker rm)."""
    if cleared.refused:
        say(f"error: run {info.id} kept: {cleared.refused}", "red")
        return
    for problem in cleared.problems:
        say(f"warning: {problem}", "yellow")
    gone = [str(p) for p in cleared.removed]
    kept = f"; kept {info.run_dir}" if keep_dir else ""
    what = ", ".join(gone) if gone else "nothing on disk"
    say(f"removed run {info.id}: {what}{kept}")
    typer.echo(info.id)


@app.command("prune")
def prune(
    force: Annotated[bool, typer.Option("--force", "-f", help="Do not ask.")] = False,
    keep_dir: KeepDirOption = False,
) -> None:
    """Remove every ended and lost run listed here.

    Asks first on a terminal; -f does not ask."""
    from topo.runs import index
    from topo.runs.cleanup import remove
    from topo.runs.probe import probe

    infos = [probe(run_dir, run_id) for run_id, run_dir in index.entries()]
    over = [i for i in infos if i.state in ("ended", "lost")]
    if not over:
        say("nothing to remove: no ended or lost run is listed (topo ps -a)")
        return
    if not force:
        lost = sum(1 for i in over if i.state == "lost")
        what = f"{len(over)} run(s) ({len(over) - lost} ended, {lost} lost)"
        dirs = "" if keep_dir else ", with their run directories"
        if not sys.stdin.isatty():
            say(
                f"error: topo prune would remove {what}{dirs}; with no terminal to ask, add -f",
                "red",
            )
            raise typer.Exit(1)
        sys.stderr.write(f"This removes {what}{dirs}. Go on? [y/N] ")
        sys.stderr.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            say("nothing removed")
            raise typer.Exit(1)
    total = Cleared()
    for info in over:
        if info.state == "lost" and clear_lost(info, None, False, "topo prune") != 0:
            say(f"warning: run {info.id} kept: what it left could not all be cleared", "yellow")
            continue
        cleared = remove(probe(info.run_dir, info.id), keep_dir)
        _said(info, cleared, keep_dir)
        total.add(cleared)
    say(f"Total reclaimed space: {_size(total.freed)}")
    if total.problems:
        raise typer.Exit(1)


def _size(n: float) -> str:
    """``0 B``, ``12.3 KiB``, ``4.1 MiB`` ..."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
