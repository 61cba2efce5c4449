"""The live table's columns at a terminal's width.

The node, state and restarts columns always stay. When the columns do not fit, the
metrics and last-line columns shrink first (to ``SHRINK_TO``), then executable, pid,
uptime, metrics and last line are dropped in that order, then state and node shrink;
whatever width is left goes to the last line, so it is never cut on a wide terminal.
"""

from __future__ import annotations

COLUMNS = ("node", "executable", "state", "pid", "restarts", "uptime", "metrics", "last log line")
KEPT = ("node", "state", "restarts")
LAST = "last log line"
SHRINK_FIRST = ("metrics", LAST)
SHRINK_TO = 16  # the narrowest a metrics or last-line column gets before it is dropped
DROP_ORDER = ("executable", "pid", "uptime", "metrics", LAST)
KEPT_LEAST = {"state": 12, "node": 10}  # kept columns shrink to this at the very least
GAP = 3  # characters between two columns (padding and divider)


def total_width(widths: dict[str, int]) -> int:
    """The table's width with these columns."""
    return sum(widths.values()) + GAP * max(len(widths) - 1, 0)


def layout(wants: dict[str, int], width: int) -> dict[str, int]:
    """Column -> width, in display order, for a terminal ``width`` wide; ``wants`` is
    each column's natural width (its widest cell or header); columns not in it are not
    shown (e.g. metrics when no node has any)."""
    widths = {c: max(wants[c], 1) for c in COLUMNS if c in wants}

    def over() -> int:
        return total_width(widths) - width

    for column in SHRINK_FIRST:
        if column in widths and over() > 0:
            widths[column] = max(min(widths[column], SHRINK_TO), widths[column] - over())
    for column in DROP_ORDER:
        if over() <= 0:
            break
        widths.pop(column, None)
    for column in ("state", "node"):
        if column in widths and over() > 0:
            least = min(widths[column], KEPT_LEAST[column])
            widths[column] = max(least, widths[column] - over())
    if LAST in widths and over() < 0:
        widths[LAST] -= over()  # the rest of the line
    return widths
