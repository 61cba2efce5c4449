"""``topo debug RUN [NODE]``: a pdb session on a node stopped at ``breakpoint()``, over
the run's control channel and the node's state door (``topo.runtime.debugger``): no port
is opened for it. Without NODE: the node at a breakpoint, or a pick among several.
``continue`` lets the node go on and ends the command; Ctrl-D or Ctrl-C detaches and
leaves the node stopped, saying so."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from topo.cli.app import app
from topo.cli.operate import LiveRunArgument, LogDirOption, pick_run, require_live, say

if TYPE_CHECKING:
    from topo.runs.probe import RunInfo

READ_WAIT_S = 2.0  # a read waits this long for pdb's prompt, then asks again
ASK_TIMEOUT_S = 40.0


def _stopped(info: RunInfo) -> list[tuple[str, str]]:
    """(node, file:line) of the run's nodes at a breakpoint, as ``status.json`` says."""
    nodes = info.status.get("nodes") or []
    return [(str(n["id"]), str(n["breakpoint"])) for n in nodes if n.get("breakpoint")]


def _pick(info: RunInfo, stopped: list[tuple[str, str]]) -> str:
    """The node to debug when none is named: the one stopped, or one picked in turn."""
    if not stopped:
        say(f"error: no node of run {info.id} is at a breakpoint", "red")
        raise typer.Exit(1)
    if len(stopped) == 1:
        return stopped[0][0]
    listing = "\n".join(f"  {i}. {n} at {at}" for i, (n, at) in enumerate(stopped, 1))
    if not sys.stdin.isatty():
        say(f"error: {len(stopped)} nodes are at a breakpoint; name one:\n{listing}", "red")
        raise typer.Exit(1)
    say(f"{len(stopped)} nodes are at a breakpoint:\n{listing}")
    while True:
        try:
            given = input(f"which one? [1-{len(stopped)}] ").strip()
        except (EOFError, KeyboardInterrupt):
            raise typer.Exit(1) from None
        if given.isdigit() and 1 <= int(given) <= len(stopped):
            return stopped[int(given) - 1][0]
        if given in {n for n, _ in stopped}:
            return given


@app.command("debug")
def debug(
    run: LiveRunArgument,
    node: Annotated[
        str | None,
        typer.Argument(help="The node (default: the one at a breakpoint).", show_default=False),
    ] = None,
    log_dir: LogDirOption = Path("runs"),
) -> None:
    """Open a pdb session on a node stopped at breakpoint().

    Over the run's own authenticated channel. `continue` lets the node go on; Ctrl-D
    detaches and leaves it stopped. Several nodes at breakpoints are listed and one is
    picked; run the command again for the next."""
    from topo.runs.control import ControlError, request
    from topo.runs.resolve import resolve

    info = pick_run(run, log_dir)
    require_live(info, "no node to debug")
    control = str(info.status.get("control") or "")
    name = node or _pick(info, _stopped(info))

    def ask(action: str, text: str = "", again: bool = False) -> dict[str, Any]:
        asked = {"op": "debug", "node": name, "action": action, "text": text, "again": again}
        try:
            answer = request(info.run_dir, control, {**asked, "wait_s": READ_WAIT_S}, ASK_TIMEOUT_S)
        except ControlError as exc:
            if not resolve(str(info.run_dir), log_dir).live:  # it went on and the run ended
                return {"ok": True, "active": False, "output": "", "ended": True}
            say(f"error: {exc}", "red")
            raise typer.Exit(1) from None
        if not answer.get("ok"):
            say(f"error: {answer.get('error')}", "red")
            raise typer.Exit(1)
        return answer

    first = ask("read", again=True)  # (another client may have taken pdb's prompt)
    if not first.get("active"):
        where = f"topo stacks {info.id} {name} shows where it is"
        say(f"error: node {name} is not at a breakpoint ({where})", "red")
        raise typer.Exit(1)
    say(f"── {name} at breakpoint ({first.get('at')}) · continue: it goes on · Ctrl-D: detach ──")
    answer = first
    while True:
        output = str(answer.get("output") or "")
        print(output, end="", flush=True)
        if not answer.get("active"):
            say(f"{name} goes on" + ("; the run has ended" if answer.get("ended") else ""))
            return
        if not output.endswith("(Pdb) "):
            answer = ask("read")
            continue
        try:
            line = input()
        except (EOFError, KeyboardInterrupt):
            print()
            say(
                f"detached: {name} stays at its breakpoint ({answer.get('at')}); "
                f"topo debug {info.id} {name} goes back to it"
            )
            return
        ask("write", line)
        answer = ask("read")
