"""The live table's columns at a terminal's width.

The node, state and restarts columns always stay. Each column has a natural width (its
widest cell or header) and the least it may take: the last line 16 cells, the metrics
the first figure with its short name, every other column its natural width. When the
least widths do not fit, executable, pid, uptime, the last line and the metrics are
dropped in that order, then state and node shrink. The room left goes to the metrics
until every figure shows with its short name, then to the last line until it is whole,
then to the metrics' full names, and the rest to the last line: on a wide terminal
nothing is cut. With no width (a pipe: whole rows) every column takes its natural width.
"""

from __future__ import annotations

COLUMNS = ("node", "executable", "state", "pid", "restarts", "uptime", "metrics", "last log line")
KEPT = ("node", "state", "restarts")
LAST = "last log line"
METRICS = "metrics"
SHRINK_TO = 16  # the narrowest the last line gets before it is dropped
DROP_ORDER = ("executable", "pid", "uptime", LAST, METRICS)
KEPT_LEAST = {"state": 12, "node": 10}  # kept columns shrink to this at the very least
GAP = 3  # characters between two columns (padding and divider)


def total_width(widths: dict[str, int]) -> int:
    """The table's width with these columns."""
    return sum(widths.values()) + GAP * max(len(widths) - 1, 0)


def layout(
    wants: dict[str, int],
    width: int | None,
    least: dict[str, int] | None = None,
    enough: dict[str, int] | None = None,
) -> dict[str, int]:
    """Column -> width, in display order, for a terminal ``width`` wide (None: no limit).
    ``wants`` is each column's natural width; columns not in it are not shown (e.g.
    metrics when no node has any). ``least`` may say how narrow the metrics column may
    get (default: ``SHRINK_TO``), ``enough`` how wide it is served before the last line
    (default: its natural width)."""
    natural = {c: max(wants[c], 1) for c in COLUMNS if c in wants}
    if width is None:
        return natural
    floor = dict(natural)
    if LAST in floor:
        floor[LAST] = min(floor[LAST], SHRINK_TO)
    if METRICS in floor:
        floor[METRICS] = min(floor[METRICS], max((least or {}).get(METRICS, SHRINK_TO), 1))
    for column in DROP_ORDER:
        if total_width(floor) <= width:
            break
        floor.pop(column, None)
    over = total_width(floor) - width
    for column in ("state", "node"):
        if column in floor and over > 0:
            smallest = min(floor[column], KEPT_LEAST[column])
            shrunk = max(smallest, floor[column] - over)
            over -= floor[column] - shrunk
            floor[column] = shrunk
    room = width - total_width(floor)
    first = min((enough or {}).get(METRICS, natural.get(METRICS, 0)), natural.get(METRICS, 0))
    for column, target in ((METRICS, first), (LAST, natural.get(LAST, 0))):
        if column in floor and room > 0:
            more = min(room, max(target - floor[column], 0))
            floor[column] += more
            room -= more
    if METRICS in floor and room > 0:
        more = min(room, natural[METRICS] - floor[METRICS])
        floor[METRICS] += more
        room -= more
    if LAST in floor and room > 0:
        floor[LAST] += room  # the rest of the line
    return floor
