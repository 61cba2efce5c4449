"""``topo stacks RUN [NODE...]``: the Python stack of every thread of a live run's nodes
(all of them by default), taken at once without stopping them, over the run's control
channel as ``topo restart`` is; the launcher asks each node (``topo.supervisor.stacks``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from topo.cli.app import app
from topo.cli.operate import (
    LiveRunArgument,
    LogDirOption,
    ask_launcher,
    pick_run,
    require_live,
    say,
)

STACKS_TIMEOUT_S = 30.0  # every node is asked at once; a silent one gets a few seconds


@app.command("stacks")
def stacks(
    run: LiveRunArgument,
    nodes: Annotated[
        list[str] | None,
        typer.Argument(help="The nodes (default: every node).", show_default=False),
    ] = None,
    everything: Annotated[
        bool,
        typer.Option(
            "--all",
            "-a",
            help="Every frame of every thread, topo's own and Python's too.",
        ),
    ] = False,
    log_dir: LogDirOption = Path("runs"),
) -> None:
    """Print the Python stack of every thread of a live run's nodes.

    Taken at once, without stopping them: a node whose handlers are all stuck answers
    too. Nodes sharing a process show the same threads. The frames of topo and Python
    above the program's first are counted, not shown, and threads with none of the
    program's frames are named on one line (--all shows them)."""
    info = pick_run(run, log_dir)
    require_live(info, "no stacks to show")
    asked = {"op": "stacks", "nodes": list(nodes or []), "all": everything}
    answer = ask_launcher(info, asked, STACKS_TIMEOUT_S)
    if not answer.get("ok"):
        say(f"error: {answer.get('error')}", "red")
        raise typer.Exit(1)
    for node, text in dict(answer.get("stacks") or {}).items():
        say(f"── {node} ──", "bold")
        print(str(text).rstrip(), end="\n\n", flush=True)
