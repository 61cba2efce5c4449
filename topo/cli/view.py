"""What ``topo run`` shows while a program runs.

* ``LinesView``: ``node-id | line`` coloured prefixed log lines plus status
  lines (like ``docker compose up``), for pipes and CI logs; a node's key metric
  figures at most once every ``METRICS_EVERY_S`` seconds.
* ``TableView``: a rich live table (node, executable, state, pid, restarts,
  uptime, key metric figures, last log line) when stdout is a terminal, fitted to its
  width (``view_layout``, ``view_table``) and height (groups collapse: ``view_rows``);
  the title says when the run is stopping and how far a steps limiter got. What the
  nodes print once the stop began (an evaluator's final return), and the last line of
  the node whose end stopped the program, are printed whole under the final table.

Both read the run only through ``RunSource``: the ``RunState`` of ``topo run``'s launcher, or what
``topo attach`` reads back from a run's ``status.json``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.control import strip_control_codes
from rich.live import Live
from rich.text import Text

from topo.cli.cells import clean
from topo.cli.colours import colour
from topo.cli.view_figures import LINE_FIGURES, format_number, key_figures
from topo.cli.view_rows import STATE_STYLE
from topo.cli.view_source import RunSource
from topo.cli.view_table import CHROME_LINES, Shape, table_lines
from topo.rundir.layout import LOGS_DIR

if TYPE_CHECKING:
    from topo.backends.base import Event

__all__ = ["STATE_STYLE", "LinesView", "RunSource", "TableView", "format_number", "key_figures"]

_SLOT = "\ue000"  # where a node's text goes in its rendered line (a private-use character)
METRICS_EVERY_S = 10.0  # LinesView: one metrics line per node at most this often
CLOSING_LINES = 20  # TableView: the last lines the nodes printed during the stop, at most


KILL_HINT = "press Ctrl-C again to kill"


def status_line(event: Event, source: RunSource, kill_hint: str = KILL_HINT) -> Text | None:
    """The status line for an event, or None when it is not shown."""
    k = event.kind
    if k == "ready" and event.node is None:
        return Text(
            f"{event.message} (backend {source.backend_name}, logs in {source.run_dir})",
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
            f"■ stopping: {event.message} (grace {source.grace_s:g}s; {kill_hint})",
            style="bold",
        )
    if k == "killed":
        return Text(f"✗ killed {event.executable} (pid {event.pid})", style="red")
    if k == "busy":  # every handler thread of a node stuck (stacks: its log, status.json)
        if event.data.get("busy"):
            return Text(f"⚠ {event.message} (stacks in its log)", style="bold yellow")
        return Text(f"✓ {event.message}", style="green")
    if k == "snapshot":  # taken (ok) or failed; the run goes on either way
        style = "cyan" if event.data.get("ok") else "bold yellow"
        return Text(f"{'◆' if event.data.get('ok') else '⚠'} {event.message}", style=style)
    return None


class LinesView:
    """Prefixed coloured log lines and status lines."""

    def __init__(
        self, source: RunSource, console: Console, logs: bool = True, kill_hint: str = KILL_HINT
    ) -> None:
        self.source = source
        self.console = console
        self.logs = logs
        self.kill_hint = kill_hint  # how to kill during the grace (detached: topo stop --kill)
        self.width = min(32, max((len(self._label(n)) for n in list(source.nodes)), default=4))
        self._shown: dict[str, float] = {}  # node -> when its figures were last printed
        self._frames: dict[tuple[str, str], str] = {}  # (node, label) -> a line, rendered
        self._stopping = False

    def __call__(self, event: Event) -> None:
        if event.kind == "metrics":
            self._metrics(event)
            return
        if event.kind == "stopping":
            self._stopping = True
        if event.kind == "log":
            # Without logs (a detached launcher's own log), the lines of the stop still
            # show: what the program says at its end (topo attach prints them).
            if (self.logs or self._stopping) and event.node is not None:
                self._log(event.node, event.message)
            return
        line = status_line(event, self.source, self.kill_hint)
        if line is not None:
            self.console.print(
                Text(f"{'topo':<{self.width}} | ", style="bold") + line,
                soft_wrap=True,
                highlight=False,
            )

    def _log(self, node: str, message: str) -> None:
        """One line a node printed, in the node's colour after its prefix. The line's
        frame is rendered once per node and the text put in it as it is (control codes
        taken out, as rich does): rendering every line with rich costs ~0.1 ms, all of
        the launcher's time when a node prints thousands of lines a second."""
        label = self._label(node)
        if "\t" in message or _SLOT in message:  # tabs: rich expands them to tab stops
            line = Text(f"{label:<{self.width}} | {message}", style=colour(node))
            self.console.print(line, soft_wrap=True, highlight=False)
            return
        frame = self._frames.get((node, label))
        if frame is None:
            with self.console.capture() as captured:
                line = Text(f"{label:<{self.width}} | {_SLOT}", style=colour(node))
                self.console.print(line, soft_wrap=True, highlight=False)
            frame = self._frames[(node, label)] = captured.get()
        out = self.console.file
        out.write(frame.replace(_SLOT, strip_control_codes(message), 1))
        out.flush()

    def _label(self, node: str) -> str:
        """``node``, or ``host/node`` when the backend spans hosts."""
        status = self.source.nodes.get(node)
        host = self.source.location(status.exe if status else node)
        return f"{host}/{node}" if host else node

    def _metrics(self, event: Event) -> None:
        node = event.node
        if not self.logs or node is None or node not in self.source.nodes:
            return
        now = time.monotonic()
        if now - self._shown.get(node, -METRICS_EVERY_S) < METRICS_EVERY_S:
            return
        figures = key_figures(self.source.nodes[node].metrics, limit=LINE_FIGURES)
        if figures:
            self._shown[node] = now
            prefix = Text(f"{self._label(node):<{self.width}} | ", style=colour(node))
            line = prefix + Text(f"metrics: {figures}", style="dim")
            self.console.print(line, soft_wrap=True, highlight=False)

    def close(self) -> None:
        """Nothing to tear down."""


