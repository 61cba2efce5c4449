"""What ``topo run`` shows while a program runs.

* ``LinesView``: ``node-id | line`` coloured prefixed log lines plus status
  lines (like ``docker compose up``), for pipes and CI logs.
* ``TableView``: a rich live table (node, executable, state, pid, restarts,
  uptime, last log line) when stdout is a terminal.
"""

from __future__ import annotations

import time
import zlib

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from topo.backends.base import Event
from topo.backends.launcher import Launcher

PALETTE = (
    "cyan",
    "green",
    "yellow",
    "blue",
    "magenta",
    "bright_cyan",
    "bright_green",
    "bright_yellow",
    "bright_blue",
    "bright_magenta",
)
STATE_STYLE = {
    "running": "green",
    "finished": "blue",
    "failed": "bold red",
    "restarting": "yellow",
    "starting": "dim",
    "pending": "dim",
    "stopped": "dim",
    "killed": "red",
}


def colour(label: str) -> str:
    """A stable colour for a node id."""
    return PALETTE[zlib.crc32(label.encode()) % len(PALETTE)]


def _uptime(started: float | None) -> str:
    if started is None:
        return ""
    s = int(time.time() - started)
    if s >= 3600:
        return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"


def status_line(event: Event, launcher: Launcher) -> Text | None:
    """The status line for an event, or None when it is not shown."""
    k = event.kind
    if k == "ready" and event.node is None:
        return Text(
            f"{event.message} (backend {launcher.backend.name}, logs in {launcher.run_dir})",
            style="green",
        )
    if k == "failed" and event.message:
        return Text(f"✗ {event.message}", style="bold red")
    if k == "restarting":
        return Text(f"↻ {event.node}: {event.message}", style="yellow")
    if k == "stopping":
        return Text(
            f"■ stopping: {event.message} (grace {launcher.grace_s:g}s; press Ctrl-C "
            "again to kill)",
            style="bold",
        )
    if k == "killed":
        return Text(f"✗ killed {event.executable} (pid {event.pid})", style="red")
    return None


class LinesView:
    """Prefixed coloured log lines and status lines."""

    def __init__(self, launcher: Launcher, console: Console, logs: bool = True) -> None:
        self.launcher = launcher
        self.console = console
        self.logs = logs
        self.width = min(24, max((len(n) for n in launcher.nodes), default=4))

    def __call__(self, event: Event) -> None:
        if event.kind == "log":
            if self.logs and event.node is not None:
                prefix = Text(f"{event.node:<{self.width}} | ", style=colour(event.node))
                self.console.print(prefix + Text(event.message), soft_wrap=True, highlight=False)
            return
        line = status_line(event, self.launcher)
        if line is not None:
            self.console.print(
                Text(f"{'topo':<{self.width}} | ", style="bold") + line,
                soft_wrap=True,
                highlight=False,
            )

    def close(self) -> None:
        """Nothing to tear down."""


class TableView:
    """A rich live table of every node, refreshed a few times a second."""

    def __init__(self, launcher: Launcher, console: Console) -> None:
        self.launcher = launcher
        self.console = console
        self.live = Live(
            console=console, refresh_per_second=4, transient=False, get_renderable=self.render
        )
        self.live.start()

    def render(self) -> Table:
        """The table as of now."""
        la = self.launcher
        table = Table(
            title=Text(f"{la.program.name} — {la.backend.name}"),
            caption=Text(str(la.run_dir)),
            expand=False,
        )
        for name in ("node", "executable", "state", "pid", "restarts", "uptime", "last log line"):
            table.add_column(
                name,
                no_wrap=True,
                overflow="ellipsis",
                max_width=60 if name == "last log line" else None,
            )
        height = max(self.console.size.height - 8, 5)
        rows = list(la.nodes.values())
        for st in rows[:height]:
            state = st.state
            if state == "starting" and st.started is not None:
                state = f"starting {_uptime(st.started)}"  # a node stuck starting shows it
            table.add_row(
                Text(st.id, style=colour(st.id)),
                Text(st.exe),
                Text(state, style=STATE_STYLE.get(st.state, "")),
                str(st.pid or ""),
                str(st.restarts or ""),
                _uptime(st.started) if st.state == "running" else "",
                escape(st.last_line[:200]),
            )
        if len(rows) > height:
            table.add_row(f"… {len(rows) - height} more", "", "", "", "", "", "")
        return table

    def __call__(self, event: Event) -> None:
        if event.kind == "log":
            return
        line = status_line(event, self.launcher)
        if line is not None:
            self.live.console.print(line, highlight=False)

    def close(self) -> None:
        """Print the final table and stop refreshing."""
        self.live.stop()
