"""``topo attach``: the live view of a run started elsewhere (``topo run -d``); Ctrl-C
detaches and leaves the run going, ``topo stop`` stops it."""

from __future__ import annotations

import sys
from pathlib import Path

from topo.cli.app import app
from topo.cli.interrupts import Interrupts
from topo.cli.operate import LogDirOption, RunArgument, pick_run, say, state_text
from topo.runs.probe import RunInfo


@app.command("attach")
def attach(run: RunArgument = None, log_dir: LogDirOption = Path("runs")) -> None:
    """Show a run's live view; Ctrl-C detaches (the run goes on)."""
    from rich.console import Console
    from rich.text import Text

    from topo.cli.recorded import StatusSource
    from topo.cli.view import TableView
    from topo.rundir.layout import LAUNCHER_LOG

    info = pick_run(run, log_dir)
    source = StatusSource(info)
    console = Console(file=sys.stdout, highlight=False, soft_wrap=True, emoji=False)
    if not info.live:
        console.print(TableView(source, console, live=False).render())
        _outcome(info)
        sys.exit(_code(info))
    log = _Tail(info.run_dir / LAUNCHER_LOG)
    with Interrupts() as ctrl_c:
        view = TableView(source, console)
        try:
            while not ctrl_c.wait(0.25):
                for line in log.new_lines():  # status lines, and what nodes print at the stop
                    view.say(Text(line))
                if not source.refresh().live:
                    break
        finally:
            view.close()
    if ctrl_c.count:
        say(
            f"detached from run {info.id}; it goes on (topo attach {info.id} · "
            f"topo stop {info.id})",
            "bold",
        )
        sys.exit(0)
    for line in log.new_lines():
        console.print(Text(line), highlight=False)
    _outcome(source.info)
    sys.exit(_code(source.info))


class _Tail:
    """The status lines the detached launcher writes, from where they are now."""

    def __init__(self, path: Path) -> None:
        try:
            self._f = open(path, encoding="utf-8", errors="replace")
            self._f.seek(0, 2)
        except OSError:
            self._f = None  # type: ignore[assignment]
        self._partial = ""

    def new_lines(self) -> list[str]:
        if self._f is None:
            return []
        text = self._partial + self._f.read()
        *lines, self._partial = text.split("\n")
        return lines


def _code(info: RunInfo) -> int:
    if info.state == "ended":
        return info.exit_code if info.exit_code is not None else 1
    return 1


def _outcome(info: RunInfo) -> None:
    failure = info.status.get("failure")
    if info.state == "lost":
        say(f"✗ run {info.id} is lost: its launcher (pid {info.pid}) died", "red")
    elif failure:
        say(f"✗ {failure.get('message')}\n{failure.get('traceback', '')}".rstrip(), "red")
        say(f"exit 1 — logs in {info.run_dir}", "red")
    else:
        say(f"✓ run {info.id} {state_text(info)}: {info.status.get('stop_reason')}", "green")