class TableView:
    """A rich live table of every node, refreshed a few times a second."""

    def __init__(self, source: RunSource, console: Console, live: bool = True) -> None:
        self.source = source
        self.console = console
        self.closing: list[tuple[str, str]] = []  # (node, line) printed since the stop began
        self._stopping = False
        self.live = Live(
            console=console, refresh_per_second=4, transient=False, get_renderable=self.render
        )
        if live:
            self.live.start()

    def render(self) -> Group:
        """The table as of now, fitted to the terminal, and the run directory under it."""
        width, height = self.console.size
        shape = Shape(width, max(height - CHROME_LINES, 5))
        lines = table_lines(self.source, shape)
        return Group(*(Text.assemble(*line, no_wrap=True, overflow="crop") for line in lines))

    def __call__(self, event: Event) -> None:
        if event.kind == "log":
            if self._stopping and event.node is not None:
                self.closing.append((event.node, event.message))
            return
        if event.kind == "stopping":
            self._stopping = True
            status = self.source.nodes.get(event.node or "")
            if status is not None and status.last_line:  # what the node ended with
                self.closing.append((status.id, status.last_line))
        line = status_line(event, self.source)
        if line is not None:
            self.say(line)

    def say(self, line: Text) -> None:
        """A line above the table (a line written beside it would be drawn over)."""
        # wrapped by rich, not the terminal: the live table's redraw counts its lines
        self.live.console.print(line, highlight=False, soft_wrap=False)

    def close(self) -> None:
        """Print the final table and stop refreshing; then the lines the nodes printed
        while the program stopped, whole (the table's last-line column cuts them)."""
        self.live.stop()
        shown = self.closing[-CLOSING_LINES:]
        if not shown:
            return
        width = min(32, max(len(node) for node, _ in shown))
        left = len(self.closing) - len(shown)
        if left:
            self.console.print(
                Text(f"… {left} earlier lines in {self.source.run_dir / LOGS_DIR}", style="dim"),
                soft_wrap=True,
            )
        for node, line in shown:
            prefix = Text(f"{node:<{width}} | ", style=colour(node))
            self.console.print(prefix + Text(clean(line)), soft_wrap=True, highlight=False)
