"""``topo snapshot RUN``: take a consistent snapshot of a live run from any shell, or
(``--list``) show the snapshots a run has, live or ended."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from topo.cli.app import app
from topo.cli.operate import (
    LogDirOption,
    RunArgument,
    ask_launcher,
    duration,
    pick_run,
    require_live,
    say,
)
from topo.rundir.snapshots import human_size

TAKE_TIMEOUT_S = 900.0  # a replay's checkpoint can take minutes for millions of items


@app.command("snapshot")
def snapshot(
    run: RunArgument = None,
    list_them: Annotated[
        bool, typer.Option("--list", "-l", help="List the run's snapshots instead.")
    ] = False,
    log_dir: LogDirOption = Path("runs"),
) -> None:
    """Snapshot a live run now, or list a run's snapshots.

    A snapshot holds every node's state at one consistent point; resume one with
    topo run --resume RUN."""
    info = pick_run(run, log_dir)
    if list_them:
        _list(info.run_dir)
        return
    require_live(info, "nothing to snapshot")
    answer = ask_launcher(info, {"op": "snapshot", "by": "topo snapshot"}, TAKE_TIMEOUT_S)
    if not answer.get("ok"):
        say(f"error: the snapshot of run {info.id} failed: {answer.get('error')}", "red")
        raise typer.Exit(1)
    say(_taken(info.id, answer), "bold")
    print(answer["path"])


def _taken(run_id: str, answer: dict[str, Any]) -> str:
    return (
        f"◆ snapshot {answer['number']} of run {run_id}: {len(answer.get('nodes', []))} "
        f"node state(s), {human_size(int(answer.get('bytes', 0)))}, paused "
        f"{float(answer.get('pause_s', 0)):.2f}s"
    )


def _list(run_dir: Path) -> None:
    from topo.rundir.snapshots import SnapshotError, numbers, read_snapshot, snapshots_dir

    found = numbers(run_dir)
    if not found:
        say(f"run {run_dir} has no snapshot")
        raise typer.Exit(0)
    now = time.time()
    print(f"{'N':>3}  {'TAKEN':>9}  {'STATES':>6}  {'SIZE':>9}  {'PAUSE':>7}  REASON")
    for number in found:
        try:
            snap = read_snapshot(snapshots_dir(run_dir) / str(number))
        except SnapshotError as exc:
            print(f"{number:>3}  unreadable: {exc}")
            continue
        print(
            f"{number:>3}  {duration(now - snap.taken_at) + ' ago':>9}  {len(snap.nodes):>6}  "
            f"{human_size(snap.size):>9}  {snap.pause_s:>6.2f}s  {snap.reason}".rstrip()
        )
    print(f"resume the newest: topo run --resume {run_dir}")
