"""The rows of the live table: one per node, or one per group when the nodes do not fit.

A node's state cell says what it is doing: ``starting 0:05 · waiting for replay``,
``running · stalled 1:10``, ``stopping 0:03/0:05`` (elapsed/grace while the run
stops). When the terminal is too short, every group of several nodes collapses into
one row, ``actor ×64`` ``63 running, 1 restarting``, after the rows of the nodes that
need attention (failed, restarting, stalled, killed), which come first.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

from topo.cli.cells import clean
from topo.cli.view_figures import Figure, fit, format_number
from topo.cli.view_source import RunSource
from topo.runs.node_status import LimiterProgress, NodeStatus

STATE_STYLE = {
    "running": "green",
    "finished": "blue",
    "failed": "bold red",
    "restarting": "yellow",
    "starting": "dim",
    "pending": "dim",
    "stopped": "dim",
    "killed": "red",
    "stopping": "bold",
    "lost": "red",  # a node of a lost run (topo.runs.probe)
    "orphaned": "bold red",  # ... whose process still runs, unwatched
}
ATTENTION = ("failed", "restarting", "killed")  # listed first, also inside a collapsed group
STILL_UP = ("running", "starting")  # what a stop is still waiting for


def clock(seconds: float) -> str:
    """``M:SS``, or ``H:MM:SS`` from an hour on."""
    s = max(int(seconds), 0)
    if s >= 3600:
        return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"


def state_cell(st: NodeStatus, source: RunSource, now: float) -> tuple[str, str]:
    """(text, style) of a node's state cell."""
    since = source.stopping_since
    if since is not None and st.state in STILL_UP:
        return f"stopping {clock(now - since)}/{clock(source.grace_s)}", STATE_STYLE["stopping"]
    text = st.state
    if st.state == "starting" and st.started is not None:
        text = f"starting {clock(now - st.started)}"  # a node stuck starting shows it
        if st.phase:
            text += f" · {st.phase}"
    if st.breakpoint and st.state == "running":
        return f"at breakpoint ({st.breakpoint})", "bold magenta"
    if st.stalled_s is not None:
        text = f"{text} · stalled {clock(st.stalled_s)}"
        return text, "bold yellow"
    return text, STATE_STYLE.get(st.state, "")


def needs_attention(st: NodeStatus) -> bool:
    """A node listed on its own even when its group is collapsed."""
    return st.state in ATTENTION or bool(st.stalled_s) or bool(st.breakpoint)


@dataclass(frozen=True)
class Row:
    """One line of the table, as text per column (``key``: whose colour the node cell has)."""

    key: str
    node: str
    executable: str = ""
    state: str = ""
    state_style: str = ""
    pid: str = ""
    restarts: str = ""
    uptime: str = ""
    figures: tuple[Figure, ...] = ()
    last: str = ""

    def cell(self, column: str) -> str:
        """The text of ``column`` (a name of ``view_layout.COLUMNS``) at its natural width
        (the metrics: every figure with its full name)."""
        return {
            "node": self.node,
            "executable": self.executable,
            "state": self.state,
            "pid": self.pid,
            "restarts": self.restarts,
            "uptime": self.uptime,
            "metrics": fit(list(self.figures), None),
            "last log line": self.last,
        }[column]


def node_row(st: NodeStatus, source: RunSource, now: float, figures: list[Figure]) -> Row:
    """The row of one node (``figures``: its key metric figures)."""
    text, style = state_cell(st, source, now)
    host = source.location(st.exe)
    device = source.device(st.exe)
    pid = str(st.pid or "")
    pid = f"{pid}@{host}" if host else pid
    pid = f"{pid} {device}" if device else pid
    running = st.state == "running" and st.started is not None
    return Row(
        key=st.id,
        node=st.id,
        executable=st.exe,
        state=text,
        state_style=style,
        pid=pid,
        restarts=str(st.restarts or ""),
        uptime=clock(now - st.started) if running and st.started is not None else "",
        figures=tuple(figures),
        last=clean(st.last_line[:500]),
    )


def group_row(group: str, members: list[NodeStatus], source: RunSource, now: float) -> Row:
    """One row for a whole group: ``actor ×64``, ``63 running, 1 restarting``."""
    states = Counter(state_cell(st, source, now)[0].split(" ")[0] for st in members)
    stalled = sum(1 for st in members if st.stalled_s)
    parts = [f"{n} {state}" for state, n in states.most_common()]
    parts += [f"{stalled} stalled"] if stalled else []
    exes = {st.exe for st in members}
    restarts = sum(st.restarts for st in members)
    worst = "bold red" if states.get("failed") else "yellow" if len(states) > 1 else ""
    only = next(iter(states)) if len(states) == 1 else ""
    return Row(
        key=group,
        node=f"{group} ×{len(members)}",
        executable=next(iter(exes)) if len(exes) == 1 else f"{len(exes)} executables",
        state=", ".join(parts),
        state_style=worst or STATE_STYLE.get(only, ""),
        restarts=str(restarts or ""),
    )


def table_rows(
    source: RunSource,
    height: int | None,
    figures: dict[str, list[Figure]],
    now: float | None = None,
) -> list[Row]:
    """The rows that fit ``height`` lines (None: no limit): every node, or collapsed
    groups (see the module docstring) and, if even those do not fit, a last ``… N more``
    row."""
    now = time.time() if now is None else now
    nodes = list(source.nodes.values())
    if height is None or len(nodes) <= max(height, 2):
        return [node_row(st, source, now, figures.get(st.id, [])) for st in nodes]
    height = max(height, 2)
    groups: dict[str, list[NodeStatus]] = {}
    for st in nodes:
        groups.setdefault(st.id.split("/")[0], []).append(st)  # (a node topo apply removes too)
    first = [
        node_row(st, source, now, figures.get(st.id, [])) for st in nodes if needs_attention(st)
    ]
    rest: list[Row] = []
    for name, members in groups.items():
        if len(members) == 1:
            if not needs_attention(members[0]):
                rest.append(node_row(members[0], source, now, figures.get(members[0].id, [])))
        else:
            rest.append(group_row(name, members, source, now))
    rows = first + rest
    if len(rows) > height:
        hidden = len(rows) - (height - 1)
        rows = [*rows[: height - 1], Row(key="", node=f"… {hidden} more")]
    return rows


def limiter_text(limiter: LimiterProgress) -> str:
    """``actor_steps 47.1k/50k · ~20 s``."""
    text = f"{limiter.key} {format_number(limiter.steps)}/{format_number(limiter.limit)}"
    if limiter.eta_s is not None and limiter.steps <= limiter.limit:
        eta = limiter.eta_s
        text += f" · ~{eta:.0f} s" if eta < 90 else f" · ~{clock(eta)}"
    return text
