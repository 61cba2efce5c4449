"""What ``topo run`` shows while a program runs.

* ``LinesView``: ``node-id | line`` coloured prefixed log lines plus status
  lines (like ``docker compose up``), for pipes and CI logs; a node's key metric
  figures at most once every ``METRICS_EVERY_S`` seconds.
* ``TableView``: a rich live table (node, executable, state, pid, restarts,
  uptime, key metric figures, last log line) when stdout is a terminal; a node whose
  progress stopped shows ``running · stalled M:SS``.
"""

from __future__ import annotations

import time
import zlib
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from topo.backends.base import Event
from topo.supervisor.launcher import Launcher
from topo.supervisor.metrics_store import STAMPS, rank_keys

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


METRICS_EVERY_S = 10.0  # LinesView: one metrics line per node at most this often
_SUFFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def format_number(value: float) -> str:
    """A figure in 3-4 significant digits, large ones with k/M/G/T: 187.3, 2.1k, 12.5M."""
    if isinstance(value, int) and abs(value) < 1000:
        return str(value)
    size = abs(value)
    for scale, suffix in _SUFFIXES:
        if size >= scale * 0.9995:  # 999.96 rounds to 1k, not 1e+03
            text = f"{value / scale:.3g}"
            return f"{text}{suffix}"
    return f"{value:.4g}"


def key_figures(values: dict[str, Any], limit: int = 3) -> str:
    """A node's latest figures in a few words, key figures first (return, reward, loss,
    steps per second, steps): ``return 187.3 · steps/s 2.1k``."""
    keys = rank_keys([k for k in values if k not in STAMPS])
    numbers = [k for k in keys if _is_number(values[k])]
    shown = [*numbers, *(k for k in keys if k not in numbers)][:limit]
    parts = []
    for key in shown:
        value = values[key]
        text = format_number(value) if _is_number(value) else str(value)[:16]
        parts.append(f"{key.replace('_per_s', '/s')} {text}")
    return " · ".join(parts)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


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
    if k == "stalled":  # a stall begins (stalled_s >= 0) or ends
        if event.data.get("stalled_s", 0) >= 0:
            return Text(f"⚠ {event.node} stalled: {event.message}", style="bold yellow")
        return Text(f"✓ {event.node} {event.message}", style="green")
    if k == "stopping":
        return Text(
            f"■ stopping: {event.message} (grace {launcher.grace_s:g}s; press Ctrl-C "
            "again to kill)",
            style="bold",
        )
    if k == "killed":
        return Text(f"✗ killed {event.executable} (pid {event.pid})", style="red")
    if k == "busy":  # every handler thread of a node stuck (stacks: its log, status.json)
        if event.data.get("busy"):
            return Text(f"⚠ {event.message} (stacks in its log)", style="bold yellow")
        return Text(f"✓ {event.message}", style="green")
    return None


def _where(pid: int | None, host: str | None) -> str:
    """The pid column: ``pid``, or ``pid@host`` for a backend that spans hosts."""
    text = str(pid or "")
    return f"{text}@{host}" if host else text


class LinesView:
    """Prefixed coloured log lines and status lines."""

    def __init__(self, launcher: Launcher, console: Console, logs: bool = True) -> None:
        self.launcher = launcher
        self.console = console
        self.logs = logs
        self.width = min(32, max((len(self._label(n)) for n in launcher.nodes), default=4))
        self._shown: dict[str, float] = {}  # node -> when its figures were last printed

    def __call__(self, event: Event) -> None:
        if event.kind == "metrics":
            self._metrics(event)
            return
        if event.kind == "log":
            if self.logs and event.node is not None:
                label = self._label(event.node)
                prefix = Text(f"{label:<{self.width}} | ", style=colour(event.node))
                self.console.print(prefix + Text(event.message), soft_wrap=True, highlight=False)
            return
        line = status_line(event, self.launcher)
        if line is not None:
            self.console.print(
                Text(f"{'topo':<{self.width}} | ", style="bold") + line,
                soft_wrap=True,
                highlight=False,
            )

    def _label(self, node: str) -> str:
        """``node``, or ``host/node`` when the backend spans hosts."""
        status = self.launcher.nodes.get(node)
        host = self.launcher.backend.location(status.exe if status else node)
        return f"{host}/{node}" if host else node

    def _metrics(self, event: Event) -> None:
        node = event.node
        if not self.logs or node is None or node not in self.launcher.nodes:
            return
        now = time.monotonic()
        if now - self._shown.get(node, -METRICS_EVERY_S) < METRICS_EVERY_S:
            return
        figures = key_figures(self.launcher.nodes[node].metrics, limit=6)
        if figures:
            self._shown[node] = now
            prefix = Text(f"{self._label(node):<{self.width}} | ", style=colour(node))
            line = prefix + Text(f"metrics: {figures}", style="dim")
            self.console.print(line, soft_wrap=True, highlight=False)

    def close(self) -> None:
        """Nothing to tear down."""


class TableView:
    """A rich live table of every node, refreshed a few times a second."""

    def __init__(self, launcher: Launcher, console: Console, start: bool = True) -> None:
        self.launcher = launcher
        self.console = console
        self.live = Live(
            console=console, refresh_per_second=4, transient=False, get_renderable=self.render
        )
        if start:  # else only ``render`` is used (``topo status``)
            self.live.start()

    def render(self) -> Table:
        """The table as of now."""
        la = self.launcher
        table = Table(
            title=Text(f"{la.program.name} — {la.backend.name}"),
            caption=Text(str(la.run_dir)),
            expand=False,
        )
        rows = list(la.nodes.values())
        with_metrics = any(st.metrics for st in rows)
        columns = ["node", "executable", "state", "pid", "restarts", "uptime"]
        columns += ["metrics"] if with_metrics else []
        for name in [*columns, "last log line"]:
            table.add_column(
                name,
                no_wrap=True,
                overflow="ellipsis",
                max_width={"last log line": 60, "metrics": 48}.get(name),
            )
        height = max(self.console.size.height - 8, 5)
        for st in rows[:height]:
            state = st.state
            if state == "starting" and st.started is not None:
                state = f"starting {_uptime(st.started)}"  # a node stuck starting shows it
            if st.stalled_s is not None:
                state = f"{state} · stalled {_uptime(time.time() - st.stalled_s)}"
            table.add_row(
                Text(st.id, style=colour(st.id)),
                Text(st.exe),
                Text(state, style="bold yellow" if st.stalled_s else STATE_STYLE.get(st.state, "")),
                _where(st.pid, la.backend.location(st.exe)),
                str(st.restarts or ""),
                _uptime(st.started) if st.state == "running" else "",
                *([escape(key_figures(st.metrics))] if with_metrics else []),
                escape(st.last_line[:200]),
            )
        if len(rows) > height:
            table.add_row(f"… {len(rows) - height} more", *[""] * len(columns))
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
