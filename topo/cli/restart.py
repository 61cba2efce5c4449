"""``topo restart RUN NODE``: restart one node of a live run from any shell (its process
is killed and started again, whatever its restart policy), over the run's control
channel as ``topo stop`` is. Each node of the process takes its live state along
(``save()`` just before the end, ``restore()`` at the next start), as ``topo apply``
hands it over; ``--fresh`` starts them with none. A node with no live state (it is
down) restores the newest snapshot holding its state, and the command says which."""

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

RESTART_TIMEOUT_S = 330.0  # beyond the launcher's deadline for one node's save()


@app.command("restart")
def restart(
    run: LiveRunArgument,
    node: Annotated[str, typer.Argument(help="The node to restart.", show_default=False)],
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh", help="Start with no state (default: each node keeps the state it has)."
        ),
    ] = False,
    log_dir: LogDirOption = Path("runs"),
) -> None:
    """Restart one node of a live run now.

    Its process is killed and started again (with the nodes that share it)."""
    info = pick_run(run, log_dir)
    require_live(info, "nothing to restart")
    message = {"op": "restart", "node": node, "by": "topo restart", "fresh": fresh}
    # (a node's live state is saved before the answer: a replay's can take a while)
    answer = ask_launcher(info, message, RESTART_TIMEOUT_S)
    if not answer.get("ok"):
        say(f"error: {answer.get('error')}", "red")
        raise typer.Exit(1)
    nodes = [str(n) for n in answer.get("nodes") or [node]]
    others = [n for n in nodes if n != node]
    along = f" (with {', '.join(others)}, which share its process)" if others else ""
    say(f"↻ restarting {node} of run {info.id}{along}", "bold")
    for said in str(answer.get("message") or "").split("; "):
        if said:
            say(f"  {said}")
